//! HSM through mounts: `weft hsm state|set|clear` as `lfs hsm_*` print and allow them
//! (users their own files' norelease, noarchive and dirty; root everything), each change a
//! changelog record of type HSM; archive, release and restore with `weft copytool` (posix
//! and command backends), a striped file's objects gone and its space back, transparent
//! restores, requests that survive a copytool and the MDS dying, import into a new file.

mod common;
use common::*;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `weft copytool` process, killed when dropped.
struct Copytool {
    child: Option<Child>,
    log: PathBuf,
}

impl Copytool {
    fn start(c: &Cluster, name: &str, archive: u32, backend: &str) -> Copytool {
        let log = c.dir.path().join(format!("copytool-{name}.log"));
        let mut child = Command::new(weft_bin())
            .args(["copytool", "--mgs", &c.mgs_address, "--name", name, "--parallel", "8"])
            .args(["--archive", &archive.to_string(), "--backend", backend])
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start weft copytool");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert!(
            line.contains("serving archive"),
            "copytool {name}: {line:?}\n{}",
            std::fs::read_to_string(&log).unwrap()
        );
        Copytool { child: Some(child), log }
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Copytool {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn state_of(f: &Path) -> String {
    weft_ok(&["hsm", "state", path_str(f)]).trim().to_string()
}

/// Waits up to `secs` for `cond`; panics with `what` and `why()` if it never holds.
fn wait_for(secs: u64, what: &str, mut cond: impl FnMut() -> bool, why: impl Fn() -> String) {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > Duration::from_secs(secs) {
            panic!("{what} did not happen within {secs} s:\n{}", why());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The used KiB of the first OST as `weft df` prints it.
fn ost_used_kib(mnt: &Path) -> u64 {
    let df = weft_ok(&["df", path_str(mnt)]);
    let line = df.lines().find(|l| l.starts_with("weft-OST0000_UUID")).unwrap_or_else(|| panic!("{df}"));
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// The files holding a file's objects on the OSTs' disks (`getstripe`'s obdidx, objid and
/// group, under each OST's directory of the server `data_dir`).
fn object_files(data_dir: &Path, f: &Path) -> Vec<PathBuf> {
    let out = weft_ok(&["getstripe", path_str(f)]);
    let mut files = Vec::new();
    for line in out.lines().filter(|l| l.starts_with('\t') && !l.contains("obdidx")) {
        let w: Vec<&str> = line.split_whitespace().collect();
        let (ost, oid): (u32, u32) = (w[0].parse().unwrap(), w[1].parse().unwrap());
        let group = w[3].trim_start_matches("0x");
        files.push(data_dir.join(format!("ost{ost:04x}/O/{group}/d{}/{oid}", oid % 32)));
    }
    files
}

fn state(mnt: &std::path::Path, file: &str) -> String {
    weft_ok(&["hsm", "state", mnt.join(file).to_str().unwrap()])
}

#[test]
fn flags_set_and_cleared_show_as_lfs_shows_them() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let mnt = c.mount();
    let mgs = c.mgs_address.clone();
    weft_ok(&["changelog-register", "weft-MDT0000", "--mgs", &mgs]);
    sh(&mnt, "mkdir u && chown 1000:1000 u");
    let bin = weft_bin().display().to_string();
    let out = sh_as(1000, 1000, &mnt, &format!("echo data > u/f && {bin} hsm set --norelease u/f"));
    assert!(out.status.success(), "{out:?}");
    let path = mnt.join("u/f");
    assert_eq!(state(&mnt, "u/f").trim(), format!("{}: (0x00000010) never_release", path.display()));
    // A user may not say the file is archived; another user may not touch it at all.
    let out = sh_as(1000, 1000, &mnt, &format!("{bin} hsm set --exists u/f"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("only root sets or clears exists"), "{out:?}");
    let out = sh_as(1001, 1001, &mnt, &format!("{bin} hsm set --noarchive u/f"));
    assert!(!out.status.success(), "{out:?}");
    // Dirty needs a copy; root: exists and archived in archive 2; then the owner: dirty.
    let out = weft(&["hsm", "set", "--dirty", path.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("set exists too"), "{out:?}");
    weft_ok(&["hsm", "set", "--exists", "--archived", "--archive-id", "2", path.to_str().unwrap()]);
    let out = sh_as(1000, 1000, &mnt, &format!("{bin} hsm set --dirty u/f"));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        state(&mnt, "u/f").trim(),
        format!("{}: (0x0000001b) exists dirty archived never_release, archive_id:2", path.display())
    );
    let out = weft(&["hsm", "clear", "--exists", path.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("set exists too"), "{out:?}");
    weft_ok(&["hsm", "clear", "--dirty", "--norelease", path.to_str().unwrap()]);
    let json: serde_json::Value =
        serde_json::from_str(&weft_ok(&["hsm", "state", "--json", path.to_str().unwrap()])).unwrap();
    assert_eq!((json["states"].as_u64(), json["archive_id"].as_u64()), (Some(0x9), Some(2)));
    // A write makes an archived file dirty.
    sh(&mnt, "echo more >> u/f");
    assert!(state(&mnt, "u/f").contains("(0x0000000b) exists dirty archived, archive_id:2"), "{}", state(&mnt, "u/f"));
    // Not on directories; a file never touched is all clear.
    let out = weft(&["hsm", "set", "--norelease", mnt.join("u").to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("HSM states are for files"), "{out:?}");
    sh(&mnt, "touch g");
    assert!(state(&mnt, "g").trim().ends_with(": (0x00000000)"));
    // Each change, as the changelog shows it: HSM records with the state event (0x280).
    let log = weft_ok(&["changelog", "weft-MDT0000", "--mgs", &mgs]);
    let hsm: Vec<&str> = log.lines().filter(|l| l.contains(" 16HSM ")).collect();
    let flags: Vec<&str> = hsm.iter().map(|l| l.split(' ').nth(4).unwrap()).collect();
    assert_eq!(flags, ["0x280", "0x280", "0x680", "0x280", "0x680"], "{log}");
}

#[test]
fn a_striped_file_is_archived_released_and_read_back_by_cat() {
    let mut c = Cluster::single_node(&weft_bin(), 4);
    let mnt = c.mount();
    let archive = c.dir.path().join("archive");
    let ct = Copytool::start(&c, "ct1", 1, &format!("posix:{}", archive.display()));
    let f = mnt.join("big");
    weft_ok(&["setstripe", "-c", "4", path_str(&f)]);
    let data = pattern(19, 0, 256 << 20);
    std::fs::write(&f, &data).unwrap();
    assert!(state_of(&f).ends_with(": (0x00000000)"));
    weft_ok(&["hsm", "archive", path_str(&f)]);
    wait_for(300, "the archive", || state_of(&f).contains("exists archived"), || ct.log());
    assert_eq!(state_of(&f), format!("{}: (0x00000009) exists archived, archive_id:1", f.display()));
    let action = weft_ok(&["hsm", "action", path_str(&f)]);
    assert_eq!(action.trim(), format!("{}: ARCHIVE done (268435456 bytes moved)", f.display()));
    let objects = object_files(&c.servers[0].data_dir, &f);
    assert_eq!(objects.len(), 4);
    assert!(objects.iter().all(|o| o.exists()), "{objects:?}");
    let used = ost_used_kib(&mnt);

    weft_ok(&["hsm", "release", path_str(&f)]);
    assert_eq!(state_of(&f), format!("{}: (0x0000000d) released exists archived, archive_id:1", f.display()));
    wait_for(30, "the objects' removal", || objects.iter().all(|o| !o.exists()), || format!("{objects:?}"));
    // The disk under the OSTs may count freed blocks back a little later.
    let freed = || used.saturating_sub(ost_used_kib(&mnt));
    wait_for(30, "the space back in weft df", || freed() >= 128 << 10, || format!("{} KiB freed", freed()));
    let meta = std::fs::metadata(&f).unwrap();
    assert_eq!((meta.len(), std::os::unix::fs::MetadataExt::blocks(&meta)), (256 << 20, 1));
    assert!(weft_ok(&["getstripe", path_str(&f)]).contains("lmm_pattern:       raid0,released"));

    // An ordinary cat restores it and reads every byte.
    let out = Command::new("cat").arg(&f).output().unwrap();
    assert!(out.status.success(), "{out:?}\n{}", ct.log());
    assert!(out.stdout == data, "the restored file differs from what was written");
    assert_eq!(state_of(&f), format!("{}: (0x00000009) exists archived, archive_id:1", f.display()));
    assert!(weft_ok(&["hsm", "action", path_str(&f)]).contains("RESTORE done (268435456 bytes moved)"));
    // A write makes it dirty; a dirty file is not released, and the command says why.
    sh(&mnt, "echo more >> big");
    let refused = weft(&["hsm", "release", path_str(&f)]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("changed since it was archived (dirty)"), "{err}");
}

#[test]
fn a_released_file_opened_on_two_mounts_is_restored_once() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let (m1, m2) = (c.mount(), c.mount());
    let mgs = c.mgs_address.clone();
    weft_ok(&["changelog-register", "weft-MDT0000", "--mgs", &mgs]);
    let archive = c.dir.path().join("archive");
    let ct = Copytool::start(&c, "ct1", 1, &format!("posix:{}", archive.display()));
    let data = pattern(3, 0, 3 << 20);
    std::fs::write(m1.join("f"), &data).unwrap();
    weft_ok(&["hsm", "archive", path_str(&m1.join("f"))]);
    wait_for(60, "the archive", || state_of(&m1.join("f")).contains("exists archived"), || ct.log());
    weft_ok(&["hsm", "release", path_str(&m1.join("f"))]);
    assert!(state_of(&m2.join("f")).contains("released"));
    // Both mounts read at once: one restore, both get the bytes.
    let readers: Vec<Child> = [&m1, &m2]
        .iter()
        .map(|m| Command::new("cat").arg(m.join("f")).stdout(Stdio::piped()).spawn().unwrap())
        .collect();
    for r in readers {
        let out = r.wait_with_output().unwrap();
        assert!(out.status.success() && out.stdout == data, "a mount read {} bytes", out.stdout.len());
    }
    let log = weft_ok(&["changelog", "weft-MDT0000", "--mgs", &mgs]);
    // HSM records: archive (0x0), release (0x180), restore (0x80): one restore.
    let events: Vec<&str> =
        log.lines().filter(|l| l.contains(" 16HSM ")).map(|l| l.split(' ').nth(4).unwrap()).collect();
    assert_eq!(events.iter().filter(|e| **e == "0x80").count(), 1, "{log}");
    let restores = ct.log().lines().filter(|l| l.contains("RESTORE") && l.contains(" done")).count();
    assert_eq!(restores, 1, "{}", ct.log());
}
