//! Several MDTs on a TCP cluster (Lustre's DNE): directories placed on another MDT
//! (`weft mkdir -i`) and striped over two (`weft mkdir -c 2`), used by real programs and
//! compared with a local directory; names and hard links that cross MDTs; `getdirstripe`,
//! `mdts` and `df -i` in Lustre's shapes; and a kill -9 of either MDS in the middle of
//! changes over both, after which the namespace is whole.

mod common;
use common::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// MGS, MDT0 and two OSTs at 127.0.0.1; MDT1 in its own process at 127.0.0.2.
fn two_mdts() -> Cluster {
    Cluster::start(
        &weft_bin(),
        vec![NodeSpec::new("main", "127.0.0.1").mgs().mdt(0).osts(&[0, 1]), NodeSpec::new("mds1", "127.0.0.2").mdt(1)],
    )
}

/// The MDT a path's inode is on, from its FID's sequence.
fn mdt_of(path: &Path) -> u32 {
    let text = weft_ok(&["path2fid", s(path)]);
    let fid: weft_proto::Fid = text.trim().parse().unwrap();
    fid.mdt_index()
}

/// Every name under `dir` with its type and size, sorted: what two trees must agree on.
fn listing(dir: &Path) -> String {
    sh(dir, "find . -printf '%y %s %p\\n' | LC_ALL=C sort")
}

