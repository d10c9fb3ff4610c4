//! Coordinating changes that touch several MDTs: two-phase commit with presumed abort.
//!
//! The MDT a client's request reaches (the one that holds the name it changes)
//! coordinates. It checks what it can, then asks each MDT that holds another part to
//! prepare it ([`Update`], ops/update.rs: done at once and durably, with a record of how to
//! undo it), then makes its own part in one batch with the request's reply and the record
//! that the change committed (`txns`), and answers. The participants then hear the outcome
//! and forget their undo records; a participant that does not hear it asks
//! ([`mdt::TxnOutcome`]), and a change that is not recorded as committed by a coordinator
//! that no longer runs it aborted: a coordinator that died before its commit left only
//! prepared steps, which are undone; one that died after it left the record, from which
//! the participants are told again when it starts.
//!
//! Why two-phase commit and not an update log replayed forward (Lustre's DNE2): a step
//! can be refused by the MDT that holds it (a directory not empty, a quota, a name taken)
//! and only that MDT can tell; preparing first lets every such refusal abort the change
//! before any name moves, and undo records make the abort after a crash as whole as the
//! commit. The coordinator never waits on a participant that is down for longer than a
//! request's time: it aborts, and the client's resend starts the change again.
//!
//! What goes where: a name's entry lives with its directory (on a striped directory, with
//! the stripe its hash picks); an inode, its link count and its reverse links live on the
//! MDT whose sequence its FID is in. A plain file is made on its directory's MDT, so only
//! directories placed elsewhere, hard links and renames between MDTs, and the removal of
//! such names, are distributed. A directory moves between MDTs only by migration: a rename
//! of one across MDTs is refused with EXDEV (mv then copies).
//!
//! A migration (`weft migrate -m`, [`mdt::Migrate`]) moves one inode: its MDT exports it
//! (and holds its locks on it until the outcome, so that no change of it is made and lost
//! meanwhile), the new MDT imports it under a new FID, the MDTs of a directory's children
//! point their reverse links at the new directory, and the name here leads to the new
//! inode at the commit, when the old MDT forgets the old one (never its objects). The tool
//! walks a tree top down, one inode a request.

mod changes;
pub(crate) mod tasks;
mod txn;

use crate::ops::{self};
use crate::schema::{self};
use crate::Mds;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};
use txn::Txn;
use weft_proto::dirstripe::DirStripeSpec;
use weft_proto::msg::update::TxnId;
use weft_proto::msg::{mdt, FileType, MdtReply, MdtRequest, RequestHeader, Run, RENAME_EXCHANGE, RENAME_NOREPLACE};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// The coordinator's memory: the changes it runs now, and the MDTs of the file system.
pub struct State {
    own: u32,
    running: Mutex<HashSet<u64>>,
    next_seq: AtomicU64,
    mdts: RwLock<Vec<u32>>,
    /// Wakes the task that tells participants of commits.
    pub tell: tokio::sync::Notify,
    /// Wakes the task that asks coordinators the outcome of old prepared steps.
    pub ask: tokio::sync::Notify,
    /// The changes whose steps this MDT resolved lately (a bounded memory): a late copy of
    /// one of their prepares is refused rather than done again with nobody to resolve it.
    resolved: Recent<TxnId>,
    /// The distributed changes running for a client's reply slot: a resend of one waits
    /// for it and is answered from the reply cache rather than run again.
    inflight: Mutex<std::collections::HashMap<(u64, u32), u64>>,
    inflight_done: tokio::sync::Notify,
    /// Inodes that moved to another MDT lately (a bounded memory): a request naming one
    /// is answered "stale" rather than "not found", so that the kernel looks it up again.
    moved: Recent<Fid>,
    /// Locks of prepared steps kept until their change's outcome (`hold`, `release`).
    held: Mutex<std::collections::HashMap<TxnId, Vec<HeldLocks>>>,
}

/// Locks a prepared step keeps until its change's outcome.
struct HeldLocks {
    ns: std::sync::Arc<weft_dlm::namespace::Namespace>,
    owner: u64,
    handles: Vec<weft_proto::lock::LockHandle>,
}

/// A bounded memory of what happened lately: past its size, the oldest is forgotten.
struct Recent<T> {
    max: usize,
    seen: Mutex<(HashSet<T>, std::collections::VecDeque<T>)>,
}

