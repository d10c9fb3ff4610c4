//! OSTs added to a live file system, and placement by free space (issue 35 item 3): a new
//! OSS process joins a running file system and new files use its OST; an OST much fuller
//! than the others (its directory on a 64 MiB tmpfs) gets few new objects while the OSTs
//! are out of balance (Lustre's weighted allocation), and a quarter of them under round
//! robin (`lod.*.qos_threshold_rr=100`).

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A small tmpfs, unmounted and removed when the test ends (declared before the cluster,
/// so dropped after its servers stopped).
struct SmallFs(PathBuf);

impl SmallFs {
    fn mount(size: &str) -> SmallFs {
        let dir = tempfile::Builder::new().prefix("weft-small-ost-").tempdir().unwrap().keep();
        run(std::process::Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs", s(&dir)]));
        SmallFs(dir)
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// The OST of a single-stripe file.
fn ost_of(path: &Path) -> u32 {
    let out = weft_ok(&["getstripe", s(path)]);
    let row = out.lines().skip_while(|l| !l.contains("obdidx")).nth(1).unwrap_or_else(|| panic!("{out}"));
    row.split_whitespace().next().unwrap().parse().unwrap()
}

/// Writes `n` single-stripe files in a new directory `name`; how many landed on each OST.
fn place(dir: &Path, name: &str, n: usize) -> std::collections::BTreeMap<u32, usize> {
    let d = dir.join(name);
    std::fs::create_dir(&d).unwrap();
    let mut on = std::collections::BTreeMap::new();
    for i in 0..n {
        let f = d.join(format!("f{i}"));
        std::fs::write(&f, pattern(i as u64, 0, 4096)).unwrap();
        *on.entry(ost_of(&f)).or_insert(0) += 1;
    }
    on
}

#[test]
fn an_ost_added_live_gets_new_files_and_placement_skews_from_a_full_one() {
    let small = SmallFs::mount("64M");
    let mut c = Cluster::start(
        &weft_bin(),
        vec![NodeSpec::new("mds", "127.0.0.2").mgs().mdt(0), NodeSpec::new("oss1", "127.0.0.4").osts(&[0, 1])],
    );
    let mgs = c.mgs_address.clone();
    let mnt = c.mount();
    let before = place(&mnt, "before", 6);
    assert_eq!(before.keys().copied().collect::<Vec<_>>(), vec![0, 1]);

    // A new OSS process with OST 2 joins; new files use it.
    c.add_node(NodeSpec::new("oss2", "127.0.0.5").osts(&[2]), |_| {});
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut tries = 0;
    let first = loop {
        tries += 1;
        let f = mnt.join(format!("probe{tries}"));
        std::fs::write(&f, pattern(9, 0, 100_000)).unwrap();
        if ost_of(&f) == 2 {
            break f;
        }
        assert!(Instant::now() < deadline, "no new file on the OST added live within 10 s");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(std::fs::read(&first).unwrap() == pattern(9, 0, 100_000));
    let after = place(&mnt, "after", 30);
    assert!(after.get(&2).copied().unwrap_or(0) >= 8, "round robin over three OSTs: {after:?}");
    assert!(weft_ok(&["df", s(&mnt)]).contains("weft-OST0002_UUID"));

    // OST 3 on 64 MiB: far fuller than the others (on the machine's disk).
    let tmp = small.0.clone();
    c.add_node(NodeSpec::new("oss3", "127.0.0.6").osts(&[3]), move |data| {
        std::os::unix::fs::symlink(&tmp, data.join("ost0003")).unwrap();
    });
    // The MDS learns each OST's space every 5 s.
    std::thread::sleep(Duration::from_secs(7));
    let weighted = place(&mnt, "weighted", 80);
    let on3 = weighted.get(&3).copied().unwrap_or(0);
    assert!(on3 <= 8, "out of balance, the full OST gets few new files (about 2%): {weighted:?}");

    let bad = weft(&["set-param", "--mgs", &mgs, "lod.*.qos_prio_free=101"]);
    assert!(failure_stderr(&bad).contains("a percentage, 0 to 100"), "{}", failure_stderr(&bad));
    weft_ok(&["set-param", "--mgs", &mgs, "lod.weft-MDT0000-mdtlov.qos_threshold_rr=100"]);
    let got = weft_ok(&["get-param", "--mgs", &mgs, "lod.*.qos_threshold_rr"]);
    assert!(got.trim().ends_with("qos_threshold_rr=100%"), "{got}");
    let even = place(&mnt, "even", 80);
    assert!(even.get(&3).copied().unwrap_or(0) >= 15, "round robin: a quarter each: {even:?}");
    eprintln!("single-stripe files per OST, weighted: {weighted:?}; round robin: {even:?}");
}
