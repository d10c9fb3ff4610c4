//! POSIX behaviour of a mount, as ordinary programs see it.

mod common;
use common::*;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};

#[test]
fn files_directories_links_and_rename_rules() {
    let mut c = Cluster::single_node(&weft_bin(), 4);
    let m = c.mount();

    // Write, read back, stat.
    let data = pattern(1, 0, 3 << 20);
    fs::write(m.join("f"), &data).unwrap();
    assert_eq!(fs::read(m.join("f")).unwrap(), data);
    assert_eq!(fs::metadata(m.join("f")).unwrap().len(), data.len() as u64);

    // Directories and the rename rules.
    fs::create_dir_all(m.join("a/b/c")).unwrap();
    fs::create_dir_all(m.join("full/x")).unwrap();
    fs::create_dir(m.join("empty")).unwrap();
    fs::write(m.join("file2"), b"two").unwrap();
    assert_eq!(errno_of(fs::rename(m.join("a"), m.join("full"))), libc::ENOTEMPTY, "dir over non-empty dir");
    assert_eq!(errno_of(fs::rename(m.join("file2"), m.join("empty"))), libc::EISDIR, "file over dir");
    assert_eq!(errno_of(fs::rename(m.join("a"), m.join("file2"))), libc::ENOTDIR, "dir over file");
    assert_eq!(errno_of(fs::rename(m.join("a"), m.join("a/b/inside"))), libc::EINVAL, "dir into itself");
    fs::rename(m.join("a"), m.join("empty")).unwrap();
    assert!(m.join("empty/b/c").is_dir(), "dir over empty dir moves the tree");
    assert!(!m.join("a").exists());
    fs::rename(m.join("file2"), m.join("f")).unwrap();
    assert_eq!(fs::read(m.join("f")).unwrap(), b"two", "file over file replaces it");
    fs::rename(m.join("empty/b"), m.join("full/x/b")).unwrap();
    assert!(m.join("full/x/b/c").is_dir(), "dir moved across directories");
    assert_eq!(errno_of(fs::remove_dir(m.join("full"))), libc::ENOTEMPTY);
    assert_eq!(errno_of(fs::remove_dir(m.join("f"))), libc::ENOTDIR);
    assert_eq!(errno_of(fs::remove_file(m.join("full"))), libc::EISDIR);
    assert_eq!(fs::metadata(m.join("full/x")).unwrap().nlink(), 3, "a dir with one subdir has 3 links");

    // Hard links, symlinks, fifos.
    fs::write(m.join("orig"), b"linked").unwrap();
    fs::hard_link(m.join("orig"), m.join("alias")).unwrap();
    assert_eq!(fs::metadata(m.join("orig")).unwrap().nlink(), 2);
    assert_eq!(fs::metadata(m.join("orig")).unwrap().ino(), fs::metadata(m.join("alias")).unwrap().ino());
    fs::remove_file(m.join("orig")).unwrap();
    assert_eq!(fs::read(m.join("alias")).unwrap(), b"linked");
    std::os::unix::fs::symlink("alias", m.join("sym")).unwrap();
    assert_eq!(fs::read_link(m.join("sym")).unwrap().to_str(), Some("alias"));
    assert_eq!(fs::read(m.join("sym")).unwrap(), b"linked");
    sh(&m, "mkfifo pipe");
    assert!(fs::symlink_metadata(m.join("pipe")).unwrap().file_type().is_fifo());

    // O_EXCL, O_TRUNC, O_APPEND.
    let excl = OpenOptions::new().write(true).create_new(true).open(m.join("alias"));
    assert_eq!(errno_of(excl), libc::EEXIST);
    fs::write(m.join("t"), b"0123456789").unwrap();
    OpenOptions::new().write(true).truncate(true).open(m.join("t")).unwrap();
    assert_eq!(fs::metadata(m.join("t")).unwrap().len(), 0);
    for part in [&b"ab"[..], b"cd", b"ef"] {
        OpenOptions::new().append(true).open(m.join("t")).unwrap().write_all(part).unwrap();
    }
    assert_eq!(fs::read(m.join("t")).unwrap(), b"abcdef");

    // Sparse files, truncate, fsync.
    {
        let mut f = File::create(m.join("sparse")).unwrap();
        f.seek(SeekFrom::Start(10 << 20)).unwrap();
        f.write_all(b"end").unwrap();
        f.sync_all().unwrap();
    }
    let meta = fs::metadata(m.join("sparse")).unwrap();
    assert_eq!(meta.len(), (10 << 20) + 3);
    assert!(meta.blocks() * 512 < 1 << 20, "a hole takes no space: {} blocks", meta.blocks());
    let mut buf = vec![1u8; 4096];
    let mut f = File::open(m.join("sparse")).unwrap();
    f.seek(SeekFrom::Start(5 << 20)).unwrap();
    f.read_exact(&mut buf).unwrap();
    assert!(buf.iter().all(|b| *b == 0), "holes read as zeros");
    let f = OpenOptions::new().write(true).open(m.join("sparse")).unwrap();
    f.set_len(100).unwrap();
    assert_eq!(fs::metadata(m.join("sparse")).unwrap().len(), 100);
    f.set_len(5 << 20).unwrap();
    drop(f);
    let back = fs::read(m.join("sparse")).unwrap();
    assert_eq!(back.len(), 5 << 20);
    assert!(back.iter().all(|b| *b == 0), "truncate then extend reads zeros");

    // Extended attributes.
    sh(&m, "touch x && setfattr -n user.color -v blue x 2>/dev/null || python3 -c \"import os; os.setxattr('x', 'user.color', b'blue')\"");
    let v = sh(&m, "python3 -c \"import os; print(os.getxattr('x', 'user.color').decode(), os.listxattr('x'))\"");
    assert_eq!(v.trim(), "blue ['user.color']");

    // An unlinked file stays readable and writable through an open descriptor.
    let mut keep = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(m.join("ghost")).unwrap();
    keep.write_all(b"still here").unwrap();
    fs::remove_file(m.join("ghost")).unwrap();
    assert!(!m.join("ghost").exists());
    keep.seek(SeekFrom::Start(0)).unwrap();
    let mut s = String::new();
    keep.read_to_string(&mut s).unwrap();
    assert_eq!(s, "still here");
    drop(keep);

    // Save by rename, as editors do.
    fs::write(m.join("doc.txt"), b"v1").unwrap();
    fs::write(m.join(".doc.txt.swp"), b"v2").unwrap();
    fs::rename(m.join(".doc.txt.swp"), m.join("doc.txt")).unwrap();
    assert_eq!(fs::read(m.join("doc.txt")).unwrap(), b"v2");

    // Mode bits are kept.
    fs::set_permissions(m.join("doc.txt"), fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(fs::metadata(m.join("doc.txt")).unwrap().permissions().mode() & 0o7777, 0o640);
    let mut exe =
        OpenOptions::new().write(true).create(true).truncate(true).mode(0o755).open(m.join("run.sh")).unwrap();
    exe.write_all(b"#!/bin/sh\necho ran\n").unwrap();
    drop(exe);
    assert_eq!(sh(&m, "./run.sh").trim(), "ran");
}

#[test]
fn permissions_are_enforced_for_non_root_users() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let m = c.mount();
    sh(&m, "mkdir shared private && chmod 1777 shared && chmod 700 private && echo secret > mine && chmod 600 mine");

    let deny = |uid: u32, script: &str, expect: &str| {
        let out = sh_as(uid, uid, &m, script);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(expect),
            "uid {uid}: {script:?} should fail with {expect}: {err}"
        );
    };
    deny(1000, "cat mine", "Permission denied");
    deny(1000, "touch private/x", "Permission denied");
    deny(1000, "touch newfile", "Permission denied");
    deny(1000, "chmod 777 mine", "Operation not permitted");

    let ok = |uid: u32, script: &str| {
        let out = sh_as(uid, uid, &m, script);
        assert!(out.status.success(), "uid {uid}: {script:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    ok(1000, "echo a > shared/by1000 && cat shared/by1000 && chmod 600 shared/by1000");
    deny(1001, "cat shared/by1000", "Permission denied");
    deny(1001, "rm -f shared/by1000", "Operation not permitted");
    deny(1001, "mv shared/by1000 shared/stolen", "Operation not permitted");
    ok(1001, "echo b > shared/by1001 && rm shared/by1001");
    ok(1000, "rm shared/by1000");
    let meta = fs::metadata(m.join("shared")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o1777);
    ok(1000, "mkdir shared/d1000 && touch shared/d1000/f");
    let f = fs::metadata(m.join("shared/d1000/f")).unwrap();
    assert_eq!((f.uid(), f.gid()), (1000, 1000), "files belong to their creator");
}

/// Two defects a new user hit. A write by another user to a setuid/setgid file it may write
/// failed with EACCES instead of clearing the bits (the kernel asks the file system to, as a
/// chmod by the writer); and ftruncate on a descriptor its unprivileged creator opened
/// O_CREAT|O_RDWR with mode 0 failed with EACCES, where the permission belongs to the open.
#[test]
fn writes_clear_setuid_and_ftruncate_follows_the_open_as_on_a_local_file_system() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let m = c.mount();
    let setup = "echo '#!/bin/sh' > prog && chown 1000:1000 prog && chmod 6777 prog";
    let write = "echo more >> prog; echo $?; stat -c '%a %U' prog; tail -n1 prog";
    let (local, mounted) = local_and_mounted(&m, 2000, setup, write);
    assert_eq!(mounted, local);
    assert!(local.contains("777 "), "the local file system clears the bits: {local}");

    let ftruncate = "python3 -c \"import os
fd = os.open('mode0', os.O_CREAT | os.O_RDWR, 0)
os.ftruncate(fd, 100)
os.write(fd, b'x')
os.close(fd)
print(os.stat('mode0').st_size, oct(os.stat('mode0').st_mode & 0o777))\"";
    let (local, mounted) = local_and_mounted(&m, 1000, "true", ftruncate);
    assert_eq!(mounted, local);
    assert!(local.contains("100 0o0"), "{local}");
}

