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

/// `weft policy run` with its rules in `config` and its catalog in `state`; `--apply` does
/// what it names.
fn policy_run(config: &Path, state: &Path, mnt: &Path, apply: bool) -> String {
    let mut args = vec!["policy", "run", "--config", path_str(config), "--state", path_str(state)];
    if apply {
        args.push("--apply");
    }
    args.push(path_str(mnt));
    weft_ok(&args)
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

    let blocks = |f: &Path| std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(f).unwrap());
    assert!(blocks(&f) >= (256 << 20) / 512, "the kernel has the attributes before the release");
    weft_ok(&["hsm", "release", path_str(&f)]);
    // At once, on the mount that released it: one block.
    assert_eq!(blocks(&f), 1);
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

    // Ahead of time: `hsm restore` brings it back without an open.
    let f = m1.join("f");
    weft_ok(&["hsm", "release", path_str(&f)]);
    weft_ok(&["hsm", "restore", path_str(&f)]);
    let clean = format!("{}: (0x00000009) exists archived, archive_id:1", f.display());
    wait_for(60, "the restore", || state_of(&f) == clean, || ct.log());
    // A truncate restores first, then cuts (and the file is dirty).
    weft_ok(&["hsm", "release", path_str(&f)]);
    sh(&m2, "truncate -s 100000 f");
    assert_eq!(std::fs::read(m1.join("f")).unwrap(), data[..100000]);
    assert!(state_of(&f).contains("exists dirty archived"), "{}", state_of(&f));
    // A mapping restores too.
    weft_ok(&["hsm", "archive", path_str(&f)]);
    wait_for(60, "the archive", || state_of(&f) == clean, || ct.log());
    weft_ok(&["hsm", "release", path_str(&f)]);
    let script = concat!(
        "import mmap, sys\n",
        "with open(sys.argv[1], 'rb') as f:\n",
        "    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n",
        "    sys.stdout.buffer.write(m[:])\n",
    );
    let out = Command::new("python3").args(["-c", script]).arg(m2.join("f")).output().unwrap();
    assert!(out.status.success() && out.stdout == data[..100000], "{out:?}");
}

/// The coordinator's actions by status, as the MDS's metrics count them
/// (`weft_hsm_actions`; an MDS that is down answers nothing).
fn action_counts(metrics: &str) -> std::collections::BTreeMap<String, usize> {
    let out = Command::new("curl").args(["-sf", "--max-time", "5", &format!("http://{metrics}/metrics")]).output();
    let mut counts = std::collections::BTreeMap::new();
    for line in out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default().lines() {
        let Some(rest) = line.strip_prefix("weft_hsm_actions{") else { continue };
        let status = rest.split("status=\"").nth(1).and_then(|r| r.split('"').next()).unwrap_or("?");
        let n: usize = line.rsplit(' ').next().unwrap().parse().unwrap();
        *counts.entry(status.to_string()).or_insert(0) += n;
    }
    counts
}

