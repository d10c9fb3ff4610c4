//! A mounted Weft file system in a process: the client library with a runtime of its own,
//! the caller every request carries, and the directory the file system shows as its root.
//! Every call blocks its thread until the servers answered; many threads may call at once.

use crate::error::{Error, Result};
use crate::limits::{CLOSES_WAIT, CONNECT_TIMEOUT_S, RUNTIME_THREADS};
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use weft_client::{Client, ClientConfig};
use weft_proto::msg::{Caller, Identity};
use weft_proto::Fid;

pub struct Fs {
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) client: Arc<Client>,
    /// The identity and job of the process at mount; each call takes the umask current.
    pub(crate) caller: Caller,
    umask: AtomicU32,
    /// What this client sees as the root (a nodemap's fileset, or the file system's root).
    pub(crate) root: Fid,
    /// The file system's name, as the mount source shows it (`mgs:/fsname`).
    pub fsname: String,
    /// Where absolute symbolic links into this file system point (`Fs::set_link_prefix`).
    pub(crate) link_prefix: Option<Vec<u8>>,
    /// st_dev of what this client stats (`Fs::set_dev`).
    pub(crate) dev: std::sync::atomic::AtomicU64,
    /// Closes on their way to the MDS (`Fs::close` of an open that wrote nothing).
    pub(crate) closing: Arc<Pending>,
}

/// Requests running in the background, waited for before the client goes.
#[derive(Default)]
pub(crate) struct Pending {
    count: std::sync::Mutex<usize>,
    idle: std::sync::Condvar,
}

impl Pending {
    /// One more starts, once fewer than `max` run (a program closing files faster than
    /// the MDS answers waits rather than piling up closes in memory). Not to be called on
    /// the runtime's threads.
    pub(crate) fn started(&self, max: usize) {
        let n = self.count.lock().unwrap_or_else(|p| p.into_inner());
        let mut n = self.idle.wait_while(n, |n| *n >= max).unwrap_or_else(|p| p.into_inner());
        *n += 1;
    }

    pub(crate) fn ended(&self) {
        let mut n = self.count.lock().unwrap_or_else(|p| p.into_inner());
        *n -= 1;
        self.idle.notify_all();
    }

    /// Waits until none runs, at most `limit`.
    fn wait(&self, limit: std::time::Duration) {
        let n = self.count.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self.idle.wait_timeout_while(n, limit, |n| *n > 0);
    }
}

/// The calling process's identity: effective ids and supplementary groups.
fn process_identity() -> Identity {
    // SAFETY: geteuid/getegid cannot fail and touch no memory.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let mut groups = vec![0 as libc::gid_t; 256];
    // SAFETY: the buffer holds `groups.len()` gids; getgroups writes at most that many.
    let n = unsafe { libc::getgroups(groups.len() as libc::c_int, groups.as_mut_ptr()) };
    groups.truncate(usize::try_from(n).unwrap_or(0));
    Identity { uid, gid, groups }
}

/// The process's umask, read without changing it for other threads (/proc), or by setting
/// it back at once where /proc is not there.
pub fn process_umask() -> u32 {
    if let Ok(status) = std::fs::read_to_string("/proc/thread-self/status") {
        if let Some(mask) = status.lines().find_map(|l| l.strip_prefix("Umask:")) {
            if let Ok(mask) = u32::from_str_radix(mask.trim(), 8) {
                return mask;
            }
        }
    }
    // SAFETY: umask only swaps the process's mask; it is put back at once.
    unsafe {
        let mask = libc::umask(0o022);
        libc::umask(mask);
        mask as u32
    }
}

/// The job a process's requests count under (Lustre's `jobid_var=procname_uid`): the
/// environment's WEFT_JOBID or SLURM_JOB_ID when set, else the program's name and uid.
fn process_jobid(uid: u32) -> String {
    for var in ["WEFT_JOBID", "SLURM_JOB_ID"] {
        if let Ok(id) = std::env::var(var) {
            if !id.is_empty() {
                return id;
            }
        }
    }
    let name = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
    format!("{}.{uid}", name.trim())
}

/// The environment variable of [`MountOptions::wbc`] (`1` on, `0` or unset off).
pub const WBC_ENV: &str = "WEFT_WBC";
/// The environment variable of [`MountOptions::statahead`] (`0` off, `1` or unset on).
pub const STATAHEAD_ENV: &str = "WEFT_STATAHEAD";

/// How [`Fs::mount_with`] mounts.
#[derive(Debug, Clone, Copy)]
pub struct MountOptions {
    /// The metadata write-back cache: creates, setattrs and unlinks in a directory this
    /// client holds alone are made here and sent in batches. Off by default, as in the FUSE
    /// mount: what it made and has not sent is lost if the process dies (fsync of the
    /// file or its directory makes it durable), and a directory another client lists at
    /// the same time pays a callback and a batch per turn.
    pub wbc: bool,
    /// Statahead: a directory whose names are looked up one after another is read in
    /// pages with its inodes (`weft_client`'s statahead.rs). On by default.
    pub statahead: bool,
    /// A function each of the client's own threads runs first (the interception library
    /// marks them, so that their descriptors are kept from the program's closes).
    pub on_thread_start: Option<fn()>,
}

impl Default for MountOptions {
    fn default() -> MountOptions {
        MountOptions { wbc: false, statahead: true, on_thread_start: None }
    }
}

