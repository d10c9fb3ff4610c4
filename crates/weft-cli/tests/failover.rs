//! A replicated MDT under real programs: `weft up --replicas 3` (each replica a process of
//! its own) and a second mount of it by `weft mount`; while a create loop runs on one
//! mount, `tar -x` on the other and `fio --verify` on the first, the MDT's leader is killed
//! with SIGKILL again and again (`weft up` starts each killed replica again, and the test
//! waits until it caught up before the next kill). The programs finish without an error,
//! every file the loop was told it made is there with its bytes, the extracted tree is the
//! tarball's, and the time from each kill to the loop's next answer is printed.
//!
//! `WEFT_FAILOVER_KILLS` sets the number of kills (2 in `make test`, 10 in `make soak`).

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A replica process as `weft status --json` shows it: pid, alive, (role, applied) if it
/// answered.
type ReplicaSeen = (u32, bool, Option<(String, String)>);

/// `weft up --replicas 3` and a second mount, let go on drop even when the test fails.
struct Replicated {
    _dir: tempfile::TempDir,
    data: PathBuf,
    mnt: PathBuf,
    mnt2: PathBuf,
}

impl Replicated {
    fn start() -> Replicated {
        Replicated::start_with(|_| {})
    }

    /// As [`Replicated::start`], after `before` ran on the (not yet started) file system.
    fn start_with(before: impl FnOnce(&Replicated)) -> Replicated {
        let dir = tempfile::tempdir().unwrap();
        let (data, mnt, mnt2) = (dir.path().join("data"), dir.path().join("mnt"), dir.path().join("mnt2"));
        let r = Replicated { _dir: dir, data, mnt, mnt2 };
        before(&r);
        let out =
            weft_ok(&["up", "--data", s(&r.data), "--mount", s(&r.mnt), "--detach", "--replicas", "3", "--osts", "2"]);
        assert!(out.contains("3 replicas"), "{out}");
        let mgs = out.lines().find_map(|l| l.split("weft mount ").nth(1)?.split_whitespace().next()).unwrap();
        std::fs::create_dir_all(&r.mnt2).unwrap();
        // Its log in the test's directory, removed with it (not the default, in /tmp).
        let log = format!("log={}", r.data.with_file_name("mnt2.log").display());
        weft_ok(&["mount", "-o", &log, mgs, s(&r.mnt2)]);
        r
    }

