//! Mirrors (FLR) through real mounts on separate server processes: a file with a mirror on
//! each object server stays readable, byte for byte, with either server killed; a write
//! marks the other mirror stale, `mirror verify` shows it, `mirror resync` makes it whole;
//! extend and split.

mod common;
use common::*;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `weft mirror verify -v F`: its exit status and output.
fn verify(f: &Path) -> (bool, String) {
    let out = weft(&["mirror", "verify", "-v", p(f)]);
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Reads `f` through a mount made now (no cached pages), within `limit`.
fn read_fresh(c: &mut Cluster, name: &str, limit: Duration) -> Vec<u8> {
    let m = c.mount();
    let started = Instant::now();
    let data = std::fs::read(m.join(name)).unwrap();
    assert!(started.elapsed() < limit, "the read took {:?}\n{}", started.elapsed(), c.log_tails());
    data
}

#[test]
fn a_two_mirror_file_reads_whole_with_either_object_server_down_and_resyncs_after_a_write() {
    let mut c = Cluster::multi_node(&weft_bin());
    let m = c.mount();
    let f = m.join("mirrored");
    // Mirror 1 on oss1's OST 0, mirror 2 on oss2's OST 2.
    weft_ok(&["mirror", "create", "-N", "-o", "0", "-N", "-o", "2", p(&f)]);
    let out = weft_ok(&["getstripe", p(&f)]);
    assert!(out.contains("lcm_mirror_count:  2"), "{out}");
    assert_eq!(mirror_flags(&f), [("1".into(), "init".into()), ("2".into(), "init".into())]);
    let mut data = pattern(21, 0, 8 << 20);
    std::fs::write(&f, &data).unwrap();
    // The write went to one mirror; the other is stale until a resync.
    assert_eq!(mirror_flags(&f), [("1".into(), "init".into()), ("2".into(), "init,stale".into())]);
    let (ok, out) = verify(&f);
    assert!(!ok && out.contains("mirror 2 (stale) differs from mirror 1 at byte 0"), "{out}");
    weft_ok(&["mirror", "resync", p(&f)]);
    assert_eq!(mirror_flags(&f), [("1".into(), "init".into()), ("2".into(), "init".into())]);
    let (ok, out) = verify(&f);
    assert!(ok && out.contains("mirror 2 (in sync) has the data of mirror 1"), "{out}");

    // Either object server down: the file reads whole through the other mirror.
    for (down, name) in [("oss1", "mirror 1"), ("oss2", "mirror 2")] {
        c.kill9(down);
        let got = read_fresh(&mut c, "mirrored", Duration::from_secs(30));
        assert!(got == data, "read with {down} ({name}) down");
        c.restart(down);
    }

    // A write in the middle: mirror 2 goes stale and verify says where it differs.
    let w = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
    let patch = pattern(22, 1 << 20, 64 << 10);
    w.write_all_at(&patch, 1 << 20).unwrap();
    w.sync_all().unwrap();
    drop(w);
    data[1 << 20..(1 << 20) + (64 << 10)].copy_from_slice(&patch);
    let (ok, out) = verify(&f);
    assert!(!ok && out.contains(&format!("mirror 2 (stale) differs from mirror 1 at byte {}", 1 << 20)), "{out}");
    // While mirror 2 is stale, reads never come from it, even with its server the only one up.
    weft_ok(&["mirror", "resync", p(&f)]);
    assert!(verify(&f).0);
    c.kill9("oss1");
    assert!(read_fresh(&mut c, "mirrored", Duration::from_secs(30)) == data, "mirror 2 after the resync");
    c.restart("oss1");

    // Extend with a third mirror (copied at once), then split one off.
    weft_ok(&["mirror", "extend", "-N", "-o", "1", p(&f)]);
    let flags = mirror_flags(&f);
    assert_eq!(flags.len(), 3, "{flags:?}");
    assert!(flags.iter().all(|(_, fl)| fl == "init"), "{flags:?}");
    assert!(verify(&f).0);
    weft_ok(&["mirror", "split", "--mirror-id", "2", "-d", p(&f)]);
    let ids: Vec<String> = mirror_flags(&f).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, ["1", "3"]);
    assert!(read_fresh(&mut c, "mirrored", Duration::from_secs(30)) == data);
    // The last mirror in sync stays: after a write only mirror 1 is, and it cannot go.
    std::fs::OpenOptions::new().write(true).open(&f).unwrap().write_all_at(b"x", 0).unwrap();
    let split = weft(&["mirror", "split", "--mirror-id", "1", "-d", p(&f)]);
    assert!(!split.status.success(), "splitting the only mirror in sync");
    assert!(String::from_utf8_lossy(&split.stderr).contains("only one in sync"));
    let bad = weft(&["mirror", "split", "--mirror-id", "9", "-d", p(&f)]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no mirror 9 (its mirrors: 1, 3)"));
}
