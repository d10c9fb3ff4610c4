//! Helpers shared by the integration tests: the `weft` binary under test, commands run as a
//! given user, and byte patterns that tell every offset apart.
#![allow(dead_code, unused_imports)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub use weft_harness::{run, Cluster, NodeSpec};

pub fn weft_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_weft"))
}

/// `weft ARGS`, returning its output whatever the exit status.
pub fn weft(args: &[&str]) -> Output {
    Command::new(weft_bin()).args(args).output().expect("run weft")
}

/// The directory holding the workspace's shared library `name` (libweft.so,
/// libweft_preload.so) as built for these tests: cargo leaves a dependency's cdylib in
/// `deps/` beside the binary, and copies it up beside the binary only when it builds the
/// library by itself (`cargo build -p weft-lib`, `make release`).
pub fn shared_lib_dir(name: &str) -> PathBuf {
    let bin_dir = weft_bin().parent().expect("the binary's directory").to_path_buf();
    let deps = bin_dir.join("deps");
    let dir = if deps.join(name).exists() { deps } else { bin_dir };
    assert!(dir.join(name).exists(), "{name} in {} (a dev-dependency of weft-cli)", dir.display());
    dir
}

pub fn weft_ok(args: &[&str]) -> String {
    run(Command::new(weft_bin()).args(args))
}

/// The stderr of a command expected to fail (the test fails if it succeeded).
pub fn failure_stderr(out: &Output) -> String {
    assert!(!out.status.success(), "expected a failure, got:\n{}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `sh -c SCRIPT` in `dir` as `uid`/`gid` (root when 0).
pub fn sh_as(uid: u32, gid: u32, dir: &Path, script: &str) -> Output {
    let mut c = Command::new("sh");
    c.arg("-c").arg(script).current_dir(dir);
    if uid != 0 {
        // std clears the supplementary groups when it changes uid as root.
        c.uid(uid).gid(gid);
    }
    c.output().expect("run sh")
}

pub fn sh(dir: &Path, script: &str) -> String {
    let out = sh_as(0, 0, dir, script);
    assert!(
        out.status.success(),
        "sh -c {script:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Deterministic bytes where every 8-byte word holds its own offset xor a seed, so a
/// misplaced or stale block is caught, not just a wrong length.
pub fn pattern(seed: u64, offset: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len + 8);
    let mut word = offset / 8;
    let skip = (offset % 8) as usize;
    while v.len() < len + skip {
        v.extend_from_slice(&(word ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_le_bytes());
        word += 1;
    }
    v.drain(..skip);
    v.truncate(len);
    v
}

pub fn errno_of(r: std::io::Result<impl Sized>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.raw_os_error().unwrap_or(-1),
    }
}

/// A path as a command argument (the tests' paths are UTF-8).
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Lets go of a `weft up` file system whatever state a test left it in: a mount of it made
/// by `weft mount` (`extra_mount`) unmounted, `weft down`, and its own mount unmounted if
/// `weft down` could not.
pub fn take_down(data: &Path, mnt: &Path, extra_mount: &Path) {
    if weft_harness::is_mounted(extra_mount) {
        let _ = Command::new("fusermount3").arg("-uz").arg(extra_mount).status();
    }
    let _ = weft(&["down", "--data", s(data)]);
    if weft_harness::is_mounted(mnt) {
        let _ = Command::new("fusermount3").arg("-uz").arg(mnt).status();
    }
}

/// The components' (mirror id, flags) of `weft getstripe F`, in layout order.
pub fn mirror_flags(f: &Path) -> Vec<(String, String)> {
    let out = weft_ok(&["getstripe", s(f)]);
    let value = |l: &str| l.split(':').nth(1).unwrap().trim().to_string();
    let ids: Vec<String> = out.lines().filter(|l| l.contains("lcme_mirror_id")).map(value).collect();
    let flags: Vec<String> = out.lines().filter(|l| l.contains("lcme_flags")).map(value).collect();
    ids.into_iter().zip(flags).collect()
}

/// What a local directory gives for the same script, as `uid`: the mount must match it.
pub fn local_and_mounted(m: &std::path::Path, uid: u32, setup: &str, script: &str) -> (String, String) {
    let local = tempfile::Builder::new().prefix("weft-local-").tempdir().unwrap();
    std::fs::set_permissions(
        local.path(),
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o777),
    )
    .unwrap();
    let run = |dir: &std::path::Path| {
        sh(dir, setup);
        let out = sh_as(uid, uid, dir, script);
        format!(
            "status {:?}\n{}{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr).replace(&dir.display().to_string(), "DIR")
        )
    };
    let dir = (0..).map(|n| m.join(format!("cmp{n}"))).find(|d| !d.exists()).unwrap();
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o777))
        .unwrap();
    (run(local.path()), run(&dir))
}

