//! Mirrors (Lustre's file-level redundancy, FLR): a write marks every mirror but one stale
//! (the layout intent in stripe.rs); extend adds a mirror, split removes one, and a resync's
//! end marks them in sync again. The data is copied by the client (weft-client's mirror.rs).
//! A file whose mirrors are written synchronously (`Sync`) has every write go to each
//! mirror in sync: a mirror goes stale only when a writer says it missed a write (`Stale`),
//! and the file is queued (`TABLE_RESYNC_QUEUE`) for the resync its server runs once the
//! mirror's OSTs are up again (weft-server's resync.rs).

use super::{owner, Mutation, OpCtx};
use crate::perm;
use weft_proto::layout::{comp_flags, Layout, Pattern};
use weft_proto::limits::MIRRORS_MAX;
use weft_proto::msg::changelog::ChangelogType;
use weft_proto::msg::mdt::MirrorOp;
use weft_proto::msg::{mdt, FileType, InodeInfo};
use weft_proto::{ErrorCode, WeftError, WeftResult};

impl Mutation for mdt::Mirror {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<InodeInfo> {
        let mut rec = ctx.t.must_inode(self.fid)?;
        let Some(mut layout) = rec.layout.clone().filter(|_| rec.kind == FileType::Regular) else {
            return Err(WeftError::invalid(format!("{} is not a regular file with a layout", self.fid)));
        };
        if !perm::may(ctx.who, owner(&rec), perm::MAY_WRITE) {
            return Err(WeftError::new(ErrorCode::Access, "changing a file's mirrors needs write permission"));
        }
        layout.check_usable()?;
        let kind = match &self.op {
            MirrorOp::Extend { spec } => {
                extend(ctx, self.fid, &mut layout, spec)?;
                ChangelogType::Layout
            }
            MirrorOp::Split { mirror_id } => {
                split(ctx, &mut layout, *mirror_id)?;
                ChangelogType::Layout
            }
            MirrorOp::Sync { on } => {
                if !layout.is_mirrored() {
                    return Err(WeftError::invalid(format!("{} has no mirrors to write synchronously", self.fid)));
                }
                if layout.sync_mirrors() == *on {
                    return Ok(crate::inode_info(ctx.core, self.fid, &rec));
                }
                layout.set_sync_mirrors(*on);
                ChangelogType::Layout
            }
            MirrorOp::Stale { mirror_id } => {
                if !stale(&mut layout, self.fid, *mirror_id)? {
                    return Ok(crate::inode_info(ctx.core, self.fid, &rec));
                }
                // In the same batch: the mark and the promise to resync it.
                ctx.t.queue_resync(self.fid)?;
                ChangelogType::Layout
            }
            MirrorOp::Resynced { generation } => {
                if layout.generation != *generation {
                    return Err(WeftError::new(
                        ErrorCode::Busy,
                        format!("the layout of {} changed during the resync: resync again", self.fid),
                    ));
                }
                for c in &mut layout.components {
                    c.flags &= !comp_flags::STALE;
                }
                ChangelogType::Resync
            }
        };
        if !layout.mirror_ids().iter().any(|m| !layout.mirror_in_sync(*m)) {
            // No stale mirror left (resynced, or split off): nothing to resync.
            ctx.t.unqueue_resync(self.fid)?;
        }
        layout.generation = layout.generation.wrapping_add(1);
        rec.layout = Some(layout);
        rec.ctime = ctx.now;
        ctx.t.put_inode(self.fid, &rec)?;
        ctx.record(kind, 0, self.fid, None)?;
        Ok(crate::inode_info(ctx.core, self.fid, &rec))
    }
}

