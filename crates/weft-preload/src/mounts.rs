//! The Weft mounts of this process's namespace (`fuse.weft` in /proc/self/mountinfo, read
//! once) and the client each gets on first use. A mount made after the first look is not
//! known: its paths go through the kernel.

use crate::lock::SpinLock;
use crate::say;
use std::sync::OnceLock;
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

/// `\040`-style escapes of mountinfo undone.
fn unescape(field: &str) -> Vec<u8> {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// The Weft mounts in a mountinfo text: (mount point, management service).
pub fn parse_mountinfo(text: &str) -> Vec<(Vec<u8>, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let mut right = right.split(' ');
        let (Some(fstype), Some(source)) = (right.next(), right.next()) else { continue };
        if fstype != "fuse.weft" {
            continue;
        }
        let Some(point) = left.split(' ').nth(4) else { continue };
        let mgs = source.rsplit_once(":/").map_or(source, |(mgs, _)| mgs);
        let mut point = unescape(point);
        while point.len() > 1 && point.ends_with(b"/") {
            point.pop();
        }
        out.push((point, mgs.to_string()));
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weft_mounts_are_found_in_mountinfo() {
        let text = "22 1 8:1 / / rw,relatime - ext4 /dev/vda rw\n\
                    70 22 0:50 / /mnt/my\\040weft rw,nosuid - fuse.weft 127.0.0.1:9400:/weft rw,user_id=0\n\
                    71 22 0:51 / /mnt/other rw - fuse.sshfs host:/x rw\n\
                    72 22 0:52 / /w/ rw - fuse.weft a:1,b:2,c:3:/fs2 rw\n";
        assert_eq!(
            parse_mountinfo(text),
            vec![(b"/mnt/my weft".to_vec(), "127.0.0.1:9400".to_string()), (b"/w".to_vec(), "a:1,b:2,c:3".to_string())]
        );
    }
}
