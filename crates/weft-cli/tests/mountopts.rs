//! Mount options a site chooses: setuid programs and device nodes (nosuid,nodev unless root
//! asks), and the source the mount shows (`MGS_ADDR:/FSNAME`, as Lustre's `mgsnid:/fsname`).

mod common;
use common::*;
use std::fs::{self, OpenOptions};
use std::process::Command;

const USER: u32 = 1000;

/// A setuid-root copy of `id` (which prints `euid=0(root)` when its effective uid is not
/// its real one) and a /dev/null node, made as root on mount `m`.
fn plant(m: &std::path::Path) {
    sh(m, "cp /usr/bin/id prog && chmod 4755 prog && mknod null c 1 3 && chmod 666 null");
}

fn as_user(m: &std::path::Path, script: &str) -> String {
    let out = sh_as(USER, USER, m, script);
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn suid_and_dev_only_where_root_mounts_with_them_and_the_source_names_the_file_system() {
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test mounts with suid,dev: run it as root");
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let site = c.mount_with("timeout=30,suid,dev");
    let plain = c.mount();
    plant(&site);

    // With suid,dev: the setuid bit takes effect and the node is the device.
    let id = as_user(&site, "./prog");
    assert!(id.contains(&format!("uid={USER}")) && id.contains("euid=0(root)"), "{id}");
    fs::write(site.join("null"), b"gone").unwrap();
    assert_eq!(fs::read(site.join("null")).unwrap(), b"", "the node reads as /dev/null");
    assert_eq!(as_user(&site, "echo hi > null && cat null && echo ok"), "ok\n");

    // The same files through the default mount: nosuid, nodev.
    let id = as_user(&plain, "./prog");
    assert!(id.contains(&format!("uid={USER}")) && !id.contains("euid"), "nosuid: {id}");
    let opened = OpenOptions::new().write(true).open(plain.join("null"));
    assert_eq!(opened.err().and_then(|e| e.raw_os_error()), Some(libc::EACCES), "nodev refuses the node");
    assert!(as_user(&plain, "echo hi > null").contains("Permission denied"));
    assert_eq!(fs::metadata(plain.join("prog")).unwrap().len(), fs::metadata("/usr/bin/id").unwrap().len());

    // A user asking for them is told it takes root, before anything is mounted.
    let asked = as_user(&plain, &format!("{} mount {} /tmp -o suid,dev", weft_bin().display(), c.mgs_address));
    assert!(asked.contains("mount option suid,dev") && asked.contains("only root"), "{asked}");

    // The source says which file system of which management service.
    let source = format!("{}:/weft", c.mgs_address);
    for m in [&site, &plain] {
        let found = run(Command::new("findmnt").args(["-n", "-o", "SOURCE"]).arg(m));
        assert_eq!(found.trim(), source, "{}", m.display());
        let opts = run(Command::new("findmnt").args(["-n", "-o", "OPTIONS"]).arg(m));
        let want = if m == &site {
            ["nosuid", "nodev"].map(|o| !opts.split(',').any(|x| x == o))
        } else {
            ["nosuid", "nodev"].map(|o| opts.split(',').any(|x| x == o))
        };
        assert_eq!(want, [true, true], "{}: {opts}", m.display());
    }
    // umount(8) finds a mount by its source (the latest of that source, here `plain`).
    run(Command::new("umount").arg(&source));
    assert!(!weft_harness::is_mounted(&plain), "umount by source");
    assert!(weft_harness::is_mounted(&site));
}
