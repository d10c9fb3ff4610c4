//! What FUSE itself costs on this machine: a file system that does nothing (it answers every
//! lookup "no such file" and every create with a new inode, and keeps only its directories) is mounted
//! on a temporary directory, and one or more processes create empty files in it as mdtest
//! does (open O_CREAT, close), next to the same loop on a local directory. No file system
//! over FUSE can create faster than these figures on this machine; Weft's create rate is to
//! be read against them.
//!
//! It is measured three ways: requests through /dev/fuse; through io_uring, as Weft's mount
//! takes them where the kernel offers it; and through io_uring with every created file opened
//! in passthrough on an empty backing file made for it in a local directory, as Weft's
//! creates are under `weft up` (the OST makes the object's file, the mount registers it).
//! Directories given after PROCS (a Weft mount, say) are measured with the same loop, in a
//! fresh subdirectory each.
//!
//! `cargo run --release -p weft-fuse --example fuse_ceiling [-- FILES [PROCS [DIR...]]]`
//! (needs /dev/fuse and the right to mount, as `weft up` does).
//!
//! The local directory goes first and nothing is deleted until the end: on ext4 without a
//! journal, creating files soon after many were deleted is several times slower (inode
//! allocation steps over recently freed inodes one by one), and would measure that instead.

use fuser::{
    BackingId, Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyCreate, ReplyEmpty, ReplyEntry, Request,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, UNIX_EPOCH};

const TTL: Duration = Duration::from_secs(3600);

struct Nothing {
    /// Ask the kernel for FUSE over io_uring.
    uring: bool,
    next_ino: AtomicU64,
    /// Directories made, so that getattr answers for them.
    dirs: Mutex<std::collections::HashSet<u64>>,
    /// Where created files get their passthrough backing files, if they do.
    backing_dir: Option<PathBuf>,
    /// The backing files' ids, by file handle, until release.
    backing: Mutex<HashMap<u64, BackingId>>,
}

fn attr(ino: u64, kind: FileType) -> FileAttr {
    let dir = kind == FileType::Directory;
    FileAttr {
        ino: INodeNo(ino),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind,
        perm: if dir { 0o777 } else { 0o644 },
        nlink: if dir { 2 } else { 1 },
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl Filesystem for Nothing {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // As Weft's mount: lookups and creates in one directory may run in parallel.
        let _ = config.add_capabilities(InitFlags::FUSE_PARALLEL_DIROPS);
        if self.uring && config.add_capabilities(InitFlags::FUSE_OVER_IO_URING).is_err() {
            return Err(std::io::Error::other("this kernel does not offer FUSE over io_uring"));
        }
        if self.backing_dir.is_some()
            && (config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_err() || config.set_max_stack_depth(1).is_err())
        {
            return Err(std::io::Error::other("this kernel does not offer FUSE passthrough"));
        }
        Ok(())
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let dir = ino.0 == 1 || self.dirs.lock().unwrap().contains(&ino.0);
        let kind = if dir { FileType::Directory } else { FileType::RegularFile };
        reply.attr(&TTL, &attr(ino.0, kind));
    }

    fn lookup(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, reply: ReplyEntry) {
        reply.error(Errno::ENOENT);
    }

    fn mkdir(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, _mode: u32, _umask: u32, reply: ReplyEntry) {
        let ino = self.next_ino.fetch_add(1, Ordering::Relaxed);
        self.dirs.lock().unwrap().insert(ino);
        reply.entry(&TTL, &attr(ino, FileType::Directory), Generation(0));
    }

    fn create(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let ino = self.next_ino.fetch_add(1, Ordering::Relaxed);
        let a = attr(ino, FileType::RegularFile);
        let Some(dir) = &self.backing_dir else {
            return reply.created(&TTL, &a, Generation(0), FileHandle(ino), FopenFlags::empty());
        };
        let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(dir.join(ino.to_string()));
        match file.and_then(|f| reply.open_backing(&f)) {
            Ok(id) => {
                reply.created_passthrough(&TTL, &a, Generation(0), FileHandle(ino), FopenFlags::empty(), &id);
                self.backing.lock().unwrap().insert(ino, id);
            }
            Err(e) => reply.error(Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))),
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _owner: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // Dropping a backing id closes it in the kernel.
        drop(self.backing.lock().unwrap().remove(&fh.0));
        reply.ok();
    }
}

