//! Bandwidth reservations on a cluster of separate processes: OSTs given a capacity, two
//! reservations of one OST whose sum is over it (the second planned after the first, and kept
//! across a kill -9 of the management service), each job measuring its reserved rate while an
//! unreserved job writes as fast as it can, a cancel that gives the bandwidth back and takes
//! the rules away, and bad input refused with the reason.

mod common;
use common::*;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A writer of job `job` (the mount's jobid_var) that writes as fast as it can until dropped.
struct Flood(Child);

impl Flood {
    fn start(job: &str, dir: &Path) -> Flood {
        let child = Command::new("sh")
            .arg("-c")
            .arg("while :; do dd if=/dev/zero of=flood bs=1M count=64 oflag=direct status=none; done")
            .current_dir(dir)
            .env("WEFT_JOB", job)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start the flood");
        Flood(child)
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        // The shell and the dd it runs: the whole group.
        // SAFETY: a plain kill(2) of the group this child leads.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// MiB/s job `job` writes `mib` MiB into `file` at.
fn write_rate(job: &str, file: &Path, mib: u64) -> f64 {
    let t0 = Instant::now();
    let out = Command::new("dd")
        .args([
            "if=/dev/zero",
            &format!("of={}", file.display()),
            "bs=1M",
            &format!("count={mib}"),
            "oflag=direct",
            "conv=fsync",
        ])
        .env("WEFT_JOB", job)
        .output()
        .unwrap();
    assert!(out.status.success(), "dd: {}", String::from_utf8_lossy(&out.stderr));
    mib as f64 / t0.elapsed().as_secs_f64()
}

fn state(mgs: &str, id: &str) -> serde_json::Value {
    serde_json::from_str(&weft_ok(&["qos", "status", id, "--json", "--mgs", mgs])).unwrap()
}

fn wait_state(mgs: &str, id: &str, want: &str, limit: Duration) -> serde_json::Value {
    let t0 = Instant::now();
    loop {
        let s = state(mgs, id);
        if s["state"] == want {
            return s;
        }
        assert!(t0.elapsed() < limit, "reservation {id} not {want} within {limit:?}: {s}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn reserved_jobs_get_their_rate_in_turn_while_an_unreserved_one_floods() {
    // One OST per OSS process: TBF rules are per process, so the rest's limit there is its
    // one OST's capacity less what is reserved on it.
    let mut c = Cluster::start(
        &weft_bin(),
        vec![
            NodeSpec::new("mgs", "127.0.0.2").mgs(),
            NodeSpec::new("mds", "127.0.0.3").mdt(0),
            NodeSpec::new("oss1", "127.0.0.4").osts(&[0]),
            NodeSpec::new("oss2", "127.0.0.5").osts(&[1]),
        ],
    );
    let mnt = c.mount_with("jobid_var=WEFT_JOB");
    let mgs = c.mgs_address.clone();
    let oss1 = c.servers.iter().find(|s| s.spec.name == "oss1").unwrap().address.clone();
    for d in ["a", "c"] {
        std::fs::create_dir(mnt.join(d)).unwrap();
        weft_ok(&["setstripe", "-c", "1", "-i", "0", s(&mnt.join(d))]);
    }

    // Nothing can be reserved before the OSTs have a capacity; only root sets it.
    let reserve = |id: &str, rate: &str, secs: &str| {
        weft(&[
            "qos",
            "reserve",
            "--throughput",
            rate,
            "--duration",
            secs,
            "--path",
            s(&mnt.join("a")),
            "--id",
            id,
            "--mgs",
            &mgs,
        ])
    };
    let e = failure_stderr(&reserve("100", "24M", "10s"));
    assert!(e.contains("weft-OST0000 has no capacity in bytes/s"), "{e}");
    let as_user = sh_as(1000, 1000, &mnt, &format!("{} qos capacity --set 40M --mgs {mgs}", weft_bin().display()));
    assert!(String::from_utf8_lossy(&as_user.stderr).contains("only root sets the OSTs' capacities"));
    weft_ok(&["qos", "capacity", "--set", "40M", "--mgs", &mgs]);
    let caps = weft_ok(&["qos", "capacity", "--mgs", &mgs]);
    assert!(caps.contains("OST0000: 40M (0 reserved now) bytes/s"), "{caps}");

    // Over the OST's capacity: refused, naming what is free.
    let e = failure_stderr(&reserve("100", "100M", "10s"));
    assert!(e.contains("over weft-OST0000's capacity of 40M (free now: 40M): at most 40M in all"), "{e}");
    let e = failure_stderr(&weft(&[
        "qos",
        "reserve",
        "--throughput",
        "fast",
        "--duration",
        "1s",
        "--ost",
        "0",
        "--id",
        "x",
        "--mgs",
        &mgs,
    ]));
    assert!(e.contains("500rps"), "{e}");

    // 24 + 24 MiB/s of OST0's 40: the second waits for the first.
    let first = weft_ok(&[
        "qos",
        "reserve",
        "--throughput",
        "24M",
        "--duration",
        "120s",
        "--path",
        s(&mnt.join("a")),
        "--id",
        "101",
        "--wait",
        "--mgs",
        &mgs,
    ]);
    assert!(first.contains("101 job 101: 24M on weft-OST0000 (24M each) for 120 s, active"), "{first}");
    let second = weft_ok(&[
        "qos",
        "reserve",
        "--throughput",
        "24M",
        "--duration",
        "16s",
        "--ost",
        "0",
        "--id",
        "102",
        "--mgs",
        &mgs,
    ]);
    assert!(second.contains("scheduled, starts"), "{second}");
    let (a, b) = (state(&mgs, "101"), state(&mgs, "102"));
    assert_eq!(b["state"], "scheduled");
    assert_eq!(b["start_ms"].as_u64().unwrap(), a["start_ms"].as_u64().unwrap() + 120_000, "b starts when a ends");
    assert_eq!(state(&mgs, "nosuch")["state"], "undefined");

    // The plan survives a kill -9 of the management service.
    c.kill9("mgs");
    c.restart("mgs");
    assert_eq!(state(&mgs, "102"), b, "kept across the restart");

    // The unreserved job runs on another node (a second mount): on one client the jobs would
    // share its requests in flight to the OST, and the flood's, held by its rule, would hold
    // the reserved job's back before they reach the server (as Lustre's osc shares its
    // max_rpcs_in_flight between a node's jobs).
    let other = c.mount_with("jobid_var=WEFT_JOB");
    let flood = Flood::start("other", &other.join("c"));
    std::thread::sleep(Duration::from_millis(500));
    let rate_a = write_rate("101", &mnt.join("a/f"), 72);
    let classes = weft_ok(&["get-param", "-n", "--server", &oss1, "ost.OSS.ost_io.nrs_tbf_rule"]);
    eprintln!("reserved 24 MiB/s: job 101 wrote at {rate_a:.1} MiB/s; rules on oss1:\n{classes}");
    assert!((21.6..=26.4).contains(&rate_a), "job 101 at {rate_a:.1} MiB/s against its 24");
    assert!(classes.contains("qrest"), "{classes}");

    assert_eq!(state(&mgs, "101")["state"], "active", "measured while 101 was active");

    // 101 ends early: 102 moves up to now.
    let done = weft_ok(&["qos", "cancel", "101", "--mgs", &mgs]);
    assert!(done.contains(", done,"), "{done}");
    let moved = wait_state(&mgs, "102", "active", Duration::from_secs(5));
    assert!(moved["start_ms"].as_u64().unwrap() < b["start_ms"].as_u64().unwrap(), "{moved}");
    let rate_b = write_rate("102", &mnt.join("a/g"), 72);
    let rate_b2 = write_rate("102", &mnt.join("a/g2"), 48);
    eprintln!("reserved 24 MiB/s: job 102 wrote at {rate_b:.1} MiB/s, then {rate_b2:.1}");
    for rate in [rate_b, rate_b2] {
        assert!((21.6..=26.4).contains(&rate), "job 102 at {rate:.1} MiB/s against its 24");
    }
    // Another unreserved job gets what is left: 40 - 24 MiB/s (each unreserved job is held
    // to it: TBF counts per job).
    let rest = write_rate("late", &other.join("c/h"), 48);
    eprintln!("unreserved beside 102 and the flood: {rest:.1} MiB/s of the 16 left");
    assert!((14.4..=17.6).contains(&rest), "the unreserved job at {rest:.1} MiB/s against the 16 left");
    assert_eq!(state(&mgs, "102")["state"], "active", "measured while 102 was active");

    drop(flood);
    // Cancelled early: done, and the rules go (the service back to FIFO).
    let done = weft_ok(&["qos", "cancel", "102", "--mgs", &mgs]);
    assert!(done.contains(", done,"), "{done}");
    let t0 = Instant::now();
    loop {
        let p = weft_ok(&["get-param", "-n", "--server", &oss1, "ost.OSS.ost_io.nrs_policies"]);
        if p.contains("- name: fifo\n    state: started") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "the reservations' rules still there: {p}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let list = weft_ok(&["qos", "list", "--mgs", &mgs]);
    assert!(list.contains("101 job 101") && list.contains("102 job 102") && !list.contains("active"), "{list}");
    let rate_free = write_rate("free", &other.join("c/i"), 64);
    eprintln!("after the cancel, the unreserved job: {rate_free:.1} MiB/s");
    assert!(rate_free > 16.0 * 1.5, "still held after the cancel: {rate_free:.1} MiB/s");
}

/// A C program and a Python program reserve before their write phase (libweft's
/// weft_qos_reserve_sync, the module's qos_reserve with wait), and write at the rate.
#[test]
fn programs_reserve_before_their_write_phase_and_write_at_the_reserved_rate() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = build_c_program("qos_test", tmp.path());
    install_python_module(tmp.path());
    let mut c = Cluster::start(
        &weft_bin(),
        vec![
            NodeSpec::new("mgs", "127.0.0.2").mgs(),
            NodeSpec::new("mds", "127.0.0.3").mdt(0),
            NodeSpec::new("oss1", "127.0.0.4").osts(&[0]),
        ],
    );
    let mnt = c.mount();
    let mgs = c.mgs_address.clone();
    weft_ok(&["qos", "capacity", "--set", "40M", "--mgs", &mgs]);
    std::fs::create_dir(mnt.join("ckpt")).unwrap();

    let out = Command::new(&exe).args([&mgs, "/ckpt", "16M", "48"]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the C program: {said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("all checks held"), "{said}");
    let rate_c = rate_said(&said);

    let out = Command::new(python())
        .arg(workspace().join("python/tests/qos_checkpoint.py"))
        .args([&mgs, "/ckpt", "16M", "48"])
        .env("PYTHONPATH", tmp.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the Python program: {said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("all checks held"), "{said}");
    let rate_py = rate_said(&said);
    eprintln!("reserved 16 MiB/s: the C program wrote at {rate_c:.1} MiB/s, the Python one at {rate_py:.1}");
    for (who, rate) in [("C", rate_c), ("Python", rate_py)] {
        assert!((14.4..=17.6).contains(&rate), "the {who} program at {rate:.1} MiB/s against its 16");
    }
    assert_eq!(std::fs::metadata(mnt.join("ckpt/ckpt")).unwrap().len(), 48 << 20);
    assert_eq!(std::fs::metadata(mnt.join("ckpt/ckpt-py")).unwrap().len(), 48 << 20);
    let list = weft_ok(&["qos", "list", "--mgs", &mgs]);
    assert!(list.contains("c1 job ckpt-c: 16M") && list.contains("py1 job ckpt-py: 16M"), "{list}");

    // Calibrated: the OST's measured rate becomes its capacity (nothing holds it now).
    let cal: serde_json::Value = serde_json::from_str(&weft_ok(&[
        "qos",
        "calibrate",
        "--dir",
        s(&mnt.join("ckpt")),
        "--size",
        "32M",
        "--json",
        "--mgs",
        &mgs,
    ]))
    .unwrap();
    let measured = cal[0]["bytes_per_s"].as_u64().unwrap();
    eprintln!("calibrated OST0000 at {} MiB/s", measured >> 20);
    assert!(measured > 40 << 20, "calibrated at {measured} bytes/s, below the 40 MiB/s it was held to");
    assert!(weft_ok(&["qos", "capacity", "--mgs", &mgs]).contains(&format!("OST0000: {}M", measured >> 20)));
    assert_eq!(std::fs::read_dir(mnt.join("ckpt")).unwrap().count(), 2, "the test file removed");
    weft_ok(&["qos", "capacity", "--set", "40M", "--mgs", &mgs]);

    // The dashboard draws them per OST over time, with one active and one planned after it.
    weft_ok(&[
        "qos",
        "reserve",
        "--throughput",
        "24M",
        "--duration",
        "10m",
        "--ost",
        "0",
        "--id",
        "dash-a",
        "--mgs",
        &mgs,
    ]);
    weft_ok(&[
        "qos",
        "reserve",
        "--throughput",
        "32M",
        "--duration",
        "5m",
        "--ost",
        "0",
        "--id",
        "dash-b",
        "--mgs",
        &mgs,
    ]);
    let metrics = c.servers.iter().find(|s| s.spec.mgs).unwrap().metrics.clone();
    let url = format!("http://{metrics}/");
    let dom = chromium(&["--dump-dom"], &url);
    assert!(dom.contains("data-ready=\"1\""), "the page never finished loading its data:\n{dom}");
    assert!(dom.contains("data-ost=\"weft-OST0000\"") && dom.contains("capacity 40.0 MiB/s"), "{dom}");
    for (id, state) in [("dash-a", "active"), ("dash-b", "scheduled"), ("c1", "done")] {
        let shown = format!("<tr data-state=\"{state}\"><td>{id}</td>");
        assert!(dom.contains(&shown), "{id} {state} not in the table:\n{dom}");
    }
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-reservations.png");
    let _ = std::fs::remove_file(&shot);
    chromium(&["--window-size=1400,2600", &format!("--screenshot={}", shot.display())], &url);
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 20_000, "a screenshot of {} bytes", png.len());
}

fn rate_said(out: &str) -> f64 {
    out.lines()
        .find_map(|l| l.strip_prefix("rate "))
        .and_then(|r| r.trim().parse().ok())
        .unwrap_or_else(|| panic!("no rate in {out}"))
}
