//! The `weft` Python module (python/): python/tests/test_weft.py uses every call of its API
//! on a running file system with a FUSE mount of it (numpy's fromfile/tofile go through the
//! mount) and a copytool (HSM); what it left then reads the same through the mount.
//!
//! The module is the one `cargo test` builds (libweft_python.so, a dev-dependency of this
//! crate, in deps/ as `shared_lib_dir` finds it), linked as `weft/_weft.abi3.so` beside the
//! pure-Python part into a temporary directory on PYTHONPATH: no maturin, no release build,
//! no pip in the test suite. `pip install ./python` itself is proven by `make soak`
//! (scripts/python-install-test.sh).
//!
//! The Python is Debian's, /usr/bin/python3 (scripts/install-test-deps.sh gives it numpy),
//! not whatever `python3` comes first on PATH (a pyenv one may lack numpy); WEFT_TEST_PYTHON
//! names another.

mod common;
use common::*;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the Python test may run (some 10 s here) before it is killed as hung.
const PYTHON_TEST_LIMIT_S: u64 = 300;

/// A `weft copytool` process, killed when dropped (also when the test fails).
struct Copytool(Child);

impl Copytool {
    fn start(c: &Cluster, archive: &Path) -> Copytool {
        let log = c.dir.path().join("copytool.log");
        let mut child = Command::new(weft_bin())
            .args(["copytool", "--mgs", &c.mgs_address, "--name", "py", "--archive", "1"])
            .arg("--backend")
            .arg(format!("posix:{}", archive.display()))
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start weft copytool");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let tool = Copytool(child);
        assert!(line.contains("serving archive"), "copytool: {line:?}\n{}", std::fs::read_to_string(&log).unwrap());
        tool
    }
}

impl Drop for Copytool {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_python_module_does_every_call_and_agrees_with_a_mount() {
    let py = python();
    let numpy = Command::new(&py).args(["-c", "import numpy"]).output();
    assert!(
        numpy.as_ref().is_ok_and(|o| o.status.success()),
        "{} with numpy is needed (scripts/install-test-deps.sh installs python3-numpy): {numpy:?}",
        py.display()
    );
    let tmp = tempfile::tempdir().unwrap();
    let (modules, local, archive) = (tmp.path().join("modules"), tmp.path().join("local"), tmp.path().join("archive"));
    // WEFT_TEST_INSTALLED: the module pip installed into WEFT_TEST_PYTHON's environment.
    let installed = std::env::var_os("WEFT_TEST_INSTALLED").is_some();
    if !installed {
        install_python_module(&modules);
    }
    std::fs::create_dir_all(&local).unwrap();
    std::fs::create_dir_all(&archive).unwrap();

    let mut c = Cluster::single_node(&weft_bin(), 2);
    let mnt = c.mount();
    let _copytool = Copytool::start(&c, &archive);
    weft_ok(&["pool", "--mgs", &c.mgs_address, "new", "fast"]);
    weft_ok(&["pool", "--mgs", &c.mgs_address, "add", "fast", "1"]);
    let mut cmd = Command::new(&py);
    if !installed {
        cmd.env("PYTHONPATH", &modules);
    }
    let (out_path, err_path) = (tmp.path().join("stdout"), tmp.path().join("stderr"));
    let mut child = cmd
        .arg(workspace().join("python/tests/test_weft.py"))
        .current_dir(tmp.path())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("WEFT_MGS", &c.mgs_address)
        .env("WEFT_MNT", &mnt)
        .env("WEFT_BIN", weft_bin())
        .env("WEFT_ARCHIVE_ID", "1")
        .env("WEFT_LOCAL", &local)
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("run the Python test");
    // A hung test is killed (and the cluster, copytool and mount then taken down).
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > Duration::from_secs(PYTHON_TEST_LIMIT_S) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    assert!(
        status.is_some_and(|s| s.success()) && stdout.contains("all checks held"),
        "the Python test failed ({}):\n{stdout}{}\n{}",
        status.map_or(format!("killed after {PYTHON_TEST_LIMIT_S} s"), |s| s.to_string()),
        std::fs::read_to_string(&err_path).unwrap_or_default(),
        c.log_tails()
    );

    // What it left reads the same through the mount, with the layout it asked for.
    let striped = std::fs::read(mnt.join("py/striped")).unwrap();
    let want: Vec<u8> = (0..3u64 << 20).map(|i| ((i * 31 + 7) % 251) as u8).collect();
    assert!(striped == want, "py/striped reads back through the mount");
    assert_eq!(osts_of(&mnt.join("py/striped")), vec![1, 0]);
    assert_eq!(std::fs::read(mnt.join("py/a/note")).unwrap(), b"hello");
    let names: std::collections::BTreeSet<String> = std::fs::read_dir(mnt.join("py"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for name in ["a", "arr.bin", "big", "f.bin", "f.txt", "hsm", "job", "pfl", "pooled", "striped"] {
        assert!(names.contains(name), "{name} in {names:?}");
    }
}
