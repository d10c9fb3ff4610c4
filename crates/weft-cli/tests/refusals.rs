//! What a person sees when the file system refuses a command: the exact words on stderr and
//! the exit status. The reason is the server's (or the mount's), carried to the command by
//! the mount's `weft.error`; the errno comes after it by name. A refusal the mount never saw
//! (the kernel's own permission check) says the errno's plain words.

mod common;
use common::*;
use std::path::Path;
use std::process::Output;

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The exit status and stderr of a command, as one value to compare.
fn seen(out: Output) -> (Option<i32>, String) {
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn as_user(uid: u32, mnt: &Path, args: &[&str]) -> Output {
    let words: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    sh_as(uid, uid, mnt, &format!("{} {}", weft_bin().display(), words.join(" ")))
}

#[test]
fn layouts_and_hsm_refusals_say_the_servers_reason_and_the_errno() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let mnt = c.mount();
    sh(&mnt, "mkdir d");

    // A pool that does not exist: the MDT's reason.
    let f = mnt.join("d/f");
    assert_eq!(
        seen(weft(&["setstripe", "-c", "1", "-p", "nope", p(&f)])),
        (
            Some(1),
            format!(
                "weft setstripe: {}: pool 'nope' does not exist: create it with 'weft pool add' first (EINVAL)\n",
                f.display()
            )
        )
    );
    assert!(!f.exists(), "nothing was created");

    // A file open for writing keeps its layout.
    let w = mnt.join("w");
    let open = std::fs::OpenOptions::new().create(true).truncate(true).write(true).open(&w).unwrap();
    assert_eq!(
        seen(weft(&["setstripe", "-c", "2", p(&w)])),
        (
            Some(1),
            format!(
                "weft setstripe: {}: is open for writing: set its layout before writing, or create it with the layout \
                 (EBUSY)\n",
                w.display()
            )
        )
    );

    // An archived file open for writing is not released.
    weft_ok(&["hsm", "set", "--exists", "--archived", p(&w)]);
    assert_eq!(
        seen(weft(&["hsm", "release", p(&w)])),
        (
            Some(1),
            format!(
                "weft hsm release: {}: cannot be released: it is open (1 open handles) (EBUSY)\nweft hsm release: 1 of \
                 1 files not released\n",
                w.display()
            )
        )
    );
    drop(open);

    // A user may not say a copy exists: the MDT's rule, said once.
    sh(&mnt, "mkdir u && chown 1000:1000 u && touch u/f && chown 1000:1000 u/f");
    let uf = mnt.join("u/f");
    assert_eq!(
        seen(as_user(1000, &mnt, &["hsm", "set", "--exists", "u/f"])),
        (
            Some(1),
            "weft hsm set: u/f: only root sets or clears exists, archived, lost and the archive id (users: norelease, \
             noarchive, dirty) (EPERM)\nweft hsm set: 1 of 1 files not changed\n"
                .to_string()
        )
    );
    assert!(weft_ok(&["hsm", "state", p(&uf)]).ends_with(": (0x00000000)\n"), "nothing changed");
}

#[test]
fn cache_refusals_say_the_mounts_reason_and_a_kernel_refusal_its_errno() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let mnt = c.mount();
    let cache = c.dir.path().join("pcc");

    // A parameter key the mount does not know.
    let param = "fname={*.h5} roid=1 colour=red";
    let (status, err) = seen(weft(&["pcc", "add", p(&mnt), p(&cache), "--param", param]));
    assert_eq!(status, Some(1), "{err}");
    assert!(
        err.starts_with(&format!("weft pcc add: {}: PCC parameter key 'colour': rwid, roid, ", mnt.display()))
            && err.ends_with(" (EINVAL)\n")
            && err.lines().count() == 1,
        "{err}"
    );
    weft_ok(&["pcc", "add", p(&mnt), p(&cache), "--param", "uid={0} rwid=2 pccrw=1"]);

    // A directory is not cached.
    sh(&mnt, "mkdir d && echo data > f && chmod 666 f && echo data > g");
    let d = mnt.join("d");
    assert_eq!(
        seen(weft(&["pcc", "attach", "-w", p(&d)])),
        (
            Some(1),
            format!(
                "weft pcc attach: {}: is not a regular file: only files are cached (EINVAL)\nweft pcc attach: 1 of 1 \
                 files failed\n",
                d.display()
            )
        )
    );

    // Another user's file, writable by all: the mount refuses a read-write attach.
    assert_eq!(
        seen(as_user(1000, &mnt, &["pcc", "attach", "-w", "f"])),
        (
            Some(1),
            "weft pcc attach: f: only the owner or root attaches a file read-write (EPERM)\nweft pcc attach: 1 of 1 \
             files failed\n"
                .to_string()
        )
    );

    // Not writable by the user: the kernel refuses before the mount sees it, so no reason
    // is kept, and the errno's own words say it.
    assert_eq!(
        seen(as_user(1000, &mnt, &["pcc", "attach", "-w", "g"])),
        (Some(1), "weft pcc attach: g: Permission denied (EACCES)\nweft pcc attach: 1 of 1 files failed\n".to_string())
    );
    assert_eq!(
        weft_ok(&["pcc", "state", p(&mnt.join("f"))]).trim(),
        format!("file: {}, type: none", mnt.join("f").display())
    );
}
