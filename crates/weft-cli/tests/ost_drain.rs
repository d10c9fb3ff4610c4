//! OSTs drained, deactivated, emptied and removed on a live file system (issue 35 item 3),
//! on a cluster of separate processes: an MGS and MDS, two OSS processes of two OSTs each.
//!
//! * `an_ost_drained_emptied_and_removed_under_fio_loses_nothing`: `max_create_count=0`
//!   keeps new files off OST 3 (and `weft df` marks it `N`) while destroys go on; `weft
//!   del-ost` refuses it while it takes new objects, then while objects remain (naming how
//!   many); `weft find --ost weft-OST0003_UUID | weft migrate` empties it; it leaves the map;
//!   meanwhile `fio --verify` runs on other files and passes, and every file reads back.
//!   Restoring `max_create_count` on OST 2 lets new files use it again; kept with `-P`, a
//!   drain holds across a restart of the MDS.
//! * `an_ost_deactivated_on_a_mount_fails_its_io_at_once`: `osc.*.active=0` on a mount
//!   makes I/O there EIO within a second and `weft df` there says "inactive device" (not
//!   on another mount); `active=1` brings it back. Set through the mount's attribute as
//!   `weft set-param` does, so as not to touch other tests' mounts on the machine.

mod common;

use common::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed when the test ends, whatever way it ends.
struct KillOnDrop(Option<Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn cluster() -> Cluster {
    Cluster::start(
        &weft_bin(),
        vec![
            NodeSpec::new("mds", "127.0.0.2").mgs().mdt(0),
            NodeSpec::new("oss1", "127.0.0.4").osts(&[0, 1]),
            NodeSpec::new("oss2", "127.0.0.5").osts(&[2, 3]),
        ],
    )
}

/// The OST indices `getstripe` lists for a file.
fn stripe_osts(path: &Path) -> Vec<u32> {
    let out = weft_ok(&["getstripe", s(path)]);
    let rows = out.lines().skip_while(|l| !l.contains("obdidx")).skip(1);
    rows.filter_map(|l| l.split_whitespace().next()?.parse().ok()).collect()
}

fn set_param(mgs: &str, param: &str) {
    weft_ok(&["set-param", "--mgs", mgs, param]);
}

/// `weft del-ost` of OST 3; its output, and whether it succeeded.
fn del_ost(mgs: &str, extra: &[&str]) -> (bool, String) {
    let mut args = vec!["del-ost", "--mgs", mgs, "--target", "weft-OST0003"];
    args.extend(extra);
    let out = weft(&args);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[test]
fn an_ost_drained_emptied_and_removed_under_fio_loses_nothing() {
    let mut c = cluster();
    let mgs = c.mgs_address.clone();
    let mnt = c.mount();

    // Files over every OST, 3 among them.
    let all = mnt.join("all");
    std::fs::create_dir(&all).unwrap();
    weft_ok(&["setstripe", "-c", "4", "-S", "64K", s(&all)]);
    for i in 0..12u64 {
        std::fs::write(all.join(format!("f{i}")), pattern(i, 0, 300_000)).unwrap();
    }
    let on3 = (0..12).filter(|i| stripe_osts(&all.join(format!("f{i}"))).contains(&3)).count();
    assert_eq!(on3, 12, "four stripes over four OSTs: every file has one on OST 3");

    // fio --verify on OSTs 0 and 1 all along: one run after another until the OST is gone.
    let fio_dir = mnt.join("fio");
    std::fs::create_dir(&fio_dir).unwrap();
    weft_ok(&["setstripe", "-c", "2", "-o", "0,1", "-S", "64K", s(&fio_dir)]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let fio = {
        let (stop, fio_dir) = (stop.clone(), fio_dir.clone());
        std::thread::spawn(move || {
            let mut runs = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Acquire) {
                let dir = fio_dir.join(format!("run{}", runs.len()));
                std::fs::create_dir(&dir).unwrap();
                let child = Command::new("fio")
                    .args(["--name=drain", "--size=16M", "--bs=64k", "--rw=randwrite", "--ioengine=psync"])
                    .args(["--end_fsync=1", "--verify=crc32c", "--verify_fatal=1", "--do_verify=1", "--numjobs=2"])
                    .args(["--group_reporting", "--verify_state_save=0"])
                    .arg(format!("--directory={}", dir.display()))
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("fio (installed by make deps)");
                let mut guard = KillOnDrop(Some(child));
                let out = guard.0.take().unwrap().wait_with_output().unwrap();
                let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
                runs.push((out.status.success(), text));
            }
            runs
        })
    };
    // Stops the fio loop however the test ends.
    struct Stop(std::sync::Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Release);
        }
    }
    let stopping = Stop(stop);

    // Not drained yet: refused, saying how to drain it.
    let (ok, text) = del_ost(&mgs, &[]);
    assert!(!ok && text.contains("still takes new objects") && text.contains("max_create_count=0"), "{text}");

    // Bad values are refused with what is allowed.
    let out = weft(&["set-param", "--mgs", &mgs, "osp.weft-OST0003-osc-MDT0000.max_create_count=20001"]);
    assert!(failure_stderr(&out).contains("0 (no new objects) to 20000"), "{}", failure_stderr(&out));

    // Drained: new files avoid it, df marks it N, get-param shows it.
    set_param(&mgs, "osp.weft-OST0003-osc-MDT0000.max_create_count=0");
    let got = weft_ok(&["get-param", "--mgs", &mgs, "osp.weft-OST0003-*.max_create_count"]);
    assert!(got.trim().ends_with("max_create_count=0"), "{got}");
    for i in 0..8 {
        let f = all.join(format!("new{i}"));
        std::fs::write(&f, pattern(100 + i, 0, 100_000)).unwrap();
        let osts = stripe_osts(&f);
        assert!(!osts.contains(&3) && osts.len() == 3, "{}: {osts:?} avoids the drained OST 3", f.display());
    }
    let named = weft(&["setstripe", "-c", "1", "-i", "3", s(&mnt.join("pinned"))]);
    assert!(!named.status.success(), "a new file named onto a drained OST is refused");
    let df = weft_ok(&["df", s(&mnt)]);
    let row = df.lines().find(|l| l.starts_with("weft-OST0003_UUID")).unwrap_or_else(|| panic!("{df}"));
    assert!(row.ends_with("[OST:3] N"), "{df}");
    assert!(df.lines().filter(|l| l.ends_with(" N")).count() == 1, "{df}");

    // Objects remain: refused, naming how many.
    let (ok, text) = del_ost(&mgs, &[]);
    assert!(!ok && text.contains("still holds 12 object(s) of 12 file(s)"), "{text}");

    // Emptied by find | migrate (Lustre's `lfs find --ost UUID | lfs_migrate`), files in use.
    let held = std::fs::File::open(all.join("f0")).unwrap();
    let w = weft_bin();
    sh(&mnt, &format!("{0} find . --ost weft-OST0003_UUID | {0} migrate", w.display()));
    drop(held);
    assert_eq!(weft_ok(&["find", s(&mnt), "--ost", "3"]).trim(), "", "nothing left on OST 3");
    // The old objects are destroyed though the OST takes no new ones.
    let deadline = Instant::now() + Duration::from_secs(20);
    let text = loop {
        let (ok, text) = del_ost(&mgs, &["--dryrun"]);
        if ok || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(text.contains("holds no objects"), "destroys on a drained OST go on: {text}");
    let (ok, text) = del_ost(&mgs, &[]);
    assert!(ok && text.contains("removed from the cluster map"), "{text}");
    let map = c.map().unwrap();
    assert!(map.osts().all(|t| t.index != 3), "OST 3 left the map");
    let df = weft_ok(&["df", s(&mnt)]);
    assert!(!df.contains("OST0003") && df.contains("weft-OST0002_UUID"), "{df}");
    let (ok, text) = del_ost(&mgs, &[]);
    assert!(!ok && text.contains("weft-OST0003 is not registered"), "{text}");

    // Nothing lost: every file as written, fio's verify passes.
    for i in 0..12u64 {
        let f = all.join(format!("f{i}"));
        assert!(std::fs::read(&f).unwrap() == pattern(i, 0, 300_000), "{} as written", f.display());
        assert!(!stripe_osts(&f).contains(&3));
    }
    for i in 0..8u64 {
        assert!(std::fs::read(all.join(format!("new{i}"))).unwrap() == pattern(100 + i, 0, 100_000));
    }
    drop(stopping);
    let runs = fio.join().unwrap();
    // One run after another from before the drain until after the removal (the loop looks
    // at the flag only between runs): fio was at work throughout.
    assert!(!runs.is_empty(), "fio ran");
    for (ok, text) in &runs {
        assert!(ok, "fio --verify during the drain and removal:\n{text}");
    }

    // Restoring max_create_count takes an OST back: drained, OST 2 gets nothing; restored,
    // new files of three stripes use it again.
    set_param(&mgs, "osp.weft-OST0002-osc-MDT0000.max_create_count=0");
    let f = all.join("two-drained");
    std::fs::write(&f, b"x").unwrap();
    assert_eq!(stripe_osts(&f).len(), 2, "only OSTs 0 and 1 take objects");
    set_param(&mgs, "osp.weft-OST0002-osc-MDT0000.max_create_count=20000");
    let f = all.join("two-back");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        std::fs::write(&f, b"x").unwrap();
        if stripe_osts(&f).contains(&2) {
            break;
        }
        assert!(Instant::now() < deadline, "OST 2 takes new objects again once restored");
        std::fs::remove_file(&f).unwrap();
        std::thread::sleep(Duration::from_millis(200));
    }

    // Kept with -P, a drain holds across a restart of the MDS (which learns its OSTs from
    // the map after it applied the permanent settings).
    weft_ok(&["set-param", "-P", "--mgs", &mgs, "osp.weft-OST0002-osc-MDT0000.max_create_count=0"]);
    c.kill9("mds");
    c.restart("mds");
    let got = weft_ok(&["get-param", "--mgs", &mgs, "osp.weft-OST0002-*.max_create_count"]);
    assert!(got.trim().ends_with("max_create_count=0"), "after the restart: {got}");
    let f = all.join("after-restart");
    std::fs::write(&f, b"x").unwrap();
    assert_eq!(stripe_osts(&f).len(), 2, "OST 2 still drained after the restart");
}