impl<T: std::hash::Hash + Eq + Copy> Recent<T> {
    fn new(max: usize) -> Recent<T> {
        Recent { max, seen: Mutex::new(Default::default()) }
    }

    fn note(&self, item: T) {
        let mut m = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if m.0.insert(item) {
            m.1.push_back(item);
            if m.1.len() > self.max {
                if let Some(old) = m.1.pop_front() {
                    m.0.remove(&old);
                }
            }
        }
    }

    fn contains(&self, item: &T) -> bool {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).0.contains(item)
    }
}

/// Changes remembered as resolved by a participant.
const RESOLVED_REMEMBERED: usize = 4096;

/// Inodes remembered as moved to another MDT.
const MOVED_REMEMBERED: usize = 65_536;

impl State {
    pub fn new(own: u32) -> State {
        State {
            own,
            running: Mutex::new(HashSet::new()),
            next_seq: AtomicU64::new(1),
            mdts: RwLock::new(Vec::new()),
            tell: tokio::sync::Notify::new(),
            ask: tokio::sync::Notify::new(),
            resolved: Recent::new(RESOLVED_REMEMBERED),
            inflight: Mutex::new(Default::default()),
            inflight_done: tokio::sync::Notify::new(),
            held: Mutex::new(Default::default()),
            moved: Recent::new(MOVED_REMEMBERED),
        }
    }

    /// Keeps the locks of a step of `txn` until its outcome ([`State::release`]). (Held in
    /// memory: after a restart of this MDS, a step still waiting for its outcome holds no
    /// lock; its change's outcome comes within seconds, see tasks.rs.)
    pub fn hold(
        &self,
        txn: TxnId,
        ns: std::sync::Arc<weft_dlm::namespace::Namespace>,
        owner: u64,
        handles: Vec<weft_proto::lock::LockHandle>,
    ) {
        let held = HeldLocks { ns, owner, handles };
        self.held.lock().unwrap_or_else(|p| p.into_inner()).entry(txn).or_default().push(held);
    }

    /// After `req` was answered: the outcome of the change it resolved is known here (and
    /// published, so that a change waiting for these locks finds it): the locks its steps
    /// kept go.
    pub fn after(&self, req: &MdtRequest) {
        if let MdtRequest::UpdateResolve(mdt::UpdateResolve { txn, .. }) = req {
            self.release(txn);
        }
    }

    fn release(&self, txn: &TxnId) {
        let gone = self.held.lock().unwrap_or_else(|p| p.into_inner()).remove(txn);
        for h in gone.into_iter().flatten() {
            h.ns.cancel(h.owner, &h.handles);
        }
    }

    /// `fid` moved to another MDT (its export committed).
    pub fn note_moved(&self, fid: Fid) {
        self.moved.note(fid);
    }

    pub fn moved(&self, fid: &Fid) -> bool {
        self.moved.contains(fid)
    }

    pub fn note_resolved(&self, txn: TxnId) {
        self.resolved.note(txn);
    }

    pub fn resolved(&self, txn: &TxnId) -> bool {
        self.resolved.contains(txn)
    }

    /// Whether this coordinator runs change `seq` of its start now.
    pub fn running(&self, seq: u64) -> bool {
        self.running.lock().unwrap_or_else(|p| p.into_inner()).contains(&seq)
    }

    /// The file system's MDT indices, ascending (this one alone until the map is known).
    pub fn mdts(&self) -> Vec<u32> {
        let mdts = self.mdts.read().unwrap_or_else(|p| p.into_inner()).clone();
        if mdts.is_empty() {
            vec![self.own]
        } else {
            mdts
        }
    }

    /// Whether the file system has more than one MDT: only then does anything here run.
    pub fn several(&self) -> bool {
        self.mdts.read().unwrap_or_else(|p| p.into_inner()).len() > 1
    }

    pub fn set_mdts(&self, mut mdts: Vec<u32>) {
        mdts.sort_unstable();
        mdts.dedup();
        *self.mdts.write().unwrap_or_else(|p| p.into_inner()) = mdts;
    }
}

