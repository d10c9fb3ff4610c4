//! Request scheduling as an admin drives it: `weft set-param` switches a service's NRS
//! policy to TBF and starts rules, on a cluster of separate server processes, and the
//! servers hold each job to its rule's rate (counted at the server), switch policies under
//! load without losing a request, and refuse bad names and values with what is allowed.

mod common;
use common::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Requests each class of `service` on `server` started, by jobid (from `nrs_tbf_classes`).
fn started_by_job(server: &str, service: &str) -> BTreeMap<String, u64> {
    let out = weft_ok(&["get-param", "-n", "--server", server, &format!("{service}.nrs_tbf_classes")]);
    let mut by_job = BTreeMap::new();
    let mut job = None;
    for line in out.lines() {
        if let Some(class) = line.strip_prefix("- class: ") {
            job = class.split('&').find_map(|f| f.strip_prefix("jobid=")).map(String::from);
        } else if let (Some(n), Some(j)) = (line.trim().strip_prefix("started: "), &job) {
            *by_job.entry(j.clone()).or_insert(0) += n.parse::<u64>().unwrap();
        }
    }
    by_job
}

/// A shell loop run with `WEFT_JOB=job` (the mount's jobid_var) until killed.
struct Loop(Child);

impl Loop {
    fn start(job: &str, dir: &Path, script: &str) -> Loop {
        let child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(dir)
            .env("WEFT_JOB", job)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a shell loop");
        Loop(child)
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        // The shell and its dd: a process group would be neater; killing the shell and
        // waiting lets its last dd finish on its own within a moment.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn oss_address(c: &Cluster, ost: u32) -> String {
    let map = c.map().unwrap();
    let address = map.osts().find(|t| t.index == ost).expect("the OST is in the map").address.clone();
    address
}

#[test]
fn two_jobs_under_tbf_rules_get_their_rates_two_to_one() {
    let mut c = Cluster::multi_node(&weft_bin());
    let mnt = c.mount_with("jobid_var=WEFT_JOB");
    param_ok(&c, &["set-param", "ost.OSS.ost_io.nrs_policies=tbf jobid"]);
    param_ok(&c, &["set-param", "ost.OSS.ost_io.nrs_tbf_rule=start fast jobid={jobA} rate=100"]);
    param_ok(&c, &["set-param", "ost.OSS.ost_io.nrs_tbf_rule=start slow jobid={jobB} rate=50"]);
    let rules = param_ok(&c, &["get-param", "ost.OSS.ost_io.nrs_tbf_rule"]);
    assert!(rules.contains("fast jobid={jobA} 100, ref 0") && rules.contains("default * 10000"), "{rules}");

    // Both jobs read from OST 0, 64 KiB at a time around the page cache (one request per
    // read), as fast as the rules let them.
    for f in ["a", "b"] {
        weft_ok(&["setstripe", "-c", "1", "-i", "0", mnt.join(f).to_str().unwrap()]);
        std::fs::write(mnt.join(f), pattern(1, 0, 1 << 20)).unwrap();
    }
    let dd = |f: &str| format!("while :; do dd if={f} of=/dev/null bs=64k iflag=direct status=none; done");
    let a_loop = Loop::start("jobA", &mnt, &dd("a"));
    let b_loop = Loop::start("jobB", &mnt, &dd("b"));
    let server = oss_address(&c, 0);
    let rates = |secs: u64| {
        let before = started_by_job(&server, "ost.OSS.ost_io");
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs(secs));
        let after = started_by_job(&server, "ost.OSS.ost_io");
        let took = t0.elapsed().as_secs_f64();
        let rate =
            |job: &str| (after.get(job).copied().unwrap_or(0) - before.get(job).copied().unwrap_or(0)) as f64 / took;
        (rate("jobA"), rate("jobB"))
    };
    std::thread::sleep(Duration::from_secs(1));
    let (a, b) = rates(6);
    assert!((90.0..=110.0).contains(&a), "jobA at {a:.1}/s against its 100");
    assert!((45.0..=55.0).contains(&b), "jobB at {b:.1}/s against its 50");
    let ratio = a / b;
    assert!((1.8..=2.2).contains(&ratio), "2:1 within 10%: {ratio:.2}");
    // With jobB idle, jobA gets its rate and no more.
    drop(b_loop);
    let (a, _) = rates(3);
    assert!((90.0..=110.0).contains(&a), "jobA alone at {a:.1}/s against its 100");
    // Or, with sharing on, what the server has spare (running requests bounded so that
    // it knows when it is).
    for (name, value) in [("nrs_tbf_running_max", "4"), ("nrs_tbf_share_spare", "1")] {
        weft_ok(&["set-param", "--server", &server, &format!("ost.OSS.ost_io.{name}={value}")]);
    }
    let (a, _) = rates(3);
    assert!(a > 150.0, "jobA alone with sharing on at {a:.1}/s: the spare goes to it");
    drop(a_loop);

