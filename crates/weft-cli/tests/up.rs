//! `weft up` / `status` / `down`: the one-command file system, brought back with its data.

mod common;
use common::*;
use std::path::PathBuf;

/// A `weft up` of its own in a temp dir (`data`, mounted at `mnt`): brought down, and its
/// mount let go, on drop, even when the test fails.
struct Up {
    _dir: tempfile::TempDir,
    data: PathBuf,
    mnt: PathBuf,
}

impl Up {
    fn new() -> Up {
        let dir = tempfile::tempdir().unwrap();
        let (data, mnt) = (dir.path().join("data"), dir.path().join("mnt"));
        Up { _dir: dir, data, mnt }
    }

    fn d(&self) -> &str {
        self.data.to_str().unwrap()
    }

    fn m(&self) -> &str {
        self.mnt.to_str().unwrap()
    }

    /// `weft up --detach` with `extra` options; what it printed.
    fn start(&self, extra: &[&str]) -> String {
        let mut args = vec!["up", "--data", self.d(), "--mount", self.m(), "--detach"];
        args.extend_from_slice(extra);
        weft_ok(&args)
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = weft(&["down", "--data", self.d()]);
        if weft_harness::is_mounted(&self.mnt) {
            let _ = std::process::Command::new("fusermount3").arg("-uz").arg(&self.mnt).status();
        }
    }
}

/// The value of the line `key VALUE` that `weft up` or `weft status` printed.
fn printed(out: &str, key: &str) -> Option<String> {
    out.lines().find_map(|l| l.trim().strip_prefix(key)).map(|v| v.trim().to_string())
}

#[test]
fn up_status_down_and_up_again_with_the_data() {
    let up = Up::new();
    let (d, m, mnt) = (up.d(), up.m(), &up.mnt);
    let out = up.start(&["--osts", "2"]);
    assert!(out.contains("is up") && out.contains("2 OSTs"), "{out}");
    // It serves metrics, and says where.
    let url = printed(&out, "metrics: ").expect("the metrics address is printed");
    let url = url.as_str();
    let scrape = std::process::Command::new("curl").args(["-sf", "--max-time", "10", url]).output().unwrap();
    let text = String::from_utf8_lossy(&scrape.stdout);
    assert!(
        scrape.status.success() && text.contains("weft_target_space_bytes{target=\"weft-OST0001\""),
        "{url}:\n{text}"
    );
    assert!(weft_harness::is_mounted(mnt));
    // The mount's source names the management service and the file system.
    let source = run(std::process::Command::new("findmnt").args(["-n", "-o", "SOURCE", m]));
    let mgs = out.lines().find_map(|l| l.split("weft mount ").nth(1)?.split_whitespace().next()).expect("mgs address");
    assert_eq!(source.trim(), format!("{mgs}:/weft"), "{out}");
    let payload = pattern(5, 0, 3 << 20);
    std::fs::write(mnt.join("kept"), &payload).unwrap();
    std::fs::create_dir(mnt.join("dir")).unwrap();

    let again = weft(&["up", "--data", d, "--mount", m, "--detach"]);
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("already up"));

    let status = weft_ok(&["status", "--data", d]);
    assert!(
        status.contains("running") && status.contains("weft-OST0001") && status.contains("weft-MDT0000"),
        "{status}"
    );
    let j: serde_json::Value = serde_json::from_str(&weft_ok(&["status", "--data", d, "--json"])).unwrap();
    assert_eq!(j["running"], true);
    // Status says where the metrics and the dashboard are, as up did when it started.
    assert_eq!(printed(&status, "metrics:").as_deref(), Some(url), "{status}");
    let dashboard = printed(&status, "dashboard:").unwrap_or_else(|| panic!("no dashboard address in:\n{status}"));
    let page = std::process::Command::new("curl").args(["-sf", "--max-time", "10", &dashboard]).output().unwrap();
    let html = String::from_utf8_lossy(&page.stdout);
    assert!(page.status.success() && html.contains("<title>Weft"), "{dashboard}:\n{html}");
    assert_eq!(j["metrics_url"], url);
    assert_eq!(j["dashboard_url"], dashboard.as_str());
    assert_eq!(j["targets"].as_array().unwrap().len(), 3);
    assert!(j["targets"].as_array().unwrap().iter().all(|t| t["state"] == "up"));

    weft_ok(&["down", "--data", d]);
    assert!(!weft_harness::is_mounted(mnt));
    assert!(weft_ok(&["status", "--data", d]).contains("not running"));

    up.start(&[]);
    assert_eq!(std::fs::read(mnt.join("kept")).unwrap(), payload, "weft up brings the data back");
    assert!(mnt.join("dir").is_dir());
    weft_ok(&["down", "--data", d]);
}

