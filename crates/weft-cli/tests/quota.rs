//! Quotas as a user meets them: limits set with `weft setquota`, `weft quota`'s table, EDQUOT
//! at the limit, usage that survives kill -9 and agrees with a scan.

mod common;
use common::*;
use std::path::Path;

fn quota_table(m: &Path, args: &[&str]) -> String {
    let mut all = vec!["quota"];
    all.extend_from_slice(args);
    let mp = m.display().to_string();
    all.push(&mp);
    weft_ok(&all)
}

/// The row of the mount in `weft quota`'s table, split in its columns.
fn row(table: &str) -> Vec<String> {
    let lines: Vec<&str> = table.lines().collect();
    // The title, the header, then the mount's row (its path on a line of its own when long).
    let joined = lines[2..].join(" ");
    joined.split_whitespace().skip(1).map(str::to_string).collect()
}

/// An inode hard limit stops `touch` with EDQUOT; blocks written by the user show in the
/// table; the counts are what a scan finds, and stay so across kill -9 of the servers.
#[test]
fn inode_limits_stop_touch_and_usage_survives_kill_9() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let m = c.mount();
    sh(&m, "mkdir -m 777 work");
    let mp = m.display().to_string();
    weft_ok(&["setquota", "-u", "1000", "-i", "3", "-I", "5", &mp]);
    let out = sh_as(
        1000,
        1000,
        &m,
        "for i in 1 2 3 4 5 6 7; do touch work/f$i 2>/dev/null || { echo refused at $i; break; }; done",
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "refused at 6", "{out:?}");
    let err = sh_as(1000, 1000, &m, "touch work/again");
    assert!(String::from_utf8_lossy(&err.stderr).contains("Disk quota exceeded"), "{err:?}");
    // 4 MiB over two OSTs, written by the user (the root directory's files are root's).
    let dd = sh_as(1000, 1000, &m, "dd if=/dev/urandom of=work/f1 bs=1M count=4 conv=fsync status=none");
    assert!(dd.status.success(), "{dd:?}");

    let table = quota_table(&m, &["-u", "1000"]);
    assert!(table.starts_with("Disk quotas for usr 1000 (uid 1000):\n"), "{table}");
    assert!(
        table
            .lines()
            .nth(1)
            .unwrap()
            .contains("Filesystem  kbytes   quota   limit   grace   files   quota   limit   grace"),
        "{table}"
    );
    let cols = row(&table);
    let kib: u64 = cols[0].parse().unwrap();
    assert!((4096..4096 + 64).contains(&kib), "{table}");
    assert_eq!(&cols[4..8], ["5*", "3", "5", "-"], "{table}");
    let verbose = quota_table(&m, &["-v", "-u", "1000"]);
    assert!(verbose.contains("weft-MDT0000_UUID") && verbose.contains("weft-OST0001_UUID"), "{verbose}");
    let verified = quota_table(&m, &["--verify", "-u", "1000"]);
    assert_eq!(verified.matches(": ok").count(), 3, "{verified}");

    c.kill9("all");
    c.restart("all");
    let after = row(&quota_table(&m, &["-u", "1000"]));
    assert_eq!(after, cols, "usage across kill -9");
    assert_eq!(quota_table(&m, &["--verify", "-u", "1000"]).matches(": ok").count(), 3);
    // Freed, then allowed again.
    sh(&m, "rm work/f2 work/f3");
    assert!(sh_as(1000, 1000, &m, "touch work/g1 work/g2").status.success());
    // A chown moves the file's blocks and its inode to the new owner, on every target.
    sh(&m, "chown 2000:2000 work/f1");
    let moved: u64 = row(&quota_table(&m, &["-u", "2000"]))[0].parse().unwrap();
    assert!((4096..4096 + 64).contains(&moved), "the blocks moved: {moved}");
    assert_eq!(row(&quota_table(&m, &["-u", "1000"]))[0], "0");
    assert_eq!(quota_table(&m, &["--verify", "-u", "2000"]).matches(": ok").count(), 3);
}

