//! Job statistics (Lustre's `job_stats`): per target, per job, per counter, the samples,
//! min, max, sum and sum of squares of each request's time (or, for the bytes counters, its
//! size), kept by an [`Account`] of the pipeline and shown in Lustre's YAML shape. Counters
//! and their order are Lustre's (`ofd_stats_counter_init`, `mdt_stats[]`), Weft's opcodes
//! mapped onto them, and one more: `nrs_wait`, the requests of the job a scheduling policy
//! held back and for how long, so an admin sees who hit a limit.
//!
//! A job idle for longer than its target's `job_cleanup_interval` (600 s by default, 0 for
//! never) is dropped, as in Lustre; the jobs of a target are bounded besides
//! ([`crate::limits::JOB_STATS_JOBS_MAX`]), the longest idle going first.

use crate::account::{Account, Outcome};
use crate::context::RequestContext;
use crate::limits::{JOB_CLEANUP_INTERVAL_S_DEFAULT, JOB_STATS_JOBS_MAX};
use std::borrow::Borrow;
use std::collections::HashMap;
use std::fmt::Write;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};
use weft_proto::msg::TargetKind;

/// An OST's counters, in Lustre's order.
pub const OST_COUNTERS: [&str; 16] = [
    "read_bytes",
    "write_bytes",
    "read",
    "write",
    "getattr",
    "setattr",
    "punch",
    "sync",
    "destroy",
    "create",
    "statfs",
    "get_info",
    "set_info",
    "quotactl",
    "prealloc",
    "nrs_wait",
];

/// An MDT's counters, in Lustre's order.
pub const MDT_COUNTERS: [&str; 28] = [
    "open",
    "close",
    "mknod",
    "link",
    "unlink",
    "mkdir",
    "rmdir",
    "rename",
    "getattr",
    "setattr",
    "getxattr",
    "setxattr",
    "statfs",
    "sync",
    "samedir_rename",
    "parallel_rename_file",
    "parallel_rename_dir",
    "crossdir_rename",
    "rename_trylocks",
    "read_bytes",
    "write_bytes",
    "read",
    "write",
    "punch",
    "migrate",
    "fallocate",
    "readpage",
    "nrs_wait",
];

/// The counter an opcode counts in, on a target of `kind`.
fn counter(kind: TargetKind, opcode: &str) -> Option<&'static str> {
    Some(match (kind, opcode) {
        (TargetKind::Ost, "ost_read") => "read",
        (TargetKind::Ost, "ost_write") => "write",
        (TargetKind::Ost, "ost_getattr") => "getattr",
        (TargetKind::Ost, "ost_punch" | "ost_fallocate") => "punch",
        (TargetKind::Ost, "ost_sync") => "sync",
        (TargetKind::Ost, "ost_destroy" | "ost_destroy_orphans") => "destroy",
        (TargetKind::Ost, "ost_precreate") => "create",
        (TargetKind::Ost, "ost_statfs") => "statfs",
        (TargetKind::Ost, "ost_local_path") => "get_info",
        (TargetKind::Mdt, "mds_open" | "mds_create" | "mds_create_tmpfile") => "open",
        (TargetKind::Mdt, "mds_close") => "close",
        (TargetKind::Mdt, "mds_mknod" | "mds_symlink") => "mknod",
        (TargetKind::Mdt, "mds_link") => "link",
        (TargetKind::Mdt, "mds_unlink") => "unlink",
        (TargetKind::Mdt, "mds_mkdir") => "mkdir",
        (TargetKind::Mdt, "mds_rmdir") => "rmdir",
        (TargetKind::Mdt, "mds_rename") => "rename",
        (TargetKind::Mdt, "mds_lookup" | "mds_getattr" | "mds_readlink") => "getattr",
        (TargetKind::Mdt, "mds_setattr") => "setattr",
        (TargetKind::Mdt, "mds_getxattr" | "mds_listxattr" | "mds_getstripe") => "getxattr",
        (TargetKind::Mdt, "mds_setxattr" | "mds_removexattr" | "mds_setstripe" | "mds_delstripe") => "setxattr",
        (TargetKind::Mdt, "mds_statfs") => "statfs",
        (TargetKind::Mdt, "mds_readdir") => "readpage",
        _ => return None,
    })
}

