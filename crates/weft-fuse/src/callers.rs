//! Who a kernel request comes from, and for which job: uid and gid from the request,
//! supplementary groups and the jobid from the calling process (the kernel sends neither).
//!
//! Reading `/proc/PID/status` costs about ten system calls, and a single `open(O_CREAT)`
//! makes the kernel send several requests from the same process: what is read for one
//! process is therefore kept per (pid, uid, gid) for [`CALLER_CACHE_TTL_MS`], in a bounded
//! table (a process that lacks the `jobid_var` variable for [`JOBID_UNSET_TTL_MS`] only: it
//! may be a fork about to exec the program that has it). Root needs no groups (the MDS
//! grants root everything the groups could), and a jobid that does not depend on the
//! process is made once. The time comes from the caller (`now`), so a test moves it on.

use crate::jobid::{JobidScheme, ProcessFacts};
use crate::limits::{CALLER_CACHE_ENTRIES_MAX, CALLER_CACHE_TTL_MS, GROUPS_MAX, JOBID_UNSET_TTL_MS};
use std::collections::HashMap;
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};
use weft_proto::msg::{Caller, Identity};

/// The groups on the `Groups:` line of a `/proc/PID/status` text; empty when absent.
pub fn parse_status_groups(status: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("Groups:"))
        .map(|rest| rest.split_whitespace().filter_map(|g| g.parse().ok()).take(GROUPS_MAX).collect())
        .unwrap_or_default()
}

/// The groups of process `pid`, from `/proc/PID/status`; none for a process that is gone.
fn read_groups(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status")).map(|s| parse_status_groups(&s)).unwrap_or_default()
}

/// The name of process `pid` (`/proc/PID/comm`); empty for a process that is gone.
fn read_exe(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).map(|s| s.trim_end().to_string()).unwrap_or_default()
}

/// The value of environment variable `name` in process `pid` (`/proc/PID/environ`).
fn read_env(pid: u32, name: &str) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env_value(&environ, name)
}

/// `name`'s value in an environ block (NUL-separated `NAME=VALUE` entries).
pub fn env_value(environ: &[u8], name: &str) -> Option<String> {
    environ.split(|b| *b == 0).find_map(|entry| {
        let value = entry.strip_prefix(name.as_bytes())?.strip_prefix(b"=")?;
        Some(String::from_utf8_lossy(value).into_owned())
    })
}

/// (pid, uid, gid) of a request.
type Key = (u32, u32, u32);

/// How jobids are made now, and the jobid when it does not depend on the process.
struct Naming {
    scheme: JobidScheme,
    fixed_jobid: Option<String>,
}

/// The callers of a mount: each process's identity and jobid, kept for a moment.
pub struct Callers {
    /// Changed at run time by `set-param jobid_var=...` (then the cache starts over).
    naming: RwLock<Naming>,
    hostname: String,
    /// Until when a caller read is used, and what it was.
    cache: Mutex<HashMap<Key, (Instant, Caller)>>,
}

impl Callers {
    pub fn new(scheme: JobidScheme) -> Callers {
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_string();
        let naming = RwLock::new(Callers::naming(scheme, &hostname));
        Callers { naming, hostname, cache: Mutex::new(HashMap::new()) }
    }

    fn naming(scheme: JobidScheme, hostname: &str) -> Naming {
        let fixed_jobid =
            (!scheme.per_process()).then(|| scheme.jobid(&ProcessFacts { hostname, ..Default::default() }));
        Naming { scheme, fixed_jobid }
    }

    /// How jobids are made now.
    pub fn scheme(&self) -> JobidScheme {
        self.naming.read().unwrap_or_else(|p| p.into_inner()).scheme.clone()
    }

