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

use crate::ops::{self, OpCtx};
use crate::schema::{self, InodeRecord};
use crate::writer::{Apply, Job};
use crate::Mds;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use weft_proto::dirstripe::{DirStripeSpec, DirStripes};
use weft_proto::msg::changelog::ChangelogType;
use weft_proto::msg::update::{TxnId, TxnState, Update, UpdateAnswer};
use weft_proto::msg::{
    mdt, FileType, InodeInfo, MdtReply, MdtRequest, RequestHeader, Run, RENAME_EXCHANGE, RENAME_NOREPLACE,
};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// The coordinator's memory: the changes it runs now, and the MDTs of the file system.
pub struct State {
    own: u32,
    running: Mutex<HashSet<u64>>,
    next_seq: AtomicU64,
    mdts: RwLock<Vec<u32>>,
    /// Wakes the task that tells participants of commits.
    pub tell: tokio::sync::Notify,
    /// The changes whose steps this MDT resolved lately (a bounded memory): a late copy of
    /// one of their prepares is refused rather than done again with nobody to resolve it.
    resolved: Mutex<(HashSet<TxnId>, std::collections::VecDeque<TxnId>)>,
    /// The distributed changes running for a client's reply slot: a resend of one waits
    /// for it and is answered from the reply cache rather than run again.
    inflight: Mutex<std::collections::HashMap<(u64, u32), u64>>,
    inflight_done: tokio::sync::Notify,
}

/// Changes remembered as resolved by a participant.
const RESOLVED_REMEMBERED: usize = 4096;

impl State {
    pub fn new(own: u32) -> State {
        State {
            own,
            running: Mutex::new(HashSet::new()),
            next_seq: AtomicU64::new(1),
            mdts: RwLock::new(Vec::new()),
            tell: tokio::sync::Notify::new(),
            resolved: Mutex::new(Default::default()),
            inflight: Mutex::new(Default::default()),
            inflight_done: tokio::sync::Notify::new(),
        }
    }

    pub fn note_resolved(&self, txn: TxnId) {
        let mut r = self.resolved.lock().unwrap_or_else(|p| p.into_inner());
        if r.0.insert(txn) {
            r.1.push_back(txn);
            if r.1.len() > RESOLVED_REMEMBERED {
                if let Some(old) = r.1.pop_front() {
                    r.0.remove(&old);
                }
            }
        }
    }

    pub fn resolved(&self, txn: &TxnId) -> bool {
        self.resolved.lock().unwrap_or_else(|p| p.into_inner()).0.contains(txn)
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
}

/// The stripe of a striped directory a name belongs to, when a request names it in the
/// directory's master but the name is another stripe's (the client's copy of the stripes
/// is out of date): WrongStripe, after which the client reads them again.
pub(crate) fn check_stripe(mds: &Mds, req: &MdtRequest) -> WeftResult<()> {
    if !mds.core.dne.several() {
        return Ok(());
    }
    let (parent, name) = match req {
        MdtRequest::Lookup(mdt::Lookup { parent, name })
        | MdtRequest::Create(mdt::Create { parent, name, .. })
        | MdtRequest::Mkdir(mdt::Mkdir { parent, name, .. })
        | MdtRequest::MkdirStriped(mdt::MkdirStriped { parent, name, .. })
        | MdtRequest::Mknod(mdt::Mknod { parent, name, .. })
        | MdtRequest::Symlink(mdt::Symlink { parent, name, .. })
        | MdtRequest::Link(mdt::Link { parent, name, .. })
        | MdtRequest::Unlink(mdt::Unlink { parent, name })
        | MdtRequest::Rmdir(mdt::Rmdir { parent, name }) => (*parent, name),
        MdtRequest::Rename(mdt::Rename { src_parent, src_name, dst_parent, dst_name, .. }) => {
            check_name(mds, *dst_parent, dst_name)?;
            (*src_parent, src_name)
        }
        _ => return Ok(()),
    };
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
        _ => Plan::Local,
    };
    let _ = header;
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

/// One distributed change as its coordinator runs it.
struct Txn<'a> {
    mds: &'a Mds,
    id: TxnId,
    /// The client's request header: the commit's reply is cached under it.
    original: RequestHeader,
    /// What the participants are sent: the client's identity and id, no reply slot.
    header: RequestHeader,
    /// The MDTs asked to prepare a step, in order (each once).
    asked: Vec<u32>,
    steps: u32,
    /// Whether the outcome is known: false while the commit's batch may have committed
    /// without our hearing (the writer stopped), when the participants must ask.
    known: bool,
    committed: bool,
}

