//! The inode cache: names and attributes the MDT answered with an intent lock, served again
//! without a request while that lock holds, as Lustre's client serves them from its dcache
//! and inodes. The kernel caches the same under the same locks, but forgets them under
//! memory pressure or `drop_caches` while the locks stay; then a stat of a file this client
//! made would cost a round trip to the MDS that nothing else changed meanwhile.
//!
//! The rules that keep it true:
//! * **Another client's change** calls back the lock first (the MDS takes its EX locks
//!   before changing anything): an entry serves only while the client's lock table holds
//!   that very lock, granted, with LOOKUP|UPDATE, on that very inode ([`Client`] checks at
//!   each use). A callback, the LRU, an eviction or a server restart ends it.
//! * **This client's own changes** are not called back (a client's locks never conflict
//!   with its own). So each of them [`InodeCache::begin`]s by forgetting what it touches:
//!   the inodes whose attributes, links or size change (a directory whose entries change
//!   among them), and the names it makes, removes or moves. An answer is remembered only if
//!   no change of this client touched its inodes between the request and the answer (a
//!   change counter per inode says so), since the MDS may have run the two in either order.
//! * A regular file whose size the MDS does not know (a writer has it open) is not cached:
//!   its size comes from the objects at each stat.
//! * An unlink or rename whose inode the cache cannot name may leave any cached inode with
//!   a wrong link count: every inode remembered before it stops serving (lazily: each entry
//!   carries when it was remembered).
//! * **Directories this client made** are *listed*: made empty under the lock the mkdir
//!   answer brought, and changed since only by this client (another client's change of its
//!   entries calls that lock back), every name in them is known. A lookup of a name not in
//!   the listing is answered "no such name" without asking: the lookup the kernel makes
//!   before every create. A change of this client whose outcome is not known (it failed,
//!   or another change of the same name overlapped it) ends the listing.
//! * **A file this client made** with O_EXCL has no extended attributes (the MDS sets none
//!   at create): while its lock holds and nothing of this client touched it since, the
//!   `security.capability` the kernel asks for before every write is answered "none"
//!   without a request.
//! * Bounded by [`INODES_CACHED_MAX`] and [`LISTED_NAMES_MAX`]: the oldest entries go first;
//!   a listing that grows past its bound ends.
//!
//! The cache is pure bookkeeping: no lock, request or await in here.

use crate::limits::{INODES_CACHED_MAX, INODE_CHANGES_TRACKED_MAX, LISTED_NAMES_MAX};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use weft_proto::lock::LockHandle;
use weft_proto::msg::wbc::BatchOp;
use weft_proto::msg::{
    mdt, FileType, InodeInfo, MdtRequest, Name, OPEN_ATIME_RELATIME, OPEN_ATIME_STRICT, OPEN_TRUNC, OPEN_WRITE,
    RENAME_EXCHANGE,
};
use weft_proto::Fid;

type NameKey = (Fid, Vec<u8>);

#[derive(Default)]
struct Inner {
    /// Counts every begin and end of a change; answers compare against it.
    seq: u64,
    /// Each with the `seq` it was remembered at.
    inodes: HashMap<Fid, (InodeInfo, u64)>,
    /// (parent, name) -> the inode it leads to.
    names: HashMap<NameKey, Fid>,
    /// inode -> its names in `names`, to forget them with it.
    names_of: HashMap<Fid, Vec<NameKey>>,
    /// Insertion order of `inodes` and `names` for the bound (stale keys are skipped).
    order: VecDeque<Key>,
    /// inode -> `seq` when a change of it last began or ended.
    touched: HashMap<Fid, u64>,
    /// inode -> changes of it under way.
    busy: HashMap<Fid, u32>,
    /// Changes older than this are no longer in `touched` (forgotten for the bound): an
    /// answer to a request sent before it is not remembered.
    floor: u64,
    /// An unlink or rename whose inode this cache could not name: every inode remembered
    /// before it may be stale (its links), and answers from before it are refused too.
    cleared_at: u64,
    /// Directories whose every name is known, with the lock that keeps it so.
    listings: HashMap<Fid, Listing>,
    /// Names in all listings together.
    listed: usize,
    /// Files made by this client (O_EXCL) and not touched since: no extended attributes,
    /// while the lock of their create answer holds.
    bare: HashMap<Fid, LockHandle>,
    /// (parent, name) -> changes of this client of that name under way.
    busy_names: HashMap<NameKey, u32>,
}

