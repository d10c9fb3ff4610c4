//! `weft up` / `status` / `down`: the one-command file system, brought back with its data.

mod common;
use common::*;
use std::path::Path;

struct Down<'a>(&'a Path, &'a Path);
impl Drop for Down<'_> {
    fn drop(&mut self) {
        let _ = weft(&["down", "--data", self.0.to_str().unwrap()]);
        if weft_harness::is_mounted(self.1) {
            let _ = std::process::Command::new("fusermount3").arg("-uz").arg(self.1).status();
        }
    }
}

#[test]
fn up_status_down_and_up_again_with_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mnt = dir.path().join("mnt");
    let (d, m) = (data.to_str().unwrap(), mnt.to_str().unwrap());
    let _down = Down(&data, &mnt);

    let out = weft_ok(&["up", "--data", d, "--mount", m, "--osts", "2", "--detach"]);
    assert!(out.contains("is up") && out.contains("2 OSTs"), "{out}");
    // It serves metrics, and says where.
    let url = out.lines().find_map(|l| l.trim().strip_prefix("metrics: ")).expect("the metrics address is printed");
    let scrape = std::process::Command::new("curl").args(["-sf", "--max-time", "10", url]).output().unwrap();
    let text = String::from_utf8_lossy(&scrape.stdout);
    assert!(
        scrape.status.success() && text.contains("weft_target_space_bytes{target=\"weft-OST0001\""),
        "{url}:\n{text}"
    );
    assert!(weft_harness::is_mounted(&mnt));
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
    let field = |key: &str| status.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.trim().to_string());
    assert_eq!(field("metrics:").as_deref(), Some(url), "{status}");
    let dashboard = field("dashboard:").unwrap_or_else(|| panic!("no dashboard address in:\n{status}"));
    let page = std::process::Command::new("curl").args(["-sf", "--max-time", "10", &dashboard]).output().unwrap();
    let html = String::from_utf8_lossy(&page.stdout);
    assert!(page.status.success() && html.contains("<title>Weft"), "{dashboard}:\n{html}");
    assert_eq!(j["metrics_url"], url);
    assert_eq!(j["dashboard_url"], dashboard.as_str());
    assert_eq!(j["targets"].as_array().unwrap().len(), 3);
    assert!(j["targets"].as_array().unwrap().iter().all(|t| t["state"] == "up"));

    weft_ok(&["down", "--data", d]);
    assert!(!weft_harness::is_mounted(&mnt));
    assert!(weft_ok(&["status", "--data", d]).contains("not running"));

    weft_ok(&["up", "--data", d, "--mount", m, "--detach"]);
    assert_eq!(std::fs::read(mnt.join("kept")).unwrap(), payload, "weft up brings the data back");
    assert!(mnt.join("dir").is_dir());
    weft_ok(&["down", "--data", d]);
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