/// Creates `files` empty files in `dir` from `procs` processes at once; files per second.
fn creates(dir: &Path, files: u64, procs: u64) -> f64 {
    let start = Instant::now();
    let mut children = Vec::new();
    for p in 0..procs {
        // SAFETY: the child only makes system calls and exits; it never returns into Rust
        // code that could touch state shared with the parent's threads.
        match unsafe { libc::fork() } {
            0 => {
                // A directory per process, as mdtest-easy.
                let own = dir.join(format!("p{p}"));
                if std::fs::create_dir(&own).is_err() {
                    unsafe { libc::_exit(1) };
                }
                for i in 0..files / procs {
                    let path = own.join(format!("f{i}"));
                    let ok = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o644).open(&path).is_ok();
                    if !ok {
                        unsafe { libc::_exit(1) };
                    }
                }
                unsafe { libc::_exit(0) };
            }
            pid if pid > 0 => children.push(pid),
            _ => panic!("fork failed: {}", std::io::Error::last_os_error()),
        }
    }
    for pid in children {
        let mut status = 0;
        // SAFETY: waits for a child this function forked.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "a creating process failed");
    }
    files as f64 / start.elapsed().as_secs_f64()
}

/// How the do-nothing file system takes its requests.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    DevFuse,
    Uring,
    /// io_uring, and a passthrough backing file per created file.
    UringPassthrough,
}

/// Mounts the do-nothing file system and measures creates; None when the kernel does not
/// offer what `kind` needs. Backing files go in a directory under `scratch`, kept until the
/// caller drops it.
fn over_fuse(kind: Kind, files: u64, procs: u64, scratch: &Path) -> Option<f64> {
    let mnt = tempfile::tempdir().expect("a temporary directory");
    let mut config = Config::default();
    config.mount_options = vec![MountOption::FSName("fuse-ceiling".into()), MountOption::DefaultPermissions];
    config.n_threads = Some(2);
    let backing_dir = (kind == Kind::UringPassthrough).then(|| {
        let d = scratch.join("backing");
        std::fs::create_dir(&d).expect("a directory for backing files");
        d
    });
    let fs = Nothing {
        uring: kind != Kind::DevFuse,
        next_ino: AtomicU64::new(2),
        dirs: Default::default(),
        backing_dir,
        backing: Default::default(),
    };
    let session = fuser::spawn_mount(fs, mnt.path(), &config).ok()?;
    let rate = creates(mnt.path(), files, procs);
    session.umount_and_join().expect("unmounting the do-nothing file system");
    Some(rate)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let files: u64 = args.next().map(|a| a.parse().expect("FILES is a number")).unwrap_or(50_000);
    let procs: u64 = args.next().map(|a| a.parse().expect("PROCS is a number")).unwrap_or(2);
    let others: Vec<PathBuf> = args.map(PathBuf::from).collect();
    // Everything made here stays until the end (see the top of the file).
    let local = tempfile::tempdir().expect("a temporary directory");
    let on_local = creates(local.path(), files, procs);
    let scratch = tempfile::tempdir().expect("a temporary directory");
    let dev = over_fuse(Kind::DevFuse, files, procs, scratch.path())
        .expect("mounting the do-nothing file system (needs /dev/fuse)");
    let ring = over_fuse(Kind::Uring, files, procs, scratch.path());
    let ring_pt = ring.and_then(|_| over_fuse(Kind::UringPassthrough, files, procs, scratch.path()));
    let mut measured = Vec::new();
    for dir in &others {
        let own = tempfile::Builder::new()
            .prefix("fuse-ceiling-")
            .tempdir_in(dir)
            .unwrap_or_else(|e| panic!("cannot make a directory in {}: {e}", dir.display()));
        measured.push((dir, creates(own.path(), files, procs), own));
    }
    println!("creates, {procs} processes, {files} files each run:");
    let line = |what: &str, rate: f64| println!("  {what:<62} {rate:8.0}/s  ratio {:.3}", rate / on_local);
    line(&format!("local directory ({})", local.path().display()), on_local);
    line("FUSE via /dev/fuse, doing nothing", dev);
    match ring {
        Some(r) => line("FUSE via io_uring, doing nothing", r),
        None => println!("  FUSE via io_uring: not offered by this kernel ({})", weft_fuse::URING_SWITCH),
    }
    match ring_pt {
        Some(p) => line("FUSE via io_uring, a passthrough backing file per create", p),
        None if ring.is_some() => println!("  FUSE passthrough: not offered by this kernel"),
        None => {}
    }
    for (dir, rate, _) in &measured {
        line(&dir.display().to_string(), *rate);
    }
}