/// What a change needs beyond this MDT, found before its locks are taken.
enum Plan {
    Local,
    MakeDir {
        parent: Fid,
        name: Vec<u8>,
        mode: u32,
        umask: u32,
        at: Vec<u32>,
        hash: weft_proto::dirstripe::DirHash,
    },
    RemoveDir {
        parent: Fid,
        name: Vec<u8>,
        fid: Fid,
    },
    Unlink {
        parent: Fid,
        name: Vec<u8>,
        fid: Fid,
    },
    Link {
        fid: Fid,
        parent: Fid,
        name: Vec<u8>,
    },
    Rename {
        src_parent: Fid,
        src_name: Vec<u8>,
        dst_parent: Fid,
        dst_name: Vec<u8>,
        noreplace: bool,
        fid: Fid,
        kind: FileType,
    },
    /// `fid`, named `name` in `parent` (here), moves to MDT `to`.
    Migrate {
        parent: Fid,
        name: Vec<u8>,
        fid: Fid,
        kind: FileType,
        to: u32,
    },
    /// A migration of an inode that is on MDT `to` already (another than this one).
    Migrated {
        fid: Fid,
    },
}

/// The stripe of a striped directory a name belongs to, when a request names it in the
/// directory's master but the name is another stripe's (the client's copy of the stripes
/// is out of date): WrongStripe, after which the client reads them again.
pub(crate) fn check_stripe(mds: &Mds, req: &MdtRequest) -> WeftResult<()> {
    if !mds.core.dne.several() {
        return Ok(());
    }
    if let MdtRequest::Rename(mdt::Rename { src_parent, src_name, dst_parent, dst_name, .. }) = req {
        check_name(mds, *dst_parent, dst_name)?;
        return check_name(mds, *src_parent, src_name);
    }
    let Some((parent, name)) = req.one_name() else { return Ok(()) };
    check_name(mds, parent, name)
}

fn check_name(mds: &Mds, parent: Fid, name: &[u8]) -> WeftResult<()> {
    if name == b".." || name == b"." {
        return Ok(());
    }
    let Some(rec) = mds.core.read_view().inode(parent)? else { return Ok(()) };
    match rec.stripes() {
        Some(stripes) if stripes.stripe_for(name) != parent => Err(WeftError::new(
            ErrorCode::WrongStripe,
            format!("'{}' is in another stripe of striped directory {parent}", ops::show(name)),
        )),
        _ => Ok(()),
    }
}

fn plan(mds: &Mds, header: &RequestHeader, req: &MdtRequest) -> WeftResult<Plan> {
    let core = &mds.core;
    if !core.dne.several() || !req.is_mutation() || req.is_between_mdts() {
        return Ok(Plan::Local);
    }
    let me = core.mdt_index;
    let t = core.read_view();
    let plan = match req {
        MdtRequest::MkdirStriped(mdt::MkdirStriped { parent, name, mode, umask, spec }) => {
            make_dir_plan(mds, *parent, name, *mode, *umask, spec)?
        }
        MdtRequest::Mkdir(mdt::Mkdir { parent, name, mode, umask }) => {
            // A directory with a default for its subdirectories (setdirstripe -D).
            match t.inode(*parent)?.and_then(|d| d.placement.and_then(|p| p.default)) {
                Some(spec) => make_dir_plan(mds, *parent, name, *mode, *umask, &spec)?,
                None => Plan::Local,
            }
        }
        MdtRequest::Rmdir(mdt::Rmdir { parent, name }) => match t.dentry(*parent, name)? {
            Some((fid, FileType::Directory))
                if fid.mdt_index() != me || t.inode(fid)?.is_some_and(|r| r.stripes().is_some()) =>
            {
                Plan::RemoveDir { parent: *parent, name: name.clone(), fid }
            }
            _ => Plan::Local,
        },
        MdtRequest::Unlink(mdt::Unlink { parent, name }) => match t.dentry(*parent, name)? {
            Some((fid, kind)) if fid.mdt_index() != me && kind != FileType::Directory => {
                Plan::Unlink { parent: *parent, name: name.clone(), fid }
            }
            _ => Plan::Local,
        },
        MdtRequest::Link(mdt::Link { fid, parent, name }) if fid.mdt_index() != me => {
            Plan::Link { fid: *fid, parent: *parent, name: name.clone() }
        }
        MdtRequest::Rename(mdt::Rename { src_parent, src_name, dst_parent, dst_name, flags }) => {
            let Some((fid, kind)) = t.dentry(*src_parent, src_name)? else { return Ok(Plan::Local) };
            let target = t.dentry(*dst_parent, dst_name)?;
            let elsewhere = dst_parent.mdt_index() != me
                || fid.mdt_index() != me
                || target.is_some_and(|(f, _)| f.mdt_index() != me);
            if !elsewhere {
                return Ok(Plan::Local);
            }
            if kind == FileType::Directory || target.is_some_and(|(_, k)| k == FileType::Directory) {
                return Err(WeftError::new(
                    ErrorCode::CrossDevice,
                    "a directory moves between MDTs only by migration (weft migrate -m)",
                ));
            }
            if flags & RENAME_EXCHANGE != 0 {
                return Err(WeftError::new(ErrorCode::CrossDevice, "an exchange of names on two MDTs"));
            }
            if flags & !RENAME_NOREPLACE != 0 {
                return Err(WeftError::invalid(format!("rename flags {flags:#x} are invalid")));
            }
            Plan::Rename {
                src_parent: *src_parent,
                src_name: src_name.clone(),
                dst_parent: *dst_parent,
                dst_name: dst_name.clone(),
                noreplace: flags & RENAME_NOREPLACE != 0,
                fid,
                kind,
            }
        }
        MdtRequest::Migrate(m) => {
            let (fid, kind) = ops::migrate::check(core, &t, &header.identity, m)?;
            let (parent, name, to) = (m.parent, m.name.clone(), m.to);
            match fid.mdt_index() {
                there if there != to => Plan::Migrate { parent, name, fid, kind, to },
                there if there == me => Plan::Local,
                _ => Plan::Migrated { fid },
            }
        }
        _ => Plan::Local,
    };
    Ok(plan)
}

