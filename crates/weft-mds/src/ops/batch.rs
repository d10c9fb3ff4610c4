//! The metadata write-back cache's two requests (see docs/ARCHITECTURE.md, "The metadata
//! write-back cache"): `WbcGrant`, a directory's exclusive lock (taken in locking.rs) with a
//! range of FIDs, and `Batch`, many creates, setattrs and unlinks applied in one
//! transaction, all or none.
//!
//! A batch runs as one op of the commit batch it lands in: its ops run in order, each
//! checking before it writes as every op does, and when one fails every write of the ops
//! before it is undone (a savepoint of the tables, store_wbc.rs), so the batch leaves
//! nothing and the error names the op. It takes the reply cache's slot of its request like
//! any mutation: a resend after a reconnect, a restart or a failover answers from the
//! cache, and a replicated MDT's group applies its changes as one log entry.

use super::{check_new_entry, err, owner, show, Mutation, OpCtx};
use crate::perm;
use weft_proto::limits::{BATCH_OPS_MAX, WBC_FIDS_PER_GRANT_MAX};
use weft_proto::msg::changelog::ChangelogType;
use weft_proto::msg::wbc::{BatchOp, WbcGranted};
use weft_proto::msg::{mdt, FileType, SetAttr, Timestamp};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

impl Mutation for mdt::WbcGrant {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<WbcGranted> {
        let dir_fid = self.dir;
        if dir_fid.mdt_index() != ctx.core.mdt_index {
            return Err(err(ErrorCode::Invalid, format!("{dir_fid} is not on this MDT")));
        }
        let dir = ctx.t.must_dir(dir_fid)?;
        perm::check_lookup(ctx.who, owner(&dir))?;
        perm::check_dir_write(ctx.who, owner(&dir))?;
        if dir.nlink == 0 {
            return Err(err(ErrorCode::NotFound, format!("directory {dir_fid} was removed")));
        }
        let refuse = |why: &str| Err(err(ErrorCode::Invalid, format!("no write-back cache in {dir_fid}: {why}")));
        if dir.stripes().is_some() || dir.placement.is_some() {
            return refuse("it is striped over MDTs or places its subdirectories");
        }
        if dir.default_acl.is_some() {
            return refuse("it has a default ACL");
        }
        if dir.proj_inherit {
            return refuse("it passes its project on");
        }
        if self.fids > WBC_FIDS_PER_GRANT_MAX {
            return Err(err(ErrorCode::Invalid, format!("{} FIDs asked, at most {WBC_FIDS_PER_GRANT_MAX}", self.fids)));
        }
        let first =
            if self.fids > 0 { ctx.t.inode_fid_range(ctx.core.mdt_index, self.fids)? } else { Fid::new(0, 0, 0) };
        Ok(WbcGranted { dir: crate::inode_info(ctx.core, dir_fid, &dir), first, count: self.fids })
    }
}

impl Mutation for mdt::Batch {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<()> {
        let n = self.ops.len();
        if n == 0 || n > BATCH_OPS_MAX {
            return Err(err(ErrorCode::Invalid, format!("a batch of {n} ops: from 1 to {BATCH_OPS_MAX}")));
        }
        let me = ctx.core.mdt_index;
        if let Some((i, op)) = self.ops.iter().enumerate().find(|(_, op)| op.subject().mdt_index() != me) {
            return Err(err(
                ErrorCode::Invalid,
                format!("op {} of {n} ({}) names {}, not on this MDT", i + 1, op.kind(), op.subject()),
            ));
        }
        let savepoint = ctx.t.savepoint();
        for (i, op) in self.ops.iter().enumerate() {
            if let Err(e) = apply(ctx, op) {
                ctx.t.rollback(savepoint);
                return Err(WeftError::new(
                    e.code,
                    format!("op {} of {n} ({}): {}; nothing of the batch was applied", i + 1, describe(op), e.message),
                ));
            }
        }
        Ok(())
    }
}

fn describe(op: &BatchOp) -> String {
    match op {
        BatchOp::Create { name, .. } | BatchOp::Unlink { name, .. } => format!("{} '{}'", op.kind(), show(name)),
        BatchOp::Setattr { fid, .. } => format!("setattr {fid}"),
    }
}

