//! I/O zoning (FEFS's) as an admin sets it up: two pools of OSTs, `weft set-param -P
//! lod.*.zone_rule=...` rules by jobid, and jobs (the mount's `jobid_var=WEFT_JOB`) whose new
//! files land on their zone's OSTs only (`weft getstripe`), whose requests each zone's OSTs
//! alone see (`obdfilter.*.job_stats`), while a job no rule matches keeps off the zones; the
//! rules survive a restart of the MDS, and once stopped placement is as before. With two
//! MDTs, a file created in a directory on MDT1 follows the same rules.

mod common;
use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

/// The OSTs of a file's objects.
fn ost_set(f: &Path) -> BTreeSet<u64> {
    osts_of(f).into_iter().collect()
}

/// Writes `bytes` to `path` with `cp` run as job `job` (the mount's jobid_var), from a file
/// outside the mount.
fn write_as_job(job: &str, path: &Path, bytes: &[u8], scratch: &Path) {
    let src = scratch.join(format!("src-{job}"));
    std::fs::write(&src, bytes).unwrap();
    let out = std::process::Command::new("cp").arg(&src).arg(path).env("WEFT_JOB", job).output().expect("cp");
    assert!(out.status.success(), "cp as {job}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Per OST index, the jobs `obdfilter.*.job_stats` lists (Lustre's YAML, per target).
fn jobs_per_ost(c: &Cluster) -> BTreeMap<u32, BTreeSet<String>> {
    let text = param_ok(c, &["get-param", "obdfilter.*.job_stats"]);
    let mut out: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
    let mut ost = None;
    for line in text.lines() {
        // `ADDR: ` leads each line when several servers answer.
        let line = line.split_once(": obdfilter.").map_or(line, |(_, rest)| rest);
        if let Some(name) = line.trim_start_matches("obdfilter.").strip_suffix(".job_stats=") {
            let index = name.rsplit_once("-OST").map(|(_, hex)| u32::from_str_radix(hex, 16).unwrap());
            ost = index;
            out.entry(index.unwrap()).or_default();
        } else if let (Some(o), Some(job)) = (ost, line.split("- job_id:").nth(1)) {
            out.entry(o).or_default().insert(job.trim().trim_matches('"').to_string());
        }
    }
    out
}

/// Sets a zone rule, waiting for the MDS to have seen a pool made just before (it follows
/// the cluster map).
fn zone_rule(c: &Cluster, permanent: bool, value: &str) -> String {
    let arg = format!("lod.*.zone_rule={value}");
    let args: Vec<&str> = if permanent { vec!["set-param", "-P", &arg] } else { vec!["set-param", &arg] };
    let start = Instant::now();
    loop {
        let out = param(c, &args);
        if out.status.success() {
            return String::from_utf8_lossy(&out.stdout).into_owned();
        }
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(err.contains("does not exist") && start.elapsed() < Duration::from_secs(10), "{value}: {err}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn jobs_write_only_to_their_zones_osts_and_others_keep_off_them() {
    // The MDS in its own process, so that it can be restarted alone.
    let mut c = Cluster::start(
        &weft_bin(),
        vec![NodeSpec::new("main", "127.0.0.1").mgs().osts(&[0, 1, 2, 3]), NodeSpec::new("mds", "127.0.0.2").mdt(0)],
    );
    let mnt = c.mount_with("jobid_var=WEFT_JOB");
    let scratch = tempfile::tempdir().unwrap();
    let mgs = c.mgs_address.clone();
    weft_ok(&["pool", "--mgs", &mgs, "new", "zone1"]);
    weft_ok(&["pool", "--mgs", &mgs, "add", "zone1", "0", "1"]);
    weft_ok(&["pool", "--mgs", &mgs, "new", "zone2"]);
    weft_ok(&["pool", "--mgs", &mgs, "add", "zone2", "weft-OST0002"]);

    // Refusals name the parameter, the bad part and what is allowed.
    let err = failure_stderr(&param(&c, &["set-param", "lod.*.zone_rule=jobid={x} pool=nosuch"]));
    assert!(err.contains("zone_rule") && err.contains("pool 'nosuch' does not exist"), "{err}");
    assert!(err.contains("zone1, zone2"), "{err}");
    let err = failure_stderr(&param(&c, &["set-param", "-P", "lod.*.zone_rule=nid={10.0.0.1@tcp} pool=zone1"]));
    assert!(
        err.contains("zone_rule") && err.contains("'nid' is not known") && err.contains("jobid, uid, gid"),
        "{err}"
    );
    let err = failure_stderr(&param(&c, &["set-param", "lod.*.zone_rule=jobid=ckpt pool=zone1"]));
    assert!(err.contains("jobid={ckpt}"), "{err}");
    let listed = param_ok(&c, &["get-param", "-n", "lod.*.zone_rule"]);
    assert_eq!(listed.trim(), "", "nothing refused was kept");

    // The rules: the form (named after its pool) and Lustre's TBF form.
    zone_rule(&c, true, "jobid={ckpt*} pool=zone1");
    zone_rule(&c, true, "start ana jobid={ana*} pool=zone2");
    let listed = param_ok(&c, &["get-param", "lod.*.zone_rule"]);
    assert_eq!(
        listed, "lod.weft-MDT0000-mdtlov.zone_rule=\nzone1 jobid={ckpt*} pool=zone1\nana jobid={ana*} pool=zone2\n",
        "the rules in order"
    );

    // Files as wide as they can be, so that each shows every OST it may use.
    let dir = mnt.join("runs");
    std::fs::create_dir(&dir).unwrap();
    weft_ok(&["setstripe", "-c", "-1", s(&dir)]);
    param_ok(&c, &["set-param", "obdfilter.*.job_stats=clear"]);
    let jobs = [("ckpt.1", [0u64, 1].as_slice()), ("ckpt.2", &[0, 1]), ("ana.7", &[2]), ("other.3", &[3])];
    let mut written = Vec::new();
    for (i, (job, osts)) in jobs.iter().enumerate() {
        let f = dir.join(format!("{job}.out"));
        let bytes = pattern(100 + i as u64, 0, (3 << 20) + 4096 * i);
        write_as_job(job, &f, &bytes, scratch.path());
        assert_eq!(ost_set(&f), osts.iter().copied().collect(), "{job}'s file");
        written.push((f, bytes));
    }
    let shown = weft_ok(&["getstripe", s(&dir.join("ckpt.1.out"))]);
    assert!(shown.contains("lmm_pool:          zone1"), "the zone is the file's pool:\n{shown}");
    // What the creator chose stays: a pool named by setstripe -p, even by a zoned job.
    let chosen = dir.join("chosen");
    run(std::process::Command::new(weft_bin())
        .args(["setstripe", "-p", "zone2", s(&chosen)])
        .env("WEFT_JOB", "ckpt.1"));
    assert_eq!(ost_set(&chosen), [2].into());

    // Each zone's OSTs saw only its jobs' requests; the others' OST none of them.
    let seen = jobs_per_ost(&c);
    let on = |o: u32| seen.get(&o).cloned().unwrap_or_default();
    for o in [0, 1] {
        assert!(on(o).contains("ckpt.1") && on(o).contains("ckpt.2"), "OST {o}: {seen:?}");
        assert!(!on(o).contains("ana.7") && !on(o).contains("other.3"), "OST {o}: {seen:?}");
    }
    assert!(on(2).contains("ana.7") && !on(2).iter().any(|j| j.starts_with("ckpt") || j == "other.3"), "{seen:?}");
    assert!(on(3).contains("other.3") && !on(3).iter().any(|j| j.starts_with("ckpt") || j == "ana.7"), "{seen:?}");
    for (f, bytes) in &written {
        assert!(std::fs::read(f).unwrap() == *bytes, "{} read back", f.display());
    }

    // The permanent rules come back with a restarted MDS (replayed before it knows a pool).
    c.kill9("mds");
    c.restart("mds");
    // It serves before it has followed the map (whose records it applies before the OSTs it
    // lists: no create is placed before that).
    let start = Instant::now();
    loop {
        let listed = param(&c, &["get-param", "-n", "lod.*.zone_rule"]);
        let listed = String::from_utf8_lossy(&listed.stdout);
        if listed == "zone1 jobid={ckpt*} pool=zone1\nana jobid={ana*} pool=zone2\n" {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "after a restart: {listed:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let again = dir.join("ckpt.after-restart");
    write_as_job("ckpt.9", &again, b"after", scratch.path());
    assert_eq!(ost_set(&again), [0, 1].into());

    // Stopped: placement as before zoning, on every OST.
    zone_rule(&c, true, "stop zone1");
    zone_rule(&c, true, "stop ana");
    assert_eq!(param_ok(&c, &["get-param", "-n", "lod.*.zone_rule"]).trim(), "");
    let err = failure_stderr(&param(&c, &["set-param", "lod.*.zone_rule=stop ana"]));
    assert!(err.contains("no zone rule 'ana'"), "{err}");
    for job in ["ckpt.3", "other.4"] {
        let f = dir.join(format!("{job}.free"));
        write_as_job(job, &f, b"free again", scratch.path());
        assert_eq!(ost_set(&f), [0, 1, 2, 3].into(), "{job} after the rules stopped");
    }
}

#[test]
fn a_file_created_on_the_second_mdt_follows_the_zone_rules() {
    let mut c = Cluster::start(
        &weft_bin(),
        vec![
            NodeSpec::new("main", "127.0.0.1").mgs().mdt(0).osts(&[0, 1, 2]),
            NodeSpec::new("mds1", "127.0.0.2").mdt(1),
        ],
    );
    let mnt = c.mount_with("jobid_var=WEFT_JOB");
    let scratch = tempfile::tempdir().unwrap();
    let mgs = c.mgs_address.clone();
    weft_ok(&["pool", "--mgs", &mgs, "new", "zone1"]);
    weft_ok(&["pool", "--mgs", &mgs, "add", "zone1", "1", "2"]);
    zone_rule(&c, true, "jobid={ckpt*} pool=zone1");
    // Every MDT has the rule (each MDS process was asked).
    let listed = param_ok(&c, &["get-param", "lod.*.zone_rule"]);
    for mdt in ["weft-MDT0000", "weft-MDT0001"] {
        assert!(listed.contains(&format!("lod.{mdt}-mdtlov.zone_rule=")), "{listed}");
    }
    assert_eq!(listed.matches("zone1 jobid={ckpt*} pool=zone1").count(), 2, "{listed}");

    let remote = mnt.join("remote");
    weft_ok(&["mkdir", "-i", "1", s(&remote)]);
    weft_ok(&["setstripe", "-c", "-1", s(&remote)]);
    let ckpt = remote.join("ckpt.out");
    write_as_job("ckpt.5", &ckpt, &pattern(7, 0, 1 << 20), scratch.path());
    let fid: weft_proto::Fid = weft_ok(&["path2fid", s(&ckpt)]).trim().parse().unwrap();
    assert_eq!(fid.mdt_index(), 1, "created by MDT1");
    assert_eq!(ost_set(&ckpt), [1, 2].into(), "in the zone");
    let other = remote.join("other.out");
    write_as_job("other.5", &other, b"elsewhere", scratch.path());
    assert_eq!(ost_set(&other), [0].into(), "off the zone");
    assert!(std::fs::read(&ckpt).unwrap() == pattern(7, 0, 1 << 20));
}
