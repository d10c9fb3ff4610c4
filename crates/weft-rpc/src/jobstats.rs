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
use crate::limits::{JOB_CLEANUP_INTERVAL_S_DEFAULT, JOB_STATS_JOBS_MAX};
use crate::server::RequestContext;
use std::collections::HashMap;
use std::fmt::Write;
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
        (TargetKind::Ost, "ost_punch") => "punch",
        (TargetKind::Ost, "ost_sync") => "sync",
        (TargetKind::Ost, "ost_destroy" | "ost_destroy_orphans") => "destroy",
        (TargetKind::Ost, "ost_precreate") => "create",
        (TargetKind::Ost, "ost_statfs") => "statfs",
        (TargetKind::Ost, "ost_local_path") => "get_info",
        (TargetKind::Mdt, "mds_open" | "mds_create") => "open",
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

fn counters_of(kind: TargetKind) -> &'static [&'static str] {
    match kind {
        TargetKind::Ost => &OST_COUNTERS,
        TargetKind::Mdt => &MDT_COUNTERS,
    }
}

fn index_of(kind: TargetKind, name: &str) -> usize {
    counters_of(kind).iter().position(|c| *c == name).expect("a counter of the list")
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

struct Job {
    start: SystemTime,
    seen: Instant,
    counters: Vec<Counter>,
}

#[derive(Default)]
struct TargetJobs {
    jobs: HashMap<String, Job>,
    cleanup_interval: Option<Duration>,
    last_cleanup: Option<Instant>,
}

impl TargetJobs {
    fn interval(&self) -> Duration {
        self.cleanup_interval.unwrap_or(Duration::from_secs(JOB_CLEANUP_INTERVAL_S_DEFAULT))
    }

    /// Drops jobs idle longer than the interval; looked at twice per interval, as Lustre.
    fn clean(&mut self, now: Instant) {
        let interval = self.interval();
        if interval.is_zero() {
            return;
        }
        if self.last_cleanup.is_some_and(|at| now.duration_since(at) < interval / 2) {
            return;
        }
        self.last_cleanup = Some(now);
        self.jobs.retain(|_, j| now.duration_since(j.seen) <= interval);
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

/// The job statistics of a server process's targets; see the module documentation.
#[derive(Default)]
pub struct JobStats {
    by: By,
    targets: Mutex<HashMap<(TargetKind, u32), TargetJobs>>,
}

impl JobStats {
    /// The same counters kept per user (uid) instead of per job.
    pub fn by_user() -> JobStats {
        JobStats { by: By::User, targets: Mutex::default() }
    }

    /// The same counters kept per group (gid).
    pub fn by_group() -> JobStats {
        JobStats { by: By::Group, targets: Mutex::default() }
    }

    fn with<R>(&self, f: impl FnOnce(&mut HashMap<(TargetKind, u32), TargetJobs>) -> R) -> R {
        f(&mut self.targets.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Counts one request of `job` on `target`: `opcode` taking `took`, moving `bytes` (a
    /// read's reply, a write's data), held `waited` by a scheduling policy.
    pub fn add(
        &self,
        target: (TargetKind, u32),
        job: &str,
        opcode: &str,
        took: Duration,
        bytes: u64,
        waited: Duration,
    ) {
        let Some(name) = counter(target.0, opcode) else { return };
        let now = Instant::now();
        self.with(|targets| {
            let t = targets.entry(target).or_default();
            t.clean(now);
            if !t.jobs.contains_key(job) && t.jobs.len() >= JOB_STATS_JOBS_MAX {
                let oldest = t.jobs.iter().min_by_key(|(_, j)| j.seen).map(|(k, _)| k.clone());
                if let Some(oldest) = oldest {
                    t.jobs.remove(&oldest);
                }
            }
            // Looked up by &str first: a String is made only for a job seen the first time.
            if !t.jobs.contains_key(job) {
                let counters = vec![Counter::default(); counters_of(target.0).len()];
                t.jobs.insert(job.to_string(), Job { start: SystemTime::now(), seen: now, counters });
            }
            let entry = t.jobs.get_mut(job).expect("just made");
            entry.seen = now;
            let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
            entry.counters[index_of(target.0, name)].add(us(took));
            match name {
                "read" => entry.counters[index_of(target.0, "read_bytes")].add(bytes),
                "write" => entry.counters[index_of(target.0, "write_bytes")].add(bytes),
                _ => {}
            }
            if !waited.is_zero() {
                entry.counters[index_of(target.0, "nrs_wait")].add(us(waited));
            }
        });
    }

    /// Every job's counters on `target`, by name.
    pub fn jobs(&self, target: (TargetKind, u32)) -> Vec<(String, Vec<(&'static str, Counter)>)> {
        self.with(|targets| {
            let Some(t) = targets.get_mut(&target) else { return Vec::new() };
            t.clean(Instant::now());
            let mut jobs: Vec<_> = t
                .jobs
                .iter()
                .map(|(name, j)| {
                    (name.clone(), counters_of(target.0).iter().copied().zip(j.counters.clone()).collect())
                })
                .collect();
            jobs.sort_by(|a: &(String, Vec<_>), b| a.0.cmp(&b.0));
            jobs
        })
    }

    /// Each job's (or user's) requests and bytes on `target`: every counter's samples but
    /// the byte counters and the scheduler's waits, and the bytes read and written.
    pub fn usage(&self, target: (TargetKind, u32)) -> Vec<(String, u64, u64, u64)> {
        let sum = |counters: &[(&str, Counter)], name: &str| -> u64 {
            counters.iter().filter(|(n, _)| *n == name).map(|(_, c)| c.sum).sum()
        };
        self.jobs(target)
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

    /// Lustre's YAML of `target`'s jobs (`job_stats:` and one entry per job).
    pub fn render(&self, target: (TargetKind, u32)) -> String {
        let now = SystemTime::now();
        let mut out = String::from("job_stats:\n");
        self.with(|targets| {
            let Some(t) = targets.get_mut(&target) else { return };
            t.clean(Instant::now());
            let mut names: Vec<&String> = t.jobs.keys().collect();
            names.sort();
            for name in names {
                let j = &t.jobs[name];
                let elapsed = now.duration_since(j.start).unwrap_or_default();
                let _ = writeln!(out, "- {:<16} {}", "job_id:", yaml_job_id(name));
                let _ = writeln!(out, "  {:<16} {} secs.nsecs", "snapshot_time:", secs_nsecs(since_epoch(now)));
                let _ = writeln!(out, "  {:<16} {} secs.nsecs", "start_time:", secs_nsecs(since_epoch(j.start)));
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

    /// Forgets every job of `target` (`job` None, Lustre's `clear`) or one.
    pub fn clear(&self, target: (TargetKind, u32), job: Option<&str>) {
        self.with(|targets| {
            if let Some(t) = targets.get_mut(&target) {
                match job {
                    Some(job) => {
                        t.jobs.remove(job);
                    }
                    None => t.jobs.clear(),
                }
            }
        });
    }

    pub fn cleanup_interval(&self, target: (TargetKind, u32)) -> Duration {
        self.with(|targets| {
            targets.get(&target).map_or(Duration::from_secs(JOB_CLEANUP_INTERVAL_S_DEFAULT), |t| t.interval())
        })
    }

    /// 0 keeps idle jobs for ever.
    pub fn set_cleanup_interval(&self, target: (TargetKind, u32), interval: Duration) {
        self.with(|targets| {
            let t = targets.entry(target).or_default();
            t.cleanup_interval = Some(interval);
            t.last_cleanup = None;
        });
    }
}

impl Account for JobStats {
    fn record(&self, ctx: &RequestContext, outcome: &Outcome) {
        let Some(target) = outcome.target else { return };
        let bytes = outcome.bytes_in.max(outcome.bytes_out);
        let mut digits = [0u8; 10];
        let key = match self.by {
            By::Job if ctx.header.jobid.is_empty() => return,
            By::Job => ctx.header.jobid.as_str(),
            // Formatted on the stack: no String per request.
            By::User => decimal(ctx.header.identity.uid, &mut digits),
            By::Group => decimal(ctx.header.identity.gid, &mut digits),
        };
        self.add(target, key, ctx.opcode, outcome.took, bytes, outcome.waited);
    }
}

/// `n` in decimal, written into `buf`.
fn decimal(mut n: u32, buf: &mut [u8; 10]) -> &str {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    std::str::from_utf8(&buf[at..]).unwrap_or("0")
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

    #[test]
    fn counts_per_job_and_counter_in_lustres_shape() {
        let s = JobStats::default();
        let ms = Duration::from_millis;
        s.add(OST0, "dd.0", "ost_write", ms(2), 4096, Duration::ZERO);
        s.add(OST0, "dd.0", "ost_write", ms(4), 1 << 20, ms(3));
        s.add(OST0, "cp.5", "ost_read", ms(1), 8192, Duration::ZERO);
        s.add(OST0, "dd.0", "ost_no_such_op", ms(1), 0, Duration::ZERO);
        let jobs = s.jobs(OST0);
        assert_eq!(jobs.iter().map(|j| j.0.as_str()).collect::<Vec<_>>(), ["cp.5", "dd.0"]);
        let dd: HashMap<_, _> = jobs[1].1.iter().copied().collect();
        assert_eq!(
            dd["write_bytes"],
            Counter { samples: 2, min: 4096, max: 1 << 20, sum: 4096 + (1 << 20), sumsq: 4096 * 4096 + (1 << 40) }
        );
        assert_eq!((dd["write"].samples, dd["write"].min, dd["write"].max, dd["write"].sum), (2, 2000, 4000, 6000));
        assert_eq!((dd["nrs_wait"].samples, dd["nrs_wait"].sum), (1, 3000), "one write was held 3 ms");
        assert_eq!(dd["read"].samples, 0);
        let yaml = s.render(OST0);
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
            s.add(MDT0, "j", op, Duration::from_micros(5), 0, Duration::ZERO);
        }
        let c: HashMap<_, _> = s.jobs(MDT0)[0].1.iter().copied().collect();
        assert_eq!((c["open"].samples, c["close"].samples, c["mkdir"].samples), (2, 1, 1));
        assert_eq!((c["getattr"].samples, c["readpage"].samples, c["unlink"].samples), (1, 1, 0));
    }

    #[test]
    fn clear_cleanup_and_the_bound() {
        let s = JobStats::default();
        s.add(OST0, "a", "ost_read", Duration::ZERO, 1, Duration::ZERO);
        s.add(OST0, "b", "ost_read", Duration::ZERO, 1, Duration::ZERO);
        s.clear(OST0, Some("a"));
        assert_eq!(s.jobs(OST0).len(), 1);
        s.clear(OST0, None);
        assert!(s.jobs(OST0).is_empty());
        s.add(OST0, "a", "ost_read", Duration::ZERO, 1, Duration::ZERO);
        s.set_cleanup_interval(OST0, Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(50));
        assert!(s.jobs(OST0).is_empty(), "an idle job goes after the interval");
        s.set_cleanup_interval(OST0, Duration::ZERO);
        for i in 0..JOB_STATS_JOBS_MAX + 10 {
            s.add(OST0, &format!("j{i}"), "ost_read", Duration::ZERO, 1, Duration::ZERO);
        }
        assert_eq!(s.jobs(OST0).len(), JOB_STATS_JOBS_MAX);
    }

    #[test]
    fn uids_in_decimal() {
        let mut buf = [0u8; 10];
        assert_eq!(decimal(0, &mut buf), "0");
        assert_eq!(decimal(1000, &mut buf), "1000");
        assert_eq!(decimal(u32::MAX, &mut buf), "4294967295");
    }

    #[test]
    fn odd_jobids_are_quoted() {
        assert_eq!(yaml_job_id("dd.0"), "dd.0");
        assert_eq!(yaml_job_id("a:b"), "\"a\\x3ab\"");
        assert_eq!(yaml_job_id("@x"), "\"@x\"");
    }
}
