//! Adding and removing a replica of a live replicated MDT (`weft replica add|remove`):
//! a file system made with one MDT and files, made replicated by `weft up --replicas 3`
//! (so the replicas' logs start after those files), a fourth `weft server` whose config says `join =
//! true`. While it is not added it disturbs nothing (the group's term stays, writes go on);
//! bad input is refused naming what is allowed; then it is added (`weft status` lists it,
//! holding the whole log), the leader is removed (the others elect another), the new leader
//! is killed with SIGKILL and the file system serves every file written before. Last, the
//! added replica is made the leader (the others stopped in turn, so that its log is the
//! longest) and a fresh mount reads every file from it: it holds the data, not only the log.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `weft up --replicas 3` and the replicas the test starts or stops, let go on drop even when
/// the test fails.
struct Fs {
    dir: tempfile::TempDir,
    data: PathBuf,
    mnt: PathBuf,
    mnt2: PathBuf,
    mgs: String,
    /// The fourth replica's process and config.
    fourth: Option<Child>,
    /// Processes stopped with SIGSTOP, continued on drop.
    stopped: Vec<u32>,
}

impl Drop for Fs {
    fn drop(&mut self) {
        for pid in &self.stopped {
            // SAFETY: kill(2) of a replica process this test stopped.
            unsafe { libc::kill(*pid as i32, libc::SIGCONT) };
        }
        if let Some(mut c) = self.fourth.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        take_down(&self.data, &self.mnt, &self.mnt2);
    }
}

/// A group as `weft status --json` shows it: the leader's address and each member's
/// (replica id, address, kind, matched).
#[derive(Debug, Clone)]
struct Group {
    leader: String,
    last_log_index: String,
    members: Vec<(u64, String, String, String)>,
}

impl Fs {
    fn start() -> Fs {
        let dir = tempfile::tempdir().unwrap();
        let (data, mnt, mnt2) = (dir.path().join("data"), dir.path().join("mnt"), dir.path().join("mnt2"));
        let mut fs = Fs { dir, data, mnt, mnt2, mgs: String::new(), fourth: None, stopped: Vec::new() };
        // Made with one MDT and files, then replicated: the replicas' logs start after the
        // files (`replicas::convert`), so a replica added later holds them only if it starts
        // from a snapshot.
        weft_ok(&["up", "--data", s(&fs.data), "--mount", s(&fs.mnt), "--detach", "--osts", "2"]);
        write_files(&fs.mnt.join("before"), 0..60);
        weft_ok(&["down", "--data", s(&fs.data)]);
        let out = weft_ok(&[
            "up",
            "--data",
            s(&fs.data),
            "--mount",
            s(&fs.mnt),
            "--detach",
            "--replicas",
            "3",
            "--osts",
            "2",
        ]);
        fs.mgs = out.lines().find_map(|l| l.split("weft mount ").nth(1)?.split_whitespace().next()).unwrap().into();
        fs
    }

    fn status(&self) -> serde_json::Value {
        serde_json::from_str(&weft_ok(&["status", "--data", s(&self.data), "--json"])).unwrap()
    }

    /// The MDT's group as `weft status` shows it, if its leader answered.
    fn group(&self) -> Option<Group> {
        let v = self.status();
        let g = v["groups"].as_array()?.iter().find(|g| g["name"].as_str() == Some("weft-MDT0000"))?.clone();
        let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
        Some(Group {
            leader: text(&g["leader"]).split_whitespace().nth(1)?.to_string(),
            last_log_index: text(&g["last_log_index"]),
            members: g["members"]
                .as_array()?
                .iter()
                .map(|m| (m["replica"].as_u64().unwrap(), text(&m["address"]), text(&m["kind"]), text(&m["matched"])))
                .collect(),
        })
    }