struct Listing {
    /// The lock of the directory (from its mkdir answer): the listing holds while it does.
    lock: LockHandle,
    names: HashSet<Vec<u8>>,
}

#[derive(Clone, PartialEq, Eq)]
enum Key {
    Inode(Fid),
    Name(NameKey),
    Bare(Fid),
}

/// A name one change makes, removes or moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameChange {
    pub parent: Fid,
    pub name: Vec<u8>,
    /// Whether the name is there once the change succeeded.
    pub exists_after: bool,
}

/// What one change of this client touches.
#[derive(Debug, Default, Clone)]
pub struct Touches {
    /// Inodes whose attributes change (a directory whose entries change is one).
    pub inodes: Vec<Fid>,
    /// Names made, removed or moved.
    pub names: Vec<NameChange>,
    /// Whether the inodes the removed or moved names led to lose a link (unlink, rmdir,
    /// rename over a name): those inodes are touched too.
    pub names_lose_links: bool,
}

/// A change under way: [`InodeCache::end`] it with what to remember of its answer.
#[derive(Debug)]
pub struct Change {
    inodes: Vec<Fid>,
    names: Vec<NameChange>,
    /// Parents whose listing cannot follow this change (another change of the same name
    /// was under way when it began).
    unsure: Vec<Fid>,
    /// `seq` right after this change began.
    began: u64,
}

/// What an answer may add: a name for an inode, or an inode's attributes, or both.
pub struct Answer<'a> {
    pub name: Option<(Fid, &'a [u8])>,
    pub inode: &'a InodeInfo,
    /// Only the name leads to the inode (its attributes may change before the change ends,
    /// as a create opened for writing).
    pub name_only: bool,
    /// The answer made the file, without extended attributes (an O_EXCL create).
    pub bare: bool,
}

#[derive(Default)]
pub struct InodeCache {
    inner: Mutex<Inner>,
}

/// Whether an answer's attributes may be served again: it came with a lock, and a regular
/// file's size is known.
pub(crate) fn cacheable(inode: &InodeInfo) -> bool {
    inode.lock.is_some() && (inode.attr.kind != FileType::Regular || inode.attr.size_known)
}

impl Inner {
    fn forget_inode(&mut self, fid: Fid) {
        self.inodes.remove(&fid);
        self.bare.remove(&fid);
        for key in self.names_of.remove(&fid).unwrap_or_default() {
            if self.names.get(&key) == Some(&fid) {
                self.names.remove(&key);
            }
        }
    }

    fn forget_name(&mut self, key: &NameKey) -> Option<Fid> {
        let fid = self.names.remove(key)?;
        if let Some(list) = self.names_of.get_mut(&fid) {
            list.retain(|k| k != key);
            if list.is_empty() {
                self.names_of.remove(&fid);
            }
        }
        Some(fid)
    }

    fn touch(&mut self, fid: Fid) {
        if self.touched.len() >= INODE_CHANGES_TRACKED_MAX && !self.touched.contains_key(&fid) {
            // Forget the history of inodes nobody is changing; answers to requests sent
            // before now are refused instead.
            let busy = &self.busy;
            self.touched.retain(|f, _| busy.contains_key(f));
            self.floor = self.seq;
        }
        self.touched.insert(fid, self.seq);
    }

    /// Whether no change of `fid` is under way or began or ended after `since`.
    fn untouched_since(&self, fid: Fid, since: u64) -> bool {
        !self.busy.contains_key(&fid) && self.touched.get(&fid).is_none_or(|&at| at <= since)
    }

    fn insert(&mut self, key: Key) {
        self.order.push_back(key);
        while self.inodes.len() + self.names.len() + self.bare.len() > INODES_CACHED_MAX {
            match self.order.pop_front() {
                Some(Key::Inode(fid)) => {
                    self.inodes.remove(&fid);
                }
                Some(Key::Bare(fid)) => {
                    self.bare.remove(&fid);
                }
                Some(Key::Name(name)) => {
                    self.forget_name(&name);
                }
                None => break,
            }
        }
        if self.order.len() > 2 * INODES_CACHED_MAX {
            // Keys whose entries went another way: drop them from the order.
            let (inodes, names, bare) = (&self.inodes, &self.names, &self.bare);
            self.order.retain(|k| match k {
                Key::Inode(f) => inodes.contains_key(f),
                Key::Name(n) => names.contains_key(n),
                Key::Bare(f) => bare.contains_key(f),
            });
        }
    }

