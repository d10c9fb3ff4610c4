//! The metrics endpoint as a site's Prometheus sees it: scraped with curl during an fio run
//! on a cluster of separate server processes, its bytes rise, and the text parses with the
//! `prometheus_client` Python package's OpenMetrics parser (what Prometheus asks for) and
//! passes `promtool check metrics` (the text format curl and promtool get).

mod common;
use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What Prometheus 2.x sends when it scrapes: OpenMetrics first.
const PROMETHEUS_ACCEPT: &str = "Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// The endpoint's text as Prometheus gets it (OpenMetrics).
fn scrape(address: &str) -> String {
    scrape_as(address, &["-H", PROMETHEUS_ACCEPT])
}

/// The endpoint's text as curl with `extra` arguments gets it.
fn scrape_as(address: &str, extra: &[&str]) -> String {
    let out = Command::new("curl")
        .args(["-sf", "--max-time", "10"])
        .args(extra)
        .arg(format!("http://{address}/metrics"))
        .output()
        .unwrap();
    assert!(out.status.success(), "curl of {address} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The value of the sample `name{labels...}` whose labels include every one of `labels`.
fn sample(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (series, value) = l.rsplit_once(' ')?;
        let (n, rest) = series.split_once('{').unwrap_or((series, ""));
        (n == name && labels.iter().all(|want| rest.contains(want))).then(|| value.parse().ok())?
    })
}

/// Parses `text` with the Python package's OpenMetrics parser; the families it found.
fn parse_with_python(text: &str) -> Vec<String> {
    let script = "import sys\n\
from prometheus_client.openmetrics.parser import text_string_to_metric_families\n\
for f in text_string_to_metric_families(sys.stdin.read()):\n    print(f.name, f.type, len(f.samples))\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 (installed by make deps)");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the OpenMetrics parser refused the text: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).lines().map(String::from).collect()
}

#[test]
fn metrics_rise_during_fio_and_parse_with_a_real_parser() {
    let mut c = Cluster::multi_node(&weft_bin());
    let mnt = c.mount_with("jobid_var=WEFT_JOB");
    let oss = c.servers.iter().find(|s| s.spec.name == "oss1").unwrap().metrics.clone();
    let mds = c.servers.iter().find(|s| s.spec.name == "mds").unwrap().metrics.clone();
    // A changelog reader, so that the MDS keeps records of what follows.
    weft_ok(&["changelog-register", "weft-MDT0000", "--mgs", &c.mgs_address]);
    weft_ok(&["setstripe", "-c", "1", "-i", "0", mnt.to_str().unwrap()]);
    let fio = Command::new("fio")
        .args([
            "--name=metrics",
            "--filename=f",
            "--size=64M",
            "--bs=64k",
            "--rw=write",
            "--ioengine=psync",
            "--rate=8m",
            "--time_based",
            "--runtime=8",
            "--end_fsync=1",
            // The file's size is what the job wrote: not laid out by fallocate first.
            "--fallocate=none",
        ])
        .current_dir(&mnt)
        .env("WEFT_JOB", "fio_job")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fio (installed by make deps)");
    let written =
        |text: &str| sample(text, "weft_ost_write_bytes_total", &["job=\"fio_job\"", "target=\"weft-OST0000\""]);
    // Scrapes a second apart while fio writes: the job's bytes rise.
    let start = Instant::now();
    let mut seen = Vec::new();
    while seen.len() < 3 {
        assert!(start.elapsed() < Duration::from_secs(30), "the job's bytes never rose: {seen:?}");
        std::thread::sleep(Duration::from_secs(1));
        if let Some(v) = written(&scrape(&oss)) {
            if seen.last().is_none_or(|last| v > *last) {
                seen.push(v);
            }
        }
    }
    let out = fio.wait_with_output().unwrap();
    assert!(out.status.success(), "fio failed: {}", String::from_utf8_lossy(&out.stderr));

    let text = scrape(&oss);
    // What the job wrote, counted by the OST, and the target's own total.
    let size = std::fs::metadata(mnt.join("f")).unwrap().len() as f64;
    let job_bytes = written(&text).unwrap();
    assert!(job_bytes >= size, "the job wrote {size} bytes, the OST counted {job_bytes}");
    let total = sample(&text, "weft_write_bytes_total", &["target=\"weft-OST0000\""]).unwrap();
    assert!(total >= job_bytes, "{total} < {job_bytes}");
    assert!(sample(&text, "weft_user_write_bytes_total", &["uid=\"0\""]).unwrap() >= job_bytes);
    let writes = sample(&text, "weft_requests_total", &["opcode=\"ost_write\"", "target=\"weft-OST0000\""]).unwrap();
    let buckets =
        sample(&text, "weft_request_duration_seconds_count", &["opcode=\"ost_write\"", "target=\"weft-OST0000\""]);
    assert_eq!(buckets, Some(writes), "the histogram counts every write");
    assert!(sample(&text, "weft_target_space_bytes", &["target=\"weft-OST0000\"", "state=\"total\""]).unwrap() > 0.0);
    assert_eq!(sample(&text, "weft_nrs_policy", &["service=\"ost_io\"", "policy=\"fifo\""]), Some(1.0));
    assert!(sample(&text, "weft_locks", &["target=\"weft-OST0000\""]).is_some());

    // Both servers' text parses with a real OpenMetrics parser.
    let families = parse_with_python(&text);
    for want in ["weft_ost_write_bytes counter", "weft_request_duration_seconds histogram", "weft_nrs_queued gauge"] {
        assert!(families.iter().any(|f| f.starts_with(want)), "{want} not among {families:?}");
    }
    let mds_text = scrape(&mds);
    let families = parse_with_python(&mds_text);
    assert!(families.iter().any(|f| f.starts_with("weft_job_ops counter")), "{families:?}");
    assert!(sample(&mds_text, "weft_target_inodes", &["target=\"weft-MDT0000\"", "state=\"total\""]).unwrap() > 0.0);
    assert!(sample(&mds_text, "weft_job_ops_total", &["job=\"fio_job\"", "target=\"weft-MDT0000\""]).unwrap() >= 1.0);
    // The changelog: the layout set and fio's create and close are kept for reader cl1.
    let kept = sample(&mds_text, "weft_changelog_records", &["target=\"weft-MDT0000\""]).unwrap();
    assert!(kept >= 3.0, "{kept}");
    let pending =
        sample(&mds_text, "weft_changelog_reader_pending_records", &["reader=\"cl1\"", "target=\"weft-MDT0000\""]);
    assert_eq!(pending, Some(kept));
    assert!(families.iter().any(|f| f.starts_with("weft_changelog_records gauge")), "{families:?}");
}

