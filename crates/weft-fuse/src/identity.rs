//! Who a kernel request comes from: uid and gid from the request, supplementary groups
//! from the calling process (the kernel does not send them).

use weft_proto::msg::Identity;

/// Most supplementary groups taken from a process (as Linux's NGROUPS_MAX).
const GROUPS_MAX: usize = 65_536;

/// The groups on the `Groups:` line of a `/proc/PID/status` text; empty when absent.
pub fn parse_status_groups(status: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("Groups:"))
        .map(|rest| rest.split_whitespace().filter_map(|g| g.parse().ok()).take(GROUPS_MAX).collect())
        .unwrap_or_default()
}

/// The identity of a request. Groups are read from `/proc/PID/status`; a request with no
/// process (pid 0, kernel-internal) or whose process is gone gets none.
pub fn identity_of(uid: u32, gid: u32, pid: u32) -> Identity {
    let groups = if pid == 0 {
        Vec::new()
    } else {
        std::fs::read_to_string(format!("/proc/{pid}/status")).map(|s| parse_status_groups(&s)).unwrap_or_default()
    };
    Identity { uid, gid, groups }
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
    fn identity_of_this_process_has_its_groups() {
        let me = identity_of(1, 2, std::process::id());
        assert_eq!((me.uid, me.gid), (1, 2));
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        assert_eq!(me.groups, parse_status_groups(&status));
        assert!(identity_of(1, 2, 0).groups.is_empty());
    }
}
