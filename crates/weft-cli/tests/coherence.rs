//! Many clients, one truth: two (or three) `weft mount` processes on one file system act as
//! separate clients with separate caches, and what one does the others see at once.

mod common;

use common::*;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn two_mounts(osts: u32) -> (Cluster, std::path::PathBuf, std::path::PathBuf) {
    let mut c = Cluster::single_node(&weft_bin(), osts);
    let a = c.mount();
    let b = c.mount();
    (c, a, b)
}

fn read_all(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

/// Fails with where `got` first differs from `want` and what it holds there, so that a
/// failure says which stale bytes were read (whose, and how many), not only that they were.
#[track_caller]
fn assert_bytes(got: &[u8], want: &[u8], what: &str) {
    if got == want {
        return;
    }
    let at = got.iter().zip(want).position(|(g, w)| g != w).unwrap_or(got.len().min(want.len()));
    let differing = got.iter().zip(want).skip(at).filter(|(g, w)| g != w).count();
    let show = |b: &[u8]| String::from_utf8_lossy(&b[at.min(b.len())..(at + 16).min(b.len())]).into_owned();
    panic!(
        "{what}: {} bytes read, {} wanted; first difference at {at}, {differing} bytes differ; \
         read {:?}, wanted {:?}",
        got.len(),
        want.len(),
        show(got),
        show(want)
    );
}

#[test]
fn a_close_on_one_mount_is_read_fresh_on_the_other_even_from_its_cache() {
    let (_c, a, b) = two_mounts(2);
    let old = pattern(1, 0, 3 << 20);
    std::fs::write(a.join("f"), &old).unwrap();
    // B reads the old bytes (and keeps them in its page cache), twice.
    assert_eq!(read_all(&b.join("f")), old);
    assert_eq!(read_all(&b.join("f")), old);
    // A rewrites the middle and grows the file, then closes.
    let new_mid = pattern(2, 1 << 20, 100_000);
    let tail = pattern(3, 3 << 20, 5000);
    {
        let f = std::fs::OpenOptions::new().write(true).open(a.join("f")).unwrap();
        f.write_all_at(&new_mid, 1 << 20).unwrap();
        f.write_all_at(&tail, 3 << 20).unwrap();
    }
    let mut want = old.clone();
    want[1 << 20..(1 << 20) + new_mid.len()].copy_from_slice(&new_mid);
    want.extend_from_slice(&tail);
    // At once, no sleep: B sees the new size and the new bytes.
    assert_eq!(std::fs::metadata(b.join("f")).unwrap().len(), want.len() as u64);
    assert_bytes(&read_all(&b.join("f")), &want, "B read stale bytes after A's close");
    // And the other way round, on an open descriptor B had before.
    let mut fb = std::fs::File::open(b.join("f")).unwrap();
    let mut first = vec![0u8; 4096];
    fb.read_exact(&mut first).unwrap();
    std::fs::OpenOptions::new().write(true).open(a.join("f")).unwrap().write_all_at(&[7u8; 4096], 0).unwrap();
    fb.seek(SeekFrom::Start(0)).unwrap();
    fb.read_exact(&mut first).unwrap();
    assert_eq!(first, vec![7u8; 4096], "an open descriptor on B read stale bytes");
}

#[test]
fn stat_of_a_file_being_written_elsewhere_shows_its_size() {
    let (_c, a, b) = two_mounts(2);
    let mut f = std::fs::File::create(a.join("growing")).unwrap();
    let chunk = pattern(4, 0, 1 << 20);
    for i in 1..=5u64 {
        f.write_all(&chunk).unwrap();
        // The writer has not closed or synced: B's stat still sees every byte written.
        assert_eq!(std::fs::metadata(b.join("growing")).unwrap().len(), i << 20, "after {i} MiB");
    }
}

#[test]
fn a_creator_that_caches_its_new_file_still_sees_what_others_write_to_it() {
    let (_c, a, b) = two_mounts(2);
    // A creates empty files (its kernel keeps the new file's attributes: size 0, exact).
    let kept_open = std::fs::File::create(a.join("open")).unwrap();
    drop(std::fs::File::create(a.join("closed")).unwrap());
    assert_eq!(std::fs::metadata(a.join("open")).unwrap().len(), 0);
    assert_eq!(std::fs::metadata(a.join("closed")).unwrap().len(), 0);
    // B writes into both, one left open, one closed.
    let mut on_b = std::fs::OpenOptions::new().write(true).open(b.join("open")).unwrap();
    on_b.write_all(&[1u8; 70_000]).unwrap();
    std::fs::OpenOptions::new().write(true).open(b.join("closed")).unwrap().write_all(&[2u8; 5000]).unwrap();
    // A sees both sizes at once, and the bytes.
    assert_eq!(std::fs::metadata(a.join("open")).unwrap().len(), 70_000, "B's writer is still open");
    assert_eq!(std::fs::metadata(a.join("closed")).unwrap().len(), 5000);
    assert_eq!(read_all(&a.join("closed")), vec![2u8; 5000]);
    drop(on_b);
    assert_eq!(read_all(&a.join("open")), vec![1u8; 70_000]);
    drop(kept_open);
}

#[test]
fn names_and_attributes_changed_on_one_mount_are_seen_on_the_other() {
    let (_c, a, b) = two_mounts(1);
    std::fs::create_dir(a.join("d")).unwrap();
    std::fs::write(a.join("d/x"), b"hello").unwrap();
    // B caches the name and the attributes.
    assert_eq!(std::fs::read(b.join("d/x")).unwrap(), b"hello");
    assert_eq!(std::fs::metadata(b.join("d/x")).unwrap().permissions().mode() & 0o777, 0o644);

    std::fs::set_permissions(a.join("d/x"), std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(std::fs::metadata(b.join("d/x")).unwrap().permissions().mode() & 0o777, 0o600, "chmod");

    std::fs::rename(a.join("d/x"), a.join("d/y")).unwrap();
    assert!(!b.join("d/x").exists(), "renamed away on A, still there on B");
    assert_eq!(std::fs::read(b.join("d/y")).unwrap(), b"hello", "rename");

    std::fs::OpenOptions::new().write(true).open(a.join("d/y")).unwrap().set_len(2).unwrap();
    assert_eq!(std::fs::metadata(b.join("d/y")).unwrap().len(), 2, "truncate");
    assert_eq!(std::fs::read(b.join("d/y")).unwrap(), b"he");

    std::fs::remove_file(a.join("d/y")).unwrap();
    assert!(!b.join("d/y").exists(), "unlink");
    // A name made on B is seen on A, also after A looked it up missing.
    assert!(!a.join("d/z").exists());
    std::fs::write(b.join("d/z"), b"z").unwrap();
    assert_eq!(std::fs::read(a.join("d/z")).unwrap(), b"z", "create on B");
    let mut names: Vec<String> =
        std::fs::read_dir(a.join("d")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["z"]);
}

/// Makes the kernel forget every dentry and inode it caches (as IO-500 does between
/// phases), so that the next stat reaches the mount, which answers from the client's inode
/// cache while its locks hold.
fn forget_kernel_names() {
    std::fs::write("/proc/sys/vm/drop_caches", "2").expect("dropping the kernel's dentries needs root");
}

fn mode_of(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap_or_else(|e| panic!("stat {}: {e}", p.display())).permissions().mode() & 0o777
}

/// What the client library caches below the kernel (names and attributes under its locks)
/// stays true: another mount's chmod, rename, unlink, write and create show on B once its
/// kernel asks again, and so do B's own changes, which call back no lock of B's.
#[test]
fn names_and_attributes_the_kernel_forgot_are_still_answered_true() {
    let (_c, a, b) = two_mounts(1);
    std::fs::create_dir(a.join("d")).unwrap();
    for n in ["f", "g", "h", "k"] {
        std::fs::write(a.join("d").join(n), b"12345").unwrap();
    }
    // B learns them (its client caches them under the locks that came along), twice: the
    // second time from the client's cache, its kernel having forgotten them.
    for _ in 0..2 {
        for n in ["f", "g", "h", "k"] {
            assert_eq!(std::fs::metadata(b.join("d").join(n)).unwrap().len(), 5);
        }
        forget_kernel_names();
    }
    let d_before = std::fs::metadata(b.join("d")).unwrap();

    std::fs::set_permissions(a.join("d/f"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::rename(a.join("d/g"), a.join("d/g2")).unwrap();
    std::fs::remove_file(a.join("d/h")).unwrap();
    std::fs::write(a.join("d/k"), b"longer than before").unwrap();
    std::fs::write(a.join("d/new"), b"n").unwrap();
    forget_kernel_names();
    assert_eq!(mode_of(&b.join("d/f")), 0o600, "chmod on A");
    assert!(!b.join("d/g").exists() && b.join("d/g2").exists(), "rename on A");
    assert!(!b.join("d/h").exists(), "unlink on A");
    assert_eq!(std::fs::metadata(b.join("d/k")).unwrap().len(), 18, "rewrite on A");
    assert_eq!(std::fs::read(b.join("d/new")).unwrap(), b"n", "create on A");
    let d_after = std::fs::metadata(b.join("d")).unwrap();
    assert!(d_after.modified().unwrap() >= d_before.modified().unwrap());

    // B's own changes: its locks are not called back for them, its cache must follow.
    for n in ["f", "g2", "k"] {
        std::fs::metadata(b.join("d").join(n)).unwrap();
    }
    forget_kernel_names();
    std::fs::set_permissions(b.join("d/f"), std::fs::Permissions::from_mode(0o640)).unwrap();
    std::fs::remove_file(b.join("d/g2")).unwrap();
    std::fs::write(b.join("d/k"), b"x").unwrap();
    forget_kernel_names();
    assert_eq!(mode_of(&b.join("d/f")), 0o640, "chmod on B");
    assert!(!b.join("d/g2").exists(), "unlink on B");
    assert_eq!(std::fs::metadata(b.join("d/k")).unwrap().len(), 1, "rewrite on B");
    forget_kernel_names();
    assert_eq!(mode_of(&a.join("d/f")), 0o640);
    assert_eq!(std::fs::metadata(a.join("d/k")).unwrap().len(), 1);
    let mut names: Vec<String> =
        std::fs::read_dir(b.join("d")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["f", "k", "new"]);
}

/// The client lists a directory its mount made (every name in it known, so the lookup the
/// kernel makes before each create needs no request): a name another mount makes or
/// removes there still shows on B, and so do B's own.
#[test]
fn names_made_elsewhere_in_a_directory_this_mount_made_are_found() {
    let (_c, a, b) = two_mounts(1);
    std::fs::create_dir(b.join("d")).unwrap();
    std::fs::write(b.join("d/mine"), b"m").unwrap();
    assert!(!b.join("d/theirs").exists());
    std::fs::write(a.join("d/theirs"), b"t").unwrap();
    assert_eq!(std::fs::read(b.join("d/theirs")).unwrap(), b"t", "made on A");
    std::fs::create_dir(b.join("e")).unwrap();
    std::fs::write(a.join("e/late"), b"l").unwrap();
    forget_kernel_names();
    assert_eq!(std::fs::read(b.join("e/late")).unwrap(), b"l", "made on A, B's kernel having forgotten");
    std::fs::remove_file(a.join("d/mine")).unwrap();
    forget_kernel_names();
    assert!(!b.join("d/mine").exists(), "removed on A");
    std::fs::remove_file(b.join("d/theirs")).unwrap();
    assert!(!b.join("d/theirs").exists(), "removed on B");
    std::fs::write(b.join("d/theirs"), b"again").unwrap();
    forget_kernel_names();
    assert_eq!(std::fs::read(b.join("d/theirs")).unwrap(), b"again", "made again on B");
    assert_eq!(std::fs::read(a.join("d/theirs")).unwrap(), b"again");
}

/// A read-only open knows the file's size and reads past it without asking the objects
/// while that size holds: another mount appending, or this mount writing through another
/// descriptor, makes the next read past it find the new bytes.
#[test]
fn a_read_past_the_size_at_open_finds_what_was_appended_since() {
    let (_c, a, b) = two_mounts(1);
    std::fs::write(a.join("f"), b"12345").unwrap();
    // O_DIRECT: every read reaches the mount (no page of B's kernel answers it).
    let mut reader = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(b.join("f")).unwrap();
    let mut got = Vec::new();
    reader.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"12345");
    let mut writer = std::fs::OpenOptions::new().append(true).open(b.join("f")).unwrap();
    writer.write_all(b"678").unwrap();
    drop(writer);
    got.clear();
    reader.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"678", "appended on B through another descriptor");
    std::fs::OpenOptions::new().append(true).open(a.join("f")).unwrap().write_all(b"9").unwrap();
    got.clear();
    reader.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"9", "appended on A");
}

/// A write-only descriptor writes around the kernel's page cache (FOPEN_DIRECT_IO, see
/// `fopen_flags`): the pages a reader of the same mount holds, read or mapped, must not
/// outlive what it writes over them or past them.
#[test]
fn a_write_only_open_leaves_no_stale_page_to_readers() {
    use std::os::fd::AsRawFd;
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let m = c.mount();
    let path = m.join("f");
    let mut want = vec![b'a'; 3 * 4096 + 100];
    std::fs::write(&path, &want).unwrap();
    let reader = std::fs::File::open(&path).unwrap();
    assert_bytes(&read_all(&path), &want, "first read, which caches every page");
    let len = want.len();
    // SAFETY: a read-only shared mapping of a file this test owns, unmapped below.
    let map =
        unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, reader.as_raw_fd(), 0) };
    assert_ne!(map, libc::MAP_FAILED);
    // SAFETY: `map` is `len` readable bytes until the munmap below.
    let mapped = || unsafe { std::slice::from_raw_parts(map as *const u8, len) }.to_vec();
    assert_bytes(&mapped(), &want, "mapped before the writes");

    let writer = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    writer.write_all_at(b"BBBB", 10).unwrap();
    writer.write_all_at(b"CCCC", 4096 * 2 + 50).unwrap();
    want[10..14].copy_from_slice(b"BBBB");
    want[4096 * 2 + 50..4096 * 2 + 54].copy_from_slice(b"CCCC");
    let mut page = vec![0u8; want.len()];
    reader.read_exact_at(&mut page, 0).unwrap();
    assert_bytes(&page, &want, "read through the open reader after overwrites");
    assert_bytes(&mapped(), &want, "the reader's mapping after overwrites");

    writer.write_all_at(b"tail", len as u64).unwrap();
    want.extend_from_slice(b"tail");
    let mut all = Vec::new();
    (&reader).read_to_end(&mut all).unwrap();
    assert_bytes(&all, &want, "read through the open reader after an append (its last page was partial)");
    // SAFETY: mapped above with this length.
    unsafe { libc::munmap(map, len) };
    drop(writer);
    assert_bytes(&read_all(&path), &want, "a new open after the writer closed");
}

