//! The two ways the kernel hands a mount its requests: reads of /dev/fuse, and io_uring
//! (Linux 6.14+ with `fuse.enable_uring`, a queue per CPU). One cluster, a mount of each
//! kind: the same work through either gives the same file system.

mod common;
use common::*;
use std::fs;
use std::path::Path;

/// Files of awkward sizes, a tree, links, renames and an xattr under `dir`.
fn work(dir: &Path, seed: u64) {
    fs::create_dir_all(dir.join("tree/a/b")).unwrap();
    for (i, len) in [0usize, 1, 4097, 3 << 20].into_iter().enumerate() {
        fs::write(dir.join(format!("tree/a/f{i}")), pattern(seed + i as u64, 0, len)).unwrap();
    }
    fs::write(dir.join("tree/a/b/moved"), b"before").unwrap();
    fs::rename(dir.join("tree/a/b/moved"), dir.join("tree/renamed")).unwrap();
    std::os::unix::fs::symlink("a/f1", dir.join("tree/link")).unwrap();
    fs::hard_link(dir.join("tree/a/f2"), dir.join("tree/hard")).unwrap();
    sh(dir, "python3 -c \"import os; os.setxattr('tree/a/f0', 'user.note', b'hello')\"");
}

fn check(dir: &Path, seed: u64) {
    for (i, len) in [0usize, 1, 4097, 3 << 20].into_iter().enumerate() {
        let got = fs::read(dir.join(format!("tree/a/f{i}"))).unwrap();
        assert!(got == pattern(seed + i as u64, 0, len), "{}: f{i} differs", dir.display());
    }
    assert_eq!(fs::read(dir.join("tree/renamed")).unwrap(), b"before");
    assert!(!dir.join("tree/a/b/moved").exists());
    assert_eq!(fs::read_link(dir.join("tree/link")).unwrap(), Path::new("a/f1"));
    assert_eq!(fs::read(dir.join("tree/link")).unwrap(), pattern(seed + 1, 0, 1));
    use std::os::unix::fs::MetadataExt;
    assert_eq!(fs::metadata(dir.join("tree/hard")).unwrap().nlink(), 2);
    let note = sh(dir, "python3 -c \"import os; print(os.getxattr('tree/a/f0', 'user.note').decode())\"");
    assert_eq!(note.trim(), "hello");
}

#[test]
fn dev_fuse_and_io_uring_mounts_serve_the_same_file_system() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let ring = c.mount_with("timeout=60,uring=on");
    let dev = c.mount_with("timeout=60,uring=off");
    // A request waits for INIT, after which each mount has said how it takes requests.
    fs::metadata(&ring).unwrap();
    fs::metadata(&dev).unwrap();
    let ring_log = fs::read_to_string(&c.mounts[0].log).unwrap();
    let dev_log = fs::read_to_string(&c.mounts[1].log).unwrap();
    if weft_fuse::uring_offered() == Some(true) {
        assert!(ring_log.contains("FUSE requests come through io_uring"), "uring=on mount log:\n{ring_log}");
    } else {
        assert!(ring_log.contains("FUSE requests come through /dev/fuse"), "uring=on mount log:\n{ring_log}");
    }
    assert!(!dev_log.contains("through io_uring"), "uring=off mount log:\n{dev_log}");

    // Written through each, read back through both.
    work(&ring.join("r"), 10);
    work(&dev.join("d"), 20);
    for m in [&ring, &dev] {
        check(&m.join("r"), 10);
        check(&m.join("d"), 20);
    }
    // A tree copied from one mount to the other with tar is the same tree.
    let copied = sh(
        &ring,
        &format!(
            "mkdir -p {dst} && tar -C r -cf - . | tar -C {dst} -xf - && diff -r r {dst} && echo same",
            dst = dev.join("copy").display()
        ),
    );
    assert_eq!(copied.trim(), "same");

    // Many creates at once from two processes, through the queues of both CPUs.
    let counts = sh(
        &ring,
        "mkdir many && for p in 1 2; do (for i in $(seq 1 500); do : > many/$p.$i; done) & done; wait; ls many | wc -l",
    );
    assert_eq!(counts.trim(), "1000");
    assert_eq!(fs::read_dir(dev.join("many")).unwrap().count(), 1000, "the other mount sees every name");
    if weft_fuse::uring_offered() == Some(true) {
        // The ring is in use, not just asked for: its threads did the work (the /dev/fuse
        // threads also run, for forgets and interrupts).
        let pid = c.mount_pid(&ring);
        let ring_ticks: u64 = fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .filter_map(|t| {
                let t = t.ok()?.path();
                let comm = fs::read_to_string(t.join("comm")).ok()?;
                let stat = fs::read_to_string(t.join("stat")).ok()?;
                let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
                comm.starts_with("fuser-u")
                    .then(|| fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap())
            })
            .sum();
        assert!(ring_ticks > 0, "no io_uring thread of the uring=on mount ran");
    }

    // A lock wait answered later, from another thread, while the mount goes on serving.
    let waited = sh(
        &ring,
        r#"python3 - <<'EOF'
import fcntl, os, subprocess, time
fd = os.open("lockfile", os.O_CREAT | os.O_RDWR, 0o644)
fcntl.lockf(fd, fcntl.LOCK_EX)
waiter = subprocess.Popen(["python3", "-c",
    "import fcntl, os; fd = os.open('lockfile', os.O_RDWR); fcntl.lockf(fd, fcntl.LOCK_EX); print('granted')"],
    stdout=subprocess.PIPE, text=True)
time.sleep(0.5)
# The waiter holds a request; other requests still get answers.
os.listdir("many")
assert waiter.poll() is None, "the lock was granted while held"
fcntl.lockf(fd, fcntl.LOCK_UN)
print(waiter.communicate(timeout=30)[0].strip())
EOF"#,
    );
    assert_eq!(waited.trim(), "granted");
}

/// The kernel reads ahead of a reader in large pieces on either kind of mount: the mount
/// raises its device's read-ahead only after FUSE_INIT, whose answer would lower it again.
/// Without it every large read over TCP goes out in 128 KiB pieces.
#[test]
fn a_mount_reads_ahead_in_large_pieces() {
    use std::os::unix::fs::MetadataExt;
    let mut c = Cluster::single_node(&weft_bin(), 1);
    for options in ["timeout=60,uring=on", "timeout=60,uring=off"] {
        let m = c.mount_with(options);
        let dev = fs::metadata(&m).unwrap().dev();
        let sysfs = format!("/sys/class/bdi/{}:{}/read_ahead_kb", libc::major(dev), libc::minor(dev));
        let want = weft_fuse::limits::READ_AHEAD_KB.to_string();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut got = String::new();
        while std::time::Instant::now() < deadline {
            got = fs::read_to_string(&sysfs).unwrap().trim().to_string();
            if got == want {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert_eq!(got, want, "{sysfs} of the mount with {options}");
    }
}