    /// Waits (60 s at most) until the group satisfies `done`.
    fn group_until(&self, what: &str, done: impl Fn(&Group) -> bool) -> Group {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let g = self.group();
            if let Some(g) = g.clone().filter(|g| done(g)) {
                return g;
            }
            assert!(Instant::now() < deadline, "{what}: not within 60 s; the group: {g:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The pid of the replica process `weft up` runs at `address`.
    fn pid_at(&self, address: &str) -> u32 {
        let v = self.status();
        let p = v["processes"].as_array().unwrap().iter().find(|p| p["address"].as_str() == Some(address));
        p.unwrap_or_else(|| panic!("no process at {address}: {v}"))["pid"].as_u64().unwrap() as u32
    }

    fn signal(&mut self, pid: u32, signal: i32) {
        // SAFETY: kill(2) of a replica process of this test's file system.
        assert_eq!(unsafe { libc::kill(pid as i32, signal) }, 0);
        match signal {
            libc::SIGSTOP => self.stopped.push(pid),
            libc::SIGCONT => self.stopped.retain(|p| *p != pid),
            _ => {}
        }
    }

    /// Starts (again) the fourth replica's `weft server` on `config`.
    fn start_fourth(&mut self, config: &Path) {
        let log = std::fs::File::create(self.dir.path().join("r4.out")).unwrap();
        let child = Command::new(weft_bin())
            .args(["server", "--config", s(config)])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.fourth = Some(child);
    }
}

/// The config of a replica joining the MDT's group: the first replica's, at a new address
/// and directory, holding no MGS replica, listed after every replica the group had.
fn joining_config(fs: &Fs) -> (PathBuf, String) {
    let mut c = weft_server::ServerConfig::load(&fs.data.join("replicas").join("r1.toml")).unwrap();
    let address = format!("127.0.0.1:{}", weft_harness::free_port("127.0.0.1"));
    c.listen = address.clone();
    c.data_dir = fs.dir.path().join("r4");
    c.mgs = None;
    let mds = c.mds.as_mut().unwrap();
    mds.replicas.push(address.clone());
    mds.join = true;
    let path = fs.dir.path().join("r4.toml");
    std::fs::write(&path, toml::to_string_pretty(&c).unwrap()).unwrap();
    (path, address)
}

fn write_files(dir: &Path, range: std::ops::Range<u64>) {
    std::fs::create_dir_all(dir).unwrap();
    for n in range {
        std::fs::write(dir.join(format!("f{n}")), pattern(n, 0, 200 + (n as usize * 131) % 9000)).unwrap();
    }
}

fn check_files(dir: &Path, range: std::ops::Range<u64>) {
    for n in range {
        let p = dir.join(format!("f{n}"));
        let got = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(got == pattern(n, 0, 200 + (n as usize * 131) % 9000), "{}: wrong bytes", p.display());
    }
}

/// Whether a member's matched index is the leader's last (a few entries behind at most: the
/// leader may be writing while it answers).
fn caught_up(matched: &str, g: &Group) -> bool {
    match (matched.parse::<u64>(), g.last_log_index.parse::<u64>()) {
        (Ok(m), Ok(last)) => m + 10 >= last,
        _ => false,
    }
}

fn fails(args: &[&str]) -> String {
    let out = weft(args);
    assert!(!out.status.success(), "weft {args:?} should have failed: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_replica_is_added_and_one_removed_on_a_live_file_system_and_the_new_one_holds_the_data() {
    let mut fs = Fs::start();
    let before = fs.mnt.join("before");
    let first = fs.group_until("a leader and three caught-up members", |g| g.members.len() == 3);
    let originals: Vec<String> = first.members.iter().map(|m| m.1.clone()).collect();

    // A replica that joins but is not added: it starts no group and calls no election.
    let (config, fourth) = joining_config(&fs);
    fs.start_fourth(&config);
    let term = |fs: &Fs| fs.status()["groups"][0]["term"].as_u64().unwrap();
    let term_before = term(&fs);
    write_files(&fs.mnt.join("while-waiting"), 0..40);
    std::thread::sleep(Duration::from_secs(2));
    let waiting = fs.group().unwrap();
    assert_eq!(waiting.members.len(), 3, "{waiting:?}");
    assert_eq!(term(&fs), term_before, "a waiting replica disturbed the group's leader");

    // Bad input: named, with what is allowed.
    let e = fails(&["replica", "add", "weft-MDT0009", &fourth, "--mgs", &fs.mgs]);
    assert!(e.contains("unknown group 'weft-MDT0009'") && e.contains("weft-MDT0000, MGS"), "{e}");
    let e = fails(&["replica", "remove", "weft-MDT0000", "127.0.0.1:9", "--mgs", &fs.mgs]);
    assert!(e.contains("127.0.0.1:9 is not a member") && e.contains(&originals[0]), "{e}");
    let asked = Instant::now();
    let nobody = format!("127.0.0.1:{}", weft_harness::free_port("127.0.0.1"));
    let e = fails(&["replica", "add", "weft-MDT0000", &nobody, "--mgs", &fs.mgs]);
    assert!(e.contains(&format!("no replica answers at {nobody}")) && e.contains("join = true"), "{e}");
    assert!(asked.elapsed() < Duration::from_secs(10), "a missing server took {:?}", asked.elapsed());

    // Added: it catches up (from a snapshot, then the log) and votes; four voters, warned of.
    let out = Command::new(weft_bin()).args(["replica", "add", "weft-MDT0000", &fourth, "--mgs", &fs.mgs]).output();
    let out = out.unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "weft replica add failed: {stdout}{stderr}");
    assert!(stdout.contains(&format!("replica 4 at {fourth} added")), "{stdout}");
    assert!(stderr.contains("4 voters"), "no warning of an even group: {stderr}");
    let added = fs.group_until("the fourth replica holding the leader's log", |g| {
        g.members.iter().any(|m| m.0 == 4 && m.1 == fourth && m.2 == "voter" && caught_up(&m.3, g))
    });
    let text = weft_ok(&["status", "--data", s(&fs.data)]);
    assert!(text.contains("weft-MDT0000") && text.contains(&fourth), "weft status does not list it:\n{text}");
    write_files(&fs.mnt.join("after-add"), 0..20);

    // The leader removed: it steps down, the other three elect one among themselves.
    let removed = added.leader.clone();
    weft_ok(&["replica", "remove", "weft-MDT0000", &removed, "--mgs", &fs.mgs]);
    let three = fs.group_until("a new leader without the removed replica", |g| {
        g.leader != removed && g.members.len() == 3 && g.members.iter().all(|m| m.1 != removed)
    });
    write_files(&fs.mnt.join("after-remove"), 0..20);

    // The new leader killed: the file system serves every file written before.
    let killed = three.leader.clone();
    if killed == fourth {
        let mut c = fs.fourth.take().unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    } else {
        let pid = fs.pid_at(&killed);
        fs.signal(pid, libc::SIGKILL);
    }
    write_files(&fs.mnt.join("after-kill"), 0..20);
    check_files(&before, 0..60);
    check_files(&fs.mnt.join("after-add"), 0..20);
    check_files(&fs.mnt.join("after-remove"), 0..20);
    if fs.fourth.is_none() {
        fs.start_fourth(&config);
    }

    // The fourth made the leader: with every member back and caught up, the leader stopped
    // (if it is not the fourth), then, if the next is not the fourth either, that one
    // stopped and the first continued: the fourth's log is then longer than the first's,
    // which can only vote for it.
    let members: Vec<String> = three.members.iter().map(|m| m.1.clone()).collect();
    let settled = fs.group_until("every member back and caught up", |g| {
        g.members.len() == 3 && g.members.iter().filter(|m| m.1 != g.leader).all(|m| caught_up(&m.3, g))
    });
    if settled.leader != fourth {
        let first_pid = fs.pid_at(&settled.leader);
        fs.signal(first_pid, libc::SIGSTOP);
        let next = fs.group_until("a leader after the stop", |g| g.leader != settled.leader);
        // Committed by the next leader with the fourth (the first is stopped): the fourth's
        // log is then longer than the first's.
        write_files(&fs.mnt.join("between"), 0..5);
        if next.leader != fourth {
            let next_pid = fs.pid_at(&next.leader);
            fs.signal(next_pid, libc::SIGSTOP);
            fs.signal(first_pid, libc::SIGCONT);
        }
    }
    fs.group_until("the fourth replica leading", |g| g.leader == fourth);
    assert!(members.contains(&fourth));
    std::fs::create_dir_all(&fs.mnt2).unwrap();
    let log = format!("log={}", fs.dir.path().join("mnt2.log").display());
    weft_ok(&["mount", "-o", &log, &fs.mgs, s(&fs.mnt2)]);
    check_files(&fs.mnt2.join("before"), 0..60);
    check_files(&fs.mnt2.join("while-waiting"), 0..40);
    check_files(&fs.mnt2.join("after-add"), 0..20);
    check_files(&fs.mnt2.join("after-remove"), 0..20);
    check_files(&fs.mnt2.join("after-kill"), 0..20);
}
