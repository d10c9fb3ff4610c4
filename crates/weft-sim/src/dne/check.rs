//! What the DNE simulation expects after a kill and what it finds: the namespace walked
//! from the root over both MDTs as a client walks it, checked whole (every name leads to an
//! inode, each file's link count is its names, each MDT holds no inode without a name),
//! and compared with the changes acknowledged.

use super::cluster::{Cluster, MDTS};
use crate::model::join;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use weft_proto::msg::ops::Op;
use weft_proto::msg::{mdt, FileType, MdtReply, MdtRequest, RequestHeader};
use weft_proto::{ErrorCode, Fid, WeftResult};

/// A name as the workload knows it: `id` names its inode in the model (a migration gives
/// the inode a new FID, not a new id; hard links share it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub id: u64,
    pub kind: FileType,
    /// As last answered (None: not known, for a change that was not answered).
    pub fid: Option<Fid>,
    pub striped: bool,
}

/// Path (no leading slash) to entry.
pub type Names = BTreeMap<String, Entry>;

/// A name as the walk found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoundEntry {
    pub fid: Fid,
    pub kind: FileType,
    pub striped: bool,
}

pub type Found = BTreeMap<String, FoundEntry>;

/// What the inodes of each MDT counted at start (MDT0's root, anything else there is
/// before the first name).
pub type Baseline = [u64; 2];

/// The walk's reads (no reply slot: nothing to cache).
fn header() -> RequestHeader {
    RequestHeader { reply_slot: 0, ..crate::requests::header(0xd0e, 0) }
}

/// Reads of the check a storage fault left over fails (the lock service records a new
/// client) are sent again, this many times at most.
const READ_TRIES: usize = 3;

/// A read of the check, as a client sends it (again after an I/O error).
pub async fn read<O>(cluster: &Cluster, mdt: u32, op: O) -> WeftResult<O::Reply>
where
    O: Op<Request = MdtRequest, Answer = MdtReply> + Clone,
{
    let mut tries = 1;
    loop {
        match cluster.send(mdt, header(), op.clone()).await {
            Err(e) if e.code == ErrorCode::Io && tries < READ_TRIES => tries += 1,
            answer => return answer,
        }
    }
}

/// The inodes MDT `mdt` counts (statfs: files less free).
pub async fn inodes_used(cluster: &Cluster, mdt: u32) -> Result<u64, String> {
    let s = read(cluster, mdt, mdt::Statfs {}).await.map_err(|e| format!("statfs of MDT{mdt}: {e}"))?;
    Ok(s.files - s.ffree)
}

/// Walks the namespace from the root and checks it whole; answers what it found.
pub async fn walk_whole(cluster: &Cluster, baseline: &Baseline) -> Result<Found, String> {
    let mut found = Found::new();
    let mut names_of: HashMap<Fid, (u32, Vec<String>)> = HashMap::new();
    let mut inodes: [BTreeSet<Fid>; 2] = Default::default();
    let mut dirs = vec![(String::new(), Fid::ROOT)];
    let mut dirs_seen = BTreeSet::from([Fid::ROOT]);
    while let Some((path, dir)) = dirs.pop() {
        let info = read(cluster, dir.mdt_index(), mdt::Getattr { fid: dir }).await;
        let info = info.map_err(|e| format!("getattr of directory /{path} ({dir}): {e}"))?;
        let stripes = info.stripes.map(|s| s.fids).unwrap_or_else(|| vec![dir]);
        for stripe in stripes {
            if stripe != dir {
                inodes[stripe.mdt_index() as usize].insert(stripe);
            }
            let mut cookie = 0;
            loop {
                let op = mdt::Readdir { fid: stripe, cookie, max_entries: 64 };
                let page = read(cluster, stripe.mdt_index(), op).await;
                let page = page.map_err(|e| format!("readdir of /{path} (stripe {stripe}): {e}"))?;
                for entry in &page.entries {
                    cookie = entry.cookie;
                    if entry.name == b"." || entry.name == b".." {
                        continue;
                    }
                    let name = join(&path, &String::from_utf8_lossy(&entry.name));
                    let attr = read(cluster, entry.fid.mdt_index(), mdt::Getattr { fid: entry.fid }).await;
                    let attr = attr.map_err(|e| format!("/{name} leads to {}, which is not there: {e}", entry.fid))?;
                    if attr.attr.kind != entry.kind {
                        return Err(format!("/{name} is a {:?} entry of a {:?} inode", entry.kind, attr.attr.kind));
                    }
                    let striped = attr.stripes.is_some();
                    if found.insert(name.clone(), FoundEntry { fid: entry.fid, kind: entry.kind, striped }).is_some() {
                        return Err(format!("/{name} is listed twice"));
                    }
                    inodes[entry.fid.mdt_index() as usize].insert(entry.fid);
                    names_of.entry(entry.fid).or_insert((attr.attr.nlink, Vec::new())).1.push(name.clone());
                    if entry.kind == FileType::Directory {
                        if !dirs_seen.insert(entry.fid) {
                            return Err(format!("directory {} has two names, one /{name}", entry.fid));
                        }
                        dirs.push((name, entry.fid));
                    }
                }
                if page.eof || page.entries.is_empty() {
                    break;
                }
            }
        }
    }
    for (fid, (nlink, names)) in &names_of {
        let kind = found[&names[0]].kind;
        if kind != FileType::Directory && *nlink as usize != names.len() {
            return Err(format!("{fid} has link count {nlink} but the names {names:?}"));
        }
    }
    for mdt in MDTS {
        let used = inodes_used(cluster, mdt).await?;
        let named = baseline[mdt as usize] + inodes[mdt as usize].len() as u64;
        if used != named {
            return Err(format!(
                "MDT{mdt} counts {used} inodes, {named} with a name (or the root): {:?}",
                inodes[mdt as usize]
            ));
        }
    }
    Ok(found)
}

/// Why `found` is not `want` (the names, their kinds and striping, and which names share
/// an inode), if it is not.
pub fn differs(found: &Found, want: &Names) -> Option<String> {
    let (f, w): (BTreeSet<&String>, BTreeSet<&String>) = (found.keys().collect(), want.keys().collect());
    if f != w {
        let lost: Vec<_> = w.difference(&f).collect();
        let extra: Vec<_> = f.difference(&w).collect();
        return Some(format!("names lost {lost:?}, names not made {extra:?}"));
    }
    let (mut to_fid, mut to_id) = (HashMap::new(), HashMap::new());
    for (path, e) in want {
        let got = found[path];
        if (got.kind, got.striped) != (e.kind, e.striped) {
            return Some(format!("/{path} is {got:?}, not {e:?}"));
        }
        if *to_fid.entry(e.id).or_insert(got.fid) != got.fid || *to_id.entry(got.fid).or_insert(e.id) != e.id {
            return Some(format!("/{path} ({}) does not share its inode with the names it should", got.fid));
        }
    }
    None
}