impl<'a> Txn<'a> {
    fn begin(mds: &'a Mds, header: &RequestHeader) -> Txn<'a> {
        let seq = mds.core.dne.next_seq.fetch_add(1, Ordering::Relaxed);
        mds.core.dne.running.lock().unwrap_or_else(|p| p.into_inner()).insert(seq);
        let id = TxnId { coordinator: mds.core.mdt_index, start: mds.core.mds_start, seq };
        // The participants act for the client (its identity, its locks) but keep no reply
        // of it: a step's own record makes its resend harmless.
        let original = header.clone();
        // Sent as this server (root; the MDTs' own requests are refused to others), for the
        // client: its lock owner id, its identity in each step.
        let header = RequestHeader {
            request_id: 0,
            reply_slot: 0,
            identity: weft_proto::msg::Identity::root(),
            ..header.clone()
        };
        Txn { mds, id, original, header, asked: Vec::new(), steps: 0, known: true, committed: false }
    }

    /// One request to MDT `mdt` (this one included) on behalf of the change.
    async fn call(&self, mdt: u32, req: MdtRequest) -> WeftResult<MdtReply> {
        if mdt == self.mds.core.mdt_index {
            return Box::pin(self.mds.handle(&self.header, req, Run::Offload)).await;
        }
        self.mds.core.targets.mdt(mdt, self.header.clone(), req).await
    }

    /// Has `mdt` prepare `update` as the change's next step.
    async fn prepare(&mut self, mdt: u32, update: Update) -> WeftResult<UpdateAnswer> {
        if !self.asked.contains(&mdt) {
            // Before the request: an answer lost on the way still gets the outcome.
            self.asked.push(mdt);
        }
        let step = self.steps;
        self.steps += 1;
        let who = self.original.identity.clone();
        match self.call(mdt, mdt::UpdatePrepare { txn: self.id, step, update, who }.into()).await? {
            MdtReply::Update(answer) => Ok(answer),
            other => Err(WeftError::protocol(format!("a prepared step answered {other:?}"))),
        }
    }

    /// The inode of `fid` from its MDT.
    async fn getattr(&self, fid: Fid) -> WeftResult<InodeInfo> {
        match self.call(fid.mdt_index(), mdt::Getattr { fid }.into()).await? {
            MdtReply::Inode(info) => Ok(info),
            other => Err(WeftError::protocol(format!("a getattr answered {other:?}"))),
        }
    }

    /// Makes this MDT's part in one batch with the request's reply and the record of the
    /// commit, which the participants are then told of.
    async fn commit(&mut self, req: MdtRequest, run: Run, part: Apply) -> WeftResult<MdtReply> {
        let (id, others) = (self.id, self.asked.clone());
        let apply: Apply = Arc::new(move |ctx: &mut OpCtx<'_>| {
            let reply = part(ctx)?;
            ctx.t.put_committed_txn(&id, &others)?;
            Ok(reply)
        });
        // The clients that cached what this MDT changes are called back first.
        let owner = self.original.client_id;
        let held = match self.mds.locks.get() {
            Some(ns) => Some((ns.clone(), crate::locking::lock_change(self.mds, ns, owner, &req).await?)),
            None => None,
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job = Job::Request { header: self.original.clone(), req, reservation: None, apply: Some(apply), reply: tx };
        let submitted = self.mds.queue.submit(job, run);
        let answer = match submitted {
            Ok(()) => rx.await,
            Err(e) => Ok(Err(e)),
        };
        if let Some((ns, held)) = held {
            ns.cancel(owner, &held);
        }
        let Ok(reply) = answer else {
            self.known = false;
            return Err(WeftError::io("the MDT writer stopped before answering"));
        };
        self.committed = reply.is_ok();
        reply
    }

    /// After the outcome: the participants hear it now (a commit's are told by the task
    /// that reads the record, woken here; an abort's are told once, and ask if they miss it).
    async fn end(mut self, ok: bool) {
        self.mds.core.dne.running.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.id.seq);
        if self.committed && ok {
            self.mds.core.dne.tell.notify_one();
            return;
        }
        if !self.known {
            return;
        }
        for mdt in std::mem::take(&mut self.asked) {
            if let Err(e) = self.call(mdt, mdt::UpdateResolve { txn: self.id, commit: false }.into()).await {
                tracing::info!(txn = %self.id, mdt, error = %e, "an aborted change's participant will ask for its outcome");
            }
        }
    }
}

