//! Node authentication as an administrator meets it: `weft key new`, servers that require
//! the key (every connection between them proves it too), a mount without the key or with
//! another refused at once with a sentence that says which, a mount with it working, and
//! hostile connections dropped, counted in the metrics, while the file system goes on.

mod common;
use common::*;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The separate-processes shape (management, metadata, two object servers), every server
/// requiring a key of `flavor`.
fn keyed_cluster(flavor: &str) -> Cluster {
    Cluster::start_keyed(
        &weft_bin(),
        vec![
            NodeSpec::new("mgs", "127.0.0.2").mgs(),
            NodeSpec::new("mds", "127.0.0.3").mdt(0),
            NodeSpec::new("oss1", "127.0.0.4").osts(&[0, 1]),
            NodeSpec::new("oss2", "127.0.0.5").osts(&[2, 3]),
        ],
        flavor,
    )
}

fn metrics(address: &str) -> String {
    let out = Command::new("curl").args(["-sS", "--max-time", "10", &format!("http://{address}/metrics")]).output();
    let out = out.expect("curl");
    assert!(out.status.success(), "curl {address}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of `weft_auth_failures_total{reason="REASON"}` at `address`.
fn auth_failures(address: &str, reason: &str) -> u64 {
    let text = metrics(address);
    let series = format!("weft_auth_failures_total{{reason=\"{reason}\"}} ");
    let line = text.lines().find(|l| l.starts_with(&series)).unwrap_or_else(|| panic!("no {series} in:\n{text}"));
    line[series.len()..].trim().parse().unwrap()
}

/// `weft mount` of the cluster at a new directory with `options`, expected to fail: its
/// stderr, and how long it took.
fn refused_mount(c: &Cluster, options: &str) -> (String, Duration) {
    let dir = c.dir.path().join(format!("refused{}", options.len()));
    std::fs::create_dir_all(&dir).unwrap();
    let start = Instant::now();
    let out = Command::new(weft_bin())
        .args(["mount", &c.mgs_address, s(&dir), "-o", options])
        .env_remove("WEFT_KEY_FILE")
        .output()
        .unwrap();
    let took = start.elapsed();
    assert!(!out.status.success(), "the mount succeeded: {out:?}");
    assert!(!weft_harness::is_mounted(&dir), "a refused mount left a mount behind");
    (String::from_utf8_lossy(&out.stderr).into_owned(), took)
}

#[test]
fn key_files_are_made_private_and_named_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fs.key");
    let made = weft_ok(&["key", "new", s(&path)]);
    assert!(made.contains("flavor skpi"), "{made}");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "a key file others may read");
    let shown = weft_ok(&["key", "show", s(&path)]);
    assert_eq!(shown, made, "show names the key as new did");
    let text = std::fs::read_to_string(&path).unwrap();
    let secret = text.lines().find_map(|l| l.strip_prefix("key = ")).unwrap();
    assert!(!shown.contains(secret), "show printed the secret");

    let again = weft(&["key", "new", s(&path)]);
    assert!(!again.status.success(), "overwrote a key file");
    let wrong = weft(&["key", "new", "--flavor", "ski", s(&dir.path().join("x"))]);
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(!wrong.status.success() && err.contains("use skpi"), "{err}");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let open = weft(&["key", "show", s(&path)]);
    assert!(String::from_utf8_lossy(&open.stderr).contains("chmod 600"), "{open:?}");
}

