//! The dashboard as a person sees it: a real headless browser (Debian's chromium) loads the
//! page the management service's process serves, waits for its charts, and the jobs of a
//! scripted workload are in them; a screenshot is kept as an artifact
//! (`target/tmp/dashboard.png`).

mod common;
use common::*;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn the_dashboard_draws_the_workloads_jobs_in_a_real_browser() {
    let mut c = Cluster::multi_node(&weft_bin());
    let mnt = c.mount_with("jobid_var=WEFT_JOB");
    for (job, file, mb) in [("dash_ingest", "a", 24), ("dash_train", "b", 12)] {
        let script = format!("dd if=/dev/zero of={file} bs=1M count={mb} conv=fsync status=none");
        let out = Command::new("sh").arg("-c").arg(&script).current_dir(&mnt).env("WEFT_JOB", job).output().unwrap();
        assert!(out.status.success());
    }
    // Wait for the monitor to have both jobs.
    let start = Instant::now();
    loop {
        let out = weft_ok(&["stats", "--since", "10m", "--by", "job", "--mgs", &c.mgs_address]);
        if out.contains("dash_ingest") && out.contains("dash_train") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the history never had the jobs:\n{out}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let mgs = c.servers.iter().find(|s| s.spec.mgs).unwrap().metrics.clone();
    let url = format!("http://{mgs}/");
    // The page after its scripts ran: ready, both jobs in the charts' legend, the space
    // and policy tables filled from every server.
    let dom = chromium(&["--dump-dom"], &url);
    assert!(dom.contains("data-ready=\"1\""), "the page never finished loading its data:\n{dom}");
    for job in ["dash_ingest", "dash_train"] {
        assert!(dom.contains(&format!("data-name=\"{job}\"")), "{job} is not in the charts:\n{dom}");
    }
    assert!(dom.contains("weft-OST0000") && dom.contains("weft-OST0003") && dom.contains("weft-MDT0000"), "{dom}");
    assert!(dom.contains("ost.OSS.ost_io") && dom.contains("fifo"), "{dom}");
    assert!(dom.contains("no decay policy"), "{dom}");
    // The screenshot, kept for a person to look at.
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    let _ = std::fs::remove_file(&shot);
    chromium(&["--window-size=1400,1400", &format!("--screenshot={}", shot.display())], &url);
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 20_000, "a screenshot of {} bytes", png.len());
}

