//! `hsm action`: the actions queued or running on a file.

use crate::ops::{Query, QueryCtx};
use weft_proto::msg::hsm::{ActionStatus, HsmActionItem};
use weft_proto::msg::mdt;
use weft_proto::WeftResult;

impl Query for mdt::HsmActionGet {
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<Option<HsmActionItem>> {
        q.t.must_inode(self.fid)?;
        let actions = q.t.hsm_actions_of(self.fid)?;
        let active = actions.iter().rev().find(|a| !a.status.is_final());
        let mut shown = active.or(actions.last()).cloned();
        // Waiting because nobody serves its archive: say so (a copytool's message is for
        // failures only, so this is not one).
        if let Some(a) = shown.as_mut().filter(|a| a.status == ActionStatus::Waiting) {
            if !q.core.coordinator.served(a.archive_id, q.core.clock.instant()) {
                a.message = format!("no copytool serving archive {} is running", a.archive_id);
            }
        }
        Ok(shown)
    }
}