/// `promtool check metrics` (Debian's `prometheus` package) on `text`: its complaints.
fn promtool(text: &str) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (package prometheus, installed by make deps)");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), said)
}

#[test]
fn promtool_accepts_the_text_of_every_family() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let mnt = c.mount_with("jobid_var=WEFT_JOB");
    let mgs = c.mgs_address.clone();
    let metrics = c.servers[0].metrics.clone();
    // Every family with samples: a changelog reader, a TBF class, a job's bytes both ways.
    weft_ok(&["changelog-register", "weft-MDT0000", "--mgs", &mgs]);
    weft_ok(&["set-param", "--mgs", &mgs, "ost.OSS.ost_io.nrs_policies=tbf jobid"]);
    weft_ok(&["set-param", "--mgs", &mgs, "ost.OSS.ost_io.nrs_tbf_rule=start dd jobid={dd_job} rate=10000"]);
    let out = Command::new("sh")
        .arg("-c")
        .arg("dd if=/dev/zero of=f bs=64k count=16 conv=fsync status=none && dd if=f of=/dev/null bs=64k iflag=direct status=none")
        .current_dir(&mnt)
        .env("WEFT_JOB", "dd_job")
        .output()
        .unwrap();
    assert!(out.status.success(), "dd: {}", String::from_utf8_lossy(&out.stderr));

    // As curl and promtool fetch it (no Accept header): the text format promtool checks.
    let text = scrape_as(&metrics, &[]);
    for family in [
        "weft_requests_total",
        "weft_request_errors_total",
        "weft_read_bytes_total",
        "weft_write_bytes_total",
        "weft_ost_read_bytes_total",
        "weft_ost_write_bytes_total",
        "weft_job_ops_total",
        "weft_user_ops_total",
        "weft_user_read_bytes_total",
        "weft_user_write_bytes_total",
        "weft_nrs_class_started_total",
        "weft_evictions_total",
        "weft_clients",
        "weft_changelog_records",
    ] {
        assert!(sample(&text, family, &[]).is_some(), "no sample of {family}:\n{text}");
    }
    let (ok, said) = promtool(&text);
    assert!(ok && said.is_empty(), "promtool check metrics refused the text: {said}\n{text}");
    assert!(!text.contains("{}"), "a sample with an empty label set:\n{text}");
    assert!(sample(&text, "weft_ost_write_bytes_total", &["job=\"dd_job\""]) >= Some(1048576.0), "{text}");

    // What Prometheus asks for, OpenMetrics, is what it gets, and a real parser reads it.
    let om = scrape(&metrics);
    assert!(om.ends_with("# EOF\n"), "{om}");
    assert!(!om.contains("{}"), "a sample with an empty label set:\n{om}");
    let families = parse_with_python(&om);
    assert!(families.iter().any(|f| f.starts_with("weft_evictions counter")), "{families:?}");
}