impl Txn<'_> {
    async fn run(&mut self, plan: Plan, req: MdtRequest, run: Run) -> WeftResult<MdtReply> {
        match plan {
            Plan::Local => unreachable!("a local change is not distributed"),
            Plan::MakeDir { parent, name, mode, umask, at, hash } => {
                self.make_dir(req, run, parent, name, mode, umask, at, hash).await
            }
            Plan::RemoveDir { parent, name, fid } => self.remove_dir(req, run, parent, name, fid).await,
            Plan::Unlink { parent, name, fid } => self.unlink(req, run, parent, name, fid).await,
            Plan::Link { fid, parent, name } => self.link(req, run, fid, parent, name).await,
            Plan::Rename { src_parent, src_name, dst_parent, dst_name, noreplace, fid, kind } => {
                self.rename(req, run, (src_parent, src_name), (dst_parent, dst_name), noreplace, fid, kind).await
            }
        }
    }

    /// A directory on another MDT, or striped over several: the master made where its
    /// stripe 0 goes (named, its reverse link there), each further stripe on its MDT
    /// (unnamed), then the master told its stripes; the name here.
    #[allow(clippy::too_many_arguments)]
    async fn make_dir(
        &mut self,
        req: MdtRequest,
        run: Run,
        parent: Fid,
        name: Vec<u8>,
        mode: u32,
        umask: u32,
        at: Vec<u32>,
        hash: weft_proto::dirstripe::DirHash,
    ) -> WeftResult<MdtReply> {
        let record = {
            let t = self.mds.core.read_view();
            let dir = ops::check_new_name(&t, &self.header.identity, parent, &name)?;
            if dir.nlink >= crate::limits::LINKS_PER_INODE_MAX {
                return Err(WeftError::new(
                    ErrorCode::TooManyLinks,
                    format!("directory {parent} has too many subdirectories"),
                ));
            }
            let mut rec = ops::new_record(FileType::Directory, mode, umask, &self.header.identity, &dir, crate::now());
            rec.dir_default = dir.dir_default.clone();
            // New subdirectories keep the parent's default placement, as Lustre's do.
            if let Some(default) = dir.placement.as_ref().and_then(|p| p.default) {
                rec.placement = Some(Box::new(schema::DirPlacement { default: Some(default), ..Default::default() }));
            }
            rec
        };
        let encoded = schema::encode_inode(&record);
        let made = self
            .prepare(
                at[0],
                Update::MakeDir { record: encoded.clone(), parent, name: Some(name.clone()), master: None, stripe: 0 },
            )
            .await?;
        let master = ops::update::made_fid(&made)?;
        let mut info = match made {
            UpdateAnswer::Made(info) => *info,
            _ => unreachable!("made_fid checked"),
        };
        if at.len() > 1 {
            let mut fids = vec![master];
            for (i, mdt) in at.iter().enumerate().skip(1) {
                let stripe = Update::MakeDir {
                    record: encoded.clone(),
                    parent,
                    name: None,
                    master: Some(master),
                    stripe: i as u32,
                };
                fids.push(ops::update::made_fid(&self.prepare(*mdt, stripe).await?)?);
            }
            let stripes = DirStripes { hash, fids };
            self.prepare(at[0], Update::SetStripes { fid: master, stripes: stripes.clone() }).await?;
            info.stripes = Some(Box::new(stripes));
        }
        let part: Apply = Arc::new(move |ctx: &mut OpCtx<'_>| {
            let mut dir = ops::check_new_entry(ctx, parent, &name)?;
            if dir.nlink >= crate::limits::LINKS_PER_INODE_MAX {
                return Err(WeftError::new(
                    ErrorCode::TooManyLinks,
                    format!("directory {parent} has too many subdirectories"),
                ));
            }
            // Checks done: writes follow.
            ctx.t.add_entry(parent, &name, master, FileType::Directory)?;
            dir.nlink += 1;
            ops::touch_dir(&mut dir, ctx.now);
            ctx.t.put_inode(parent, &dir)?;
            ctx.record(ChangelogType::Mkdir, 0, master, Some((parent, &name)))?;
            Ok(MdtReply::Inode(info.clone()))
        });
        self.commit(req, run, part).await
    }

    /// A directory on another MDT or striped: every stripe must be empty; each refuses new
    /// entries from its prepare on, and goes at the commit; the name goes here.
    async fn remove_dir(
        &mut self,
        req: MdtRequest,
        run: Run,
        parent: Fid,
        name: Vec<u8>,
        fid: Fid,
    ) -> WeftResult<MdtReply> {
        let sticky = self.removal_checks(parent, &name)?;
        let stripes = match fid.mdt_index() == self.mds.core.mdt_index {
            true => self.mds.core.read_view().inode(fid)?.and_then(|r| r.stripes().cloned()),
            false => self.getattr(fid).await?.stripes.map(|s| *s),
        };
        for stripe in stripes.iter().flat_map(|s| s.fids.iter().skip(1)) {
            self.prepare(stripe.mdt_index(), Update::RemoveDir { fid: *stripe, parent: None, sticky_dir_uid: sticky })
                .await?;
        }
        let master = Update::RemoveDir { fid, parent: Some((parent, name.clone())), sticky_dir_uid: sticky };
        self.prepare(fid.mdt_index(), master).await?;
        let part: Apply = Arc::new(move |ctx: &mut OpCtx<'_>| {
            let mut dir = ctx.t.must_dir(parent)?;
            expect_entry(ctx, parent, &name, fid)?;
            // Checks done: writes follow.
            ctx.t.remove_entry(parent, &name, fid)?;
            dir.nlink = dir.nlink.saturating_sub(1).max(2);
            ops::touch_dir(&mut dir, ctx.now);
            ctx.t.put_inode(parent, &dir)?;
            ctx.record(ChangelogType::Rmdir, 0, fid, Some((parent, &name)))?;
            Ok(MdtReply::Empty)
        });
        self.commit(req, run, part).await
    }

    /// The checks of a name's removal this MDT can make (its directory); answers the
    /// directory's owner when it is sticky, for the MDT of the inode to check.
    fn removal_checks(&self, parent: Fid, name: &[u8]) -> WeftResult<Option<u32>> {
        let t = self.mds.core.read_view();
        let dir = t.must_dir(parent)?;
        ops::validate_name(name)?;
        crate::perm::check_dir_write(&self.header.identity, ops::owner(&dir))?;
        Ok((dir.mode & crate::perm::S_ISVTX != 0).then_some(dir.uid))
    }

    /// A name of a file on another MDT: the file drops a link there (and goes at the
    /// commit if it was its last), the name goes here.
    async fn unlink(
        &mut self,
        req: MdtRequest,
        run: Run,
        parent: Fid,
        name: Vec<u8>,
        fid: Fid,
    ) -> WeftResult<MdtReply> {
        let sticky = self.removal_checks(parent, &name)?;
        self.prepare(fid.mdt_index(), Update::DropLink { fid, parent, name: name.clone(), sticky_dir_uid: sticky })
            .await?;
        let part: Apply = Arc::new(move |ctx: &mut OpCtx<'_>| {
            let mut dir = ctx.t.must_dir(parent)?;
            expect_entry(ctx, parent, &name, fid)?;
            ctx.t.remove_entry(parent, &name, fid)?;
            ops::touch_dir(&mut dir, ctx.now);
            ctx.t.put_inode(parent, &dir)?;
            ctx.record(ChangelogType::Unlink, 0, fid, Some((parent, &name)))?;
            Ok(MdtReply::Empty)
        });
        self.commit(req, run, part).await
    }

    /// A hard link here to a file on another MDT.
    async fn link(&mut self, req: MdtRequest, run: Run, fid: Fid, parent: Fid, name: Vec<u8>) -> WeftResult<MdtReply> {
        {
            let t = self.mds.core.read_view();
            ops::check_new_name(&t, &self.header.identity, parent, &name)?;
        }
        let file = self.getattr(fid).await?;
        let kind = file.attr.kind;
        self.check_project(parent, &file)?;
        self.prepare(fid.mdt_index(), Update::AddLink { fid, parent, name: name.clone() }).await?;
        let mut linked = file;
        linked.attr.nlink += 1;
        linked.lock = None;
        let part: Apply = Arc::new(move |ctx: &mut OpCtx<'_>| {
            let mut dir = ops::check_new_entry(ctx, parent, &name)?;
            ctx.t.add_entry(parent, &name, fid, kind)?;
            ops::touch_dir(&mut dir, ctx.now);
            ctx.t.put_inode(parent, &dir)?;
            ctx.record(ChangelogType::Hardlink, 0, fid, Some((parent, &name)))?;
            Ok(MdtReply::Inode(linked.clone()))
        });
        self.commit(req, run, part).await
    }

    /// A file may gain a name in a directory that passes its project on only if it is of
    /// that project (ops::check_project, for a file on another MDT).
    fn check_project(&self, parent: Fid, file: &InodeInfo) -> WeftResult<()> {
        let Some(dir) = self.mds.core.read_view().inode(parent)? else { return Ok(()) };
        let mut rec = InodeRecord::new(file.attr.kind, file.attr.mode, file.attr.uid, file.attr.gid, file.attr.ctime);
        rec.projid = file.attr.projid;
        ops::check_project(&dir, &rec)
    }

    /// A file's name moves from a directory here to one anywhere (the file anywhere too):
    /// the file's reverse links move on its MDT (the new one first: its link count never
    /// reaches 0), the new name is made on its directory's MDT (replacing a file there,
    /// which drops that link on its own MDT), the old name goes here.
    #[allow(clippy::too_many_arguments)]
    async fn rename(
        &mut self,
        req: MdtRequest,
        run: Run,
        (src_parent, src_name): (Fid, Vec<u8>),
        (dst_parent, dst_name): (Fid, Vec<u8>),
        noreplace: bool,
        fid: Fid,
        kind: FileType,
    ) -> WeftResult<MdtReply> {
        let me = self.mds.core.mdt_index;
        let local_file = fid.mdt_index() == me;
        let local_dst = dst_parent.mdt_index() == me;
        ops::validate_name(&dst_name)?;
        let sticky = self.removal_checks(src_parent, &src_name)?;
        let who = self.original.identity.clone();
        // The source's sticky rule and the destination's project need the file (checked in
        // the commit for a file here).
        let file = match local_file {
            true => None,
            false => Some(self.getattr(fid).await?),
        };
        if let (Some(dir_uid), Some(f)) = (sticky, &file) {
            let dir = crate::perm::Owner { uid: dir_uid, gid: 0, mode: crate::perm::S_ISVTX, acl: None };
            crate::perm::check_sticky(&who, dir, f.attr.uid)?;
        }
        if let (true, Some(f)) = (local_dst, &file) {
            self.check_project(dst_parent, f)?;
        }
        // The name's file now, if any, and the directory's sticky owner: checked again in
        // the commit (a directory here), or found by the AddEntry step (there), which goes
        // first so that a name already the file's changes nothing anywhere.
        let (replaced, dst_sticky) = if local_dst {
            let t = self.mds.core.read_view();
            let dp = t.must_dir(dst_parent)?;
            crate::perm::check_dir_write(&who, ops::owner(&dp))?;
            if dp.nlink == 0 {
                return Err(WeftError::new(ErrorCode::NotFound, format!("directory {dst_parent} was removed")));
            }
            let target = t.dentry(dst_parent, &dst_name)?;
            if noreplace && target.is_some() {
                return Err(WeftError::new(ErrorCode::Exists, format!("'{}' exists already", ops::show(&dst_name))));
            }
            if target.is_some_and(|(t, _)| t == fid) {
                return Ok(MdtReply::Empty); // Two names of one file: POSIX says do nothing.
            }
            (target, (dp.mode & crate::perm::S_ISVTX != 0).then_some(dp.uid))
        } else {
            let add = Update::AddEntry { parent: dst_parent, name: dst_name.clone(), fid, kind, noreplace };
            match self.prepare(dst_parent.mdt_index(), add).await? {
                UpdateAnswer::Replaced { entry, sticky_dir_uid } => (entry, sticky_dir_uid),
                UpdateAnswer::Same => return Ok(MdtReply::Empty),
                other => return Err(WeftError::protocol(format!("a new entry answered {other:?}"))),
            }
        };
        if !local_file {
            self.prepare(fid.mdt_index(), Update::AddLink { fid, parent: dst_parent, name: dst_name.clone() }).await?;
            let drop = Update::DropLink { fid, parent: src_parent, name: src_name.clone(), sticky_dir_uid: None };
            self.prepare(fid.mdt_index(), drop).await?;
        }
        // The replaced file drops its link where it is, unless the commit does it here.
        let replaced_here = replaced.filter(|(t, _)| local_dst && t.mdt_index() == me);
        if let Some((target, _)) = replaced.filter(|_| replaced_here.is_none()) {
            let drop = Update::DropLink {
                fid: target,
                parent: dst_parent,
                name: dst_name.clone(),
                sticky_dir_uid: dst_sticky,
            };
            self.prepare(target.mdt_index(), drop).await?;
        }
        let part: Apply = Arc::new(move |ctx: &mut OpCtx<'_>| {
            let mut sp = ctx.t.must_dir(src_parent)?;
            expect_entry(ctx, src_parent, &src_name, fid)?;
            if local_file {
                let rec = ctx.t.must_inode(fid)?;
                crate::perm::check_sticky(ctx.who, ops::owner(&sp), rec.uid)?;
            }
            let mut dp = None;
            if local_dst {
                let d = ctx.t.must_dir(dst_parent)?;
                if ctx.t.dentry(dst_parent, &dst_name)? != replaced {
                    return Err(WeftError::new(
                        ErrorCode::Busy,
                        format!("'{}' changed meanwhile", ops::show(&dst_name)),
                    ));
                }
                if let Some((t, _)) = replaced_here {
                    let rec = ctx.t.must_inode(t)?;
                    crate::perm::check_sticky(ctx.who, ops::owner(&d), rec.uid)?;
                }
                dp = Some(d);
            }
            // Checks done: writes follow.
            ctx.t.remove_entry(src_parent, &src_name, fid)?;
            if let Some(mut d) = dp {
                match replaced {
                    Some((t, _)) if replaced_here.is_some() => {
                        let rec = ctx.t.must_inode(t)?;
                        ctx.t.remove_entry(dst_parent, &dst_name, t)?;
                        ops::drop_link(ctx, t, rec)?;
                    }
                    Some(_) => ctx.t.remove_dentry(dst_parent, &dst_name)?,
                    None => {}
                }
                ctx.t.add_entry(dst_parent, &dst_name, fid, kind)?;
                ops::touch_dir(&mut d, ctx.now);
                if dst_parent != src_parent {
                    ctx.t.put_inode(dst_parent, &d)?;
                } else {
                    sp = d;
                }
            } else if local_file {
                ctx.t.add_link_row(fid, dst_parent, &dst_name)?;
            }
            if local_file {
                let mut rec = ctx.t.must_inode(fid)?;
                rec.ctime = ctx.now;
                ctx.t.put_inode(fid, &rec)?;
            }
            ops::touch_dir(&mut sp, ctx.now);
            ctx.t.put_inode(src_parent, &sp)?;
            let target = replaced.map_or(Fid::new(0, 0, 0), |(f, _)| f);
            ctx.record_rename(
                ChangelogType::Rename,
                0,
                target,
                Some((dst_parent, &dst_name)),
                Some((fid, src_parent, &src_name)),
            )?;
            Ok(MdtReply::Empty)
        });
        self.commit(req, run, part).await
    }
}

