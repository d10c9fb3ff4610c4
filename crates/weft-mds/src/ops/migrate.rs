//! A participant's part of an inode's migration to another MDT (`weft migrate -m`, coordinated
//! in dne/changes.rs): the old MDT exports the inode and forgets it at the commit, the new
//! one imports it under a new FID, and the MDTs of a directory's children point their
//! reverse links at the new directory.
//!
//! What is refused, and why (as Lustre's `lfs migrate -m` refuses it): an open file (its
//! opens name the old FID; migrate again once it is closed), a file with several names
//! (each name would have to move at once), a file under HSM (its archive copy is kept by
//! FID), data on the MDT (the data would stay on the old MDT's target), a striped directory
//! or a stripe (restriping is not migration), the root.

use super::{err, show, Mutation, OpCtx};
use crate::limits::MIGRATE_ENTRY_BYTES_MAX;
use crate::schema;
use weft_proto::layout::Pattern;
use weft_proto::msg::update::Exported;
use weft_proto::msg::{mdt, FileType, InodeInfo, Name};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// What `fid`, named `name` in `parent`, is: checked that it may leave this MDT.
pub fn export(ctx: &mut OpCtx<'_>, fid: Fid, parent: Fid, name: &[u8]) -> WeftResult<Exported> {
    let rec = ctx.t.must_inode(fid)?;
    if !ctx.t.has_link_row(fid, parent, name)? || rec.nlink == 0 {
        return Err(err(ErrorCode::NotFound, format!("{fid} has no name '{}' in {parent}", show(name))));
    }
    if fid == Fid::ROOT {
        return Err(err(ErrorCode::Invalid, "the root stays on MDT0000"));
    }
    let what = show(name);
    if ctx.core.open_files().counts(fid).opens > 0 {
        return Err(err(ErrorCode::Busy, format!("'{what}' is open; migrate it again once it is closed")));
    }
    if rec.kind == FileType::Directory {
        if rec.placement.as_ref().is_some_and(|p| p.stripes.is_some() || p.master.is_some()) {
            return Err(err(ErrorCode::NotSupported, format!("'{what}' is a striped directory or a stripe of one")));
        }
    } else if rec.nlink > 1 {
        return Err(err(
            ErrorCode::NotSupported,
            format!("'{what}' has {} names; a file with hard links stays", rec.nlink),
        ));
    }
    if rec.layout.as_ref().is_some_and(|l| l.components.iter().any(|c| c.pattern == Pattern::Mdt)) {
        return Err(err(ErrorCode::NotSupported, format!("'{what}' has data on the MDT, which stays there")));
    }
    if super::hsm::state(ctx.t, fid)?.states != 0 || !ctx.t.hsm_actions_of(fid)?.is_empty() {
        return Err(err(ErrorCode::NotSupported, format!("'{what}' is under HSM, whose copy is kept by its FID")));
    }
    let mut xattrs = Vec::new();
    for xname in ctx.t.xattr_names(fid)? {
        if let Some(value) = ctx.t.xattr(fid, &xname)? {
            xattrs.push((xname, value));
        }
    }
    let mut entries = Vec::new();
    if rec.kind == FileType::Directory {
        let mut bytes = 0usize;
        ctx.t.scan_entries(fid, 0, |e| {
            bytes += e.name.len() + 24;
            entries.push((e.name, e.fid, e.kind));
            Ok(bytes <= MIGRATE_ENTRY_BYTES_MAX)
        })?;
        if bytes > MIGRATE_ENTRY_BYTES_MAX {
            return Err(err(
                ErrorCode::FileTooBig,
                format!(
                    "directory '{what}' has more entries than one migration carries \
                     ({MIGRATE_ENTRY_BYTES_MAX} bytes of names); move some into a directory of their own first"
                ),
            ));
        }
    }
    Ok(Exported { record: schema::encode_inode(&rec), xattrs, entries })
}

