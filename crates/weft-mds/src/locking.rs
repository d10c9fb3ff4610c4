//! The MDT side of the lock protocol: inode-bit locks around every request.
//!
//! * **A change** first takes exclusive (EX) locks, owned by the asking client, on what it
//!   changes: the UPDATE bit of each directory whose entries change, LOOKUP|UPDATE of each
//!   inode that loses a name, UPDATE of an inode whose attributes change, LAYOUT of one
//!   whose layout changes. Other clients that cached any of it are called back (and drop
//!   it from their kernel's caches) before the change is made; the EX locks are let go once
//!   it is answered. Locks of the asking client never conflict with its own, so a single
//!   client never waits on itself.
//! * **An answer that names an inode** (lookup, getattr, create, open, mkdir, ...) carries a
//!   protected-read (PR) lock on LOOKUP|UPDATE|LAYOUT of that inode, granted before the
//!   inode was read (Lustre's intent locks): while the client holds it, the name, the
//!   attributes and the layout it was given stay true, so its kernel may cache them.
//!
//! Children are looked up before their locks are taken, all locks of one change are taken
//! in one ordered `enqueue_many` (no deadlock between two changes), and the lookups are
//! checked again under the locks: a name that moved meanwhile makes the change start over.

use crate::limits::RELOOKUP_ROUNDS_MAX;
use crate::Mds;
use std::sync::Arc;
use weft_dlm::namespace::Namespace;
use weft_dlm::state::EnqueueOptions;
use weft_proto::lock::{bits, LockGrant, LockMode, LockScope};
use weft_proto::msg::update::Update;
use weft_proto::msg::{
    mdt, MdtReply, MdtRequest, RequestHeader, Run, OPEN_ATIME_RELATIME, OPEN_ATIME_STRICT, OPEN_HSM_RESTORE,
    OPEN_TRUNC, OPEN_WRITE, XATTR_LAYOUT,
};
use weft_proto::{Fid, WeftResult};

/// What a client may cache about an inode it was told about.
pub const INTENT_BITS: u8 = bits::LOOKUP | bits::UPDATE | bits::LAYOUT;

pub async fn handle(
    mds: &Mds,
    ns: &Arc<Namespace>,
    header: &RequestHeader,
    req: MdtRequest,
    run: Run,
) -> WeftResult<MdtReply> {
    let owner = header.client_id;
    match &req {
        MdtRequest::Getattr(mdt::Getattr { fid }) => {
            let grant = intent(ns, owner, *fid).await?;
            with_lock(mds.execute(header, req, run).await, grant)
        }
        MdtRequest::Lookup(..) => {
            // The child is known only after the lookup: look up, lock, look up again.
            let first = mds.execute(header, req.clone(), run).await?;
            let Some(fid) = answered_fid(&first).filter(|f| f.mdt_index() == mds.core.mdt_index) else {
                return Ok(first);
            };
            let grant = intent(ns, owner, fid).await?;
            let second = mds.execute(header, req, run).await?;
            if answered_fid(&second) == Some(fid) {
                with_lock(Ok(second), grant)
            } else {
                // The name moved between the two lookups: answer without a lock (the
                // client caches nothing). The stray grant is cancelled by the client's
                // "unknown lock" answer if anyone ever needs it.
                Ok(second)
            }
        }
        _ if req.is_mutation() && crate::dne::distributed(mds, header, &req)? => {
            // Its locks here are taken around its commit only (dne.rs).
            crate::dne::change(mds, header, req, run).await
        }
        _ if req.is_mutation() => {
            let mut round = 0;
            loop {
                let wants = mutation_locks(mds, &req)?;
                let held = if wants.is_empty() {
                    Vec::new()
                } else {
                    let wanted: Vec<_> = wants.iter().map(|w| (w.fid, LockMode::Ex, LockScope::Bits(w.bits))).collect();
                    ns.enqueue_operation(owner, &wanted).await?
                };
                round += 1;
                // Under the locks no other client can move these names: check they still
                // lead where they led before the locks.
                if round < RELOOKUP_ROUNDS_MAX && !held.is_empty() {
                    let now = mutation_locks(mds, &req);
                    if now.as_ref().map_or(true, |now| *now != wants) {
                        // Moved (start over), or the check failed (give the locks back first:
                        // nobody calls operation locks back).
                        ns.cancel(owner, &held.iter().map(|g| g.handle).collect::<Vec<_>>());
                        now?;
                        continue;
                    }
                }
                let result = crate::dne::change(mds, header, req.clone(), run).await;
                if !held.is_empty() {
                    ns.cancel(owner, &held.iter().map(|g| g.handle).collect::<Vec<_>>());
                }
                // The intent lock on the answered inode comes after the EX locks went: taken
                // while they are held it could queue behind another client's change waiting
                // for them. The inode is read again under it, so the answer holds what the
                // lock guards even if another change came in between.
                let reply = result?;
                let reply = match answered_fid(&reply) {
                    // An inode on another MDT: that MDT grants what may be cached of it.
                    Some(fid) if fid.mdt_index() == mds.core.mdt_index => {
                        let grant = intent(ns, owner, fid).await?;
                        let fresh = mds.execute(header, MdtRequest::Getattr(mdt::Getattr { fid }), run).await;
                        with_lock(Ok(refreshed(mds, reply, fresh)), grant)?
                    }
                    _ => reply,
                };
                return Ok(with_dirs(mds, ns, header, &req, reply, run).await);
            }
        }
        _ => mds.execute(header, req, run).await,
    }
}

