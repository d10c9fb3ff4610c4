//! Descriptors of Weft files: which descriptor numbers are Weft's (a bitmap, so every
//! other descriptor's call costs one atomic load), the open behind each (several
//! descriptors share one after dup, as they share an open file description in the kernel),
//! and the way back to the kernel: reopening through the FUSE mount at the same number.

use crate::lock::SpinLock;
use crate::real::f as real;
use crate::{inside, say, within};
use std::collections::BTreeMap;
use std::ffi::{c_int, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use weft::Fs;

/// Descriptors from 0 to this (not included) can be Weft's; an open that the kernel would
/// give a higher number goes through the kernel.
const FDS_MAX: usize = 65_536;

static BITS: [AtomicU64; FDS_MAX / 64] = [const { AtomicU64::new(0) }; FDS_MAX / 64];
static TABLE: SpinLock<BTreeMap<c_int, Arc<Ofd>>> = SpinLock::new(BTreeMap::new());
/// The process whose descriptors the table holds (a fork child's from `after_fork_child`).
static OWNER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// An open of a Weft file or directory (an open file description).
pub struct Ofd {
    pub fs: &'static Fs,
    file: Option<weft::File>,
    /// The path it was opened by, from `/` (to reopen it through the kernel).
    pub abs: Vec<u8>,
}

impl Ofd {
    pub fn new(fs: &'static Fs, file: weft::File, abs: Vec<u8>) -> Ofd {
        Ofd { fs, file: Some(file), abs }
    }

    pub fn file(&self) -> &weft::File {
        self.file.as_ref().expect("an open's file is there until it is dropped")
    }
}

impl Ofd {
    /// Closes it on the servers now, if this is its last descriptor: the close's error (a
    /// size the MDS refused, a server gone) is close(2)'s.
    pub fn close_last(this: Arc<Ofd>) -> weft::Result<()> {
        let Ok(mut ofd) = Arc::try_unwrap(this) else { return Ok(()) };
        let Some(file) = ofd.file.take() else { return Ok(()) };
        let fs = ofd.fs;
        within(|| fs.close(file))
    }
}

impl Drop for Ofd {
    /// The last descriptor of it went: closed on the servers (a writer's size told).
    fn drop(&mut self) {
        if let Some(file) = self.file.take() {
            let fs = self.fs;
            if let Err(e) = within(|| fs.close(file)) {
                say!("close of {}: {e}", String::from_utf8_lossy(&self.abs));
            }
        }
    }
}

fn bit(fd: c_int) -> Option<(&'static AtomicU64, u64)> {
    let fd = usize::try_from(fd).ok().filter(|fd| *fd < FDS_MAX)?;
    Some((&BITS[fd / 64], 1u64 << (fd % 64)))
}

/// Whether this is a vfork child (Python's subprocess, posix_spawn's own): it runs on its
/// parent's memory, so the table, the clients and this library's state are the parent's,
/// while its descriptor table is its own. Nothing of the parent's may change here.
pub fn in_vfork_child() -> bool {
    let owner = OWNER.load(Ordering::Acquire);
    owner != 0 && owner != std::process::id()
}

/// In a vfork child: a kernel descriptor (close-on-exec, through the mount) of Weft
/// descriptor `fd`'s file at its position, for the child's own table; None (errno set)
/// when it cannot be opened.
pub fn kernel_copy(fd: c_int) -> Option<c_int> {
    let ofd = get(fd)?;
    inside(|| reopen(&ofd)).flatten()
}

/// Whether `fd` is a Weft descriptor: one atomic load.
pub fn is_weft(fd: c_int) -> bool {
    bit(fd).is_some_and(|(word, mask)| word.load(Ordering::Acquire) & mask != 0)
}

/// The open behind Weft descriptor `fd`.
pub fn get(fd: c_int) -> Option<Arc<Ofd>> {
    if !is_weft(fd) {
        return None;
    }
    TABLE.lock().get(&fd).cloned()
}

/// The path of Weft directory descriptor `fd` (the base of `*at` calls).
pub fn path_of_dir(fd: c_int) -> Option<Vec<u8>> {
    get(fd).filter(|o| o.file().is_dir()).map(|o| o.abs.clone())
}

/// The O_PATH descriptor of `/` whose duplicates hold Weft descriptors' numbers.
fn base() -> c_int {
    static BASE: OnceLock<c_int> = OnceLock::new();
    *BASE.get_or_init(|| {
        // SAFETY: a constant NUL-terminated path.
        unsafe { real::open(c"/".as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC, 0) }
    })
}

/// Puts `fd` in the table for `ofd` (its number already held in the kernel's table).
pub fn insert(fd: c_int, ofd: Arc<Ofd>) {
    let Some((word, mask)) = bit(fd) else { return };
    OWNER.store(std::process::id(), Ordering::Release);
    TABLE.lock().insert(fd, ofd);
    word.fetch_or(mask, Ordering::AcqRel);
}

/// A new descriptor number for `ofd`, the lowest free one as open(2) gives; None (errno
/// set) when the kernel has none, or only one past what this library keeps.
pub fn install(ofd: Arc<Ofd>, cloexec: bool) -> Option<c_int> {
    let cmd = if cloexec { libc::F_DUPFD_CLOEXEC } else { libc::F_DUPFD };
    // SAFETY: fcntl on our own descriptor.
    let fd = unsafe { real::fcntl(base(), cmd, 0) };
    if fd < 0 {
        return None;
    }
    if bit(fd).is_none() {
        // SAFETY: closing the number just made.
        unsafe { real::close(fd) };
        return None;
    }
    insert(fd, ofd);
    Some(fd)
}

/// Takes `fd` out of the table (its number stays in the kernel's until closed there).
pub fn remove(fd: c_int) -> Option<Arc<Ofd>> {
    let (word, mask) = bit(fd)?;
    let mut table = TABLE.lock();
    word.fetch_and(!mask, Ordering::AcqRel);
    table.remove(&fd)
}

/// Every Weft descriptor with its open.
pub fn all() -> Vec<(c_int, Arc<Ofd>)> {
    TABLE.lock().iter().map(|(fd, o)| (*fd, o.clone())).collect()
}

/// Opens `ofd`'s file through the kernel (the FUSE mount) at its position: the new kernel
/// descriptor (close-on-exec), or None with errno set.
pub(crate) fn reopen(ofd: &Ofd) -> Option<c_int> {
    let file = ofd.file();
    let flags = (*file.flags.lock().unwrap_or_else(|p| p.into_inner())
        & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC | libc::O_CLOEXEC))
        | libc::O_CLOEXEC;
    let path = CString::new(ofd.abs.clone()).ok()?;
    // SAFETY: a NUL-terminated path we own.
    let kfd = unsafe { real::open(path.as_ptr(), flags, 0) };
    if kfd < 0 {
        return None;
    }
    // SAFETY: stat of the descriptor just opened into a buffer we own.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { real::fstat(kfd, &mut st) } == 0 && st.st_ino != ofd.fs.ino(file.fid) {
        eprintln!(
            "libweft_preload: {} is another file now than the one open (renamed since?): its descriptor reads the new one",
            String::from_utf8_lossy(&ofd.abs)
        );
    }
    if !file.is_dir() {
        // SAFETY: lseek of our descriptor.
        unsafe { real::lseek(kfd, file.position() as libc::off_t, libc::SEEK_SET) };
    }
    Some(kfd)
}

