//! HSM states through a mount: `weft hsm state|set|clear` as `lfs hsm_*` print and allow
//! them (users their own files' norelease, noarchive and dirty; root everything), and each
//! change a changelog record of type HSM.

mod common;
use common::*;

fn state(mnt: &std::path::Path, file: &str) -> String {
    weft_ok(&["hsm", "state", mnt.join(file).to_str().unwrap()])
}

#[test]
fn flags_set_and_cleared_show_as_lfs_shows_them() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let mnt = c.mount();
    let mgs = c.mgs_address.clone();
    weft_ok(&["changelog-register", "weft-MDT0000", "--mgs", &mgs]);
    sh(&mnt, "mkdir u && chown 1000:1000 u");
    let bin = weft_bin().display().to_string();
    let out = sh_as(1000, 1000, &mnt, &format!("echo data > u/f && {bin} hsm set --norelease u/f"));
    assert!(out.status.success(), "{out:?}");
    let path = mnt.join("u/f");
    assert_eq!(state(&mnt, "u/f").trim(), format!("{}: (0x00000010) never_release", path.display()));
    // A user may not say the file is archived; another user may not touch it at all.
    let out = sh_as(1000, 1000, &mnt, &format!("{bin} hsm set --exists u/f"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("only root sets or clears exists"), "{out:?}");
    let out = sh_as(1001, 1001, &mnt, &format!("{bin} hsm set --noarchive u/f"));
    assert!(!out.status.success(), "{out:?}");
    // Dirty needs a copy; root: exists and archived in archive 2; then the owner: dirty.
    let out = weft(&["hsm", "set", "--dirty", path.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("set exists too"), "{out:?}");
    weft_ok(&["hsm", "set", "--exists", "--archived", "--archive-id", "2", path.to_str().unwrap()]);
    let out = sh_as(1000, 1000, &mnt, &format!("{bin} hsm set --dirty u/f"));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        state(&mnt, "u/f").trim(),
        format!("{}: (0x0000001b) exists dirty archived never_release, archive_id:2", path.display())
    );
    let out = weft(&["hsm", "clear", "--exists", path.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("set exists too"), "{out:?}");
    weft_ok(&["hsm", "clear", "--dirty", "--norelease", path.to_str().unwrap()]);
    let json: serde_json::Value =
        serde_json::from_str(&weft_ok(&["hsm", "state", "--json", path.to_str().unwrap()])).unwrap();
    assert_eq!((json["states"].as_u64(), json["archive_id"].as_u64()), (Some(0x9), Some(2)));
    // A write makes an archived file dirty.
    sh(&mnt, "echo more >> u/f");
    assert!(state(&mnt, "u/f").contains("(0x0000000b) exists dirty archived, archive_id:2"), "{}", state(&mnt, "u/f"));
    // Not on directories; a file never touched is all clear.
    let out = weft(&["hsm", "set", "--norelease", mnt.join("u").to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("HSM states are for files"), "{out:?}");
    sh(&mnt, "touch g");
    assert!(state(&mnt, "g").trim().ends_with(": (0x00000000)"));
    // Each change, as the changelog shows it: HSM records with the state event (0x280).
    let log = weft_ok(&["changelog", "weft-MDT0000", "--mgs", &mgs]);
    let hsm: Vec<&str> = log.lines().filter(|l| l.contains(" 16HSM ")).collect();
    let flags: Vec<&str> = hsm.iter().map(|l| l.split(' ').nth(4).unwrap()).collect();
    assert_eq!(flags, ["0x280", "0x280", "0x680", "0x280", "0x680"], "{log}");
}