/// Thousands of archives (2,000 in `make test`; `WEFT_HSM_ARCHIVES=10000` in `make soak`)
/// through two copytools, one killed at a fifth of them, the MDS killed at half.
#[test]
fn thousands_of_archives_survive_a_copytool_and_the_mds_dying() {
    let files: usize = std::env::var("WEFT_HSM_ARCHIVES").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000);
    let mut c = Cluster::multi_node(&weft_bin());
    let mnt = c.mount();
    let mds_server = c.servers.iter().find(|s| s.spec.name == "mds").unwrap();
    let (mds, mds_address) = (mds_server.metrics.clone(), mds_server.address.clone());
    // Every ended action stays counted for the whole test (Lustre's grace_delay).
    weft_ok(&["set-param", "-P", "--mgs", &c.mgs_address, "mdt.weft-MDT0000.hsm.grace_delay=3600"]);
    wait_for(
        10,
        "the grace delay",
        || weft_ok(&["get-param", "-n", "--server", &mds_address, "mdt.weft-MDT0000.hsm.grace_delay"]).trim() == "3600",
        String::new,
    );
    std::fs::create_dir(mnt.join("many")).unwrap();
    let mut list = String::new();
    for i in 0..files {
        let f = mnt.join(format!("many/f{i}"));
        std::fs::write(&f, format!("file {i}\n")).unwrap();
        list.push_str(&format!("{}\n", f.display()));
    }
    let list_file = c.dir.path().join("list");
    std::fs::write(&list_file, list).unwrap();
    let archive = c.dir.path().join("archive");
    let backend = format!("posix:{}", archive.display());
    let mut a = Copytool::start(&c, "ct-a", 1, &backend);
    let b = Copytool::start(&c, "ct-b", 1, &backend);
    weft_ok(&["hsm", "archive", "--filelist", path_str(&list_file)]);
    let succeeded = |mds: &str| action_counts(mds).get("SUCCEED").copied().unwrap_or(0);
    wait_for(300, "a fifth of the archives", || succeeded(&mds) >= files / 5, || format!("{:?}", action_counts(&mds)));
    a.kill9();
    wait_for(300, "half of the archives", || succeeded(&mds) >= files / 2, || format!("{:?}", action_counts(&mds)));
    c.kill9("mds");
    std::thread::sleep(Duration::from_millis(500));
    c.restart("mds");
    wait_for(
        600,
        "every archive",
        || succeeded(&mds) == files,
        || format!("{:?}\n{}\n{}", action_counts(&mds), a.log(), b.log()),
    );
    assert_eq!(action_counts(&mds).into_iter().collect::<Vec<_>>(), [("SUCCEED".to_string(), files)]);
    // Every file archived and clean, every copy the file's bytes with its path beside it.
    let paths: Vec<String> = (0..files).map(|i| mnt.join(format!("many/f{i}")).display().to_string()).collect();
    let mut args = vec!["hsm", "state"];
    args.extend(paths.iter().map(String::as_str));
    let states = weft_ok(&args);
    assert_eq!(states.lines().filter(|l| l.ends_with(": (0x00000009) exists archived, archive_id:1")).count(), files);
    let mut copies = 0;
    for dir in std::fs::read_dir(&archive).unwrap() {
        for entry in std::fs::read_dir(dir.unwrap().path()).unwrap() {
            let path = entry.unwrap().path();
            let Some(name) = path.to_str().and_then(|p| p.strip_suffix(".meta.json")) else { continue };
            let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            let i: usize = meta["path"].as_str().unwrap().strip_prefix("/many/f").unwrap().parse().unwrap();
            assert_eq!(std::fs::read_to_string(name).unwrap(), format!("file {i}\n"), "{name}");
            copies += 1;
        }
    }
    assert_eq!(copies, files);
}

#[test]
fn unserved_archives_wait_and_bad_requests_say_why() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let mnt = c.mount_with("restore_timeout=2");
    let archive = c.dir.path().join("archive");
    let _ct = Copytool::start(&c, "ct1", 1, &format!("posix:{}", archive.display()));
    sh(&mnt, "echo data > f && echo data > g && mkdir d");
    let (f, g) = (mnt.join("f"), mnt.join("g"));
    // Archive 7 has no copytool: the request waits, and says so.
    weft_ok(&["hsm", "archive", "--archive", "7", path_str(&f)]);
    std::thread::sleep(Duration::from_millis(1500));
    let action = weft_ok(&["hsm", "action", path_str(&f)]);
    assert_eq!(
        action.trim(),
        format!("{}: ARCHIVE waiting (0 bytes moved): no copytool serving archive 7 is running", f.display())
    );
    assert_eq!(state_of(&f), format!("{}: (0x00000000)", f.display()));
    weft_ok(&["hsm", "cancel", path_str(&f)]);
    assert!(weft_ok(&["hsm", "action", path_str(&f)]).contains("ARCHIVE canceled"));
    // A file never archived is not released, and the command says why.
    let out = weft(&["hsm", "release", path_str(&g)]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("g: cannot be released: it was never archived"), "{err}");
    // A directory in a list: nothing is queued, the error names it.
    let out = weft(&["hsm", "archive", path_str(&g), path_str(&mnt.join("d"))]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("ARCHIVE of {}: HSM works on regular files", mnt.join("d").display())), "{err}");
    assert_eq!(weft_ok(&["hsm", "action", path_str(&g)]).trim(), format!("{}: NOOP", g.display()));
    // A released file whose archive has no copytool: an open fails after the mount's
    // restore_timeout, and the request shows as waiting.
    weft_ok(&["hsm", "set", "--exists", "--archived", "--archive-id", "5", path_str(&g)]);
    weft_ok(&["hsm", "release", path_str(&g)]);
    let started = Instant::now();
    let read = std::fs::read(&g);
    assert_eq!(errno_of(read), libc::EIO);
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    let action = weft_ok(&["hsm", "action", path_str(&g)]);
    assert!(action.contains("RESTORE waiting (0 bytes moved): no copytool serving archive 5"), "{action}");
    let log = std::fs::read_to_string(&c.mounts[0].log).unwrap();
    assert!(log.contains("restore did not finish within 2 s"), "{log}");
}