/// `script` (Python) run in `dir`; None when it has not ended within `secs` (a process stuck
/// in the kernel on a request the mount never answers: the mount's end frees it).
fn python_within(dir: &std::path::Path, script: &str, secs: u64) -> Option<String> {
    let file = tempfile::Builder::new().prefix("weft-script-").suffix(".py").tempfile().unwrap();
    fs::write(file.path(), script).unwrap();
    let mut child = std::process::Command::new("python3")
        .arg(file.path())
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    Some(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// `script` (Python) run in a local directory and on the mount `m`: the mount must answer
/// as the local file system does, within `secs`. Returns the local output for the test's
/// own checks.
fn python_as_on_local(m: &std::path::Path, script: &str, secs: u64) -> String {
    let local = tempfile::Builder::new().prefix("weft-local-").tempdir().unwrap();
    let expected = python_within(local.path(), script, secs).expect("the local run ends");
    assert_eq!(
        python_within(m, script, secs).as_deref(),
        Some(expected.as_str()),
        "the mount answers as a local file system"
    );
    expected
}

/// OFD locks as a conformance suite (xfstests' t_ofd_locks sequence) drives them: a lock
/// held while a dup, a forked child or a thread closes descriptors, tested from another
/// process, waited for by a process that then gets a signal or SIGKILL, and taken by the
/// next process once the open's last descriptor closes. The mount used to keep an OFD lock
/// after its open was closed (the kernel names no owner at that release), and a waiter for
/// it could then end on no signal, not even SIGKILL (every interrupt was refused).
#[test]
fn ofd_locks_go_with_their_open_and_a_lock_wait_ends_on_a_signal() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let m = c.mount();
    let expected = python_as_on_local(&m, OFD_LOCKS_PY, 60);
    assert!(expected.ends_with("done\n"), "{expected}");
}

const OFD_LOCKS_PY: &str = r#"
import fcntl, os, signal, struct, threading, time

FMT = "hhqqi4x"
def lk(t, start=0, length=10):
    return struct.pack(FMT, t, 0, start, length, 0)
NAMES = {fcntl.F_RDLCK: "rdlck", fcntl.F_WRLCK: "wrlck", fcntl.F_UNLCK: "unlck"}

def in_child(fn):
    pid = os.fork()
    if pid == 0:
        try:
            fn()
            os._exit(0)
        except BaseException as e:
            print("child:", type(e).__name__, e, flush=True)
            os._exit(1)
    return os.waitpid(pid, 0)[1]

def getlk(label):
    fd = os.open("f", os.O_RDWR)
    got = struct.unpack(FMT, fcntl.fcntl(fd, fcntl.F_OFD_GETLK, lk(fcntl.F_WRLCK)))[0]
    print(label, NAMES[got], flush=True)
    os.close(fd)

class Alarm(Exception):
    pass
def on_alarm(sig, frame):
    raise Alarm()
signal.signal(signal.SIGALRM, on_alarm)

def setlkw(label, seconds):
    fd = os.open("f", os.O_RDWR)
    signal.alarm(seconds)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLKW, lk(fcntl.F_WRLCK))
        print(label, "granted", flush=True)
    except Alarm:
        print(label, "interrupted by a signal", flush=True)
    finally:
        signal.alarm(0)
    os.close(fd)

