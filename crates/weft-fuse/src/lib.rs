//! The FUSE adapter: a thin mapping from the kernel's requests to the client library.
//!
//! * [`mount`] / [`mount_foreground`]: mount a [`Client`] at a directory;
//! * `fs.rs`: the kernel's requests, each handed to one op of the mount (`mount.rs`, the
//!   state a mount keeps) by what it asks: `entries.rs` (names, attributes, listings),
//!   `opens.rs` (open, create, release, and each open's I/O mode, `iomode.rs`), `io.rs`
//!   (read, write, flush, fsync, with write-behind in `writeback.rs`), `xattr.rs` (real and
//!   virtual `weft.*` attributes, how the `weft` CLI asks the mount for layouts, FIDs,
//!   paths, statfs and the map), `locks.rs` (fcntl and flock);
//! * `serve.rs`: each op runs on the FUSE thread that got it, unless a server's scheduler
//!   holds it back: then it finishes on the runtime and the thread goes back to the kernel;
//! * `callers.rs`: who asks (groups, jobid from `jobid.rs`), kept per process;
//! * `coherence.rs`: what a lost lock means for the kernel's caches;
//! * [`errno`]: the single place where Weft's error codes become errno values;
//! * inode numbers are FIDs ([`weft_proto::Fid::to_ino`], root = 1), so no inode table;
//!   open files and directories live in handle tables (`handles.rs`);
//! * [`limits`]: every bound of the mount.

mod atime;
mod callers;
mod coherence;
mod convert;
mod entries;
mod errno;
mod fallocate;
mod fs;
mod handles;
mod io;
mod iomode;
pub mod jobid;
pub mod limits;
mod lock_state;
mod locks;
mod mount;
mod opens;
pub mod params;
pub mod pcc;
mod refusals;
mod root;
mod serve;
mod writeback;
mod xattr;

pub use atime::AtimeMode;
pub use errno::errno;
pub use fuser::BackgroundSession;
pub use jobid::{JobidScheme, JobidVar};
pub use xattr::VIRTUAL_PREFIX;

use limits::{
    ATTR_TTL_MS_DEFAULT, MOUNT_APPEAR_POLL_MS, MOUNT_APPEAR_WAIT_MS, READ_AHEAD_KB, THREADS_DEFAULT, WRITE_BYTES_MAX,
};

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use weft_client::Client;

/// How the mount behaves.
#[derive(Debug, Clone)]
pub struct MountOptions {
    /// FUSE worker threads; each serves one kernel request at a time.
    pub threads: usize,
    /// How long the kernel trusts attributes and directory entries. Without the lock
    /// manager this is how stale another client's changes may look (0: always ask).
    pub attr_ttl: Duration,
    /// Let users other than the one mounting use the mount (needs `user_allow_other` in
    /// /etc/fuse.conf when not mounting as root).
    pub allow_other: bool,
    /// The source shown in /proc/mounts and df: `MGS_ADDR:/FSNAME`, as Lustre's
    /// `mgsnid:/fsname`.
    pub fsname: String,
    /// Largest write the kernel sends in one request.
    pub max_write_bytes: u32,
    /// Which files the kernel reads and writes itself (FUSE passthrough, only with extent
    /// locks on).
    pub passthrough: Passthrough,
    /// Take the kernel's requests through io_uring, one queue per CPU, where the kernel
    /// offers it (Linux 6.14+, `fuse.enable_uring=1`); /dev/fuse otherwise.
    pub uring: bool,
    /// How each request's jobid is made from its process (Lustre's `jobid_var`).
    pub jobid: JobidScheme,
    /// Honour setuid and setgid bits of programs run from the mount (else `nosuid`).
    pub suid: bool,
    /// Let device nodes on the mount open their devices (else `nodev`).
    pub dev: bool,
    /// When reads move atime (`noatime`, `relatime`, `strictatime`).
    pub atime: AtimeMode,
    /// Mount read-only (`ro`): the kernel answers every change with EROFS before it reaches
    /// the mount, as on a local file system mounted `ro`.
    pub read_only: bool,
    /// Refuse to run programs from the mount (`noexec`).
    pub noexec: bool,
}

/// Which files the kernel reads and writes itself, past the mount (FUSE passthrough). No
/// request carries such I/O, so no server counts it: the kernel tells the mount nothing per
/// read or write, and nothing else counts bytes per file (a process's I/O accounting has all
/// its files, cachestat has page-cache state, not totals). Passthrough therefore gives way
/// wherever a server would count the bytes, unless the site asks for it (`On`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Passthrough {
    /// Every byte through the mount; a persistent client cache cannot work.
    Off,
    /// Only where no server counts the bytes: a persistent client cache's copies, whose
    /// I/O is on this node's disk by design (as Lustre's PCC). A file on an OST of this
    /// process goes through the mount, so its OSS counts its bytes per job, user and target.
    #[default]
    Auto,
    /// Also files of one object on an OST of this process, at local-disk speed; the bytes
    /// done to them are then counted nowhere (the opens, closes and sizes still are).
    On,
}

