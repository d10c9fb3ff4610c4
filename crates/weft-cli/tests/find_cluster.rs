//! The commands that talk to the cluster find it from a mount, as `lctl` and `lfs` do on a
//! client node: run inside a Weft mount, with neither --mgs nor --data, they reach its
//! management service; `weft copytool ... MOUNT` takes the mount as `lhsmtool_posix` does;
//! and when nothing names a cluster the error says what was tried.

mod common;
use common::*;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `weft ARGS` run in `dir`.
fn weft_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(weft_bin()).args(args).current_dir(dir).output().expect("run weft")
}

fn weft_in_ok(dir: &Path, args: &[&str]) -> String {
    let out = weft_in(dir, args);
    assert!(
        out.status.success(),
        "weft {args:?} in {} failed:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn commands_run_inside_a_mount_find_its_cluster() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let mnt = c.mount();
    let sub = mnt.join("proj/run1");
    std::fs::create_dir_all(&sub).unwrap();

    // Parameters, from the mount's root and from deep inside it.
    weft_in_ok(&mnt, &["set-param", "ost.OSS.ost_io.nrs_policies=tbf jobid"]);
    let policy = weft_in_ok(&sub, &["get-param", "-n", "ost.OSS.ost_io.nrs_policies"]);
    assert!(policy.contains("tbf jobid"), "{policy}");
    let names = weft_in_ok(&sub, &["list-param", "ost.OSS.ost_io.*"]);
    assert!(names.contains("ost.OSS.ost_io.nrs_policies"), "{names}");

    // The changelog: a reader registered and records of what was done after.
    let reader = weft_in_ok(&sub, &["changelog-register", "weft-MDT0000"]);
    assert!(reader.contains("cl1"), "{reader}");
    std::fs::write(sub.join("f"), b"data").unwrap();
    let start = Instant::now();
    loop {
        let records = weft_in_ok(&sub, &["changelog", "weft-MDT0000"]);
        if records.contains("01CREAT") && records.contains(" f") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no CREAT record of f:\n{records}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let users = weft_in_ok(&sub, &["changelog-users", "weft-MDT0000"]);
    assert!(users.contains("cl1"), "{users}");

    // The monitor's history, decay policies, and the HSM action of a file named relatively.
    let stats: serde_json::Value =
        serde_json::from_str(&weft_in_ok(&sub, &["stats", "--since", "10m", "--by", "target", "--json"])).unwrap();
    assert_eq!(stats["by"], "target", "{stats}");
    let top: serde_json::Value = serde_json::from_str(&weft_in_ok(&sub, &["top", "--json"])).unwrap();
    assert!(top["targets"].is_array(), "{top}");
    assert!(weft_in_ok(&sub, &["qos", "policy", "list"]).contains("no decay policy"));
    assert_eq!(weft_in_ok(&sub, &["hsm", "action", "f"]).trim(), "f: NOOP");

    // Given a data directory that holds no file system, the command says so, mount or not.
    let out = weft_in(&sub, &["stats", "--data", "/nonexistent-weft-data"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("/nonexistent-weft-data"), "{err}");
}

#[test]
fn copytool_takes_the_mount_as_lhsmtool_posix_does() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let mnt = c.mount();
    let elsewhere = tempfile::tempdir().unwrap();
    let archive = elsewhere.path().join("archive");
    std::fs::write(mnt.join("f"), pattern(3, 0, 1 << 20)).unwrap();

    // A path that is not a Weft mount is refused, naming it.
    let backend = format!("posix:{}", archive.display());
    let out = weft_in(elsewhere.path(), &["copytool", "--archive", "1", "--backend", &backend, "/proc"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("/proc") && err.contains("not on a Weft file system"), "{err}");

    // Run from outside the mount, told only the mount: it serves the file system's archive.
    let log = elsewhere.path().join("copytool.log");
    let mut child = Command::new(weft_bin())
        .args(["copytool", "--archive", "1", "--backend", &backend, mnt.to_str().unwrap()])
        .current_dir(elsewhere.path())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start weft copytool");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let _child = Kill(child);
    assert!(line.contains("serving archive 1"), "{line:?}\n{}", std::fs::read_to_string(&log).unwrap());

    weft_in_ok(&mnt, &["hsm", "archive", "--archive", "1", "f"]);
    let start = Instant::now();
    loop {
        let state = weft_in_ok(&mnt, &["hsm", "state", "f"]);
        if state.contains("exists archived") {
            break;
        }
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(start.elapsed() < Duration::from_secs(60), "never archived: {state}\n{log}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
