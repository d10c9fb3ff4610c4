//! Running a command in the background the way `mount` and service managers expect: the
//! parent starts a detached copy of itself, waits until that copy says it is ready (or dies,
//! in which case the parent shows why), and returns.

use crate::limits::READY_POLL_MS;
use anyhow::anyhow;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Set in the environment of the detached copy so it knows not to detach again.
pub const DETACHED_ENV: &str = "WEFT_DETACHED";

pub fn is_detached_child() -> bool {
    std::env::var_os(DETACHED_ENV).is_some()
}

/// Starts this binary again with `args`, in its own session, output appended to `log`.
pub fn spawn_self(args: &[String], log: &Path) -> anyhow::Result<Child> {
    spawn_self_with_env(args, log, &[])
}

/// [`spawn_self`] with `env` added to the copy's environment.
pub fn spawn_self_with_env(args: &[String], log: &Path, env: &[(String, String)]) -> anyhow::Result<Child> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let out = std::fs::OpenOptions::new().create(true).append(true).open(log)?;
    let err = out.try_clone()?;
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    // argv[0] `weft` whatever this process was started as (the mount helper's name
    // would make the copy a mount helper again).
    cmd.arg0("weft")
        .args(args)
        .envs(env.iter().cloned())
        .env(DETACHED_ENV, "1")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    // SAFETY: setsid is async-signal-safe; it detaches the child from our terminal so that
    // Ctrl-C in this shell later does not stop the background file system.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    Ok(cmd.spawn()?)
}

/// Waits until `ready()` holds, the child exits (an error with the log's last lines), or
/// `timeout` passes.
pub fn wait_ready(child: &mut Child, log: &Path, timeout: Duration, ready: impl Fn() -> bool) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        if ready() {
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            return Err(anyhow!("the background process exited ({status}) before it was ready:\n{}", tail(log, 15)));
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            return Err(anyhow!(
                "not ready after {} s; stopped it. Last lines of {}:\n{}",
                timeout.as_secs(),
                log.display(),
                tail(log, 15)
            ));
        }
        std::thread::sleep(Duration::from_millis(READY_POLL_MS));
    }
}

pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Whether `mountpoint` is a mount point now (from /proc/self/mountinfo).
pub fn is_mounted(mountpoint: &Path) -> bool {
    // No canonicalize: that would stat the mount point, which hangs or fails on a dead mount.
    let Ok(canon) = std::path::absolute(mountpoint) else {
        return false;
    };
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let want = canon.to_string_lossy().replace(' ', "\\040");
    text.lines().any(|l| l.split(' ').nth(4) == Some(want.as_str()))
}

/// The Weft mounts of this node: FUSE mounts (`fuse` when root mounted them directly,
/// `fuse.weft` through fusermount3) whose root answers the virtual attribute `weft.fid`.
pub fn weft_mounts() -> Vec<PathBuf> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else { return Vec::new() };
    info.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            if !right.split_whitespace().next()?.starts_with("fuse") {
                return None;
            }
            Some(PathBuf::from(unescape_mountinfo(left.split_whitespace().nth(4)?)))
        })
        .filter(|m| crate::xattr::get(m, "weft.fid").is_ok())
        .collect()
}

/// A mountinfo path field: spaces, tabs, newlines and backslashes are octal escapes there.
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        if let (b'\\', Some(d)) = (bytes[i], octal) {
            let v = d.iter().fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            out.push(u8::try_from(v).unwrap_or(b'?'));
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Unmounts a FUSE mount; `lazy` detaches it even while busy (for cleanup of a dead mount).
/// Root unmounts with umount(2) itself, as `weft mount` mounts without help; others go
/// through fusermount3, the setuid helper that lets a user unmount what they mounted.
pub fn unmount(mountpoint: &Path, lazy: bool) -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return umount2(mountpoint, lazy);
    }
    let flag = if lazy { "-uz" } else { "-u" };
    match Command::new("fusermount3").arg(flag).arg(mountpoint).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(anyhow!("cannot unmount {}: {}", mountpoint.display(), String::from_utf8_lossy(&o.stderr).trim())),
        Err(e) => Err(anyhow!(
            "cannot run fusermount3 to unmount {} ({e}): install fuse3, or unmount as root",
            mountpoint.display()
        )),
    }
}

fn umount2(mountpoint: &Path, lazy: bool) -> anyhow::Result<()> {
    let c = std::ffi::CString::new(mountpoint.as_os_str().as_encoded_bytes())?;
    let flags = if lazy { libc::MNT_DETACH } else { 0 };
    // SAFETY: c is a valid C string.
    if unsafe { libc::umount2(c.as_ptr(), flags) } == 0 {
        Ok(())
    } else {
        Err(anyhow!("cannot unmount {}: {}", mountpoint.display(), std::io::Error::last_os_error()))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn mountinfo_paths_are_unescaped() {
        assert_eq!(super::unescape_mountinfo("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(super::unescape_mountinfo("/back\\134slash"), "/back\\slash");
        assert_eq!(super::unescape_mountinfo("/plain"), "/plain");
    }
}