/// A target kind's counters, and where the ones every request may touch are.
struct Layout {
    names: &'static [&'static str],
    read_bytes: usize,
    write_bytes: usize,
    nrs_wait: usize,
}

const OST_LAYOUT: Layout = Layout { names: &OST_COUNTERS, read_bytes: 0, write_bytes: 1, nrs_wait: 15 };
const MDT_LAYOUT: Layout = Layout { names: &MDT_COUNTERS, read_bytes: 19, write_bytes: 20, nrs_wait: 27 };

fn layout(kind: TargetKind) -> &'static Layout {
    match kind {
        TargetKind::Ost => &OST_LAYOUT,
        TargetKind::Mdt => &MDT_LAYOUT,
    }
}

fn counters_of(kind: TargetKind) -> &'static [&'static str] {
    layout(kind).names
}

/// One counter: samples, min, max, sum, sum of squares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counter {
    pub samples: u64,
    pub min: u64,
    pub max: u64,
    pub sum: u64,
    pub sumsq: u128,
}

impl Counter {
    fn add(&mut self, v: u64) {
        if self.samples == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.samples += 1;
        self.sum = self.sum.saturating_add(v);
        self.sumsq = self.sumsq.saturating_add(u128::from(v) * u128::from(v));
    }
}

/// One request, as every table of its target counts it.
#[derive(Clone, Copy)]
struct Sample {
    layout: &'static Layout,
    /// The counter of its opcode.
    counter: usize,
    took_us: u64,
    bytes: u64,
    waited_us: u64,
    now: Instant,
}

struct Job {
    /// When it was first seen (shown as a wall time by [`JobStats::render`]).
    start: Instant,
    seen: Instant,
    counters: Vec<Counter>,
}

impl Job {
    fn add(&mut self, s: &Sample) {
        self.seen = s.now;
        self.counters[s.counter].add(s.took_us);
        let name = s.layout.names[s.counter];
        if name == "read" {
            self.counters[s.layout.read_bytes].add(s.bytes);
        } else if name == "write" {
            self.counters[s.layout.write_bytes].add(s.bytes);
        }
        if s.waited_us > 0 {
            self.counters[s.layout.nrs_wait].add(s.waited_us);
        }
    }
}

/// A target's counters under one kind of key (jobids, uids or gids), bounded.
struct Table<K> {
    rows: HashMap<K, Job>,
}

impl<K> Default for Table<K> {
    fn default() -> Self {
        Table { rows: HashMap::new() }
    }
}

impl<K: Hash + Eq + Clone + ToString> Table<K> {
    /// Looked up by a borrowed key: a String is made only for a job seen the first time.
    fn add<Q>(&mut self, key: &Q, s: &Sample)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if let Some(row) = self.rows.get_mut(key) {
            row.add(s);
            return;
        }
        if self.rows.len() >= JOB_STATS_JOBS_MAX {
            let oldest = self.rows.iter().min_by_key(|(_, j)| j.seen).map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                self.rows.remove::<K>(&oldest);
            }
        }
        let mut row = Job { start: s.now, seen: s.now, counters: vec![Counter::default(); s.layout.names.len()] };
        row.add(s);
        self.rows.insert(key.to_owned(), row);
    }

    fn retain_seen_since(&mut self, now: Instant, interval: Duration) {
        self.rows.retain(|_, j| now.saturating_duration_since(j.seen) <= interval);
    }

    fn rows(&self, kind: TargetKind) -> Vec<(String, Vec<(&'static str, Counter)>)> {
        let mut rows: Vec<_> = self
            .rows
            .iter()
            .map(|(key, j)| (key.to_string(), counters_of(kind).iter().copied().zip(j.counters.clone()).collect()))
            .collect();
        rows.sort_by(|a: &(String, Vec<_>), b| a.0.cmp(&b.0));
        rows
    }
}

/// One target's counters: by job, by user, by group.
#[derive(Default)]
struct TargetStats {
    jobs: Table<String>,
    users: Table<u32>,
    groups: Table<u32>,
    cleanup_interval: Option<Duration>,
    last_cleanup: Option<Instant>,
}