/// Puts kernel descriptor `kfd` at number `fd` (its close-on-exec flag kept, as the
/// number's in the kernel's table says).
fn put_at(kfd: c_int, fd: c_int) {
    // SAFETY: fcntl and dup3 on descriptors this process holds.
    unsafe {
        let cloexec = real::fcntl(fd, libc::F_GETFD, 0) & libc::FD_CLOEXEC != 0;
        real::dup3(kfd, fd, if cloexec { libc::O_CLOEXEC } else { 0 });
    }
}

/// Reopens `ofd`'s file through the mount at number `fd`, in this process's own table only
/// (a fork or vfork child: the library's state is not changed).
fn reopen_at(fd: c_int, ofd: &Ofd) {
    if let Some(Some(kfd)) = inside(|| reopen(ofd)) {
        put_at(kfd, fd);
        // SAFETY: the temporary kernel descriptor.
        unsafe { real::close(kfd) };
    }
}

/// Makes Weft descriptor `fd`, and every other descriptor of its open, kernel descriptors
/// of the same file through the FUSE mount, at the same numbers, position and
/// close-on-exec flags; the Weft open is closed. True when `fd` is a kernel descriptor
/// now; false (errno set) when it could not be reopened (it stays Weft's).
pub fn to_kernel(fd: c_int) -> bool {
    let Some(ofd) = get(fd) else { return true };
    let Some(kfd) = inside(|| reopen(&ofd)).flatten() else { return false };
    say!("descriptor {fd} ({}) goes through the mount from now on", String::from_utf8_lossy(&ofd.abs));
    for (other, o) in all() {
        if Arc::ptr_eq(&o, &ofd) {
            remove(other);
            put_at(kfd, other);
        }
    }
    // SAFETY: the temporary kernel descriptor.
    unsafe { real::close(kfd) };
    drop(ofd);
    true
}