/// A boolean environment variable: `1` or `0`, unset or empty the default.
fn env_switch(name: &str, default: bool) -> Result<bool> {
    match std::env::var_os(name) {
        None => Ok(default),
        Some(v) if v == "1" => Ok(true),
        Some(v) if v == "0" => Ok(false),
        Some(v) if v.is_empty() => Ok(default),
        Some(v) => Err(Error::new(
            libc::EINVAL,
            format!("{name}={}: the allowed values are 1 (on) and 0 (off)", v.to_string_lossy()),
        )),
    }
}

impl MountOptions {
    /// The options the environment sets (`WEFT_WBC`, `WEFT_STATAHEAD`); a value it does
    /// not know is an error that names the allowed ones.
    pub fn from_env() -> Result<MountOptions> {
        Ok(MountOptions {
            wbc: env_switch(WBC_ENV, false)?,
            statahead: env_switch(STATAHEAD_ENV, true)?,
            on_thread_start: None,
        })
    }
}

impl Fs {
    /// Connects to the file system whose management service is at `mgs` (`host:port`, or
    /// several replicas' separated by commas), as the calling process's user, with the
    /// options the environment sets ([`MountOptions::from_env`]).
    pub fn mount(mgs: &str) -> Result<Fs> {
        Fs::mount_with(mgs, MountOptions::from_env()?)
    }

    /// `mount` with `options`.
    pub fn mount_with(mgs: &str, options: MountOptions) -> Result<Fs> {
        // Runtime threads of its own: lock callbacks from the servers must be answered
        // also while the program is between calls, or the servers would evict it.
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(RUNTIME_THREADS).thread_name("weft-client").enable_all();
        if let Some(hook) = options.on_thread_start {
            builder.on_thread_start(hook);
        }
        let rt =
            builder.build().map_err(|e| Error::new(libc::ENOMEM, format!("cannot start the client's runtime: {e}")))?;
        let mut config = ClientConfig::new(mgs);
        config.connect_timeout = std::time::Duration::from_secs(CONNECT_TIMEOUT_S);
        config.wbc.enabled = options.wbc;
        config.statahead = options.statahead;
        let client = rt.block_on(Client::connect(config)).map_err(|e| {
            let e = Error::from(e);
            Error::new(e.errno, format!("cannot reach the management service at {mgs}: {}", e.message))
        })?;
        let identity = process_identity();
        let jobid = process_jobid(identity.uid);
        let caller = Caller::new(identity, jobid);
        let root = match rt.block_on(client.get_root(&caller)) {
            Ok(root) => root,
            Err(e) => {
                rt.block_on(client.release_locks());
                return Err(e.into());
            }
        };
        let fsname = client.map().fsname.clone();
        // A device number of the file system's name until told the mount's.
        let dev = std::sync::atomic::AtomicU64::new(
            fsname.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
                & 0xffff_ffff,
        );
        Ok(Fs {
            rt,
            client,
            caller,
            umask: AtomicU32::new(process_umask()),
            root,
            fsname,
            link_prefix: None,
            dev,
            closing: Arc::default(),
        })
    }

    /// The caller of a request now: the identity at mount, the umask current.
    pub(crate) fn who(&self) -> Caller {
        Caller { umask: self.umask.load(Ordering::Relaxed), ..self.caller.clone() }
    }

    /// The umask creates apply from now on (`umask(2)` for this file system); the one
    /// before.
    pub fn swap_umask(&self, mask: u32) -> u32 {
        self.umask.swap(mask & 0o777, Ordering::Relaxed)
    }

    /// The job this process's requests count under (job statistics, TBF rules).
    pub fn set_jobid(&mut self, jobid: &str) {
        self.caller.jobid = jobid.to_string();
    }

    pub fn jobid(&self) -> &str {
        &self.caller.jobid
    }

    /// Runs a client call to its end on the calling thread.
    pub(crate) fn run<T>(&self, call: impl Future<Output = weft_proto::WeftResult<T>>) -> Result<T> {
        self.rt.block_on(call).map_err(Error::from)
    }

    /// [`Fs::run`] of a call that may not apply (None).
    pub(crate) fn run_opt<T>(
        &self,
        call: impl Future<Output = Option<weft_proto::WeftResult<T>>>,
    ) -> Option<Result<T>> {
        self.rt.block_on(call).map(|r| r.map_err(Error::from))
    }

    pub fn client(&self) -> &Arc<Client> {
        &self.client
    }

    /// The inode number a FID has here: the FUSE mount's (`Fid::to_ino`, the root and the
    /// fileset's top exchanged as a mount of a fileset does), so programs that compare
    /// inode numbers agree between the two paths.
    pub fn ino(&self, fid: Fid) -> u64 {
        let shown = match fid {
            f if f == self.root => Fid::ROOT,
            f if f == Fid::ROOT => self.root,
            f => f,
        };
        shown.to_ino()
    }
}

impl Fs {
    /// Gives every lock this client holds back to the servers (as unmount does), so that
    /// nobody waits for it to answer a callback: for a process about to exit without
    /// dropping its `Fs`.
    pub fn release_locks(&self) {
        self.closing.wait(CLOSES_WAIT);
        self.rt.block_on(self.client.release_locks());
    }
}

impl Drop for Fs {
    /// Unmount: every lock given back, so that nobody waits for this client to answer.
    fn drop(&mut self) {
        self.release_locks();
    }
}