fn apply(ctx: &mut OpCtx<'_>, op: &BatchOp) -> WeftResult<()> {
    if let Some(parent) = op.parent() {
        // A striped directory's names live in its stripes: not the cache's.
        if ctx.t.must_dir(parent)?.stripes().is_some() {
            return Err(err(ErrorCode::Invalid, format!("{parent} is striped over MDTs")));
        }
    }
    match op {
        BatchOp::Create { parent, name, fid, mode, uid, gid, time } => {
            create(ctx, *parent, name, *fid, (*mode, *uid, *gid), *time)
        }
        BatchOp::Setattr { fid, set } => setattr(ctx, *fid, set),
        BatchOp::Unlink { parent, name } => {
            if let Some((child, _)) = ctx.t.dentry(*parent, name)? {
                if child.mdt_index() != ctx.core.mdt_index {
                    return Err(err(ErrorCode::Invalid, format!("'{}' is on another MDT", show(name))));
                }
            }
            super::unlink::unlink(ctx, *parent, name)
        }
    }
}

/// An empty regular file with the client's FID, mode, owner and time: checked as a create
/// is, and the mode and owner against what the MDS would have given.
fn create(
    ctx: &mut OpCtx<'_>,
    parent: Fid,
    name: &[u8],
    fid: Fid,
    (mode, uid, gid): (u32, u32, u32),
    time: Timestamp,
) -> WeftResult<()> {
    let mut dir = check_new_entry(ctx, parent, name)?;
    if !ctx.t.fid_handed_out(ctx.core.mdt_index, fid)? {
        return Err(err(ErrorCode::Invalid, format!("{fid} is not a FID this MDT handed out")));
    }
    if ctx.t.inode(fid)?.is_some() {
        return Err(err(ErrorCode::Exists, format!("{fid} is in use")));
    }
    if dir.default_acl.is_some() || dir.proj_inherit {
        return Err(err(ErrorCode::Invalid, "the directory has a default ACL or passes its project on"));
    }
    let mut rec = super::new_record(FileType::Regular, mode, 0, ctx.who, &dir, time);
    if (rec.mode, rec.uid, rec.gid) != (mode & 0o7777, uid, gid) {
        return Err(err(
            ErrorCode::Invalid,
            format!(
                "mode {:o}, owner {uid}:{gid} given; the MDS gives {:o}, {}:{}",
                mode & 0o7777,
                rec.mode,
                rec.uid,
                rec.gid
            ),
        ));
    }
    let admitted = super::quota::admit_inode(ctx.t, ctx.who, rec.quota_owner(), ctx.now)?;
    let spec = ctx.core.objects.zoned(super::create::layout_spec(ctx.t, &dir, None)?, ctx.who, ctx.jobid);
    // Checks done: writes follow. The layout is given objects by the first write (a layout
    // intent), so empty files cost the OSTs nothing and a batch never waits for objects.
    let mut layout = ctx.core.objects.planned(&spec);
    if ctx.core.objects.sync_mirrors_by_pool(&layout) {
        layout.set_sync_mirrors(true);
    }
    admitted.write(ctx.t)?;
    rec.layout = Some(layout);
    rec.size_known = true;
    ctx.t.put_inode(fid, &rec)?;
    ctx.t.add_entry(parent, name, fid, FileType::Regular)?;
    let at = time.max(dir.mtime);
    super::touch_dir(&mut dir, at);
    ctx.t.put_inode(parent, &dir)?;
    ctx.record(ChangelogType::Create, 0, fid, Some((parent, name)))
}

fn setattr(ctx: &mut OpCtx<'_>, fid: Fid, set: &SetAttr) -> WeftResult<()> {
    if set.size.is_some() {
        return Err(err(ErrorCode::Invalid, "a size change (truncate) does not go in a batch"));
    }
    let kind = ctx.t.must_inode(fid)?.kind;
    if kind != FileType::Regular {
        return Err(err(ErrorCode::Invalid, format!("{fid} is not a regular file")));
    }
    super::setattr::setattr(ctx, fid, set, None).map(drop)
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