impl TargetStats {
    fn interval(&self) -> Duration {
        self.cleanup_interval.unwrap_or(Duration::from_secs(JOB_CLEANUP_INTERVAL_S_DEFAULT))
    }

    /// Drops keys idle longer than the interval; looked at twice per interval, as Lustre.
    fn clean(&mut self, now: Instant) {
        let interval = self.interval();
        if interval.is_zero() {
            return;
        }
        if self.last_cleanup.is_some_and(|at| now.saturating_duration_since(at) < interval / 2) {
            return;
        }
        self.last_cleanup = Some(now);
        self.jobs.retain_seen_since(now, interval);
        self.users.retain_seen_since(now, interval);
        self.groups.retain_seen_since(now, interval);
    }

    fn rows(&self, by: By, kind: TargetKind) -> Vec<(String, Vec<(&'static str, Counter)>)> {
        match by {
            By::Job => self.jobs.rows(kind),
            By::User => self.users.rows(kind),
            By::Group => self.groups.rows(kind),
        }
    }
}

/// What the statistics are kept by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum By {
    /// The request's jobid (Lustre's job_stats).
    #[default]
    Job,
    /// The caller's uid, in decimal (for per-user metrics and budgets).
    User,
    /// The caller's gid, in decimal (for per-group budgets).
    Group,
}

/// Whom a request counts for: its job (none when empty), its caller's uid and gid.
#[derive(Debug, Clone, Copy)]
pub struct Who<'a> {
    pub job: &'a str,
    pub uid: u32,
    pub gid: u32,
}

/// The job, user and group statistics of a server process's targets; see the module
/// documentation. One lock per request for all three and no clock reading: this is on
/// every request's path (`make bench-micro`'s `account_stage` measures it). Every time comes
/// from the caller (a request's `Outcome::at`, a reader's `now`), so a test moves it on.
#[derive(Default)]
pub struct JobStats {
    // A process serves a few targets: a short list, looked through.
    targets: Mutex<Vec<((TargetKind, u32), TargetStats)>>,
}

impl JobStats {
    fn with<R>(&self, target: (TargetKind, u32), f: impl FnOnce(&mut TargetStats) -> R) -> R {
        let mut targets = self.targets.lock().unwrap_or_else(|p| p.into_inner());
        let at = match targets.iter().position(|(t, _)| *t == target) {
            Some(at) => at,
            None => {
                targets.push((target, TargetStats::default()));
                targets.len() - 1
            }
        };
        f(&mut targets[at].1)
    }

    /// Counts one request of `who` on `target` answered `at`: `opcode` taking `took`,
    /// moving `bytes` (a read's reply, a write's data), held `waited` by a scheduling policy.
    #[allow(clippy::too_many_arguments)]
    pub fn add(
        &self,
        target: (TargetKind, u32),
        who: Who<'_>,
        opcode: &str,
        took: Duration,
        bytes: u64,
        waited: Duration,
        at: Instant,
    ) {
        let Some(name) = counter(target.0, opcode) else { return };
        let layout = layout(target.0);
        let counter = layout.names.iter().position(|c| *c == name).expect("a counter of the list");
        let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let sample = Sample { layout, counter, took_us: us(took), bytes, waited_us: us(waited), now: at };
        self.with(target, |t| {
            t.clean(sample.now);
            if !who.job.is_empty() {
                t.jobs.add(who.job, &sample);
            }
            t.users.add(&who.uid, &sample);
            t.groups.add(&who.gid, &sample);
        });
    }

