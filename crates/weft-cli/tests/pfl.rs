//! Progressive layouts and data on the MDT through real mounts: a three-component file
//! (64 KiB on the MDT, then 4 MiB on one OST, then the rest on four) whose bytes are found
//! in the MDT's store and the OSTs' directories, fio verifying such files, small files that
//! touch no OST, and another mount that reads a file while it grows into new components.

mod common;
use common::*;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

const PFL: [&str; 12] = ["setstripe", "-E", "64K", "-L", "mdt", "-E", "4M", "-c", "1", "-E", "-1", "-c"];

/// `weft setstripe -E 64K -L mdt -E 4M -c 1 -E -1 -c 4 PATH`.
fn set_pfl(path: &Path) {
    let mut args = PFL.to_vec();
    args.extend(["4", p(path)]);
    weft_ok(&args);
}

fn layout_json(path: &Path) -> serde_json::Value {
    let out = weft_ok(&["getstripe", "--json", p(path)]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v[0]["layout"].clone()
}

/// The file of object `o` (a layout's JSON object) in the server's data directory: an OST's,
/// or the MDT's data-on-MDT target's.
fn object_path(data_dir: &Path, o: &serde_json::Value) -> PathBuf {
    let ost = o["ost"].as_u64().unwrap();
    let seq = o["fid"]["seq"].as_u64().unwrap();
    let oid = o["fid"]["oid"].as_u64().unwrap();
    let target = if ost >= 0xFFFF_0000 { format!("mdt{:04x}/dom", ost - 0xFFFF_0000) } else { format!("ost{ost:04x}") };
    data_dir.join(format!("{target}/O/{seq:x}/d{}/{oid}", oid % 32))
}

#[test]
fn a_three_component_file_lies_on_the_mdt_and_the_osts_as_getstripe_says() {
    let mut c = Cluster::single_node(&weft_bin(), 4);
    let m = c.mount();
    let f = m.join("pfl");
    set_pfl(&f);
    // Only the first component has its object before any write.
    let before = weft_ok(&["getstripe", p(&f)]);
    assert!(before.contains("lcm_entry_count:   3"), "{before}");
    let flags: Vec<&str> = before.lines().filter(|l| l.contains("lcme_flags")).map(|l| l.trim()).collect();
    assert_eq!(flags, ["lcme_flags:          init", "lcme_flags:          0", "lcme_flags:          0"], "{before}");

    let data = pattern(3, 0, 12 << 20);
    std::fs::write(&f, &data).unwrap();
    let out = weft_ok(&["getstripe", p(&f)]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], p(&f));
    assert!(lines[1].starts_with("  lcm_layout_gen:    "), "{out}");
    assert_eq!(lines[2], "  lcm_mirror_count:  1");
    assert_eq!(lines[3], "  lcm_entry_count:   3");
    let field = |name: &str| -> Vec<String> {
        lines
            .iter()
            .filter(|l| l.trim_start().starts_with(name))
            .map(|l| l.split(':').nth(1).unwrap().trim().to_string())
            .collect()
    };
    assert_eq!(field("lcme_id"), ["1", "2", "3"], "{out}");
    assert_eq!(field("lcme_flags"), ["init", "init", "init"], "{out}");
    assert_eq!(field("lcme_extent.e_start"), ["0", "65536", "4194304"], "{out}");
    assert_eq!(field("lcme_extent.e_end"), ["65536", "4194304", "EOF"], "{out}");
    assert_eq!(field("lmm_stripe_count"), ["0", "1", "4"], "{out}");
    assert_eq!(field("lmm_pattern"), ["mdt", "raid0", "raid0"], "{out}");
    assert_eq!(lines.iter().filter(|l| l.contains("l_ost_idx")).count(), 5, "{out}");
    // -y prints the same form.
    assert_eq!(weft_ok(&["getstripe", "-y", p(&f)]), out);

    // The bytes are where the layout says: the first 64 KiB in the MDT's store, the next
    // component's in one OST object, the rest striped over four (object offsets follow
    // file offsets, so the last component's objects start with a hole).
    let layout = layout_json(&f);
    let comps = layout["components"].as_array().unwrap();
    let dir = c.servers[0].data_dir.clone();
    let dom = std::fs::read(object_path(&dir, &comps[0]["objects"][0])).unwrap();
    assert!(object_path(&dir, &comps[0]["objects"][0]).starts_with(dir.join("mdt0000")));
    assert!(dom == data[..64 << 10], "the MDT object holds the first 64 KiB ({} bytes)", dom.len());
    let one = std::fs::read(object_path(&dir, &comps[1]["objects"][0])).unwrap();
    assert_eq!(one.len(), 4 << 20);
    assert!(one[..64 << 10].iter().all(|b| *b == 0), "below the component: a hole");
    assert!(one[64 << 10..] == data[64 << 10..4 << 20], "the second component's object");
    let wide = comps[2]["objects"].as_array().unwrap();
    assert_eq!(wide.len(), 4);
    let mut osts: Vec<u64> = wide.iter().map(|o| o["ost"].as_u64().unwrap()).collect();
    osts.sort();
    assert_eq!(osts, [0, 1, 2, 3]);
    for (k, o) in wide.iter().enumerate() {
        let obj = std::fs::read(object_path(&dir, o)).unwrap();
        assert_eq!(obj.len(), 3 << 20, "stripe {k}");
        for (round, unit) in [(1usize, 4 + k), (2, 8 + k)] {
            let got = &obj[round << 20..(round + 1) << 20];
            assert!(got == &data[unit << 20..(unit + 1) << 20], "stripe {k} round {round}");
        }
    }
    // Another mount reads every byte back, and the size from the objects.
    let b = c.mount();
    assert!(std::fs::read(b.join("pfl")).unwrap() == data);
    assert_eq!(std::fs::metadata(b.join("pfl")).unwrap().len(), 12 << 20);
    // A truncate into the first component cuts the others' objects to nothing.
    let file = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
    file.set_len(1000).unwrap();
    drop(file);
    assert!(std::fs::read(b.join("pfl")).unwrap() == data[..1000]);
    for o in wide {
        assert_eq!(std::fs::metadata(object_path(&dir, o)).unwrap().len(), 0);
    }
}

