//! `hsm state`: a file's HSM flags and archive id.

use super::state;
use crate::ops::{Query, QueryCtx};
use weft_proto::msg::hsm::HsmState;
use weft_proto::msg::{mdt, FileType};
use weft_proto::WeftResult;

impl Query for mdt::HsmStateGet {
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<HsmState> {
        let rec = q.t.must_inode(self.fid)?;
        if rec.kind != FileType::Regular {
            return Ok(HsmState::default());
        }
        state(q.t, self.fid)
    }
}