    // Who hit a limit: both classes were held back, and their rules are in use.
    let classes = weft_ok(&["get-param", "-n", "--server", &server, "ost.OSS.ost_io.nrs_tbf_classes"]);
    assert!(classes.contains("rule: fast") && classes.contains("rule: slow"), "{classes}");
    let rules = weft_ok(&["get-param", "-n", "--server", &server, "ost.OSS.ost_io.nrs_tbf_rule"]);
    assert!(rules.contains("fast jobid={jobA} 100, ref 1"), "{rules}");
}

#[test]
fn a_global_rule_holds_a_job_to_one_rate_over_two_oss_processes() {
    let mut c = Cluster::multi_node(&weft_bin());
    let mnt = c.mount_with("jobid_var=WEFT_JOB");
    param_ok(&c, &["set-param", "-P", "ost.OSS.ost_io.nrs_policies=tbf jobid"]);
    param_ok(&c, &["set-param", "-P", "ost.OSS.ost_io.nrs_tbf_rule=start ckpt jobid={ckpt} rate=100 global=1"]);
    // One file on each OSS process (OST 0 on oss1, OST 2 on oss2), read 64 KiB at a time
    // around the page cache by the same job.
    for (f, ost) in [("one", "0"), ("two", "2")] {
        weft_ok(&["setstripe", "-c", "1", "-i", ost, mnt.join(f).to_str().unwrap()]);
        std::fs::write(mnt.join(f), pattern(1, 0, 1 << 20)).unwrap();
    }
    let servers = [oss_address(&c, 0), oss_address(&c, 2)];
    for server in &servers {
        eventually(server, "ost.OSS.ost_io.nrs_tbf_rule", |t| {
            t.contains("ckpt jobid={ckpt} 100") && t.contains("global 1")
        });
    }
    let dd = |f: &str| format!("while :; do dd if={f} of=/dev/null bs=64k iflag=direct status=none; done");
    // The job's requests started per second on each server, over `secs`.
    let rates = |secs: u64| {
        let count =
            || servers.each_ref().map(|s| started_by_job(s, "ost.OSS.ost_io").get("ckpt").copied().unwrap_or(0));
        let (before, t0) = (count(), Instant::now());
        std::thread::sleep(Duration::from_secs(secs));
        let after = count();
        let took = t0.elapsed().as_secs_f64();
        [0, 1].map(|i| (after[i] - before[i]) as f64 / took)
    };
    // The division follows the demand within a couple of report intervals (a second each).
    let settle = Duration::from_secs(3);

    let _one = Loop::start("ckpt", &mnt, &dd("one"));
    std::thread::sleep(settle);
    let [a, b] = rates(6);
    assert!((90.0..=110.0).contains(&(a + b)), "files on one server: {a:.1} + {b:.1} per second against 100");
    let _two = Loop::start("ckpt", &mnt, &dd("two"));
    std::thread::sleep(settle);
    let [a, b] = rates(6);
    assert!((90.0..=110.0).contains(&(a + b)), "files on both servers: {a:.1} + {b:.1} per second against 100");
    assert!(a > 20.0 && b > 20.0, "both servers serve the job: {a:.1} and {b:.1}");
    let rules = weft_ok(&["get-param", "-n", "--server", &servers[1], "ost.OSS.ost_io.nrs_tbf_rule"]);
    assert!(rules.contains("global 1, share "), "{rules}");

    // The same rule per server: each gives the job 100.
    param_ok(&c, &["set-param", "-P", "ost.OSS.ost_io.nrs_tbf_rule=stop ckpt"]);
    param_ok(&c, &["set-param", "-P", "ost.OSS.ost_io.nrs_tbf_rule=start ckpt1 jobid={ckpt} rate=100"]);
    for server in &servers {
        eventually(server, "ost.OSS.ost_io.nrs_tbf_rule", |t| t.contains("ckpt1 jobid={ckpt} 100"));
    }
    std::thread::sleep(Duration::from_secs(1));
    let [a, b] = rates(4);
    assert!(a + b > 180.0, "per-server rules: {a:.1} + {b:.1} per second, the rate twice");
}

