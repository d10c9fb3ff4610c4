//! A thousand OSTs (issue 35 item 2): indices sparse up to 9,990, served by four OSS
//! processes on loopback addresses, beside an MGS and an MDS each in its own process.
//!
//! * `thousand_sparse_osts_in_four_oss_processes`: the file system comes up, files of one
//!   and four stripes land on the sparse indices and read back, `weft df` lists every OST,
//!   and a mount connects to an OSS process only once it does I/O there.
//! * `ost_count_bench` (ignored; `scripts/ost-scale-bench.sh` runs it in release): with 10
//!   and with 1,000 OSTs, the mount's, the MDS's and the MGS's memory and the bytes of an open's and a
//!   close's answer for files of one and four stripes, printed as a table; the answers
//!   must not grow with the OST count (a few bytes may differ: numbers are varints).

mod common;

use common::*;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;
use weft_proto::msg::{mdt, Caller, OPEN_READ};
use weft_proto::Fid;

/// The OSS processes' addresses: 127.0.0.4 to 127.0.0.7.
const OSS_IPS: [&str; 4] = ["127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7"];

/// `count` OSTs, indices 0, 10, 20, ... dealt over four OSS processes in turn; the MGS and
/// the MDS in processes of their own (so that the MDS's memory is the MDS's alone).
fn sparse_cluster(count: u32) -> Cluster {
    let mut nodes = vec![NodeSpec::new("mgs", "127.0.0.2").mgs(), NodeSpec::new("mds", "127.0.0.3").mdt(0)];
    for (k, ip) in OSS_IPS.iter().enumerate() {
        let osts: Vec<u32> = (0..count).filter(|i| i % 4 == k as u32).map(|i| i * 10).collect();
        nodes.push(NodeSpec::new(&format!("oss{k}"), ip).osts(&osts));
    }
    Cluster::start(&weft_bin(), nodes)
}

/// The remote IPs process `pid` has established TCP connections to.
fn connected_ips(pid: u32) -> BTreeSet<String> {
    let out = run(std::process::Command::new("ss").args(["-tnpH", "state", "established"]));
    out.lines()
        .filter(|l| l.contains(&format!("pid={pid},")))
        .filter_map(|l| l.split_whitespace().nth(3))
        .filter_map(|peer| peer.rsplit_once(':').map(|(ip, _)| ip.to_string()))
        .collect()
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("VmRSS in kB")
}

fn fid_of(path: &Path) -> Fid {
    weft_ok(&["path2fid", s(path)]).trim().parse().expect("path2fid prints a FID")
}

/// The OST indices `getstripe` lists for a file, in stripe order.
fn stripe_osts(path: &Path) -> Vec<u32> {
    let out = weft_ok(&["getstripe", s(path)]);
    let rows = out.lines().skip_while(|l| !l.contains("obdidx")).skip(1);
    rows.filter_map(|l| l.split_whitespace().next()?.parse().ok()).collect()
}

#[test]
fn thousand_sparse_osts_in_four_oss_processes() {
    let started = Instant::now();
    let mut cluster = sparse_cluster(1000);
    let up_s = started.elapsed().as_secs_f64();
    let map = cluster.map().unwrap();
    let osts: BTreeSet<u32> = map.osts().map(|t| t.index).collect();
    assert_eq!(osts.len(), 1000);
    assert_eq!((osts.first(), osts.last()), (Some(&0), Some(&9990)), "sparse indices 0..=9990");

    let mnt = cluster.mount();
    let mount_pid = cluster.mount_pid(&mnt);
    // No OSS process is reached before the mount does I/O on one of its OSTs.
    std::fs::write(mnt.join("probe"), b"").unwrap();
    let before = connected_ips(mount_pid);
    assert!(OSS_IPS.iter().all(|ip| !before.contains(*ip)), "the mount reached an OSS before using it: {before:?}");

    // A file on OST 9990 alone (dealt to the fourth OSS: 999 % 4 == 3): one OSS process.
    let one = mnt.join("on-9990");
    weft_ok(&["setstripe", "-c", "1", "-i", "9990", s(&one)]);
    let data = pattern(1, 0, 300_000);
    std::fs::write(&one, &data).unwrap();
    assert_eq!(stripe_osts(&one), vec![9990]);
    let after = connected_ips(mount_pid);
    let reached: Vec<&str> = OSS_IPS.iter().copied().filter(|ip| after.contains(*ip)).collect();
    assert_eq!(reached, vec!["127.0.0.7"], "only the OSS of OST 9990 is connected to: {after:?}");

    // Files of four stripes spread over the sparse indices, every byte read back.
    let dir = mnt.join("four");
    std::fs::create_dir(&dir).unwrap();
    weft_ok(&["setstripe", "-c", "4", "-S", "64K", s(&dir)]);
    let mut used = BTreeSet::new();
    for i in 0..20u64 {
        let f = dir.join(format!("f{i}"));
        std::fs::write(&f, pattern(i, 0, 256 * 1024 + i as usize)).unwrap();
        let placed = stripe_osts(&f);
        assert_eq!(placed.len(), 4, "{}: four stripes", f.display());
        assert!(placed.iter().all(|o| osts.contains(o)), "{placed:?} are OSTs of the map");
        used.extend(placed);
    }
    for i in 0..20u64 {
        let back = std::fs::read(dir.join(format!("f{i}"))).unwrap();
        assert!(back == pattern(i, 0, 256 * 1024 + i as usize), "f{i} reads back as written");
    }
    assert!(used.len() >= 20, "new files spread over many OSTs, not a few: {used:?}");
    assert_eq!(std::fs::read(&one).unwrap(), data);

    // `weft df` lists the MDT and every OST (a page of targets at a time), then the sum.
    let started_df = Instant::now();
    let df = weft_ok(&["df", s(&mnt)]);
    let df_s = started_df.elapsed().as_secs_f64();
    let rows: Vec<&str> = df.lines().filter(|l| l.starts_with("weft-OST")).collect();
    assert_eq!(rows.len(), 1000, "{df}");
    let silent: Vec<&&str> = rows.iter().filter(|r| r.split_whitespace().nth(1) == Some("-")).collect();
    assert!(silent.is_empty(), "every OST answers: {silent:?}");
    assert!(df.contains("weft-OST2706_UUID") && !df.contains("weft-OST270f_UUID"), "9990 is there, 9999 not:\n{df}");
    assert!(df.contains("filesystem_summary:"));
    // The commands that read the mount's map (weft mdts, weft hsm) work at this size too.
    let mdts = weft_ok(&["mdts", s(&mnt)]);
    assert!(mdts.contains("0: weft-MDT0000_UUID ACTIVE"), "{mdts}");
    eprintln!("1,000 OSTs: up in {up_s:.1} s, weft df in {df_s:.2} s");
}