/// IO-500's hard pattern from two clients: interleaved 47,008-byte records in one file.
#[test]
fn two_clients_writing_interleaved_records_leave_exactly_their_bytes() {
    const RECORD: u64 = 47_008;
    const PER_CLIENT: u64 = 64;
    let (_c, a, b) = two_mounts(4);
    std::fs::write(a.join("shared"), b"").unwrap();
    let writer = |mnt: std::path::PathBuf, rank: u64| {
        std::thread::spawn(move || {
            let f = std::fs::OpenOptions::new().write(true).open(mnt.join("shared")).unwrap();
            for i in 0..PER_CLIENT {
                let offset = (i * 2 + rank) * RECORD;
                f.write_all_at(&pattern(rank + 10, offset, RECORD as usize), offset).unwrap();
            }
            f.sync_all().unwrap();
        })
    };
    let (ta, tb) = (writer(a.clone(), 0), writer(b.clone(), 1));
    ta.join().unwrap();
    tb.join().unwrap();
    for mnt in [&a, &b] {
        let got = read_all(&mnt.join("shared"));
        assert_eq!(got.len() as u64, 2 * PER_CLIENT * RECORD);
        for r in 0..2 * PER_CLIENT {
            let offset = r * RECORD;
            let want = pattern(r % 2 + 10, offset, RECORD as usize);
            assert!(
                got[offset as usize..(offset + RECORD) as usize] == want[..],
                "record {r} read on {} holds other bytes",
                mnt.display()
            );
        }
    }
}