#[test]
fn remote_and_striped_directories_work_for_programs_and_spread_over_mdts() {
    let mut c = two_mdts();
    let mnt = c.mount();

    // Lustre's commands and shapes.
    let mdts = weft_ok(&["mdts", s(&mnt)]);
    assert_eq!(mdts, "MDTS:\n0: weft-MDT0000_UUID ACTIVE\n1: weft-MDT0001_UUID ACTIVE\n", "{mdts}");
    let df = weft_ok(&["df", "-i", s(&mnt)]);
    assert!(df.contains("weft-MDT0000_UUID") && df.contains("weft-MDT0001_UUID"), "{df}");
    assert!(df.contains("[MDT:1]"), "{df}");

    // A remote directory: on MDT1, its files too.
    weft_ok(&["mkdir", "-i", "1", s(&mnt.join("remote"))]);
    assert_eq!(mdt_of(&mnt.join("remote")), 1);
    let plain = weft_ok(&["getdirstripe", s(&mnt.join("remote"))]);
    assert_eq!(plain, "lmv_stripe_count: 0 lmv_stripe_offset: 1 lmv_hash_type: none\n");
    sh(&mnt, "echo hello > remote/a && mkdir remote/sub && echo deep > remote/sub/b");
    assert_eq!(std::fs::read_to_string(mnt.join("remote/sub/b")).unwrap(), "deep\n");
    assert_eq!((mdt_of(&mnt.join("remote/a")), mdt_of(&mnt.join("remote/sub"))), (1, 1));
    assert_eq!(sh(&mnt, "stat -c %h remote"), "3\n", "a remote directory counts its subdirectories");

    // A striped directory: names spread over both MDTs by hash.
    weft_ok(&["mkdir", "-c", "2", "-i", "0", s(&mnt.join("striped"))]);
    let shown = weft_ok(&["getdirstripe", s(&mnt.join("striped"))]);
    assert!(shown.starts_with("lmv_stripe_count: 2 lmv_stripe_offset: 0 lmv_hash_type: fnv_1a_64\n"), "{shown}");
    assert!(shown.contains("mdtidx\t\t FID[seq:oid:ver]\n     0\t\t [0x200000400:"), "{shown}");
    assert!(shown.contains("\n     1\t\t [0x200100400:"), "{shown}");
    sh(&mnt, "for i in $(seq 1 200); do echo $i > striped/f$i; done");
    let on: Vec<u32> = (1..=200).map(|i| mdt_of(&mnt.join(format!("striped/f{i}")))).collect();
    let on1 = on.iter().filter(|m| **m == 1).count();
    assert!((60..140).contains(&on1), "{on1} of 200 names on MDT1");
    assert_eq!(sh(&mnt, "ls striped | wc -l"), "200\n");
    assert_eq!(sh(&mnt, "cat striped/f77"), "77\n");

    // Real programs on both, against a local directory.
    let local = tempfile::tempdir().unwrap();
    sh(
        local.path(),
        "mkdir -p src/a/b && for i in $(seq 1 40); do head -c $((i * 997)) /dev/urandom > src/a/f$i; done",
    );
    sh(local.path(), "echo x > src/a/b/c && ln -s a/b/c src/link && ln src/a/f1 src/a/hard");
    for dir in ["remote", "striped"] {
        sh(&mnt, &format!("tar -C {} -cf - src | tar -C {dir} -xf -", s(local.path())));
        let out = sh_as(0, 0, &mnt, &format!("diff -r --no-dereference {}/src {dir}/src", s(local.path())));
        assert!(out.status.success(), "{dir}: {}", String::from_utf8_lossy(&out.stdout));
        assert_eq!(listing(&mnt.join(dir).join("src")), listing(&local.path().join("src")), "{dir}");
    }
    assert_eq!(sh(&mnt, "stat -c %h striped/src/a/f1"), "2\n");

    // Names that cross MDTs: a file of MDT0 renamed into MDT1's directory and back, a hard
    // link across, an unlink of a remote name; what a local directory does.
    sh(&mnt, "echo moved > mover && mv mover remote/mover && cat remote/mover");
    assert_eq!(mdt_of(&mnt.join("remote/mover")), 0, "a renamed file keeps its inode's MDT");
    sh(&mnt, "ln remote/mover linked && test $(stat -c %h linked) = 2 && mv remote/mover back");
    assert_eq!(sh(&mnt, "cat back linked; stat -c %h back"), "moved\nmoved\n2\n");
    sh(&mnt, "rm linked && test $(stat -c %h back) = 1 && echo over > remote/target && mv back remote/target");
    assert_eq!(
        sh(&mnt, "cat remote/target; ls back 2>&1 || true"),
        "moved\nls: cannot access 'back': No such file or directory\n"
    );
    // Renames between a striped directory's stripes (temporary file renamed into place).
    sh(&mnt, "for i in $(seq 1 30); do echo v$i > striped/.tmp$i && mv striped/.tmp$i striped/final$i; done");
    assert_eq!(sh(&mnt, "cat striped/final17; ls striped | grep -c '^final'"), "v17\n30\n");
    // A directory does not move between MDTs by rename: EXDEV, so mv copies.
    let out = sh_as(0, 0, &mnt, "python3 -c 'import os; os.rename(\"remote/sub\", \"subcopy\")'");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Invalid cross-device link"), "{:?}", out);
    sh(&mnt, "mv remote/sub subcopy && cat subcopy/b");

    // Removal: not while anything is left in any stripe; then everything goes.
    let out = sh_as(0, 0, &mnt, "rmdir striped");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Directory not empty"), "{:?}", out);
    sh(&mnt, "rm -rf striped remote subcopy");
    assert_eq!(sh(&mnt, "ls -A"), "");
    let df = weft_ok(&["df", "-i", s(&mnt)]);
    let used = |name: &str| -> u64 {
        let line = df.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    assert_eq!(used("weft-MDT0001_UUID"), 0, "MDT1 keeps inodes after everything went:\n{df}");

    // A default for new subdirectories (setdirstripe -D): each new one striped.
    sh(&mnt, "mkdir parent");
    weft_ok(&["setdirstripe", "-D", "-c", "2", s(&mnt.join("parent"))]);
    let d = weft_ok(&["getdirstripe", "-D", s(&mnt.join("parent"))]);
    assert!(d.starts_with("lmv_stripe_count: 2 lmv_stripe_offset: -1 lmv_hash_type: fnv_1a_64"), "{d}");
    sh(&mnt, "mkdir parent/child");
    assert_eq!(weft_ok(&["getdirstripe", "-c", s(&mnt.join("parent/child"))]), "2\n");

    // An MDT joins the running file system: listed at once, directories placed on it.
    c.add_node(NodeSpec::new("mds2", "127.0.0.3").mdt(2), |_| {});
    let eventually = Instant::now();
    while !weft_ok(&["mdts", s(&mnt)]).contains("2: weft-MDT0002_UUID ACTIVE") {
        assert!(eventually.elapsed() < Duration::from_secs(15), "the new MDT is not in the mount's map");
        std::thread::sleep(Duration::from_millis(200));
    }
    weft_ok(&["mkdir", "-i", "2", s(&mnt.join("on2"))]);
    sh(&mnt, "echo two > on2/file && mkdir on2/sub");
    assert_eq!((mdt_of(&mnt.join("on2/file")), mdt_of(&mnt.join("on2/sub"))), (2, 2));
    weft_ok(&["mkdir", "-c", "3", s(&mnt.join("three"))]);
    sh(&mnt, "for i in $(seq 1 60); do echo $i > three/f$i; done");
    let spread: std::collections::BTreeSet<u32> = (1..=60).map(|i| mdt_of(&mnt.join(format!("three/f{i}")))).collect();
    assert_eq!(spread.into_iter().collect::<Vec<_>>(), vec![0, 1, 2]);
    sh(&mnt, "rm -rf on2 three");

    // Wrong input: named options and what is allowed.
    let e = failure_stderr(&weft(&["mkdir", "-c", "4", s(&mnt.join("four"))]));
    assert!(e.contains("needs 4 MDTs; the file system has 3"), "{e}");
    let e = failure_stderr(&weft(&["mkdir", "-H", "all_char", "-c", "2", s(&mnt.join("x"))]));
    assert!(e.contains("-H/--mdt-hash") && e.contains("fnv_1a_64 or crush"), "{e}");
    let e = failure_stderr(&weft(&["mkdir", "-i", "7", s(&mnt.join("x"))]));
    assert!(e.contains("MDT index 7 is not in the file system"), "{e}");
}

/// Changes that cross MDTs while either MDS is killed (-9) at any moment: afterwards every
/// name leads to an inode, every inode's link count is its names, and nothing is left
/// without a name.
#[test]
fn changes_over_two_mdts_survive_kill_9_of_either_mds() {
    let mut c = two_mdts();
    let mnt = c.mount_with("timeout=60");
    weft_ok(&["mkdir", "-i", "1", s(&mnt.join("one"))]);
    sh(&mnt, "mkdir zero");
    let rounds = std::env::var("WEFT_DNE_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    for round in 0..rounds {
        // A loop of changes over both MDTs, in the background.
        let script = format!(
            "for i in $(seq 1 40); do \
               weft_bin={bin}; \
               $weft_bin mkdir -i 1 zero/d{round}_$i 2>/dev/null; \
               echo $i > zero/f{round}_$i 2>/dev/null; \
               mv zero/f{round}_$i one/f{round}_$i 2>/dev/null; \
               ln one/f{round}_$i zero/l{round}_$i 2>/dev/null; \
               rm -f one/f{round}_$i 2>/dev/null; \
               rmdir zero/d{round}_$((i - 1)) 2>/dev/null; \
               mkdir -p zero/m{round}_$i/s 2>/dev/null && echo $i > zero/m{round}_$i/s/f 2>/dev/null; \
               $weft_bin migrate -m 1 zero/m{round}_$i 2>/dev/null; \
             done; true",
            bin = s(&weft_bin())
        );
        let child = std::process::Command::new("sh").arg("-c").arg(&script).current_dir(&mnt).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(300 + 150 * round as u64));
        let victim = if round % 2 == 0 { "mds1" } else { "main" };
        c.kill9(victim);
        c.restart(victim);
        let mut child = child;
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() {
            assert!(start.elapsed() < Duration::from_secs(120), "the change loop hangs after a restart of {victim}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    // The loops did cross MDTs: remote directories, links across and migrated trees are there.
    let made = sh(&mnt, "ls zero | grep -c '^d' || true; ls zero | grep -c '^l' || true");
    let counts: Vec<u32> = made.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert!(counts[0] >= rounds && counts[1] >= 10 * rounds, "too little was done to tell: {counts:?}");
    // Each tree, moved or not, holds its file's bytes (a write cut by a kill made none).
    let migrated = sh(
        &mnt,
        "for d in zero/m*; do [ -s $d/s/f ] || continue; [ \"$(cat $d/s/f)\" = \"${d##*_}\" ] || echo bad $d; \
         echo $(($(stat -c %i $d/s/f) >> 32)); done",
    );
    assert!(!migrated.contains("bad"), "{migrated}");
    let on_mdt1 = migrated.lines().filter(|l| l.parse::<u64>().unwrap() >= weft_proto::fid::SEQ_PER_MDT).count();
    assert!(on_mdt1 >= 10 * rounds as usize, "too few trees migrated to tell: {on_mdt1}");
    // Give the participants time to ask for the outcome of what was left prepared.
    std::thread::sleep(Duration::from_secs(8));
    check_whole(&mnt);
}

/// `weft migrate -m`: a tree made on MDT0 moves to MDT1 and keeps every name, byte, mode,
/// time, symlink and extended attribute, as this mount, another that cached the tree
/// before, and a fresh one all see; an open file and a file with hard links are said and
/// left, the rest moves; run again once closed, the open one moves too; `-d` moves a
/// directory without its children; no inode is left behind without a name; bad input is
/// refused naming what is wrong.
#[test]
fn a_tree_migrates_to_another_mdt_keeping_every_name_byte_and_attribute() {
    let mut c = two_mdts();
    let mnt = c.mount();
    let other = c.mount();
    let local = tempfile::tempdir().unwrap();
    sh(
        local.path(),
        "mkdir -p src/a/b src/c && for i in $(seq 1 30); do head -c $((i * 1499)) /dev/urandom > src/a/f$i; done \
         && echo x > src/a/b/c && ln -s a/b/c src/link && mkfifo src/c/fifo && chmod 0600 src/a/f3 \
         && touch -d '2001-02-03 04:05:06' src/a/f4",
    );
    sh(&mnt, &format!("tar -C {} -cf - src | tar -xpf -", s(local.path())));
    sh(&mnt, "python3 -c \"import os; os.setxattr('src/a/f5', 'user.color', b'blue')\" && ln src/a/f1 src/hard");
    let before = tree_state(&mnt.join("src"));
    assert_eq!(tree_state(&other.join("src")), before, "the other mount caches the tree");
    assert_eq!(mdt_of(&mnt.join("src/a/f9")), 0);

    // An open file and the two names of a hard-linked one are said and left.
    let held = std::fs::File::open(mnt.join("src/a/f2")).unwrap();
    let out = weft(&["migrate", "-m", "1", "-v", s(&mnt.join("src"))]);
    let err = failure_stderr(&out);
    assert!(err.contains("src/a/f2: 'f2' is open; migrate it again once it is closed"), "{err}");
    assert!(err.contains("src/a/f1: 'f1' has 2 names") && err.contains("src/hard: 'hard' has 2 names"), "{err}");
    assert!(err.contains("3 of 38 inodes were not moved to MDT 1"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("src/a/f9: on MDT0001"));
    drop(held);
    let err = failure_stderr(&weft(&["migrate", "-m", "1", s(&mnt.join("src"))]));
    assert!(!err.contains("is open") && err.contains("2 of 38 inodes"), "{err}");

    for line in sh(&mnt, "find src").lines() {
        let want = if line == "src/a/f1" || line == "src/hard" { 0 } else { 1 };
        assert_eq!(mdt_of(&mnt.join(line)), want, "{line}");
    }
    assert_eq!(tree_state(&mnt.join("src")), before, "this mount");
    assert_eq!(tree_state(&other.join("src")), before, "the mount that cached the tree before");
    let fresh = c.mount();
    assert_eq!(tree_state(&fresh.join("src")), before, "a fresh mount");
    let color = sh(&fresh, "python3 -c \"import os; print(os.getxattr('src/a/f5', 'user.color').decode())\"");
    assert_eq!(color, "blue\n");

    // `weft quota` counts the inodes of every MDT (here on both: the hard-linked file on MDT0).
    sh(&mnt, "chown -R 1000:1000 src");
    let inodes = sh(&mnt, "find src -printf '%i\\n' | sort -u | wc -l").trim().to_string();
    let table = weft_ok(&["quota", "-u", "1000", s(&mnt)]);
    let files = table.lines().skip(2).collect::<Vec<_>>().join(" ");
    assert_eq!(files.split_whitespace().nth(5), Some(inodes.as_str()), "{table}");

    // -d: the directory alone; its child stays where it is, reached across MDTs.
    weft_ok(&["migrate", "-m", "0", "-d", s(&mnt.join("src/c"))]);
    assert_eq!((mdt_of(&mnt.join("src/c")), mdt_of(&mnt.join("src/c/fifo"))), (0, 1));
    assert_eq!(tree_state(&other.join("src")), before);

    // While programs use it: readers by path and a writer of new names in the directory
    // moving, which see every byte and no error. Each syscall meets one move at most (the
    // kernel looks a stale path up again once): the directory moves first (-d), then its
    // files, each under programs that use them.
    let copied = "cp src/a/f7 src/a/f8 src/a/f9 src/a/f10 src/a/f11 src/a/f12";
    sh(&mnt, &format!("{copied} {}/", s(local.path())));
    for (round, args) in [(1, vec!["-d"]), (2, vec![])] {
        let users = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "fails=0; for r in $(seq 1 30); do for i in 7 8 9 10 11 12; do \
                 cmp src/a/f$i {ref_}/f$i >&2 || fails=$((fails+1)); done; \
                 echo $r > src/a/w{round}_$r || fails=$((fails+1)); done; echo $fails",
                ref_ = s(local.path())
            ))
            .current_dir(&other)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut migrate = vec!["migrate", "-m", "0"];
        migrate.extend(args);
        let dir = mnt.join("src/a");
        migrate.push(s(&dir));
        weft_ok(&migrate);
        let out = users.wait_with_output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "0\n", "round {round}: programs met errors:\n{said}");
    }
    assert_eq!(mdt_of(&mnt.join("src/a")), 0);
    assert_eq!(mdt_of(&mnt.join("src/a/f9")), 0);

    // The moved tree is used as any other; nothing is left without a name on either MDT.
    sh(&mnt, "echo new > src/a/new && mv src/a/f6 src/c/ && rm -r src/a/b && cat src/c/f6 > /dev/null");
    check_whole(&mnt);

    // Wrong input.
    let err = failure_stderr(&weft(&["migrate", "-m", "7", s(&mnt.join("src"))]));
    assert!(err.contains("MDT index 7 is not in the file system"), "{err}");
    let err = failure_stderr(&weft(&["migrate", "-m", "1", "-c", "2", s(&mnt.join("src"))]));
    assert!(err.contains("-m/--mdt-index") && err.contains("-c"), "{err}");
    let as_user = sh_as(1000, 1000, &mnt, &format!("{} migrate -m 0 src/a/f9", s(&weft_bin())));
    let err = failure_stderr(&as_user);
    assert!(err.contains("only root migrates inodes between MDTs"), "{err}");
}

/// What a tree is to its users: each name's type, mode, size, mtime and link target, and
/// each file's bytes.
fn tree_state(dir: &Path) -> String {
    sh(
        dir,
        "find . -printf '%y %m %s %T@ %p %l\\n' | LC_ALL=C sort && find . -type f -exec md5sum {} + | LC_ALL=C sort -k2",
    )
}

/// Every name leads to an inode whose link count is the names found; no inode is on an MDT
/// without a name (each MDT's inode count is what the tree holds there, plus its root or
/// nothing).
fn check_whole(mnt: &Path) {
    let out = sh(mnt, "find . -mindepth 1 -printf '%y %i %n %p\\n'");
    let mut names: std::collections::HashMap<String, (u64, Vec<String>)> = Default::default();
    let mut per_mdt = [0u64; 2];
    let mut dirs = 0;
    for line in out.lines() {
        let mut w = line.splitn(4, ' ');
        let (kind, ino, nlink, path) = (w.next().unwrap(), w.next().unwrap(), w.next().unwrap(), w.next().unwrap());
        let mdt = (ino.parse::<u64>().unwrap() >> 32) / weft_proto::fid::SEQ_PER_MDT;
        let e = names.entry(ino.to_string()).or_insert((nlink.parse().unwrap(), Vec::new()));
        if e.1.is_empty() {
            per_mdt[mdt as usize] += 1;
        }
        e.1.push(path.to_string());
        if kind == "d" {
            dirs += 1;
        }
    }
    for (ino, (nlink, paths)) in &names {
        let is_dir = out.lines().any(|l| l.starts_with("d ") && l.split(' ').nth(1) == Some(ino.as_str()));
        if !is_dir {
            assert_eq!(*nlink as usize, paths.len(), "inode {ino} has link count {nlink} but names {paths:?}");
        }
    }
    let df = weft_ok(&["df", "-i", s(mnt)]);
    let used = |name: &str| -> u64 {
        let line = df.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    // MDT0 also holds the root.
    assert_eq!(used("weft-MDT0000_UUID"), per_mdt[0] + 1, "MDT0 has inodes without names ({dirs} dirs):\n{df}\n{out}");
    assert_eq!(used("weft-MDT0001_UUID"), per_mdt[1], "MDT1 has inodes without names:\n{df}\n{out}");
}
