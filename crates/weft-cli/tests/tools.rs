//! Real programs on a mount, compared with what a local directory gives.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().and_then(Path::parent).expect("workspace root")
}

#[test]
fn tar_rsync_cp_find_du_match_a_local_copy() {
    let mut c = Cluster::single_node(&weft_bin(), 4);
    let m = c.mount();
    let local = tempfile::tempdir().unwrap();
    // A real source tree: the kernel's UAPI headers (thousands of small files, nested dirs,
    // symlinks) plus this workspace's sources.
    let src = local.path().join("src");
    std::fs::create_dir(&src).unwrap();
    sh(&src, &format!("cp -a /usr/include/linux . && cp -a {}/crates weft", workspace_root().display()));
    sh(local.path(), "tar cf tree.tar -C src .");

    sh(&m, &format!("mkdir x && tar xf {}/tree.tar -C x", local.path().display()));
    sh(&m, &format!("diff -r --no-dereference {} x", src.display()));
    // tar of the mount, unpacked locally, is again the same tree.
    sh(
        &m,
        &format!(
            "tar cf {0}/back.tar -C x . && mkdir {0}/back && tar xf {0}/back.tar -C {0}/back",
            local.path().display()
        ),
    );
    sh(local.path(), "diff -r --no-dereference src back");

    sh(&m, &format!("rsync -a {}/ r/ && cp -a r c", src.display()));
    sh(&m, &format!("diff -r --no-dereference {} r && diff -r --no-dereference r c", src.display()));
    let count_local = sh(&src, "find . | wc -l");
    let count_mount = sh(&m.join("c"), "find . | wc -l");
    assert_eq!(count_local, count_mount);
    let files_local = sh(&src, "find . -type f -name '*.h' | sort");
    let files_mount = sh(&m.join("x"), "find . -type f -name '*.h' | sort");
    assert_eq!(files_local, files_mount);
    let du: u64 = sh(&m, "du -sk x | cut -f1").trim().parse().unwrap();
    let du_local: u64 = sh(&src, "du -sk --apparent-size . | cut -f1").trim().parse().unwrap();
    assert!(du >= du_local / 2, "du on the mount ({du} KiB) should reflect the data ({du_local} KiB apparent)");
}

#[test]
fn git_repository_commit_branch_checkout() {
    let mut c = Cluster::single_node(&weft_bin(), 4);
    let m = c.mount();
    let git = "git -c user.name=weft -c user.email=weft@example.com -c init.defaultBranch=main";
    sh(&m, &format!("{git} init -q repo"));
    let repo = m.join("repo");
    sh(
        &repo,
        &format!("cp -a {}/crates/weft-proto . && {git} add -A && {git} commit -qm first", workspace_root().display()),
    );
    sh(
        &repo,
        &format!("{git} checkout -qb feature && echo change >> weft-proto/Cargo.toml && {git} commit -qam second"),
    );
    sh(&repo, &format!("{git} checkout -q main"));
    assert!(!std::fs::read_to_string(repo.join("weft-proto/Cargo.toml")).unwrap().contains("change"));
    sh(&repo, &format!("{git} checkout -q feature"));
    assert!(std::fs::read_to_string(repo.join("weft-proto/Cargo.toml")).unwrap().contains("change"));
    sh(&repo, &format!("{git} fsck --strict --no-progress && {git} gc -q && {git} fsck --no-progress"));
    assert_eq!(sh(&repo, &format!("{git} status --porcelain")), "");
    assert_eq!(sh(&repo, &format!("{git} log --format=%s")).trim(), "second\nfirst");
    // A clone from the mount to a local directory sees the same history.
    let local = tempfile::tempdir().unwrap();
    sh(local.path(), &format!("{git} clone -q {} clone", repo.display()));
    sh(local.path(), &format!("diff -r --exclude=.git clone {}", repo.display()));
}

#[test]
fn sqlite_and_fio_verify_on_a_four_stripe_file() {
    let mut c = Cluster::single_node(&weft_bin(), 4);
    let m = c.mount();
    sh(&m, "sqlite3 db 'create table t(a integer primary key, b text);'");
    sh(&m, "(echo 'begin;'; for i in $(seq 1 2000); do echo \"insert into t(b) values ('row $i');\"; done; echo 'commit;') | sqlite3 db");
    assert_eq!(sh(&m, "sqlite3 db 'select count(*), sum(a) from t;'").trim(), "2000|2001000");
    assert_eq!(sh(&m, "sqlite3 db 'pragma integrity_check;'").trim(), "ok");

    std::fs::create_dir(m.join("striped")).unwrap();
    weft_ok(&["setstripe", "-c", "4", "-S", "256K", m.join("striped").to_str().unwrap()]);
    let fio = Command::new("fio")
        .current_dir(m.join("striped"))
        .args([
            "--name=verify",
            "--filename=data",
            "--size=48M",
            "--bs=1M",
            "--rw=write",
            "--ioengine=psync",
            "--verify=crc32c",
            "--do_verify=1",
            "--verify_fatal=1",
            "--end_fsync=1",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&fio.stdout);
    assert!(fio.status.success(), "fio failed:\n{out}\n{}", String::from_utf8_lossy(&fio.stderr));
    assert!(!out.contains("verify: bad"), "{out}");
    let fio = Command::new("fio")
        .current_dir(m.join("striped"))
        .args([
            "--name=randverify",
            "--filename=rand",
            "--size=16M",
            "--bs=47008",
            "--rw=randwrite",
            "--ioengine=psync",
            "--verify=crc32c",
            "--do_verify=1",
            "--verify_fatal=1",
        ])
        .output()
        .unwrap();
    assert!(fio.status.success(), "fio randwrite verify failed:\n{}", String::from_utf8_lossy(&fio.stdout));
    let stripe = weft_ok(&["getstripe", "-c", m.join("striped/data").to_str().unwrap()]);
    assert_eq!(stripe.trim(), "4", "fio's file is striped over 4 OSTs");
}