impl Passthrough {
    /// The mount option's value (`passthrough=auto|on|off`).
    pub fn parse(value: &str) -> Result<Passthrough, String> {
        match value {
            "auto" => Ok(Passthrough::Auto),
            "on" => Ok(Passthrough::On),
            "off" => Ok(Passthrough::Off),
            _ => Err(format!("passthrough={value}: allowed values are auto, on, off")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Passthrough::Off => "off",
            Passthrough::Auto => "auto",
            Passthrough::On => "on",
        }
    }
}

/// The kernel's switch for FUSE over io_uring (Linux 6.14+; absent on older kernels).
pub const URING_SWITCH: &str = "/sys/module/fuse/parameters/enable_uring";

/// Whether the kernel offers FUSE over io_uring to mounts made now; None when it has no
/// such switch.
pub fn uring_offered() -> Option<bool> {
    std::fs::read_to_string(URING_SWITCH).ok().map(|v| v.trim() == "Y")
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            threads: THREADS_DEFAULT,
            attr_ttl: Duration::from_millis(ATTR_TTL_MS_DEFAULT),
            allow_other: true,
            fsname: "weft".to_string(),
            max_write_bytes: WRITE_BYTES_MAX,
            passthrough: Passthrough::default(),
            uring: true,
            jobid: JobidScheme::default(),
            suid: false,
            dev: false,
            atime: AtimeMode::default(),
            read_only: false,
            noexec: false,
        }
    }
}

fn fuse_config(opts: &MountOptions) -> fuser::Config {
    // nosuid and nodev unless asked: a file system that users fill must not hand out root
    // or raw devices by default (fuser's own default, said here so that it shows).
    let mut mount_options = vec![
        fuser::MountOption::FSName(opts.fsname.clone()),
        fuser::MountOption::Subtype("weft".to_string()),
        fuser::MountOption::DefaultPermissions,
        if opts.suid { fuser::MountOption::Suid } else { fuser::MountOption::NoSuid },
        if opts.dev { fuser::MountOption::Dev } else { fuser::MountOption::NoDev },
    ];
    mount_options.extend(opts.atime.mount_option());
    if opts.read_only {
        mount_options.push(fuser::MountOption::RO);
    }
    if opts.noexec {
        mount_options.push(fuser::MountOption::NoExec);
    }
    let mut config = fuser::Config::default();
    config.mount_options = mount_options;
    config.acl = if opts.allow_other { fuser::SessionACL::All } else { fuser::SessionACL::Owner };
    config.n_threads = Some(opts.threads.max(1));
    // One /dev/fuse descriptor per worker thread, so they do not contend on one queue.
    config.clone_fd = opts.threads > 1;
    config
}

/// Asks the MDS which directory this client sees as the root (its nodemap's fileset, or
/// the root) and shows that one as the mount's root. Not from within an async runtime
/// (a test's), where the mount shows the root.
fn learn_root(client: &Client, runtime: &tokio::runtime::Handle) -> std::io::Result<()> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Ok(());
    }
    let root = runtime
        .block_on(client.get_root(&weft_proto::msg::Caller::root()))
        .map_err(|e| std::io::Error::other(format!("cannot find this client's root directory: {}", e.message)))?;
    root::set_mount_root(root);
    Ok(())
}

/// Mounts in the background and returns at once; dropping the session unmounts
/// (`umount_and_join` unmounts and waits for the worker threads).
pub fn mount(
    client: Arc<Client>,
    runtime: tokio::runtime::Handle,
    mountpoint: &Path,
    opts: MountOptions,
) -> std::io::Result<fuser::BackgroundSession> {
    let config = fuse_config(&opts);
    learn_root(&client, &runtime)?;
    let (fs, hooks) = filesystem(client, runtime, opts);
    let session = fuser::Session::new(fs, mountpoint, &config)?;
    hooks.set_notifier(session.notifier());
    let session = session.spawn()?;
    tune_when_ready(mountpoint);
    Ok(session)
}

/// Raises the read-ahead of the mount once the kernel has its answer to FUSE_INIT, from a
/// thread of its own (the mount's threads must be serving by then).
fn tune_when_ready(mountpoint: &Path) {
    let tuned = mountpoint.to_path_buf();
    std::thread::spawn(move || {
        let start = std::time::Instant::now();
        while mount_device(&tuned).is_none() && start.elapsed() < Duration::from_millis(MOUNT_APPEAR_WAIT_MS) {
            std::thread::sleep(Duration::from_millis(MOUNT_APPEAR_POLL_MS));
        }
        // The kernel applies the INIT answer's max_readahead to the device, lowering a
        // read-ahead set before it (to 128 KiB: every large read over TCP went out in
        // 128 KiB pieces, 0.41 against 0.70 GB/s for two streams, measured). A stat of
        // the root waits until INIT is through.
        if let Err(e) = std::fs::metadata(&tuned) {
            tracing::debug!("stat of {} before tuning it: {e}", tuned.display());
        }
        tune_readahead(&tuned);
    });
}