/// The EX locks of a change (`mutation_locks`), taken for `owner`: every other client that
/// cached what it changes is called back first. Give them back with `ns.cancel`.
pub(crate) async fn lock_change(
    mds: &Mds,
    ns: &Arc<Namespace>,
    owner: u64,
    req: &MdtRequest,
) -> WeftResult<Vec<weft_proto::lock::LockHandle>> {
    let wants = mutation_locks(mds, req)?;
    if wants.is_empty() {
        return Ok(Vec::new());
    }
    let wanted: Vec<_> = wants.iter().map(|w| (w.fid, LockMode::Ex, LockScope::Bits(w.bits))).collect();
    Ok(ns.enqueue_operation(owner, &wanted).await?.iter().map(|g| g.handle).collect())
}

/// A PR lock on what a client may cache about `fid`; one it already holds is reused.
async fn intent(ns: &Arc<Namespace>, owner: u64, fid: Fid) -> WeftResult<LockGrant> {
    ns.enqueue(owner, fid, LockMode::Pr, LockScope::Bits(INTENT_BITS), EnqueueOptions { reuse: true, expand: false })
        .await
}

/// The directories whose entries a change of names changed.
fn changed_dirs(req: &MdtRequest) -> Vec<Fid> {
    match req {
        MdtRequest::Create(mdt::Create { parent, .. })
        | MdtRequest::Mkdir(mdt::Mkdir { parent, .. })
        | MdtRequest::Mknod(mdt::Mknod { parent, .. })
        | MdtRequest::Symlink(mdt::Symlink { parent, .. })
        | MdtRequest::Link(mdt::Link { parent, .. })
        | MdtRequest::Unlink(mdt::Unlink { parent, .. })
        | MdtRequest::Rmdir(mdt::Rmdir { parent, .. }) => vec![*parent],
        MdtRequest::Rename(mdt::Rename { src_parent, dst_parent, .. }) if src_parent == dst_parent => vec![*src_parent],
        MdtRequest::Rename(mdt::Rename { src_parent, dst_parent, .. }) => vec![*src_parent, *dst_parent],
        _ => Vec::new(),
    }
}

/// `reply` with the directories `req` changed, read now under an intent lock each (see
/// [`mdt::Changed`]). A directory that cannot be read or locked is left out: the client
/// then asks for it as before.
async fn with_dirs(
    mds: &Mds,
    ns: &Arc<Namespace>,
    header: &RequestHeader,
    req: &MdtRequest,
    reply: MdtReply,
    run: Run,
) -> MdtReply {
    let wanted = changed_dirs(req);
    if wanted.is_empty() {
        return reply;
    }
    let mut dirs = Vec::with_capacity(wanted.len());
    for fid in wanted {
        let Ok(grant) = intent(ns, header.client_id, fid).await else { continue };
        if let Ok(MdtReply::Inode(mut dir)) = mds.execute(header, MdtRequest::Getattr(mdt::Getattr { fid }), run).await
        {
            dir.lock = Some(grant);
            dirs.push(dir);
        }
    }
    MdtReply::Changed(Box::new(mdt::Changed { answer: reply, dirs }))
}

fn answered_fid(reply: &MdtReply) -> Option<Fid> {
    reply.inode().map(|i| i.attr.fid)
}

