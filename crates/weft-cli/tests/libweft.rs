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

/// libweft with the metadata write-back cache (`WEFT_WBC=1`): creates in a directory it
/// holds alone are made in the client and reach the MDT in batches; a file that is written
/// is opened at its first write; another client (a FUSE mount) that lists the directory
/// calls the cache back and sees every name, the data and the unlinks.
#[test]
fn the_write_back_cache_batches_creates_made_through_libweft() {
    use weft::{Fs, MountOptions};
    let c = &mut Cluster::single_node(&weft_bin(), 2);
    let mnt = c.mount();
    std::fs::create_dir(mnt.join("wbc")).unwrap();
    let fs = Fs::mount_with(&c.mgs_address, MountOptions { wbc: true, ..MountOptions::default() }).unwrap();
    let excl = libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY;
    for i in 0..600 {
        let f = fs.open(format!("/wbc/f{i}").as_bytes(), excl, 0o640).unwrap();
        if i == 250 {
            assert_eq!(fs.write(&f, b"written at its first I/O").unwrap(), 24);
        }
        fs.close(f).unwrap();
    }
    let made = fs.client().wbc_stats();
    assert!(made.ops >= 599, "the cache made the creates: {made:?}");
    assert!(made.batches_failed == 0 && made.batches <= 6, "a few batches, not a request per create: {made:?}");
    assert_eq!(fs.open(b"/wbc/f3", excl, 0o640).unwrap_err().errno, libc::EEXIST);
    // O_CREAT without O_EXCL of a name the cache made: the file that is there.
    let again = fs.open(b"/wbc/f250", libc::O_CREAT | libc::O_RDWR, 0o600).unwrap();
    let mut buf = [0u8; 64];
    let n = fs.read(&again, &mut buf).unwrap();
    assert_eq!(&buf[..n], b"written at its first I/O");
    fs.close(again).unwrap();
    for i in 0..100 {
        fs.unlink(format!("/wbc/f{i}").as_bytes()).unwrap();
    }

    // The mount's listing calls the directory back: every batch lands first.
    let mut names: Vec<String> =
        std::fs::read_dir(mnt.join("wbc")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    let mut want: Vec<String> = (100..600).map(|i| format!("f{i}")).collect();
    want.sort();
    assert_eq!(names, want);
    assert_eq!(std::fs::read(mnt.join("wbc/f250")).unwrap(), b"written at its first I/O");
    let meta = std::fs::metadata(mnt.join("wbc/f599")).unwrap();
    assert_eq!((meta.len(), std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777), (0, 0o640));

    // Creates go on after the callback (by the MDT while the mount holds its locks), and
    // an fsync of the directory makes them durable.
    let f = fs.open(b"/wbc/after", excl, 0o644).unwrap();
    fs.fsync(&f).unwrap();
    fs.close(f).unwrap();
    assert!(mnt.join("wbc/after").exists());
    drop(fs);
    assert_eq!(std::fs::read_dir(mnt.join("wbc")).unwrap().count(), 501);
}
