//! A copytool reports progress on an action, or its end: a copy archived or restored
//! (the file's data version and size recorded), or a failure.

use super::{check_agent_caller, put_state_with, record_event, state, HSM_VERSION_XATTR};
use crate::ops::{Mutation, OpCtx};
use weft_proto::msg::hsm::{
    ActionStatus, HsmAction, HsmActionItem, HsmState, HS_ARCHIVED, HS_DIRTY, HS_EXISTS, HS_LOST, HS_PCCRW, HS_RELEASED,
};
use weft_proto::msg::mdt;
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// The end of an action that succeeded: the file's state as it says. `version`: the data
/// version the copy is of (0: the file changed while it was copied).
fn succeeded(ctx: &mut OpCtx<'_>, a: &HsmActionItem, bytes: u64, blocks: u64, version: u64) -> WeftResult<()> {
    let Some(mut rec) = ctx.t.inode(a.fid)? else { return Ok(()) };
    let old = state(ctx.t, a.fid)?;
    let new = match a.action {
        HsmAction::Archive => {
            let states = (old.states | HS_EXISTS | HS_ARCHIVED) & !(HS_LOST | HS_DIRTY);
            put_version(ctx, a.fid, version)?;
            HsmState { states: states | if version == 0 { HS_DIRTY } else { 0 }, archive_id: a.archive_id }
        }
        HsmAction::Restore => {
            if rec.layout.as_ref().is_some_and(|l| l.is_released()) {
                return Err(WeftError::invalid(format!(
                    "restore {:#x} of {} ended without the file's data: the copytool opens the file to \
                     restore it (OPEN_HSM_RESTORE) before it reports success",
                    a.cookie, a.fid
                )));
            }
            rec.blocks = blocks;
            rec.size_known = true;
            if old.states & HS_PCCRW != 0 {
                // The cache's copy was written while the file was released: the restore
                // copied all of it, and it goes with the attachment.
                rec.size = bytes;
                ctx.t.put_inode(a.fid, &rec)?;
                ctx.t.remove_xattr(a.fid, HSM_VERSION_XATTR)?;
                let gone = HS_RELEASED | HS_PCCRW | HS_EXISTS | HS_ARCHIVED | HS_DIRTY | HS_LOST;
                HsmState { states: old.states & !gone, archive_id: 0 }
            } else {
                ctx.t.put_inode(a.fid, &rec)?;
                // The archive's copy is now of these objects' data.
                put_version(ctx, a.fid, version)?;
                HsmState { states: old.states & !HS_RELEASED, ..old }
            }
        }
        HsmAction::Remove => {
            ctx.t.remove_xattr(a.fid, HSM_VERSION_XATTR)?;
            HsmState { states: old.states & !(HS_EXISTS | HS_ARCHIVED | HS_DIRTY | HS_LOST), ..old }
        }
        HsmAction::Cancel => old,
    };
    put_state_with(ctx, a.fid, new, a.action.event(), 0)
}

fn put_version(ctx: &mut OpCtx<'_>, fid: Fid, version: u64) -> WeftResult<()> {
    if version == 0 {
        ctx.t.remove_xattr(fid, HSM_VERSION_XATTR)
    } else {
        ctx.t.put_xattr(fid, HSM_VERSION_XATTR, &version.to_be_bytes())
    }
}

impl Mutation for mdt::HsmProgress {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<()> {
        check_agent_caller(ctx, &self.agent)?;
        let mut a = ctx.t.hsm_action(self.cookie)?.ok_or_else(|| {
            WeftError::new(ErrorCode::Stale, format!("no HSM action {:#x} on this MDT (ended long ago?)", self.cookie))
        })?;
        if a.status != ActionStatus::Started || a.agent != self.agent {
            return Err(WeftError::new(
                ErrorCode::Stale,
                format!(
                    "HSM action {:#x} is not this copytool's any more ({}{}): stop it",
                    self.cookie,
                    a.status.name(),
                    if a.agent.is_empty() { String::new() } else { format!(", {}", a.agent) }
                ),
            ));
        }
        ctx.core.coordinator.seen(&self.agent, None, ctx.core.clock.instant());
        match self.done {
            None => {}
            Some(0) => {
                // Checks done inside (a restore that never opened the file fails here
                // before any write).
                succeeded(ctx, &a, self.bytes, self.blocks, self.data_version)?;
                a.status = ActionStatus::Succeed;
            }
            Some(errno) => {
                if let Some(mut rec) = ctx.t.inode(a.fid)? {
                    if a.action == HsmAction::Restore {
                        // What the copytool wrote goes: the next restore starts on new objects.
                        if let Some(layout) = rec.layout.as_ref().filter(|l| !l.is_released()) {
                            for obj in layout.components.iter().flat_map(|c| &c.objects) {
                                ctx.t.queue_destroy(obj.ost, obj.fid)?;
                            }
                            rec.layout = Some(layout.released());
                            ctx.t.put_inode(a.fid, &rec)?;
                        }
                    }
                    let s = state(ctx.t, a.fid)?;
                    record_event(ctx, a.fid, s, a.action.event(), errno)?;
                }
                a.status = ActionStatus::Failed;
                a.errno = errno;
                // Cut, never refused: a refused end would be retried until the action timed out.
                a.message = weft_proto::limits::cut_message(&self.message, weft_proto::limits::HSM_MESSAGE_BYTES_MAX);
            }
        }
        a.bytes = self.bytes;
        a.changed = ctx.now;
        ctx.t.put_hsm_action(&a)?;
        if self.done.is_some() {
            ctx.core.coordinator.ended(&self.agent, self.done == Some(0));
        }
        Ok(())
    }
}
