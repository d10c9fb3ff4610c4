//! The EX locks a change takes on an MDT (see locking.rs): what each request changes that
//! other clients may have cached. A leaf of the request path: locking.rs takes them around
//! a change, dne/ around the commit of a change over several MDTs.

use crate::Mds;
use std::sync::Arc;
use weft_dlm::namespace::Namespace;
use weft_proto::lock::{bits, LockMode, LockScope};
use weft_proto::msg::update::Update;
use weft_proto::msg::wbc::BatchOp;
use weft_proto::msg::{
    mdt, MdtRequest, OPEN_ATIME_RELATIME, OPEN_ATIME_STRICT, OPEN_HSM_RESTORE, OPEN_TRUNC, OPEN_WRITE, XATTR_LAYOUT,
};
use weft_proto::{Fid, WeftResult};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Want {
    pub fid: Fid,
    pub bits: u8,
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
        Update::MakeDir { .. } | Update::Import { .. } | Update::MoveLinks { .. } => {}
        // Held until the outcome (see `held_until_outcome`): nobody changes what leaves.
        Update::Export { fid, .. } => wants.push(Want { fid: *fid, bits: bits::LOOKUP | bits::UPDATE | bits::LAYOUT }),
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

/// The change whose step `req` prepares keeps the step's locks until its outcome (an
/// export: what leaves for another MDT must not change meanwhile), if it does.
pub(crate) fn held_until_outcome(req: &MdtRequest) -> Option<weft_proto::msg::update::TxnId> {
    match req {
        MdtRequest::UpdatePrepare(mdt::UpdatePrepare { txn, update: Update::Export { .. }, .. }) => Some(*txn),
        _ => None,
    }
}

/// The EX locks a change needs, children looked up as the database has them now.
pub(crate) fn mutation_locks(mds: &Mds, req: &MdtRequest) -> WeftResult<Vec<Want>> {
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
        // A write-back cache's batch: its directories (locking.rs leaves out those whose
        // write-back lock the client holds), the names it removes, the files it changes
        // that exist already (the ones it makes nobody else knows yet).
        MdtRequest::Batch(mdt::Batch { ops }) => {
            for op in ops {
                match op {
                    BatchOp::Create { parent, .. } => wants.push(update(*parent)),
                    BatchOp::Unlink { parent, name } => {
                        wants.push(update(*parent));
                        wants.extend(child(parent, name)?.map(gone));
                    }
                    BatchOp::Setattr { fid, .. } => {
                        if t.inode(*fid)?.is_some() {
                            wants.push(update(*fid));
                        }
                    }
                }
            }
        }
        // The name leads to the new inode: cached entries of the directory go (the inode's
        // own locks are its export's).
        MdtRequest::Migrate(mdt::Migrate { parent, .. }) => wants.push(update(*parent)),
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
            // (An export changed nothing; its locks are held still, until this outcome.)
            for (_, step) in t.prepared_steps_of(txn)? {
                if !matches!(step.update, Update::Export { .. }) {
                    step_locks(&step.update, &mut wants, &child)?;
                }
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
