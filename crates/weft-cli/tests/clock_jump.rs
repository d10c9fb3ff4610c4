//! A clock jump does not elect a leader twice (issue 33): `weft up --replicas 3` with each
//! replica process under libfaketime, each with a clock of its own (`DATA/replicas/rK.env`
//! preloads the library for replica K; the offset it adds is in `rK.faketime`, which the
//! process reads again at most a second later). While a loop creates files on one mount and
//! reads each back at once on a second mount, a follower's clock jumps an hour ahead, then
//! the MDT leader's. Checked as a user would: `weft status --json`, polled all along, never
//! shows two leaders of one group (the MDT's, the MGS's) in one term; the loop never fails,
//! and its longest wait and each group's new terms are printed per jump; no read on the
//! other mount misses or sees other bytes than a file already acknowledged (a stale read);
//! at the end every acknowledged file is there with its bytes; and the files made while the
//! leader's clock was ahead carry its time (the jump was real).
//!
//! Two forms. The wall clock alone (`FAKETIME_DONT_FAKE_MONOTONIC=1`), what an NTP step or
//! `date -s` does to a server, jumps ahead and back: no group elects anyone for it. And the
//! monotonic clock with it (libfaketime's default), what a replica's timers see, jumps ahead
//! only, as a real one can: openraft asserts in debug builds that it never goes back (its
//! core panics), and tokio's timers would wait for it to catch up. A follower's jump
//! costs no election: it asks a pre-vote first, which the others refuse while they hear
//! the leader (docs/ARCHITECTURE.md, "Clocks"); an election, were there one, is printed,
//! not refused.
//!
//! Skipped with a message when libfaketime is not installed (scripts/install-test-deps.sh
//! installs it), and failed then when `CI` is set. `WEFT_CLOCK_JUMP_ROUNDS` sets how many
//! times a follower's then the leader's clock jump (1 in `make test`, 10 in `make soak`),
//! `WEFT_CLOCK_JUMP_HOLD_MS` how long each jump holds before the groups settle (3000).

mod common;
use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where Debian's and other distributions' `faketime` packages put the library.
const LIBFAKETIME: [&str; 2] =
    ["/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1"];

/// How long a jump holds before the groups are waited for to settle (and the next starts).
const HOLD_MS_DEFAULT: u64 = 3_000;
/// The longest the create loop may wait for an answer during a jump: an election costs a
/// few seconds (a kill of the leader about 4), far below a mount's request timeout.
const ANSWER_WAIT_MS_MAX: u64 = 15_000;
/// How long the loop's last call may take once told to stop.
const LOOP_STOP_WAIT_S: u64 = 30;

fn libfaketime() -> Option<&'static str> {
    let found = LIBFAKETIME.iter().copied().find(|p| Path::new(p).exists());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "libfaketime is not installed ({}), and CI must run the clock-jump test: \
             scripts/install-test-deps.sh installs it (apt-get install faketime)",
            LIBFAKETIME.join(" or ")
        );
        eprintln!("SKIPPED: libfaketime is not installed (make deps, or apt-get install faketime): no clock jumped");
    }
    found
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn hold() -> Duration {
    Duration::from_millis(env_or("WEFT_CLOCK_JUMP_HOLD_MS", HOLD_MS_DEFAULT))
}

/// How many times the follower's then the leader's clock jump.
fn rounds() -> u64 {
    env_or("WEFT_CLOCK_JUMP_ROUNDS", 1)
}

/// Which clocks of a replica process libfaketime moves.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Clocks {
    /// The wall clock and the monotonic clock (the replica's timers).
    Both,
    /// The wall clock alone.
    WallOnly,
}

/// One replica's place in one group, as `weft status --json` showed it.
#[derive(Clone, Debug)]
struct Seen {
    replica: u64,
    /// "MDT" or "MGS".
    group: &'static str,
    role: String,
    term: u64,
    applied: u64,
}

/// `weft up --replicas 3` with every replica under libfaketime, and a second mount; let go
/// on drop even when the test fails.
struct Replicated {
    _dir: tempfile::TempDir,
    data: PathBuf,
    mnt: PathBuf,
    mnt2: PathBuf,
}