    /// Every replica process `weft status --json` lists: (pid, alive, its role and applied
    /// index if it answered).
    fn processes(&self) -> Vec<ReplicaSeen> {
        let out = weft_ok(&["status", "--data", s(&self.data), "--json"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["role"].as_str().unwrap().starts_with("MDT"))
            .map(|p| {
                let r = &p["replica"];
                let replica = r
                    .is_object()
                    .then(|| (r["role"].as_str().unwrap().to_string(), r["applied"].as_str().unwrap().to_string()));
                (p["pid"].as_u64().unwrap() as u32, p["alive"].as_bool().unwrap(), replica)
            })
            .collect()
    }

    /// Waits until three replicas answer, one leads, and every one has applied nearly all
    /// the others have (a replica started again caught up); returns the leader's pid.
    fn settled(&self) -> u32 {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let procs = self.processes();
            let answered: Vec<_> = procs.iter().filter_map(|(pid, _, r)| r.clone().map(|r| (*pid, r))).collect();
            let leader = answered.iter().find(|(_, (role, _))| role == "leader").map(|(pid, _)| *pid);
            let applied: Vec<u64> = answered.iter().filter_map(|(_, (_, a))| a.parse().ok()).collect();
            let spread = applied.iter().max().unwrap_or(&0) - applied.iter().min().unwrap_or(&0);
            if let (3, Some(leader), true) = (applied.len(), leader, spread < 500) {
                return leader;
            }
            assert!(Instant::now() < deadline, "the replicas did not settle: {procs:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Replicated {
    fn drop(&mut self) {
        take_down(&self.data, &self.mnt, &self.mnt2);
    }
}

/// A tree of small files in `dir` and its tarball.
fn tree(dir: &Path) -> PathBuf {
    let src = dir.join("src");
    for d in 0..20 {
        let sub = src.join(format!("d{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..60 {
            std::fs::write(sub.join(format!("f{f}")), pattern(d * 100 + f, 0, 512 + (f as usize * 97) % 6000)).unwrap();
        }
    }
    let ball = dir.join("tree.tar");
    sh(dir, &format!("tar -cf {} -C {} .", ball.display(), src.display()));
    ball
}

#[test]
fn programs_carry_on_while_the_mdt_leader_is_killed_and_nothing_acknowledged_is_lost() {
    let kills: usize = std::env::var("WEFT_FAILOVER_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
    let fs = Replicated::start();
    let local = tempfile::tempdir().unwrap();
    let ball = tree(local.path());
    let leader = fs.settled();

    // The create loop: each file written and closed, then counted as acknowledged.
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Mutex<Vec<(PathBuf, Instant)>>> = Arc::default();
    let loop_dir = fs.mnt.join("loop");
    std::fs::create_dir(&loop_dir).unwrap();
    let creates = {
        let (stop, acked, dir) = (stop.clone(), acked.clone(), loop_dir.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let p = dir.join(format!("c{n}"));
                std::fs::write(&p, pattern(n, 0, 100 + (n as usize % 4000)))
                    .unwrap_or_else(|e| panic!("create {n}: {e}"));
                acked.lock().unwrap().push((p, Instant::now()));
                n += 1;
            }
        })
    };
    // tar -x on the other mount, fio --verify on this one, both while the leader dies.
    std::fs::create_dir(fs.mnt2.join("t")).unwrap();
    let tar = Command::new("tar").arg("-xf").arg(&ball).arg("-C").arg(fs.mnt2.join("t")).spawn().unwrap();
    let fio = Command::new("fio")
        .args(["--name=failover", "--size=48M", "--bs=64k", "--rw=randwrite", "--ioengine=psync"])
        .args(["--verify=crc32c", "--verify_fatal=1", "--do_verify=1", "--numjobs=2", "--group_reporting"])
        // No verify state file in the test's working directory (the crate's).
        .arg("--verify_state_save=0")
        .arg(format!("--directory={}", fs.mnt.display()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("fio (installed by make deps)");

    let mut waits = Vec::new();
    let mut leader = leader;
    for k in 0..kills {
        std::thread::sleep(Duration::from_millis(700));
        let killed_at = Instant::now();
        // SAFETY: kill(2) of the replica process `weft up` started.
        assert_eq!(unsafe { libc::kill(leader as i32, libc::SIGKILL) }, 0);
        // The loop's longest wait for an answer after the kill (a create sent before it may
        // be answered just after; the next one waits for the new leader).
        let deadline = killed_at + Duration::from_secs(60);
        loop {
            let answered = acked.lock().unwrap().iter().filter(|(_, at)| *at > killed_at).count();
            if answered >= 3 {
                break;
            }
            assert!(Instant::now() < deadline, "no create answered within 60 s of kill {k}");
            std::thread::sleep(Duration::from_millis(10));
        }
        let acked_now = acked.lock().unwrap().iter().map(|(_, at)| *at).collect::<Vec<_>>();
        let mut before = killed_at;
        let mut longest = Duration::ZERO;
        for at in acked_now.into_iter().filter(|at| *at > killed_at) {
            longest = longest.max(at.duration_since(before));
            before = at;
        }
        waits.push(longest);
        leader = fs.settled();
    }
    stop.store(true, Ordering::Relaxed);
    creates.join().expect("the create loop failed");
    let tar = tar.wait_with_output().unwrap();
    assert!(tar.status.success(), "tar -x failed: {}", String::from_utf8_lossy(&tar.stderr));
    let fio = fio.wait_with_output().unwrap();
    assert!(
        fio.status.success(),
        "fio --verify failed:\n{}{}",
        String::from_utf8_lossy(&fio.stdout),
        String::from_utf8_lossy(&fio.stderr)
    );

    // Everything acknowledged is there, with its bytes, seen from the other mount too.
    let acked = acked.lock().unwrap();
    for (n, (p, _)) in acked.iter().enumerate() {
        let want = pattern(n as u64, 0, 100 + (n % 4000));
        assert_eq!(std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())), want, "{}", p.display());
    }
    let other = fs.mnt2.join("loop");
    assert_eq!(std::fs::read_dir(&other).unwrap().count(), acked.len(), "the other mount lists every file");
    let src = local.path().join("src");
    sh(local.path(), &format!("diff -r {} {}", src.display(), fs.mnt2.join("t").display()));

    // The leader's last recovery, as Lustre shows it: over, with the locks the mounts
    // replayed to it (kept, or refused when they came after its window, as a loaded
    // machine can make them).
    let status = weft_ok(&["get-param", "--data", s(&fs.data), "mdt.*.recovery_status"]);
    assert!(status.contains("status: COMPLETE") && status.contains("IR: ENABLED"), "{status}");
    let count = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.split(key).nth(1))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} line: {status}"))
    };
    let replayed = count("replayed_locks: ") + count("refused_locks: ");
    assert!(replayed > 0, "the mounts replayed their locks to the last leader: {status}");
    // Each mount's import of the MDT, as Lustre shows a client's: done replaying, reached
    // at another server for each move it saw (two moves between two looks at the map count
    // as one). A kill may make two moves: two replicas that stand at once split the vote
    // and stand again (a replica started again, behind, no longer deposes the new leader:
    // it stands only after a pre-vote, which the others refuse while they hear a leader).
    let imports = weft_ok(&["get-param", "--data", s(&fs.data), "mdc.*.import"]);
    assert!(imports.contains("state: FULL"), "{imports}");
    let generations: Vec<usize> =
        imports.lines().filter_map(|l| l.split("generation: ").nth(1)).map(|v| v.trim().parse().unwrap()).collect();
    assert!(generations.len() == 2 && generations.iter().all(|g| (2..=2 * kills + 1).contains(g)), "{imports}");
    let replays: u64 = imports
        .lines()
        .filter_map(|l| l.split("locks_kept: ").nth(1).or_else(|| l.split("locks_refused: ").nth(1)))
        .map(|v| v.trim().parse::<u64>().unwrap())
        .sum();
    assert!(replays > 0, "the mounts replayed their locks through the failovers: {imports}");

