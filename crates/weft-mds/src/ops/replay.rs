//! Open replay: a replicated MDT's new leader takes back the opens clients held from the old
//! one (whose open-file table lived in its memory), under the same handles, during its
//! recovery window. A replayed open counts as any open: its close records the size, the
//! last close of an unlinked file destroys it, and the orphan cleanup after the window
//! spares its file.

use super::Mutation;
use super::OpCtx;
use crate::open_files::OpenHandle;
use weft_proto::msg::mdt;
use weft_proto::{ErrorCode, WeftError, WeftResult};

impl Mutation for mdt::ReplayOpens {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<Vec<u64>> {
        let until = *ctx.core.replay_opens_until.lock().unwrap_or_else(|p| p.into_inner());
        let open = until.is_some_and(|until| ctx.core.clock.instant() < until);
        if !open {
            return Err(WeftError::new(
                ErrorCode::Stale,
                "this MDT takes no open replay now (its recovery window is over, or it did not change server)",
            ));
        }
        let mut kept = Vec::new();
        for o in &self.opens {
            // An open of a file that is gone (destroyed before the failover) is not kept.
            if ctx.t.inode(o.fid)?.is_none() {
                continue;
            }
            let oh = OpenHandle {
                fid: o.fid,
                flags: o.flags,
                client_id: ctx.client_id,
                trusted_size_epoch: None,
                passthrough: o.passthrough,
            };
            if ctx.core.open_files().replay(o.handle, oh, ctx.undo) {
                kept.push(o.handle);
            }
        }
        Ok(kept)
    }
}
