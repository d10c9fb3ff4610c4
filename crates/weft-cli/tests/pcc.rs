//! Persistent client caches through real mounts: a read-write file owned by one mount,
//! written there with fio and read by another; read-only copies on two mounts dropped by a
//! write on a third; an owner killed and back; the quota's eviction.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn sha(path: &Path) -> String {
    let out = run(Command::new("sha256sum").arg(path));
    out.split_whitespace().next().unwrap().to_string()
}

fn pcc_state(f: &Path) -> String {
    weft_ok(&["pcc", "state", p(f)]).trim().to_string()
}

fn hsm_state(f: &Path) -> String {
    weft_ok(&["hsm", "state", p(f)]).trim().to_string()
}

/// The files under `dir` (recursively).
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().unwrap().is_dir() {
            out.extend(files_under(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

/// fio's random 64 KiB writes over 4 MiB of `data` in `dir`, checksummed (the same seed
/// writes, or with `--verify_only` checks, the same blocks).
fn fio_4m(dir: &Path, mode: &str) -> std::process::Output {
    Command::new("fio")
        .args(["--name=pcc", "--filename=data", "--size=4M", "--bs=64k", "--rw=randwrite", "--ioengine=psync"])
        .args(["--verify=crc32c", "--randseed=7", mode])
        .current_dir(dir)
        .output()
        .expect("fio (installed by make deps)")
}

#[test]
fn a_read_write_file_written_by_its_owner_with_fio_reads_whole_on_another_mount() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let a = c.mount();
    let b = c.mount();
    let cache = c.dir.path().join("pcc-a");
    weft_ok(&["pcc", "add", p(&a), p(&cache), "--param", "uid={0} rwid=3 pccrw=1"]);
    let list = weft_ok(&["pcc", "list", p(&a)]);
    assert!(list.contains(&format!("pccpath: {}", cache.display())) && list.contains("rwid: 3"), "{list}");

    let f = a.join("data");
    std::fs::write(&f, pattern(1, 0, 4 << 20)).unwrap();
    weft_ok(&["pcc", "attach", "-w", p(&f)]);
    let state = pcc_state(&f);
    assert!(
        state.starts_with(&format!("file: {}, type: readwrite, PCC_file: {}", f.display(), cache.display())),
        "{state}"
    );
    let hsm = hsm_state(&f);
    assert!(hsm.contains("released exists archived pccrw, archive_id:3"), "{hsm}");
    // The servers hold no data of it now: the copy is the cache's.
    let copy = cache.join("rw").join(weft_ok(&["path2fid", p(&f)]).trim().trim_matches(['[', ']']));
    assert!(copy.exists(), "{:?}", files_under(&cache));
    assert_eq!(std::fs::read(&copy).unwrap(), pattern(1, 0, 4 << 20));

    // The owner writes it with fio, verifying what it reads back, through the cache.
    let fio = fio_4m(&a, "--do_verify=1");
    assert!(fio.status.success(), "fio on the owner:\n{}", String::from_utf8_lossy(&fio.stdout));
    // The kernel wrote the cache copy itself.
    let written = std::fs::read(&copy).unwrap();
    assert_eq!(written.len(), 4 << 20, "fio's size");
    assert_ne!(written, pattern(1, 0, 4 << 20), "fio wrote the copy");
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 4 << 20, "the owner sees the copy's size");

    // Another mount reads it: the owner's copytool restores it first, every byte.
    let on_b = b.join("data");
    assert_eq!(std::fs::read(&on_b).unwrap(), written, "mount B reads what the owner wrote");
    let fio = fio_4m(&b, "--verify_only");
    assert!(fio.status.success(), "fio --verify_only on mount B:\n{}", String::from_utf8_lossy(&fio.stdout));
    // The owner's cache gave it up.
    assert_eq!(pcc_state(&f), format!("file: {}, type: none", f.display()));
    let hsm = hsm_state(&f);
    assert!(!hsm.contains("released") && !hsm.contains("pccrw"), "{hsm}");
    assert!(!copy.exists(), "the copy went with the attachment");
    // The owner reads the servers' data now, the same bytes.
    assert_eq!(sha(&f), sha(&on_b));
}

#[test]
fn read_only_copies_on_two_mounts_are_dropped_by_a_write_on_a_third() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let (a, b, w) = (c.mount(), c.mount(), c.mount());
    let (ca, cb) = (c.dir.path().join("pcc-a"), c.dir.path().join("pcc-b"));
    weft_ok(&["pcc", "add", p(&a), p(&ca), "--param", "fname={*.dat} roid=1 pccro=1"]);
    weft_ok(&["pcc", "add", p(&b), p(&cb), "--param", "fname={*.none} roid=2 pccro=1"]);
    let out = weft(&["pcc", "add", p(&w), p(&cb), "--param", "fname={*.none} roid=3 colour=red"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("PCC parameter key 'colour': rwid, roid"), "{out:?}");
    std::fs::write(w.join("f.dat"), pattern(2, 0, 1 << 20)).unwrap();
    let (fa, fb) = (a.join("f.dat"), b.join("f.dat"));
    // Mount A attaches by its rule at a read-only open; mount B by hand.
    assert_eq!(std::fs::read(&fa).unwrap(), pattern(2, 0, 1 << 20));
    weft_ok(&["pcc", "attach", "-r", p(&fb)]);
    for (f, cache) in [(&fa, &ca), (&fb, &cb)] {
        let s = pcc_state(f);
        assert!(s.starts_with(&format!("file: {}, type: readonly, PCC_file: {}", f.display(), cache.display())), "{s}");
        assert_eq!(files_under(&cache.join("ro")).len(), 1);
        assert_eq!(std::fs::read(f).unwrap(), pattern(2, 0, 1 << 20));
    }
    // Reads come from the copy: what is in it is what the mount reads.
    let copy_a = files_under(&ca.join("ro")).pop().unwrap();
    let mut marked = pattern(2, 0, 1 << 20);
    marked[..6].copy_from_slice(b"CACHED");
    std::fs::write(&copy_a, &marked).unwrap();
    assert_eq!(&std::fs::read(&fa).unwrap()[..6], b"CACHED");
    // A write on the third mount: both copies go before it is done.
    std::fs::write(w.join("f.dat"), pattern(3, 0, 1 << 20)).unwrap();
    for (f, cache) in [(&fa, &ca), (&fb, &cb)] {
        assert_eq!(pcc_state(f), format!("file: {}, type: none", f.display()));
        assert!(files_under(&cache.join("ro")).is_empty(), "the copy in {} was deleted", cache.display());
        assert_eq!(std::fs::read(f).unwrap(), pattern(3, 0, 1 << 20), "{} reads the new bytes", f.display());
    }
    // Mount A's rule attaches the new data at its next open; a truncate elsewhere drops it.
    assert!(pcc_state(&fa).contains("type: readonly"));
    sh(&w, "truncate -s 100 f.dat");
    assert_eq!(std::fs::read(&fa).unwrap().len(), 100);
    // An attach with no such cache names what there is.
    let out = weft(&["pcc", "attach", "-w", p(&fb)]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no read-write cache on this mount (weft pcc list"),
        "{out:?}"
    );
}

#[test]
fn a_killed_owner_makes_others_fail_clearly_until_it_is_back_and_loses_nothing() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let a = c.mount();
    let b = c.mount_with("restore_timeout=2");
    let cache = c.dir.path().join("pcc-a");
    let param = "uid={0} rwid=4 pccrw=1";
    weft_ok(&["pcc", "add", p(&a), p(&cache), "--param", param]);
    std::fs::write(a.join("f"), b"old").unwrap();
    weft_ok(&["pcc", "attach", "-w", p(&a.join("f"))]);
    std::fs::write(a.join("f"), pattern(5, 0, 200_000)).unwrap();
    c.kill9_mount(&a);

    // Mount B: a clear error after its restore_timeout, not stale data.
    let start = Instant::now();
    let err = std::fs::read(b.join("f")).unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(20), "{:?}", start.elapsed());
    assert!(matches!(err.raw_os_error(), Some(libc::EIO) | Some(libc::ETIMEDOUT)), "{err}");
    // The reason is in the mount's log (as for any restore that does not come).
    let log = c.mounts.iter().find(|m| m.path == b).map(|m| std::fs::read_to_string(&m.log).unwrap()).unwrap();
    assert!(log.contains("restore did not finish within 2 s: is a copytool serving archive 4 running?"), "{log}");

    // The owner comes back and adds its cache again: its copytool serves the restore.
    let a2 = c.mount();
    weft_ok(&["pcc", "add", p(&a2), p(&cache), "--param", param]);
    let mut read = None;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        match std::fs::read(b.join("f")) {
            Ok(data) => {
                read = Some(data);
                break;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
    assert_eq!(read.expect("mount B reads the file once the owner is back"), pattern(5, 0, 200_000));
    assert_eq!(pcc_state(&a2.join("f")), format!("file: {}, type: none", a2.join("f").display()));
}

#[test]
fn the_quota_evicts_by_its_policy_and_never_loses_read_write_data() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let a = c.mount();
    let b = c.mount();
    let cache = c.dir.path().join("pcc");
    let param = "uid={0} rwid=6 roid=6 pccrw=1 pccro=1 quota=3M evict=lru";
    weft_ok(&["pcc", "add", p(&a), p(&cache), "--param", param]);
    for (i, name) in ["rw", "ro1", "ro2", "ro3"].iter().enumerate() {
        std::fs::write(a.join(name), pattern(10 + i as u64, 0, 1 << 20)).unwrap();
    }
    // The oldest: a read-write file, written through the cache.
    weft_ok(&["pcc", "attach", "-w", p(&a.join("rw"))]);
    std::fs::write(a.join("rw"), pattern(20, 0, 1 << 20)).unwrap();
    weft_ok(&["pcc", "attach", "-r", p(&a.join("ro1"))]);
    weft_ok(&["pcc", "attach", "-r", p(&a.join("ro2"))]);
    let list = weft_ok(&["pcc", "list", p(&a)]);
    assert!(list.contains("used: 3145728") && list.contains("files: 3"), "{list}");
    // Full: the least recently used goes, the read-write file, restored first.
    weft_ok(&["pcc", "attach", "-r", p(&a.join("ro3"))]);
    assert!(pcc_state(&a.join("rw")).contains("type: none"));
    assert!(pcc_state(&a.join("ro3")).contains("type: readonly"));
    assert_eq!(std::fs::read(b.join("rw")).unwrap(), pattern(20, 0, 1 << 20), "nothing the owner wrote is lost");
    // More than the quota: refused, saying why.
    std::fs::write(a.join("big"), vec![1u8; 4 << 20]).unwrap();
    let out = weft(&["pcc", "attach", "-r", p(&a.join("big"))]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no room for it"), "{out:?}");
    // A read-write file detached by hand: its bytes go back to the servers.
    std::fs::write(a.join("rw2"), b"x").unwrap();
    weft_ok(&["pcc", "attach", "-w", p(&a.join("rw2"))]);
    std::fs::write(a.join("rw2"), pattern(21, 0, 100_000)).unwrap();
    weft_ok(&["pcc", "detach", p(&a.join("rw2"))]);
    assert!(pcc_state(&a.join("rw2")).contains("type: none"));
    assert!(!hsm_state(&a.join("rw2")).contains("released"));
    assert_eq!(std::fs::read(b.join("rw2")).unwrap(), pattern(21, 0, 100_000));
    // Deleting the cache empties it.
    weft_ok(&["pcc", "del", p(&a), p(&cache)]);
    assert!(files_under(&cache).is_empty(), "{:?}", files_under(&cache));
    assert!(weft_ok(&["pcc", "list", p(&a)]).trim() == "pcc:");
    // Evicting by size: the largest copy goes first, not the oldest.
    weft_ok(&["pcc", "add", p(&a), p(&cache), "--param", "uid={0} roid=8 quota=3M evict=size"]);
    std::fs::write(a.join("two"), vec![2u8; 2 << 20]).unwrap();
    weft_ok(&["pcc", "attach", "-r", p(&a.join("ro1"))]);
    weft_ok(&["pcc", "attach", "-r", p(&a.join("two"))]);
    weft_ok(&["pcc", "attach", "-r", p(&a.join("ro2"))]);
    assert!(pcc_state(&a.join("two")).contains("type: none"), "the largest went");
    assert!(pcc_state(&a.join("ro1")).contains("type: readonly"), "the oldest stayed");
    assert!(pcc_state(&a.join("ro2")).contains("type: readonly"));
}

#[test]
fn prefetch_follows_the_changelog_and_copies_what_the_rule_matches() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let (a, w) = (c.mount(), c.mount());
    let cache = c.dir.path().join("pcc-a");
    weft_ok(&["pcc", "add", p(&a), p(&cache), "--param", "fname={*.h5} roid=1 pccro=1 prefetch=1"]);
    let reader = std::fs::read_to_string(cache.join(".prefetch-reader")).unwrap();
    // Files written on another mount: the one the rule matches is copied without being
    // opened here.
    std::fs::write(w.join("x.h5"), pattern(30, 0, 300_000)).unwrap();
    std::fs::write(w.join("x.txt"), b"not this one").unwrap();
    let start = Instant::now();
    while !pcc_state(&a.join("x.h5")).contains("type: readonly") {
        assert!(start.elapsed() < Duration::from_secs(20), "x.h5 was not prefetched: {}", pcc_state(&a.join("x.h5")));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(std::fs::read(a.join("x.h5")).unwrap(), pattern(30, 0, 300_000));
    assert!(pcc_state(&a.join("x.txt")).contains("type: none"));
    // Written again elsewhere: the copy goes at once, and the new data is copied in.
    std::fs::write(w.join("x.h5"), pattern(31, 0, 300_000)).unwrap();
    let start = Instant::now();
    loop {
        let copies = files_under(&cache.join("ro"));
        if copies.len() == 1 && std::fs::read(&copies[0]).unwrap() == pattern(31, 0, 300_000) {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the new data was not prefetched");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(std::fs::read(a.join("x.h5")).unwrap(), pattern(31, 0, 300_000));
    // Deleting the cache takes its changelog reader away.
    weft_ok(&["pcc", "del", p(&a), p(&cache)]);
    let start = Instant::now();
    while weft_ok(&["changelog-users", "weft-MDT0000", "--mgs", &c.mgs_address]).contains(reader.trim()) {
        assert!(start.elapsed() < Duration::from_secs(10), "reader {reader} still registered");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn opens_on_the_owner_while_another_mount_waits_for_the_data_lose_nothing() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let (a, b) = (c.mount(), c.mount());
    let cache = c.dir.path().join("pcc-a");
    weft_ok(&["pcc", "add", p(&a), p(&cache), "--param", "uid={0} rwid=7 pccrw=1"]);
    std::fs::write(a.join("f"), b"base").unwrap();
    weft_ok(&["pcc", "attach", "-w", p(&a.join("f"))]);
    // A writer on the owner keeps the file open while mount B asks for it, and the owner
    // opens it again meanwhile: the restore waits for the writer, and nothing is lost.
    let writer = Command::new("sh")
        .args(["-c", "exec 3>>f; printf more >&3; sleep 2; printf end >&3"])
        .current_dir(&a)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let on_b = b.join("f");
    let reader = std::thread::spawn(move || std::fs::read(on_b).unwrap());
    std::thread::sleep(Duration::from_millis(500));
    let again = std::fs::read(a.join("f")).unwrap();
    let mut writer = writer;
    assert!(writer.wait().unwrap().success());
    assert_eq!(reader.join().unwrap(), b"basemoreend", "mount B reads every byte the owner wrote");
    assert!(again == b"basemore" || again == b"basemoreend", "{:?}", String::from_utf8_lossy(&again));
    assert_eq!(std::fs::read(a.join("f")).unwrap(), b"basemoreend");
    assert!(files_under(&cache.join("rw")).is_empty());
}
