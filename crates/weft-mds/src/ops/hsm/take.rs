//! A copytool takes actions from the coordinator (Lustre's agent actions), and says which
//! of its actions still run.

use super::{check_agent_caller, state};
use crate::coordinator::serves;
use crate::limits::{HSM_TAKE_ACTIONS_MAX, HSM_TAKE_RUNNING_MAX};
use crate::ops::{Mutation, OpCtx};
use weft_proto::msg::hsm::{ActionStatus, HsmActionItem, HsmControl, HS_PCCRW};
use weft_proto::msg::mdt;
use weft_proto::{WeftError, WeftResult};

impl Mutation for mdt::HsmTake {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<Vec<HsmActionItem>> {
        check_agent_caller(ctx, &self.agent)?;
        if self.running.len() > HSM_TAKE_RUNNING_MAX || self.archive_ids.len() > HSM_TAKE_RUNNING_MAX {
            return Err(WeftError::invalid(format!(
                "a copytool's poll names at most {HSM_TAKE_RUNNING_MAX} running actions and archives"
            )));
        }
        let coordinator = &ctx.core.coordinator;
        let at = ctx.core.clock.instant();
        coordinator.seen(&self.agent, Some((&self.archive_ids, &self.running, ctx.now.sec)), at);
        if coordinator.control() != HsmControl::Enabled || self.max == 0 {
            return Ok(Vec::new());
        }
        let max = self.max.min(HSM_TAKE_ACTIONS_MAX) as usize;
        let mut taken = Vec::new();
        // Checks done (what follows only takes actions still waiting): writes follow.
        for cookie in coordinator.candidates(&self.archive_ids, max * 4) {
            if taken.len() == max {
                break;
            }
            coordinator.remove_waiting(cookie);
            let Some(mut a) = ctx.t.hsm_action(cookie)? else { continue };
            if a.status != ActionStatus::Waiting || !serves(&self.archive_ids, a.archive_id) {
                continue;
            }
            // A client cache's file: only the copytool that names its archive (the cache's
            // mount) has its data, not one that serves every archive.
            if !self.archive_ids.contains(&a.archive_id) && state(ctx.t, a.fid)?.states & HS_PCCRW != 0 {
                coordinator.add_waiting(cookie, a.archive_id);
                continue;
            }
            a.status = ActionStatus::Started;
            a.agent = self.agent.clone();
            a.changed = ctx.now;
            ctx.t.put_hsm_action(&a)?;
            taken.push(a);
        }
        Ok(taken)
    }
}
