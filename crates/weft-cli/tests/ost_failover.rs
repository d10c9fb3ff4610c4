//! Failover OSTs under real programs: separate server processes (MGS, MDS, two OSS nodes
//! that serve each other's OST over the same directory, `[oss] failover_osts`), a FUSE
//! mount, and `fio --verify` writing files striped over both OSTs while the OSS serving
//! OST0000 is killed with SIGKILL, again and again (the killed one started again as the
//! standby for the next kill). fio finishes without an error and its verify passes (what
//! the dead server acknowledged was in the page cache of the shared directory), a second
//! mount verifies fio's files, and the time from each kill to the next answered (fsync'd)
//! write to a file on OST0000 is printed (median and worst). Then `weft failover`: bad input and a
//! server without a lease refused within seconds, a returning server not taking its OST
//! back by itself, and a move by hand.
//!
//! `WEFT_FAILOVER_KILLS` sets the number of kills (2 by default, 10 in `make soak`'s runs).

mod common;
use common::*;
use std::process::Command;
use std::time::{Duration, Instant};
use weft_proto::msg::TargetKind;

fn serving(c: &Cluster, index: u32) -> String {
    c.map().ok().and_then(|m| m.target(TargetKind::Ost, index).map(|t| t.address.clone())).unwrap_or_default()
}

#[test]
fn fio_verify_passes_across_kills_of_the_oss_serving_an_ost_and_the_ost_moves_back_by_hand() {
    let kills: usize = std::env::var("WEFT_FAILOVER_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(2).max(1);
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
    let name_of = |address: &str| if address == oss1 { "oss1" } else { "oss2" };
    let mgs = c.mgs_address.clone();
    assert_eq!((serving(&c, 0), serving(&c, 1)), (oss1.clone(), oss2.clone()));
    let mnt = c.mount();

    // A file on OST0000 alone, to time each failover by; fio's files striped over both.
    let probe = mnt.join("probe");
    weft_ok(&["setstripe", "-c", "1", "-i", "0", probe.to_str().unwrap()]);
    let probe_data = pattern(5, 0, 256 << 10);
    std::fs::write(&probe, &probe_data).unwrap();
    let job = |dir: &std::path::Path| {
        let mut fio = Command::new("fio");
        fio.args(["--name=ostfail", "--size=64M", "--bs=64k", "--rw=randwrite", "--ioengine=psync", "--end_fsync=1"])
            .args(["--verify=crc32c", "--verify_fatal=1", "--do_verify=1", "--numjobs=2", "--group_reporting"])
            // No verify state file in the test's working directory.
            .arg("--verify_state_save=0")
            .arg(format!("--directory={}", dir.display()));
        fio
    };

    // Each kill under a fio --verify of its own: the OSS serving OST0000 is killed 1 s in;
    // the other takes it over; the killed one comes back as its standby for the next kill.
    let mut waits = Vec::new();
    for k in 0..kills {
        let victim = serving(&c, 0);
        let heir = if victim == oss1 { oss2.clone() } else { oss1.clone() };
        let dir = mnt.join(format!("fio{k}"));
        std::fs::create_dir(&dir).unwrap();
        weft_ok(&["setstripe", "-c", "2", "-S", "64K", dir.to_str().unwrap()]);
        let mut fio = job(&dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("fio (installed by make deps)");
        std::thread::sleep(Duration::from_millis(1_000));
        assert!(fio.try_wait().unwrap().is_none(), "fio ended before kill {k}: make its files larger");
        let killed = Instant::now();
        c.kill9(name_of(&victim));
        // The next write to OST0000 made durable (an fsync waits for the OST's answer; a
        // read could be answered from the mount's cache, kept under its replayed locks).
        let fresh = pattern(100 + k as u64, 0, probe_data.len());
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().write(true).open(&probe).unwrap();
            f.write_all(&fresh).unwrap();
            f.sync_all().unwrap();
        }
        waits.push(killed.elapsed());
        assert_eq!(std::fs::read(&probe).unwrap(), fresh, "the probe's bytes after kill {k}");
        let fio = fio.wait_with_output().unwrap();
        assert!(
            fio.status.success(),
            "fio --verify failed across kill {k} of the OSS serving OST0000:\n{}{}",
            String::from_utf8_lossy(&fio.stdout),
            String::from_utf8_lossy(&fio.stderr)
        );
        assert_eq!(serving(&c, 0), heir, "OST0000 is served by its failover server after kill {k}");
        if k == 0 {
            // Moving by hand: bad input and a server without a lease refused within seconds.
            let refused = |args: &[&str]| {
                let started = Instant::now();
                let out = weft(args);
                assert!(!out.status.success(), "weft {args:?} succeeded");
                assert!(started.elapsed() < Duration::from_secs(10), "weft {args:?} took {:?}", started.elapsed());
                String::from_utf8_lossy(&out.stderr).to_string()
            };
            let e = refused(&["failover", "weft-OST0009", "--to", &victim, "--mgs", &mgs]);
            assert!(e.contains("weft-OST0009 is not registered; the OSTs are: weft-OST0000, weft-OST0001"), "{e}");
            let e = refused(&["failover", "weft-OST0000", "--to", "127.0.0.9:1", "--mgs", &mgs]);
            assert!(
                e.contains("127.0.0.9:1 is not a server of weft-OST0000; its servers are:") && e.contains(&oss1),
                "{e}"
            );
            let e = refused(&["failover", "weft-OST0000", "--to", &victim, "--mgs", &mgs]);
            assert!(e.contains(&format!("{victim} holds no lease")), "{e}");
        }
        // The killed server comes back: it does not take OST0000 back by itself.
        c.restart(name_of(&victim));
        std::thread::sleep(Duration::from_millis(1_500));
        assert_eq!(serving(&c, 0), heir, "the returning server took its OST back by itself");
    }
    let mut sorted = waits.clone();
    sorted.sort();
    println!(
        "OSS serving OST0000 killed {kills} times, each 1 s into fio --verify: an fsync'd write to OST0000 answered after median {:.2} s, worst {:.2} s ({:?})",
        sorted[sorted.len() / 2].as_secs_f64(),
        sorted[sorted.len() - 1].as_secs_f64(),
        waits.iter().map(|w| format!("{:.2}", w.as_secs_f64())).collect::<Vec<_>>()
    );

    // What fio wrote is on the OSTs: a second mount, with nothing cached, verifies it.
    let other = c.mount();
    for k in 0..kills {
        let verify = job(&other.join(format!("fio{k}"))).arg("--verify_only").output().expect("fio");
        assert!(
            verify.status.success(),
            "fio --verify_only of fio{k} on a second mount failed:\n{}{}",
            String::from_utf8_lossy(&verify.stdout),
            String::from_utf8_lossy(&verify.stderr)
        );
    }

    // An admin moves it back.
    let (from, to) = (serving(&c, 0), if serving(&c, 0) == oss1 { oss2.clone() } else { oss1.clone() });
    let out = weft_ok(&["failover", "0", "--to", &to, "--mgs", &mgs]);
    assert!(out.contains(&format!("weft-OST0000: served by {to} (was {from})")), "{out}");
    let last = pattern(100 + kills as u64 - 1, 0, probe_data.len());
    assert_eq!(std::fs::read(&probe).unwrap(), last, "the probe's bytes after the move by hand");
    assert_eq!(std::fs::read(other.join("probe")).unwrap(), last, "the probe's bytes, seen from the second mount");
    let out = weft_ok(&["get-param", "--mgs", &mgs, "obdfilter.weft-OST0000.recovery_status"]);
    assert!(out.contains("status:"), "{out}");
}
