//! Bandwidth reservations with a real Slurm (Debian's slurm-wlm, set up by
//! scripts/slurm-setup.sh in a temporary directory): the file system's bandwidth is 200
//! weftbw licenses, three jobs ask 100 each, so Slurm runs two at once and holds the third in
//! its queue (reason Licenses); the controller's prolog reserves each running job's bandwidth
//! in Weft under its job id and the epilog ends it, so `weft qos list` shows the reservations
//! come and go with the jobs. One job writes through a mount with jobid_var=SLURM_JOB_ID at
//! its reserved rate.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Slurm's daemons under a directory, stopped when dropped.
struct Slurm {
    dir: tempfile::TempDir,
}

impl Slurm {
    fn start(mgs: &str) -> Slurm {
        let dir = tempfile::Builder::new().prefix("weft-slurm-").tempdir().unwrap();
        let out = Command::new(script())
            .args([
                "--dir",
                s(dir.path()),
                "--weft",
                s(&weft_bin()),
                "--mgs",
                mgs,
                "--licenses",
                "200",
                "--node-bw",
                "10G",
            ])
            .output()
            .unwrap();
        let slurm = Slurm { dir };
        assert!(
            out.status.success(),
            "slurm-setup.sh: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        slurm
    }

    fn conf(&self) -> PathBuf {
        self.dir.path().join("slurm.conf")
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new(args[0]).args(&args[1..]).env("SLURM_CONF", self.conf()).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `sbatch ...`: the job id.
    fn submit(&self, args: &[&str]) -> String {
        let all: Vec<&str> = ["sbatch", "--parsable"].into_iter().chain(args.iter().copied()).collect();
        self.run(&all).trim().to_string()
    }

    /// Job id to state (PENDING, RUNNING...) and reason, for the jobs in the queue.
    fn queue(&self) -> Vec<(String, String, String)> {
        self.run(&["squeue", "-h", "-o", "%i %T %r"])
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                Some((w.next()?.to_string(), w.next()?.to_string(), w.next().unwrap_or("").to_string()))
            })
            .collect()
    }

    fn logs(&self) -> String {
        ["prolog.log", "epilog.log", "slurmctld.log"]
            .iter()
            .map(|f| format!("--- {f}\n{}", tail(&self.dir.path().join(f), 15)))
            .collect()
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let _ = Command::new(script()).args(["--stop", "--dir", s(self.dir.path())]).status();
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/slurm-setup.sh")
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn active_ids(mgs: &str) -> Vec<String> {
    let list: serde_json::Value = serde_json::from_str(&weft_ok(&["qos", "list", "--json", "--mgs", mgs])).unwrap();
    let mut ids: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["state"] == "active")
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

fn wait(what: &str, limit: Duration, slurm: &Slurm, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}\n{}", slurm.logs());
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn slurm_runs_two_of_three_licensed_jobs_and_weft_reserves_for_the_running_ones() {
    let mut c = Cluster::multi_node(&weft_bin());
    let mnt = c.mount_with("jobid_var=SLURM_JOB_ID");
    let mgs = c.mgs_address.clone();
    // Four OSTs of 60 MiB/s: a job of 100 licenses (100 MiB/s) takes 25 of each.
    weft_ok(&["qos", "capacity", "--set", "60M", "--mgs", &mgs]);
    std::fs::create_dir(mnt.join("out")).unwrap();
    weft_ok(&["setstripe", "-c", "4", s(&mnt.join("out"))]);
    let slurm = Slurm::start(&mgs);

    // The first job writes 300 MiB: at its reserved 100 MiB/s, about 3 s.
    let out = mnt.join("out");
    let writer = format!(
        "t0=$(date +%s.%N); dd if=/dev/zero of={}/$SLURM_JOB_ID bs=1M count=300 oflag=direct conv=fsync status=none; \
         t1=$(date +%s.%N); awk \"BEGIN {{ print \\\"rate\\\", 300 / ($t1 - $t0) }}\"; sleep 4",
        out.display()
    );
    let log = |name: &str| slurm.dir.path().join(name);
    let a =
        slurm.submit(&["-L", "weftbw:100", "--gres=weftbw:100M", "-t", "1", "-o", s(&log("a.out")), "--wrap", &writer]);
    let b = slurm.submit(&[
        "-L",
        "weftbw:100",
        "--gres=weftbw:100M",
        "-t",
        "1",
        "-o",
        s(&log("b.out")),
        "--wrap",
        "sleep 8",
    ]);
    let third = slurm.submit(&[
        "-L",
        "weftbw:100",
        "--gres=weftbw:100M",
        "-t",
        "1",
        "-o",
        s(&log("c.out")),
        "--wrap",
        "sleep 4",
    ]);

    // Two run, the third waits for licenses; Weft holds the two jobs' bandwidth.
    wait("two jobs running and reserved", Duration::from_secs(30), &slurm, || {
        let q = slurm.queue();
        let running: Vec<&String> = q.iter().filter(|j| j.1 == "RUNNING").map(|j| &j.0).collect();
        running.len() == 2 && active_ids(&mgs) == [format!("slurm-{a}"), format!("slurm-{b}")]
    });
    let q = slurm.queue();
    let waiting = q.iter().find(|j| j.0 == third).expect("the third job in the queue");
    // Pending for its licenses (Slurm names the reason Licenses, or Priority while the jobs
    // in front of it hold them): every license is taken.
    assert_eq!(waiting.1, "PENDING", "{q:?}");
    assert!(["Licenses", "Priority"].contains(&waiting.2.as_str()), "{q:?}");
    let lic = slurm.run(&["scontrol", "show", "licenses", "weftbw"]);
    assert!(lic.contains("Total=200 Used=200 Free=0"), "{lic}");
    let status: serde_json::Value =
        serde_json::from_str(&weft_ok(&["qos", "status", &format!("slurm-{a}"), "--json", "--mgs", &mgs])).unwrap();
    assert_eq!(status["throughput"]["Bytes"], 100 * 1048576, "{status}");
    assert_eq!(status["job"], a.as_str());
    assert_eq!(status["osts"].as_array().unwrap().len(), 4);

    // When the first ends, the third runs and is reserved in its place; then every
    // reservation is done.
    wait("the third job reserved in the first's place", Duration::from_secs(40), &slurm, || {
        let active = active_ids(&mgs);
        active.contains(&format!("slurm-{third}")) && !active.contains(&format!("slurm-{a}"))
    });
    wait("the queue empty and no reservation active", Duration::from_secs(30), &slurm, || {
        slurm.queue().is_empty() && active_ids(&mgs).is_empty()
    });
    let list = weft_ok(&["qos", "list", "--mgs", &mgs]);
    for id in [&a, &b, &third] {
        assert!(list.contains(&format!("slurm-{id} job {id}: 100M")), "{list}");
    }
    assert!(!list.contains("active"), "{list}");

    // The writer's rate under its reservation (another job beside it slept).
    let said = std::fs::read_to_string(log("a.out")).unwrap();
    let rate: f64 = said
        .trim()
        .strip_prefix("rate ")
        .and_then(|r| r.trim().parse().ok())
        .unwrap_or_else(|| panic!("job a said: {said}"));
    eprintln!("job {a} wrote at {rate:.1} MiB/s under its reservation of 100");
    // Striped over two OSS processes that each hold the job to its half, one write in flight:
    // near the rate, not over it.
    assert!((70.0..=110.0).contains(&rate), "job {a} at {rate:.1} MiB/s against its 100");
}