#[test]
fn fio_verifies_files_of_a_progressive_default_with_data_on_the_mdt() {
    let mut c = Cluster::single_node(&weft_bin(), 4);
    let m = c.mount();
    let d = m.join("pfl");
    std::fs::create_dir(&d).unwrap();
    set_pfl(&d);
    let dflt = weft_ok(&["getstripe", "-d", p(&d)]);
    assert!(dflt.contains("lcm_entry_count:   3") && dflt.contains("lmm_pattern:       mdt"), "{dflt}");
    // Random writes over 12 MiB (every component), then sequential, each read back checked.
    for rw in ["randwrite", "write"] {
        let out = Command::new("fio")
            .args(["--name=pfl", "--filename=data", "--size=12M", "--bs=64k", "--ioengine=psync", "--direct=0"])
            .args([&format!("--rw={rw}"), "--verify=crc32c", "--do_verify=1", "--randseed=11"])
            .current_dir(&d)
            .output()
            .expect("fio (installed by make deps)");
        assert!(
            out.status.success(),
            "fio {rw}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let layout = layout_json(&d.join("data"));
    assert_eq!(layout["components"].as_array().unwrap().len(), 3);
    // Another mount verifies what the first wrote.
    let b = c.mount();
    let out = Command::new("fio")
        .args(["--name=pfl", "--filename=data", "--size=12M", "--bs=64k", "--ioengine=psync", "--rw=write"])
        .args(["--verify=crc32c", "--verify_only", "--randseed=11"])
        .current_dir(b.join("pfl"))
        .output()
        .unwrap();
    assert!(out.status.success(), "fio --verify_only:\n{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn small_files_on_the_mdt_use_no_ost_and_the_mdt_keeps_its_limit() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let m = c.mount();
    let d = m.join("small");
    std::fs::create_dir(&d).unwrap();
    weft_ok(&["setstripe", "-E", "64K", "-L", "mdt", "-E", "-1", "-c", "2", p(&d)]);
    for i in 0..20 {
        std::fs::write(d.join(format!("f{i}")), pattern(i, 0, 3901)).unwrap();
    }
    let b = c.mount();
    for i in 0..20 {
        assert_eq!(std::fs::read(b.join(format!("small/f{i}"))).unwrap(), pattern(i, 0, 3901));
        let layout = layout_json(&d.join(format!("f{i}")));
        let comps = layout["components"].as_array().unwrap();
        assert_eq!(comps[0]["pattern"], "Mdt");
        assert!(comps[1]["objects"].as_array().unwrap().is_empty(), "f{i}: the OST component was never reached");
    }
    // No OST object holds a byte of them.
    let dir = c.servers[0].data_dir.clone();
    let out = sh(&dir, "find ost* -type f -path '*/d*/*' -size +0 | wc -l");
    assert_eq!(out.trim(), "0", "OST objects with data");
    // A file of the MDT component alone ends there: writing past it is EFBIG (through the
    // page cache the kernel may take the write first: then its write-back fails and fsync
    // says so).
    let only = m.join("only-mdt");
    weft_ok(&["setstripe", "-E", "64K", "-L", "mdt", p(&only)]);
    let direct = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_DIRECT).open(&only).unwrap();
    direct.write_all_at(&[1u8; 4096], 0).unwrap();
    assert_eq!(errno_of(direct.write_all_at(&[1u8; 4096], 64 << 10)), libc::EFBIG);
    drop(direct);
    let cached = std::fs::OpenOptions::new().write(true).open(&only).unwrap();
    match cached.write_all_at(&[2u8; 4096], 64 << 10) {
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EFBIG)),
        Ok(()) => assert!(cached.sync_all().is_err(), "fsync after a write past the layout's end"),
    }
    drop(cached);
    assert_eq!(std::fs::read(b.join("only-mdt")).unwrap(), [1u8; 4096]);
    // The MDT's limit, named with the option.
    let big = weft(&["setstripe", "-E", "2M", "-L", "mdt", "-E", "-1", p(&m.join("big"))]);
    let err = String::from_utf8_lossy(&big.stderr);
    assert!(!big.status.success() && err.contains("-L mdt") && err.contains("1048576"), "{err}");
    let late = weft(&["setstripe", "-E", "1M", "-E", "2M", "-L", "mdt", p(&m.join("late"))]);
    let err = String::from_utf8_lossy(&late.stderr);
    assert!(!late.status.success() && err.contains("only the first component"), "{err}");
    let bad = weft(&["setstripe", "-E", "64K", "-L", "ssd", p(&m.join("bad"))]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && err.contains("'ssd'") && err.contains("mdt or raid0"), "{err}");
}

