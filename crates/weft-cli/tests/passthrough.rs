//! FUSE passthrough under `weft up -o passthrough=on`: the kernel reads and writes the object's file of a
//! one-object file itself, and every other client still sees every byte (see `OpenIo`).

mod common;
use common::*;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `weft up` in a temp directory with a second client mounted over TCP (a separate process,
/// so never passthrough); both unmounted and stopped on drop, even when a test fails.
struct UpWithSecondClient {
    dir: tempfile::TempDir,
}

impl UpWithSecondClient {
    fn start(up_options: Option<&str>) -> UpWithSecondClient {
        let dir = tempfile::tempdir().unwrap();
        let me = UpWithSecondClient { dir };
        let (data, mnt) = (me.data(), me.mnt());
        let mut args = vec!["up", "--data", data.to_str().unwrap(), "--mount", mnt.to_str().unwrap()];
        args.extend(["--osts", "2", "--detach"]);
        if let Some(o) = up_options {
            args.extend(["-o", o]);
        }
        weft_ok(&args);
        let status: serde_json::Value =
            serde_json::from_str(&weft_ok(&["status", "--data", data.to_str().unwrap(), "--json"])).unwrap();
        let mgs = status["mgs_address"].as_str().unwrap().to_string();
        std::fs::create_dir(me.other()).unwrap();
        // Its log in the test's directory, not the default one in /tmp that would outlive it.
        let log = format!("log={}", me.dir.path().join("other.log").display());
        weft_ok(&["mount", &mgs, me.other().to_str().unwrap(), "-o", &log]);
        me
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The `weft up` mount (servers in its process).
    fn mnt(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }

    /// The second client.
    fn other(&self) -> PathBuf {
        self.dir.path().join("other")
    }
}

impl Drop for UpWithSecondClient {
    fn drop(&mut self) {
        for m in [self.other(), self.mnt()] {
            if weft_harness::is_mounted(&m) {
                let _ = weft(&["umount", m.to_str().unwrap()]);
            }
        }
        let _ = weft(&["down", "--data", self.data().to_str().unwrap()]);
        for m in [self.other(), self.mnt()] {
            if weft_harness::is_mounted(&m) {
                let _ = Command::new("fusermount3").arg("-uz").arg(&m).status();
            }
        }
    }
}

/// This mount's opens of `path` by I/O mode: (cached, passthrough, uncached).
fn io_modes(path: &Path) -> (u64, u64, u64) {
    let out = Command::new("python3")
        .args(["-c", "import os,sys; sys.stdout.write(os.getxattr(sys.argv[1], 'weft.io').decode())"])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "weft.io of {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = |k: &str| v[k].as_u64().unwrap();
    (n("cached"), n("passthrough"), n("uncached"))
}

/// Bytes compared without printing megabytes when they differ.
#[track_caller]
fn assert_bytes(got: &[u8], want: &[u8], what: &str) {
    let first = got.iter().zip(want).position(|(g, w)| g != w);
    assert!(got == want, "{what}: {} bytes read, {} expected, first difference at {first:?}", got.len(), want.len());
}

/// Opens `path` for writing in the `want` I/O mode. Closes reach the mount and the MDS after
/// close(2) has returned (the kernel sends FUSE_RELEASE on its own time), so an open right
/// after others' closes may still see them: it is tried again, for at most 10 s.
fn open_for_write_in(path: &Path, want: (u64, u64, u64)) -> File {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let f = OpenOptions::new().write(true).open(path).unwrap();
        let got = io_modes(path);
        if got == want {
            return f;
        }
        drop(f);
        assert!(std::time::Instant::now() < deadline, "{} still opens in {got:?}, not {want:?}", path.display());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn read_at(f: &File, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    let n = f.read_at(&mut buf, offset).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn passthrough_writer_and_another_client_see_each_others_bytes() {
    let up = UpWithSecondClient::start(Some("passthrough=on"));
    let (a_path, b_path) = (up.mnt().join("shared"), up.other().join("shared"));

    // The `weft up` mount creates a file of one object: the kernel writes it itself.
    let a = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&a_path).unwrap();
    assert_eq!(io_modes(&a_path), (0, 1, 0), "a new one-object file opens in passthrough");
    let first = pattern(1, 0, 3 << 20);
    a.write_all_at(&first, 0).unwrap();

    // Another client opens it meanwhile: uncached, and it sees every byte and the size.
    let b = OpenOptions::new().read(true).write(true).open(&b_path).unwrap();
    assert_eq!(io_modes(&b_path), (0, 0, 1), "beside a passthrough open elsewhere, opens are uncached");
    assert_eq!(std::fs::metadata(&b_path).unwrap().len(), first.len() as u64);
    assert_bytes(&read_at(&b, 0, first.len()), &first, "the other client reads the passthrough writes");

    // Its write is on the object when write(2) returns: the passthrough reader sees it.
    let middle = pattern(2, 1 << 20, 100_000);
    b.write_all_at(&middle, 1 << 20).unwrap();
    assert_bytes(&read_at(&a, 1 << 20, middle.len()), &middle, "passthrough reads the other client's write");

    // The passthrough writer extends the file; the other client sees the new end at once.
    let tail = pattern(3, 5 << 20, 4096);
    a.write_all_at(&tail, 5 << 20).unwrap();
    assert_eq!(std::fs::metadata(&b_path).unwrap().len(), (5 << 20) + 4096);
    assert_bytes(&read_at(&b, 5 << 20, 4096), &tail, "the other client reads the new end");

    // A truncate by the other client: the passthrough side sees the new size and bytes.
    b.set_len(2 << 20).unwrap();
    assert_eq!(std::fs::metadata(&a_path).unwrap().len(), 2 << 20);
    assert!(read_at(&a, 2 << 20, 10).is_empty(), "nothing past the new end");
    a.sync_all().unwrap();
    drop(a);
    drop(b);

    // Both closed: each mount reads the whole file, each through its own cache.
    let mut expected = first[..2 << 20].to_vec();
    expected[1 << 20..(1 << 20) + middle.len()].copy_from_slice(&middle);
    assert_bytes(&std::fs::read(&a_path).unwrap(), &expected, "after both closed, this mount");
    assert_bytes(&std::fs::read(&b_path).unwrap(), &expected, "after both closed, the other client");

    // The other client has it open first: this mount's open is cached, not passthrough,
    // and a write through it reaches the other client under the usual locks.
    let b = OpenOptions::new().read(true).write(true).open(&b_path).unwrap();
    assert_eq!(read_at(&b, 0, 8), expected[..8], "the other client caches the first page");
    let a = OpenOptions::new().read(true).write(true).open(&a_path).unwrap();
    assert_eq!(io_modes(&a_path), (1, 0, 0), "another client has it open: no passthrough");
    assert_eq!(io_modes(&b_path), (1, 0, 0));
    a.write_all_at(b"fresh", 0).unwrap();
    assert_eq!(read_at(&b, 0, 5), b"fresh");
    drop(a);
    drop(b);

    // An existing file opened alone goes passthrough again, after the others' cached pages
    // were called in; what it writes replaces what the other client had cached.
    let cached = read_at(&File::open(&b_path).unwrap(), 0, 16);
    assert_eq!(&cached[..5], b"fresh");
    let a = open_for_write_in(&a_path, (0, 1, 0));
    a.write_all_at(b"newer", 0).unwrap();
    drop(a);
    assert_eq!(read_at(&File::open(&b_path).unwrap(), 0, 5), b"newer");

    // This mount's own pages from before a passthrough open are not served after it. A
    // cached open (the other client has the file open, doing nothing) writes and reads a
    // page under its write lock; a passthrough open then rewrites the page past that lock,
    // which stays cached; the next cached open must not see the old page.
    let b = File::open(&b_path).unwrap();
    let a = OpenOptions::new().read(true).write(true).open(&a_path).unwrap();
    assert_eq!(io_modes(&a_path), (1, 0, 0));
    a.write_all_at(b"older", 0).unwrap();
    assert_eq!(read_at(&a, 0, 5), b"older");
    drop(a);
    drop(b);
    let a = open_for_write_in(&a_path, (0, 1, 0));
    a.write_all_at(b"third", 0).unwrap();
    drop(a);
    let b = File::open(&b_path).unwrap();
    let a = File::open(&a_path).unwrap();
    assert_eq!(io_modes(&a_path), (1, 0, 0));
    assert_eq!(read_at(&a, 0, 5), b"third");
    assert_eq!(read_at(&b, 0, 5), b"third");
    drop(a);
    drop(b);

    // A file of two objects is never passthrough.
    let striped = up.mnt().join("striped");
    weft_ok(&["setstripe", "-c", "2", striped.to_str().unwrap()]);
    let s = OpenOptions::new().write(true).open(&striped).unwrap();
    assert_eq!(io_modes(&striped), (1, 0, 0));
    drop(s);
}

#[test]
fn real_programs_on_passthrough_files_and_the_option_that_turns_it_off() {
    let up = UpWithSecondClient::start(Some("passthrough=on"));
    let m = up.mnt();
    sh(&m, "sqlite3 db 'create table t(a integer primary key, b text);'");
    sh(&m, "(echo 'begin;'; for i in $(seq 1 2000); do echo \"insert into t(b) values ('row $i');\"; done; echo 'commit;') | sqlite3 db");
    assert_eq!(sh(&m, "sqlite3 db 'select count(*), sum(a) from t;'").trim(), "2000|2001000");
    assert_eq!(sh(&m, "sqlite3 db 'pragma integrity_check;'").trim(), "ok");
    // The other client reads the same database.
    assert_eq!(sh(&up.other(), "sqlite3 db 'select count(*), sum(a) from t;'").trim(), "2000|2001000");

    for (name, rw, bs, engine) in [
        ("seq", "write", "1M", "psync"),
        ("rand", "randwrite", "47008", "psync"),
        ("mapped", "randwrite", "64k", "mmap"),
    ] {
        let fio = Command::new("fio")
            .current_dir(&m)
            .args([&format!("--name={name}"), &format!("--filename={name}"), "--size=24M"])
            .args([&format!("--rw={rw}"), &format!("--bs={bs}"), &format!("--ioengine={engine}")])
            .args(["--verify=crc32c", "--do_verify=1", "--verify_fatal=1", "--end_fsync=1"])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&fio.stdout);
        assert!(fio.status.success(), "fio {name} failed:\n{out}\n{}", String::from_utf8_lossy(&fio.stderr));
        // The same bytes through the other client.
        let here = std::fs::read(m.join(name)).unwrap();
        assert_bytes(&std::fs::read(up.other().join(name)).unwrap(), &here, &format!("{name} from the other client"));
    }

    let local = tempfile::tempdir().unwrap();
    sh(local.path(), "cp -a /usr/include/linux src && tar cf tree.tar -C src .");
    sh(&m, &format!("mkdir x && tar xf {}/tree.tar -C x", local.path().display()));
    sh(&m, &format!("diff -r --no-dereference {}/src x", local.path().display()));
    sh(&up.other(), &format!("diff -r --no-dereference {}/src x", local.path().display()));
    // The admin sees that this file system's bytes go uncounted.
    let status = weft_ok(&["status", "--data", up.data().to_str().unwrap()]);
    assert!(status.lines().any(|l| l.starts_with("passthrough: on") && l.contains("counted nowhere")), "{status}");
    drop(up);

    // By default (auto) and with passthrough=off: the same file system, every open through
    // the mount, where the OSS counts its bytes.
    for option in [None, Some("passthrough=off")] {
        let up = UpWithSecondClient::start(option);
        let f = up.mnt().join("plain");
        let file = File::create(&f).unwrap();
        assert_eq!(io_modes(&f), (1, 0, 0), "{option:?}");
        drop(file);
        let status = weft_ok(&["status", "--data", up.data().to_str().unwrap()]);
        let want = if option.is_none() { "passthrough: auto" } else { "passthrough: off" };
        assert!(status.lines().any(|l| l.starts_with(want)), "{status}");
    }
    let out = weft(&["up", "--data", "/nonexistent/weft", "-o", "passthrough=maybe"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("passthrough=maybe") && err.contains("auto, on, off"), "{err}");
}

#[test]
fn a_scheduling_policy_on_object_io_keeps_new_opens_off_passthrough() {
    let up = UpWithSecondClient::start(Some("passthrough=on"));
    let data = up.data();
    let f = up.mnt().join("shaped");
    weft_ok(&["setstripe", "-c", "1", f.to_str().unwrap()]);
    std::fs::write(&f, b"before").unwrap();
    drop(open_for_write_in(&f, (0, 1, 0)));
    // A TBF rule must see every byte: the kernel may not write the object's file itself.
    weft_ok(&["set-param", "--data", data.to_str().unwrap(), "ost.OSS.ost_io.nrs_policies=tbf jobid"]);
    let w = open_for_write_in(&f, (1, 0, 0));
    w.write_all_at(b"during", 0).unwrap();
    drop(w);
    assert_eq!(std::fs::read(up.other().join("shaped")).unwrap(), b"during");
    weft_ok(&["set-param", "--data", data.to_str().unwrap(), "ost.OSS.ost_io.nrs_policies=fifo"]);
    drop(open_for_write_in(&f, (0, 1, 0)));
}
