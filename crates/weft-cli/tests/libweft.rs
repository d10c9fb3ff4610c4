//! libweft from C: crates/weft-lib/tests/c/api_test.c, built against include/weft.h and
//! libweft.so, uses every call of the C API on a running file system; what it wrote is then
//! read through a FUSE mount of the same file system (and it reads what the mount wrote).

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

/// The C test's byte at offset `i`.
fn c_pattern(i: usize) -> u8 {
    ((i * 7 + 3) % 251) as u8
}

#[test]
fn the_c_api_does_every_call_and_agrees_with_a_mount() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = build_c_program("api_test", tmp.path());
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

/// Two processes with the write-back cache make a file each in one directory (IOR's files
/// of one shared directory), then write them: the second's create calls the first's cache
/// back, and the first's file, made by the cache, opens at its first write.
#[test]
fn two_write_back_caches_in_one_directory_keep_every_file() {
    use weft::{Fs, MountOptions};
    let c = &mut Cluster::single_node(&weft_bin(), 2);
    let mnt = c.mount();
    let opts = MountOptions { wbc: true, ..MountOptions::default() };
    let (a, b) = (Fs::mount_with(&c.mgs_address, opts).unwrap(), Fs::mount_with(&c.mgs_address, opts).unwrap());
    a.mkdir(b"/shared", 0o755).unwrap();
    let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC;
    let fa = a.open(b"/shared/file.0", flags, 0o666).unwrap();
    let fb = b.open(b"/shared/file.1", flags, 0o666).unwrap();
    assert_eq!(a.pwrite(&fa, &[1u8; 1 << 20], 0).unwrap(), 1 << 20);
    assert_eq!(b.pwrite(&fb, &[2u8; 1 << 20], 0).unwrap(), 1 << 20);
    a.close(fa).unwrap();
    b.close(fb).unwrap();
    assert_eq!(std::fs::read(mnt.join("shared/file.0")).unwrap(), vec![1u8; 1 << 20]);
    assert_eq!(std::fs::read(mnt.join("shared/file.1")).unwrap(), vec![2u8; 1 << 20]);

    // At once, as IOR's ranks, each round in a new directory the mount made (so each
    // grant first calls the mount's lock back): each create calls the other's cache back,
    // also while the other's grant is still reading the names.
    const ROUNDS: usize = 30;
    for round in 0..ROUNDS {
        std::fs::create_dir(mnt.join(format!("shared/d{round}"))).unwrap();
    }
    let start = std::sync::Barrier::new(2);
    let failed: Vec<String> = std::thread::scope(|s| {
        let threads: Vec<_> = [&a, &b]
            .into_iter()
            .enumerate()
            .map(|(i, fs)| {
                let start = &start;
                // Failures are collected, not panicked on: the other thread waits at the
                // barrier for this one.
                s.spawn(move || {
                    let mut failed = Vec::new();
                    for round in 0..ROUNDS {
                        start.wait();
                        let path = format!("/shared/d{round}/f{i}");
                        let made = fs.open(path.as_bytes(), libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o644);
                        let wrote = made.and_then(|f| {
                            let n = fs.pwrite(&f, &[i as u8; 100_000], 0)?;
                            fs.close(f).map(|_| n)
                        });
                        match wrote {
                            Ok(100_000) => {}
                            other => failed.push(format!("{path}: {other:?}")),
                        }
                    }
                    failed
                })
            })
            .collect();
        threads.into_iter().flat_map(|t| t.join().unwrap()).collect()
    });
    assert!(failed.is_empty(), "{failed:#?}");
    for round in 0..ROUNDS {
        for i in 0..2u8 {
            assert_eq!(std::fs::read(mnt.join(format!("shared/d{round}/f{i}"))).unwrap(), vec![i; 100_000]);
        }
    }

    // Made by one (IOR's setup), written by the other (its rank): the objects are made at
    // the first write, whoever makes it.
    let made = a.open(b"/shared/later", libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o644).unwrap();
    a.close(made).unwrap();
    let fb = b.open(b"/shared/later", libc::O_WRONLY, 0).unwrap();
    assert_eq!(b.pwrite(&fb, &[3u8; 1 << 20], 0).unwrap(), 1 << 20);
    b.close(fb).unwrap();
    assert_eq!(std::fs::read(mnt.join("shared/later")).unwrap(), vec![3u8; 1 << 20]);
}
