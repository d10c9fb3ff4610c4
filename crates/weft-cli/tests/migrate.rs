//! Finding files by their layouts and migrating them, through real mounts: `weft find --ost 3
//! | weft migrate -o 0,1,2` leaves OST 3 without a byte of any file, and a file that a
//! process keeps writing and fsync-ing while it migrates back and forth keeps every byte.

mod common;
use common::*;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `weft find ARGS` as sorted lines.
fn find(args: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = weft_ok(&[&["find"], args].concat()).lines().map(str::to_string).collect();
    v.sort();
    v
}

/// Object files of `ost` in the server's directory that hold bytes.
fn objects_with_data(data_dir: &Path, ost: u32) -> usize {
    let out = sh(data_dir, &format!("find ost{ost:04x}/O -type f -name '[0-9]*' -size +0 | wc -l"));
    out.trim().parse().unwrap()
}

#[test]
fn find_by_layout_then_migrate_empties_an_ost() {
    let mut c = Cluster::single_node(&weft_bin(), 4);
    let m = c.mount();
    let files: [(&str, &[&str], usize); 6] = [
        ("wide", &["-c", "4"], 5 << 20),
        ("on3", &["-o", "3"], 3 << 20),
        ("on2", &["-o", "2"], 1 << 20),
        ("pfl", &["-E", "64K", "-L", "mdt", "-E", "1M", "-o", "3", "-E", "-1", "-c", "4"], 6 << 20),
        ("small", &["-E", "64K", "-L", "mdt", "-E", "-1", "-o", "3"], 3901),
        ("sub/deep", &["-o", "1,3"], 2 << 20),
    ];
    std::fs::create_dir(m.join("sub")).unwrap();
    for (i, (name, opts, size)) in files.iter().enumerate() {
        let f = m.join(name);
        weft_ok(&[&["setstripe"], *opts, &[p(&f)]].concat());
        std::fs::write(&f, pattern(i as u64, 0, *size)).unwrap();
    }
    let path = |n: &str| m.join(n).to_str().unwrap().to_string();
    // Decided from layouts: exactly the files with an object on OST 3.
    let on3: Vec<String> = files.iter().map(|f| path(f.0)).filter(|f| osts_of(Path::new(f)).contains(&3)).collect();
    assert_eq!(on3.len(), 4, "wide, on3, pfl and sub/deep have objects on OST 3 ({on3:?})");
    let mut want = on3.clone();
    want.sort();
    assert_eq!(find(&[p(&m), "--ost", "3"]), want);
    // The other predicates, as lfs find and find(1) have them.
    assert_eq!(find(&[p(&m), "--stripe-count", "4"]), [path("pfl"), path("wide")]);
    assert_eq!(find(&[p(&m), "--layout", "mdt"]), [path("pfl"), path("small")]);
    assert_eq!(find(&[p(&m), "--component-count", "+1"]), [path("pfl"), path("small")]);
    assert_eq!(find(&[p(&m), "--size", "+4M", "--type", "f"]), [path("pfl"), path("wide")]);
    assert_eq!(find(&[p(&m), "--size", "-4k"]).last().unwrap(), &path("small"));
    assert_eq!(find(&[p(&m), "--name", "o*"]), [path("on2"), path("on3")]);
    assert_eq!(find(&[p(&m), "--type", "d"]), [p(&m).to_string(), path("sub")]);
    assert_eq!(find(&[p(&m), "--mtime", "-1h", "--type", "f"]).len(), 6);
    assert!(find(&[p(&m), "--mtime", "+1d"]).is_empty());
    assert_eq!(
        find(&[p(&m), "--maxdepth", "1", "--ost", "1"]).len(),
        usize::from(osts_of(&m.join("wide")).contains(&1)) + usize::from(osts_of(&m.join("pfl")).contains(&1))
    );
    let bad = weft(&["find", p(&m), "--layout", "ssd"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("'ssd': use raid0, mdt or released"));

    // The pipe of the issue: every file of OST 3 moves to OSTs 0-2, and reads back whole.
    let script = format!("{w} find {m} --ost 3 | {w} migrate -o 0,1,2", w = weft_bin().display(), m = m.display());
    sh(&m, &script);
    assert!(find(&[p(&m), "--ost", "3"]).is_empty());
    for (i, (name, _, size)) in files.iter().enumerate() {
        assert!(std::fs::read(m.join(name)).unwrap() == pattern(i as u64, 0, *size), "{name} after migration");
        assert!(!osts_of(&m.join(name)).contains(&3), "{name}");
    }
    assert_eq!(osts_of(&m.join("wide")).len(), 3, "-o 0,1,2: three stripes");
    // Another mount reads the same bytes, and the old objects are destroyed.
    let b = c.mount();
    for (i, (name, _, size)) in files.iter().enumerate() {
        assert!(std::fs::read(b.join(name)).unwrap() == pattern(i as u64, 0, *size), "{name} on another mount");
    }
    let dir = c.servers[0].data_dir.clone();
    let deadline = Instant::now() + Duration::from_secs(15);
    while objects_with_data(&dir, 3) > 0 {
        assert!(Instant::now() < deadline, "OST 3 still holds {} objects with data", objects_with_data(&dir, 3));
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_file_written_and_fsynced_while_it_migrates_keeps_every_fsynced_byte() {
    let mut c = Cluster::single_node(&weft_bin(), 4);
    let a = c.mount();
    let b = c.mount();
    let f = a.join("log");
    weft_ok(&["setstripe", "-c", "2", p(&f)]);
    // A writer on mount A appends 64 KiB records and fsyncs each; it counts the ones fsync
    // answered for.
    const RECORD: usize = 64 << 10;
    let stop = Arc::new(AtomicBool::new(false));
    let synced = Arc::new(AtomicU64::new(0));
    let writer = {
        let (f, stop, synced) = (f.clone(), stop.clone(), synced.clone());
        std::thread::spawn(move || -> std::io::Result<()> {
            let mut file = std::fs::OpenOptions::new().append(true).open(&f)?;
            let mut n = 0u64;
            while !stop.load(Ordering::Acquire) {
                file.write_all(&pattern(9, n * RECORD as u64, RECORD))?;
                file.sync_all()?;
                n += 1;
                synced.store(n, Ordering::Release);
            }
            Ok(())
        })
    };
    // Migrations back and forth, each while the writer goes on; the migrating client is
    // neither mount.
    let layouts: [&[&str]; 4] =
        [&["-c", "4"], &["-o", "1"], &["-E", "1M", "-c", "1", "-E", "-1", "-c", "3"], &["-c", "2"]];
    let mut done = 0;
    for round in 0..8 {
        while synced.load(Ordering::Acquire) < 8 * (round + 1) {
            assert!(!writer.is_finished(), "the writer stopped");
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = weft(&[&["migrate"], layouts[round as usize % 4], &[p(&b.join("log"))]].concat());
        assert!(out.status.success(), "migrate {round}: {}", String::from_utf8_lossy(&out.stderr));
        done += 1;
    }
    stop.store(true, Ordering::Release);
    writer.join().unwrap().expect("every write and fsync of the writer succeeded");
    let records = synced.load(Ordering::Acquire);
    assert_eq!(done, 8);
    // Every record fsync answered for, byte for byte, on both mounts (and nothing else).
    let want = pattern(9, 0, records as usize * RECORD);
    for m in [&a, &b] {
        let got = std::fs::read(m.join("log")).unwrap();
        assert_eq!(got.len(), want.len(), "size on {}", m.display());
        assert!(got == want, "bytes on {}", m.display());
    }
    assert_eq!(osts_of(&f).len(), 2, "the last migration's layout");
}

#[test]
fn tiers_new_data_lands_on_the_fast_pool_and_the_policy_moves_cold_files_to_the_slow_one() {
    let mut c = Cluster::single_node(&weft_bin(), 4);
    let m = c.mount();
    let w = weft_bin().display().to_string();
    // Pools as lctl pool_*, found through the mount the command runs in.
    sh(&m, &format!("{w} pool new weft.fast && {w} pool add weft.fast 0 1 && {w} pool new weft.slow && {w} pool add weft.slow weft-OST[2-3]"));
    let list = sh(&m, &format!("{w} pool list weft.slow"));
    assert_eq!(list.lines().collect::<Vec<_>>(), ["Pool: weft.slow", "weft-OST0002_UUID", "weft-OST0003_UUID"]);
    // The burst buffer: new data goes to the fast pool (1 MiB on one OST, the rest on two).
    let d = m.join("tier");
    std::fs::create_dir(&d).unwrap();
    weft_ok(&["setstripe", "-E", "1M", "-c", "1", "-p", "fast", "-E", "-1", "-c", "2", "-p", "fast", p(&d)]);
    let sizes = [3 << 20, 200 << 10, 5 << 20, 4096];
    for (i, size) in sizes.iter().enumerate() {
        std::fs::write(d.join(format!("f{i}")), pattern(40 + i as u64, 0, *size)).unwrap();
    }
    for i in 0..4 {
        assert!(osts_of(&d.join(format!("f{i}"))).iter().all(|o| *o < 2), "f{i} on the fast pool");
    }
    // f0 and f2 are cold: last changed two days ago.
    sh(&d, "touch -m -d '2 days ago' f0 f2");
    let rules = c.dir.path().join("rules.toml");
    std::fs::write(
        &rules,
        "[[rule]]\nname = \"cold\"\naction = \"migrate\"\npool = \"slow\"\nstripe_count = 2\nunder = \"/tier\"\nnot_modified_for = \"1d\"\n",
    )
    .unwrap();
    let state = c.dir.path().join("policy");
    let run = |apply: bool| {
        let mut args = vec!["policy", "run", "--config", p(&rules), "--state", p(&state), p(&m)];
        if apply {
            args.insert(2, "--apply");
        }
        weft_ok(&args)
    };
    let dry = run(false);
    assert!(
        dry.contains("would migrate /tier/f0 to pool slow") && dry.contains("would migrate /tier/f2 to pool slow"),
        "{dry}"
    );
    assert!(!dry.contains("/tier/f1") && !dry.contains("/tier/f3"), "{dry}");
    let done = run(true);
    assert!(done.contains("2 actions done, 0 failed"), "{done}");
    for (i, size) in sizes.iter().enumerate() {
        let f = d.join(format!("f{i}"));
        let osts = osts_of(&f);
        if i == 0 || i == 2 {
            assert!(osts.len() == 2 && osts.iter().all(|o| *o >= 2), "f{i} moved to the slow pool: {osts:?}");
        } else {
            assert!(osts.iter().all(|o| *o < 2), "f{i} stays on the fast pool: {osts:?}");
        }
        assert!(std::fs::read(&f).unwrap() == pattern(40 + i as u64, 0, *size), "f{i} reads back whole");
    }
    assert_eq!(find(&[p(&d), "--pool", "slow"]), [p(&d.join("f0")).to_string(), p(&d.join("f2")).to_string()]);
    // The next run finds nothing more to move (the changelog brought the new layouts in).
    let again = run(false);
    assert!(again.contains("dry run: 0 actions"), "{again}");
    // The fast copies are gone: OSTs 0 and 1 hold only the new files' bytes.
    let dir = c.servers[0].data_dir.clone();
    let deadline = Instant::now() + Duration::from_secs(15);
    let fast_bytes = || -> u64 {
        sh(&dir, "find ost0000/O ost0001/O -type f -name '[0-9]*' -printf '%s\\n'")
            .lines()
            .map(|l| l.parse::<u64>().unwrap())
            .sum()
    };
    while fast_bytes() > (sizes[1] + sizes[3]) as u64 {
        assert!(Instant::now() < deadline, "the fast pool still holds {} bytes", fast_bytes());
        std::thread::sleep(Duration::from_millis(100));
    }
}