/// Raises the read-ahead of the FUSE connection's backing device (`/sys/class/bdi/M:N`).
/// Best effort: without the right (root) the mount works with the kernel's default.
fn tune_readahead(mountpoint: &Path) {
    let Some(dev) = mount_device(mountpoint) else {
        tracing::debug!("no mountinfo line for {}: read-ahead left as is", mountpoint.display());
        return;
    };
    let path = format!("/sys/class/bdi/{dev}/read_ahead_kb");
    if let Err(e) = std::fs::write(&path, READ_AHEAD_KB.to_string()) {
        tracing::info!("cannot raise the read-ahead ({path}): {e}; large reads will be slower");
    }
}

/// The `major:minor` of the mount at `mountpoint`, from /proc/self/mountinfo.
fn mount_device(mountpoint: &Path) -> Option<String> {
    let want = std::path::absolute(mountpoint).ok()?.to_string_lossy().replace(' ', "\\040");
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().rev().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        (f.get(4) == Some(&want.as_str()) && l.contains(" - fuse")).then(|| f[2].to_string())
    })
}

/// Mounts and serves until the file system is unmounted (`fusermount3 -u`, `umount`),
/// then returns. Call it from a thread that is not a tokio runtime thread (e.g. inside
/// `spawn_blocking`, or the main thread with the runtime's handle).
pub fn mount_foreground(
    client: Arc<Client>,
    runtime: tokio::runtime::Handle,
    mountpoint: &Path,
    opts: MountOptions,
) -> std::io::Result<()> {
    let config = fuse_config(&opts);
    learn_root(&client, &runtime)?;
    // The mount exists only once fuser::mount has started serving: tune it from the side.
    tune_when_ready(mountpoint);
    let (fs, hooks) = filesystem(client, runtime, opts);
    let session = fuser::Session::new(fs, mountpoint, &config)?;
    hooks.set_notifier(session.notifier());
    session.run()
}

/// The file system, with its lock hooks installed in the client. The hooks reach the
/// kernel through the session's notifier, which exists once the session does: the caller
/// hands it over before the session serves.
fn filesystem(
    client: Arc<Client>,
    runtime: tokio::runtime::Handle,
    opts: MountOptions,
) -> (fs::WeftFs, Arc<coherence::MountHooks>) {
    let writes = Arc::new(writeback::WriteBehind::default());
    let hooks = coherence::MountHooks::new(writes.clone());
    client.set_lock_hooks(hooks.clone());
    (fs::WeftFs::new(mount::Mount::new(client, runtime, opts, writes, hooks.clone())), hooks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_asks_for_the_documented_mount_options() {
        let config = fuse_config(&MountOptions::default());
        assert!(config.mount_options.contains(&fuser::MountOption::DefaultPermissions));
        assert!(config.mount_options.contains(&fuser::MountOption::Subtype("weft".into())));
        assert!(config.mount_options.contains(&fuser::MountOption::FSName("weft".into())));
        assert!(!config.mount_options.contains(&fuser::MountOption::AutoUnmount));
        assert!(config.mount_options.contains(&fuser::MountOption::NoSuid));
        assert!(config.mount_options.contains(&fuser::MountOption::NoDev));
        let site = fuse_config(&MountOptions { suid: true, dev: true, ..MountOptions::default() });
        assert!(site.mount_options.contains(&fuser::MountOption::Suid));
        assert!(site.mount_options.contains(&fuser::MountOption::Dev));
        assert!(!config.mount_options.iter().any(|o| matches!(o, fuser::MountOption::NoAtime)), "relatime");
        assert!(!config.mount_options.iter().any(|o| matches!(o, fuser::MountOption::RO | fuser::MountOption::NoExec)));
        let locked = fuse_config(&MountOptions { read_only: true, noexec: true, ..MountOptions::default() });
        assert!(locked.mount_options.contains(&fuser::MountOption::RO));
        assert!(locked.mount_options.contains(&fuser::MountOption::NoExec));
        let strict = fuse_config(&MountOptions { atime: AtimeMode::StrictAtime, ..MountOptions::default() });
        assert!(strict.mount_options.contains(&fuser::MountOption::StrictAtime));
        assert_eq!(config.acl, fuser::SessionACL::All);
        assert_eq!(config.n_threads, Some(2));
        let private = fuse_config(&MountOptions { allow_other: false, threads: 0, ..MountOptions::default() });
        assert_eq!(private.acl, fuser::SessionACL::Owner);
        assert_eq!(private.n_threads, Some(1));
        assert!(!private.clone_fd);
    }
}