open("f", "w").close()
for case in ("dup", "clone", "clone-files"):
    fd = os.open("f", os.O_RDWR)
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, lk(fcntl.F_WRLCK))
    if case == "dup":
        os.close(os.dup(fd))
    elif case == "clone":
        in_child(lambda: os.close(fd))
    else:
        # A thread shares the descriptor table (clone with CLONE_FILES): its close is the
        # open's last.
        t = threading.Thread(target=os.close, args=(fd,))
        t.start()
        t.join()
        fd = None
    in_child(lambda: getlk(case + ": held, another process sees"))
    if fd is not None:
        in_child(lambda: setlkw(case + ": a waiter", 1))
        pid = os.fork()
        if pid == 0:
            setlkw("never", 1000)
            os._exit(0)
        time.sleep(0.3)
        os.kill(pid, signal.SIGKILL)
        print(case + ": a waiter killed:", os.waitpid(pid, 0)[1] & 0x7F == signal.SIGKILL, flush=True)
        os.close(fd)
    in_child(lambda: setlkw(case + ": after the close, a waiter", 10))
    in_child(lambda: getlk(case + ": after the close, another process sees"))
print("done")
"#;

/// A write far past what the OSTs can hold is refused at the call with EFBIG, as a local
/// file system refuses it, and loses nothing: the mount used to queue it, answer success,
/// and report the OST's "File too large" only at the next fsync or close.
#[test]
fn a_write_past_the_largest_file_is_refused_at_the_call() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let m = c.mount();
    let script = r#"
