//! The dashboard as a person sees it: a real headless browser (Debian's chromium) loads the
//! page the management service's process serves, waits for its charts, and the jobs of a
//! scripted workload are in them; a screenshot is kept as an artifact
//! (`target/tmp/dashboard.png`).

mod common;
use common::*;
use std::process::Command;
use std::time::{Duration, Instant};

fn chromium(args: &[&str], url: &str) -> String {
    let out = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=15000"])
        .args(args)
        .arg(url)
        .output()
        .expect("chromium (installed by make deps)");
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

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
