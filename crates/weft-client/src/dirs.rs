//! Several MDTs, the client's side: which MDT each metadata request goes to, and the
//! stripes of the striped directories this client has seen.
//!
//! An inode's requests go to the MDT its FID names (each MDT allocates from its own
//! sequences); a name's requests go to the MDT of the directory that holds the name, and
//! in a striped directory to the stripe the name's hash picks, so that the client alone
//! spreads a directory's load over its MDTs (Lustre's LMV on the client).

use crate::Client;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Mutex;
use weft_proto::dirstripe::{DirStripeSpec, DirStripes};
use weft_proto::msg::update::DirStripeInfo;
use weft_proto::msg::{mdt, Caller, DirPage, InodeInfo, MdtReply, MdtRequest};
use weft_proto::{ErrorCode, Fid, WeftResult};

/// Striped directories known here are kept up to this many; past it one is forgotten for
/// each new one (a name request sent to the master by a client that forgot is answered
/// WrongStripe, and a listing reads the directory's attributes first, so the client reads
/// the stripes again).
const STRIPED_DIRS_MAX: usize = 65_536;

#[derive(Default)]
pub(crate) struct Stripes {
    dirs: Mutex<HashMap<Fid, DirStripes>>,
}

impl Stripes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Fid, DirStripes>> {
        self.dirs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Learns from an answer: a striped directory's stripes, or that a directory is not
    /// (any more) striped.
    pub fn note(&self, inode: &InodeInfo) {
        if inode.attr.kind != weft_proto::msg::FileType::Directory || inode.attr.nlink == 0 {
            return; // Not a directory, or a remote entry's bare FID.
        }
        let fid = inode.attr.fid;
        match &inode.stripes {
            Some(stripes) => {
                let mut dirs = self.lock();
                if dirs.len() >= STRIPED_DIRS_MAX && !dirs.contains_key(&fid) {
                    // One goes (any): a request to it is answered WrongStripe and it is read again.
                    if let Some(any) = dirs.keys().next().copied() {
                        dirs.remove(&any);
                    }
                }
                dirs.insert(fid, (**stripes).clone());
            }
            None => {
                let mut dirs = self.lock();
                if !dirs.is_empty() {
                    dirs.remove(&fid);
                }
            }
        }
    }

    pub fn of(&self, dir: Fid) -> Option<DirStripes> {
        let dirs = self.lock();
        if dirs.is_empty() {
            return None;
        }
        dirs.get(&dir).cloned()
    }

    /// The directory inode that holds `name` of `dir`: its stripe, or `dir` itself.
    pub fn holder(&self, dir: Fid, name: &[u8]) -> Fid {
        let dirs = self.lock();
        if dirs.is_empty() || name == b".." || name == b"." {
            return dir;
        }
        dirs.get(&dir).map_or(dir, |s| s.stripe_for(name))
    }

    /// Sends the names of `req` to their stripes.
    pub fn route(&self, req: &mut MdtRequest) {
        if self.lock().is_empty() {
            return;
        }
        if let Some((dir, name)) = req.one_name_mut() {
            *dir = self.holder(*dir, name);
        } else if let MdtRequest::Rename(mdt::Rename { src_parent, src_name, dst_parent, dst_name, .. }) = req {
            *src_parent = self.holder(*src_parent, src_name);
            *dst_parent = self.holder(*dst_parent, dst_name);
        }
        // An unnamed file goes where its directory's master is.
    }

    /// Whether no striped directory is known here.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

/// The MDT a metadata request goes to: the one whose sequence holds the FID it names (for a
/// name, its directory's). What names no inode goes to MDT0 (statfs, quotas, the root).
pub(crate) fn target(req: &MdtRequest) -> u32 {
    match req {
        // An action's progress goes to the MDT that queued it, which its cookie names.
        MdtRequest::HsmProgress(mdt::HsmProgress { cookie, .. }) => weft_proto::msg::hsm::hsm_cookie_mdt(*cookie),
        _ => req.subject().unwrap_or(Fid::ROOT).mdt_index(),
    }
}

/// A page of a striped directory from a page of each stripe, each read from `cookie`:
/// entries in hash order up to the smallest hash that every stripe not at its end reached,
/// so that the next page, from the last entry's hash, misses nothing of any stripe.
pub(crate) fn merge_pages(pages: Vec<DirPage>) -> DirPage {
    let reached = pages.iter().filter(|p| !p.eof).map(|p| p.entries.last().map_or(0, |e| e.cookie)).min();
    let mut entries: Vec<_> =
        pages.into_iter().flat_map(|p| p.entries).filter(|e| reached.is_none_or(|r| e.cookie <= r)).collect();
    entries.sort_by(|a, b| a.cookie.cmp(&b.cookie).then_with(|| a.name.cmp(&b.name)));
    DirPage { eof: reached.is_none(), entries }
}

impl Client {
    /// Reads again the stripes of the directories `req` names names in (after a
    /// WrongStripe: a directory striped since, or forgotten here).
    pub(crate) async fn learn_stripes(&self, who: &Caller, req: &MdtRequest) {
        let dirs = match req {
            MdtRequest::Rename(mdt::Rename { src_parent, dst_parent, .. }) => vec![*src_parent, *dst_parent],
            other => other.one_name().map(|(dir, _)| dir).into_iter().collect(),
        };
        for dir in dirs {
            let getattr: MdtRequest = mdt::Getattr { fid: dir }.into();
            let answer =
                self.send::<MdtRequest, MdtReply>(self.header(who), dir.mdt_index(), getattr, Bytes::new(), None);
            if let Ok((MdtReply::Inode(info), _)) = answer.await {
                self.stripes.note(&info);
            }
        }
    }

