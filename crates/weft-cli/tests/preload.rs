//! The interception library: real programs (tar, cp, make and cc, sqlite3, git, python,
//! fio --verify, a shell passing descriptors across exec) give the same results under
//! LD_PRELOAD=libweft_preload.so as through the FUSE mount and in a local directory; and a
//! process whose calls go through libweft and a FUSE mount see each other's writes.

mod common;
use common::*;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn preload_lib() -> PathBuf {
    shared_lib_dir("libweft_preload.so").join("libweft_preload.so")
}

fn programs_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/preload/programs.sh")
}

/// programs.sh on `dir`, under the interception library when `preload`.
fn run_programs(dir: &Path, preload: bool) -> Output {
    std::fs::create_dir_all(dir).unwrap();
    let mut c = Command::new("sh");
    c.arg(programs_script()).arg(dir);
    if preload {
        c.env("LD_PRELOAD", preload_lib()).env("WEFT_PRELOAD_DEBUG", "1");
    }
    let out = c.output().expect("run programs.sh");
    assert!(
        out.status.success(),
        "programs.sh in {} (preload {preload}) failed:\n{}\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn programs_give_the_same_results_through_the_library_the_mount_and_a_local_directory() {
    let local = tempfile::tempdir().unwrap();
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let mnt = c.mount();
    let baseline = run_programs(&local.path().join("run"), false);
    let mounted = run_programs(&mnt.join("mounted"), false);
    let intercepted = run_programs(&mnt.join("intercepted"), true);
    let text = |o: &Output| String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(text(&mounted), text(&baseline), "the mount against a local directory");
    assert_eq!(text(&intercepted), text(&baseline), "the interception library against a local directory");
    let said = String::from_utf8_lossy(&intercepted.stderr);
    assert!(said.contains("connected to"), "the programs went through libweft:\n{said}");
    assert!(said.contains("/intercepted/src/big.bin = "), "a file opened by libweft:\n{said}");
    // What the library left is what the mount shows.
    assert_eq!(
        std::fs::read(mnt.join("intercepted/src/big.bin")).unwrap(),
        std::fs::read(mnt.join("mounted/src/big.bin")).unwrap()
    );
}

/// The close samples of job `job` in `get-param mdt.*.job_stats` output (0 if none).
fn closes_of(stats: &str, job: &str) -> u64 {
    let Some(at) = stats.find(&format!("job_id:          {job}\n")) else { return 0 };
    let block = &stats[at..];
    let block = &block[..block[1..].find("- job_id:").map_or(block.len(), |n| n + 1)];
    let line = block.lines().find(|l| l.trim_start().starts_with("close:")).unwrap_or("");
    line.split("samples:").nth(1).and_then(|r| r.split(',').next()).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
}

/// A line from the child, with a bound on the wait.
fn line_from(reader: &mut impl BufRead) -> String {
    let mut line = String::new();
    reader.read_line(&mut line).expect("read from the intercepted process");
    line.trim_end().to_string()
}

#[test]
fn an_intercepted_process_and_a_mount_see_each_others_writes() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let mnt = c.mount();
    let dir = mnt.join("shared");
    std::fs::create_dir(&dir).unwrap();
    // The intercepted side keeps one client (one process) through the whole exchange.
    let script = r#"
import os, sys
d = sys.argv[1]
def say(s):
    print(s, flush=True)
with open(f"{d}/a", "wb") as f:
    f.write(b"one" * 1000)
say("wrote a")
sys.stdin.readline()
say(open(f"{d}/b", "rb").read().decode() + " " + str(os.path.getsize(f"{d}/a")))
fd = os.open(f"{d}/a", os.O_RDWR)
os.pwrite(fd, b"THREE", 0)
say("patched")
sys.stdin.readline()
os.lseek(fd, 0, os.SEEK_SET)
say(os.read(fd, 12).decode())
os.close(fd)
os.rename(f"{d}/b", f"{d}/c")
say(" ".join(sorted(os.listdir(d))))
"#;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .arg(&dir)
        .env("LD_PRELOAD", preload_lib())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start python");
    let mut to = child.stdin.take().unwrap();
    let mut from = BufReader::new(child.stdout.take().unwrap());
    assert_eq!(line_from(&mut from), "wrote a");
    // The close went to the MDS when the program closed (not at its exit): the MDT's job
    // statistics count it under the process's job id while it still runs.
    let stats = weft_ok(&["get-param", "mdt.*.job_stats", "--mgs", &c.mgs_address]);
    assert!(closes_of(&stats, "python3.0") >= 1, "the close reached the MDS:\n{stats}");
    assert_eq!(std::fs::read(dir.join("a")).unwrap(), b"one".repeat(1000), "the mount reads what libweft wrote");
    std::fs::write(dir.join("b"), b"from the mount").unwrap();
    std::fs::OpenOptions::new().append(true).open(dir.join("a")).unwrap().write_all(b"more").unwrap();
    writeln!(to, "go").unwrap();
    assert_eq!(line_from(&mut from), "from the mount 3004", "libweft reads what the mount wrote, and its size");
    assert_eq!(line_from(&mut from), "patched");
    assert_eq!(&std::fs::read(dir.join("a")).unwrap()[..8], b"THREEeon", "the mount sees the overwrite at once");
    let a = std::fs::OpenOptions::new().write(true).open(dir.join("a")).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&a, b"4", 5).unwrap();
    drop(a);
    writeln!(to, "go").unwrap();
    assert_eq!(line_from(&mut from), "THREE4oneone", "libweft sees the mount's overwrite at once");
    assert_eq!(line_from(&mut from), "a c");
    assert!(child.wait().unwrap().success());
    assert!(!dir.join("b").exists() && dir.join("c").exists(), "the mount sees libweft's rename");
}
