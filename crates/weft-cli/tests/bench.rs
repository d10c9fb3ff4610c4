//! `weft bench`: the IO-500 phases on a local directory, on a Weft mount with a baseline, and
//! through the client library without FUSE; a single stream.

mod common;
use common::*;

const PHASES: [&str; 12] = [
    "ior-easy-write",
    "mdtest-easy-write",
    "ior-hard-write",
    "mdtest-hard-write",
    "find",
    "ior-easy-read",
    "mdtest-easy-stat",
    "ior-hard-read",
    "mdtest-hard-stat",
    "mdtest-easy-delete",
    "mdtest-hard-read",
    "mdtest-hard-delete",
];

fn json_of(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("the --json file")).expect("JSON")
}

/// Every phase in IO-500's order with a positive figure; bandwidth phases with their CPU cost.
fn check_suite(suite: &serde_json::Value) {
    let phases = suite["phases"].as_array().expect("phases");
    let names: Vec<&str> = phases.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, PHASES);
    for p in phases {
        assert!(p["value"].as_f64().unwrap() > 0.0, "{p}");
        assert!(p["seconds"].as_f64().unwrap() > 0.0, "{p}");
        if p["unit"] == "GiB/s" {
            assert!(p["bytes"].as_u64().unwrap() > 0, "{p}");
            // Present; /proc/stat counts 10 ms ticks, so a tiny phase may show none.
            assert!(p["cpu_s_per_gb"].as_f64().unwrap() >= 0.0, "{p}");
        }
    }
    assert!(suite["score"]["score"].as_f64().unwrap() > 0.0);
}

#[test]
fn io500_on_a_local_directory() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let out = weft_ok(&[
        "bench",
        "io500",
        "--dir",
        dir.path().to_str().unwrap(),
        "--procs",
        "2",
        "--stonewall",
        "1",
        "--ior-max",
        "32M",
        "--json",
        json.to_str().unwrap(),
    ]);
    for phase in PHASES {
        assert!(out.lines().any(|l| l.starts_with("[RESULT]") && l.contains(phase)), "{phase} in:\n{out}");
    }
    assert!(out.lines().any(|l| l.starts_with("[SCORE ] Bandwidth")), "{out}");
    let report = json_of(&json);
    check_suite(&report["weft"]);
    assert_eq!(report["procs"], 2);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["out.json"], "the run's directory is removed");
}

#[test]
fn missing_dir_is_named() {
    let out = weft(&["bench", "io500", "--dir", "/nonexistent/weft-bench", "--procs", "1", "--stonewall", "1"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--dir /nonexistent/weft-bench"), "{err}");
    let out = weft(&["bench", "io500", "--procs", "1"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--dir"));
}

#[test]
fn io500_on_a_mount_with_a_baseline_and_native() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let mnt = c.mount();
    let base = tempfile::tempdir().unwrap();
    let json = base.path().join("out.json");
    std::fs::create_dir(mnt.join("bench")).unwrap();
    let out = weft_ok(&[
        "bench",
        "io500",
        "--dir",
        mnt.join("bench").to_str().unwrap(),
        "--procs",
        "2",
        "--stonewall",
        "1",
        "--ior-max",
        "8M",
        "--baseline",
        base.path().to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.lines().any(|l| l.starts_with("[COMPARE]") && l.contains("score")), "{out}");
    let report = json_of(&json);
    check_suite(&report["weft"]);
    check_suite(&report["baseline"]);
    assert!(report["ratios"]["score"].as_f64().unwrap() > 0.0);

    let json = base.path().join("native.json");
    weft_ok(&[
        "bench",
        "io500",
        "--api",
        "native",
        "--mgs",
        &c.mgs_address,
        "--dir",
        "/bench",
        "--procs",
        "2",
        "--stonewall",
        "1",
        "--ior-max",
        "8M",
        "--json",
        json.to_str().unwrap(),
    ]);
    check_suite(&json_of(&json)["weft"]);
    assert_eq!(std::fs::read_dir(mnt.join("bench")).unwrap().count(), 0, "both runs cleaned up");

    for api in ["posix", "native"] {
        let dir = if api == "posix" { mnt.join("bench").to_string_lossy().into_owned() } else { "/bench".into() };
        let mut args = vec!["bench", "stream", "--api", api, "--mgs", &c.mgs_address, "--dir", &dir, "--size", "8M"];
        if api == "native" {
            args.push("--loopback");
        }
        let out = weft_ok(&args);
        assert!(out.lines().any(|l| l.starts_with("write") && l.contains("MB/s")), "{out}");
        assert!(out.lines().any(|l| l.starts_with("read") && l.contains("s/GB")), "{out}");
        let beside_tcp = out.lines().any(|l| l.starts_with("tcp") && l.contains("MB/s"))
            && out.lines().any(|l| l.starts_with("ratio") && l.contains("write / tcp") && l.contains("read / tcp"));
        assert_eq!(beside_tcp, api == "native", "the loopback stream and ratios only with --loopback:\n{out}");
    }
}