    /// A directory placed by `spec` (`weft mkdir -i -c -H`): remote or striped over MDTs.
    pub async fn mkdir_striped(
        &self,
        who: &Caller,
        parent: Fid,
        name: &[u8],
        mode: u32,
        spec: DirStripeSpec,
    ) -> WeftResult<InodeInfo> {
        self.mdt(who, mdt::MkdirStriped { parent, name: name.to_vec(), mode, umask: who.umask, spec }).await
    }

    /// A directory's placement over the MDTs (`weft getdirstripe`).
    pub async fn dir_stripe(&self, who: &Caller, fid: Fid) -> WeftResult<DirStripeInfo> {
        self.mdt(who, mdt::GetDirStripe { fid }).await
    }

    /// Sets or removes a directory's default placement of new subdirectories
    /// (`weft setdirstripe -D`); a striped directory's stripes take it too.
    pub async fn set_dir_default(&self, who: &Caller, fid: Fid, default: Option<DirStripeSpec>) -> WeftResult<()> {
        self.mdt(who, mdt::SetDirStripe { fid, default }).await
    }

    /// Moves the inode `name` in `parent` names to MDT `to` (`weft migrate -m`): a new FID
    /// there, the same name, attributes and data; a directory takes its entries (each of
    /// its children moves by a call of its own). Root only. The inode as it is now.
    pub async fn migrate_to_mdt(&self, who: &Caller, parent: Fid, name: &[u8], to: u32) -> WeftResult<InodeInfo> {
        self.mdt(who, mdt::Migrate { parent, name: name.to_vec(), to }).await
    }

    /// A page of a directory, merged from its stripes when it is striped.
    pub(crate) async fn readdir_striped(
        &self,
        who: &Caller,
        stripes: DirStripes,
        cookie: u64,
        max_entries: u32,
    ) -> WeftResult<DirPage> {
        let reads = stripes.fids.iter().map(|fid| self.mdt(who, mdt::Readdir { fid: *fid, cookie, max_entries }));
        let pages = futures::future::try_join_all(reads).await?;
        Ok(merge_pages(pages))
    }

    /// A lookup's answer for a name whose inode is on another MDT carries its FID alone:
    /// the inode from its own MDT.
    pub(crate) async fn resolve_remote(&self, who: &Caller, holder: Fid, inode: InodeInfo) -> WeftResult<InodeInfo> {
        if inode.attr.fid.mdt_index() == holder.mdt_index() {
            return Ok(inode);
        }
        match self.mdt(who, mdt::Getattr { fid: inode.attr.fid }).await {
            Err(e) if e.code == ErrorCode::NotFound => Err(e),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::msg::{DirEntry, FileType};

    fn entry(name: &str, cookie: u64) -> DirEntry {
        DirEntry { name: name.into(), fid: Fid::ROOT, kind: FileType::Regular, cookie }
    }

    #[test]
    fn merged_pages_stop_where_every_stripe_reached() {
        let a = DirPage { entries: vec![entry("a", 10), entry("b", 50)], eof: false };
        let b = DirPage { entries: vec![entry("c", 20), entry("d", 30), entry("e", 70)], eof: false };
        let c = DirPage { entries: vec![entry("f", 5)], eof: true };
        let page = merge_pages(vec![a, b, c]);
        let names: Vec<_> = page.entries.iter().map(|e| String::from_utf8_lossy(&e.name).into_owned()).collect();
        // "e" (70) waits for the next page: stripe a may hold names between 50 and 70.
        assert_eq!(names, ["f", "a", "c", "d", "b"]);
        assert!(!page.eof);
        let ends = merge_pages(vec![
            DirPage { entries: vec![entry("x", 3)], eof: true },
            DirPage { entries: vec![], eof: true },
        ]);
        assert!(ends.eof);
        assert_eq!(ends.entries.len(), 1);
    }

    #[test]
    fn requests_go_to_the_mdt_of_their_fid() {
        let on1 = Fid::new(weft_proto::fid::SEQ_METADATA_BASE + weft_proto::fid::SEQ_PER_MDT, 5, 0);
        assert_eq!(target(&mdt::Getattr { fid: on1 }.into()), 1);
        assert_eq!(target(&mdt::Lookup { parent: on1, name: b"x".to_vec() }.into()), 1);
        assert_eq!(target(&mdt::Lookup { parent: Fid::ROOT, name: b"x".to_vec() }.into()), 0);
        assert_eq!(target(&mdt::Statfs {}.into()), 0);
        let stripes = Stripes::default();
        let dir = Fid::new(weft_proto::fid::SEQ_METADATA_BASE, 9, 0);
        let info = |s: Option<Box<DirStripes>>| InodeInfo {
            attr: weft_proto::msg::Attr {
                fid: dir,
                kind: FileType::Directory,
                mode: 0o755,
                uid: 0,
                gid: 0,
                nlink: 2,
                size: 0,
                size_known: true,
                blocks: 0,
                atime: Default::default(),
                mtime: Default::default(),
                ctime: Default::default(),
                rdev: 0,
                projid: 0,
                proj_inherit: false,
            },
            layout: None,
            lock: None,
            stripes: s,
        };
        stripes.note(&info(Some(Box::new(DirStripes {
            hash: weft_proto::dirstripe::DirHash::Fnv1a64,
            fids: vec![dir, on1],
        }))));
        let mut req: MdtRequest = mdt::Unlink { parent: dir, name: b"file.1".to_vec() }.into();
        stripes.route(&mut req);
        let want = if weft_proto::dirstripe::DirHash::Fnv1a64.stripe_of(b"file.1", 2) == 0 { dir } else { on1 };
        assert_eq!(req, mdt::Unlink { parent: want, name: b"file.1".to_vec() }.into());
        stripes.note(&info(None));
        assert!(stripes.is_empty());
    }
}