/// IO-500's hard pattern by two writers of one mount that do not keep step, over two
/// stripes: the write-behind sends records that do not continue each other as extents of
/// one request per object (`Client::write_many`). Once a writer closed (no fsync), the other
/// mount reads every byte it wrote, and zeros in the records not written yet.
#[test]
fn records_far_apart_in_one_request_are_read_exactly_on_the_other_mount() {
    const RECORD: u64 = 47_008;
    const PER_WRITER: u64 = 96;
    let (_c, a, b) = two_mounts(4);
    let path = a.join("shared");
    weft_ok(&["setstripe", "-c", "2", "-S", "64K", path.to_str().unwrap()]);
    // Rank `rank`'s records with `seed`, in the order `order` gives their indices.
    let write_rank = |rank: u64, seed: u64, order: Vec<u64>| {
        let path = path.clone();
        std::thread::spawn(move || {
            let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
            for i in order {
                let offset = (i * 2 + rank) * RECORD;
                f.write_all_at(&pattern(seed, offset, RECORD as usize), offset).unwrap();
            }
        })
    };
    let check = |seeds: [Option<u64>; 2], len: u64, what: &str| {
        let got = read_all(&b.join("shared"));
        let mut want = vec![0u8; len as usize];
        for r in 0..len / RECORD {
            if let Some(seed) = seeds[(r % 2) as usize] {
                let at = (r * RECORD) as usize;
                want[at..at + RECORD as usize].copy_from_slice(&pattern(seed, r * RECORD, RECORD as usize));
            }
        }
        assert_bytes(&got, &want, what);
    };
    // One writer alone: none of its records continues another.
    write_rank(0, 20, (0..PER_WRITER).collect()).join().unwrap();
    check([Some(20), None], (2 * PER_WRITER - 1) * RECORD, "rank 0's records and the gaps between them");
    // Two at once, one going up while the other comes down.
    let up = write_rank(0, 30, (0..PER_WRITER).collect());
    let down = write_rank(1, 21, (0..PER_WRITER).rev().collect());
    up.join().unwrap();
    down.join().unwrap();
    check([Some(30), Some(21)], 2 * PER_WRITER * RECORD, "both ranks' records");
}