/// `weft up --mdts 2`: MDT1 in a process of its own, which `weft status` names, directories
/// striped over both, everything stopped by `weft down` and back with `weft up`.
#[test]
fn up_with_two_mdts_stripes_directories_and_comes_back() {
    let up = Up::new();
    let (d, m, mnt) = (up.d(), up.m(), &up.mnt);
    let out = up.start(&["--osts", "2", "--mdts", "2"]);
    assert!(out.contains("is up: 2 MDTs"), "{out}");
    let status = weft_ok(&["status", "--data", d]);
    assert!(status.contains("weft-MDT0001     up") && status.contains(" MDT0001 "), "{status}");
    weft_ok(&["mkdir", "-c", "2", &format!("{m}/s")]);
    sh(mnt, "for i in $(seq 1 40); do echo $i > s/f$i; done");
    let fids =
        weft_ok(&["path2fid", &format!("{m}/s/f1"), &format!("{m}/s/f2"), &format!("{m}/s/f3"), &format!("{m}/s/f4")]);
    assert!(fids.contains("[0x200000400:") && fids.contains("[0x200100400:"), "names on both MDTs:\n{fids}");
    let pid = |text: &str| -> Option<u32> {
        text.lines().find(|l| l.contains(" MDT0001 ")).and_then(|l| l.split_whitespace().next()?.parse().ok())
    };
    let mdt1 = pid(&status).expect("MDT1's process is listed");
    weft_ok(&["down", "--data", d]);
    assert!(!std::path::Path::new(&format!("/proc/{mdt1}")).exists(), "weft down left MDT1's process");
    let again = up.start(&[]);
    assert!(again.contains("2 MDTs"), "{again}");
    assert_eq!(sh(mnt, "cat s/f17; ls s | wc -l"), "17\n40\n");
}