/// Sets a parameter on the mount at `mnt` alone, as `weft set-param` does on each of the
/// node's mounts (through `weft.param:NAME`): other tests' mounts on this machine are left
/// alone.
fn set_on_mount(mnt: &Path, name: &str, value: &str) -> std::io::Result<()> {
    let path = std::ffi::CString::new(s(mnt)).unwrap();
    let attr = std::ffi::CString::new(format!("weft.param:{name}")).unwrap();
    // SAFETY: valid C strings; value readable for its length.
    let r = unsafe { libc::setxattr(path.as_ptr(), attr.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// What `weft get-param NAME` shows of the mount at `mnt`: (name, value) pairs.
fn get_on_mount(mnt: &Path, name: &str) -> Vec<(String, String)> {
    let path = std::ffi::CString::new(s(mnt)).unwrap();
    let attr = std::ffi::CString::new(format!("weft.param:{name}")).unwrap();
    let mut buf = vec![0u8; 64 << 10];
    // SAFETY: valid C strings; buf writable for its length.
    let n = unsafe { libc::getxattr(path.as_ptr(), attr.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    assert!(n >= 0, "weft.param:{name}: {}", std::io::Error::last_os_error());
    let values: Vec<serde_json::Value> = serde_json::from_slice(&buf[..n as usize]).unwrap();
    values.iter().map(|v| (v["name"].as_str().unwrap().to_string(), v["value"].as_str().unwrap().to_string())).collect()
}

#[test]
fn an_ost_deactivated_on_a_mount_fails_its_io_at_once() {
    let mut c = cluster();
    let writer = c.mount();
    let on1 = writer.join("on1");
    weft_ok(&["setstripe", "-c", "1", "-i", "1", s(&on1)]);
    std::fs::write(&on1, pattern(1, 0, 100_000)).unwrap();
    let on2 = writer.join("on2");
    weft_ok(&["setstripe", "-c", "1", "-i", "2", s(&on2)]);
    std::fs::write(&on2, pattern(2, 0, 100_000)).unwrap();
    // A second mount, with nothing of those files cached, deactivates OST 1.
    let mnt = c.mount();
    let (on1, on2) = (mnt.join("on1"), mnt.join("on2"));

    let bad = set_on_mount(&mnt, "osc.weft-OST0001*.active", "maybe");
    assert_eq!(errno_of(bad), libc::EINVAL);
    let out = weft(&["set-param", "--server", "127.0.0.2:1", "osc.weft-OST0001*.active=maybe"]);
    assert!(!out.status.success());
    set_on_mount(&mnt, "osc.weft-OST0001*.active", "0").unwrap();
    let got = get_on_mount(&mnt, "osc.weft-OST0001*.active");
    assert!(got.len() == 1 && got[0].0.starts_with("osc.weft-OST0001-osc-") && got[0].1 == "0", "{got:?}");
    let started = Instant::now();
    let read = std::fs::read(&on1);
    assert_eq!(errno_of(read), libc::EIO, "I/O to a deactivated OST fails with EIO");
    assert!(started.elapsed() < Duration::from_secs(1), "at once: {:?}", started.elapsed());
    assert!(std::fs::read(&on2).unwrap() == pattern(2, 0, 100_000), "other OSTs are used as before");
    let df = weft_ok(&["df", s(&mnt)]);
    assert!(df.lines().any(|l| l == "OST0001             : inactive device"), "{df}");
    let other = weft_ok(&["df", s(&writer)]);
    assert!(!other.contains("inactive device"), "the other mount still uses OST 1:\n{other}");

    set_on_mount(&mnt, "osc.weft-OST0001*.active", "1").unwrap();
    assert!(std::fs::read(&on1).unwrap() == pattern(1, 0, 100_000), "activated again");
    let df = weft_ok(&["df", s(&mnt)]);
    assert!(!df.contains("inactive device") && df.contains("weft-OST0001_UUID"), "{df}");
}

/// `get-param` of a file system (`--mgs`) reads the parameters of this node's mounts of that
/// file system only, not those of another one mounted beside it.
#[test]
fn mount_parameters_of_one_file_system_leave_out_another_s_mounts() {
    let mut one = Cluster::single_node(&weft_bin(), 1);
    let mut two = Cluster::single_node(&weft_bin(), 1);
    let (m1, m2) = (one.mount(), two.mount());
    let of = |c: &Cluster| weft_ok(&["get-param", "--mgs", &c.mgs_address, "mdc.*.import"]);
    let (shown1, shown2) = (of(&one), of(&two));
    // One mount each (a list of several would name each line's mount), and not the same.
    for shown in [&shown1, &shown2] {
        assert_eq!(shown.matches("\nimport:\n").count(), 1, "{shown}");
        assert!(!shown.contains(&m1.display().to_string()) && !shown.contains(&m2.display().to_string()), "{shown}");
    }
    assert_ne!(shown1, shown2);
}
