//! Weft installed as a site installs it: `make install`'s script into a staging root and out
//! again, its systemd units checked by systemd itself, and mounts made by mount(8) through
//! the helper `mount.fuse.weft` (a command line and an fstab line). mount(8) looks for
//! helpers in /sbin only, so the mounts happen in a mount namespace of the test's own with
//! the installed helper bound over /sbin there: the host's /sbin and mount table stay as
//! they are, and everything the namespace holds goes when the test ends, failed or not.
//!
//! Runs as root (CI does), with no terminal and no systemd running: it needs util-linux
//! (`unshare`, `nsenter`, `mount`), and uses `systemd-analyze` when it is there.

mod common;
use common::*;
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Longest a mount through mount(8) may take to fail when no management service answers:
/// the helper gives up after 5 s (`MOUNT_MGS_ANSWER_S_MAX`), with room for a loaded machine.
const UNREACHABLE_FAIL_S_MAX: u64 = 12;
/// Longest one command (install.sh, or one in the namespace) may run before the test stops it.
const COMMAND_S_MAX: u64 = 60;

fn install_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install.sh")
}

/// `scripts/install.sh ACTION` with the debug binary under test (no release build), the
/// settings given and none inherited from the environment.
fn install_sh(action: &str, settings: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new("timeout");
    cmd.args(["-s", "KILL", &COMMAND_S_MAX.to_string(), "bash"])
        .arg(install_script())
        .arg(action)
        .env("WEFT_BIN", weft_bin())
        .stdin(Stdio::null());
    for var in ["PREFIX", "DESTDIR", "BINDIR", "SBINDIR", "UNITDIR"] {
        cmd.env_remove(var);
    }
    for (var, value) in settings {
        cmd.env(var, value);
    }
    let out = cmd.output().expect("run install.sh");
    assert!(
        out.status.success(),
        "install.sh {action} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Every file and symbolic link under `root`, as paths relative to it, sorted.
fn files_under(root: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let path = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(root, &path, out);
            } else {
                out.push(path.strip_prefix(root).expect("under root").display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// Every directory under `root`, relative to it, sorted.
fn dirs_under(root: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.push(e.path().strip_prefix(root).expect("under root").display().to_string());
                walk(root, &e.path(), out);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

#[test]
fn a_staged_install_puts_the_binary_helper_and_units_and_uninstall_takes_exactly_them() {
    let tmp = tempfile::Builder::new().prefix("weft-install-").tempdir().unwrap();
    let stage = tmp.path().join("stage");
    // Something of the site's own beside where Weft goes: uninstall must leave it.
    std::fs::create_dir_all(stage.join("usr/local/bin")).unwrap();
    std::fs::write(stage.join("usr/local/bin/site-tool"), b"#!/bin/sh\n").unwrap();
    let before_dirs = dirs_under(&stage);

    install_sh("install", &[("DESTDIR", &stage)]);
    assert_eq!(
        files_under(&stage),
        [
            "sbin/mount.fuse.weft",
            "usr/local/bin/site-tool",
            "usr/local/bin/weft",
            "usr/local/lib/systemd/system/weft-mount@.service",
            "usr/local/lib/systemd/system/weft-server@.service",
            "usr/local/share/weft/installed",
        ]
    );
    let bin = stage.join("usr/local/bin/weft");
    let meta = std::fs::metadata(&bin).unwrap();
    assert_eq!(meta.len(), std::fs::metadata(weft_bin()).unwrap().len(), "the binary given");
    assert_eq!(meta.permissions().mode() & 0o777, 0o755);
    // The helper names the final place of the binary, not the staging root.
    assert_eq!(std::fs::read_link(stage.join("sbin/mount.fuse.weft")).unwrap(), Path::new("/usr/local/bin/weft"));
    let server = std::fs::read_to_string(stage.join("usr/local/lib/systemd/system/weft-server@.service")).unwrap();
    let mount = std::fs::read_to_string(stage.join("usr/local/lib/systemd/system/weft-mount@.service")).unwrap();
    assert!(server.contains("\nExecStart=/usr/local/bin/weft server --config /etc/weft/%i.toml\n"), "{server}");
    assert!(
        mount.contains("\nExecStart=/usr/local/bin/weft mount ${WEFT_SOURCE} %f -f -o ${WEFT_OPTIONS}\n"),
        "{mount}"
    );
    for unit in [&server, &mount] {
        for line in ["Restart=on-failure", "After=network-online.target", "Wants=network-online.target"] {
            assert!(unit.lines().any(|l| l == line), "{line} missing:\n{unit}");
        }
    }

    install_sh("uninstall", &[("DESTDIR", &stage)]);
    assert_eq!(files_under(&stage), ["usr/local/bin/site-tool"], "only what install put is gone");
    assert_eq!(dirs_under(&stage), before_dirs, "the directories install made are gone, the site's stay");

    // Another prefix: the units name its binary.
    install_sh("install", &[("DESTDIR", &stage), ("PREFIX", Path::new("/opt/weft"))]);
    let server = std::fs::read_to_string(stage.join("opt/weft/lib/systemd/system/weft-server@.service")).unwrap();
    assert!(server.contains("\nExecStart=/opt/weft/bin/weft server"), "{server}");
    assert_eq!(std::fs::read_link(stage.join("sbin/mount.fuse.weft")).unwrap(), Path::new("/opt/weft/bin/weft"));
    install_sh("uninstall", &[("DESTDIR", &stage), ("PREFIX", Path::new("/opt/weft"))]);
    assert_eq!(files_under(&stage), ["usr/local/bin/site-tool"]);

    // A staging root that does not exist yet is made.
    let fresh = tmp.path().join("fresh/stage");
    install_sh("install", &[("DESTDIR", &fresh)]);
    assert!(fresh.join("usr/local/bin/weft").is_file());
    install_sh("uninstall", &[("DESTDIR", &fresh)]);
    assert_eq!(files_under(&fresh), Vec::<String>::new());
}

#[test]
fn systemd_finds_nothing_wrong_in_the_units() {
    let Ok(version) = Command::new("systemd-analyze").arg("--version").stdin(Stdio::null()).output() else {
        eprintln!("SKIPPED: systemd-analyze is not installed here; the units were not verified");
        return;
    };
    assert!(version.status.success());
    let tmp = tempfile::Builder::new().prefix("weft-install-").tempdir().unwrap();
    let prefix = tmp.path().join("prefix");
    // Installed for real into a prefix of its own, so that ExecStart names a binary that
    // exists (verify checks it).
    install_sh("install", &[("PREFIX", &prefix), ("SBINDIR", &tmp.path().join("sbin"))]);
    let units = prefix.join("lib/systemd/system");
    for unit in ["weft-server@.service", "weft-mount@.service"] {
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .arg(units.join(unit))
            .stdin(Stdio::null())
            .output()
            .expect("run systemd-analyze");
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(
            out.status.success() && said.trim().is_empty(),
            "systemd-analyze verify {unit} ({}):\n{said}",
            out.status
        );
    }
}

/// A mount namespace of the test's own, with `sbin` bound over /sbin in it: a shell in
/// it waits for its standard input to close, and commands join it with nsenter. Dropping
/// it unmounts what it holds and kills every process in it.
struct Namespace {
    holder: Child,
    /// Closed on drop: the holder's shell then exits.
    holder_stdin: Option<ChildStdin>,
    mnt_ns: PathBuf,
    mounts: Vec<PathBuf>,
}

impl Namespace {
    fn with_sbin(sbin: &Path) -> Namespace {
        let mut holder = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
            .arg("mount --bind \"$1\" /sbin && echo ready && read -r _")
            .arg("sh")
            .arg(sbin)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run unshare (util-linux)");
        let holder_stdin = holder.stdin.take();
        let mut line = String::new();
        let _ = BufReader::new(holder.stdout.take().expect("piped")).read_line(&mut line);
        let mut ns = Namespace {
            mnt_ns: PathBuf::from(format!("/proc/{}/ns/mnt", holder.id())),
            holder,
            holder_stdin,
            mounts: Vec::new(),
        };
        if line.trim() != "ready" {
            let _ = ns.holder.kill();
            let mut said = String::new();
            if let Some(mut e) = ns.holder.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut said);
            }
            panic!("no private mount namespace with the helper in /sbin: {said}");
        }
        let ours = std::fs::read_link("/proc/self/ns/mnt").unwrap();
        assert_ne!(std::fs::read_link(&ns.mnt_ns).unwrap(), ours, "the holder runs in a namespace of its own");
        ns
    }

    /// `ARGS` run in the namespace (with a deadline), whatever its exit status.
    fn run(&self, args: &[&str]) -> Output {
        Command::new("nsenter")
            .arg("-t")
            .arg(self.holder.id().to_string())
            .args(["-m", "--", "timeout", "-s", "KILL", &COMMAND_S_MAX.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run nsenter (util-linux)")
    }

    fn sh(&self, script: &str) -> Output {
        self.run(&["sh", "-c", script])
    }

    /// The /proc/mounts line of `dir` as the namespace sees it.
    fn mounts_line(&self, dir: &Path) -> Option<String> {
        let out = self.run(&["cat", "/proc/self/mounts"]);
        let want = dir.display().to_string();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.split(' ').nth(1) == Some(want.as_str()))
            .map(String::from)
    }

    fn processes(&self) -> Vec<i32> {
        let Ok(ns) = std::fs::read_link(&self.mnt_ns) else { return Vec::new() };
        let holder = self.holder.id() as i32;
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| *pid != holder)
            .filter(|pid| std::fs::read_link(format!("/proc/{pid}/ns/mnt")).is_ok_and(|n| n == ns))
            .collect()
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        for m in self.mounts.iter().rev() {
            let _ = self.run(&["umount", "-l", &m.display().to_string()]);
        }
        // The mounts' processes (and anything else started in the namespace): by id.
        for pid in self.processes() {
            // SAFETY: kill(2) of a process in the namespace this test made.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        self.holder_stdin.take();
        let start = Instant::now();
        while self.holder.try_wait().ok().flatten().is_none() && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// A loopback address of this test's own whose port 9800 (the default, which Lustre's
/// `HOST@tcp:/FSNAME` implies) forwards to the management service at `to`, so that such a
/// source mounts the test's cluster. The forwarding threads end with the test process.
fn default_port_forward(to: &str) -> String {
    let pid = std::process::id();
    let ip = format!("127.{}.{}.{}", 100 + pid % 100, (pid / 100) % 250 + 1, (pid / 25_000) % 250 + 1);
    let listener = TcpListener::bind((ip.as_str(), 9800)).unwrap_or_else(|e| panic!("listen on {ip}:9800: {e}"));
    let to = to.to_string();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(&to) else { continue };
            for (mut from, mut into) in
                [(client.try_clone().expect("clone"), server.try_clone().expect("clone")), (server, client)]
            {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut into);
                    let _ = into.shutdown(std::net::Shutdown::Write);
                });
            }
        }
    });
    ip
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn mount8_mounts_through_the_helper_from_a_command_line_and_an_fstab_line() {
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test makes a mount namespace and mounts: run it as root");
    let c = Cluster::single_node(&weft_bin(), 1);
    let tmp = tempfile::Builder::new().prefix("weft-install-").tempdir().unwrap();
    let prefix = tmp.path().join("prefix");
    let sbin = tmp.path().join("sbin");
    install_sh("install", &[("PREFIX", &prefix), ("SBINDIR", &sbin)]);
    let mut ns = Namespace::with_sbin(&sbin);
    let tmp_s = tmp.path().display().to_string();
    let mgs = &c.mgs_address;

    // mount -t fuse.weft ADDR DIR: the helper returns once mounted.
    let dir = tmp.path().join("cmdline");
    std::fs::create_dir(&dir).unwrap();
    let dir_s = dir.display().to_string();
    ns.mounts.push(dir.clone());
    let log = format!("log={tmp_s}/cmdline.log");
    let out = ns.run(&["mount", "-t", "fuse.weft", mgs, &dir_s, "-o", &format!("noatime,{log}")]);
    assert!(out.status.success(), "mount -t fuse.weft: {}", text(&out));
    let line = ns.mounts_line(&dir).unwrap_or_else(|| panic!("{dir_s} not in the namespace's /proc/mounts"));
    let fields: Vec<&str> = line.split(' ').collect();
    assert_eq!((fields[0], fields[2]), (format!("{mgs}:/weft").as_str(), "fuse.weft"), "{line}");
    assert!(fields[3].split(',').any(|o| o == "noatime"), "{line}");
    assert!(!weft_harness::is_mounted(&dir), "the host's mount table does not have it");
    let out = ns.sh(&format!("echo written-through-mount8 > {dir_s}/f && cat {dir_s}/f"));
    assert_eq!(text(&out), "written-through-mount8\n");
    let out = ns.run(&["umount", &dir_s]);
    assert!(out.status.success(), "umount: {}", text(&out));
    assert_eq!(ns.mounts_line(&dir), None, "unmounted");

    // An fstab line as a Lustre site writes one: the source a NID (the default port), mount(8)'s
    // and systemd's options dropped, ro and noexec taken.
    let nid_ip = default_port_forward(mgs);
    let ro = tmp.path().join("fstab-ro");
    std::fs::create_dir(&ro).unwrap();
    let ro_s = ro.display().to_string();
    let fstab = tmp.path().join("fstab");
    std::fs::write(
        &fstab,
        format!(
            "# Weft\n{nid_ip}@tcp:/weft {ro_s} fuse.weft _netdev,nofail,x-systemd.automount,ro,noexec,log={tmp_s}/fstab.log 0 0\n"
        ),
    )
    .unwrap();
    ns.mounts.push(ro.clone());
    let out = ns.run(&["mount", "-T", &fstab.display().to_string(), &ro_s]);
    assert!(out.status.success(), "mount -T FSTAB: {}", text(&out));
    let line = ns.mounts_line(&ro).unwrap_or_else(|| panic!("{ro_s} not in the namespace's /proc/mounts"));
    assert_eq!(line.split(' ').next(), Some(format!("{nid_ip}:9800:/weft").as_str()), "{line}");
    let options: Vec<&str> = line.split(' ').nth(3).unwrap_or("").split(',').collect();
    assert!(options.contains(&"ro") && options.contains(&"noexec"), "{line}");
    assert_eq!(text(&ns.sh(&format!("cat {ro_s}/f"))), "written-through-mount8\n", "reads work");
    let out = ns.sh(&format!("echo no > {ro_s}/g"));
    assert!(!out.status.success() && text(&out).contains("Read-only file system"), "{}", text(&out));
    let out = ns.run(&["umount", &ro_s]);
    assert!(out.status.success(), "umount: {}", text(&out));

    // Failures, in mount(8)'s words and status 32, naming what was wrong.
    let failed = tmp.path().join("failed");
    std::fs::create_dir(&failed).unwrap();
    let failed_s = failed.display().to_string();
    ns.mounts.push(failed.clone());
    let nobody = format!("127.0.0.1:{}", weft_harness::free_port("127.0.0.1"));
    let start = Instant::now();
    let out = ns.run(&["mount", "-t", "fuse.weft", &nobody, &failed_s]);
    let took = start.elapsed();
    assert_eq!(out.status.code(), Some(32), "no management service: {}", text(&out));
    assert!(took < Duration::from_secs(UNREACHABLE_FAIL_S_MAX), "failed after {took:?}");
    assert!(text(&out).contains(&nobody), "the address tried is named: {}", text(&out));

    let out = ns.run(&["mount", "-t", "fuse.weft", &format!("{mgs}:/scratch"), &failed_s]);
    assert_eq!(out.status.code(), Some(32), "{}", text(&out));
    assert!(text(&out).contains("'scratch'") && text(&out).contains("'weft'"), "both names: {}", text(&out));

    let out = ns.run(&["mount", "-t", "fuse.weft", mgs, &failed_s, "-o", "speed=11"]);
    assert_eq!(out.status.code(), Some(32), "{}", text(&out));
    assert!(
        text(&out).contains("unknown mount option 'speed'") && text(&out).contains("noexec"),
        "the option and the allowed ones: {}",
        text(&out)
    );
    assert_eq!(ns.mounts_line(&failed), None, "nothing mounted by a failure");
    drop(ns);
    drop(c);
}
