//! `hsm release`: a file's data given up on the OSTs, its copy kept by the archive (Lustre's
//! rules for when that may be done).

use super::{archived_version, put_state, state};
use crate::ops::{owner, Mutation, OpCtx};
use crate::perm;
use crate::schema::InodeRecord;
use weft_proto::msg::hsm::{HsmEvent, HsmState, HS_RELEASED};
use weft_proto::msg::{mdt, FileType, InodeInfo};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// The reason a file's data cannot be released now, if any: Lustre's rules (an archived,
/// up-to-date copy, not marked norelease), and no open and no action on the file.
fn release_refused(
    ctx: &OpCtx<'_>,
    fid: Fid,
    rec: &InodeRecord,
    s: HsmState,
    data_version: u64,
) -> WeftResult<Option<WeftError>> {
    let refuse = |code, why: String| Ok(Some(WeftError::new(code, format!("{fid} cannot be released: {why}"))));
    if rec.kind != FileType::Regular {
        return refuse(ErrorCode::Invalid, "only regular files are released".into());
    }
    if let Some(why) = s.release_refusal() {
        return refuse(ErrorCode::Perm, why.into());
    }
    // The data the caller sees is not the archive's copy's (a write the MDT did not see
    // close, as through an open it forgot in a restart).
    let archived = archived_version(ctx.t, fid)?;
    if archived != 0 && data_version != archived {
        return refuse(ErrorCode::Perm, "its data differs from the archive's copy: archive it again first".into());
    }
    let opens = ctx.core.open_files().counts(fid).opens;
    if opens > 0 {
        return refuse(ErrorCode::Busy, format!("it is open ({opens} open handles)"));
    }
    if let Some(a) = ctx.t.hsm_actions_of(fid)?.into_iter().find(|a| !a.status.is_final()) {
        return refuse(ErrorCode::Busy, format!("an {} is {} on it", a.action.name(), a.status.name()));
    }
    Ok(None)
}

impl Mutation for mdt::HsmRelease {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<InodeInfo> {
        let mut rec = ctx.t.must_inode(self.fid)?;
        perm::check_owner(ctx.who, owner(&rec), "only the owner or root releases a file")?;
        let old = state(ctx.t, self.fid)?;
        if old.states & HS_RELEASED != 0 {
            // Released already: nothing to do (as Lustre).
            return Ok(crate::inode_info(ctx.core, self.fid, &rec));
        }
        if let Some(e) = release_refused(ctx, self.fid, &rec, old, self.data_version)? {
            return Err(e);
        }
        if self.size > weft_proto::limits::FILE_SIZE_MAX_BYTES {
            return Err(WeftError::invalid(format!("a size of {} bytes is past the largest file", self.size)));
        }
        // Checks done: writes follow.
        if let Some(layout) = &rec.layout {
            for comp in &layout.components {
                for obj in &comp.objects {
                    ctx.t.queue_destroy(obj.ost, obj.fid)?;
                }
            }
            rec.layout = Some(layout.released());
        }
        if !rec.size_known {
            rec.size = self.size;
            rec.size_known = true;
        }
        // As Lustre: one block, so that tools do not take a released file for all holes.
        rec.blocks = u64::from(rec.size > 0);
        rec.ctime = ctx.now;
        ctx.t.put_inode(self.fid, &rec)?;
        let new = HsmState { states: old.states | HS_RELEASED, ..old };
        put_state(ctx, self.fid, new, HsmEvent::Release)?;
        Ok(crate::inode_info(ctx.core, self.fid, &rec))
    }
}