    fn remember(&mut self, answer: &Answer<'_>, since: u64) {
        let fid = answer.inode.attr.fid;
        if since < self.floor || since < self.cleared_at || !cacheable(answer.inode) {
            return;
        }
        // The inode comes with another lock than the one its names were learned under: that
        // lock may have been called back by a rename since, and the new one vouches only for
        // this answer's name. Without this, a name moved away by another client would be
        // served again as soon as this client got a new lock on the inode (found by the
        // network simulation: a write through the old name landed in the renamed file).
        let handle = |i: &InodeInfo| i.lock.as_ref().map(|l| l.handle);
        if !answer.name_only && self.inodes.get(&fid).is_some_and(|(old, _)| handle(old) != handle(answer.inode)) {
            for key in self.names_of.remove(&fid).unwrap_or_default() {
                if self.names.get(&key) == Some(&fid) {
                    self.names.remove(&key);
                }
            }
        }
        if let Some((parent, name)) = answer.name {
            if !self.untouched_since(parent, since) || !self.untouched_since(fid, since) {
                return;
            }
            let key = (parent, name.to_vec());
            if let Some(old) = self.names.get(&key).copied() {
                if old != fid {
                    self.forget_name(&key);
                }
            }
            if self.names.insert(key.clone(), fid).is_none() {
                self.names_of.entry(fid).or_default().push(key.clone());
                self.insert(Key::Name(key));
            }
        } else if !self.untouched_since(fid, since) {
            return;
        }
        if !answer.name_only && self.inodes.insert(fid, (answer.inode.clone(), self.seq)).is_none() {
            self.insert(Key::Inode(fid));
        }
    }

    /// The inode `fid`, unless remembered before an unlink the cache could not follow.
    fn get(&mut self, fid: Fid) -> Option<InodeInfo> {
        let (inode, at) = self.inodes.get(&fid)?;
        if *at >= self.cleared_at {
            return Some(inode.clone());
        }
        // Remembered before an unlink the cache could not follow.
        self.inodes.remove(&fid);
        None
    }

    fn end_listing(&mut self, dir: Fid) {
        if let Some(l) = self.listings.remove(&dir) {
            self.listed -= l.names.len();
        }
    }

    /// A change of names succeeded: the listing of its parent follows it.
    fn apply_to_listing(&mut self, change: &NameChange) {
        let Some(listing) = self.listings.get_mut(&change.parent) else { return };
        if change.exists_after {
            if listing.names.insert(change.name.clone()) {
                self.listed += 1;
            }
        } else if listing.names.remove(&change.name) {
            self.listed -= 1;
        }
        if self.listed > LISTED_NAMES_MAX {
            self.end_listing(change.parent);
        }
    }
}

impl InodeCache {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The point a request starts from: pass it to [`InodeCache::remember`] with its answer.
    pub fn since(&self) -> u64 {
        self.inner().seq
    }

    /// The inode `name` in `parent` leads to, as last answered (the caller checks its lock).
    pub fn name(&self, parent: Fid, name: &[u8]) -> Option<InodeInfo> {
        let mut inner = self.inner();
        let fid = *inner.names.get(&(parent, name.to_vec()))?;
        inner.get(fid)
    }

    /// The inode `fid` as last answered (the caller checks its lock).
    pub fn inode(&self, fid: Fid) -> Option<InodeInfo> {
        self.inner().get(fid)
    }

    /// Whether `name` is known not to be in `parent`: the lock that must still hold for it
    /// (the caller checks, and [`InodeCache::unlist`]s the directory if it does not).
    pub fn absent(&self, parent: Fid, name: &[u8]) -> Option<LockHandle> {
        let inner = self.inner();
        let listing = inner.listings.get(&parent)?;
        let key = (parent, name.to_vec());
        (!listing.names.contains(name) && !inner.busy_names.contains_key(&key)).then_some(listing.lock)
    }

    /// Whether `fid` is a file this client made that has no extended attributes: the lock
    /// that must still hold for it (the caller checks, and [`InodeCache::forget`]s it if
    /// not).
    pub fn bare(&self, fid: Fid) -> Option<LockHandle> {
        self.inner().bare.get(&fid).copied()
    }

    /// Ends the listing of `dir` (its lock no longer holds).
    pub fn unlist(&self, dir: Fid) {
        self.inner().end_listing(dir);
    }

