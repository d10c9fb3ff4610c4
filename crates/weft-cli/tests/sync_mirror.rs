//! Synchronous mirrors (`weft mirror create --sync`) through real mounts on separate server
//! processes: every write goes to both mirrors; kill -9 of the server of one mirror in the
//! middle of a loop of writes and fsyncs costs the program no error and no byte, the mirror
//! goes stale, and once its server is back the MDS resyncs it to equal bytes. A truncate
//! cuts both mirrors. A file without --sync keeps FLR's way (one mirror written, the other
//! stale).

mod common;
use common::*;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Both mirrors in sync, as `mirror_flags` shows them.
fn in_sync() -> Vec<(String, String)> {
    vec![("1".into(), "init".into()), ("2".into(), "init".into())]
}

const BLOCK: usize = 256 << 10;
const BLOCKS: usize = 48;

#[test]
fn synchronous_mirrors_lose_nothing_when_the_server_of_one_dies_mid_write_and_resync_when_it_returns() {
    let mut c = Cluster::multi_node(&weft_bin());
    let m = c.mount();

    // Without --sync: FLR's way, one mirror written, the other stale, no lcm_flags.
    let flr = m.join("flr");
    weft_ok(&["mirror", "create", "-N", "-o", "1", "-N", "-o", "3", p(&flr)]);
    std::fs::write(&flr, pattern(30, 0, 1 << 20)).unwrap();
    assert_eq!(mirror_flags(&flr), [("1".into(), "init".into()), ("2".into(), "init,stale".into())]);
    assert!(!weft_ok(&["getstripe", p(&flr)]).contains("lcm_flags"));

    // A pool set to sync mirrors does what --sync does, for new files with a mirror in it.
    let w = weft_bin().display().to_string();
    sh(
        &m,
        &format!(
            "{w} pool new weft.near && {w} pool add weft.near 1 && {w} pool new weft.far && {w} pool add weft.far 3"
        ),
    );
    sh(&m, &format!("{w} pool set weft.far --sync-mirrors on"));
    let listed = sh(&m, &format!("{w} pool list weft.far"));
    assert_eq!(listed.lines().collect::<Vec<_>>(), ["Pool: weft.far", "weft-OST0003_UUID", "sync_mirrors: on"]);
    let bad = sh_as(0, 0, &m, &format!("{w} pool set weft.far --sync-mirrors maybe"));
    let said = String::from_utf8_lossy(&bad.stderr).into_owned();
    assert!(!bad.status.success() && said.contains("--sync-mirrors") && said.contains("on, off"), "{said}");
    let pooled = m.join("pooled");
    weft_ok(&["mirror", "create", "-N", "-p", "near", "-N", "-p", "far", p(&pooled)]);
    assert!(weft_ok(&["getstripe", p(&pooled)]).contains("lcm_flags:         sync"));
    std::fs::write(&pooled, pattern(33, 0, 1 << 20)).unwrap();
    assert_eq!(mirror_flags(&pooled), in_sync(), "both mirrors took the write");
    sh(&m, &format!("{w} pool set weft.far --sync-mirrors off"));
    let after = m.join("pooled-after");
    weft_ok(&["mirror", "create", "-N", "-p", "near", "-N", "-p", "far", p(&after)]);
    assert!(!weft_ok(&["getstripe", p(&after)]).contains("lcm_flags"), "the setting is off again");

    // Mirror 1 on oss1's OST 0, mirror 2 on oss2's OST 2, written synchronously.
    let f = m.join("sync");
    weft_ok(&["mirror", "create", "--sync", "-N", "-o", "0", "-N", "-o", "2", p(&f)]);
    assert!(weft_ok(&["getstripe", p(&f)]).contains("lcm_flags:         sync"));
    // Both mirrors take every write: none goes stale, and they hold the same bytes.
    std::fs::write(&f, pattern(31, 0, 1 << 20)).unwrap();
    assert_eq!(mirror_flags(&f), in_sync());
    let out = weft(&["mirror", "verify", "-v", p(&f)]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() && text.contains("mirror 2 (in sync) has the data of mirror 1"), "{text}");
    // A truncate cuts both mirrors.
    std::fs::OpenOptions::new().write(true).open(&f).unwrap().set_len(300_000).unwrap();
    assert_eq!(mirror_flags(&f), in_sync());
    let out = weft(&["mirror", "verify", "-v", p(&f)]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() && text.contains("mirror 2 (in sync) has the data of mirror 1"), "{text}");
    assert_eq!(std::fs::read(c.mount().join("sync")).unwrap(), pattern(31, 0, 300_000));

    // A loop of writes, each fsynced (acknowledged on the OSTs); oss1 (mirror 1) killed
    // in the middle.
    let data = pattern(32, 0, BLOCK * BLOCKS);
    let killed_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let writer = {
        let (path, data, killed_at) = (f.clone(), data.clone(), killed_at.clone());
        std::thread::spawn(move || -> std::io::Result<Option<Duration>> {
            let file = std::fs::OpenOptions::new().write(true).truncate(true).open(&path)?;
            let mut first_ack_after_kill = None;
            for k in 0..BLOCKS {
                let offset = k * BLOCK;
                file.write_all_at(&data[offset..offset + BLOCK], offset as u64)?;
                file.sync_data()?;
                let killed = *killed_at.lock().unwrap();
                if let (Some(at), None) = (killed, first_ack_after_kill) {
                    first_ack_after_kill = Some(at.elapsed());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            drop(file);
            Ok(first_ack_after_kill)
        })
    };
    // Meanwhile a second mount stats the file again and again (its size is the objects',
    // the writer having it open): each answered, none waiting long on the dead mirror.
    let watcher = {
        let (path, killed) = (c.mount().join("sync"), killed_at.clone());
        std::thread::spawn(move || -> std::io::Result<Duration> {
            let mut longest = Duration::ZERO;
            let started = Instant::now();
            // Past the kill and the writer's pause after it.
            while started.elapsed() < Duration::from_secs(6) || killed.lock().unwrap().is_none() {
                let asked = Instant::now();
                std::fs::metadata(&path)?;
                longest = longest.max(asked.elapsed());
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(longest)
        })
    };
    std::thread::sleep(Duration::from_millis(400));
    c.kill9("oss1");
    *killed_at.lock().unwrap() = Some(Instant::now());
    let pause = writer.join().unwrap().unwrap_or_else(|e| panic!("the writer saw {e}\n{}", c.log_tails()));
    let longest_stat = watcher.join().unwrap().unwrap_or_else(|e| panic!("a stat saw {e}\n{}", c.log_tails()));
    println!("the longest stat of the file from another mount: {} ms", longest_stat.as_millis());
    assert!(longest_stat < Duration::from_secs(10), "{longest_stat:?}\n{}", c.log_tails());
    let pause = pause.expect("the writer acknowledged writes after the kill");
    println!("kill -9 of the server of mirror 1 to the next acknowledged write: {} ms", pause.as_millis());
    assert!(pause < Duration::from_secs(15), "{pause:?}\n{}", c.log_tails());

    // Every byte, from a mount with nothing cached; mirror 1 stale.
    let fresh = c.mount();
    assert!(std::fs::read(fresh.join("sync")).unwrap() == data, "bytes after the kill");
    assert_eq!(mirror_flags(&f), [("1".into(), "init,stale".into()), ("2".into(), "init".into())]);

    // oss1 back: the MDS resyncs mirror 1 by itself.
    c.restart("oss1");
    let started = Instant::now();
    while mirror_flags(&f) != in_sync() {
        assert!(started.elapsed() < Duration::from_secs(60), "no resync of mirror 1\n{}", c.log_tails());
        std::thread::sleep(Duration::from_millis(200));
    }
    println!("mirror 1 in sync again {} ms after its server restarted", started.elapsed().as_millis());
    let out = weft(&["mirror", "verify", "-v", p(&f)]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() && text.contains("mirror 2 (in sync) has the data of mirror 1"), "{text}");
    // The resynced mirror serves alone: oss2 killed, the bytes come from mirror 1.
    c.kill9("oss2");
    let again = c.mount();
    assert!(std::fs::read(again.join("sync")).unwrap() == data, "bytes from the resynced mirror");
}