/// `weft ARGS --mgs ADDR` against the cluster's servers (through its MGS), whatever the exit
/// status (`set-param`, `get-param`).
pub fn param(c: &Cluster, args: &[&str]) -> Output {
    let mut all = args.to_vec();
    all.extend(["--mgs", &c.mgs_address]);
    weft(&all)
}

/// As [`param`], failing the test when it fails; its stdout.
pub fn param_ok(c: &Cluster, args: &[&str]) -> String {
    let out = param(c, args);
    assert!(
        out.status.success(),
        "weft {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The OSTs of a file's objects, every component's in order, from `weft getstripe --json`.
pub fn osts_of(f: &Path) -> Vec<u64> {
    let out = weft_ok(&["getstripe", "--json", s(f)]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mut osts = Vec::new();
    for c in v[0]["layout"]["components"].as_array().unwrap() {
        for o in c["objects"].as_array().unwrap() {
            osts.push(o["ost"].as_u64().unwrap());
        }
    }
    osts
}

/// Compiles the C program `crates/weft-lib/tests/c/NAME.c` against include/weft.h and the
/// libweft.so built with the tests, into `out`; its path.
pub fn build_c_program(name: &str, out: &Path) -> PathBuf {
    let workspace = workspace();
    let libdir = shared_lib_dir("libweft.so");
    let exe = out.join(name);
    let src = workspace.join(format!("crates/weft-lib/tests/c/{name}.c"));
    let built = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg(format!("-I{}", workspace.join("include").display()))
        .arg(format!("-L{}", libdir.display()))
        .arg(format!("-Wl,-rpath,{}", libdir.display()))
        .arg("-lweft")
        .output()
        .expect("run cc");
    assert!(built.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&built.stderr));
    exe
}

/// The repository's top directory.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python the tests run: Debian's, /usr/bin/python3 (scripts/install-test-deps.sh gives
/// it numpy), not whatever `python3` comes first on PATH; WEFT_TEST_PYTHON names another.
pub fn python() -> PathBuf {
    std::env::var_os("WEFT_TEST_PYTHON").map_or_else(|| PathBuf::from("/usr/bin/python3"), PathBuf::from)
}

/// The `weft` module as Python imports it from `dir` (put it on PYTHONPATH):
/// `dir/weft/__init__.py` and `dir/weft/_weft.abi3.so`, a link to the extension `cargo test`
/// built (a dev-dependency of weft-cli) rather than a copy of its 100-odd MB.
pub fn install_python_module(dir: &Path) {
    let pkg = dir.join("weft");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::copy(workspace().join("python/weft/__init__.py"), pkg.join("__init__.py")).unwrap();
    let lib = shared_lib_dir("libweft_python.so").join("libweft_python.so");
    std::os::unix::fs::symlink(lib, pkg.join("_weft.abi3.so")).unwrap();
}

/// Debian's chromium, headless, on `url` with `args` (`--dump-dom`, `--screenshot=FILE`),
/// given 15 s of virtual time for the page's scripts; what it printed.
pub fn chromium(args: &[&str], url: &str) -> String {
    let out = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=15000"])
        .args(args)
        .arg(url)
        .output()
        .expect("chromium (installed by make deps)");
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}