impl Replicated {
    fn start(lib: &str, clocks: Clocks) -> Replicated {
        let dir = tempfile::tempdir().unwrap();
        let (data, mnt, mnt2) = (dir.path().join("data"), dir.path().join("mnt"), dir.path().join("mnt2"));
        let r = Replicated { _dir: dir, data, mnt, mnt2 };
        let replicas = r.data.join("replicas");
        std::fs::create_dir_all(&replicas).unwrap();
        for k in 1..=3 {
            r.set_clock(k, "+0");
            let mut env = format!(
                "LD_PRELOAD={lib}\nFAKETIME_TIMESTAMP_FILE={}\nFAKETIME_CACHE_DURATION=1\n",
                r.clock_file(k).display()
            );
            if clocks == Clocks::WallOnly {
                env.push_str("FAKETIME_DONT_FAKE_MONOTONIC=1\n");
            }
            std::fs::write(replicas.join(format!("r{k}.env")), env).unwrap();
        }
        let out =
            weft_ok(&["up", "--data", s(&r.data), "--mount", s(&r.mnt), "--detach", "--replicas", "3", "--osts", "1"]);
        assert!(out.contains("3 replicas"), "{out}");
        let mgs = out.lines().find_map(|l| l.split("weft mount ").nth(1)?.split_whitespace().next()).unwrap();
        std::fs::create_dir_all(&r.mnt2).unwrap();
        let log = format!("log={}", r.data.with_file_name("mnt2.log").display());
        weft_ok(&["mount", "-o", &log, mgs, s(&r.mnt2)]);
        r
    }

    fn clock_file(&self, replica: u64) -> PathBuf {
        self.data.join("replicas").join(format!("r{replica}.faketime"))
    }

    /// Sets replica `replica`'s clock to `offset` from the real time (libfaketime's "+1h").
    fn set_clock(&self, replica: u64, offset: &str) {
        let file = self.clock_file(replica);
        let next = file.with_extension("next");
        // Renamed into place: the process never reads half a line.
        std::fs::write(&next, format!("{offset}\n")).unwrap();
        std::fs::rename(&next, &file).unwrap();
    }

    fn look(&self) -> Vec<Seen> {
        look(&self.data)
    }

