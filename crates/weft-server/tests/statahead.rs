//! Statahead over TCP, as a program that stats every file of a directory it has not seen
//! (`ls -l`, mdtest's stat phase in a new process) meets it: a new client's lookups cost a
//! few pages of entries with their inodes, not one request each, and what it caches stays
//! coherent with another client's changes (their locks are called back). Lookups of names
//! that are not there never start it, and a sparse walk of the listing (find) pauses it.

use std::time::Duration;
use weft_client::{Client, ClientConfig};
use weft_proto::msg::{Caller, SetAttr};
use weft_proto::{ErrorCode, Fid};
use weft_server::{RunningServer, ServerConfig};

const FILES: usize = 2500;

fn config(mgs: &str, statahead: bool) -> ClientConfig {
    ClientConfig { request_timeout: Duration::from_secs(30), statahead, ..ClientConfig::new(mgs) }
}

/// The MDT requests the server answered of `op`.
fn answered(server: &RunningServer, op: &str) -> u64 {
    server.requests_by_op().into_iter().filter(|(o, _)| *o == op).map(|(_, n)| n).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_client_stats_a_directory_in_pages_and_stays_coherent() {
    let root = tempfile::tempdir().unwrap();
    let server = RunningServer::start(ServerConfig::all_in_one(root.path().join("s"), vec![0])).await.unwrap();
    let mgs = server.mgs_address();
    let who = Caller::root();
    let maker = Client::connect(config(&mgs, true)).await.unwrap();
    let dir = maker.mkdir(&who, Fid::ROOT, b"d", 0o755).await.unwrap().attr.fid;
    let mut fids = Vec::new();
    for i in 0..FILES {
        fids.push(maker.create_file(&who, dir, format!("f{i}").as_bytes(), 0o644).await.unwrap().attr.fid);
    }
    let odd = SetAttr { mode: Some(0o600), ..SetAttr::default() };
    maker.setattr(&who, fids[7], odd).await.unwrap();

    // A new client looks up every name, in the order they were made.
    let reader = Client::connect(config(&mgs, true)).await.unwrap();
    let (lookups, pages) = (answered(&server, "mds_lookup"), answered(&server, "mds_readdir_plus"));
    for (i, fid) in fids.iter().enumerate() {
        let inode = reader.lookup(&who, dir, format!("f{i}").as_bytes()).await.unwrap();
        assert_eq!(inode.attr.fid, *fid);
        assert_eq!(inode.attr.mode, if i == 7 { 0o600 } else { 0o644 }, "f{i}'s mode");
    }
    let lookups = answered(&server, "mds_lookup") - lookups;
    let pages = answered(&server, "mds_readdir_plus") - pages;
    let most_pages = FILES.div_ceil(1024) as u64;
    assert!(pages >= 2 && pages <= most_pages, "{pages} pages of entries for {FILES} names");
    assert!(lookups <= 8 + most_pages, "{lookups} lookups went to the MDS for {FILES} names");

    // The maker's changes call the reader's cached inodes back.
    maker.setattr(&who, fids[100], SetAttr { mode: Some(0o640), ..SetAttr::default() }).await.unwrap();
    assert_eq!(reader.lookup(&who, dir, b"f100").await.unwrap().attr.mode, 0o640);
    maker.unlink(&who, dir, b"f200").await.unwrap();
    assert_eq!(reader.lookup(&who, dir, b"f200").await.unwrap_err().code, ErrorCode::NotFound);
    maker.create_file(&who, dir, b"new", 0o644).await.unwrap();
    assert!(reader.lookup(&who, dir, b"new").await.is_ok());

    // Without statahead, each name is a lookup.
    let plain = Client::connect(config(&mgs, false)).await.unwrap();
    let before = answered(&server, "mds_lookup");
    for i in 300..400 {
        plain.lookup(&who, dir, format!("f{i}").as_bytes()).await.unwrap();
    }
    assert_eq!(answered(&server, "mds_lookup") - before, 100);

    // A sparse walk of the listing (find -name '*01*'): one name in 40, in the listing's
    // order. After the first page it pauses: plain lookups cost the MDS less than a page
    // of inodes per few names.
    let finder = Client::connect(config(&mgs, true)).await.unwrap();
    let mut listing = Vec::new();
    let mut cookie = 0;
    loop {
        let page = finder.readdir(&who, dir, cookie, 1024).await.unwrap();
        listing.extend(page.entries.iter().map(|e| e.name.clone()));
        match page.entries.last() {
            Some(last) if !page.eof => cookie = last.cookie,
            _ => break,
        }
    }
    let (lookups, pages) = (answered(&server, "mds_lookup"), answered(&server, "mds_readdir_plus"));
    let looked: Vec<_> = listing.iter().step_by(40).collect();
    for name in &looked {
        finder.lookup(&who, dir, name).await.unwrap();
    }
    let pages = answered(&server, "mds_readdir_plus") - pages;
    let lookups = answered(&server, "mds_lookup") - lookups;
    assert!(pages <= 1, "{pages} pages of inodes for {} names of {}", looked.len(), listing.len());
    assert!(lookups as usize >= looked.len() - 1024 / 40 - 1, "{lookups} lookups");

    // Names that are not there: no statahead.
    let other = Client::connect(config(&mgs, true)).await.unwrap();
    let pages = answered(&server, "mds_readdir_plus");
    for i in 0..50 {
        assert_eq!(
            other.lookup(&who, dir, format!("absent{i}").as_bytes()).await.unwrap_err().code,
            ErrorCode::NotFound
        );
    }
    assert_eq!(answered(&server, "mds_readdir_plus"), pages, "no statahead for names that are not there");
    for c in [&maker, &reader, &plain, &finder, &other] {
        c.release_locks().await;
    }
}