    waits.sort();
    let ms = |d: &Duration| d.as_millis();
    println!(
        "MDT leader killed {kills} times under a create loop, tar -x and fio --verify: {} creates; \
         the loop's longest wait for an answer after a kill: {} ms (median), {} ms (worst)",
        acked.len(),
        ms(&waits[(waits.len() - 1) / 2]),
        ms(waits.last().unwrap())
    );
}

/// A leader cut off (its process stopped, as a long pause or a partition would leave it)
/// while the others elect another: once it runs again it refuses writes and never answers a
/// read from its old state (a name made meanwhile is never "not found" there).
#[test]
fn a_stopped_leader_that_wakes_refuses_writes_and_serves_no_stale_read() {
    use weft_proto::msg::{mdt, RequestHeader};
    use weft_proto::{ErrorCode, Fid};
    let fs = Replicated::start();
    let leader = fs.settled();
    let status = weft_ok(&["status", "--data", s(&fs.data), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&status).unwrap();
    let address = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"].as_u64() == Some(u64::from(leader)))
        .and_then(|p| p["address"].as_str())
        .unwrap()
        .to_string();
    // SAFETY: kill(2) of the replica process `weft up` started.
    assert_eq!(unsafe { libc::kill(leader as i32, libc::SIGSTOP) }, 0);
    let resumed = scopeguard(leader);
    // The others elect a leader and the mount carries on: a name made while it sleeps.
    std::fs::write(fs.mnt.join("made-meanwhile"), b"x").unwrap();
    drop(resumed); // SIGCONT
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let peer = weft_rpc::Peer::new(address.as_str(), weft_rpc::PeerOptions::default());
    let header = || RequestHeader { client_id: 77, request_id: 0, ..RequestHeader::default() };
    let timeout = Duration::from_secs(5);
    for round in 0..20 {
        let lookup = mdt::Lookup { parent: Fid::ROOT, name: b"made-meanwhile".to_vec() };
        match rt.block_on(peer.op(header(), 0, lookup, bytes::Bytes::new(), timeout)) {
            Ok(_) => {}
            Err(e) => assert_eq!(e.code, ErrorCode::Moved, "round {round}: the woken leader answered {e}"),
        }
        let mkdir =
            mdt::Mkdir { parent: Fid::ROOT, name: format!("from-old-{round}").into_bytes(), mode: 0o755, umask: 0 };
        let made = rt.block_on(peer.op(
            RequestHeader { request_id: 1000 + round, ..header() },
            0,
            mkdir,
            bytes::Bytes::new(),
            timeout,
        ));
        if made.is_ok() {
            // Only a leader commits: it must have been elected again, and the name is real.
            assert!(fs.mnt.join(format!("from-old-{round}")).exists());
        } else if let Err(e) = &made {
            assert_eq!(e.code, ErrorCode::Moved, "round {round}: {e}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(fs.mnt.join("made-meanwhile").exists());
    fs.settled();
}

/// SIGCONT to `pid` when dropped (also when the test fails, so nothing stays stopped).
struct Stopped(u32);

fn scopeguard(pid: u32) -> Stopped {
    Stopped(pid)
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: kill(2) of a process this test stopped.
        unsafe { libc::kill(self.0 as i32, libc::SIGCONT) };
    }
}

/// A file system made with one MDT becomes a replicated one without losing data: `weft up
/// --replicas 3` on it copies its metadata into each replica, and the files are there,
/// also after the new leader is killed. Files with data on the MDT (`-L mdt`) have it moved
/// to an OST first, their shape kept, and a directory's `-L mdt` default still makes files
/// (their first component on an OST: a replicated MDT keeps no file data).
#[test]
fn a_single_mdt_file_system_becomes_replicated_with_its_files() {
    let payload = pattern(33, 0, 300_000);
    let (dom_big, dom_small) = (pattern(34, 0, 3_000_000), pattern(35, 0, 5_000));
    let fs = Replicated::start_with(|r| {
        weft_ok(&["up", "--data", s(&r.data), "--mount", s(&r.mnt), "--detach", "--osts", "2"]);
        std::fs::create_dir(r.mnt.join("dir")).unwrap();
        std::fs::write(r.mnt.join("dir/kept"), &payload).unwrap();
        std::os::unix::fs::symlink("dir/kept", r.mnt.join("link")).unwrap();
        std::fs::create_dir(r.mnt.join("dom")).unwrap();
        weft_ok(&["setstripe", "-E", "1M", "-L", "mdt", "-E", "-1", "-c", "2", s(&r.mnt.join("dom"))]);
        std::fs::write(r.mnt.join("dom/big"), &dom_big).unwrap();
        std::fs::write(r.mnt.join("dom/small"), &dom_small).unwrap();
        assert!(weft_ok(&["getstripe", s(&r.mnt.join("dom/small"))]).contains("lmm_pattern:       mdt"));
        weft_ok(&["down", "--data", s(&r.data)]);
    });
    assert!(fs.data.join("mdt0000.single").is_dir(), "the single MDT is kept beside the replicas");
    assert_eq!(std::fs::read(fs.mnt.join("link")).unwrap(), payload);
    assert_eq!(std::fs::read(fs.mnt.join("dom/big")).unwrap(), dom_big);
    assert_eq!(std::fs::read(fs.mnt.join("dom/small")).unwrap(), dom_small);
    assert_eq!(object_files(&fs.data.join("mdt0000.single/dom/O")), 0, "the MDT's data objects were destroyed");
    let shapes = |f: &str| -> Vec<String> {
        let out = weft_ok(&["getstripe", s(&fs.mnt.join(f))]);
        out.lines().filter_map(|l| l.trim().strip_prefix("lmm_pattern:")).map(|p| p.trim().to_string()).collect()
    };
    assert_eq!(shapes("dom/big"), ["raid0", "raid0"], "moved to an OST, two components as before");
    std::fs::write(fs.mnt.join("dom/new"), &dom_big).unwrap();
    assert_eq!(shapes("dom/new"), ["raid0", "raid0"], "the -L mdt default still makes files");
    let extents = weft_ok(&["getstripe", s(&fs.mnt.join("dom/new"))]);
    let first_end = extents.lines().find_map(|l| l.trim().strip_prefix("lcme_extent.e_end:")).map(str::trim);
    assert_eq!(first_end, Some("1048576"), "the first component keeps its extent: {extents}");
    let leader = fs.settled();
    // SAFETY: kill(2) of the replica process `weft up` started.
    assert_eq!(unsafe { libc::kill(leader as i32, libc::SIGKILL) }, 0);
    std::fs::write(fs.mnt.join("dir/after"), b"after").unwrap();
    assert_eq!(std::fs::read(fs.mnt.join("dir/kept")).unwrap(), payload);
    assert_eq!(std::fs::read(fs.mnt.join("dom/new")).unwrap(), dom_big);
    let mut names: Vec<String> =
        std::fs::read_dir(fs.mnt.join("dir")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["after", "kept"]);
}

/// The management service is replicated with the MDT under `weft up --replicas`: its leader
/// killed, the mount carries on, an admin command reaches the new leader, and a later change
/// of MDT leader still reaches the clients through the new management service's map.
#[test]
fn the_management_service_survives_the_loss_of_its_leader() {
    let fs = Replicated::start();
    fs.settled();
    let status = weft_ok(&["status", "--data", s(&fs.data), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&status).unwrap();
    let mgs_leader = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["mgs_replica"]["role"].as_str() == Some("leader"))
        .and_then(|p| p["pid"].as_u64())
        .expect("an MGS leader") as u32;
    // SAFETY: kill(2) of a replica process `weft up` started.
    assert_eq!(unsafe { libc::kill(mgs_leader as i32, libc::SIGKILL) }, 0);
    std::fs::write(fs.mnt.join("after-mgs-kill"), b"x").unwrap();
    weft_ok(&["pool", "--data", s(&fs.data), "new", "weft.fast"]);
    let listed = weft_ok(&["pool", "--data", s(&fs.data), "list"]);
    assert!(listed.contains("weft.fast"), "{listed}");
    // The MDT's leader now, wherever the management service's is: killed too.
    let mdt_leader = fs.settled();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(mdt_leader as i32, libc::SIGKILL) }, 0);
    std::fs::write(fs.mnt.join("after-mdt-kill"), b"y").unwrap();
    assert_eq!(std::fs::read(fs.mnt2.join("after-mgs-kill")).unwrap(), b"x");
    assert_eq!(std::fs::read(fs.mnt2.join("after-mdt-kill")).unwrap(), b"y");
}

/// A follower cut off (its process stopped, as a partition would leave it) while a create
/// loop runs: the loop goes on with the other two; once it runs again it catches up from the
/// leader's log, and then it is needed: the leader is killed and the other follower stopped,
/// so the files made while it was away are served by a group it must be part of.
#[test]
fn a_follower_cut_off_and_healed_catches_up_and_serves_what_it_missed() {
    let fs = Replicated::start();
    let leader = fs.settled();
    let role_of = |pid: u32| fs.processes().into_iter().find(|(p, _, _)| *p == pid).and_then(|(_, _, r)| r);
    let followers: Vec<u32> = fs.processes().into_iter().map(|(pid, _, _)| pid).filter(|p| *p != leader).collect();
    assert_eq!(followers.len(), 2, "{:?}", fs.processes());
    let (cut, other) = (followers[0], followers[1]);

    // SAFETY: kill(2) of a replica process `weft up` started.
    assert_eq!(unsafe { libc::kill(cut as i32, libc::SIGSTOP) }, 0);
    let healed = scopeguard(cut);
    let dir = fs.mnt.join("while-cut");
    std::fs::create_dir(&dir).unwrap();
    let mut longest = Duration::ZERO;
    for n in 0..300u64 {
        let start = Instant::now();
        std::fs::write(dir.join(format!("f{n}")), pattern(n, 0, 200 + (n as usize * 31) % 5000)).unwrap();
        longest = longest.max(start.elapsed());
    }
    let (_, applied) = role_of(leader).expect("the leader answers");
    let leader_applied: u64 = applied.parse().unwrap();
    let healed_at = Instant::now();
    drop(healed); // SIGCONT
    let deadline = healed_at + Duration::from_secs(30);
    loop {
        let caught_up = role_of(cut).and_then(|(_, a)| a.parse::<u64>().ok()).is_some_and(|a| a >= leader_applied);
        if caught_up {
            break;
        }
        assert!(Instant::now() < deadline, "the healed follower did not catch up: {:?}", fs.processes());
        std::thread::sleep(Duration::from_millis(50));
    }
    let caught_up_in = healed_at.elapsed();

    // Now the healed follower is one of the two that must agree.
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(other as i32, libc::SIGSTOP) }, 0);
    let woken = scopeguard(other);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(leader as i32, libc::SIGKILL) }, 0);
    std::fs::write(fs.mnt.join("after"), b"after").unwrap();
    for n in 0..300u64 {
        let p = fs.mnt2.join("while-cut").join(format!("f{n}"));
        let want = pattern(n, 0, 200 + (n as usize * 31) % 5000);
        assert_eq!(std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())), want, "{}", p.display());
    }
    drop(woken);
    fs.settled();
    println!(
        "a follower cut off for 300 creates: the longest create took {} ms; healed, it reached \
         the leader's applied index ({leader_applied}) in {} ms",
        longest.as_millis(),
        caught_up_in.as_millis()
    );
}