    /// Remembers an answer to a read sent at `since`, unless a change of this client
    /// touched what it names since.
    pub fn remember(&self, answer: Answer<'_>, since: u64) {
        self.inner().remember(&answer, since);
    }

    /// Drops `fid` (its lock no longer serves; a use found it so).
    pub fn forget(&self, fid: Fid) {
        self.inner().forget_inode(fid);
    }

    /// A change of this client begins: forgets what it touches, and keeps answers sent
    /// before it from being remembered until it ends.
    pub fn begin(&self, touches: &Touches) -> Change {
        let mut inner = self.inner();
        inner.seq += 1;
        let mut inodes = touches.inodes.clone();
        let mut unsure = Vec::new();
        for change in &touches.names {
            let key = (change.parent, change.name.clone());
            match inner.forget_name(&key) {
                Some(child) if touches.names_lose_links => inodes.push(child),
                Some(_) => {}
                // The inode that loses a link is not known here: no inode remembered before
                // now can be trusted for its link count.
                None if touches.names_lose_links => inner.cleared_at = inner.seq,
                None => {}
            }
            let busy = inner.busy_names.entry(key).or_default();
            *busy += 1;
            if *busy > 1 {
                unsure.push(change.parent);
            }
        }
        inodes.sort();
        inodes.dedup();
        for &fid in &inodes {
            // Its attributes change; its names stay (a name that changes is in `names`).
            inner.inodes.remove(&fid);
            inner.bare.remove(&fid);
            *inner.busy.entry(fid).or_default() += 1;
            inner.touch(fid);
        }
        Change { inodes, names: touches.names.clone(), unsure, began: inner.seq }
    }

    /// The change ended: `outcome` is its answer to remember (None: nothing to keep), or
    /// Err if it failed (what it did is not known). What it touched may be remembered
    /// again, starting with the answer if no other change of this client touched the same
    /// meanwhile.
    /// `dirs`: the directories whose entries it changed, as the MDS read them after it.
    pub fn end(&self, change: Change, outcome: Result<Option<Answer<'_>>, ()>, dirs: &[InodeInfo]) {
        let mut inner = self.inner();
        for fid in &change.inodes {
            if let Some(n) = inner.busy.get_mut(fid) {
                *n -= 1;
                if *n == 0 {
                    inner.busy.remove(fid);
                }
            }
        }
        let mut unsure = change.unsure;
        for name in &change.names {
            let key = (name.parent, name.name.clone());
            if let Some(n) = inner.busy_names.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    inner.busy_names.remove(&key);
                } else {
                    unsure.push(name.parent); // another change of the name began meanwhile
                }
            }
        }
        for name in &change.names {
            if outcome.is_err() || unsure.contains(&name.parent) {
                inner.end_listing(name.parent);
            } else {
                inner.apply_to_listing(name);
            }
        }
        for dir in dirs {
            // Its times, size and links as this change left them (if nobody else touched it).
            inner.remember(&Answer { name: None, inode: dir, name_only: false, bare: false }, change.began);
        }
        if let Ok(Some(answer)) = outcome {
            // Touched by this change at `began`, and by nobody after.
            inner.remember(&answer, change.began);
            let made = answer.inode.attr.fid;
            if let (true, Some(lock)) = (answer.bare, &answer.inode.lock) {
                if inner.untouched_since(made, change.began) && inner.bare.insert(made, lock.handle).is_none() {
                    inner.insert(Key::Bare(made));
                }
            }
            // A directory this client just made holds nothing yet: it is listed.
            let made = &answer.inode;
            if let (Some(_), FileType::Directory, Some(lock)) = (answer.name, made.attr.kind, &made.lock) {
                let listing = Listing { lock: lock.handle, names: HashSet::new() };
                if let Some(old) = inner.listings.insert(made.attr.fid, listing) {
                    inner.listed -= old.names.len();
                }
            }
        }
        inner.seq += 1;
        for fid in change.inodes {
            inner.touch(fid);
        }
    }

    /// Forgets everything (an eviction, a reconnect to the MDS).
    pub fn clear(&self) {
        let mut inner = self.inner();
        inner.inodes.clear();
        inner.names.clear();
        inner.names_of.clear();
        inner.order.clear();
        inner.listings.clear();
        inner.listed = 0;
        inner.bare.clear();
        inner.cleared_at = inner.seq;
    }

    /// Entries cached now (inodes, names).
    pub fn len(&self) -> (usize, usize) {
        let inner = self.inner();
        (inner.inodes.len(), inner.names.len())
    }
}

