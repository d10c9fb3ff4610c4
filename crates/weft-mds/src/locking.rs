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

use crate::change_locks::mutation_locks;
use crate::limits::RELOOKUP_ROUNDS_MAX;
use crate::Mds;
use std::sync::Arc;
use weft_dlm::namespace::Namespace;
use weft_dlm::state::EnqueueOptions;
use weft_proto::lock::{bits, LockGrant, LockMode, LockScope, WBC_LOCK_BITS};
use weft_proto::msg::{mdt, MdtReply, MdtRequest, RequestHeader, Run};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// What a client may cache about an inode it was told about.
pub const INTENT_BITS: u8 = bits::LOOKUP | bits::UPDATE | bits::LAYOUT;

pub async fn handle(
    mds: &Mds,
    ns: &Arc<Namespace>,
    header: &RequestHeader,
    req: MdtRequest,
    run: Run,
) -> WeftResult<MdtReply> {
    let subject = req.subject();
    let result = handle_locked(mds, ns, header, req, run).await;
    match (result, subject) {
        // The inode moved to another MDT (migrate -m) while the client held it: a stale
        // handle, which the kernel answers by looking the path up again.
        (Err(e), Some(fid)) if e.code == ErrorCode::NotFound && mds.core.dne.moved(&fid) => {
            Err(WeftError::new(ErrorCode::Stale, format!("{fid} moved to another MDT; look its name up again")))
        }
        (result, _) => result,
    }
}

async fn handle_locked(
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
        MdtRequest::WbcGrant(mdt::WbcGrant { dir, .. }) => wbc_grant(mds, ns, header, *dir, req, run).await,
        MdtRequest::Lookup(mdt::Lookup { parent: dir, .. })
        | MdtRequest::Readdir(mdt::Readdir { fid: dir, .. })
        | MdtRequest::ReaddirPlus(mdt::ReaddirPlus { fid: dir, .. })
            if ns.held_by_other(owner, *dir, bits::WBC) =>
        {
            // Another client's write-back cache makes names here: its batch lands first
            // (the callback of its lock), then the names are read.
            let held = ns.enqueue_operation(owner, &[(*dir, LockMode::Pr, LockScope::Bits(bits::WBC))]).await?;
            ns.cancel(owner, &held.iter().map(|g| g.handle).collect::<Vec<_>>());
            Box::pin(handle_locked(mds, ns, header, req, run)).await
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
        MdtRequest::ReaddirPlus(plus) => readdir_plus(mds, ns, header, plus.clone(), run).await,
        _ if req.is_mutation() && crate::dne::distributed(mds, header, &req)? => {
            // Its locks here are taken around its commit only (dne.rs).
            crate::dne::change(mds, header, req, run).await
        }
        _ if req.is_mutation() => {
            let mut round = 0;
            loop {
                let wants = change_wants(mds, ns, owner, &req)?;
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
                    let now = change_wants(mds, ns, owner, &req);
                    if now.as_ref().map_or(true, |now| *now != wants) {
                        // Moved (start over), or the check failed (give the locks back first:
                        // nobody calls operation locks back).
                        ns.cancel(owner, &held.iter().map(|g| g.handle).collect::<Vec<_>>());
                        now?;
                        continue;
                    }
                }
                let result = crate::dne::change(mds, header, req.clone(), run).await;
                mds.core.dne.after(&req);
                if !held.is_empty() {
                    let handles: Vec<_> = held.iter().map(|g| g.handle).collect();
                    match crate::change_locks::held_until_outcome(&req).filter(|_| result.is_ok()) {
                        Some(txn) => mds.core.dne.hold(txn, ns.clone(), owner, handles),
                        None => ns.cancel(owner, &handles),
                    }
                }
                // The intent lock on the answered inode comes after the EX locks went: taken
                // while they are held it could queue behind another client's change waiting
                // for them. The inode is read again under it, so the answer holds what the
                // lock guards even if another change came in between.
                let reply = result?;
                let reply = match answered_fid(&reply) {
                    // An inode on another MDT: that MDT grants what may be cached of it.
                    // The change is made: a lock that cannot be had now (its holder could not
                    // be recorded, a storage fault) leaves the answer without one, of which the
                    // client caches nothing, rather than an error for a change that was made.
                    Some(fid) if fid.mdt_index() == mds.core.mdt_index => match intent(ns, owner, fid).await {
                        Ok(grant) => {
                            let fresh = mds.execute(header, MdtRequest::Getattr(mdt::Getattr { fid }), run).await;
                            with_lock(Ok(refreshed(mds, reply, fresh)), grant)?
                        }
                        Err(e) => {
                            tracing::info!(%fid, error = %e, "a change answered without a lock on its inode");
                            reply
                        }
                    },
                    _ => reply,
                };
                return Ok(with_dirs(mds, ns, header, &req, reply, run).await);
            }
        }
        _ => mds.execute(header, req, run).await,
    }
}

