//! What FUSE itself costs on this machine: a file system that does nothing (it answers every
//! lookup "no such file" and every create with a new inode, and keeps nothing) is mounted
//! on a temporary directory, and one or more processes create empty files in it as mdtest
//! does (open O_CREAT, close), next to the same loop on a local directory. No file system
//! over FUSE can create faster than the first figure on this machine; Weft's create rate is
//! to be read against it.
//!
//! `cargo run --release -p weft-fuse --example fuse_ceiling [-- FILES [PROCS]]`
//! (needs /dev/fuse and the right to mount, as `weft up` does).

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyCreate, ReplyEmpty, ReplyEntry, Request,
};
use std::ffi::OsStr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, UNIX_EPOCH};

const TTL: Duration = Duration::from_secs(3600);

struct Nothing {
    /// Ask the kernel for FUSE over io_uring.
    uring: bool,
    next_ino: AtomicU64,
    /// Directories made (the only thing kept), so that getattr answers for them.
    dirs: std::sync::Mutex<std::collections::HashSet<u64>>,
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
        reply.created(&TTL, &attr(ino, FileType::RegularFile), Generation(0), FileHandle(ino), FopenFlags::empty());
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _owner: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
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

/// Mounts the do-nothing file system (through io_uring if `uring`) and measures creates;
/// None when the kernel does not offer io_uring.
fn over_fuse(uring: bool, files: u64, procs: u64) -> Option<f64> {
    let mnt = tempfile::tempdir().expect("a temporary directory");
    let mut config = Config::default();
    config.mount_options = vec![MountOption::FSName("fuse-ceiling".into()), MountOption::DefaultPermissions];
    config.n_threads = Some(2);
    let fs = Nothing { uring, next_ino: AtomicU64::new(2), dirs: Default::default() };
    let session = fuser::spawn_mount(fs, mnt.path(), &config).ok()?;
    let rate = creates(mnt.path(), files, procs);
    session.umount_and_join().expect("unmounting the do-nothing file system");
    Some(rate)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let files: u64 = args.next().map(|a| a.parse().expect("FILES is a number")).unwrap_or(50_000);
    let procs: u64 = args.next().map(|a| a.parse().expect("PROCS is a number")).unwrap_or(2);
    let dev = over_fuse(false, files, procs).expect("mounting the do-nothing file system (needs /dev/fuse)");
    let ring = over_fuse(true, files, procs);
    let local = tempfile::tempdir().expect("a temporary directory");
    let on_local = creates(local.path(), files, procs);
    println!("creates, {procs} processes, {files} files:");
    println!("  FUSE through /dev/fuse, file system doing nothing  {dev:10.0}/s  ratio {:.3}", dev / on_local);
    match ring {
        Some(r) => {
            println!("  FUSE through io_uring, file system doing nothing  {r:10.0}/s  ratio {:.3}", r / on_local)
        }
        None => {
            println!("  FUSE through io_uring: not offered by this kernel ({})", weft_fuse::URING_SWITCH)
        }
    }
    println!("  local directory ({})  {on_local:10.0}/s", local.path().display());
}