/// The migrated inode here, under a new FID: named `name` in `parent` (its reverse link),
/// with its extended attributes and a directory's entries (their reverse links are their
/// MDTs', moved by [`move_links`]).
pub fn import(
    ctx: &mut OpCtx<'_>,
    exported: &Exported,
    parent: Fid,
    name: &[u8],
) -> WeftResult<(Fid, schema::InodeRecord)> {
    // The same name: a directory's parent stays as the record has it.
    let rec = schema::decode_inode(parent, &exported.record)?;
    // Checks done: writes follow.
    let fid = ctx.t.next_inode_fid(ctx.core.mdt_index)?;
    ctx.t.put_inode(fid, &rec)?;
    ctx.t.add_link_row(fid, parent, name)?;
    for (xname, value) in &exported.xattrs {
        ctx.t.put_xattr(fid, xname, value)?;
    }
    for (entry, child, kind) in &exported.entries {
        ctx.t.put_dentry(fid, entry, *child, *kind)?;
    }
    if rec.layout.as_ref().is_some_and(|l| l.is_mirrored()) {
        // A stale mirror is resynced from here now (its old MDT forgets it).
        ctx.t.queue_resync(fid)?;
    }
    Ok((fid, rec))
}

/// The children of this MDT named in directory `from` are named in `to` now (the same
/// names): their reverse links, and a subdirectory's parent.
pub fn move_links(ctx: &mut OpCtx<'_>, from: Fid, to: Fid, children: &[(Fid, Name)]) -> WeftResult<()> {
    for (child, name) in children {
        if !ctx.t.has_link_row(*child, from, name)? {
            continue; // Gone meanwhile, or moved already (a resend).
        }
        ctx.t.remove_link_row(*child, from, name)?;
        ctx.t.add_link_row(*child, to, name)?;
        if let Some(mut rec) = ctx.t.inode(*child)? {
            if rec.kind == FileType::Directory && rec.parent == Some(from) {
                rec.parent = Some(to);
                ctx.t.put_inode(*child, &rec)?;
            }
        }
    }
    Ok(())
}

/// Forgets an inode that now lives on another MDT (or an import undone): its record, its
/// names' reverse links, a directory's entries; never its objects.
pub fn forget(ctx: &mut OpCtx<'_>, fid: Fid) -> WeftResult<()> {
    let Some(rec) = ctx.t.inode(fid)? else { return Ok(()) };
    while let Some((parent, name)) = ctx.t.first_link(fid)? {
        ctx.t.remove_link_row(fid, parent, &name)?;
    }
    if rec.kind == FileType::Directory {
        for e in ctx.t.entries_from(fid, 0, usize::MAX)? {
            ctx.t.remove_dentry(fid, &e.name)?;
        }
    }
    ctx.t.forget_inode(fid, &rec)
}

/// What a migration is checked for before anything moves: root asks, MDT `to` is in the
/// file system, the name is there. The inode it names, and its type.
pub fn check(
    core: &crate::Core,
    t: &crate::store::Tables,
    who: &weft_proto::msg::Identity,
    m: &mdt::Migrate,
) -> WeftResult<(Fid, FileType)> {
    if !crate::perm::is_root(who) {
        return Err(err(ErrorCode::Perm, "only root migrates inodes between MDTs"));
    }
    let mdts = core.dne.mdts();
    if !mdts.contains(&m.to) {
        return Err(WeftError::invalid(format!("MDT index {} is not in the file system (its MDTs: {mdts:?})", m.to)));
    }
    t.dentry(m.parent, &m.name)?.ok_or_else(|| err(ErrorCode::NotFound, format!("no entry '{}'", show(&m.name))))
}

impl Mutation for mdt::Migrate {
    /// Reaches the writer only when nothing moves (dne.rs coordinates a move): the inode
    /// is on MDT `to` already.
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<InodeInfo> {
        let (fid, _) = check(ctx.core, ctx.t, ctx.who, self)?;
        if fid.mdt_index() != self.to || fid.mdt_index() != ctx.core.mdt_index {
            return Err(WeftError::invalid(format!("{fid} moves to MDT {} by its coordinator", self.to)));
        }
        let rec = ctx.t.must_inode(fid)?;
        Ok(super::inode_info_with(fid, &rec, 0))
    }
}