/// Advisory locks outlive the MDT leader: this process holds a flock(2) lock on one file
/// and an fcntl range lock on another through one mount, the leader is killed, and after
/// the new leader took over the other mount's non-blocking attempts on both still fail (the
/// holding mount replayed them); once this process lets go, the other mount gets them.
/// (Two files: through FUSE a flock lock reaches the file system as a whole-file fcntl lock
/// of another owner, as on NFS, so the two families conflict on one file.)
#[test]
fn advisory_locks_are_kept_across_the_death_of_the_mdt_leader() {
    use std::os::fd::AsRawFd;
    let fs = Replicated::start();
    let leader = fs.settled();
    let open = |name: &str| {
        std::fs::write(fs.mnt.join(name), vec![0u8; 4096]).unwrap();
        std::fs::OpenOptions::new().read(true).write(true).open(fs.mnt.join(name)).unwrap()
    };
    let (flocked, ranged) = (open("flocked"), open("ranged"));
    let range =
        libc::flock { l_type: libc::F_WRLCK as i16, l_whence: libc::SEEK_SET as i16, l_start: 0, l_len: 100, l_pid: 0 };
    // SAFETY: flock(2) and fcntl(2) on descriptors this test owns; `range` outlives the call.
    assert_eq!(
        unsafe { libc::flock(flocked.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
        0,
        "{}",
        std::io::Error::last_os_error()
    );
    // SAFETY: as above.
    assert_eq!(
        unsafe { libc::fcntl(ranged.as_raw_fd(), libc::F_SETLK, &range) },
        0,
        "{}",
        std::io::Error::last_os_error()
    );
    // Exit 0: the other mount got the lock (and let it go); 1: it is held elsewhere.
    let flock_elsewhere = || {
        let out =
            Command::new("flock").args(["-n", "-E", "1"]).arg(fs.mnt2.join("flocked")).arg("true").output().unwrap();
        out.status.code().unwrap()
    };
    let fcntl_elsewhere = || {
        let script = "import fcntl, sys\nf = open(sys.argv[1], 'r+')\ntry:\n    fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB, 100, 0)\nexcept OSError:\n    sys.exit(1)\n";
        let out = Command::new("python3").args(["-c", script]).arg(fs.mnt2.join("ranged")).output().unwrap();
        assert!(out.status.code().is_some_and(|c| c <= 1), "{out:?}");
        out.status.code().unwrap()
    };
    assert_eq!((flock_elsewhere(), fcntl_elsewhere()), (1, 1), "held before the kill");

    // SAFETY: kill(2) of the replica process `weft up` started.
    assert_eq!(unsafe { libc::kill(leader as i32, libc::SIGKILL) }, 0);
    // The holding mount learns of the new leader (this request waits for it) and replays.
    std::fs::write(fs.mnt.join("after-kill"), b"x").unwrap();
    fs.settled();
    for round in 0..3 {
        assert_eq!((flock_elsewhere(), fcntl_elsewhere()), (1, 1), "round {round}: still held after the failover");
    }

    // Let go: the other mount gets both.
    let unlock = libc::flock { l_type: libc::F_UNLCK as i16, ..range };
    // SAFETY: as above.
    assert_eq!(
        unsafe { libc::fcntl(ranged.as_raw_fd(), libc::F_SETLK, &unlock) },
        0,
        "{}",
        std::io::Error::last_os_error()
    );
    // SAFETY: as above.
    assert_eq!(unsafe { libc::flock(flocked.as_raw_fd(), libc::LOCK_UN) }, 0, "{}", std::io::Error::last_os_error());
    assert_eq!((flock_elsewhere(), fcntl_elsewhere()), (0, 0), "free once let go");
}

/// Regular files below an object target's `dir` but its records (`RECORD_FILE_NAMES`).
fn object_files(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.file_type().unwrap().is_dir() {
            true => object_files(&e.path()),
            false => usize::from(!weft_oss::store::is_record_file(&e.file_name())),
        })
        .sum()
}

/// The pid of the `weft mount` process serving `mnt`.
fn mount_pid(mnt: &Path) -> u32 {
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if args.iter().any(|a| *a == b"mount") && args.iter().any(|a| *a == s(mnt).as_bytes()) {
            return pid;
        }
    }
    panic!("no weft mount process serves {}", mnt.display());
}