#[test]
fn a_mount_without_the_key_is_refused_and_one_with_it_works() {
    let mut c = keyed_cluster("skpi");
    let key = c.key.clone().unwrap();
    let mgs_metrics = c.servers.iter().find(|s| s.spec.mgs).unwrap().metrics.clone();

    // Without a key: refused at connect, saying what is missing, within seconds.
    let (err, took) = refused_mount(&c, "timeout=30");
    assert!(err.contains("requires its shared key"), "{err}");
    assert!(took < Duration::from_secs(15), "took {took:?} to fail");
    assert!(auth_failures(&mgs_metrics, "no_key") >= 1);
    let mgs_log = std::fs::read_to_string(&c.servers.iter().find(|s| s.spec.mgs).unwrap().log).unwrap();
    assert!(mgs_log.contains("it has no key"), "the server did not say why it refused");

    // Another file system's key: refused, both keys named.
    let other = c.dir.path().join("other.key");
    weft_ok(&["key", "new", s(&other)]);
    let (err, _) = refused_mount(&c, &format!("timeout=30,skpath={}", other.display()));
    assert!(err.contains("is not this file system's"), "{err}");
    assert!(auth_failures(&mgs_metrics, "wrong_key") >= 1);

    // With the key: a working file system, every byte between the nodes sealed.
    let m = c.mount();
    let data: Vec<u8> = pattern(7, 0, 6 << 20);
    std::fs::write(m.join("f"), &data).unwrap();
    sh(&m, "mkdir d && cp f d/g && tar cf t.tar d && mkdir x && tar xf t.tar -C x && cmp f x/d/g");
    assert_eq!(std::fs::read(m.join("x/d/g")).unwrap(), data);
    // `--key` on the command line serves a command that talks to the servers itself.
    let param = ["get-param", "-n", "--mgs", &c.mgs_address, "ost.OSS.ost_io.nrs_policies"];
    let keyless = weft(&param);
    assert!(!keyless.status.success(), "a command without the key was served: {keyless:?}");
    let mut keyed = vec!["--key", s(&key)];
    keyed.extend_from_slice(&param);
    let policies = weft_ok(&keyed);
    assert!(policies.contains("fifo"), "{policies}");
}

/// Random bytes, broken hellos and frames without a key at every server's port: each
/// connection dropped and counted, the mount goes on reading and writing.
#[test]
fn hostile_connections_are_dropped_and_counted_and_the_file_system_goes_on() {
    let mut c = keyed_cluster("skpi");
    let m = c.mount();
    std::fs::write(m.join("before"), b"kept").unwrap();
    let oss = c.servers.iter().find(|s| s.spec.name == "oss1").unwrap();
    let (oss_address, oss_metrics) = (oss.address.clone(), oss.metrics.clone());
    let before = auth_failures(&oss_metrics, "handshake");
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    const ROUNDS: u64 = 40;
    for round in 0..ROUNDS {
        let len = 1 + (next() % 2000) as usize;
        let mut junk: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if round % 4 == 0 {
            // The handshake's own magic and version, then garbage.
            junk.splice(0..0, [0x57, 0x46, 0x54, 0x4b, 0, weft_proto::wire::PROTOCOL_VERSION as u8, 2, 0]);
        } else if junk.starts_with(b"WFT") {
            junk[0] = 0;
        }
        let mut s = std::net::TcpStream::connect(&oss_address).unwrap();
        let _ = s.write_all(&junk);
        let _ = s.shutdown(std::net::Shutdown::Write);
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut s, &mut sink);
    }
    let start = Instant::now();
    while auth_failures(&oss_metrics, "handshake") < before + ROUNDS {
        assert!(start.elapsed() < Duration::from_secs(20), "{}", auth_failures(&oss_metrics, "handshake"));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(std::fs::read(m.join("before")).unwrap(), b"kept");
    let data = pattern(3, 0, 3 << 20);
    std::fs::write(m.join("after"), &data).unwrap();
    sh(&m, "sync");
    assert_eq!(std::fs::read(m.join("after")).unwrap(), data);
    assert!(c.servers.iter().all(|s| metrics(&s.metrics).contains("weft_auth_failures_total")));
    drop_mounts(&mut c);
}

fn drop_mounts(c: &mut Cluster) {
    let paths: Vec<std::path::PathBuf> = c.mounts.iter().map(|m| m.path.clone()).collect();
    for p in paths {
        let _ = Command::new("fusermount3").arg("-u").arg(Path::new(&p)).status();
    }
}
