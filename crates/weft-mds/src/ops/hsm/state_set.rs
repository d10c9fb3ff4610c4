//! `hsm set`/`clear`: the flags an owner (some only root) may set on a file.

use super::{put_state, state};
use crate::ops::{owner, Mutation, OpCtx};
use crate::perm;
use weft_proto::msg::hsm::{HsmEvent, HsmState, HS_USER_SETTABLE};
use weft_proto::msg::{mdt, FileType};
use weft_proto::{WeftError, WeftResult};

impl Mutation for mdt::HsmStateSet {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<HsmState> {
        let rec = ctx.t.must_inode(self.fid)?;
        if rec.kind != FileType::Regular {
            return Err(WeftError::invalid(format!("{} is not a regular file: HSM states are for files", self.fid)));
        }
        if !perm::is_root(ctx.who) {
            if (self.set | self.clear) & !HS_USER_SETTABLE != 0 || self.archive_id != 0 {
                return Err(WeftError::new(
                    weft_proto::ErrorCode::Perm,
                    "only root sets or clears exists, archived, lost and the archive id (users: norelease, \
                     noarchive, dirty)",
                ));
            }
            perm::check_owner(ctx.who, owner(&rec), "only the owner or root changes a file's HSM flags")?;
        }
        let old = state(ctx.t, self.fid)?;
        let new = old.changed(self.set, self.clear, self.archive_id).map_err(WeftError::invalid)?;
        // Checks done: writes follow.
        if new != old {
            put_state(ctx, self.fid, new, HsmEvent::State)?;
        }
        Ok(new)
    }
}