#[test]
fn a_command_backend_archives_and_restores_and_an_archive_rebuilds_a_file() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let mnt = c.mount();
    let store = c.dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    // A site's backend: its data through a pipe, its own layout of the store.
    let script = c.dir.path().join("backend.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nset -e\nS={}\ncase \"$1\" in\n archive) cat > \"$S/$2\"; echo \"$WEFT_META\" > \"$S/$2.meta\" ;;\n \
             restore) cat \"$S/$2\" ;;\n remove) rm -f \"$S/$2\" \"$S/$2.meta\" ;;\n meta) cat \"$S/$2.meta\" ;;\n \
             rebind) mv \"$S/$2\" \"$S/$3\"; mv \"$S/$2.meta\" \"$S/$3.meta\" ;;\n *) exit 2 ;;\nesac\n",
            store.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let ct = Copytool::start(&c, "cmd", 2, &format!("command:{}", script.display()));
    let f = mnt.join("f");
    let data = pattern(5, 0, (5 << 20) + 123);
    std::fs::write(&f, &data).unwrap();
    weft_ok(&["hsm", "archive", "--archive", "2", path_str(&f)]);
    wait_for(60, "the archive", || state_of(&f).contains("exists archived"), || ct.log());
    let fid = weft_ok(&["path2fid", path_str(&f)]).trim().to_string();
    let bare = fid.trim_matches(['[', ']']).to_string();
    assert_eq!(std::fs::read(store.join(&bare)).unwrap(), data, "the copy in the command's store");
    weft_ok(&["hsm", "release", path_str(&f)]);
    assert_eq!(std::fs::read(&f).unwrap(), data, "restored through the command");
    // A change of mode and times opens it for writing (touch): dirty, archived again, with
    // the metadata as it is now.
    sh(&mnt, "chmod 640 f && touch -d '2001-02-03 04:05:06' f");
    assert!(state_of(&f).contains("exists dirty archived"), "{}", state_of(&f));
    weft_ok(&["hsm", "archive", path_str(&f)]);
    let clean = format!("{}: (0x00000009) exists archived, archive_id:2", f.display());
    wait_for(60, "the second archive", || state_of(&f) == clean, || ct.log());
    let mtime = std::os::unix::fs::MetadataExt::mtime(&std::fs::metadata(&f).unwrap());
    weft_ok(&["hsm", "release", path_str(&f)]);
    let out = weft(&["hsm", "remove", path_str(&f)]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("it is released"), "{out:?}");
    // The file is lost from the file system; the archive rebuilds it under a new name
    // (released, its data the archive's), with its mode and times.
    sh(&mnt, "rm f");
    let out = Command::new(weft_bin())
        .args(["copytool", "--mgs", &c.mgs_address, "--archive", "2", "--backend"])
        .arg(format!("command:{}", script.display()))
        .args(["--import", &fid, "/rebuilt"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let rebuilt = mnt.join("rebuilt");
    assert!(
        state_of(&rebuilt).contains("(0x0000000d) released exists archived, archive_id:2"),
        "{}",
        state_of(&rebuilt)
    );
    let meta = std::fs::metadata(&rebuilt).unwrap();
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    assert_eq!((meta.len(), meta.permissions().mode() & 0o7777, meta.mtime()), (data.len() as u64, 0o640, mtime));
    assert_eq!(std::fs::read(&rebuilt).unwrap(), data, "the rebuilt file restores from the archive");
    // Its copy removed from the archive.
    let new_fid = weft_ok(&["path2fid", path_str(&rebuilt)]).trim().trim_matches(['[', ']']).to_string();
    assert!(store.join(&new_fid).exists() && !store.join(&bare).exists(), "rebound to the new FID");
    weft_ok(&["hsm", "remove", path_str(&rebuilt)]);
    wait_for(30, "the remove", || !store.join(&new_fid).exists(), || ct.log());
    let gone = format!("{}: (0x00000000), archive_id:2", rebuilt.display());
    wait_for(10, "the state after the remove", || state_of(&rebuilt) == gone, || state_of(&rebuilt));
}

#[test]
fn the_policy_engine_follows_the_changelog_and_does_what_its_rules_name() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let mnt = c.mount();
    let archive = c.dir.path().join("archive");
    let ct = Copytool::start(&c, "ct1", 1, &format!("posix:{}", archive.display()));
    let config = c.dir.path().join("rules.toml");
    std::fs::write(
        &config,
        "[[rule]]\nname = \"old-proj\"\naction = \"archive\"\nunder = \"/proj\"\nnot_modified_for = \"1h\"\n\n\
         [[rule]]\nname = \"big\"\naction = \"release\"\nlarger_than = \"1M\"\nwhen_ost_full = 1\n",
    )
    .unwrap();
    let state = c.dir.path().join("policy");
    let run = |apply: bool| policy_run(&config, &state, &mnt, apply);
    // The first run registers its changelog reader (and walks the empty tree once).
    assert!(run(false).contains("catalog: 0 files from a first walk"));
    sh(
        &mnt,
        "mkdir -p proj/sub other && head -c 1024 /dev/urandom > proj/old-small && \
         head -c 3145728 /dev/urandom > proj/old-big && head -c 3145728 /dev/urandom > proj/new-big && \
         echo x > proj/sub/old && echo x > other/old && echo x > proj/keep && \
         touch -d '2 hours ago' proj/old-small proj/old-big other/old proj/keep && \
         touch -d '3 hours ago' proj/sub/old",
    );
    weft_ok(&["hsm", "set", "--noarchive", path_str(&mnt.join("proj/keep"))]);
    let files = ["proj/old-small", "proj/old-big", "proj/new-big", "proj/sub/old", "other/old", "proj/keep"];
    let snapshot = || {
        files
            .iter()
            .map(|f| {
                let m = std::fs::metadata(mnt.join(f)).unwrap();
                (state_of(&mnt.join(f)), std::os::unix::fs::MetadataExt::mtime(&m), m.len())
            })
            .collect::<Vec<_>>()
    };
    let before = snapshot();
    // Dry run: what the rules name, from the changelog; nothing done.
    let dry = run(false);
    assert!(dry.contains("changelog records taken in") && !dry.contains(" 0 changelog records"), "{dry}");
    let named: Vec<&str> = dry.lines().filter(|l| l.starts_with("would ")).collect();
    let mut names: Vec<String> = named.iter().map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" ")).collect();
    names.sort();
    assert_eq!(names, ["would archive /proj/old-big", "would archive /proj/old-small", "would archive /proj/sub/old"]);
    assert!(dry.contains("dry run: 3 actions, none done"), "{dry}");
    assert_eq!(snapshot(), before, "a dry run touches nothing");
    for f in files {
        assert!(weft_ok(&["hsm", "action", path_str(&mnt.join(f))]).trim().ends_with(": NOOP"));
    }
    // Applied: those three archived; then the release rule names the big one only.
    assert!(run(true).contains("3 actions done, 0 failed"));
    for f in ["proj/old-small", "proj/old-big", "proj/sub/old"] {
        let p = mnt.join(f);
        wait_for(60, "an archive", || state_of(&p).contains("exists archived"), || ct.log());
    }
    let second = run(false);
    let named: Vec<&str> = second.lines().filter(|l| l.starts_with("would ")).collect();
    assert_eq!(named.len(), 1, "{second}");
    assert!(named[0].starts_with("would release /proj/old-big "), "{second}");
    run(true);
    assert!(state_of(&mnt.join("proj/old-big")).contains("(0x0000000d) released exists archived"));
    assert!(state_of(&mnt.join("proj/old-small")).ends_with("(0x00000009) exists archived, archive_id:1"));
    for f in ["proj/new-big", "other/old"] {
        assert!(state_of(&mnt.join(f)).ends_with(": (0x00000000)"), "{f}");
    }
    assert!(state_of(&mnt.join("proj/keep")).ends_with(": (0x00000020) never_archive"));
    // Nothing left to do.
    assert!(run(false).contains("dry run: 0 actions"));
}