/// Two jobs in separate I/O zones write at once: each zone's OSTs see only its job's
/// requests (`obdfilter.*.job_stats`), and the dashboard shows each zone's load, its
/// charts by zone and a table of the zones; a screenshot is kept
/// (`target/tmp/dashboard-zones.png`).
#[test]
fn two_jobs_in_separate_zones_write_at_once_and_the_dashboard_shows_each_zones_load() {
    let mut c = Cluster::multi_node(&weft_bin());
    let mnt = c.mount_with("jobid_var=WEFT_JOB");
    let mgs = c.mgs_address.clone();
    for (pool, osts) in [("zone1", "0,1"), ("zone2", "2,3")] {
        weft_ok(&["pool", "--mgs", &mgs, "new", pool]);
        weft_ok(&["pool", "--mgs", &mgs, "add", pool, osts]);
    }
    let start = Instant::now();
    for rule in ["jobid={ckpt*} pool=zone1", "jobid={ana*} pool=zone2"] {
        // The MDS learns of the new pools from the map it follows.
        while weft(&["set-param", "-P", &format!("lod.*.zone_rule={rule}"), "--mgs", &mgs]).status.code() != Some(0) {
            assert!(start.elapsed() < Duration::from_secs(10), "the zone rule {rule} was never taken");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    weft_ok(&["set-param", "obdfilter.*.job_stats=clear", "--mgs", &mgs]);
    // At once: each job writes its files, striped over all the OSTs it may use.
    std::fs::create_dir(mnt.join("runs")).unwrap();
    weft_ok(&["setstripe", "-c", "-1", s(&mnt.join("runs"))]);
    let writers: Vec<_> = [("ckpt.1", 32), ("ana.2", 12)]
        .into_iter()
        .map(|(job, mb)| {
            let script = format!("for i in 1 2 3 4; do dd if=/dev/zero of=runs/{job}.$i bs=1M count={mb} conv=fsync status=none || exit 1; done");
            Command::new("sh").arg("-c").arg(script).current_dir(&mnt).env("WEFT_JOB", job).spawn().unwrap()
        })
        .collect();
    for mut w in writers {
        assert!(w.wait().unwrap().success());
    }
    let stats = weft_ok(&["get-param", "obdfilter.*.job_stats", "--mgs", &mgs]);
    let mut target = String::new();
    for line in stats.lines() {
        if let Some(t) = line.split("obdfilter.").nth(1).and_then(|t| t.strip_suffix(".job_stats=")) {
            target = t.to_string();
        } else if let Some(job) = line.split("- job_id:").nth(1).map(str::trim) {
            let zone1 = target.ends_with("OST0000") || target.ends_with("OST0001");
            let allowed = if zone1 { "ckpt.1" } else { "ana.2" };
            assert_eq!(job, allowed, "{target} saw {job}:\n{stats}");
        }
    }
    assert!(stats.contains("ckpt.1") && stats.contains("ana.2"), "{stats}");

    let mgs_metrics = c.servers.iter().find(|s| s.spec.mgs).unwrap().metrics.clone();
    let api = format!("http://{mgs_metrics}/api/zones?secs=600");
    let start = Instant::now();
    let zones: serde_json::Value = loop {
        let z: serde_json::Value = serde_json::from_str(&http_get(&api)).unwrap();
        // 128 MiB against 48 MiB written over the same window, once the monitor has it all.
        let written = |i: usize| z["zones"][i]["write_bytes_per_s"].as_f64().unwrap_or(0.0);
        if written(1) > 0.0 && (2.0..3.5).contains(&(written(0) / written(1))) {
            break z;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "the zones' load never showed: {z}");
        std::thread::sleep(Duration::from_millis(500));
    };
    let (one, two) = (&zones["zones"][0], &zones["zones"][1]);
    assert_eq!((one["pool"].as_str(), two["pool"].as_str()), (Some("zone1"), Some("zone2")), "{zones}");
    assert_eq!(one["osts"], serde_json::json!(["weft-OST0000", "weft-OST0001"]));
    assert_eq!(one["rules"], serde_json::json!(["zone1: jobid={ckpt*}"]));
    assert_eq!(zones["zones"].as_array().unwrap().len(), 2, "every OST is in a zone: {zones}");

    let url = format!("http://{mgs_metrics}/?kind=zone");
    let dom = chromium(&["--dump-dom"], &url);
    assert!(dom.contains("data-ready=\"1\""), "the page never finished loading its data:\n{dom}");
    for zone in ["zone1", "zone2"] {
        assert!(dom.contains(&format!("data-zone=\"{zone}\"")), "no row for {zone}:\n{dom}");
        assert!(dom.contains(&format!("data-name=\"{zone}\"")), "{zone} is not in the charts:\n{dom}");
    }
    assert!(dom.contains("weft-OST0002, weft-OST0003") && dom.contains("zone2: jobid={ana*}"), "{dom}");
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-zones.png");
    let _ = std::fs::remove_file(&shot);
    chromium(&["--window-size=1400,1400", &format!("--screenshot={}", shot.display())], &url);
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 20_000, "a screenshot of {} bytes", png.len());
}

/// The body of `GET url` (`http://HOST:PORT/PATH`), HTTP/1.0.
fn http_get(url: &str) -> String {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
    let mut s = std::net::TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut got = String::new();
    s.read_to_string(&mut got).unwrap();
    got.split_once("\r\n\r\n").map_or(got.clone(), |(_, body)| body.to_string())
}

/// `weft up --replicas 3` and its teardown, even when the test fails.
struct Up {
    dir: tempfile::TempDir,
}

impl Drop for Up {
    fn drop(&mut self) {
        let d = self.dir.path();
        take_down(&d.join("data"), &d.join("mnt"), &d.join("none"));
    }
}

/// With a replicated management service the `weft up` process serves the dashboard, which
/// asks the group's leader; every replica keeps the monitor's history, so once the leader is
/// killed the dashboard (and `weft stats`) still show the job that ran before, drawn from
/// the new leader's history. A screenshot is kept (`target/tmp/dashboard-replicated.png`).
#[test]
fn a_replicated_file_systems_dashboard_keeps_the_history_from_before_its_leader_died() {
    let up = Up { dir: tempfile::tempdir().unwrap() };
    let (data, mnt) = (up.dir.path().join("data"), up.dir.path().join("mnt"));
    let args = ["up", "--data", s(&data), "--mount", s(&mnt), "--detach", "--replicas", "3", "--osts", "2"];
    weft_ok(&[&args[..], &["-o", "jobid_var=WEFT_JOB"]].concat());
    let status: serde_json::Value = serde_json::from_str(&weft_ok(&["status", "--data", s(&data), "--json"])).unwrap();
    let url = status["dashboard_url"].as_str().expect("the weft up process serves the dashboard").to_string();
    let mgs = status["mgs_address"].as_str().unwrap().to_string();
    let script = "dd if=/dev/zero of=before bs=1M count=16 conv=fsync status=none";
    let out = Command::new("sh").arg("-c").arg(script).current_dir(&mnt).env("WEFT_JOB", "dash_before").output();
    assert!(out.unwrap().status.success());
    let history = format!("{}api/history?kind=job&secs=600", url);
    let wait_for_job = |what: &str| {
        let start = Instant::now();
        loop {
            let stats = weft_ok(&["stats", "--since", "10m", "--by", "job", "--mgs", &mgs]);
            let api = http_get(&history);
            if stats.contains("dash_before") && api.contains("dash_before") {
                return;
            }
            assert!(start.elapsed() < Duration::from_secs(40), "{what}: no dash_before:\n{stats}\n{api}");
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    wait_for_job("before the kill");

    let status: serde_json::Value = serde_json::from_str(&weft_ok(&["status", "--data", s(&data), "--json"])).unwrap();
    let leader = status["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["mgs_replica"]["role"] == "leader")
        .map(|p| p["pid"].as_u64().unwrap() as i32)
        .expect("an MGS leader");
    // SAFETY: kill(2) of a replica process `weft up` started.
    assert_eq!(unsafe { libc::kill(leader, libc::SIGKILL) }, 0);
    std::fs::write(mnt.join("after"), b"after").unwrap();
    wait_for_job("after the MGS leader was killed");
    let dom = chromium(&["--dump-dom"], &url);
    assert!(dom.contains("data-ready=\"1\""), "the page never finished loading its data:\n{dom}");
    assert!(dom.contains("data-name=\"dash_before\""), "the job is not in the charts:\n{dom}");
    assert!(dom.contains("weft-OST0001") && dom.contains("weft-MDT0000"), "{dom}");
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-replicated.png");
    let _ = std::fs::remove_file(&shot);
    chromium(&["--window-size=1400,1400", &format!("--screenshot={}", shot.display())], &url);
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 20_000, "a screenshot of {} bytes", png.len());
}