    /// Makes jobids the way `scheme` says from now on.
    pub fn set_scheme(&self, scheme: JobidScheme) {
        *self.naming.write().unwrap_or_else(|p| p.into_inner()) = Callers::naming(scheme, &self.hostname);
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// The caller of a request that came at `now`. A request with no process (pid 0,
    /// kernel-internal) gets no groups, and a jobid only when it does not depend on the
    /// process.
    pub fn of(&self, uid: u32, gid: u32, pid: u32, now: Instant) -> Caller {
        let fixed_jobid = self.naming.read().unwrap_or_else(|p| p.into_inner()).fixed_jobid.clone();
        let wants_process = uid != 0 || fixed_jobid.is_none();
        if pid == 0 || !wants_process {
            let jobid = fixed_jobid.unwrap_or_default();
            return Caller::new(Identity { uid, gid, groups: Vec::new() }, jobid);
        }
        let key = (pid, uid, gid);
        {
            let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((until, caller)) = cache.get(&key) {
                if now < *until {
                    return caller.clone();
                }
            }
        }
        // Read outside the lock: other requests go on meanwhile.
        let (caller, var_missing) = self.read(uid, gid, pid);
        // A process without the jobid variable is often one that is about to exec the
        // program that has it (a shell's fork, a spawner's child that changes into the
        // mount first): its answer is kept only a moment, so the program's own requests
        // soon carry their job.
        let ttl = if var_missing { JOBID_UNSET_TTL_MS } else { CALLER_CACHE_TTL_MS };
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CALLER_CACHE_ENTRIES_MAX {
            cache.clear();
        }
        cache.insert(key, (now + Duration::from_millis(ttl), caller.clone()));
        caller
    }

    /// The caller, and whether the scheme's environment variable was missing from it.
    fn read(&self, uid: u32, gid: u32, pid: u32) -> (Caller, bool) {
        let groups = if uid == 0 { Vec::new() } else { read_groups(pid) };
        let naming = self.naming.read().unwrap_or_else(|p| p.into_inner());
        let (jobid, var_missing) = match &naming.fixed_jobid {
            Some(jobid) => (jobid.clone(), false),
            None => {
                let exe = read_exe(pid);
                let name = naming.scheme.var.env_name();
                let env = name.and_then(|name| read_env(pid, name));
                let facts = ProcessFacts { exe: &exe, uid, gid, pid, hostname: &self.hostname, env: env.as_deref() };
                (naming.scheme.jobid(&facts), name.is_some() && env.is_none())
            }
        };
        (Caller::new(Identity { uid, gid, groups }, jobid), var_missing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobid::JobidVar;
    use std::time::Duration;

    #[test]
    fn groups_line_is_parsed_and_missing_or_empty_lines_give_none() {
        let status = "Name:\tbash\nUmask:\t0022\nUid:\t1000\t1000\t1000\t1000\nGid:\t100\t100\t100\t100\nFDSize:\t256\nGroups:\t4 24 27 1000 \nNStgid:\t1\n";
        assert_eq!(parse_status_groups(status), vec![4, 24, 27, 1000]);
        assert_eq!(parse_status_groups("Name:\tx\nGroups:\t\nPid:\t1\n"), Vec::<u32>::new());
        assert_eq!(parse_status_groups("Name:\tx\n"), Vec::<u32>::new());
        assert_eq!(parse_status_groups("Groups:\t5 junk 6\n"), vec![5, 6]);
    }

    #[test]
    fn environment_values_are_found_by_exact_name() {
        let environ = b"PATH=/bin\0SLURM_JOB_ID=77\0SLURM_JOB_ID_X=9\0EMPTY=\0";
        assert_eq!(env_value(environ, "SLURM_JOB_ID").as_deref(), Some("77"));
        assert_eq!(env_value(environ, "EMPTY").as_deref(), Some(""));
        assert_eq!(env_value(environ, "SLURM"), None);
        assert_eq!(env_value(environ, "HOME"), None);
    }

    #[test]
    fn a_request_without_a_process_or_of_a_gone_one_has_no_groups() {
        let callers = Callers::new(JobidScheme::default());
        let kernel = callers.of(1, 2, 0, Instant::now());
        assert!(kernel.identity.groups.is_empty());
        assert_eq!(kernel.jobid, "", "no process, no process name");
        assert!(callers.of(1, 2, u32::MAX, Instant::now()).identity.groups.is_empty());
    }

    #[test]
    fn callers_carry_their_process_groups_and_jobid_and_are_kept() {
        let callers = Callers::new(JobidScheme::default());
        let pid = std::process::id();
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let exe = read_exe(pid);
        let first = callers.of(1, 2, pid, Instant::now());
        assert_eq!(first.identity.groups, parse_status_groups(&status));
        assert_eq!(first.jobid, format!("{exe}.1"), "procname_uid");
        // The second answer comes from the cache, for the same key only.
        assert_eq!(callers.of(1, 2, pid, Instant::now()), first);
        assert_eq!(callers.cache.lock().unwrap().len(), 1);
        assert_eq!(callers.of(1, 3, pid, Instant::now()).identity.gid, 3);
        assert_eq!(callers.cache.lock().unwrap().len(), 2);
        let root = callers.of(0, 0, pid, Instant::now());
        assert!(root.identity.groups.is_empty() && root.identity.uid == 0);
        assert_eq!(root.jobid, format!("{exe}.0"));
    }

    #[test]
    fn a_process_that_execs_into_its_job_is_soon_seen_with_it() {
        let callers = Callers::new(JobidScheme { var: JobidVar::Env("WEFT_TEST_JOB".into()), name: "%e.%u".into() });
        // The shell (without the variable) becomes, at the same pid, a program with it.
        // It execs when told (a line on its stdin), not after a pause.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "read go; exec env WEFT_TEST_JOB=j7 sleep 5"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        // Waits for the event itself: the process showing the name.
        let wait_for = |name: &str| {
            let start = std::time::Instant::now();
            while read_exe(pid) != name {
                assert!(start.elapsed() < std::time::Duration::from_secs(10), "the child never became {name}");
                std::thread::yield_now();
            }
        };
        wait_for("sh");
        let asked = Instant::now();
        let before = callers.of(0, 0, pid, asked).jobid;
        {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        }
        wait_for("sleep");
        // The kernel shows the new name a moment before the new environment.
        let start = std::time::Instant::now();
        while read_env(pid, "WEFT_TEST_JOB").is_none() {
            assert!(start.elapsed() < Duration::from_secs(10), "the child never had its variable");
            std::thread::yield_now();
        }
        // Still within the short time a caller without the variable is kept: the old answer.
        let soon = callers.of(0, 0, pid, asked + Duration::from_millis(JOBID_UNSET_TTL_MS - 1)).jobid;
        let after = callers.of(0, 0, pid, asked + Duration::from_millis(JOBID_UNSET_TTL_MS)).jobid;
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(before, "sh.0", "no variable yet: jobid_name");
        assert_eq!(soon, "sh.0", "kept for JOBID_UNSET_TTL_MS");
        assert_eq!(after, "j7", "after the exec, the variable's value");
    }

    #[test]
    fn a_jobid_of_no_process_is_made_once_and_root_then_reads_nothing() {
        let callers = Callers::new(JobidScheme { var: JobidVar::NodeLocal, name: "ckpt".into() });
        let root = callers.of(0, 0, std::process::id(), Instant::now());
        assert_eq!(root.jobid, "ckpt");
        assert!(callers.cache.lock().unwrap().is_empty(), "nothing read for root");
        assert_eq!(callers.of(7, 7, std::process::id(), Instant::now()).jobid, "ckpt");
    }

    #[test]
    fn an_entry_older_than_the_ttl_is_read_again() {
        let callers = Callers::new(JobidScheme::default());
        let pid = std::process::id();
        let start = Instant::now();
        let old = Caller::new(Identity { uid: 1, gid: 2, groups: vec![424242] }, "old");
        let until = start + Duration::from_millis(CALLER_CACHE_TTL_MS);
        callers.cache.lock().unwrap().insert((pid, 1, 2), (until, old.clone()));
        // Kept until the TTL is over, read again at its end.
        assert_eq!(callers.of(1, 2, pid, until - Duration::from_millis(1)), old);
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        assert_eq!(callers.of(1, 2, pid, until).identity.groups, parse_status_groups(&status));
    }
}