#[test]
fn a_metadata_rule_caps_one_jobs_creates_while_anothers_run_at_full_speed() {
    let mut c = Cluster::multi_node(&weft_bin());
    let mnt = c.mount_with("jobid_var=WEFT_JOB");
    param_ok(&c, &["set-param", "mds.MDS.mdt.nrs_policies=tbf jobid+opcode"]);
    param_ok(&c, &["set-param", "mds.MDS.mdt.nrs_tbf_rule=start capped jobid={slow}&opcode={mds_create} rate=50"]);
    let creates = |job: &str| {
        std::fs::create_dir(mnt.join(job)).unwrap();
        let script = "import os, sys, time\n\
                      d = sys.argv[1]; n = 0; end = time.time() + 4\n\
                      while time.time() < end:\n    open(f'{d}/f{n}', 'w').close(); n += 1\n\
                      print(n)\n";
        Command::new("python3")
            .args(["-c", script, job])
            .current_dir(&mnt)
            .env("WEFT_JOB", job)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (slow, fast) = (creates("slow"), creates("fast"));
    let count = |child: Child| -> u64 {
        let out = child.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    let (slow, fast) = (count(slow), count(fast));
    // 4 s at 50/s plus the bucket's 3 saved tokens.
    assert!((170..=230).contains(&slow), "the capped job made {slow} files in 4 s at 50/s");
    assert!(fast > 3 * slow, "the other job is not held back: {fast} against {slow}");
    assert_eq!(std::fs::read_dir(mnt.join("slow")).unwrap().count() as u64, slow, "every create is there");
}

#[test]
fn switching_the_policy_under_fio_verify_loses_and_fails_nothing() {
    let mut c = Cluster::multi_node(&weft_bin());
    let mnt = c.mount_with("jobid_var=WEFT_JOB");
    let fio = Command::new("fio")
        .args([
            "--name=switch",
            "--filename=f",
            "--size=48M",
            "--bs=64k",
            "--rw=randwrite",
            "--ioengine=psync",
            "--numjobs=1",
            "--verify=crc32c",
            "--verify_fatal=1",
            "--do_verify=1",
            "--loops=2",
        ])
        .current_dir(&mnt)
        .env("WEFT_JOB", "fio")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fio (installed by make deps)");
    let start = Instant::now();
    let mut switches = 0;
    let mut fio = Some(fio);
    loop {
        if let Some(child) = fio.as_mut() {
            if child.try_wait().unwrap().is_some() {
                break;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(120), "fio did not finish");
        let policy = ["tbf jobid", "crrn", "orr", "fifo"][switches % 4];
        for service in ["ost.OSS.ost_io", "mds.MDS.mdt"] {
            param_ok(&c, &["set-param", &format!("{service}.nrs_policies={policy}")]);
            // Settings that bind: requests are held in the queue when the switch comes.
            let settings: &[&str] = match policy {
                "tbf jobid" => &["nrs_tbf_rule=start f jobid={fio} rate=200"],
                "crrn" => &["nrs_crrn_running_max=1", "nrs_crrn_quantum=2"],
                "orr" if service == "ost.OSS.ost_io" => {
                    &["nrs_orr_running_max=1", "nrs_orr_supported=reads_and_writes"]
                }
                _ => &[],
            };
            for setting in settings {
                param_ok(&c, &["set-param", &format!("{service}.{setting}")]);
            }
        }
        switches += 1;
        std::thread::sleep(Duration::from_millis(300));
    }
    let out = fio.take().unwrap().wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "fio --verify failed after {switches} switches:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(switches >= 4, "the policy switched under the load ({switches} times), through each of the four");
}

#[test]
fn parameters_are_listed_shown_and_refused_with_what_is_allowed() {
    let c = Cluster::multi_node(&weft_bin());
    let names = param_ok(&c, &["list-param", "ost.OSS.*"]);
    assert!(names.contains("ost.OSS.ost_io.nrs_policies") && names.contains("ost.OSS.ost.nrs_tbf_rule"), "{names}");
    assert!(!names.contains("mds.MDS"), "{names}");
    let all = param_ok(&c, &["list-param"]);
    assert!(all.contains("mds.MDS.mdt.nrs_policies") && all.contains("ldlm.services.ldlm_canceld.nrs_policies"));

    // Lustre's shape, fifo in force; each OSS answers, led by its address.
    let policies = param_ok(&c, &["get-param", "ost.OSS.ost_io.nrs_policies"]);
    let oss = oss_address(&c, 0);
    assert!(policies.contains(&format!("{oss}: ost.OSS.ost_io.nrs_policies=")), "{policies}");
    assert!(policies.contains("  - name: fifo") && policies.contains("    state: started"), "{policies}");
    let one = weft_ok(&["get-param", "--server", &oss, "ost.OSS.ost_io.nrs_policies"]);
    assert!(one.starts_with("ost.OSS.ost_io.nrs_policies=\nregular_requests:\n"), "{one}");

    let e = failure_stderr(&param(&c, &["get-param", "ost.OSS.ost_io.no_such"]));
    assert!(
        e.contains("no server has a parameter matching 'ost.OSS.ost_io.no_such'") && e.contains("list-param"),
        "{e}"
    );
    let e = failure_stderr(&param(&c, &["set-param", "ost.OSS.ost_io.nrs_policies=lottery"]));
    assert!(e.contains("unknown NRS policy 'lottery'") && e.contains("fifo, crrn, orr, tbf"), "{e}");
    let e = failure_stderr(&param(&c, &["set-param", "ost.OSS.ost_io.nrs_tbf_rule=start x jobid={a}"]));
    assert!(e.contains("is fifo: set ost.OSS.ost_io.nrs_policies=tbf first"), "{e}");
    let e = failure_stderr(&param(&c, &["set-param", "ost.OSS.ost_io.nrs_orr_supported=reads"]));
    assert!(e.contains("set ost.OSS.ost_io.nrs_policies=orr first"), "{e}");
    param_ok(&c, &["set-param", "ost.OSS.ost_io.nrs_policies=orr"]);
    let e = failure_stderr(&param(&c, &["set-param", "ost.OSS.ost_io.nrs_orr_supported=everything"]));
    assert!(e.contains("one of reads, writes, reads_and_writes"), "{e}");
    param_ok(&c, &["set-param", "ost.OSS.ost_io.nrs_orr_quantum=reg_quantum:64"]);
    let quantum = weft_ok(&["get-param", "-n", "--server", &oss, "ost.OSS.ost_io.nrs_orr_quantum"]);
    assert_eq!(quantum.trim(), "reg_quantum:64");
    let listing = weft_ok(&["get-param", "-n", "--server", &oss, "ost.OSS.ost_io.nrs_policies"]);
    assert!(listing.contains("  - name: orr\n    state: started"), "{listing}");
    assert!(listing.contains("  - name: crrn\n    state: stopped"), "{listing}");
    param_ok(&c, &["set-param", "ost.OSS.ost_io.nrs_policies=tbf jobid"]);
    let e = failure_stderr(&param(&c, &["set-param", "ost.OSS.ost_io.nrs_tbf_rule=start x uid={5}"]));
    assert!(e.contains("'tbf jobid', which takes jobid"), "{e}");
    let e = failure_stderr(&param(&c, &["set-param", "ost.OSS.ost_io.nrs_tbf_rule=start x jobid={a} rate=0"]));
    assert!(e.contains("0 < rate < 1000000"), "{e}");
    let e = failure_stderr(&param(&c, &["set-param", "nrs_policies"]));
    assert!(e.contains("not NAME=VALUE"), "{e}");

    // Only root sets parameters; anyone reads them.
    let mgs = c.mgs_address.clone();
    let set = format!("{} set-param --mgs {mgs} ost.OSS.ost_io.nrs_policies=fifo", weft_bin().display());
    let out = sh_as(1000, 1000, Path::new("/"), &set);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && e.contains("only root sets parameters"), "{e}");
    let get = format!("{} get-param --mgs {mgs} ost.OSS.ost_io.nrs_policies", weft_bin().display());
    assert!(sh_as(1000, 1000, Path::new("/"), &get).status.success());

    // A server that is not there: the command fails within seconds, naming it.
    let t0 = Instant::now();
    let out = weft(&["get-param", "--server", "127.0.0.9:1", "ost.OSS.ost_io.nrs_policies"]);
    let e = failure_stderr(&out);
    assert!(e.contains("127.0.0.9:1"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(10), "took {:?}", t0.elapsed());
}

/// The `sum:` of `counter` in job `job`'s entry of a job_stats YAML.
fn job_counter(yaml: &str, job: &str, counter: &str) -> Option<(u64, u64)> {
    let mut in_job = false;
    for line in yaml.lines() {
        if let Some(id) = line.strip_prefix("- job_id:") {
            in_job = id.trim() == job;
        } else if in_job && line.trim_start().starts_with(&format!("{counter}:")) {
            let field = |name: &str| -> u64 {
                let rest = &line[line.find(&format!("{name}: ")).unwrap() + name.len() + 2..];
                rest.split(',').next().unwrap().trim().parse().unwrap()
            };
            return Some((field("samples"), field("sum")));
        }
    }
    None
}

#[test]
fn job_stats_show_what_each_job_did_on_osts_and_the_mdt() {
    let mut c = Cluster::multi_node(&weft_bin());
    let mnt = c.mount_with("jobid_var=WEFT_JOB");
    // Absolute paths and a working directory off the mount: nothing touches the mount
    // before dd runs under its job.
    let write = |job: &str, file: &str, mib: u32| {
        let path = mnt.join(file);
        weft_ok(&["setstripe", "-c", "1", "-i", "0", path.to_str().unwrap()]);
        let out = Command::new("dd")
            .args([
                "if=/dev/zero",
                &format!("of={}", path.display()),
                "bs=1M",
                &format!("count={mib}"),
                "conv=fsync,notrunc",
                "status=none",
            ])
            .current_dir("/")
            .env("WEFT_JOB", job)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    write("writer1", "one", 3);
    write("writer2", "two", 1);
    let server = oss_address(&c, 0);
    let ost = weft_ok(&["get-param", "-n", "--server", &server, "obdfilter.*-OST0000.job_stats"]);
    assert!(ost.starts_with("job_stats:\n"), "{ost}");
    let (_, w1) = job_counter(&ost, "writer1", "write_bytes").expect("writer1 on OST0000");
    let (_, w2) = job_counter(&ost, "writer2", "write_bytes").expect("writer2 on OST0000");
    assert_eq!((w1, w2), (3 << 20, 1 << 20), "the bytes each job wrote:\n{ost}");
    let (syncs, _) = job_counter(&ost, "writer1", "sync").unwrap();
    assert!(syncs >= 1, "conv=fsync:\n{ost}");
    let mdt = param_ok(&c, &["get-param", "-n", "mdt.*.job_stats"]);
    for job in ["writer1", "writer2"] {
        let (opens, _) = job_counter(&mdt, job, "open").unwrap_or_else(|| panic!("{job} on the MDT:\n{mdt}"));
        let (closes, _) = job_counter(&mdt, job, "close").unwrap();
        assert!(opens >= 1 && closes >= 1, "{job}: {opens} opens, {closes} closes\n{mdt}");
    }
    // Clearing, as Lustre: one job, then all.
    weft_ok(&["set-param", "--server", &server, "obdfilter.*-OST0000.job_stats=writer1"]);
    let ost = weft_ok(&["get-param", "-n", "--server", &server, "obdfilter.*-OST0000.job_stats"]);
    assert!(
        job_counter(&ost, "writer1", "write_bytes").is_none() && job_counter(&ost, "writer2", "write_bytes").is_some()
    );
    param_ok(&c, &["set-param", "obdfilter.*.job_stats=clear"]);
    let ost = weft_ok(&["get-param", "-n", "--server", &server, "obdfilter.*-OST0000.job_stats"]);
    assert_eq!(ost.trim(), "job_stats:");
    let interval = param_ok(&c, &["get-param", "-n", "mdt.*.job_cleanup_interval"]);
    assert_eq!(interval.trim(), "600", "Lustre's default");
}

/// Polls `get-param -n NAME` on `server` until it satisfies `ok` (a server applies its
/// permanent settings as it starts, while it already answers).
fn eventually(server: &str, name: &str, ok: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let out = weft(&["get-param", "-n", "--server", server, name]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() && ok(&text) {
            return text;
        }
        assert!(start.elapsed() < Duration::from_secs(15), "{name} on {server} never became right:\n{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn permanent_parameters_are_applied_again_when_a_server_restarts() {
    let mut c = Cluster::multi_node(&weft_bin());
    param_ok(&c, &["set-param", "-P", "ost.OSS.ost_io.nrs_policies=tbf jobid"]);
    param_ok(&c, &["set-param", "-P", "ost.OSS.ost_io.nrs_tbf_rule=start keep jobid={k} rate=77"]);
    param_ok(&c, &["set-param", "-P", "obdfilter.*.job_cleanup_interval=900"]);
    // Not permanent: gone after the restart.
    param_ok(&c, &["set-param", "ost.OSS.ost_io.nrs_tbf_rule=start live jobid={l} rate=5"]);
    // Servers running now have them too (oss2, never restarted).
    let other = oss_address(&c, 2);
    let rules = eventually(&other, "ost.OSS.ost_io.nrs_tbf_rule", |t| t.contains("keep jobid={k} 77"));
    assert!(rules.contains("live jobid={l} 5"), "{rules}");

    let server = oss_address(&c, 0);
    c.kill9("oss1");
    c.restart("oss1");
    let rules = eventually(&server, "ost.OSS.ost_io.nrs_tbf_rule", |t| t.contains("keep jobid={k} 77"));
    assert!(!rules.contains("live"), "a live-only rule does not come back:\n{rules}");
    eventually(&server, "obdfilter.*-OST0000.job_cleanup_interval", |t| t.trim() == "900");

    // Deleted: the next start goes without it.
    param_ok(&c, &["set-param", "-P", "-d", "obdfilter.*.job_cleanup_interval"]);
    let e = failure_stderr(&param(&c, &["set-param", "-P", "-d", "obdfilter.*.job_cleanup_interval"]));
    assert!(e.contains("no permanent parameter matches"), "{e}");
    c.kill9("oss1");
    c.restart("oss1");
    eventually(&server, "ost.OSS.ost_io.nrs_tbf_rule", |t| t.contains("keep jobid={k} 77"));
    eventually(&server, "obdfilter.*-OST0000.job_cleanup_interval", |t| t.trim() == "600");
    // A value the servers refuse is not kept.
    let e = failure_stderr(&param(&c, &["set-param", "-P", "ost.OSS.ost_io.nrs_policies=lottery"]));
    assert!(e.contains("unknown NRS policy"), "{e}");
    c.kill9("oss1");
    c.restart("oss1");
    let policies = eventually(&server, "ost.OSS.ost_io.nrs_policies", |t| t.contains("name: tbf jobid"));
    assert!(policies.contains("state: started"), "{policies}");
}

#[test]
fn a_throttled_job_does_not_hold_a_remote_mounts_threads_from_another_job() {
    let mut c = Cluster::multi_node(&weft_bin());
    let mnt = c.mount_with("jobid_var=WEFT_JOB");
    param_ok(&c, &["set-param", "mds.MDS.mdt.nrs_policies=tbf jobid"]);
    param_ok(&c, &["set-param", "mds.MDS.mdt.nrs_tbf_rule=start crawl jobid={slow} rate=1"]);
    // Each job in a directory of its own: the kernel serializes creates in one directory
    // whatever the file system does.
    std::fs::create_dir(mnt.join("s")).unwrap();
    std::fs::create_dir(mnt.join("f")).unwrap();
    // More held mkdirs than the mount has FUSE threads (two, or two per CPU queue), in
    // directories of their own: the first three take the bucket's saved tokens, the rest
    // wait a second each.
    for i in 0..10 {
        std::fs::create_dir(mnt.join("s").join(i.to_string())).unwrap();
    }
    let slow: Vec<Child> = (0..10)
        .map(|i| {
            Command::new("mkdir")
                .arg(mnt.join("s").join(i.to_string()).join("d"))
                .current_dir("/")
                .env("WEFT_JOB", "slow")
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // Another job's requests on the same mount go through at once meanwhile.
    let t0 = Instant::now();
    let out = Command::new("sh")
        .args(["-c", "mkdir fast && touch fast/a && ls -l fast >/dev/null && stat . >/dev/null"])
        .current_dir(mnt.join("f"))
        .env("WEFT_JOB", "fast")
        .output()
        .unwrap();
    let took = t0.elapsed();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(took < Duration::from_secs(2), "the other job waited {took:?} behind the throttled one");
    // And the throttled ones all finish, at their rate.
    let t0 = Instant::now();
    for mut child in slow {
        assert!(child.wait().unwrap().success());
    }
    assert!(t0.elapsed() >= Duration::from_secs(4), "the rule held them: {:?}", t0.elapsed());
    assert_eq!((0..10).filter(|i| mnt.join("s").join(i.to_string()).join("d").is_dir()).count(), 10);
}

/// A mount's parameters, as its root's `weft.params` attribute gives them.
fn mount_params(mnt: &Path) -> BTreeMap<String, String> {
    let out = Command::new("python3")
        .args(["-c", "import os,sys; sys.stdout.write(os.getxattr(sys.argv[1], 'weft.params').decode())"])
        .arg(mnt)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap().into(), p["value"].as_str().unwrap().into()))
        .collect()
}

/// `weft set-param -P NAME=VALUE`, naming one server (so no mount of this node is set
/// directly).
fn permanent(c: &Cluster, server: &str, name: &str, value: &str) -> std::process::Output {
    param(c, &["set-param", "-P", "--server", server, &format!("{name}={value}")])
}

/// Waits (10 s at most) until every one of `mounts` shows `name` = `value`: a permanent
/// setting reaching the mounts.
fn mounts_take(mounts: &[&Path], name: &str, value: &str) {
    let start = Instant::now();
    while mounts.iter().any(|m| mount_params(m)[name] != value) {
        assert!(start.elapsed() < Duration::from_secs(10), "the mounts never took the permanent {name}={value}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn mounts_take_their_client_settings_from_the_management_service() {
    let mut c = Cluster::multi_node(&weft_bin());
    let a = c.mount();
    assert_eq!(mount_params(&a)["jobid_var"], "procname_uid", "the default");
    // Set from anywhere with -P (here naming one server, so no mount of this node is
    // touched directly): the mounts follow the management service.
    let oss = oss_address(&c, 0);
    let out = permanent(&c, &oss, "jobid_var", "bad value");
    assert!(failure_stderr(&out).contains("allowed are disable, procname_uid, nodelocal"));
    let out = permanent(&c, &oss, "jobid_var", "WEFT_JOB");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    mounts_take(&[&a], "jobid_var", "WEFT_JOB");
    // A mount made later starts with it.
    let b = c.mount();
    assert_eq!(mount_params(&b)["jobid_var"], "WEFT_JOB");
    // And requests carry the variable's value.
    let file = b.join("tagged");
    weft_ok(&["setstripe", "-c", "1", "-i", "0", file.to_str().unwrap()]);
    let out = Command::new("dd")
        .args(["if=/dev/zero", &format!("of={}", file.display()), "bs=64k", "count=4", "conv=fsync", "status=none"])
        .current_dir("/")
        .env("WEFT_JOB", "from_env_42")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stats = weft_ok(&["get-param", "-n", "--server", &oss, "obdfilter.*-OST0000.job_stats"]);
    assert_eq!(job_counter(&stats, "from_env_42", "write_bytes").map(|c| c.1), Some(4 << 16), "{stats}");

    // The mounts' bound of data written and not yet on the servers, the same way; a file
    // many times larger than it is written whole.
    assert_eq!(mount_params(&b)["max_dirty_mb"], "64", "the default");
    assert!(failure_stderr(&permanent(&c, &oss, "max_dirty_mb", "0")).contains("max_dirty_mb '0': MiB from 1 to"));
    assert!(permanent(&c, &oss, "max_dirty_mb", "2").status.success());
    mounts_take(&[&a, &b], "max_dirty_mb", "2");
    let data = pattern(7, 0, 24 << 20);
    std::fs::write(b.join("big"), &data).unwrap();
    assert!(std::fs::read(a.join("big")).unwrap() == data, "what one mount wrote under a 2 MiB bound, the other reads");

    // The writes of one file a mount sends at once (Lustre's osc.*.max_rpcs_in_flight): on
    // one mount (its root's weft.param: attribute, what `weft set-param` on that node does),
    // then for every client with -P.
    assert_eq!(mount_params(&a)["max_rpcs_in_flight"], "8", "the default");
    let set_here = |mnt: &Path, value: &str| {
        Command::new("python3")
            .args([
                "-c",
                "import os,sys; os.setxattr(sys.argv[1], 'weft.param:max_rpcs_in_flight', sys.argv[2].encode())",
            ])
            .arg(mnt)
            .arg(value)
            .output()
            .unwrap()
    };
    assert!(!set_here(&a, "300").status.success(), "above Lustre's bound of 256");
    assert!(set_here(&a, "3").status.success());
    assert_eq!(mount_params(&a)["max_rpcs_in_flight"], "3");
    assert_eq!(mount_params(&b)["max_rpcs_in_flight"], "8", "a mount's own setting stays on it");
    let refused = failure_stderr(&permanent(&c, &oss, "max_rpcs_in_flight", "0"));
    assert!(refused.contains("max_rpcs_in_flight '0': requests from 1 to 256"), "{refused}");
    assert!(permanent(&c, &oss, "max_rpcs_in_flight", "1").status.success());
    mounts_take(&[&a, &b], "max_rpcs_in_flight", "1");
    let data = pattern(8, 0, 24 << 20);
    std::fs::write(a.join("one-at-a-time"), &data).unwrap();
    assert!(std::fs::read(b.join("one-at-a-time")).unwrap() == data, "written one request at a time, read back whole");
}