/// What of a change's answer is remembered when it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keep {
    Nothing,
    /// The answered inode's attributes.
    Inode,
    /// The name made, leading to the answered inode; its attributes too unless `name_only`;
    /// `bare`: a new file without extended attributes.
    Name {
        parent: Fid,
        name: Vec<u8>,
        name_only: bool,
        bare: bool,
    },
}

impl Keep {
    /// What of the answered `inode` this keeps.
    pub fn answer<'a>(&'a self, inode: &'a InodeInfo) -> Option<Answer<'a>> {
        match self {
            Keep::Nothing => None,
            Keep::Inode => Some(Answer { name: None, inode, name_only: false, bare: false }),
            Keep::Name { parent, name, name_only, bare } => {
                Some(Answer { name: Some((*parent, name)), inode, name_only: *name_only, bare: *bare })
            }
        }
    }
}

/// What a metadata request of this client changes (None for a read) and what of its
/// answer to keep.
pub fn plan(req: &MdtRequest) -> Option<(Touches, Keep)> {
    let named = |parent: &Fid, name: &Name, name_only| Keep::Name {
        parent: *parent,
        name: name.clone(),
        name_only,
        bare: false,
    };
    let made = |parent: &Fid, name: &Name| NameChange { parent: *parent, name: name.clone(), exists_after: true };
    let gone = |parent: &Fid, name: &Name| NameChange { parent: *parent, name: name.clone(), exists_after: false };
    let t = |inodes: Vec<Fid>, names: Vec<NameChange>, names_lose_links| Touches { inodes, names, names_lose_links };
    Some(match req {
        MdtRequest::Lookup(_) | MdtRequest::Getattr(_) | MdtRequest::ReplayOpens(_) | MdtRequest::GetRoot(_) => {
            return None
        }
        MdtRequest::Setattr(mdt::Setattr { fid, .. }) => (t(vec![*fid], vec![], false), Keep::Inode),
        // Opened for writing: the size may change before the close tells it.
        MdtRequest::Create(mdt::Create { parent, name, exclusive, .. }) => {
            let keep = Keep::Name { parent: *parent, name: name.clone(), name_only: true, bare: *exclusive };
            (t(vec![*parent], vec![made(parent, name)], false), keep)
        }
        MdtRequest::Mkdir(mdt::Mkdir { parent, name, .. })
        | MdtRequest::MkdirStriped(mdt::MkdirStriped { parent, name, .. })
        | MdtRequest::Mknod(mdt::Mknod { parent, name, .. })
        | MdtRequest::Symlink(mdt::Symlink { parent, name, .. }) => {
            (t(vec![*parent], vec![made(parent, name)], false), named(parent, name, false))
        }
        MdtRequest::Link(mdt::Link { fid, parent, name }) => {
            (t(vec![*fid, *parent], vec![made(parent, name)], false), named(parent, name, false))
        }
        MdtRequest::Unlink(mdt::Unlink { parent, name }) | MdtRequest::Rmdir(mdt::Rmdir { parent, name }) => {
            (t(vec![*parent], vec![gone(parent, name)], true), Keep::Nothing)
        }
        // The name leads to a new inode; the old one is gone.
        MdtRequest::Migrate(mdt::Migrate { parent, name, .. }) => {
            (t(vec![*parent], vec![gone(parent, name)], true), Keep::Nothing)
        }
        MdtRequest::Rename(mdt::Rename { src_parent, src_name, dst_parent, dst_name, flags }) => {
            let exchange = flags & RENAME_EXCHANGE != 0;
            let src = NameChange { parent: *src_parent, name: src_name.clone(), exists_after: exchange };
            (t(vec![*src_parent, *dst_parent], vec![src, made(dst_parent, dst_name)], true), Keep::Nothing)
        }
        MdtRequest::Open(mdt::Open { fid, flags }) if flags & (OPEN_WRITE | OPEN_TRUNC) != 0 => {
            (t(vec![*fid], vec![], false), Keep::Nothing)
        }
        // An open for reading may move atime (see `OPEN_ATIME_RELATIME`): the answer has it.
        MdtRequest::Open(mdt::Open { fid, flags }) if flags & (OPEN_ATIME_RELATIME | OPEN_ATIME_STRICT) != 0 => {
            (t(vec![*fid], vec![], false), Keep::Inode)
        }
        MdtRequest::Open(_) => (Touches::default(), Keep::Nothing),
        // A file without a name changes no name or inode this cache holds.
        MdtRequest::CreateTmpfile(_) => (Touches::default(), Keep::Nothing),
        MdtRequest::SwapLayouts(mdt::SwapLayouts { fid, with, .. }) => {
            (t(vec![*fid, *with], vec![], false), Keep::Nothing)
        }
        MdtRequest::Close(mdt::Close { fid, .. }) => (t(vec![*fid], vec![], false), Keep::Inode),
        MdtRequest::SetXattr(mdt::SetXattr { fid, .. })
        | MdtRequest::RemoveXattr(mdt::RemoveXattr { fid, .. })
        | MdtRequest::SetStripe(mdt::SetStripe { fid, .. })
        | MdtRequest::LayoutIntent(mdt::LayoutIntent { fid, .. })
        | MdtRequest::Mirror(mdt::Mirror { fid, .. })
        | MdtRequest::CreateVolatile(mdt::CreateVolatile { like: fid, .. })
        | MdtRequest::DeleteStripe(mdt::DeleteStripe { fid }) => (t(vec![*fid], vec![], false), Keep::Nothing),
        MdtRequest::Readlink(_)
        | MdtRequest::Readdir(_)
        | MdtRequest::ReaddirPlus(_)
        | MdtRequest::GetXattr(_)
        | MdtRequest::ListXattr(_)
        | MdtRequest::GetStripe(_)
        | MdtRequest::Statfs(_)
        | MdtRequest::Fid2Path(_) => return None,
        // The changelog's: nothing of the namespace a client caches.
        MdtRequest::ChangelogRegister(_)
        | MdtRequest::ChangelogDeregister(_)
        | MdtRequest::ChangelogClear(_)
        | MdtRequest::ChangelogRead(_)
        | MdtRequest::ChangelogUsersList(_)
        | MdtRequest::HsmStateGet(_)
        | MdtRequest::HsmActionGet(_) => return None,
        MdtRequest::HsmStateSet(mdt::HsmStateSet { fid, .. }) => (t(vec![*fid], vec![], false), Keep::Nothing),
        // The objects go, the size is recorded: the inode as the release left it.
        MdtRequest::HsmRelease(mdt::HsmRelease { fid, .. }) => (t(vec![*fid], vec![], false), Keep::Inode),
        // States and actions only (the end of a restore calls back other clients' locks;
        // the copytool's own opens saw the new layout).
        MdtRequest::HsmRequest(_) | MdtRequest::HsmTake(_) | MdtRequest::HsmProgress(_) => {
            (Touches::default(), Keep::Nothing)
        }
        // Quotas: nothing of the namespace a client caches.
        MdtRequest::QuotaGet(_) | MdtRequest::QuotaAcquire(_) => return None,
        MdtRequest::QuotaSet(_) | MdtRequest::QuotaDelete(_) | MdtRequest::QuotaSetGrace(_) => {
            (Touches::default(), Keep::Nothing)
        }
        MdtRequest::GetDirStripe(_) | MdtRequest::TxnOutcome(_) => return None,
        MdtRequest::SetDirStripe(mdt::SetDirStripe { fid, .. })
        | MdtRequest::SyncStripe(mdt::SyncStripe { fid, .. }) => (t(vec![*fid], vec![], false), Keep::Nothing),
        // The write-back cache's: the grant changes nothing cached; a batch changes its
        // directories, the names it makes and removes, the files it changes.
        MdtRequest::WbcGrant(_) => (Touches::default(), Keep::Nothing),
        MdtRequest::Batch(mdt::Batch { ops }) => {
            let (mut inodes, mut names) = (Vec::new(), Vec::new());
            for op in ops {
                match op {
                    BatchOp::Create { parent, name, .. } => {
                        inodes.push(*parent);
                        names.push(made(parent, name));
                    }
                    BatchOp::Unlink { parent, name } => {
                        inodes.push(*parent);
                        names.push(gone(parent, name));
                    }
                    BatchOp::Setattr { fid, .. } => inodes.push(*fid),
                }
            }
            inodes.sort();
            inodes.dedup();
            // A batch removes only names it made, whose inodes this cache never held.
            (t(inodes, names, false), Keep::Nothing)
        }
        // The MDTs' own: no client sends them.
        MdtRequest::UpdatePrepare(_) | MdtRequest::UpdateResolve(_) => (Touches::default(), Keep::Nothing),
    })
}

#[cfg(test)]
#[path = "inodes_tests.rs"]
mod tests;