/// The EX locks a change takes, less the directories whose write-back lock the client
/// holds for a batch: that lock already keeps every other client out, and an operation
/// lock there could only queue behind the request that calls it back, whose callback
/// waits for this very batch.
fn change_wants(mds: &Mds, ns: &Namespace, owner: u64, req: &MdtRequest) -> WeftResult<Vec<crate::change_locks::Want>> {
    let mut wants = mutation_locks(mds, req)?;
    if let MdtRequest::Batch(_) = req {
        wants.retain(|w| !ns.holds_granted(owner, w.fid, LockMode::Ex, WBC_LOCK_BITS));
    }
    Ok(wants)
}

/// The write-back cache's lock on `dir`, granted alone (else Busy), with the FIDs the
/// request asks for; a new lock goes back if the grant fails.
async fn wbc_grant(
    mds: &Mds,
    ns: &Arc<Namespace>,
    header: &RequestHeader,
    dir: Fid,
    req: MdtRequest,
    run: Run,
) -> WeftResult<MdtReply> {
    let owner = header.client_id;
    let had = ns.holds_granted(owner, dir, LockMode::Ex, WBC_LOCK_BITS);
    let Some(grant) = ns.try_enqueue_alone(owner, dir, LockMode::Ex, LockScope::Bits(WBC_LOCK_BITS)).await? else {
        return Err(WeftError::new(
            ErrorCode::Busy,
            format!("another client holds locks on {dir}: no write-back cache there now"),
        ));
    };
    match mds.execute(header, req, run).await {
        Ok(MdtReply::WbcGranted(mut g)) => {
            g.dir.lock = Some(grant);
            Ok(MdtReply::WbcGranted(g))
        }
        other => {
            if !had {
                ns.cancel(owner, &[grant.handle]);
            }
            other
        }
    }
}

/// Statahead: the page's entries are read first, their intent locks taken where they can
/// be granted at once, then the page and the inodes are read under them (so what a lock
/// guards was read after it was granted, as for a lookup). An inode without a lock is left
/// out: the client would not cache it.
async fn readdir_plus(
    mds: &Mds,
    ns: &Arc<Namespace>,
    header: &RequestHeader,
    plus: mdt::ReaddirPlus,
    run: Run,
) -> WeftResult<MdtReply> {
    let mdt::ReaddirPlus { fid, cookie, max_entries } = plus;
    let MdtReply::Dir(page) =
        mds.execute(header, MdtRequest::Readdir(mdt::Readdir { fid, cookie, max_entries }), run).await?
    else {
        return Err(WeftError::io("a readdir answered something else than entries"));
    };
    let here: Vec<Fid> = page.entries.iter().map(|e| e.fid).filter(|f| f.mdt_index() == mds.core.mdt_index).collect();
    let grants = ns.try_enqueue_each(header.client_id, &here, LockMode::Pr, LockScope::Bits(INTENT_BITS)).await?;
    let mut grants: std::collections::HashMap<Fid, LockGrant> =
        here.into_iter().zip(grants).filter_map(|(f, g)| Some((f, g?))).collect();
    let MdtReply::DirPlus(mut read) = mds.execute(header, MdtRequest::ReaddirPlus(plus), run).await? else {
        return Err(WeftError::io("a readdir-plus answered something else than entries"));
    };
    read.inodes.retain_mut(|inode| match grants.remove(&inode.attr.fid) {
        Some(grant) => {
            inode.lock = Some(grant);
            true
        }
        None => false,
    });
    // Locks of entries gone between the two readings are not told to the client; its
    // "unknown lock" answer to a callback cancels them, as for a lookup's stray grant.
    Ok(MdtReply::DirPlus(read))
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