/// A removed file's data-on-MDT object is destroyed as its OST objects are (the MDS once
/// left it behind: its target is not in the map's list of OSTs).
#[test]
fn a_removed_files_object_on_the_mdt_is_destroyed() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let m = c.mount();
    let f = m.join("gone");
    set_pfl(&f);
    let mut file = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
    std::io::Write::write_all(&mut file, &pattern(6, 0, 5 << 20)).unwrap();
    file.sync_all().unwrap();
    drop(file);
    let dir = c.servers[0].data_dir.clone();
    let layout = layout_json(&f);
    let objects: Vec<PathBuf> = layout["components"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|comp| comp["objects"].as_array().unwrap().iter().map(|o| object_path(&dir, o)).collect::<Vec<_>>())
        // An object's file is made by its first write: a stripe past the file's end has none.
        .filter(|o| o.exists())
        .collect();
    assert!(objects.len() >= 3 && objects[0].starts_with(dir.join("mdt0000")), "{objects:?}");
    std::fs::remove_file(&f).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while objects.iter().any(|o| o.exists()) {
        let left: Vec<_> = objects.iter().filter(|o| o.exists()).collect();
        assert!(std::time::Instant::now() < deadline, "not destroyed: {left:?}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn another_mount_reads_a_file_growing_into_new_components_through_an_open_descriptor() {
    let mut c = Cluster::single_node(&weft_bin(), 4);
    let a = c.mount();
    let b = c.mount();
    let f = a.join("grows");
    set_pfl(&f);
    std::fs::write(&f, pattern(5, 0, 32 << 10)).unwrap();
    // B opens it while only the MDT component has objects.
    let mut reader = std::fs::File::open(b.join("grows")).unwrap();
    let mut first = Vec::new();
    reader.read_to_end(&mut first).unwrap();
    assert_eq!(first, pattern(5, 0, 32 << 10));
    // A appends into both OST components.
    let data = pattern(5, 0, 9 << 20);
    let w = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
    w.write_all_at(&data[32 << 10..], 32 << 10).unwrap();
    drop(w);
    // B's descriptor, opened before, reads every new byte.
    reader.seek(SeekFrom::Start(0)).unwrap();
    let mut all = Vec::new();
    reader.read_to_end(&mut all).unwrap();
    assert_eq!(all.len(), data.len());
    assert!(all == data, "the bytes B reads through its old descriptor");
    // A truncate up on B reaches a component with objects, so the size holds after B closes.
    let t = std::fs::OpenOptions::new().write(true).open(b.join("grows")).unwrap();
    t.set_len(20 << 20).unwrap();
    drop(t);
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 20 << 20);
    let mut back = std::fs::read(&f).unwrap();
    assert!(back[9 << 20..].iter().all(|b| *b == 0));
    back.truncate(9 << 20);
    assert!(back == data);
}

#[test]
fn two_opens_on_one_mount_and_a_file_created_read_only_keep_every_byte_as_they_grow() {
    let mut c = Cluster::single_node(&weft_bin(), 4);
    let m = c.mount();
    let f = m.join("two");
    set_pfl(&f);
    let data = pattern(8, 0, 10 << 20);
    // Two opens of one mount: A grows the file into both OST components, B (opened before,
    // knowing the MDT component only) writes the first bytes and closes last: its close
    // must not tell the MDS the size of the components it knew.
    let a = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
    let b = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
    a.write_all_at(&data[4096..], 4096).unwrap();
    drop(a);
    b.write_all_at(&data[..4096], 0).unwrap();
    drop(b);
    let other = c.mount();
    assert_eq!(std::fs::metadata(other.join("two")).unwrap().len(), 10 << 20);
    assert!(std::fs::read(other.join("two")).unwrap() == data);
    // A file created read-only (as git makes its objects) by a user who is not root grows
    // past its first component: the open's right to write holds, not the mode bits.
    let d = m.join("ro");
    std::fs::create_dir(&d).unwrap();
    set_pfl(&d);
    std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let out = sh_as(1000, 1000, &d, "umask 0222 && head -c 2000000 /dev/zero > obj && stat -c '%s %a' obj");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "2000000 444");
}