    /// Every job's (user's, group's) counters on `target` at `now`, by name, sorted by key.
    pub fn rows(&self, by: By, target: (TargetKind, u32), now: Instant) -> Vec<(String, Vec<(&'static str, Counter)>)> {
        self.with(target, |t| {
            t.clean(now);
            t.rows(by, target.0)
        })
    }

    /// Every job's counters on `target` at `now`, by name.
    pub fn jobs(&self, target: (TargetKind, u32), now: Instant) -> Vec<(String, Vec<(&'static str, Counter)>)> {
        self.rows(By::Job, target, now)
    }

    /// Each job's (user's, group's) requests and bytes on `target`: every counter's
    /// samples but the byte counters and the scheduler's waits, and the bytes read and
    /// written, at `now`.
    pub fn usage(&self, by: By, target: (TargetKind, u32), now: Instant) -> Vec<(String, u64, u64, u64)> {
        let sum = |counters: &[(&str, Counter)], name: &str| -> u64 {
            counters.iter().filter(|(n, _)| *n == name).map(|(_, c)| c.sum).sum()
        };
        self.rows(by, target, now)
            .into_iter()
            .map(|(key, counters)| {
                let ops = counters
                    .iter()
                    .filter(|(n, _)| !n.ends_with("_bytes") && *n != "nrs_wait")
                    .map(|(_, c)| c.samples)
                    .sum();
                let (read, write) = (sum(&counters, "read_bytes"), sum(&counters, "write_bytes"));
                (key, ops, read, write)
            })
            .collect()
    }

    /// Lustre's YAML of `target`'s jobs (`job_stats:` and one entry per job) at `now`,
    /// which the wall clock reads as `wall`.
    pub fn render(&self, target: (TargetKind, u32), now: Instant, wall: SystemTime) -> String {
        let mut out = String::from("job_stats:\n");
        self.with(target, |t| {
            t.clean(now);
            let mut names: Vec<&String> = t.jobs.rows.keys().collect();
            names.sort();
            for name in names {
                let j = &t.jobs.rows[name];
                let elapsed = now.saturating_duration_since(j.start);
                let start = wall.checked_sub(elapsed).unwrap_or(SystemTime::UNIX_EPOCH);
                let _ = writeln!(out, "- {:<16} {}", "job_id:", yaml_job_id(name));
                let _ = writeln!(out, "  {:<16} {} secs.nsecs", "snapshot_time:", secs_nsecs(since_epoch(wall)));
                let _ = writeln!(out, "  {:<16} {} secs.nsecs", "start_time:", secs_nsecs(since_epoch(start)));
                let _ = writeln!(out, "  {:<16} {} secs.nsecs", "elapsed_time:", secs_nsecs(elapsed));
                for (counter, c) in counters_of(target.0).iter().zip(&j.counters) {
                    let unit = if counter.ends_with("_bytes") { "bytes" } else { "usecs" };
                    let _ = writeln!(
                        out,
                        "  {:<16} {{ samples: {:>11}, unit: {:>5}, min: {:>8}, max: {:>8}, sum: {:>16}, sumsq: {:>18} }}",
                        format!("{counter}:"),
                        c.samples,
                        unit,
                        c.min,
                        c.max,
                        c.sum,
                        c.sumsq
                    );
                }
            }
        });
        out
    }

    /// Forgets every job of `target` (`job` None, Lustre's `clear`) or one; the users'
    /// and groups' counters stay (they are the metrics' and the budgets').
    pub fn clear(&self, target: (TargetKind, u32), job: Option<&str>) {
        self.with(target, |t| match job {
            Some(job) => {
                t.jobs.rows.remove(job);
            }
            None => t.jobs.rows.clear(),
        });
    }

    pub fn cleanup_interval(&self, target: (TargetKind, u32)) -> Duration {
        self.with(target, |t| t.interval())
    }

    /// 0 keeps idle keys for ever.
    pub fn set_cleanup_interval(&self, target: (TargetKind, u32), interval: Duration) {
        self.with(target, |t| {
            t.cleanup_interval = Some(interval);
            t.last_cleanup = None;
        });
    }
}

impl Account for JobStats {
    fn record(&self, ctx: &RequestContext, outcome: &Outcome) {
        let Some(target) = outcome.target else { return };
        let bytes = outcome.bytes_in.max(outcome.bytes_out);
        let identity = &ctx.header.identity;
        let who = Who { job: ctx.header.jobid.as_str(), uid: identity.uid, gid: identity.gid };
        self.add(target, who, ctx.opcode, outcome.took, bytes, outcome.waited, outcome.at);
    }
}

fn since_epoch(t: SystemTime) -> Duration {
    t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default()
}

fn secs_nsecs(d: Duration) -> String {
    format!("{}.{:09}", d.as_secs(), d.subsec_nanos())
}

/// A jobid as Lustre's YAML shows it: as is, or quoted with `\xHH` escapes when it holds
/// anything but `A-Za-z0-9.@-_/`, or starts with `@`.
fn yaml_job_id(job: &str) -> String {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b".@-_/".contains(&b);
    if !job.is_empty() && job.bytes().all(plain) && !job.starts_with('@') {
        return job.to_string();
    }
    let mut out = String::from("\"");
    for b in job.bytes() {
        if plain(b) || b == b' ' {
            out.push(b as char);
        } else {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const OST0: (TargetKind, u32) = (TargetKind::Ost, 0);
    const MDT0: (TargetKind, u32) = (TargetKind::Mdt, 0);

    /// The time the tests' requests come at; a test moves on from it.
    fn t0() -> Instant {
        static T0: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        *T0.get_or_init(Instant::now)
    }

    fn job(job: &str) -> Who<'_> {
        Who { job, uid: 0, gid: 0 }
    }

    #[test]
    fn counts_per_job_and_counter_in_lustres_shape() {
        let s = JobStats::default();
        let ms = Duration::from_millis;
        s.add(OST0, job("dd.0"), "ost_write", ms(2), 4096, Duration::ZERO, t0());
        s.add(OST0, job("dd.0"), "ost_write", ms(4), 1 << 20, ms(3), t0());
        s.add(OST0, job("cp.5"), "ost_read", ms(1), 8192, Duration::ZERO, t0());
        s.add(OST0, job("dd.0"), "ost_no_such_op", ms(1), 0, Duration::ZERO, t0());
        let jobs = s.jobs(OST0, t0());
        assert_eq!(jobs.iter().map(|j| j.0.as_str()).collect::<Vec<_>>(), ["cp.5", "dd.0"]);
        let dd: HashMap<_, _> = jobs[1].1.iter().copied().collect();
        assert_eq!(
            dd["write_bytes"],
            Counter { samples: 2, min: 4096, max: 1 << 20, sum: 4096 + (1 << 20), sumsq: 4096 * 4096 + (1 << 40) }
        );
        assert_eq!((dd["write"].samples, dd["write"].min, dd["write"].max, dd["write"].sum), (2, 2000, 4000, 6000));
        assert_eq!((dd["nrs_wait"].samples, dd["nrs_wait"].sum), (1, 3000), "one write was held 3 ms");
        assert_eq!(dd["read"].samples, 0);
        let yaml = s.render(OST0, t0(), SystemTime::now());
        assert!(yaml.starts_with("job_stats:\n- job_id:          cp.5\n  snapshot_time:   "), "{yaml}");
        let sumsq = 4096u128 * 4096 + (1u128 << 40);
        let line = format!(
            "  write_bytes:     {{ samples:           2, unit: bytes, min:     4096, max:  1048576, sum:          1052672, sumsq: {sumsq:>18} }}"
        );
        assert!(yaml.contains(&line), "{yaml}");
        assert!(yaml.contains("  read:            { samples:           1, unit: usecs, min:     1000, max:     1000, sum:             1000, sumsq:            1000000 }"), "{yaml}");
        // Every counter, in Lustre's order, for each job.
        let lines: Vec<&str> = yaml.lines().filter(|l| l.contains("{ samples:")).collect();
        assert_eq!(lines.len(), 2 * OST_COUNTERS.len());
        assert!(lines[0].trim_start().starts_with("read_bytes:") && lines[14].trim_start().starts_with("prealloc:"));
    }

    #[test]
    fn metadata_opcodes_count_under_lustres_names() {
        let s = JobStats::default();
        for op in ["mds_create", "mds_open", "mds_close", "mds_mkdir", "mds_lookup", "mds_readdir"] {
            s.add(MDT0, job("j"), op, Duration::from_micros(5), 0, Duration::ZERO, t0());
        }
        let c: HashMap<_, _> = s.jobs(MDT0, t0())[0].1.iter().copied().collect();
        assert_eq!((c["open"].samples, c["close"].samples, c["mkdir"].samples), (2, 1, 1));
        assert_eq!((c["getattr"].samples, c["readpage"].samples, c["unlink"].samples), (1, 1, 0));
    }

    #[test]
    fn clear_cleanup_and_the_bound() {
        let s = JobStats::default();
        s.add(OST0, job("a"), "ost_read", Duration::ZERO, 1, Duration::ZERO, t0());
        s.add(OST0, job("b"), "ost_read", Duration::ZERO, 1, Duration::ZERO, t0());
        s.clear(OST0, Some("a"));
        assert_eq!(s.jobs(OST0, t0()).len(), 1);
        s.clear(OST0, None);
        assert!(s.jobs(OST0, t0()).is_empty());
        s.add(OST0, job("a"), "ost_read", Duration::ZERO, 1, Duration::ZERO, t0());
        s.set_cleanup_interval(OST0, Duration::from_millis(20));
        assert_eq!(s.jobs(OST0, t0() + Duration::from_millis(20)).len(), 1, "idle for the interval: kept");
        s.set_cleanup_interval(OST0, Duration::from_millis(20));
        assert!(s.jobs(OST0, t0() + Duration::from_millis(21)).is_empty(), "an idle job goes after the interval");
        s.set_cleanup_interval(OST0, Duration::ZERO);
        for i in 0..JOB_STATS_JOBS_MAX + 10 {
            s.add(OST0, job(&format!("j{i}")), "ost_read", Duration::ZERO, 1, Duration::ZERO, t0());
        }
        assert_eq!(s.jobs(OST0, t0()).len(), JOB_STATS_JOBS_MAX);
    }

    #[test]
    fn users_and_groups_beside_jobs() {
        let s = JobStats::default();
        let ms = Duration::from_millis;
        s.add(OST0, Who { job: "dd.0", uid: 1000, gid: 100 }, "ost_write", ms(1), 10, Duration::ZERO, t0());
        s.add(OST0, Who { job: "", uid: 1000, gid: 200 }, "ost_write", ms(1), 20, Duration::ZERO, t0());
        s.add(OST0, Who { job: "cp.1", uid: 1001, gid: 100 }, "ost_read", ms(1), 40, Duration::ZERO, t0());
        s.add(MDT0, Who { job: "cp.1", uid: 1001, gid: 100 }, "mds_mkdir", ms(1), 0, Duration::ZERO, t0());
        assert_eq!(s.usage(By::Job, OST0, t0()), [("cp.1".into(), 1, 40, 0), ("dd.0".into(), 1, 0, 10)]);
        assert_eq!(s.usage(By::User, OST0, t0()), [("1000".into(), 2, 0, 30), ("1001".into(), 1, 40, 0)]);
        assert_eq!(s.usage(By::Group, OST0, t0()), [("100".into(), 2, 40, 10), ("200".into(), 1, 0, 20)]);
        assert_eq!(s.usage(By::User, MDT0, t0()), [("1001".into(), 1, 0, 0)]);
        s.clear(OST0, None);
        assert!(s.jobs(OST0, t0()).is_empty());
        assert_eq!(s.usage(By::User, OST0, t0()).len(), 2, "clearing job_stats keeps the users' counters");
    }

    #[test]
    fn layouts_name_their_counters() {
        for l in [&OST_LAYOUT, &MDT_LAYOUT] {
            assert_eq!(
                (l.names[l.read_bytes], l.names[l.write_bytes], l.names[l.nrs_wait]),
                ("read_bytes", "write_bytes", "nrs_wait")
            );
        }
    }

    #[test]
    fn odd_jobids_are_quoted() {
        assert_eq!(yaml_job_id("dd.0"), "dd.0");
        assert_eq!(yaml_job_id("a:b"), "\"a\\x3ab\"");
        assert_eq!(yaml_job_id("@x"), "\"@x\"");
    }

    /// A job's times come from its requests and the reader: its start is when its first
    /// request was answered, shown on the wall clock the reader gives.
    #[test]
    fn a_jobs_start_is_its_first_request() {
        let s = JobStats::default();
        s.add(OST0, job("a"), "ost_read", Duration::ZERO, 1, Duration::ZERO, t0());
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let yaml = s.render(OST0, t0() + Duration::from_secs(90), wall);
        assert!(yaml.contains("  start_time:      999910.000000000 secs.nsecs"), "{yaml}");
        assert!(yaml.contains("  elapsed_time:    90.000000000 secs.nsecs"), "{yaml}");
        assert!(yaml.contains("  snapshot_time:   1000000.000000000 secs.nsecs"), "{yaml}");
    }
}