import errno, os
fd = os.open("big", os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b"kept")
for what, call in [("pwrite", lambda: os.pwrite(fd, b"x" * (1 << 20), 1 << 59)),
                   ("ftruncate", lambda: os.ftruncate(fd, 1 << 59))]:
    try:
        call()
        print(what, "succeeded")
    except OSError as e:
        print(what, errno.errorcode[e.errno])
os.fsync(fd)
os.close(fd)
print("fsync and close succeeded")
print(os.stat("big").st_size, open("big", "rb").read())
"#;
    let expected = python_as_on_local(&m, script, 60);
    assert!(expected.contains("pwrite EFBIG") && expected.ends_with("4 b'kept'\n"), "{expected}");
}

/// What a conformance run found, each answered as a local directory answers it: fstat of an
/// open directory that a rename replaced (ENOENT, where it must succeed with no links); a
/// name longer than 255 bytes in a directory whose names the mount knows (ENOENT from the
/// local answer, where it must be ENAMETOOLONG); and writes, appends and a shared mmap that
/// left mtime and ctime where they were (the MDS never learnt of writes, which go to the
/// OSTs), on the writer's mount and on another one.
#[test]
fn replaced_directories_long_names_and_modification_times_as_on_a_local_file_system() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let m = c.mount();
    let other = c.mount();
    let local = tempfile::Builder::new().prefix("weft-local-").tempdir().unwrap();
    let script = r#"