#[test]
fn sqlite_used_from_both_mounts_at_once_keeps_every_row() {
    let (_c, a, b) = two_mounts(2);
    sh(&a, "sqlite3 db 'create table t(id integer primary key, who text, n integer);'");
    let inserter = |mnt: std::path::PathBuf, who: &'static str| {
        std::thread::spawn(move || {
            let script = format!(
                ".timeout 60000\n{}",
                (0..150).map(|i| format!("insert into t(who, n) values ('{who}', {i});\n")).collect::<String>()
            );
            let mut child = Command::new("sqlite3")
                .arg("db")
                .current_dir(&mnt)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "sqlite3 on {who}: {}", String::from_utf8_lossy(&out.stderr));
        })
    };
    let (ta, tb) = (inserter(a.clone(), "a"), inserter(b.clone(), "b"));
    ta.join().unwrap();
    tb.join().unwrap();
    for mnt in [&a, &b] {
        assert_eq!(
            sh(mnt, "sqlite3 db \"select who, count(*), sum(n) from t group by who order by who;\"").trim(),
            "a|150|11175\nb|150|11175"
        );
        assert_eq!(sh(mnt, "sqlite3 db 'pragma integrity_check;'").trim(), "ok");
    }
}

/// A python3 one-liner on a mount: fcntl and flock are easiest to drive from there.
fn py(dir: &Path, code: &str) -> std::process::Child {
    Command::new("python3")
        .arg("-c")
        .arg(code)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3")
}