/// How much an answer may differ between two clusters for the same file shape: its numbers
/// (handles, lock cookies, times) are varints of a few bytes more or less.
const REPLY_VARINT_SLACK_BYTES: usize = 16;

/// What one row of the table measures.
struct Measured {
    osts: u32,
    mount_kib: u64,
    mds_kib: u64,
    mgs_kib: u64,
    /// (stripes, open answer bytes, close answer bytes)
    replies: Vec<(u32, usize, usize)>,
}

/// Bytes of the reply frame carrying `reply` for an MDT op: the frame header and the
/// encoded message, as the server writes them.
fn reply_bytes<R: weft_proto::msg::ops::Payload<weft_proto::msg::MdtReply>>(reply: R) -> usize {
    let body = weft_proto::msg::ReplyBody::Mdt(reply.into_reply());
    let msg = weft_proto::wire::encode_message::<weft_proto::msg::Reply>(&Ok(body)).unwrap();
    weft_proto::wire::HEADER_BYTES + msg.len()
}

fn measure(osts: u32) -> Measured {
    let mut cluster = sparse_cluster(osts);
    let mnt = cluster.mount();
    let mount_pid = cluster.mount_pid(&mnt);
    let mds_pid = cluster.server("mds").pid().expect("MDS running");
    let mgs_pid = cluster.server("mgs").pid().expect("MGS running");
    // The same work at both counts: 200 files of one and of four stripes, written, read
    // and listed.
    let mut files = Vec::new();
    for stripes in [1u32, 4] {
        let dir = mnt.join(format!("c{stripes}"));
        std::fs::create_dir(&dir).unwrap();
        weft_ok(&["setstripe", "-c", &stripes.to_string(), "-S", "64K", s(&dir)]);
        for i in 0..100u64 {
            let f = dir.join(format!("f{i}"));
            std::fs::write(&f, pattern(i, 0, 256 * 1024)).unwrap();
            assert_eq!(std::fs::read(&f).unwrap().len(), 256 * 1024);
        }
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 100);
        files.push((stripes, dir.join("f0")));
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    let (mount_kib, mds_kib, mgs_kib) = (rss_kib(mount_pid), rss_kib(mds_pid), rss_kib(mgs_pid));

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let config = weft_client::ClientConfig::new(cluster.mgs_address.clone());
    let client = rt.block_on(weft_client::Client::connect(config)).unwrap();
    let root = Caller::root();
    let mut replies = Vec::new();
    for (stripes, file) in files {
        let fid = fid_of(&file);
        let opened = rt.block_on(client.mdt_op(&root, mdt::Open { fid, flags: OPEN_READ })).unwrap();
        let layout = opened.inode.layout.as_ref().expect("an open answers the layout");
        assert_eq!(layout.objects().count(), stripes as usize);
        let handle = opened.handle;
        let open = reply_bytes(opened);
        let close = mdt::Close { fid, handle, size_blocks: None, data_version: 0, mtime_ns: 0 };
        let closed = rt.block_on(client.mdt_op(&root, close)).unwrap();
        replies.push((stripes, open, reply_bytes(closed)));
    }
    Measured { osts, mount_kib, mds_kib, mgs_kib, replies }
}

#[test]
#[ignore = "a benchmark: scripts/ost-scale-bench.sh runs it in release"]
fn ost_count_bench() {
    let rows: Vec<Measured> = [10, 1000].into_iter().map(measure).collect();
    println!(
        "| OSTs | mount RSS | MDS RSS | MGS RSS | open, 1 stripe | close, 1 stripe | open, 4 stripes | close, 4 stripes |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for m in &rows {
        let r = |stripes: u32| m.replies.iter().find(|r| r.0 == stripes).copied().unwrap();
        let (one, four) = (r(1), r(4));
        println!(
            "| {} | {:.1} MiB | {:.1} MiB | {:.1} MiB | {} B | {} B | {} B | {} B |",
            m.osts,
            m.mount_kib as f64 / 1024.0,
            m.mds_kib as f64 / 1024.0,
            m.mgs_kib as f64 / 1024.0,
            one.1,
            one.2,
            four.1,
            four.2
        );
    }
    for ((stripes, open, close), (_, open_k, close_k)) in rows[0].replies.iter().zip(&rows[1].replies) {
        // Varints: a handle, a lock cookie or a time may take a byte or two more.
        assert!(
            *open_k <= open + REPLY_VARINT_SLACK_BYTES && *close_k <= close + REPLY_VARINT_SLACK_BYTES,
            "{stripes} stripe(s): open {open} -> {open_k} B, close {close} -> {close_k} B with 100 times the OSTs"
        );
    }
}
