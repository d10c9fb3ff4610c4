//! Nodemaps and root squash on a TCP cluster: mounts told apart by the local address they
//! connect from (`-o nid=127.0.0.N`), each in its nodemap.

mod common;
use common::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// `weft COMMAND --mgs ADDR ARGS...`.
/// `weft COMMAND --mgs MGS ARGS...` of the cluster.
fn nm_args<'a>(c: &'a Cluster, args: &[&'a str]) -> Vec<&'a str> {
    let mut all: Vec<&str> = vec![args[0], "--mgs", &c.mgs_address];
    all.extend(&args[1..]);
    all
}

fn nm(c: &Cluster, args: &[&str]) -> std::process::Output {
    weft(&nm_args(c, args))
}

fn nm_ok(c: &Cluster, args: &[&str]) -> String {
    weft_ok(&nm_args(c, args))
}

/// `stat -c %u:%g` of `path`, through the mount's kernel (a fresh stat: the attributes
/// the servers answer within the kernel's cache time).
fn owner(path: &Path) -> String {
    let out = std::process::Command::new("stat").args(["-c", "%u:%g", s(path)]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Polls `check` until it holds (servers pick a nodemap change up within a second or so).
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < Duration::from_secs(15), "{what}: not within 15 s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A nodemap that squashes (neither admin nor trusted) makes root's files the squash id's,
/// as a trusted admin mount and the squashed mount both see; an idmapped user's files carry
/// the file system id on the admin mount and the client id on the mapped one; readonly_mount
/// refuses changes with EROFS; wrong settings get errors naming what is allowed; and the
/// nodemaps survive a restart of the management service.
#[test]
fn a_squashing_nodemap_makes_roots_files_the_squash_ids_and_maps_ids_both_ways() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    nm_ok(&c, &["nodemap", "add", "admins"]);
    nm_ok(&c, &["nodemap", "add-range", "--name", "admins", "--range", "127.0.0.1"]);
    nm_ok(&c, &["nodemap", "add-range", "--name", "admins", "--range", "127.0.0.3@tcp"]);
    nm_ok(&c, &["nodemap", "modify", "--name", "admins", "--property", "admin", "--value", "1"]);
    nm_ok(&c, &["nodemap", "modify", "--name", "admins", "--property", "trusted=1"]);
    nm_ok(&c, &["nodemap", "add", "--name", "remote"]);
    nm_ok(&c, &["nodemap", "add-range", "--name", "remote", "--range", "127.0.0.[2-2]"]);
    nm_ok(&c, &["nodemap", "add-idmap", "--name", "remote", "--idtype", "uid", "--idmap", "2001:1001"]);
    nm_ok(&c, &["nodemap", "add-idmap", "--name", "remote", "--idtype", "gid", "--idmap", "2001:1001"]);
    nm_ok(&c, &["nodemap", "modify", "--name", "remote", "--property", "squash_uid", "--value", "99"]);
    nm_ok(&c, &["nodemap", "modify", "--name", "remote", "--property", "squash_gid", "--value", "98"]);

    // Wrong settings: clear errors.
    let e = failure_stderr(&nm(&c, &["nodemap", "modify", "--name", "remote", "--property", "colour", "--value", "1"]));
    assert!(e.contains("allowed are admin, trusted, squash_uid, squash_gid, squash_projid, deny_unknown"), "{e}");
    let e = failure_stderr(&nm(&c, &["nodemap", "add-range", "--name", "remote", "--range", "127.0.0.0/24"]));
    assert!(e.contains("overlaps") && e.contains("'admins'"), "{e}");
    let e = failure_stderr(&nm(&c, &["nodemap", "add-range", "--name", "remote", "--range", "127.0.0"]));
    assert!(e.contains("192.168.1.0/24"), "{e}");
    let e = failure_stderr(&nm(&c, &["nodemap", "del", "default"]));
    assert!(e.contains("cannot be removed"), "{e}");
    let e =
        failure_stderr(&nm(&c, &["nodemap", "add-idmap", "--name", "remote", "--idtype", "user", "--idmap", "1:2"]));
    assert!(e.contains("uid, gid, projid"), "{e}");
    assert_eq!(nm_ok(&c, &["nodemap", "list"]), "default\nadmins\nremote\n");
    assert_eq!(nm_ok(&c, &["nodemap", "test-nid", "127.0.0.2@tcp"]).trim(), "remote");
    nm_ok(&c, &["nodemap", "activate", "1"]);

    let admin = c.mount_with("timeout=30,nid=127.0.0.3");
    let remote = c.mount_with("timeout=30,nid=127.0.0.2@tcp");
    sh(&admin, "mkdir -m 1777 shared");
    eventually("root on the squashing mount makes files of the squash ids", || {
        let _ = sh_as(0, 0, &remote, "touch shared/by-root-$$ && echo ok");
        std::fs::read_dir(admin.join("shared")).unwrap().any(|e| owner(&e.unwrap().path()) == "99:98")
    });
    sh(&remote, "touch shared/root-file");
    assert_eq!(owner(&admin.join("shared/root-file")), "99:98", "as the admin mount sees it");
    assert_eq!(owner(&remote.join("shared/root-file")), "99:98", "as the squashed mount sees it");
    sh(&admin, "touch shared/admin-file");
    assert_eq!(owner(&admin.join("shared/admin-file")), "0:0", "an admin mount's root stays root");

    let out = sh_as(2001, 2001, &remote, "touch shared/mapped && echo made");
    assert!(String::from_utf8_lossy(&out.stdout).contains("made"), "{out:?}");
    assert_eq!(owner(&admin.join("shared/mapped")), "1001:1001", "the file system keeps the fs id");
    assert_eq!(owner(&remote.join("shared/mapped")), "2001:2001", "the mapped mount sees its client id");
    // An ACL naming the mapped user holds the fs id, and shows the client id where mapped.
    let out =
        sh_as(2001, 2001, &remote, "setfacl -m u:2001:rw shared/mapped && getfacl -n --omit-header shared/mapped");
    assert!(String::from_utf8_lossy(&out.stdout).contains("user:2001:rw-"), "{out:?}");
    let on_admin = sh(&admin, "getfacl -n --omit-header shared/mapped");
    assert!(on_admin.contains("user:1001:rw-"), "{on_admin}");
    sh(&admin, "touch shared/by-admin && setfacl -m u:1001:r,g:1001:w shared/by-admin");
    let on_remote = sh(&remote, "getfacl -n --omit-header shared/by-admin");
    assert!(on_remote.contains("user:2001:r--") && on_remote.contains("group:2001:-w-"), "{on_remote}");
    // Its quota is the fs id's: the files it made count there.
    sh(&admin, "chown 1001:1001 shared/by-admin && touch shared/more && chown 1001 shared/more");
    let quota = |m: &Path, id: &str| {
        let script = format!("{} quota -u {id} {}", s(&weft_bin()), s(m));
        let out = sh_as(id.parse().unwrap(), id.parse().unwrap(), Path::new("/"), &script);
        let out = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        // After the title and the header: the mount (maybe on a line of its own), kbytes,
        // quota, limit, grace, files, ...
        let values: Vec<&str> = out.lines().skip(2).flat_map(str::split_whitespace).collect();
        values.get(5).unwrap_or_else(|| panic!("{out}")).to_string()
    };
    assert_eq!(quota(&admin, "1001"), "3", "files of fs uid 1001 on the admin mount, as 1001");
    assert_eq!(quota(&remote, "2001"), "3", "the same files as client uid 2001 on the mapped mount, as 2001");
    // A user the nodemap does not know is squashed.
    sh_as(3000, 3000, &remote, "touch shared/unknown");
    assert_eq!(owner(&admin.join("shared/unknown")), "99:98");

    // deny_unknown: unknown users are refused, mapped ones go on.
    nm_ok(&c, &["nodemap", "modify", "--name", "remote", "--property", "deny_unknown", "--value", "1"]);
    // (Refused from the start: not even the mount's root can be looked at.)
    let unknown_touch = format!("touch {}/shared/unknown2", s(&remote));
    eventually("deny_unknown refuses an unknown user", || {
        !sh_as(3000, 3000, Path::new("/"), &unknown_touch).status.success()
    });
    assert!(sh_as(2001, 2001, &remote, "touch shared/mapped2").status.success());
    nm_ok(&c, &["nodemap", "modify", "--name", "remote", "--property", "deny_unknown", "--value", "0"]);

    // readonly_mount: reads go on, changes are refused with EROFS.
    nm_ok(&c, &["nodemap", "modify", "--name", "remote", "--property", "readonly_mount", "--value", "1"]);
    eventually("readonly_mount refuses changes", || {
        let out = sh_as(2001, 2001, &remote, "touch shared/ro-$$");
        String::from_utf8_lossy(&out.stderr).contains("Read-only file system")
    });
    let read = sh_as(2001, 2001, &remote, "cat shared/mapped && echo read");
    assert!(String::from_utf8_lossy(&read.stdout).contains("read"), "reads go on: {read:?}");

    // The settings in Lustre's shapes, and after a restart of the whole server.
    let idmap = nm_ok(&c, &["get-param", "-n", "nodemap.remote.idmap"]);
    assert_eq!(
        idmap.trim(),
        "[\n { idtype: uid, client_id: 2001, fs_id: 1001 },\n { idtype: gid, client_id: 2001, fs_id: 1001 }\n]"
    );
    let info = nm_ok(&c, &["nodemap", "info", "remote"]);
    for want in ["nodemap.remote.squash_uid=99", "nodemap.remote.readonly_mount=1", "start_nid: 127.0.0.2@tcp"] {
        assert!(info.contains(want), "{want} in\n{info}");
    }
    c.kill9("all");
    c.restart("all");
    let after = nm_ok(&c, &["nodemap", "info", "remote"]);
    assert_eq!(after, info, "the nodemaps survive a restart");
    eventually("the restarted server squashes again", || {
        let out = sh_as(0, 0, &remote, "touch shared/after-restart");
        String::from_utf8_lossy(&out.stderr).contains("Read-only file system")
    });
    assert_eq!(nm_ok(&c, &["get-param", "-n", "nodemap.active"]).trim(), "1");
}

/// `mdt.*.root_squash` squashes root from every address but those of `nosquash_nids`,
/// set permanently (-P) and kept across a restart.
#[test]
fn root_squash_spares_only_nosquash_nids() {
    let mut c = Cluster::single_node(&weft_bin(), 1);
    let plain = c.mount_with("timeout=30,nid=127.0.0.2");
    let spared = c.mount_with("timeout=30,nid=127.0.0.3");
    sh(&spared, "mkdir -m 1777 d");
    nm_ok(&c, &["set-param", "-P", "mdt.*.root_squash=500:501"]);
    nm_ok(&c, &["set-param", "-P", "mdt.*.nosquash_nids=127.0.0.3@tcp 127.0.0.1"]);
    eventually("root squashed", || {
        let _ = sh_as(0, 0, &plain, "touch d/try-$$");
        std::fs::read_dir(spared.join("d")).unwrap().any(|e| owner(&e.unwrap().path()) == "500:501")
    });
    sh(&spared, "touch d/spared");
    assert_eq!(owner(&spared.join("d/spared")), "0:0");
    let shown = nm_ok(&c, &["get-param", "mdt.*.root_squash", "mdt.*.nosquash_nids"]);
    assert!(
        shown.contains("root_squash=500:501") && shown.contains("nosquash_nids=127.0.0.3@tcp 127.0.0.1"),
        "{shown}"
    );
    let e = failure_stderr(&nm(&c, &["set-param", "mdt.*.root_squash=500"]));
    assert!(e.contains("UID:GID"), "{e}");
    c.kill9("all");
    c.restart("all");
    eventually("root squashed after a restart", || {
        sh(&plain, "rm -f d/after; touch d/after");
        owner(&spared.join("d/after")) == "500:501"
    });
    nm_ok(&c, &["set-param", "-P", "mdt.*.root_squash=0:0"]);
    eventually("root squash off", || {
        sh(&plain, "rm -f d/off; touch d/off");
        owner(&spared.join("d/off")) == "0:0"
    });
}

/// A mount in a nodemap with a fileset sees that directory as its root and nothing outside
/// it: `..` at its root is not the file system's root, and fid2path of a file outside (its
/// FID learnt on another mount) fails, while a file inside gets its path in the mount.
#[test]
fn a_fileset_mount_sees_only_its_subdirectory() {
    let mut c = Cluster::single_node(&weft_bin(), 1);
    let admin = c.mount_with("timeout=30,nid=127.0.0.3");
    sh(&admin, "mkdir -p projects/a/sub projects/b && echo inside > projects/a/file && echo secret > top-secret");
    nm_ok(&c, &["nodemap", "add", "admins"]);
    nm_ok(&c, &["nodemap", "add-range", "--name", "admins", "--range", "127.0.0.3"]);
    nm_ok(&c, &["nodemap", "add-range", "--name", "admins", "--range", "127.0.0.1"]);
    nm_ok(&c, &["nodemap", "add", "proj"]);
    nm_ok(&c, &["nodemap", "add-range", "--name", "proj", "--range", "127.0.0.2"]);
    for p in ["admin", "trusted"] {
        for n in ["admins", "proj"] {
            nm_ok(&c, &["nodemap", "modify", "--name", n, "--property", p, "--value", "1"]);
        }
    }
    let e = failure_stderr(&nm(&c, &["nodemap", "fileset-add", "--name", "proj", "--fileset", "projects/a"]));
    assert!(e.contains("absolute path"), "{e}");
    nm_ok(&c, &["nodemap", "fileset-add", "--name", "proj", "--fileset", "/projects/a"]);
    assert!(nm_ok(&c, &["get-param", "-n", "nodemap.proj.fileset"]).contains("primary:     /projects/a"));
    nm_ok(&c, &["nodemap", "activate", "1"]);
    std::thread::sleep(Duration::from_secs(1));

    let fs = c.mount_with("timeout=30,nid=127.0.0.2");
    assert_eq!(sh(&fs, "ls"), "file\nsub\n", "the fileset is the mount's root");
    assert_eq!(sh(&fs, "cat file"), "inside\n");
    // `..` at the mount's root is the kernel's (the directory above the mount point): the
    // server's answer to it is checked through weft-client below.
    sh(&fs, "mkdir made-here");
    assert!(admin.join("projects/a/made-here").is_dir(), "made inside the fileset");

    let secret = weft_ok(&["path2fid", s(&admin.join("top-secret"))]).trim().to_string();
    let sibling = weft_ok(&["path2fid", s(&admin.join("projects/b"))]).trim().to_string();
    for fid in [&secret, &sibling] {
        let out = weft(&["fid2path", s(&fs), fid]);
        assert!(!out.status.success(), "fid2path of {fid} outside the fileset: {out:?}");
    }
    let inside = weft_ok(&["path2fid", s(&fs.join("sub"))]).trim().to_string();
    assert_eq!(inside, weft_ok(&["path2fid", s(&admin.join("projects/a/sub"))]).trim(), "one FID, seen from both");
    assert_eq!(weft_ok(&["fid2path", s(&fs), &inside]).trim(), s(&fs.join("sub")));

    // Without the fileset, a new mount sees the whole file system again.
    nm_ok(&c, &["nodemap", "fileset-del", "--name", "proj"]);
    std::thread::sleep(Duration::from_secs(1));
    let whole = c.mount_with("timeout=30,nid=127.0.0.2");
    assert!(sh(&whole, "ls").contains("top-secret"));
}

/// A program that talks to the servers itself, from a fileset's address, cannot get out of
/// the fileset either: not by `..` at its root, a FID from outside (the root's, a file's, a
/// sibling directory's), nor a rename into a directory outside.
#[test]
fn a_fileset_client_reaches_nothing_outside_by_fid_dotdot_or_rename() {
    use weft_proto::msg::Caller;
    use weft_proto::{ErrorCode, Fid};
    let mut c = Cluster::single_node(&weft_bin(), 1);
    let admin = c.mount_with("timeout=30,nid=127.0.0.3");
    sh(&admin, "mkdir -p projects/a projects/b && echo inside > projects/a/file && echo secret > top-secret");
    nm_ok(&c, &["nodemap", "add", "admins"]);
    nm_ok(&c, &["nodemap", "add-range", "--name", "admins", "--range", "127.0.0.3"]);
    nm_ok(&c, &["nodemap", "add", "proj"]);
    nm_ok(&c, &["nodemap", "add-range", "--name", "proj", "--range", "127.0.0.2"]);
    for p in ["admin", "trusted"] {
        for n in ["admins", "proj"] {
            nm_ok(&c, &["nodemap", "modify", "--name", n, "--property", p, "--value", "1"]);
        }
    }
    nm_ok(&c, &["nodemap", "fileset-add", "--name", "proj", "--fileset", "/projects/a"]);
    nm_ok(&c, &["nodemap", "activate", "1"]);
    let fid_of = |p: &str| -> Fid { weft_ok(&["path2fid", s(&admin.join(p))]).trim().parse().unwrap() };
    let (top, secret, sibling) = (fid_of("projects/a"), fid_of("top-secret"), fid_of("projects/b"));

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let config = weft_client::ClientConfig {
            local_address: Some("127.0.0.2".parse().unwrap()),
            request_timeout: Duration::from_secs(20),
            ..weft_client::ClientConfig::new(c.mgs_address.clone())
        };
        let client = weft_client::Client::connect(config).await.unwrap();
        let root = Caller::root();
        let start = Instant::now();
        while client.get_root(&root).await.unwrap() != top {
            assert!(start.elapsed() < Duration::from_secs(15), "the fileset in force");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(client.lookup(&root, top, b"..").await.unwrap().attr.fid, top, "`..` at its root is its root");
        for fid in [Fid::ROOT, secret, sibling] {
            assert_eq!(client.getattr(&root, fid).await.unwrap_err().code, ErrorCode::NotFound, "getattr {fid}");
            assert_eq!(client.fid2path(&root, fid).await.unwrap_err().code, ErrorCode::NotFound, "fid2path {fid}");
        }
        assert_eq!(client.readdir(&root, sibling, 0, 16).await.unwrap_err().code, ErrorCode::NotFound);
        let out = client.rename(&root, top, b"file", sibling, b"stolen", 0).await;
        assert_eq!(out.unwrap_err().code, ErrorCode::NotFound, "a rename out of the fileset");
        assert_eq!(client.fid2path(&root, fid_of("projects/a/file")).await.unwrap(), b"file".to_vec());
    });
    assert!(admin.join("projects/a/file").exists() && !admin.join("projects/b/stolen").exists());
}

/// With management, metadata and object servers in separate processes, the servers follow
/// the nodemaps the MGS keeps: the MDS squashes a create, and the writes of a file opened for
/// writing before its client's nodemap turned read-only fail with EROFS at the latest at
/// fsync (the OST refuses the write, or the MDS the size and time it records).
#[test]
fn separate_servers_each_follow_the_nodemaps() {
    let mut c = Cluster::multi_node(&weft_bin());
    let m = c.mount_with("timeout=30,nid=127.0.0.9");
    sh(&m, "mkdir -m 1777 d");
    nm_ok(&c, &["nodemap", "add", "far"]);
    nm_ok(&c, &["nodemap", "add-range", "--name", "far", "--range", "127.0.0.8/31"]);
    nm_ok(&c, &["nodemap", "modify", "--name", "far", "--property", "trusted", "--value", "1"]);
    let mut open = std::fs::OpenOptions::new().create(true).truncate(true).write(true).open(m.join("d/early")).unwrap();
    nm_ok(&c, &["nodemap", "activate", "1"]);
    eventually("the MDS squashes root from 127.0.0.9", || {
        let _ = sh_as(0, 0, &m, "touch d/try-$$");
        std::fs::read_dir(m.join("d")).unwrap().any(|e| owner(&e.unwrap().path()) == "65534:65534")
    });
    nm_ok(&c, &["nodemap", "modify", "--name", "far", "--property", "readonly_mount", "--value", "1"]);
    eventually("writes of the read-only nodemap refused", || {
        use std::io::Write;
        let w = open.write_all(&[7u8; 4096]).and_then(|_| open.sync_all());
        errno_of(w) == libc::EROFS
    });
}