/// `code` on a mount, which prints "held" once it holds what it takes; returns then.
fn py_holding(dir: &Path, code: &str) -> std::process::Child {
    let mut child = py(dir, code);
    let mut line = [0u8; 5];
    child.stdout.as_mut().unwrap().read_exact(&mut line).unwrap();
    assert_eq!(&line, b"held\n");
    child
}

/// Runs `code` on mount `doomed` until it holds its locks, then kill -9 of that mount's
/// client process (and of the program, whose closes can no longer reach any server).
fn hold_then_die(c: &mut Cluster, doomed: &Path, code: &str) {
    let mut holder = py_holding(doomed, code);
    c.kill9_mount(doomed);
    let _ = holder.kill();
    let _ = holder.wait();
}

fn py_out(dir: &Path, code: &str) -> String {
    let out = py(dir, code).wait_with_output().unwrap();
    assert!(out.status.success(), "python3 failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn fcntl_and_flock_locks_hold_across_mounts_and_end_with_their_holder() {
    let (_c, a, b) = two_mounts(1);
    std::fs::write(a.join("lockfile"), b"x").unwrap();
    // A holds a write lock on bytes 10..19 and waits for a line on stdin.
    let mut holder = py_holding(
        &a,
        "import fcntl,os,sys\nf=open('lockfile','r+')\nfcntl.lockf(f, fcntl.LOCK_EX|fcntl.LOCK_NB, 10, 10)\nprint('held', flush=True)\nsys.stdin.readline()",
    );
    let try_lock = "import fcntl,errno\nf=open('lockfile','r+')\ntry:\n  fcntl.lockf(f, fcntl.LOCK_EX|fcntl.LOCK_NB, 5, 10)\n  print('got')\nexcept OSError as e:\n  print(errno.errorcode[e.errno])";
    assert!(matches!(py_out(&b, try_lock).as_str(), "EAGAIN" | "EACCES"), "B locked a range A holds");
    // A range next to it is free.
    assert_eq!(
        py_out(
            &b,
            "import fcntl\nf=open('lockfile','r+')\nfcntl.lockf(f, fcntl.LOCK_EX|fcntl.LOCK_NB, 5, 20)\nprint('got')"
        ),
        "got"
    );
    // F_GETLK on B names A's lock.
    let getlk = "import fcntl,struct\nf=open('lockfile','r+')\nr=fcntl.fcntl(f, fcntl.F_GETLK, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 100, 0))\nt,w,s,l,p=struct.unpack('hhqqi', r)\nprint(t==fcntl.F_WRLCK, s, l)";
    assert_eq!(py_out(&b, getlk), "True 10 10");
    // A blocking lock on B waits until A's process ends (its close releases the lock).
    let started = Instant::now();
    let mut waiter =
        py(&b, "import fcntl\nf=open('lockfile','r+')\nfcntl.lockf(f, fcntl.LOCK_EX, 0, 0)\nprint('got', flush=True)");
    std::thread::sleep(Duration::from_millis(500));
    assert!(waiter.try_wait().unwrap().is_none(), "F_SETLKW on B did not wait for A");
    holder.stdin.take().unwrap().write_all(b"\n").unwrap();
    assert!(holder.wait().unwrap().success());
    let out = waiter.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "got");
    assert!(started.elapsed() < Duration::from_secs(20));

    // flock: exclusive on A keeps B out until A closes.
    let mut holder = py_holding(
        &a,
        "import fcntl,sys\nf=open('lockfile')\nfcntl.flock(f, fcntl.LOCK_EX)\nprint('held', flush=True)\nsys.stdin.readline()",
    );
    let try_flock = "import fcntl,errno\nf=open('lockfile')\ntry:\n  fcntl.flock(f, fcntl.LOCK_SH|fcntl.LOCK_NB)\n  print('got')\nexcept OSError as e:\n  print(errno.errorcode[e.errno])";
    assert_eq!(py_out(&b, try_flock), "EAGAIN", "B took a shared flock while A holds it exclusive");
    holder.stdin.take().unwrap().write_all(b"\n").unwrap();
    assert!(holder.wait().unwrap().success());
    assert_eq!(py_out(&b, try_flock), "got");
}