/// The recovery window of a new MDT leader waits for the clients the MDT recorded as lock
/// holders: a mount killed with SIGKILL does not come back, so at the window's end it is
/// evicted and the other mount goes on; the MDT forgot it, so the window after the next
/// kill waits for the live mount only, which replays, and evicts nobody.
#[test]
fn a_dead_mount_is_evicted_at_the_recovery_windows_end_and_the_next_window_does_not_wait_for_it() {
    let fs = Replicated::start();
    let leader = fs.settled();
    // Both mounts hold locks of the MDT (a file made on one, read from the other).
    std::fs::write(fs.mnt.join("before"), b"before").unwrap();
    assert_eq!(std::fs::read(fs.mnt2.join("before")).unwrap(), b"before");
    let status_line = |status: &str, key: &str| -> String {
        status.lines().find_map(|l| l.strip_prefix(key)).unwrap_or_else(|| panic!("no {key}: {status}")).to_string()
    };
    let recovery_after = |leader: u32, n: u32| -> String {
        // SAFETY: kill(2) of the replica process `weft up` started.
        assert_eq!(unsafe { libc::kill(leader as i32, libc::SIGKILL) }, 0);
        // The live mount is answered by the new leader (after its window).
        std::fs::write(fs.mnt.join(format!("after-{n}")), b"after").unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let status = weft_ok(&["get-param", "--data", s(&fs.data), "mdt.*.recovery_status"]);
            if status.contains("status: COMPLETE") {
                return status;
            }
            assert!(Instant::now() < deadline, "the recovery did not end: {status}");
            std::thread::sleep(Duration::from_millis(200));
        }
    };

    // SAFETY: kill(2) of the `weft mount` process this test started.
    assert_eq!(unsafe { libc::kill(mount_pid(&fs.mnt2) as i32, libc::SIGKILL) }, 0);
    let status = recovery_after(leader, 1);
    assert_eq!(status_line(&status, "completed_clients: "), "1/2", "{status}");
    assert_eq!(status_line(&status, "evicted_clients: "), "1", "{status}");
    assert_eq!(std::fs::read(fs.mnt.join("before")).unwrap(), b"before");

    let leader = fs.settled();
    let status = recovery_after(leader, 2);
    assert_eq!(status_line(&status, "completed_clients: "), "1/1", "{status}");
    assert_eq!(status_line(&status, "evicted_clients: "), "0", "{status}");
    let took: u64 = status_line(&status, "recovery_duration_ms: ").parse().unwrap();
    println!("recovery windows: with a dead mount evicted at the end; then {took} ms with the live mount only");
    assert_eq!(std::fs::read(fs.mnt.join("after-1")).unwrap(), b"after");
}
