//! libweft from C: crates/weft-lib/tests/c/api_test.c, built against include/weft.h and
//! libweft.so, uses every call of the C API on a running file system; what it wrote is then
//! read through a FUSE mount of the same file system (and it reads what the mount wrote).

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The C test's byte at offset `i`.
fn c_pattern(i: usize) -> u8 {
    ((i * 7 + 3) % 251) as u8
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Compiles the C test against the header and the library built with the tests.
fn build_c_test(out: &Path) -> PathBuf {
    let libdir = shared_lib_dir("libweft.so");
    let exe = out.join("api_test");
    let src = workspace().join("crates/weft-lib/tests/c/api_test.c");
    let built = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg(format!("-I{}", workspace().join("include").display()))
        .arg(format!("-L{}", libdir.display()))
        .arg(format!("-Wl,-rpath,{}", libdir.display()))
        .arg("-lweft")
        .output()
        .expect("run cc");
    assert!(built.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&built.stderr));
    exe
}

#[test]
fn the_c_api_does_every_call_and_agrees_with_a_mount() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = build_c_test(tmp.path());
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let mnt = c.mount();
    let from_fuse: Vec<u8> = (0..100_000).map(c_pattern).collect();
    std::fs::write(mnt.join("from_fuse"), &from_fuse).unwrap();

    let out = Command::new(&exe).args([&c.mgs_address, "/capi"]).output().expect("run the C test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the C test failed:\n{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("all checks held"), "{stdout}");

    // What the program left reads the same through the mount.
    let striped = std::fs::read(mnt.join("capi/striped")).unwrap();
    assert_eq!(striped.len(), 2 << 20);
    assert!(striped.iter().enumerate().all(|(i, b)| *b == c_pattern(i)), "striped reads back through the mount");
    assert_eq!(std::fs::read(mnt.join("capi/renamed")).unwrap(), b"hello, weft\n");
    assert_eq!(osts_of(&mnt.join("capi/striped")), vec![1, 0], "the layout it asked for");
    let listed: std::collections::BTreeSet<String> = std::fs::read_dir(mnt.join("capi"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(listed, ["cut", "link", "renamed", "striped"].map(String::from).into(), "the names it left");
    assert_eq!(std::fs::read_link(mnt.join("capi/link")).unwrap(), Path::new("note"));
}
