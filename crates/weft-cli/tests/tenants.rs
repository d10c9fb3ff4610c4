//! Many users on one file system: POSIX ACLs enforced as on a local file system and on
//! every mount, and project ids that new files inherit.

mod common;
use common::*;
use std::fs;
use std::path::Path;

/// Runs `script` as `uid` in `dir` and gives its output and status, as the comparisons do.
fn as_user(uid: u32, dir: &Path, script: &str) -> String {
    let out = sh_as(uid, uid, dir, script);
    format!(
        "status {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// setfacl's access and default ACLs, run by the same script on a local directory and on
/// the mount, give the same answers: a user granted by an ACL reads and writes, one denied
/// by a named entry does not although others may read, `ls -l` shows the mask as the group
/// bits with a '+', chmod moves the mask, and new files and directories take the default
/// ACL in place of the umask.
#[test]
fn acls_are_enforced_and_inherited_as_on_a_local_directory() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let m = c.mount();
    let setup = "echo secret > f && chmod 644 f && setfacl -m u:1000:rw,u:2000:- f && \
                 mkdir -m 755 dd && setfacl -m u:1000:rwx dd && setfacl -d -m u:1000:rwx,g::r-x,o::- dd";
    let granted = "cat f; echo more >> f && echo wrote; getfacl -n --omit-header f; ls -l f | cut -c1-11; \
                   umask 022; touch dd/new && mkdir dd/sub && echo made; \
                   getfacl -n --omit-header dd/new dd/sub 2>&1; ls -ld dd/new dd/sub | cut -c1-11; \
                   chmod 700 dd/new; getfacl -n --omit-header dd/new; ls -l dd/new | cut -c1-11";
    let (local, mounted) = local_and_mounted(&m, 1000, setup, granted);
    assert_eq!(mounted, local);
    for want in [
        "secret\nwrote\n",
        "user:1000:rw-",
        "-rw-rw-r--+",
        "default:user:1000:rwx",
        "made",
        "#effective:---",
        "-rwx------+",
    ] {
        assert!(local.contains(want), "{want:?} in\n{local}");
    }
    let refused = "cat f || echo refused; echo x >> f || echo refused; ls dd && touch dd/x || echo refused";
    let (local, mounted) = local_and_mounted(&m, 2000, setup, refused);
    assert_eq!(mounted, local);
    assert_eq!(local.matches("refused").count(), 3, "{local}");
}

/// What one mount's setfacl grants or takes away holds at once on another mount (its
/// kernel's cached ACL goes with the lock that the change calls back), and after the
/// server process is killed and restarted.
#[test]
fn an_acl_changed_on_one_mount_holds_on_the_other_and_after_a_restart() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let a = c.mount();
    let b = c.mount();
    sh(&a, "echo secret > f && chmod 600 f");
    let read_on_b = || as_user(1000, &b, "cat f 2>/dev/null || echo refused");
    assert!(read_on_b().contains("refused"));
    sh(&a, "setfacl -m u:1000:r f");
    assert!(read_on_b().contains("secret"), "granted on a, read on b");
    sh(&a, "setfacl -x u:1000 f");
    assert!(read_on_b().contains("refused"), "revoked on a, refused on b");
    sh(&a, "setfacl -m u:1000:r f");
    assert!(read_on_b().contains("secret"));

    c.kill9("all");
    c.restart("all");
    assert!(read_on_b().contains("secret"), "the ACL is kept across a restart");
    assert!(as_user(2000, &b, "cat f 2>/dev/null || echo refused").contains("refused"));
    assert_eq!(
        sh(&b, "getfacl -n --omit-header f").lines().find(|l| l.starts_with("user:1000")),
        Some("user:1000:r--")
    );
}

/// `weft project -p ID -s -r DIR` gives a tree a project that new files and directories
/// take; `weft project` lists it as lfs does; mv of a file from outside copies it into the
/// project (the rename is EXDEV); only root changes projects; -C clears.
#[test]
fn a_project_id_passes_to_new_files_and_is_listed_as_lfs_does() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let m = c.mount();
    let mp = |p: &str| m.join(p).display().to_string();
    sh(&m, "mkdir -p proj/old && echo a > proj/old/a && echo out > outside && chmod 777 proj");
    weft_ok(&["project", "-p", "1000", "-s", "-r", &mp("proj")]);
    sh(&m, "echo n > proj/new && mkdir proj/sub && echo d > proj/sub/deep && mv outside proj/moved");
    let listed = weft_ok(&["project", "-r", &mp("proj")]);
    let want = ["new", "moved", "old", "old/a", "sub", "sub/deep"]
        .iter()
        .map(|p| {
            let flag = if ["old", "sub"].contains(p) { 'P' } else { '-' };
            format!(" 1000 {flag} {}", mp(&format!("proj/{p}")))
        })
        .collect::<Vec<_>>();
    let mut got: Vec<&str> = listed.lines().collect();
    got.sort();
    let mut want_sorted: Vec<&str> = want.iter().map(String::as_str).collect();
    want_sorted.sort();
    assert_eq!(got, want_sorted, "{listed}");
    assert_eq!(weft_ok(&["project", "-d", &mp("proj")]).trim_end(), format!(" 1000 P {}", mp("proj")));
    assert_eq!(weft_ok(&["project", "-c", "-r", &mp("proj")]), "", "everything in the tree carries its project");

    // A user may read projects but not change them, even on a file of theirs.
    let refused = sh_as(1000, 1000, &m, &format!("touch proj/mine && {} project -p 5 proj/mine", weft_bin().display()));
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("only root"), "{refused:?}");

    weft_ok(&["project", "-C", &mp("proj/sub")]);
    assert_eq!(weft_ok(&["project", "-d", &mp("proj/sub")]).trim_end(), format!("    0 - {}", mp("proj/sub")));
    let check = weft_ok(&["project", "-c", &mp("proj")]);
    assert!(check.contains("proj/sub - project identifier is not set (inode=0, tree=1000)"), "{check}");
    let bad = weft(&["project", "-p", "4294967295", &mp("proj")]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("-p: a project id is 0 to 4294967294"), "{bad:?}");
    assert!(fs::metadata(m.join("proj/moved")).is_ok());
}