/// A project's inode limit holds for a tree whatever the owners of its files; the table
/// names the project; a soft limit with a grace time turns hard when the grace is over.
#[test]
fn a_project_quota_limits_a_tree_whoever_owns_its_files_and_soft_limits_turn_hard() {
    let mut c = Cluster::single_node(&weft_bin(), 2);
    let m = c.mount();
    let mp = m.display().to_string();
    sh(&m, "mkdir -m 777 proj other");
    weft_ok(&["project", "-p", "4242", "-s", &format!("{mp}/proj")]);
    weft_ok(&["setquota", "-p", "4242", "-I", "4", &mp]);
    // The directory itself counts: 3 more inodes, by two users.
    assert!(sh_as(1000, 1000, &m, "touch proj/a proj/b").status.success());
    assert!(sh_as(2000, 2000, &m, "touch proj/c").status.success());
    let refused = sh_as(2000, 2000, &m, "touch proj/d");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("Disk quota exceeded"), "{refused:?}");
    assert!(sh_as(2000, 2000, &m, "touch other/d").status.success(), "outside the tree");
    let table = quota_table(&m, &["-p", "4242"]);
    assert!(table.starts_with("Disk quotas for prj 4242 (pid 4242):"), "{table}");
    assert_eq!(row(&table)[4], "4*", "{table}");

    // Soft limits: a grace of 2 s for groups, a soft limit of 1 for group 3000.
    weft_ok(&["setquota", "-t", "-g", "-i", "2", &mp]);
    assert_eq!(quota_table(&m, &["-t", "-g"]).trim(), "Block grace time: 1w; Inode grace time: 2s");
    weft_ok(&["setquota", "-g", "3000", "-i", "1", &mp]);
    assert!(sh_as(3000, 3000, &m, "touch other/s1 other/s2").status.success(), "over the soft limit, in grace");
    let table = quota_table(&m, &["-g", "3000"]);
    assert!(row(&table)[7].ends_with('s'), "the grace left: {table}");
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let late = sh_as(3000, 3000, &m, "touch other/s3");
    assert!(String::from_utf8_lossy(&late.stderr).contains("Disk quota exceeded"), "{late:?}");
    assert_eq!(row(&quota_table(&m, &["-g", "3000"]))[7], "expired");
    // Only root sets limits; a wrong option says what it takes.
    let denied = sh_as(1000, 1000, &m, &format!("{} setquota -u 1000 -I 100 {mp}", weft_bin().display()));
    assert!(String::from_utf8_lossy(&denied.stderr).contains("only root sets quotas"), "{denied:?}");
    let bad = weft(&["setquota", "-u", "1000", "-B", "12X", &mp]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("-B \"12X\": a size in KiB"), "{bad:?}");
}

/// A user over a hard block limit on a file striped over four OSTs gets EDQUOT within one
/// unit (1 MiB) of the limit, from dd and from fio; the limit holds across the OSTs, and
/// freeing space makes room again.
#[test]
fn a_block_limit_stops_dd_and_fio_within_a_unit_on_a_striped_file() {
    let mut c = Cluster::single_node(&weft_bin(), 4);
    let m = c.mount();
    let mp = m.display().to_string();
    sh(&m, "mkdir -m 777 work");
    weft_ok(&["setstripe", "-c", "4", "-S", "1M", &format!("{mp}/work")]);
    weft_ok(&["setquota", "-u", "1000", "-B", "8M", &mp]);
    let dd = sh_as(1000, 1000, &m, "dd if=/dev/zero of=work/big bs=1M count=16 conv=fsync status=none");
    assert!(!dd.status.success(), "{dd:?}");
    assert!(String::from_utf8_lossy(&dd.stderr).contains("Disk quota exceeded"), "{dd:?}");
    let size = std::fs::metadata(m.join("work/big")).unwrap().len();
    let limit = 8u64 << 20;
    assert!(size + (1 << 20) >= limit && size <= limit + (1 << 20), "dd wrote {size} bytes under a limit of {limit}");
    println!("dd: EDQUOT with {size} bytes written under a limit of {limit}");
    let table = quota_table(&m, &["-u", "1000"]);
    let kib: u64 = row(&table)[0].trim_end_matches('*').parse().unwrap();
    assert!(kib <= 8192 + 1024, "{table}");

    sh(&m, "rm work/big");
    let fio = sh_as(
        1000,
        1000,
        &m,
        "fio --name=q --directory=work --filename=f --rw=write --bs=1M --size=16M --end_fsync=1 --output-format=terse 2>&1",
    );
    let out = String::from_utf8_lossy(&fio.stdout);
    assert!(out.contains("Disk quota exceeded"), "{fio:?}");
    let size = std::fs::metadata(m.join("work/f")).unwrap().len();
    assert!(size <= limit + (1 << 20), "fio wrote {size} bytes");
    println!("fio: EDQUOT with {size} bytes written under a limit of {limit}");
    sh(&m, "rm work/f");
    // Room again: a small file fits.
    assert!(sh_as(1000, 1000, &m, "dd if=/dev/zero of=work/small bs=1M count=2 conv=fsync status=none")
        .status
        .success());
}
