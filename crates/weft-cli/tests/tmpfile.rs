//! open(2) with O_TMPFILE: an unnamed file that lives while open, named by linkat(2) (through
//! /proc/self/fd or AT_EMPTY_PATH) or gone with its last close, objects and all; the same
//! answers as a local directory's.

mod common;
use common::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Unnamed files in `dir` (relative to the working directory): two named, one O_EXCL that
/// may not be, one never named; prints what a program sees.
const SCRIPT: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, AT_SYMLINK_FOLLOW, AT_EMPTY_PATH = -100, 0x400, 0x1000
data = bytes((i * 7 + i // 4096) % 251 for i in range(3 << 20))

def linkat(fd, name, how):
    if how == "proc":
        r = libc.linkat(AT_FDCWD, f"/proc/self/fd/{fd}".encode(), AT_FDCWD, name.encode(), AT_SYMLINK_FOLLOW)
    else:
        r = libc.linkat(fd, b"", AT_FDCWD, name.encode(), AT_EMPTY_PATH)
    return "ok" if r == 0 else os.strerror(ctypes.get_errno())

for name, how in [("dir/named", "proc"), ("dir/named2", "empty")]:
    fd = os.open("dir", os.O_TMPFILE | os.O_RDWR, 0o640)
    os.write(fd, data)
    st = os.fstat(fd)
    print(name, "before", st.st_nlink, st.st_size, oct(st.st_mode), os.pread(fd, len(data), 0) == data)
    print(name, "link", linkat(fd, name, how), os.fstat(fd).st_nlink)
    os.close(fd)
fd = os.open("dir", os.O_TMPFILE | os.O_RDWR | os.O_EXCL, 0o600)
print("excl link", linkat(fd, "dir/excl", "empty"))
os.close(fd)
print("listing", sorted(os.listdir("dir")))
print("a file is not a directory:", end=" ")
try:
    os.open("dir/named", os.O_TMPFILE | os.O_RDWR)
except OSError as e:
    print(e.strerror)
sys.stdout.flush()
"#;

/// Never named: written and synced, then the caller looks at the objects, then it closes.
const UNNAMED: &str = r#"
import os, sys
fd = os.open("dir", os.O_TMPFILE | os.O_RDWR, 0o600)
os.write(fd, b"u" * (2 << 20))
os.fsync(fd)
print("written", flush=True)
sys.stdin.readline()
os.close(fd)
"#;

/// The object files of every OST under `data` (`.../O/<seq>/d<n>/<oid>`).
fn object_files(data: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut todo = vec![data.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if path.parent().and_then(|p| p.parent()).and_then(|p| p.parent()).is_some_and(|o| o.ends_with("O"))
                && path.file_name().is_some_and(|n| n.to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
            {
                out.insert(path);
            }
        }
    }
    out
}

fn python(dir: &Path, script: &str) -> String {
    let local_script = dir.join(".t.py");
    std::fs::write(&local_script, script).unwrap();
    let out = sh(dir, "python3 .t.py");
    std::fs::remove_file(local_script).unwrap();
    out
}

#[test]
fn unnamed_files_live_while_open_and_are_named_by_linkat_as_on_a_local_directory() {
    let mut c = Cluster::single_node(&weft_bin(), 4);
    let m = c.mount();
    let other = c.mount();
    let local = tempfile::tempdir().unwrap();
    let mut outputs = Vec::new();
    for root in [local.path(), m.as_path()] {
        std::fs::create_dir(root.join("dir")).unwrap();
        outputs.push(python(root, SCRIPT));
    }
    assert_eq!(outputs[1], outputs[0], "the mount answers as a local directory");
    assert!(outputs[1].contains("dir/named link ok 1") && outputs[1].contains("['named', 'named2']"), "{}", outputs[1]);

    // Another client reads the named files.
    let data: Vec<u8> = (0..3usize << 20).map(|i| ((i * 7 + i / 4096) % 251) as u8).collect();
    for name in ["named", "named2"] {
        assert!(std::fs::read(other.join("dir").join(name)).unwrap() == data, "{name} through another mount");
    }

    // One never named leaves nothing: no entry, and its objects are destroyed.
    let osts = c.servers[0].data_dir.clone();
    let before = object_files(&osts);
    let mut child = std::process::Command::new("python3")
        .args(["-c", UNNAMED])
        .current_dir(&m)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.as_mut().unwrap()), &mut line).unwrap();
    assert_eq!(line, "written\n");
    let open = object_files(&osts);
    let made: Vec<_> = open.difference(&before).collect();
    assert!(!made.is_empty(), "the unnamed file's data is on an OST while it is open");
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let start = Instant::now();
    while object_files(&osts) != before {
        assert!(start.elapsed() < Duration::from_secs(30), "objects {made:?} not destroyed after the close");
        std::thread::sleep(Duration::from_millis(200));
    }
    let listed: Vec<_> = std::fs::read_dir(other.join("dir")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(listed.len(), 2, "{listed:?}");
}