/// The commit's check that a name still leads where the change found it.
fn expect_entry(ctx: &OpCtx<'_>, parent: Fid, name: &[u8], fid: Fid) -> WeftResult<()> {
    match ctx.t.dentry(parent, name)? {
        Some((f, _)) if f == fid => Ok(()),
        Some(_) => Err(WeftError::new(ErrorCode::Busy, format!("'{}' changed meanwhile", ops::show(name)))),
        None => Err(WeftError::new(ErrorCode::NotFound, format!("no entry '{}'", ops::show(name)))),
    }
}

/// A request of this MDS's own (a background task's) to MDT `mdt`, this one included.
async fn own_call(core: &crate::Core, queue: &crate::writer::Queue, mdt: u32, req: MdtRequest) -> WeftResult<MdtReply> {
    let header = RequestHeader {
        client_id: 0,
        request_id: 0,
        reply_slot: 0,
        identity: weft_proto::msg::Identity::root(),
        jobid: String::new(),
    };
    if mdt != core.mdt_index {
        return core.targets.mdt(mdt, header, req).await;
    }
    if !req.is_mutation() {
        let t = core.read_view();
        return ops::read(&ops::QueryCtx { core, t: &t, who: &header.identity }, &req);
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    queue.submit(Job::Request { header, req, reservation: None, apply: None, reply: tx }, Run::Offload)?;
    rx.await.map_err(|_| WeftError::io("the MDT writer stopped before answering"))?
}

/// The coordinator's side after its commits, and after a start: the participants of each
/// committed change are told until they have all answered, and then its record goes.
pub(crate) async fn tell_task(core: Arc<crate::Core>, queue: crate::writer::Queue) {
    let every = std::time::Duration::from_millis(crate::limits::DNE_RETRY_MS);
    loop {
        let _ = tokio::time::timeout(every, core.dne.tell.notified()).await;
        let rows = match core.read_view().committed_txns(crate::limits::DNE_BATCH_MAX) {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "the committed changes could not be read");
                continue;
            }
        };
        for (txn, mdts) in rows {
            let mut left = Vec::new();
            for mdt in mdts {
                let req = mdt::UpdateResolve { txn, commit: true }.into();
                if let Err(e) = own_call(&core, &queue, mdt, req).await {
                    tracing::debug!(%txn, mdt, error = %e, "a participant of a committed change did not answer; told later");
                    left.push(mdt);
                }
            }
            let apply: Apply = Arc::new(move |ctx: &mut OpCtx<'_>| {
                ctx.t.put_committed_txn(&txn, &left)?;
                Ok(MdtReply::Empty)
            });
            let (tx, rx) = tokio::sync::oneshot::channel();
            let header = RequestHeader {
                client_id: 0,
                request_id: 0,
                reply_slot: 0,
                identity: weft_proto::msg::Identity::root(),
                jobid: String::new(),
            };
            let req = mdt::UpdateResolve { txn, commit: true }.into();
            if queue
                .submit(Job::Request { header, req, reservation: None, apply: Some(apply), reply: tx }, Run::Offload)
                .is_err()
            {
                return;
            }
            let _ = rx.await;
        }
    }
}

