//! Access times under `-o noatime`, `relatime` (the default) and `strictatime`, as a local
//! file system mounted the same way keeps them, seen from the mount that reads and from a
//! second mount.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Reads, writes and stats one file through `A` and stats it through `B` (for the local
/// directory, the same path), and says after each step whether atime moved in either view.
const SCRIPT: &str = r#"
import os, sys, time
a, b = sys.argv[1], sys.argv[2]
f, fb = os.path.join(a, 'f'), os.path.join(b, 'f')
def at(p): return os.stat(p).st_atime_ns
def read(flags=0):
    fd = os.open(f, os.O_RDONLY | flags)
    os.read(fd, 1 << 20)
    os.close(fd)
def write():
    with open(f, 'ab') as w: w.write(b'more')
def step(name, action):
    a0, b0 = at(f), at(fb)
    time.sleep(0.05)  # past the kernel's coarse clock tick, so that a move shows
    action()
    a1, b1 = at(f), at(fb)
    moved = lambda x, y: 'moved' if x != y else 'kept'
    print(f"{name}: {moved(a0, a1)}, second view {moved(b0, b1)}, views {'agree' if a1 == b1 else 'differ'}")
with open(f, 'wb') as w: w.write(b'x' * 10000)
st = os.stat(f)
os.utime(f, ns=(st.st_mtime_ns - 3600 * 10**9, st.st_mtime_ns))
step('first read after the change', read)
step('second read', read)
step('write', write)
step('read after the write', read)
step('O_NOATIME read', lambda: read(os.O_NOATIME))
now = time.time_ns()
os.utime(f, ns=(now - 2 * 86400 * 10**9, now - 3 * 86400 * 10**9))
step('read of a day-old atime, unchanged since', read)
step('read again', read)
"#;

/// A tmpfs mounted with `mode` at a directory of its own; unmounted when dropped.
struct LocalMount {
    dir: tempfile::TempDir,
}

impl LocalMount {
    fn new(mode: &str) -> LocalMount {
        let dir = tempfile::Builder::new().prefix("weft-atime-").tempdir().unwrap();
        run(Command::new("mount").args(["-t", "tmpfs", "-o", &format!("{mode},size=16m"), "tmpfs"]).arg(dir.path()));
        LocalMount { dir }
    }
}

impl Drop for LocalMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

fn script(a: &Path, b: &Path) -> String {
    let file = tempfile::Builder::new().prefix("weft-atime-").suffix(".py").tempfile().unwrap();
    std::fs::write(file.path(), SCRIPT).unwrap();
    let out = Command::new("python3").arg(file.path()).arg(a).arg(b).output().unwrap();
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The atime words /proc/mounts shows for the mount at `m` (none for strictatime).
fn atime_options(m: &Path) -> Vec<String> {
    let opts = run(Command::new("findmnt").args(["-n", "-o", "OPTIONS"]).arg(m));
    opts.trim().split(',').filter(|o| o.ends_with("atime")).map(str::to_string).collect()
}

#[test]
fn reads_move_atime_as_a_local_file_system_mounted_the_same_way() {
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test mounts a tmpfs to compare with: run it as root");
    let mut c = Cluster::single_node(&weft_bin(), 2);
    for mode in ["noatime", "relatime", "strictatime"] {
        let local = LocalMount::new(mode);
        let (a, b): (PathBuf, PathBuf) = (c.mount_with(&format!("timeout=30,{mode}")), c.mount_with("timeout=30"));
        let dir = a.join(mode);
        std::fs::create_dir(&dir).unwrap();
        let expected = script(local.dir.path(), local.dir.path());
        assert!(expected.lines().count() == 7 && !expected.contains("Error"), "{mode}, local: {expected}");
        let got = script(&dir, &b.join(mode));
        assert_eq!(got, expected, "{mode}: the mount (left) against a tmpfs mounted {mode} (right)");
        assert_eq!(atime_options(&a), atime_options(local.dir.path()), "{mode}: the mount's flags");
    }
}
