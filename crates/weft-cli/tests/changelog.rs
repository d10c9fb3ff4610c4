//! Changelogs on a cluster of separate processes: a reader registers, a scripted set of
//! operations on the mount shows in `weft changelog` exactly, in order, in Lustre's line
//! shape; `changelog-clear` removes what the reader is done with; a kill -9 of the MDS keeps
//! the rest; non-root users are refused.

mod common;
use common::*;
use std::time::{Duration, Instant};

/// (index, type, name) of every record `weft changelog` prints.
fn records(mgs: &str, from: Option<u64>) -> Vec<(u64, String, String)> {
    let start = from.map(|f| f.to_string());
    let mut args = vec!["changelog", "weft-MDT0000", "--mgs", mgs];
    args.extend(start.as_deref());
    weft_ok(&args)
        .lines()
        .map(|line| {
            let t: Vec<&str> = line.split(' ').collect();
            let name = t.iter().position(|w| w.starts_with("p=")).map_or("", |i| t[i + 1]);
            (t[0].parse().unwrap(), t[1][2..].to_string(), name.to_string())
        })
        .collect()
}

fn wait_for_records(mgs: &str, n: usize) -> Vec<(u64, String, String)> {
    let start = Instant::now();
    loop {
        let r = records(mgs, None);
        if r.len() >= n || start.elapsed() > Duration::from_secs(10) {
            return r;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_scripted_set_of_operations_is_listed_in_order_cleared_and_kept_across_a_restart() {
    let mut c = Cluster::multi_node(&weft_bin());
    let mnt = c.mount();
    let mgs = c.mgs_address.clone();
    let out = weft_ok(&["changelog-register", "weft-MDT0000", "--mgs", &mgs]);
    assert_eq!(out.trim(), "weft-MDT0000: Registered changelog userid 'cl1'");
    let named = weft_ok(&["changelog-register", "weft-MDT0000", "-u", "policy", "--mgs", &mgs]);
    assert!(named.contains("'cl2-policy'"), "{named}");
    // A user may not read or register.
    let denied = sh_as(1000, 1000, &mnt, &format!("{} changelog weft-MDT0000 --mgs {mgs}", weft_bin().display()));
    assert!(!denied.status.success() && String::from_utf8_lossy(&denied.stderr).contains("only root reads changelogs"));
    let bad = weft(&["changelog", "weft-OST0000", "--mgs", &mgs]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("an MDT name such as weft-MDT0000"));

    sh(&mnt, "mkdir d && echo hi > d/f");
    // The mount sends a close without waiting for it: let it land before the next change.
    // (The truncate below is by path, as truncate(2): `truncate -s` opens and closes too.)
    assert_eq!(wait_for_records(&mgs, 3).len(), 3);
    sh(
        &mnt,
        "ln d/f d/g && ln -s f d/s && mkfifo d/p && chmod 600 d/f && mv d/g h \
         && python3 -c \"import os; os.truncate('d/f', 1); os.setxattr('d/f', 'user.a', b'1')\" \
         && rm d/f h d/s d/p && rmdir d",
    );
    let want = [
        ("MKDIR", "d"),
        ("CREAT", "f"),
        ("CLOSE", ""),
        ("HLINK", "g"),
        ("SLINK", "s"),
        ("MKNOD", "p"),
        ("SATTR", ""),
        ("RENME", "h"),
        ("TRUNC", ""),
        ("XATTR", ""),
        ("UNLNK", "f"),
        ("UNLNK", "h"),
        ("UNLNK", "s"),
        ("UNLNK", "p"),
        ("RMDIR", "d"),
    ];
    let got = wait_for_records(&mgs, want.len());
    let shown: Vec<(&str, &str)> = got.iter().map(|(_, t, n)| (t.as_str(), n.as_str())).collect();
    assert_eq!(shown, want, "{got:?}");
    assert_eq!(got.iter().map(|r| r.0).collect::<Vec<_>>(), (1..=15).collect::<Vec<_>>());
    let line = weft_ok(&["changelog", "weft-MDT0000", "2", "2", "--mgs", &mgs]);
    assert!(
        line.starts_with("2 01CREAT ") && line.contains(" u=0:0 p=[0x") && line.trim_end().ends_with(" f"),
        "{line}"
    );

    // cl1 is done with 1-10, cl2 with everything: 11-15 stay, for cl1.
    weft_ok(&["changelog-clear", "weft-MDT0000", "cl1", "10", "--mgs", &mgs]);
    weft_ok(&["changelog-clear", "weft-MDT0000", "cl2-policy", "0", "--mgs", &mgs]);
    let start = Instant::now();
    while records(&mgs, None).len() > 5 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let kept: Vec<u64> = records(&mgs, None).iter().map(|r| r.0).collect();
    assert_eq!(kept, (11..=15).collect::<Vec<_>>());
    let past = weft(&["changelog-clear", "weft-MDT0000", "cl1", "99", "--mgs", &mgs]);
    assert!(String::from_utf8_lossy(&past.stderr).contains("the last is 15"), "{past:?}");

    c.kill9("mds");
    c.restart("mds");
    let after: Vec<u64> = records(&mgs, None).iter().map(|r| r.0).collect();
    assert_eq!(after, (11..=15).collect::<Vec<_>>(), "uncleared records survive a kill -9 of the MDS");
    let users = weft_ok(&["changelog-users", "weft-MDT0000", "--mgs", &mgs]);
    assert!(users.starts_with("current_index: 15\n"), "{users}");
    assert!(users.lines().any(|l| l.starts_with("cl1 ") && l.contains(" 10 (")), "{users}");
    assert!(users.contains("records kept: 5"), "{users}");
    // Still recording after the restart.
    sh(&mnt, "mkdir again");
    let last = wait_for_records(&mgs, 6);
    assert_eq!(last.last().map(|r| (r.0, r.1.as_str())), Some((16, "MKDIR")), "{last:?}");
    // The mask: OPEN is not recorded by default; +OPEN adds it.
    let mds = c.servers.iter().find(|s| s.spec.name == "mds").unwrap().address.clone();
    let mask = weft_ok(&["get-param", "-n", "--server", &mds, "mdd.weft-MDT0000.changelog_mask"]);
    assert!(mask.starts_with("MARK CREAT MKDIR"), "{mask}");
    assert!(!mask.contains("OPEN"), "{mask}");
    let bad = weft(&["set-param", "--server", &mds, "mdd.weft-MDT0000.changelog_mask=CREATE"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("changelog type 'CREATE': one of"), "{bad:?}");
    weft_ok(&["set-param", "--server", &mds, "mdd.weft-MDT0000.changelog_mask=+OPEN"]);
    sh(&mnt, "echo x > k");
    wait_for_records(&mgs, 8);
    sh(&mnt, "cat k > /dev/null");
    let opened = wait_for_records(&mgs, 9);
    assert_eq!(opened.last().map(|r| r.1.as_str()), Some("OPEN"), "{opened:?}");
    for id in ["cl1", "cl2-policy"] {
        weft_ok(&["changelog-deregister", "weft-MDT0000", id, "--mgs", &mgs]);
    }
    let gone = weft(&["changelog-clear", "weft-MDT0000", "cl1", "0", "--mgs", &mgs]);
    assert!(String::from_utf8_lossy(&gone.stderr).contains("no changelog reader 'cl1'"), "{gone:?}");
}