import errno, mmap, os, sys, time
def outcome(call):
    try:
        r = call()
        return "ok" if r is None else r
    except OSError as e:
        return errno.errorcode[e.errno]
os.mkdir("d1"); os.mkdir("d2")
fd = os.open("d2", os.O_RDONLY | os.O_DIRECTORY)
os.rename("d1", "d2")
print("fstat of a replaced directory: links", outcome(lambda: os.fstat(fd).st_nlink))
os.close(fd)
os.mkdir("names"); open("names/known", "w").close(); os.listdir("names")
long = "names/" + "x" * 256
for name, call in [("chmod", lambda: os.chmod(long, 0o644)), ("chown", lambda: os.chown(long, 0, 0)),
                   ("lchown", lambda: os.lchown(long, 0, 0)), ("truncate", lambda: os.truncate(long, 0)),
                   ("stat", lambda: os.stat(long)), ("open", lambda: os.open(long, os.O_CREAT | os.O_WRONLY))]:
    print(name, "of a long name:", outcome(call))
def changed(path, change):
    before = os.stat(path)
    time.sleep(1.1)
    change()
    after = os.stat(path)
    return after.st_mtime_ns > before.st_mtime_ns, after.st_ctime_ns > before.st_ctime_ns
with open("f", "wb") as f:
    f.write(b"0" * 8192)
def pwrite():
    fd = os.open("f", os.O_RDWR); os.pwrite(fd, b"abc", 4096); os.close(fd)
def append():
    with open("f", "ab") as f:
        f.write(b"more")
def mapped():
    fd = os.open("f", os.O_RDWR)
    m = mmap.mmap(fd, 8192)
    m[0:5] = b"hello"
    m.flush()
    m.close()
    os.close(fd)
for what, change in [("pwrite", pwrite), ("append", append), ("shared mmap", mapped)]:
    print(what, "moves mtime and ctime:", changed("f", change))
# A time set on purpose after writing, before the close (cp -p, rsync -t, tar x) stays.
fd = os.open("copy", os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, b"copied")
os.utime(fd, ns=(1_000_000_000_123, 1_000_000_000_456))
os.close(fd)
print("a time set before the close:", os.stat("copy").st_mtime_ns)
print(os.stat("f").st_size, open("f", "rb").read(5))
print(os.stat("f").st_mtime_ns, file=sys.stderr)
"#;
    let run = |dir: &std::path::Path| {
        let out = std::process::Command::new("python3").arg("-c").arg(script).current_dir(dir).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).trim().to_string())
    };
    let (expected, _) = run(local.path());
    assert!(expected.contains("shared mmap moves mtime and ctime: (True, True)"), "{expected}");
    let (mounted, mtime_ns) = run(&m);
    assert_eq!(mounted, expected);
    // The other mount sees the writer's last modification time.
    let seen = fs::metadata(other.join("f")).unwrap();
    assert_eq!(
        (seen.mtime() as i128) * 1_000_000_000 + seen.mtime_nsec() as i128,
        mtime_ns.parse::<i128>().unwrap(),
        "another mount's mtime"
    );
}

/// A program whose caller has only the execute bit runs, as on a local file system (the
/// kernel opens it for execve with read access, and the MDS asked for read permission).
#[test]
fn a_program_runs_with_only_its_execute_bit() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let m = c.mount();
    let setup = "cp /bin/true t100 && cp /bin/true t010 && cp /bin/true t001 && cp /bin/true t000 && \
                 chown 1000:1000 t100 t010 t001 t000 && chmod 0100 t100 && chmod 0010 t010 && chmod 0001 t001 && \
                 chmod 0000 t000 && chgrp 2000 t001";
    let script = "for f in t100 t010 t001 t000; do ./$f 2>/dev/null; echo $f $?; done";
    for uid in [1000, 1001] {
        let (local, mounted) = local_and_mounted(&m, uid, setup, script);
        assert_eq!(mounted, local, "as uid {uid}");
    }
}