/// Adds a mirror of `spec`, stale (no data yet); a file without mirrors becomes mirror 1.
fn extend(
    ctx: &mut OpCtx<'_>,
    fid: weft_proto::Fid,
    layout: &mut Layout,
    spec: &weft_proto::StripeSpec,
) -> WeftResult<()> {
    if !spec.mirrors.is_empty() {
        return Err(WeftError::invalid("extend adds one mirror at a time: its spec has no mirrors of its own"));
    }
    spec.validate()?;
    let spec = super::stripe::file_spec(ctx.t, fid, spec)?;
    let spec = match spec.mirrors.first() {
        // A mirrored default: the new mirror is made like its first mirror.
        Some(first) => first.clone(),
        None => spec,
    };
    if layout.components.iter().any(|c| c.pattern == Pattern::Mdt) || spec.components.iter().any(|c| c.on_mdt) {
        return Err(WeftError::invalid("data on the MDT (-L mdt) cannot be mirrored: its one copy is the MDT's"));
    }
    let ids = layout.mirror_ids();
    if ids.len() >= MIRRORS_MAX {
        return Err(WeftError::invalid(format!("the file has {} mirrors: at most {MIRRORS_MAX}", ids.len())));
    }
    // Checks done: the layout changes (the caller writes it).
    if !layout.is_mirrored() {
        for c in &mut layout.components {
            c.mirror_id = 1;
            c.id |= 1 << 16;
        }
    }
    let id = layout.mirror_ids().last().copied().unwrap_or(0) + 1;
    let mut new = Layout::planned_mirror(&spec, id);
    // The new mirror is written synchronously too once a resync filled it.
    let sync = if layout.sync_mirrors() { comp_flags::SYNC_MIRRORS } else { 0 };
    for c in &mut new.components {
        c.flags |= comp_flags::STALE | sync;
    }
    layout.components.extend(new.components);
    Ok(())
}

/// Marks mirror `id` of a file with synchronous mirrors stale (a write did not reach it);
/// whether it changed (false: stale already). The last mirror in sync stays in sync: the
/// write that missed it failed.
fn stale(layout: &mut Layout, fid: weft_proto::Fid, id: u16) -> WeftResult<bool> {
    if !layout.sync_mirrors() {
        return Err(WeftError::invalid(format!("{fid}'s mirrors are not written synchronously")));
    }
    if !layout.mirror_ids().contains(&id) {
        return Err(WeftError::not_found(format!("{fid} has no mirror {id}")));
    }
    if !layout.mirror_in_sync(id) {
        return Ok(false);
    }
    if !layout.mirror_ids().iter().any(|m| *m != id && layout.mirror_in_sync(*m)) {
        return Err(WeftError::new(
            ErrorCode::Busy,
            format!("mirror {id} of {fid} is the only one in sync: it cannot go stale"),
        ));
    }
    for c in layout.components.iter_mut().filter(|c| c.mirror_id == id) {
        c.flags |= comp_flags::STALE;
    }
    Ok(true)
}

/// Removes mirror `id`, its objects destroyed; a mirror in sync must remain.
fn split(ctx: &mut OpCtx<'_>, layout: &mut Layout, id: u16) -> WeftResult<()> {
    let ids = layout.mirror_ids();
    if !layout.is_mirrored() || !ids.contains(&id) {
        let list: Vec<String> = ids.iter().filter(|i| **i != 0).map(u16::to_string).collect();
        return Err(WeftError::not_found(format!(
            "the file has no mirror {id} (its mirrors: {})",
            if list.is_empty() { "none".to_string() } else { list.join(", ") }
        )));
    }
    if !ids.iter().any(|m| *m != id && layout.mirror_in_sync(*m)) {
        return Err(WeftError::new(
            ErrorCode::Busy,
            format!("mirror {id} is the only one in sync: resync another before removing it"),
        ));
    }
    // Checks done: writes follow.
    for c in layout.components.iter().filter(|c| c.mirror_id == id) {
        for o in &c.objects {
            ctx.t.queue_destroy(o.ost, o.fid)?;
        }
    }
    layout.components.retain(|c| c.mirror_id != id);
    Ok(())
}
