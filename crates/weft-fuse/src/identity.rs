//! Who a kernel request comes from: uid and gid from the request, supplementary groups
//! from the calling process (the kernel does not send them).
//!
//! Reading `/proc/PID/status` costs about ten system calls, and a single `open(O_CREAT)`
//! makes the kernel send several requests from the same process: the groups are therefore
//! kept per (pid, uid, gid) for [`GROUPS_CACHE_TTL`]. Root needs none: the MDS grants root
//! everything the groups could.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use weft_proto::msg::Identity;

/// Most supplementary groups taken from a process (as Linux's NGROUPS_MAX).
const GROUPS_MAX: usize = 65_536;
/// How long the groups read for one process are used. A process that calls setgroups(2)
/// without changing its uid or gid is seen with its old groups by the MDS's checks for at
/// most this long (the kernel's own checks, `default_permissions`, see the new ones at once).
pub const GROUPS_CACHE_TTL: Duration = Duration::from_secs(1);
/// Processes remembered at once; the cache starts over when it is full.
const GROUPS_CACHE_ENTRIES_MAX: usize = 4096;

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

/// (pid, uid, gid) of a request.
type Caller = (u32, u32, u32);

/// Identities of the processes a mount serves, with their groups kept for a moment.
#[derive(Default)]
pub struct Identities {
    /// When the groups of a caller were read, and what they were.
    groups: Mutex<HashMap<Caller, (Instant, Vec<u32>)>>,
}

impl Identities {
    /// The identity of a request. A request with no process (pid 0, kernel-internal) gets no
    /// groups.
    pub fn of(&self, uid: u32, gid: u32, pid: u32) -> Identity {
        if uid == 0 || pid == 0 {
            return Identity { uid, gid, groups: Vec::new() };
        }
        let key = (pid, uid, gid);
        let now = Instant::now();
        {
            let cache = self.groups.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((at, groups)) = cache.get(&key) {
                if now.duration_since(*at) < GROUPS_CACHE_TTL {
                    return Identity { uid, gid, groups: groups.clone() };
                }
            }
        }
        // Read outside the lock: other requests go on meanwhile.
        let groups = read_groups(pid);
        let mut cache = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= GROUPS_CACHE_ENTRIES_MAX {
            cache.clear();
        }
        cache.insert(key, (now, groups.clone()));
        Identity { uid, gid, groups }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_line_is_parsed_and_missing_or_empty_lines_give_none() {
        let status = "Name:\tbash\nUmask:\t0022\nUid:\t1000\t1000\t1000\t1000\nGid:\t100\t100\t100\t100\nFDSize:\t256\nGroups:\t4 24 27 1000 \nNStgid:\t1\n";
        assert_eq!(parse_status_groups(status), vec![4, 24, 27, 1000]);
        assert_eq!(parse_status_groups("Name:\tx\nGroups:\t\nPid:\t1\n"), Vec::<u32>::new());
        assert_eq!(parse_status_groups("Name:\tx\n"), Vec::<u32>::new());
        assert_eq!(parse_status_groups("Groups:\t5 junk 6\n"), vec![5, 6]);
    }

    #[test]
    fn a_request_without_a_process_or_of_a_gone_one_has_no_groups() {
        let ids = Identities::default();
        assert!(ids.of(1, 2, 0).groups.is_empty());
        assert!(ids.of(1, 2, u32::MAX).groups.is_empty());
    }

    #[test]
    fn cached_identities_carry_the_groups_of_their_process_and_root_needs_none() {
        let ids = Identities::default();
        let pid = std::process::id();
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let first = ids.of(1, 2, pid);
        assert_eq!(first.groups, parse_status_groups(&status));
        // The second answer comes from the cache, for the same key only.
        assert_eq!(ids.of(1, 2, pid), first);
        assert_eq!(ids.groups.lock().unwrap().len(), 1);
        assert_eq!(ids.of(1, 3, pid).gid, 3);
        assert_eq!(ids.groups.lock().unwrap().len(), 2);
        let root = ids.of(0, 0, pid);
        assert!(root.groups.is_empty() && root.uid == 0);
        assert_eq!(ids.groups.lock().unwrap().len(), 2);
    }

    #[test]
    fn an_entry_older_than_the_ttl_is_read_again() {
        let ids = Identities::default();
        let pid = std::process::id();
        let stale = Instant::now() - GROUPS_CACHE_TTL - Duration::from_millis(10);
        ids.groups.lock().unwrap().insert((pid, 1, 2), (stale, vec![424242]));
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        assert_eq!(ids.of(1, 2, pid).groups, parse_status_groups(&status));
    }
}