#[test]
fn a_client_killed_holding_locks_is_evicted_and_its_queued_writes_never_land() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let a = c.mount();
    let doomed = c.mount();
    std::fs::write(a.join("f"), pattern(5, 0, 2 << 20)).unwrap();
    // The doomed client writes (taking write locks) and holds an advisory lock; then it dies.
    hold_then_die(
        &mut c,
        &doomed,
        "import fcntl,sys\nf=open('f','r+b')\nf.write(b'D'*(1<<20))\nf.flush()\nfcntl.lockf(f, fcntl.LOCK_EX, 0, 0)\nprint('held', flush=True)\nsys.stdin.readline()",
    );

    // A writes over the same bytes: it waits for the dead client's locks at most about the
    // eviction timeout, then its bytes stand.
    let started = Instant::now();
    let newer = pattern(6, 0, 2 << 20);
    {
        let mut f = std::fs::OpenOptions::new().write(true).open(a.join("f")).unwrap();
        f.write_all(&newer).unwrap();
        f.sync_all().unwrap();
    }
    let waited = started.elapsed();
    let limit = Duration::from_millis(weft_harness::LOCK_TIMEOUT_MS) + Duration::from_secs(5);
    assert!(waited < limit, "A waited {waited:?} for a dead client's locks (limit {limit:?})");
    std::thread::sleep(Duration::from_millis(500));
    assert_bytes(&read_all(&a.join("f")), &newer, "the dead client's bytes landed over newer data");
    // Its advisory lock went with it.
    assert_eq!(
        py_out(&a, "import fcntl\nf=open('f','r+')\nfcntl.lockf(f, fcntl.LOCK_EX|fcntl.LOCK_NB, 0, 0)\nprint('got')"),
        "got"
    );
}