fn make_dir_plan(mds: &Mds, parent: Fid, name: &[u8], mode: u32, umask: u32, spec: &DirStripeSpec) -> WeftResult<Plan> {
    let core = &mds.core;
    let mdts = core.dne.mdts();
    let at = spec.place(&mdts, core.mdt_index, least_used(mds, &mdts)).map_err(WeftError::invalid)?;
    if at == [core.mdt_index] {
        return Ok(Plan::Local);
    }
    Ok(Plan::MakeDir { parent, name: name.to_vec(), mode, umask, at, hash: spec.hash })
}

/// The MDT a striped directory with no index given starts on: the next after the last
/// one this MDT placed a directory on, so that directories spread (Lustre's round robin,
/// `-i -1`).
fn least_used(mds: &Mds, mdts: &[u32]) -> u32 {
    let turn = mds.core.dne.next_seq.load(Ordering::Relaxed) as usize;
    mdts[turn % mdts.len()]
}

/// Runs a change: distributed when it needs other MDTs, else as every change runs.
pub(crate) async fn change(mds: &Mds, header: &RequestHeader, req: MdtRequest, run: Run) -> WeftResult<MdtReply> {
    let plan = plan(mds, header, &req)?;
    if matches!(plan, Plan::Local) {
        let synced = stripes_copy(&req).filter(|_| mds.core.dne.several());
        let reply = mds.execute(header, req, run).await?;
        if let Some(fid) = synced {
            sync_stripes(mds, header, fid).await;
        }
        return Ok(reply);
    }
    let _one = Inflight::enter(&mds.core.dne, header).await;
    // A resend of a change that committed: answered as it was.
    if header.request_id != 0 {
        if let Some(reply) = mds.core.read_view().cached_reply(header)? {
            return reply;
        }
    }
    let mut txn = Txn::begin(mds, header);
    let result = txn.run(plan, req, run).await;
    txn.end(result.is_ok()).await;
    result
}

/// Whether `req` is a change over several MDTs: it takes no lock here while its steps are
/// prepared elsewhere (each MDT locks what it changes, for as long as it changes it, so two
/// changes coordinated by two MDTs never wait on each other's locks), only around its commit.
pub(crate) fn distributed(mds: &Mds, header: &RequestHeader, req: &MdtRequest) -> WeftResult<bool> {
    Ok(!matches!(plan(mds, header, req)?, Plan::Local))
}