/// Before an exec, which ends this process's clients without a word to the servers: every
/// Weft descriptor becomes a kernel descriptor of the FUSE mount (those that survive the
/// exec are then the new program's; the close-on-exec ones the kernel closes; and should
/// the exec fail, all still work), and every client gives its locks back.
///
/// In a vfork child (Python's subprocess, for one) the memory, the table and the clients
/// are the parent's, the descriptor table its own: its descriptors are reopened through
/// the mount in its own table, and nothing of the parent's is changed.
pub fn before_exec() {
    let owner = OWNER.load(Ordering::Acquire);
    if owner != 0 && owner != std::process::id() {
        for (fd, ofd) in all() {
            reopen_at(fd, &ofd);
        }
        return;
    }
    for (fd, _) in all() {
        to_kernel(fd);
    }
    for m in crate::mounts::all() {
        m.disconnect();
    }
}

/// Before posix_spawn, whose child inherits the descriptors without running this library:
/// those that survive an exec become the kernel's (in the parent, for good); the parent
/// stays the client it was.
pub fn before_spawn() {
    for (fd, _) in all() {
        // SAFETY: fcntl on a descriptor this process holds.
        let cloexec = unsafe { real::fcntl(fd, libc::F_GETFD, 0) } & libc::FD_CLOEXEC != 0;
        if !cloexec {
            to_kernel(fd);
        }
    }
}

/// In a child after fork: every Weft descriptor becomes a kernel descriptor of the FUSE
/// mount (the opens are the parent's client's, which the child is not), and the parent's
/// opens are left to the parent.
pub fn after_fork_child() {
    let all: Vec<(c_int, Arc<Ofd>)> = std::mem::take(&mut *TABLE.lock()).into_iter().collect();
    for word in &BITS {
        word.store(0, Ordering::Release);
    }
    for (fd, ofd) in &all {
        reopen_at(*fd, ofd);
    }
    // The opens are the parent's: never closed from here.
    for (_, ofd) in all {
        std::mem::forget(ofd);
    }
}

/// At exit: every Weft descriptor closed (its number too). Not in a vfork child, which
/// shares its parent's memory: the table is the parent's.
pub fn close_all() {
    if OWNER.load(Ordering::Acquire) != std::process::id() {
        return;
    }
    let all: Vec<(c_int, Arc<Ofd>)> = std::mem::take(&mut *TABLE.lock()).into_iter().collect();
    for word in &BITS {
        word.store(0, Ordering::Release);
    }
    for (fd, ofd) in all {
        // SAFETY: the number held for the Weft descriptor.
        unsafe { real::close(fd) };
        if let Err(e) = Ofd::close_last(ofd) {
            say!("close at exit of descriptor {fd}: {e}");
        }
    }
}

/// The table's lock, held across a fork by the fork handlers.
pub fn fork_lock(take: bool) {
    match take {
        true => TABLE.acquire(),
        false => TABLE.release(),
    }
}