#[test]
fn help_and_bad_options_name_what_is_allowed() {
    for cmd in [
        "up",
        "down",
        "status",
        "server",
        "mount",
        "umount",
        "setstripe",
        "getstripe",
        "df",
        "path2fid",
        "fid2path",
        "stats",
        "top",
        "qos",
    ] {
        let out = weft_ok(&[cmd, "--help"]);
        assert!(out.contains("Usage: weft"), "{cmd} --help:\n{out}");
    }
    let out = weft(&["mount", "127.0.0.1", "/tmp", "-o", "speed=11"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("speed") && err.contains("timeout=SECONDS"), "{err}");
    let out = weft(&["up", "--osts", "0"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--osts"));
    let out = weft(&["server", "--config", "/nonexistent.toml"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("/nonexistent.toml"));
}

/// The sum of `counter`'s samples of `job` in job_stats text (every target's).
fn job_stats_sum(text: &str, job: &str, counter: &str) -> u64 {
    let mut in_job = false;
    let mut sum = 0;
    for line in text.lines() {
        if let Some(id) = line.trim_start().strip_prefix("- job_id:") {
            in_job = id.trim() == job;
        } else if in_job && line.trim_start().starts_with(&format!("{counter}:")) {
            let s = line.split("sum:").nth(1).and_then(|t| t.split(',').next()).map(str::trim);
            sum += s.and_then(|s| s.parse::<u64>().ok()).unwrap_or_else(|| panic!("no sum in: {line}"));
        }
    }
    sum
}

/// The sum of a metric family's samples (every target's).
fn metric_sum(text: &str, family: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")) || l.starts_with(&format!("{family} ")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// A user of a fresh `weft up` with its default mount options writes with dd and reads
/// with cat, then looks for the bytes where an admin looks: each must show them.
#[test]
fn bytes_written_and_read_on_a_fresh_up_mount_show_in_stats_metrics_job_stats_and_dashboard() {
    const SIZE_BYTES: u64 = 100 << 20;
    let up = Up::new();
    let (d, mnt) = (up.d(), &up.mnt);
    let out = up.start(&["--osts", "2"]);
    let metrics = printed(&out, "metrics: ").expect("the metrics address is printed");
    let dashboard = printed(&out, "dashboard: ").expect("the dashboard address is printed");

    sh(mnt, "dd if=/dev/zero of=big bs=1M count=100 conv=fsync status=none && cat big > /dev/null");
    assert_eq!(std::fs::metadata(mnt.join("big")).unwrap().len(), SIZE_BYTES);
    // SAFETY: geteuid only reads the process's credentials.
    let uid = unsafe { libc::geteuid() };
    let (dd, cat) = (format!("dd.{uid}"), format!("cat.{uid}"));
    let counted = |what: &str, read: u64, written: u64| {
        assert!(
            (SIZE_BYTES..2 * SIZE_BYTES).contains(&read) && (SIZE_BYTES..2 * SIZE_BYTES).contains(&written),
            "{what}: read {read}, written {written} bytes; {SIZE_BYTES} each were done"
        );
    };

    // The monitor's history (weft stats, the dashboard) fills once an interval: wait for it.
    let start = std::time::Instant::now();
    let rows = loop {
        let j: serde_json::Value =
            serde_json::from_str(&weft_ok(&["stats", "--data", d, "--since", "10m", "--by", "job", "--json"])).unwrap();
        let row = |job: &str, key: &str| {
            j["rows"].as_array().unwrap().iter().find(|r| r["name"] == job).map_or(0, |r| r[key].as_u64().unwrap())
        };
        let rows = (row(&cat, "read_bytes"), row(&dd, "write_bytes"));
        if rows.0 >= SIZE_BYTES && rows.1 >= SIZE_BYTES || start.elapsed() > std::time::Duration::from_secs(45) {
            break rows;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    counted("weft stats --by job", rows.0, rows.1);
    let table = weft_ok(&["stats", "--data", d, "--since", "10m", "--by", "job"]);
    assert!(table.lines().any(|l| l.starts_with(&dd)) && table.lines().any(|l| l.starts_with(&cat)), "{table}");

    let scrape = run(std::process::Command::new("curl").args(["-sf", "--max-time", "10", &metrics]));
    counted("metrics", metric_sum(&scrape, "weft_read_bytes_total"), metric_sum(&scrape, "weft_write_bytes_total"));

    let jobs = weft_ok(&["get-param", "--data", d, "obdfilter.*.job_stats"]);
    counted("job_stats", job_stats_sum(&jobs, &cat, "read_bytes"), job_stats_sum(&jobs, &dd, "write_bytes"));

    // The dashboard's charts are drawn from its history API.
    let api = format!("{dashboard}api/history?kind=job&secs=600");
    let h: serde_json::Value =
        serde_json::from_str(&run(std::process::Command::new("curl").args(["-sf", "--max-time", "10", &api]))).unwrap();
    let total = |job: &str, key: &str| {
        h["totals"].as_array().unwrap().iter().find(|r| r["name"] == job).map_or(0, |r| r[key].as_u64().unwrap())
    };
    counted("the dashboard's history", total(&cat, "read_bytes"), total(&dd, "write_bytes"));
    weft_ok(&["down", "--data", d]);
}
