//! Close an open handle: the last writer records size and blocks; the last close of an
//! orphan destroys it.

use super::Mutation;
use super::OpCtx;
use weft_proto::msg::{mdt, FileType, InodeInfo, Timestamp};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// Ends an open; answers the inode as it is now, or None if the close destroyed it.
pub fn close(
    ctx: &mut OpCtx<'_>,
    fid: Fid,
    handle: u64,
    size_blocks: Option<(u64, u64)>,
    data_version: u64,
    mtime_ns: u64,
) -> WeftResult<Option<InodeInfo>> {
    let (oh, counts, still_trusted) = {
        let of = ctx.core.open_files();
        let oh = of.handle(handle).cloned().ok_or_else(|| {
            WeftError::new(ErrorCode::Stale, format!("handle {handle} is not open on this MDT (did the MDS restart?)"))
        })?;
        let trusted = of.size_still_trusted(&oh);
        (oh, of.counts(fid), trusted)
    };
    if oh.fid != fid {
        return Err(WeftError::invalid(format!("handle {handle} belongs to {}, not {fid}", oh.fid)));
    }
    if oh.client_id != ctx.client_id {
        // Handles are numbered in turn: one client may not close (and learn the file of, or
        // set the size through) another's.
        return Err(WeftError::new(ErrorCode::Stale, format!("handle {handle} is another client's")));
    }
    let mut rec = ctx.t.must_inode(fid)?;
    // Checks done: writes follow.
    let last_writer = oh.writes() && counts.writers == 1;
    let last_open = counts.opens == 1;
    let destroyed = rec.nlink == 0 && last_open;
    if destroyed {
        ctx.t.destroy_inode(fid, &rec)?;
    } else if rec.kind == FileType::Regular && oh.writes() {
        let mut changed = false;
        if last_writer {
            match size_blocks {
                Some((size, blocks)) => {
                    (rec.size, rec.blocks, rec.size_known) = (size, blocks, true);
                    changed = true;
                }
                // A writer that wrote nothing, alone since it opened a file of trusted size:
                // the recorded size is still right, so no client needs to glimpse the objects.
                None if still_trusted && !rec.size_known => {
                    rec.size_known = true;
                    changed = true;
                }
                None => {}
            }
        }
        if let Some(written) = written_after(Timestamp::from_nanos(mtime_ns), &rec) {
            // The writer's objects changed after the inode last did: the file was modified
            // then (its writes went to the OSTs, not here).
            (rec.mtime, rec.ctime) = (written, written);
            changed = true;
        }
        if changed {
            ctx.t.put_inode(fid, &rec)?;
        }
    }
    ctx.core.open_files().close(handle, ctx.undo).expect("handle checked above");
    if oh.writes() && !destroyed && rec.kind == FileType::Regular {
        // A handle opened for writing, maybe before the file was archived: its writes may be
        // newer than the archive's copy. The data versions tell; without one (a close that
        // says no size: the client could not glimpse, or does not know what it wrote),
        // the file is taken as changed.
        let version = if size_blocks.is_some() { data_version } else { 0 };
        super::hsm::written_at_close(ctx, fid, version)?;
    }
    if oh.writes() && !destroyed {
        // As Lustre: every close of a handle opened for writing.
        ctx.record(weft_proto::msg::changelog::ChangelogType::Close, 0, fid, None)?;
    }
    Ok((!destroyed).then(|| crate::inode_info(ctx.core, fid, &rec)))
}

/// The objects' latest change, when it is later than the inode's last change (`ctime`): a
/// time set on purpose since (`cp -p`, `touch -d`: a setattr, which moves ctime) stays.
pub(crate) fn written_after(written: Timestamp, rec: &crate::schema::InodeRecord) -> Option<Timestamp> {
    (written > rec.ctime).then_some(written)
}

impl Mutation for mdt::Close {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<Option<InodeInfo>> {
        close(ctx, self.fid, self.handle, self.size_blocks, self.data_version, self.mtime_ns)
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    #[tokio::test]
    async fn close_errors() {
        let env = Env::new().await;
        let (i, h) = env.create_as(&Identity::root(), Fid::ROOT, "f", 0o644).await.unwrap();
        let close = |fid, handle| {
            MdtRequest::Close(mdt::Close { fid, handle, size_blocks: None, data_version: 0, mtime_ns: 0 })
        };
        assert_eq!(code(env.req(close(Fid::ROOT, h)).await), ErrorCode::Invalid);
        assert_eq!(code(env.req(close(i.attr.fid, h + 100)).await), ErrorCode::Stale);
        env.req(close(i.attr.fid, h)).await.unwrap();
        assert_eq!(code(env.req(close(i.attr.fid, h)).await), ErrorCode::Stale);
        assert_eq!(env.stats_open(), 0);
    }
}
