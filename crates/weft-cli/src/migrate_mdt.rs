//! `weft migrate -m MDT [-d] [-v] PATH...`: moves inodes to another MDT (Lustre's `lfs
//! migrate -m`). Each inode moves by one request to the MDT of its name (an atomic change
//! over the MDTs it touches, see weft-mds's dne/): it gets a new FID and inode number,
//! keeps its name, attributes and data. A tree moves top down: the directory first (with
//! its entries), then each of its children. What cannot move now (an open file, one with
//! hard links, one under HSM) is said and skipped, and the others go on; a second run
//! moves what was left, and what moved already is left as it is.

use crate::limits::{
    MIGRATE_MDT_OPEN_RETRIES as OPEN_RETRIES, MIGRATE_MDT_OPEN_RETRY_MS, MIGRATE_MDT_PAGE_ENTRIES as PAGE_ENTRIES,
};
use crate::tool::Tool;
use anyhow::bail;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use weft_client::Client;
use weft_proto::msg::{Caller, FileType};
use weft_proto::{ErrorCode, Fid, WeftError};

pub fn migrate(paths: &[PathBuf], to: u32, recursive: bool, verbose: bool) -> anyhow::Result<()> {
    let mut tool = Tool::new("weft_migrate")?;
    let (mut moved, mut failed) = (0usize, 0usize);
    for path in paths {
        let Some(name) = path.file_name().map(|n| n.as_encoded_bytes().to_vec()) else {
            eprintln!("weft migrate: {}: the root of the file system stays on MDT0000", path.display());
            failed += 1;
            continue;
        };
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let start = path.clone();
        let report = tool.on(&parent, move |client, who, parent| async move {
            Ok(walk(&client, &who, parent, name, &start, to, recursive).await)
        });
        let report = match report {
            Ok(r) => r,
            Err(e) => {
                eprintln!("weft migrate: {}: {e}", path.display());
                failed += 1;
                continue;
            }
        };
        for (p, result) in report {
            match result {
                Ok(()) => {
                    moved += 1;
                    if verbose {
                        println!("{}: on MDT{to:04x}", p.display());
                    }
                }
                Err(e) => {
                    eprintln!("weft migrate: {}: {}", p.display(), e.message);
                    failed += 1;
                }
            }
        }
    }
    if failed > 0 {
        bail!("{failed} of {} inodes were not moved to MDT {to} (above); run again to move them", moved + failed);
    }
    Ok(())
}

/// Moves `name` in `parent` (shown as `path`) and, when `recursive`, everything below it:
/// each inode's path and how its move went.
async fn walk(
    client: &Client,
    who: &Caller,
    parent: Fid,
    name: Vec<u8>,
    path: &Path,
    to: u32,
    recursive: bool,
) -> Vec<(PathBuf, Result<(), WeftError>)> {
    let mut report = Vec::new();
    let mut todo = vec![(parent, name, path.to_path_buf())];
    while let Some((parent, name, path)) = todo.pop() {
        let moved = migrate_one(client, who, parent, &name, to).await;
        let dir = match &moved {
            Ok(inode) if recursive && inode.attr.kind == FileType::Directory => Some(inode.attr.fid),
            _ => None,
        };
        report.push((path.clone(), moved.map(drop)));
        let Some(dir) = dir else { continue };
        match children(client, who, dir).await {
            Ok(list) => {
                for child in list.into_iter().rev() {
                    let shown = path.join(std::ffi::OsStr::from_bytes(&child));
                    todo.push((dir, child, shown));
                }
            }
            Err(e) => report.push((path, Err(e))),
        }
    }
    report
}

/// One inode moved; one open now is tried again for a while (an open of a moment, as a
/// backup's or a build's), then left.
async fn migrate_one(
    client: &Client,
    who: &Caller,
    parent: Fid,
    name: &[u8],
    to: u32,
) -> Result<weft_proto::msg::InodeInfo, WeftError> {
    let mut tries = 0;
    loop {
        match client.migrate_to_mdt(who, parent, name, to).await {
            Err(e) if e.code == ErrorCode::Busy && tries < OPEN_RETRIES => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(MIGRATE_MDT_OPEN_RETRY_MS)).await;
            }
            done => return done,
        }
    }
}

/// The names in directory `dir`.
async fn children(client: &Client, who: &Caller, dir: Fid) -> Result<Vec<Vec<u8>>, WeftError> {
    let (mut names, mut cookie) = (Vec::new(), 0);
    loop {
        let page = client.readdir(who, dir, cookie, PAGE_ENTRIES).await?;
        for e in &page.entries {
            if e.name != b"." && e.name != b".." {
                names.push(e.name.clone());
            }
            cookie = e.cookie;
        }
        if page.eof || page.entries.is_empty() {
            return Ok(names);
        }
    }
}