/// With two MDTs, HSM and the policy engine serve both: a file of MDT1 (in a directory
/// placed there) is archived by the copytool (its actions are MDT1's, its progress goes
/// there), released and restored by cat, and the policy engine follows both MDTs'
/// changelogs (one reader on each) and archives files of both.
#[test]
fn hsm_and_the_policy_engine_serve_files_of_every_mdt() {
    let mut c = Cluster::start(
        &weft_bin(),
        vec![NodeSpec::new("main", "127.0.0.1").mgs().mdt(0).osts(&[0, 1]), NodeSpec::new("mds1", "127.0.0.2").mdt(1)],
    );
    let mnt = c.mount();
    let archive = c.dir.path().join("archive");
    let ct = Copytool::start(&c, "ct1", 1, &format!("posix:{}", archive.display()));
    weft_ok(&["mkdir", "-i", "1", path_str(&mnt.join("remote"))]);
    let f = mnt.join("remote/f");
    let data = pattern(23, 0, 3 << 20);
    std::fs::write(&f, &data).unwrap();
    let fid: weft_proto::Fid = weft_ok(&["path2fid", path_str(&f)]).trim().parse().unwrap();
    assert_eq!(fid.mdt_index(), 1);
    weft_ok(&["hsm", "archive", path_str(&f)]);
    wait_for(60, "the archive of a file of MDT1", || state_of(&f).contains("exists archived"), || ct.log());
    weft_ok(&["hsm", "release", path_str(&f)]);
    assert!(state_of(&f).contains("released"));
    let out = Command::new("cat").arg(&f).output().unwrap();
    assert!(out.status.success() && out.stdout == data, "the restored file differs\n{}", ct.log());
    assert!(weft_ok(&["hsm", "action", path_str(&f)]).contains("RESTORE done (3145728 bytes moved)"));

    // The policy engine: a reader on each MDT, files of both archived.
    let config = c.dir.path().join("rules.toml");
    std::fs::write(&config, "[[rule]]\nname = \"all\"\naction = \"archive\"\nunder = \"/proj\"\n").unwrap();
    let state = c.dir.path().join("policy");
    let run = |apply: bool| policy_run(&config, &state, &mnt, apply);
    assert!(run(false).contains("from a first walk"));
    let users = |mdt: &str| weft_ok(&["changelog-users", mdt, "--mgs", &c.mgs_address]);
    assert!(users("weft-MDT0000").contains("policy") && users("weft-MDT0001").contains("policy"));
    sh(&mnt, "mkdir proj && echo a > proj/on0");
    weft_ok(&["mkdir", "-i", "1", path_str(&mnt.join("proj/one"))]);
    sh(&mnt, "echo b > proj/one/on1");
    let dry = run(false);
    assert!(dry.contains("would archive /proj/on0 ") && dry.contains("would archive /proj/one/on1 "), "{dry}");
    assert!(run(true).contains("2 actions done, 0 failed"));
    for p in [mnt.join("proj/on0"), mnt.join("proj/one/on1")] {
        wait_for(60, "an archive by the policy engine", || state_of(&p).contains("exists archived"), || ct.log());
    }
}