    /// Waits until every replica of both groups answers, each group has one leader, and the
    /// MDT's replicas applied nearly the same; returns what it saw last.
    fn settled(&self) -> Vec<Seen> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let seen = self.look();
            let settled = ["MDT", "MGS"].iter().all(|g| {
                let rows: Vec<&Seen> = seen.iter().filter(|s| s.group == *g).collect();
                let applied = rows.iter().map(|s| s.applied);
                let spread = applied.clone().max().unwrap_or(0) - applied.min().unwrap_or(0);
                rows.len() == 3 && rows.iter().filter(|s| s.role == "leader").count() == 1 && spread < 500
            });
            if settled {
                return seen;
            }
            assert!(Instant::now() < deadline, "the replicas did not settle: {seen:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Replicated {
    fn drop(&mut self) {
        take_down(&self.data, &self.mnt, &self.mnt2);
    }
}

/// Every replica's place in the MDT's and the MGS's groups (of those that answered), as
/// `weft status --json` shows them for the file system in `data`.
fn look(data: &Path) -> Vec<Seen> {
    let out = weft(&["status", "--data", s(data), "--json"]);
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else { return Vec::new() };
    let mut seen = Vec::new();
    for p in v["processes"].as_array().into_iter().flatten() {
        let Some(replica) = p["role"].as_str().and_then(|r| r.strip_prefix("MDT0000 replica ")) else { continue };
        let replica: u64 = replica.parse().unwrap();
        for (key, group) in [("replica", "MDT"), ("mgs_replica", "MGS")] {
            let row = &p[key];
            if let (Some(role), Some(term)) = (row["role"].as_str(), row["term"].as_u64()) {
                let applied = row["applied"].as_str().and_then(|a| a.parse().ok()).unwrap_or(0);
                seen.push(Seen { replica, group, role: role.to_string(), term, applied });
            }
        }
    }
    seen
}

/// Who `weft status` showed leading each group in each term, all along the test:
/// (group, term) -> the replicas that said they led it.
#[derive(Default)]
struct Leaders(BTreeMap<(&'static str, u64), BTreeSet<u64>>);

impl Leaders {
    fn record(&mut self, seen: &[Seen]) {
        for s in seen.iter().filter(|s| s.role == "leader") {
            self.0.entry((s.group, s.term)).or_default().insert(s.replica);
        }
    }
}

/// Each group's highest term in `seen`.
fn terms(seen: &[Seen]) -> BTreeMap<&'static str, u64> {
    let mut out = BTreeMap::new();
    for s in seen {
        let t = out.entry(s.group).or_insert(0);
        *t = (*t).max(s.term);
    }
    out
}

/// One jump and what it did.
struct Phase {
    name: String,
    /// The MDT leader's clock is ahead in this phase (the files it makes say so).
    leader_ahead: bool,
    from: Instant,
    to: Instant,
    /// Each group's term before and after it.
    before: BTreeMap<&'static str, u64>,
    after: BTreeMap<&'static str, u64>,
}

/// The replica whose clock jumps first: one that leads neither group if there is one.
fn a_follower(seen: &[Seen]) -> u64 {
    let leads = |k: u64| seen.iter().any(|s| s.replica == k && s.role == "leader");
    (1..=3).find(|k| !leads(*k)).expect("three replicas and two groups: one leads neither")
}

fn mdt_leader(seen: &[Seen]) -> u64 {
    seen.iter().find(|s| s.group == "MDT" && s.role == "leader").map(|s| s.replica).unwrap()
}

/// The test: a follower's clock, then the MDT leader's, jumps an hour ahead (and back, for
/// the wall clock alone) under a create loop read back on another mount (module doc).
fn clocks_jump(clocks: Clocks) {
    let Some(lib) = libfaketime() else { return };
    let hold = hold();
    let fs = Replicated::start(lib, clocks);
    let first = fs.settled();

    // Who leads: `weft status --json` again and again until the end.
    let stop = Arc::new(AtomicBool::new(false));
    let leaders = Arc::new(Mutex::new(Leaders::default()));
    leaders.lock().unwrap().record(&first);
    let watcher = {
        let (stop, leaders, data) = (stop.clone(), leaders.clone(), fs.data.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let seen = look(&data);
                leaders.lock().unwrap().record(&seen);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };

    // The loop: create a file on one mount, read it back at once on the other; when each
    // was acknowledged (file cN is the Nth), on this process's clocks.
    let done: Arc<Mutex<Vec<(Instant, SystemTime)>>> = Arc::default();
    let loop_dir = fs.mnt.join("loop");
    std::fs::create_dir(&loop_dir).unwrap();
    let creates = {
        let (stop, done, dir, other) = (stop.clone(), done.clone(), loop_dir.clone(), fs.mnt2.join("loop"));
        std::thread::spawn(move || -> Result<u64, String> {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let name = format!("c{n}");
                let bytes = pattern(n, 0, 100 + (n as usize % 4000));
                std::fs::write(dir.join(&name), &bytes).map_err(|e| format!("create {name}: {e}"))?;
                // Acknowledged: from now on every read must see it.
                match std::fs::read(other.join(&name)) {
                    Ok(b) if b == bytes => {}
                    Ok(b) => {
                        return Err(format!("{name} read back on the other mount: {} bytes, not its own", b.len()))
                    }
                    Err(e) => return Err(format!("{name} acknowledged, then read on the other mount: {e}")),
                }
                done.lock().unwrap().push((Instant::now(), SystemTime::now()));
                n += 1;
            }
            Ok(n)
        })
    };

    // Each replica's offset in hours. The wall clock jumps ahead and back; the monotonic
    // clock only ahead (module doc).
    let mut offsets = [0i64; 3];
    let mut phases = Vec::new();
    let mut seen = first.clone();
    // One jump: held, then until the groups settled again (each with one leader, nearly
    // every entry applied everywhere), which is when the next one starts.
    let mut jump = |who: &str, replica: u64, hours: i64| -> Vec<Seen> {
        let from = Instant::now();
        let offset = &mut offsets[replica as usize - 1];
        *offset += hours;
        fs.set_clock(replica, &format!("{:+}h", *offset));
        std::thread::sleep(hold);
        if who == "MDT leader" && hours > 0 {
            // Held until the loop made a few files under the jumped clock (libfaketime reads
            // its file again within a second; the jump itself may stall the loop a while),
            // so that the check below has files to look at.
            let since = from + Duration::from_millis(1_500);
            let until = Instant::now() + Duration::from_secs(15);
            while done.lock().unwrap().iter().filter(|(at, _)| *at > since).count() < 5 && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let after = fs.settled();
        leaders.lock().unwrap().record(&after);
        let name = format!("{who} (replica {replica}) {}", if hours > 0 { "+1h" } else { "back 1h" });
        let leader_ahead = who == "MDT leader" && hours > 0;
        let (before, now) = (terms(&seen), terms(&after));
        phases.push(Phase { name, leader_ahead, from, to: Instant::now(), before, after: now });
        seen = after.clone();
        after
    };
    std::thread::sleep(Duration::from_millis(500));
    let mut last = first.clone();
    for _ in 0..rounds() {
        let follower = a_follower(&last);
        last = jump("follower", follower, 1);
        if clocks == Clocks::WallOnly {
            last = jump("follower", follower, -1);
        }
        let leader = mdt_leader(&last);
        last = jump("MDT leader", leader, 1);
        if clocks == Clocks::WallOnly {
            last = jump("MDT leader", leader, -1);
        }
    }

    stop.store(true, Ordering::Relaxed);
    watcher.join().expect("the status watcher failed");
    // The loop's last create and read were sent before the stop: answered, not hung (a hung
    // call is let go by the unmount when the file system is dropped).
    let deadline = Instant::now() + Duration::from_secs(LOOP_STOP_WAIT_S);
    while !creates.is_finished() {
        assert!(Instant::now() < deadline, "the create loop's last call did not return within {LOOP_STOP_WAIT_S} s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let made = creates.join().expect("the create loop panicked");
    let leaders = leaders.lock().unwrap();
    let done = done.lock().unwrap();

    // What each jump did: elections (new terms) and the loop's longest wait.
    let mut report = Vec::new();
    let mut longest_of_all = Duration::ZERO;
    for p in &phases {
        let mut before = p.from;
        let mut longest = Duration::ZERO;
        for (at, _) in done.iter().filter(|(at, _)| *at > p.from && *at <= p.to) {
            longest = longest.max(at.duration_since(before));
            before = *at;
        }
        longest = longest.max(p.to.duration_since(before));
        longest_of_all = longest_of_all.max(longest);
        let elections: Vec<String> = p.after.iter().map(|(g, t)| format!("{g} {}", t - p.before[g])).collect();
        report.push(format!(
            "{}: new terms {}; the loop's longest wait {} ms",
            p.name,
            elections.join(", "),
            longest.as_millis()
        ));
    }
    let made = made.unwrap_or_else(|e| panic!("the create loop failed: {e}\n{}", report.join("\n")));
    println!("clocks {clocks:?}, {made} files created and read back:\n  {}", report.join("\n  "));

    // The file system kept answering: an election costs seconds, never a request timeout.
    assert!(
        longest_of_all < Duration::from_millis(ANSWER_WAIT_MS_MAX),
        "the loop waited {} ms for an answer (at most {ANSWER_WAIT_MS_MAX} ms)\n{}",
        longest_of_all.as_millis(),
        report.join("\n")
    );
    // Never two leaders of one group in one term.
    for ((group, term), who) in &leaders.0 {
        assert!(who.len() <= 1, "{group} term {term} had two leaders: replicas {who:?}\n{}", report.join("\n"));
    }
    // A wall clock that jumps moves no replica's timers: nobody is elected for it.
    if clocks == Clocks::WallOnly {
        for p in &phases {
            assert_eq!(p.before, p.after, "{}: an election for a wall-clock jump\n{}", p.name, report.join("\n"));
        }
    }
    // Everything acknowledged is there with its bytes, seen from the other mount too.
    for n in 0..made {
        let p = loop_dir.join(format!("c{n}"));
        let want = pattern(n, 0, 100 + (n as usize % 4000));
        assert_eq!(std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())), want, "{}", p.display());
    }
    assert_eq!(
        std::fs::read_dir(fs.mnt2.join("loop")).unwrap().count() as u64,
        made,
        "the other mount lists every file"
    );
    // The jumps were real: the files made while the MDT leader's clock was an hour ahead
    // (a second after, when libfaketime read its file again) carry its time.
    let ahead = phases
        .iter()
        .filter(|p| p.leader_ahead)
        .flat_map(|p| {
            let after = p.from + Duration::from_millis(1_500);
            done.iter().enumerate().filter(move |(_, (at, _))| *at > after && *at <= p.to)
        })
        .map(|(n, (_, wall))| {
            let m = std::fs::metadata(loop_dir.join(format!("c{n}"))).unwrap();
            let ctime = UNIX_EPOCH + Duration::from_secs(m.ctime() as u64);
            ctime.duration_since(*wall).unwrap_or_default()
        })
        .max()
        .unwrap_or_default();
    assert!(
        ahead > Duration::from_secs(50 * 60),
        "no file made while the MDT leader's clock was an hour ahead has its time (at most {} s ahead): \
         did libfaketime take effect?",
        ahead.as_secs()
    );
}

#[test]
fn a_clock_jump_of_a_follower_then_of_the_leader_elects_no_leader_twice_and_loses_nothing() {
    clocks_jump(Clocks::Both);
}

#[test]
fn a_wall_clock_jump_elects_no_one() {
    clocks_jump(Clocks::WallOnly);
}
