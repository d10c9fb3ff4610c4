//! fallocate(2) on a mount against a local directory: allocate, keep the size, punch holes,
//! zero ranges, on a 4-stripe file and a composite one (data on the MDT, then one OST, then
//! four), read back here and through a second mount.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

/// Each step prints `NAME SIZE MD5 BLOCKS`; a mount must match a local directory on all but
/// the blocks (another file system allocates differently), which `check_blocks` weighs.
const SCRIPT: &str = r#"
step() { echo "$1 $(stat -c %s "$2") $(md5sum < "$2" | cut -c1-32) $(stat -c %b "$2")"; }
fallocate -l 10M a && step alloc a
yes 0123456789abcdef | head -c 6M > d && step data d
fallocate -p -o 1M -l 2M d && step punch d
fallocate -z -o 4M -l 1M d && step zero d
fallocate -z -o 5M -l 3M d && step zero-grow d
fallocate -n -o 8M -l 4M d && step keep d
fallocate -p -o 7M -l 10M d && step punch-past-end d
printf 0123456789 > s && fallocate -p -o 5M -l 1M s && step punch-no-objects s
fallocate -n -o 6M -l 1M s && step keep-no-objects s
fallocate -o 6M -l 1M s && step alloc-far s
fallocate -p -o 30000 -l 100000 s && step punch-dom s
python3 - <<'EOF'
import ctypes, hashlib, os
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open("w", os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b"x" * (2 << 20))
# Punch on the descriptor that wrote: the write, perhaps still on its way, must not win.
if libc.fallocate(fd, 3, ctypes.c_long(512 << 10), ctypes.c_long(512 << 10)) != 0:
    print("punch errno", ctypes.get_errno())
data = os.pread(fd, 4 << 20, 0)
print("same-fd", len(data), hashlib.md5(data).hexdigest(), data.count(b"\0"))
os.close(fd)
EOF
"#;

fn run_script(dir: &Path) -> Vec<Vec<String>> {
    let out = sh(dir, SCRIPT);
    out.lines().map(|l| l.split_whitespace().map(str::to_string).collect()).collect()
}

/// Steps without their block counts.
fn bytes_only(steps: &[Vec<String>]) -> Vec<String> {
    steps.iter().map(|s| s.iter().take(3).cloned().collect::<Vec<_>>().join(" ")).collect()
}

fn blocks(steps: &[Vec<String>], name: &str) -> u64 {
    let step = steps.iter().find(|s| s[0] == name).unwrap_or_else(|| panic!("no step {name}: {steps:?}"));
    step[3].parse().unwrap()
}

/// Holes take fewer blocks and allocations take theirs, whatever the file system.
fn check_blocks(steps: &[Vec<String>], at: &str) {
    assert!(blocks(steps, "alloc") * 512 >= 10 << 20, "{at}: an allocation of 10 MiB has its blocks: {steps:?}");
    assert!(blocks(steps, "punch") < blocks(steps, "data"), "{at}: a 2 MiB hole frees blocks: {steps:?}");
    assert!(
        blocks(steps, "keep") >= blocks(steps, "zero-grow") + 4 * 2048 - 256,
        "{at}: -n (keep size) allocates: {steps:?}"
    );
    assert!(blocks(steps, "punch-past-end") < blocks(steps, "keep"), "{at}: {steps:?}");
}

#[test]
fn fallocate_modes_on_striped_and_composite_files_match_a_local_directory() {
    let mut c = Cluster::single_node(&weft_bin(), 4);
    let m = c.mount();
    let other = c.mount();
    let local = tempfile::tempdir().unwrap();
    let expect = run_script(local.path());
    check_blocks(&expect, "local");

    for (name, layout) in [
        ("striped", &["-c", "4", "-S", "1M"][..]),
        ("pfl", &["-E", "64K", "-L", "mdt", "-E", "4M", "-c", "1", "-E", "-1", "-c", "4"][..]),
    ] {
        let dir = m.join(name);
        std::fs::create_dir(&dir).unwrap();
        let mut args = vec!["setstripe"];
        args.extend_from_slice(layout);
        args.push(dir.to_str().unwrap());
        weft_ok(&args);
        let got = run_script(&dir);
        assert_eq!(bytes_only(&got), bytes_only(&expect), "{name}: sizes and bytes as on a local directory");
        check_blocks(&got, name);
        // The same bytes through another client, and after this one's caches are gone.
        for f in ["a", "d", "s", "w"] {
            let want = std::fs::read(local.path().join(f)).unwrap();
            assert!(std::fs::read(other.join(name).join(f)).unwrap() == want, "{name}/{f} on a second mount");
        }
        let s = std::fs::read(other.join(name).join("s")).unwrap();
        assert_eq!(s.len(), 7 << 20);
    }

    // A hole in components without objects gives them none; an allocation there does.
    let t = m.join("pfl/t");
    let initialized = || weft_ok(&["getstripe", t.to_str().unwrap()]).matches("lcme_flags:          init").count();
    std::fs::write(&t, b"x").unwrap();
    sh(&m, "fallocate -p -o 5M -l 1M pfl/t");
    assert_eq!(initialized(), 1, "only the MDT component");
    sh(&m, "fallocate -n -o 5M -l 1M pfl/t");
    assert_eq!(initialized(), 3);
    assert_eq!(std::fs::metadata(other.join("pfl/t")).unwrap().len(), 1, "-n kept the size");

    // Modes that move bytes are refused, as the errno says.
    let collapse = Command::new("fallocate").args(["-c", "-o", "0", "-l", "1M"]).arg(m.join("striped/d")).output();
    let err = String::from_utf8_lossy(&collapse.unwrap().stderr).into_owned();
    assert!(err.contains("Operation not supported"), "{err}");
}