/// A client that stops answering (SIGSTOP) is evicted when another needs its locks; when it
/// runs again it learns it: the file it had open gives EIO, its cached bytes are gone, and a
/// new open works with the other client's data.
#[test]
fn an_evicted_client_learns_it_and_comes_back() {
    let (c, a, b) = two_mounts(1);
    std::fs::write(a.join("f"), pattern(7, 0, 1 << 20)).unwrap();
    let mut held = std::fs::OpenOptions::new().read(true).write(true).open(b.join("f")).unwrap();
    let mut buf = vec![0u8; 4096];
    held.read_exact(&mut buf).unwrap();
    held.write_all_at(b"from b", 0).unwrap();
    let pid = c.mount_pid(&b) as i32;
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let started = Instant::now();
    let newer = pattern(8, 0, 1 << 20);
    std::fs::write(a.join("f"), &newer).unwrap();
    let waited = started.elapsed();
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert!(
        waited < Duration::from_millis(weft_harness::LOCK_TIMEOUT_MS) + Duration::from_secs(5),
        "A waited {waited:?}"
    );
    // B learns of its eviction from the management service (the server told it, and B's map
    // watch is answered so) without asking anything; then its next operation on the old
    // descriptor fails, and keeps failing.
    std::thread::sleep(Duration::from_millis(2_500));
    held.seek(SeekFrom::Start(0)).unwrap();
    let first = held.read(&mut buf).map(|_| ());
    let second = held.write_all_at(b"stale", 0);
    assert_eq!(errno_of(first), libc::EIO, "read on a descriptor opened before the eviction");
    assert_eq!(errno_of(second), libc::EIO, "write on a descriptor opened before the eviction");
    drop(held);
    // A new open on B works and sees A's bytes, not B's stale ones.
    assert_bytes(&read_all(&b.join("f")), &newer, "B read stale data after its eviction");
    std::fs::write(b.join("g"), b"after").unwrap();
    assert_eq!(std::fs::read(a.join("g")).unwrap(), b"after");
}

/// A server that restarts has forgotten the locks it granted: a client that cached under
/// them notices the reconnect and drops those caches before the server grants anyone a
/// conflicting lock (its recovery window), so a change made after the restart is seen.
#[test]
fn caches_do_not_outlive_a_server_restart() {
    let (mut c, a, b) = two_mounts(2);
    let old = pattern(9, 0, 1 << 20);
    std::fs::write(a.join("f"), &old).unwrap();
    assert!(read_all(&b.join("f")) == old);
    assert_eq!(std::fs::metadata(b.join("f")).unwrap().permissions().mode() & 0o777, 0o644);
    c.kill9("all");
    c.restart("all");
    let newer = pattern(10, 0, 1 << 20);
    std::fs::write(a.join("f"), &newer).unwrap();
    std::fs::set_permissions(a.join("f"), std::fs::Permissions::from_mode(0o640)).unwrap();
    assert_bytes(&read_all(&b.join("f")), &newer, "B read what it cached before the restart");
    assert_eq!(std::fs::metadata(b.join("f")).unwrap().permissions().mode() & 0o777, 0o640);
}

/// A client that dies holding only an advisory lock (nothing anyone calls back) is checked
/// on by the server when others wait for the lock, and evicted: the waiter gets the lock
/// within about the eviction timeout.
#[test]
fn an_advisory_lock_of_a_dead_client_is_freed() {
    let mut c = Cluster::single_node(&weft_bin(), 1);
    let a = c.mount();
    let doomed = c.mount();
    std::fs::write(a.join("lockfile"), b"x").unwrap();
    hold_then_die(
        &mut c,
        &doomed,
        "import fcntl,sys\nf=open('lockfile','r+')\nfcntl.lockf(f, fcntl.LOCK_EX, 0, 0)\nprint('held', flush=True)\nsys.stdin.readline()",
    );
    let started = Instant::now();
    // Bounded by an alarm, so that a lock that is never freed fails the test instead of
    // hanging it.
    let waiter = "import fcntl,signal\nsignal.alarm(20)\nf=open('lockfile','r+')\nfcntl.lockf(f, fcntl.LOCK_EX, 0, 0)\nprint('got')";
    assert_eq!(py_out(&a, waiter), "got");
    let waited = started.elapsed();
    let limit = Duration::from_millis(weft_harness::LOCK_TIMEOUT_MS) + Duration::from_secs(5);
    assert!(waited < limit, "waited {waited:?} for a dead client's advisory lock (limit {limit:?})");
}