/// File handles, as an NFS server re-exporting the mount uses them: name_to_handle_at and
/// open_by_handle_at for a file with two links and for directories, while the kernel has the
/// inodes and after it dropped them, after a rename, and ESTALE once the file is gone. The
/// mount used to leave export support off, so every handle the kernel had to look up again
/// was ESTALE. (Drops the machine's dentry and inode caches: root only, as the suite runs.)
#[test]
fn file_handles_stay_valid_for_the_file_s_life() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test drops the kernel's caches: run it as root");
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let m = c.mount();
    let expected = python_as_on_local(&m, FILE_HANDLES_PY, 60);
    assert!(expected.contains("after the last unlink: ESTALE"), "{expected}");
}

const FILE_HANDLES_PY: &str = r#"
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
class FileHandle(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int), ("f_handle", ctypes.c_ubyte * 128)]
def handle(path):
    fh, mount_id = FileHandle(), ctypes.c_int()
    fh.handle_bytes = 128
    if libc.name_to_handle_at(-100, path.encode(), ctypes.byref(fh), ctypes.byref(mount_id), 0) != 0:
        raise OSError(ctypes.get_errno(), "name_to_handle_at " + path)
    return fh
def by_handle(fh, flags=os.O_RDONLY):
    fd = libc.open_by_handle_at(where, ctypes.byref(fh), flags)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "open_by_handle_at")
    return fd
def outcome(call):
    try:
        return call()
    except OSError as e:
        return errno.errorcode[e.errno]
def read_through(fh):
    fd = by_handle(fh)
    try:
        return os.read(fd, 100)
    finally:
        os.close(fd)
def dir_through(fh):
    fd = by_handle(fh, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return sorted(os.listdir(fd))
    finally:
        os.close(fd)
def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2")
where = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
with open("f", "w") as f:
    f.write("the file's bytes")
os.link("f", "g")
os.makedirs("d/e")
open("d/e/inside", "w").close()
handles = {name: handle(name) for name in ("f", "g", "d", "d/e")}
print("same handle for both names:", bytes(handles["f"].f_handle) == bytes(handles["g"].f_handle))
for when in ("cached", "after the kernel dropped its caches"):
    if when != "cached":
        drop_caches()
    print(when, "f:", outcome(lambda: read_through(handles["f"])), "g:", outcome(lambda: read_through(handles["g"])))
    print(when, "d:", outcome(lambda: dir_through(handles["d"])), "d/e:", outcome(lambda: dir_through(handles["d/e"])))
os.rename("f", "renamed")
drop_caches()
print("after a rename:", outcome(lambda: read_through(handles["f"])))
os.unlink("renamed"); os.unlink("g")
drop_caches()
print("after the last unlink:", outcome(lambda: read_through(handles["f"])))
"#;

/// An ACL that says no more than the mode bits, as `install -m`, `cp -p` and `setfacl -m
/// u::rw` set one, changes the mode (setgid going for a caller outside the group) and
/// leaves no ACL behind: `ls -l` shows the modes ext4 shows, with no '+' (ACLs that name
/// users and groups: tenants.rs).
#[test]
fn an_acl_of_the_mode_bits_is_a_mode_as_on_ext4() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let m = c.mount();
    let setup = "mkdir sg && chown 0:1234 sg && chmod 2777 sg";
    let script = r#"install -m 2755 /dev/null sg/prog && touch sg/f && python3 -c "
import errno, os, struct
acl = lambda *entries: struct.pack('<I', 2) + b''.join(struct.pack('<HHI', t, p, 0xFFFFFFFF) for t, p in entries)
os.setxattr('sg/f', 'system.posix_acl_access', acl((1, 6), (4, 4), (0x20, 0)))
print(oct(os.stat('sg/f').st_mode), os.listxattr('sg/f'))
" && ls -ln sg | cut -c1-11 | sort"#;
    let (local, mounted) = local_and_mounted(&m, 1000, setup, script);
    assert_eq!(mounted, local);
    assert!(local.contains("0o100640 []") && local.contains("-rwxr-xr-x \n"), "{local}");
}