/// `reply` with its inode replaced by a newer reading of it, when there is one (a file
/// unlinked meanwhile keeps the inode the change returned).
fn refreshed(mds: &Mds, reply: MdtReply, fresh: WeftResult<MdtReply>) -> MdtReply {
    match (reply, fresh) {
        (MdtReply::Inode(_), Ok(MdtReply::Inode(now))) => MdtReply::Inode(now),
        (MdtReply::Closed(Some(_)), Ok(MdtReply::Inode(now))) => MdtReply::Closed(Some(now)),
        (MdtReply::Opened(mdt::Opened { handle, inode: opened, io }), Ok(MdtReply::Inode(mut now))) => {
            // A writer that opened (or created) a file of trusted size alone was told the
            // size: the newer reading has it unknown only because of that writer's own
            // open. It still holds if no other writer opened and no size was set since;
            // such a change calls back the lock this answer carries.
            if opened.attr.size_known && !now.attr.size_known && mds.size_still_trusted(handle) {
                now.attr.size_known = true;
            }
            MdtReply::Opened(mdt::Opened { inode: now, handle, io })
        }
        (reply, _) => reply,
    }
}

fn with_lock(reply: WeftResult<MdtReply>, grant: LockGrant) -> WeftResult<MdtReply> {
    let mut reply = reply?;
    if let Some(inode) = reply.inode_mut() {
        inode.lock = Some(grant);
    }
    Ok(reply)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Want {
    fid: Fid,
    bits: u8,
}

/// Whether an open with `flags` would move the atime of `fid` as the database has it now.
/// Decided again in the batch (`ops::open`); an open whose atime moves only because a change
/// came in between leaves another client's cached atime stale until its lock goes.
fn atime_moves(t: &crate::store::Tables, fid: Fid, flags: u32) -> WeftResult<bool> {
    if flags & (OPEN_ATIME_RELATIME | OPEN_ATIME_STRICT) == 0 {
        return Ok(false);
    }
    Ok(t.inode(fid)?.is_some_and(|rec| crate::ops::open::atime_moves(flags, &rec, crate::now())))
}

/// The inode a name leads to now.
type ChildOf<'a> = dyn Fn(&Fid, &[u8]) -> WeftResult<Option<Fid>> + 'a;

/// The EX locks a step of a distributed change needs here (ops/update.rs).
fn step_locks(u: &Update, wants: &mut Vec<Want>, child: &ChildOf<'_>) -> WeftResult<()> {
    match u {
        Update::MakeDir { .. } => {}
        Update::SetStripes { fid, .. } | Update::AddLink { fid, .. } | Update::DropLink { fid, .. } => {
            wants.push(Want { fid: *fid, bits: bits::UPDATE })
        }
        Update::RemoveDir { fid, .. } => wants.push(Want { fid: *fid, bits: bits::LOOKUP | bits::UPDATE }),
        Update::AddEntry { parent, name, .. } => {
            wants.push(Want { fid: *parent, bits: bits::UPDATE });
            wants.extend(child(parent, name)?.map(|fid| Want { fid, bits: bits::LOOKUP | bits::UPDATE }));
        }
    }
    Ok(())
}

/// The EX locks a change needs, children looked up as the database has them now.
fn mutation_locks(mds: &Mds, req: &MdtRequest) -> WeftResult<Vec<Want>> {
    let t = mds.core.read_view();
    let child = |parent: &Fid, name: &[u8]| -> WeftResult<Option<Fid>> { Ok(t.dentry(*parent, name)?.map(|(f, _)| f)) };
    let update = |fid: Fid| Want { fid, bits: bits::UPDATE };
    let gone = |fid: Fid| Want { fid, bits: bits::LOOKUP | bits::UPDATE };
    let mut wants = Vec::new();
    match req {
        MdtRequest::Create(mdt::Create { parent, name, open_flags, .. }) => {
            wants.push(update(*parent));
            if let Some(c) = child(parent, name)? {
                if open_flags & (OPEN_WRITE | OPEN_TRUNC) != 0 || atime_moves(&t, c, *open_flags)? {
                    wants.push(update(c));
                }
            }
        }
        MdtRequest::Mkdir(mdt::Mkdir { parent, .. })
        | MdtRequest::MkdirStriped(mdt::MkdirStriped { parent, .. })
        | MdtRequest::Mknod(mdt::Mknod { parent, .. })
        | MdtRequest::Symlink(mdt::Symlink { parent, .. }) => wants.push(update(*parent)),
        MdtRequest::Link(mdt::Link { fid, parent, .. }) => wants.extend([update(*parent), update(*fid)]),
        MdtRequest::Unlink(mdt::Unlink { parent, name }) | MdtRequest::Rmdir(mdt::Rmdir { parent, name }) => {
            wants.push(update(*parent));
            wants.extend(child(parent, name)?.map(gone));
        }
        MdtRequest::Rename(mdt::Rename { src_parent, src_name, dst_parent, dst_name, .. }) => {
            wants.push(update(*src_parent));
            if dst_parent != src_parent {
                wants.push(update(*dst_parent));
            }
            wants.extend(child(src_parent, src_name)?.map(gone));
            wants.extend(child(dst_parent, dst_name)?.map(gone));
        }
        MdtRequest::Setattr(mdt::Setattr { fid, .. }) => wants.push(update(*fid)),
        // A restore gives the file new objects.
        MdtRequest::Open(mdt::Open { fid, flags }) if flags & OPEN_HSM_RESTORE != 0 => {
            wants.push(Want { fid: *fid, bits: bits::UPDATE | bits::LAYOUT })
        }
        // A release takes the objects away; the end of a restore gives the size back to
        // the MDT (and other clients were told the layout while it was released).
        MdtRequest::HsmRelease(mdt::HsmRelease { fid, .. }) => {
            wants.push(Want { fid: *fid, bits: bits::UPDATE | bits::LAYOUT })
        }
        MdtRequest::HsmProgress(mdt::HsmProgress { cookie, done: Some(_), .. }) => {
            if let Some(a) = t.hsm_action(*cookie)? {
                wants.push(Want { fid: a.fid, bits: bits::UPDATE | bits::LAYOUT });
            }
        }
        // A writer makes the recorded size untrustworthy: clients that cached it must ask
        // again (and glimpse the objects).
        MdtRequest::Open(mdt::Open { fid, flags }) if flags & (OPEN_WRITE | OPEN_TRUNC) != 0 => {
            wants.push(update(*fid))
        }
        // A reader's open that moves atime: clients that cached the old one must ask again.
        MdtRequest::Open(mdt::Open { fid, flags }) if atime_moves(&t, *fid, *flags)? => wants.push(update(*fid)),
        MdtRequest::SetXattr(mdt::SetXattr { fid, name, .. })
        | MdtRequest::RemoveXattr(mdt::RemoveXattr { fid, name }) => {
            let layout = if name.as_slice() == XATTR_LAYOUT { bits::LAYOUT } else { 0 };
            wants.push(Want { fid: *fid, bits: bits::UPDATE | layout });
        }
        // New objects for a component: others' layouts go stale.
        // New objects for a component, or mirrors going stale: others' layouts go stale.
        // Always taken, also when the layout the request was sent for needs nothing: it may
        // change before the request runs, and a change must call the others back.
        MdtRequest::LayoutIntent(mdt::LayoutIntent { fid, .. }) => wants.push(Want { fid: *fid, bits: bits::LAYOUT }),
        MdtRequest::Mirror(mdt::Mirror { fid, .. }) => {
            wants.push(Want { fid: *fid, bits: bits::UPDATE | bits::LAYOUT })
        }
        // Both files' layouts change: whoever cached either (and its open's layout) is told.
        MdtRequest::SwapLayouts(mdt::SwapLayouts { fid, with, .. }) => {
            wants.push(Want { fid: *fid, bits: bits::UPDATE | bits::LAYOUT });
            wants.push(Want { fid: *with, bits: bits::UPDATE | bits::LAYOUT });
        }
        MdtRequest::SetStripe(mdt::SetStripe { fid, .. }) | MdtRequest::DeleteStripe(mdt::DeleteStripe { fid }) => {
            wants.push(Want { fid: *fid, bits: bits::UPDATE | bits::LAYOUT })
        }
        MdtRequest::SetDirStripe(mdt::SetDirStripe { fid, .. })
        | MdtRequest::SyncStripe(mdt::SyncStripe { fid, .. }) => wants.push(update(*fid)),
        MdtRequest::UpdatePrepare(mdt::UpdatePrepare { update: u, .. }) => step_locks(u, &mut wants, &child)?,
        // Undoing steps changes what they changed again, and others may have cached it
        // since. Keeping them changes nothing cached (their prepares called it back); no
        // lock then, so that the outcome of a change never waits on a client, which may
        // be waiting on its next change.
        MdtRequest::UpdateResolve(mdt::UpdateResolve { txn, commit: false }) => {
            for (_, step) in t.prepared_steps_of(txn)? {
                step_locks(&step.update, &mut wants, &child)?;
            }
        }
        // Close changes nothing another client caches: while a writer had the file open,
        // others were told the size is not known and cached no size.
        _ => {}
    }
    // One lock per inode, bits merged (a rename within one directory, a hard link to self).
    wants.sort_by_key(|w| w.fid);
    wants.dedup_by(|b, a| {
        if a.fid == b.fid {
            a.bits |= b.bits;
            true
        } else {
            false
        }
    });
    Ok(wants)
}