/// A participant's side: the changes with steps prepared here a while ago whose outcome
/// never came are asked for, and kept or undone as their coordinator says.
pub(crate) async fn ask_task(core: Arc<crate::Core>, queue: crate::writer::Queue) {
    let every = std::time::Duration::from_millis(crate::limits::DNE_RETRY_MS);
    loop {
        tokio::time::sleep(every).await;
        let now = core.clock.now().sec.max(0) as u64;
        let before = now.saturating_sub(crate::limits::DNE_ASK_AFTER_S);
        let waiting = match core.read_view().prepared_txns(before, crate::limits::DNE_BATCH_MAX) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "the prepared steps could not be read");
                continue;
            }
        };
        for txn in waiting {
            let state = match own_call(&core, &queue, txn.coordinator, mdt::TxnOutcome { txn }.into()).await {
                Ok(MdtReply::Txn(state)) => state,
                Ok(other) => {
                    tracing::warn!(%txn, "a change's outcome answered {other:?}");
                    continue;
                }
                Err(e) => {
                    tracing::debug!(%txn, error = %e, "a change's coordinator did not say its outcome; asked again later");
                    continue;
                }
            };
            let Some(commit) = outcome_of(state) else { continue };
            tracing::info!(%txn, commit, "a change's outcome, asked of its coordinator");
            if let Err(e) = own_call(&core, &queue, core.mdt_index, mdt::UpdateResolve { txn, commit }.into()).await {
                tracing::warn!(%txn, error = %e, "a change's prepared steps could not be resolved");
            }
        }
    }
}

/// A participant's side: a step prepared a while ago whose outcome never came is asked for.
fn outcome_of(state: TxnState) -> Option<bool> {
    match state {
        TxnState::Committed => Some(true),
        TxnState::Aborted => Some(false),
        TxnState::Running => None,
    }
}
