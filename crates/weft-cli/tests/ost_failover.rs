//! Failover OSTs under real programs: separate server processes (MGS, MDS, two OSS nodes
//! that serve each other's OST over the same directory, `[oss] failover_osts`), a FUSE
//! mount, and `fio --verify` writing files striped over both OSTs while the OSS serving
//! OST0000 is killed with SIGKILL. fio finishes without an error and its verify passes
//! (what the dead server acknowledged was in the page cache of the shared directory); the
//! time from the kill to the next answered read of a file on OST0000 is printed. Then `weft
//! failover`: bad input and a server without a lease refused within seconds, the returning
//! server not taking its OST back by itself, and a move by hand back to it.

mod common;
use common::*;
use std::process::Command;
use std::time::{Duration, Instant};
use weft_proto::msg::TargetKind;

fn serving(c: &Cluster, index: u32) -> String {
    c.map().ok().and_then(|m| m.target(TargetKind::Ost, index).map(|t| t.address.clone())).unwrap_or_default()
}

#[test]
fn fio_verify_passes_across_the_kill_of_the_oss_serving_an_ost_and_the_ost_moves_back_by_hand() {
    let mut c = Cluster::start(
        &weft_bin(),
        vec![
            NodeSpec::new("mgs", "127.0.0.2").mgs(),
            NodeSpec::new("mds", "127.0.0.3").mdt(0),
            NodeSpec::new("oss1", "127.0.0.4").osts(&[0]).failover_osts(&[1]),
            NodeSpec::new("oss2", "127.0.0.5").osts(&[1]).failover_osts(&[0]),
        ],
    );
    let (oss1, oss2) = (c.server("oss1").address.clone(), c.server("oss2").address.clone());
    let mgs = c.mgs_address.clone();
    assert_eq!((serving(&c, 0), serving(&c, 1)), (oss1.clone(), oss2.clone()));
    let mnt = c.mount();

    // A file on OST0000 alone, to time the failover by; fio's files striped over both.
    let probe = mnt.join("probe");
    weft_ok(&["setstripe", "-c", "1", "-i", "0", probe.to_str().unwrap()]);
    let probe_data = pattern(5, 0, 256 << 10);
    std::fs::write(&probe, &probe_data).unwrap();
    let dir = mnt.join("fio");
    std::fs::create_dir(&dir).unwrap();
    weft_ok(&["setstripe", "-c", "2", "-S", "64K", dir.to_str().unwrap()]);
    let job = |dir: &std::path::Path| {
        let mut fio = Command::new("fio");
        fio.args(["--name=ostfail", "--size=64M", "--bs=64k", "--rw=randwrite", "--ioengine=psync", "--end_fsync=1"])
            .args(["--verify=crc32c", "--verify_fatal=1", "--do_verify=1", "--numjobs=2", "--group_reporting"])
            // No verify state file in the test's working directory.
            .arg("--verify_state_save=0")
            .arg(format!("--directory={}", dir.display()));
        fio
    };
    let started = Instant::now();
    let mut fio = job(&dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("fio (installed by make deps)");

    std::thread::sleep(Duration::from_millis(1_000));
    assert!(fio.try_wait().unwrap().is_none(), "fio ended before the kill: make its files larger");
    let killed = Instant::now();
    c.kill9("oss1");
    // The next read of OST0000 answered (by the mount, which follows the map).
    assert_eq!(std::fs::read(&probe).unwrap(), probe_data, "the probe's bytes after the failover");
    let answered = killed.elapsed();
    let fio = fio.wait_with_output().unwrap();
    let fio_took = started.elapsed();
    assert!(
        fio.status.success(),
        "fio --verify failed across the OSS's kill:\n{}{}",
        String::from_utf8_lossy(&fio.stdout),
        String::from_utf8_lossy(&fio.stderr)
    );
    println!(
        "OSS serving OST0000 killed 1 s into fio --verify: a read of OST0000 answered {:.2} s after the kill; fio passed in {:.1} s",
        answered.as_secs_f64(),
        fio_took.as_secs_f64()
    );
    assert_eq!(serving(&c, 0), oss2, "OST0000 is served by its failover server");
    // What fio wrote is on the OSTs: a second mount, with nothing cached, verifies it.
    let other = c.mount();
    let verify = job(&other.join("fio")).arg("--verify_only").output().expect("fio");
    assert!(
        verify.status.success(),
        "fio --verify_only on a second mount failed:\n{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );

    // Moving by hand: bad input and a server without a lease refused within seconds.
    let refused = |args: &[&str]| {
        let started = Instant::now();
        let out = weft(args);
        assert!(!out.status.success(), "weft {args:?} succeeded");
        assert!(started.elapsed() < Duration::from_secs(10), "weft {args:?} took {:?}", started.elapsed());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let e = refused(&["failover", "weft-OST0009", "--to", &oss1, "--mgs", &mgs]);
    assert!(e.contains("weft-OST0009 is not registered; the OSTs are: weft-OST0000, weft-OST0001"), "{e}");
    let e = refused(&["failover", "weft-OST0000", "--to", "127.0.0.9:1", "--mgs", &mgs]);
    assert!(e.contains("127.0.0.9:1 is not a server of weft-OST0000; its servers are:") && e.contains(&oss1), "{e}");
    let e = refused(&["failover", "weft-OST0000", "--to", &oss1, "--mgs", &mgs]);
    assert!(e.contains(&format!("{oss1} holds no lease")), "{e}");

    // The killed server comes back: it does not take OST0000 back by itself...
    c.restart("oss1");
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(serving(&c, 0), oss2, "the returning server took its OST back by itself");
    // ...until an admin moves it.
    let out = weft_ok(&["failover", "0", "--to", &oss1, "--mgs", &mgs]);
    assert!(out.contains(&format!("weft-OST0000: served by {oss1} (was {oss2})")), "{out}");
    assert_eq!(std::fs::read(&probe).unwrap(), probe_data, "the probe's bytes after the move back");
    let out = weft_ok(&["get-param", "--mgs", &mgs, "obdfilter.weft-OST0000.recovery_status"]);
    assert!(out.contains("status:"), "{out}");
}