/// `weft stats --json` rows: name -> (ops, read bytes, write bytes).
fn stats(c: &Cluster, by: &str) -> std::collections::BTreeMap<String, (u64, u64, u64)> {
    let out = weft_ok(&["stats", "--since", "10m", "--by", by, "--json", "--mgs", &c.mgs_address]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].as_u64().unwrap();
            (r["name"].as_str().unwrap().to_string(), (n("ops"), n("read_bytes"), n("write_bytes")))
        })
        .collect()
}

#[test]
fn the_history_totals_what_each_job_did() {
    let mut c = Cluster::multi_node(&weft_bin());
    let mnt = c.mount_with("jobid_var=WEFT_JOB");
    // Two jobs, on files on both OSS processes: 8 MiB written by one, 4 MiB by the other
    // and 2 MiB of it read back around the page cache.
    let run = |job: &str, script: &str| {
        let out = Command::new("sh").arg("-c").arg(script).current_dir(&mnt).env("WEFT_JOB", job).output().unwrap();
        assert!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
    };
    weft_ok(&["setstripe", "-c", "2", mnt.join("a").to_str().unwrap()]);
    run("ckpt_a", "dd if=/dev/zero of=a bs=1M count=8 conv=fsync status=none");
    run("post_b", "dd if=/dev/zero of=b bs=1M count=4 conv=fsync status=none");
    run("post_b", "dd if=b of=/dev/null bs=1M count=2 iflag=direct status=none");
    // The monitor scrapes each second: within a few the history has it all.
    let start = Instant::now();
    let jobs = loop {
        let jobs = stats(&c, "job");
        let done = jobs.get("ckpt_a").is_some_and(|j| j.2 == 8 << 20)
            && jobs.get("post_b").is_some_and(|j| j.2 == 4 << 20 && j.1 == 2 << 20);
        if done {
            break jobs;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the history never caught up: {jobs:?}");
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(jobs["ckpt_a"].0 >= 1 && jobs["ckpt_a"].1 == 0, "{jobs:?}");
    // By user and by target: the same bytes, all root's, spread over the OSTs.
    let users = stats(&c, "user");
    assert_eq!(users["0"].2, 12 << 20, "{users:?}");
    let groups = stats(&c, "group");
    assert_eq!(groups["0"].2, 12 << 20, "{groups:?}");
    let targets = stats(&c, "target");
    let written: u64 = targets.iter().filter(|(t, _)| t.contains("-OST")).map(|(_, v)| v.2).sum();
    assert_eq!(written, 12 << 20, "{targets:?}");
    assert!(targets.keys().filter(|t| t.contains("-OST")).count() >= 2, "both OSS processes: {targets:?}");
    // Text, and a wrong option named with what is allowed.
    let text = weft_ok(&["stats", "--since", "10m", "--by", "job", "--mgs", &c.mgs_address]);
    assert!(text.lines().any(|l| l.starts_with("ckpt_a") && l.ends_with(&(8u64 << 20).to_string())), "{text}");
    let out = weft(&["stats", "--by", "host", "--mgs", &c.mgs_address]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("one of job, user, group, target"));
    let out = weft(&["stats", "--since", "1w", "--mgs", &c.mgs_address]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--since '1w'"));
    // Top: the jobs of the last seconds, as rates; idle once they are over.
    let top: serde_json::Value = serde_json::from_str(&weft_ok(&["top", "--json", "--mgs", &c.mgs_address])).unwrap();
    assert!(top["jobs"].is_array() && top["window_s"].as_u64() == Some(3), "{top}");
}
