//! The Weft mounts of this process's namespace (`fuse.weft` in /proc/self/mountinfo, read
//! once) and the client each gets on first use. A mount made after the first look is not
//! known: its paths go through the kernel.

use crate::lock::SpinLock;
use crate::say;
use std::sync::OnceLock;
use weft::mounts::parse_mountinfo;
use weft::Fs;

pub struct Mount {
    /// Where it is mounted, without a trailing slash.
    pub point: Vec<u8>,
    /// Its management service (the mount's source, `mgs:/fsname`).
    pub mgs: String,
    client: SpinLock<Client>,
}

#[derive(Clone, Copy)]
enum Client {
    None,
    Connecting,
    /// Connected by the process with this pid (a vfork child shares the memory, not the
    /// client).
    Ready(&'static Fs, u32),
    /// It could not connect: its paths go through the kernel.
    Failed,
}

/// Every Weft mount, read on first use.
pub fn all() -> &'static [Mount] {
    static MOUNTS: OnceLock<Vec<Mount>> = OnceLock::new();
    if let Some(found) = MOUNTS.get() {
        return found;
    }
    // Reading mountinfo opens a file: that open must not come back here.
    crate::inside(|| MOUNTS.get_or_init(read_mounts).as_slice()).unwrap_or(&[])
}

fn read_mounts() -> Vec<Mount> {
    {
        if std::env::var_os("WEFT_PRELOAD").is_some_and(|v| v == "0") {
            return Vec::new();
        }
        let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let found: Vec<Mount> = parse_mountinfo(&text)
            .into_iter()
            .map(|(point, mgs)| Mount { point, mgs, client: SpinLock::new(Client::None) })
            .collect();
        for m in &found {
            say!("Weft mount {} of {}", String::from_utf8_lossy(&m.point), m.mgs);
        }
        found
    }
}

impl Mount {
    /// The mount's client, connected on first use; None when it cannot connect (its paths
    /// then go through the kernel, and this is said once on stderr).
    pub fn fs(&self) -> Option<&'static Fs> {
        loop {
            let mut state = self.client.lock();
            match *state {
                Client::Ready(fs, _) => return Some(fs),
                Client::Failed => return None,
                Client::Connecting => {
                    drop(state);
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    continue;
                }
                Client::None => *state = Client::Connecting,
            }
            drop(state);
            // Inside the library: the client's descriptors are its own (`private.rs`).
            let connected = crate::inside(|| self.connect()).flatten();
            *self.client.lock() = match connected {
                Some(fs) => Client::Ready(fs, std::process::id()),
                None => Client::Failed,
            };
            return connected;
        }
    }

    fn connect(&self) -> Option<&'static Fs> {
        let options = weft::MountOptions::from_env()
            .map(|o| weft::MountOptions { on_thread_start: Some(crate::private::mark_client_thread), ..o });
        match options.and_then(|options| Fs::mount_with(&self.mgs, options)) {
            Ok(mut fs) => {
                fs.set_link_prefix(Some(&self.point));
                if let Some(dev) = crate::stat::kernel_dev(&self.point) {
                    fs.set_dev(dev);
                }
                say!("connected to {} for {}", self.mgs, String::from_utf8_lossy(&self.point));
                // Lives as long as the process (a child after fork leaves it behind).
                Some(Box::leak(Box::new(fs)))
            }
            Err(e) => {
                eprintln!(
                    "libweft_preload: cannot reach {} for the mount at {}: {e}; going through the mount instead",
                    self.mgs,
                    String::from_utf8_lossy(&self.point)
                );
                None
            }
        }
    }

    /// Whether this process connected the mount's client.
    pub fn connected_here(&self) -> bool {
        matches!(*self.client.lock(), Client::Ready(_, pid) if pid == std::process::id())
    }

    /// At exit: the client's locks go back to the servers (the client itself stays, for
    /// whatever still runs: other libraries' exit handlers).
    pub fn disconnect(&self) {
        let state = *self.client.lock();
        if let Client::Ready(fs, pid) = state {
            if pid == std::process::id() {
                crate::inside(|| fs.release_locks());
            }
        }
    }

    /// After fork, in the child: the parent's client is not this process's (its runtime's
    /// threads are not here); the next use connects a new one.
    pub fn forget_client(&self) {
        *self.client.lock() = Client::None;
    }

    /// The lock the fork handlers hold across a fork.
    pub fn fork_lock(&self, take: bool) {
        match take {
            true => self.client.acquire(),
            false => self.client.release(),
        }
    }
}