/// A distributed change running for a client's reply slot (see `State::inflight`).
struct Inflight<'a> {
    state: &'a State,
    key: Option<(u64, u32)>,
}

impl<'a> Inflight<'a> {
    async fn enter(state: &'a State, header: &RequestHeader) -> Inflight<'a> {
        if header.request_id == 0 {
            return Inflight { state, key: None };
        }
        let key = (header.client_id, header.reply_slot);
        loop {
            let done = state.inflight_done.notified();
            {
                let mut m = state.inflight.lock().unwrap_or_else(|p| p.into_inner());
                match m.get(&key) {
                    Some(id) if *id == header.request_id => {}
                    _ => {
                        m.insert(key, header.request_id);
                        return Inflight { state, key: Some(key) };
                    }
                }
            }
            // The same request, resent while the first runs: wait for the first.
            let _ = tokio::time::timeout(std::time::Duration::from_millis(500), done).await;
        }
    }
}

impl Drop for Inflight<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.state.inflight.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
            self.state.inflight_done.notify_waiters();
        }
    }
}

/// The path of `fid` over several MDTs: this MDT's part, and the rest from the MDT of the
/// directory where it stops (which does the same), joined.
pub(crate) async fn fid2path(mds: &Mds, header: &RequestHeader, fid: Fid) -> WeftResult<MdtReply> {
    let (path, rest) = ops::fid2path::path_part(&mds.core.read_view(), fid, Some(mds.core.mdt_index))?;
    let Some(rest) = rest else { return Ok(MdtReply::Data(path)) };
    let header = RequestHeader { request_id: 0, reply_slot: 0, ..header.clone() };
    let above = match mds.core.targets.mdt(rest.mdt_index(), header, mdt::Fid2Path { fid: rest }.into()).await? {
        MdtReply::Data(above) => above,
        other => return Err(WeftError::protocol(format!("a fid2path answered {other:?}"))),
    };
    Ok(MdtReply::Data(match (above.is_empty(), path.is_empty()) {
        (true, _) => path,
        (false, true) => above,
        (false, false) => [above, path].join(&b'/'),
    }))
}

/// The directory whose stripes copy what `req` changes (mode, owner, ACLs, default
/// layouts), if it changes any of it.
fn stripes_copy(req: &MdtRequest) -> Option<Fid> {
    match req {
        MdtRequest::Setattr(mdt::Setattr { fid, .. })
        | MdtRequest::SetXattr(mdt::SetXattr { fid, .. })
        | MdtRequest::RemoveXattr(mdt::RemoveXattr { fid, .. })
        | MdtRequest::SetStripe(mdt::SetStripe { fid, .. })
        | MdtRequest::DeleteStripe(mdt::DeleteStripe { fid })
        | MdtRequest::SetDirStripe(mdt::SetDirStripe { fid, .. }) => Some(*fid),
        _ => None,
    }
}

/// A striped directory's master changed: its stripes take the master's mode, owner, ACLs
/// and defaults (names in a stripe are checked against, and new entries take, the
/// stripe's). Not atomic with the change: a stripe whose MDT does not answer keeps the
/// old until the master changes again (said in the log).
async fn sync_stripes(mds: &Mds, header: &RequestHeader, fid: Fid) {
    let Ok(Some(rec)) = mds.core.read_view().inode(fid) else { return };
    let Some(stripes) = rec.stripes().cloned() else { return };
    let record = schema::encode_inode(&rec);
    // The MDTs' own request (refused to others): as this server, for the client's locks.
    let header =
        RequestHeader { request_id: 0, reply_slot: 0, identity: weft_proto::msg::Identity::root(), ..header.clone() };
    for stripe in stripes.fids.iter().skip(1) {
        let req: MdtRequest = mdt::SyncStripe { fid: *stripe, record: record.clone() }.into();
        let sent = match stripe.mdt_index() == mds.core.mdt_index {
            true => Box::pin(mds.handle(&header, req, Run::Offload)).await,
            false => mds.core.targets.mdt(stripe.mdt_index(), header.clone(), req).await,
        };
        if let Err(e) = sent {
            tracing::warn!(master = %fid, %stripe, error = %e, "a stripe did not take its master's new attributes");
        }
    }
}
