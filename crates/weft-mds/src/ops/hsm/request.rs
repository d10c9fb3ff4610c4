//! `hsm archive`, `restore`, `remove`, `cancel` (an HSM request): an action queued per file
//! for the coordinator to hand to a copytool, or a waiting or running one canceled.

use super::{mark_used, record_event, state};
use crate::limits::HSM_REQUEST_FILES_MAX;
use crate::ops::{owner, Mutation, OpCtx};
use crate::perm;
use crate::schema::InodeRecord;
use crate::store::WriteTables;
use weft_proto::msg::hsm::{
    ActionStatus, HsmAction, HsmActionItem, HsmControl, HsmEvent, HsmState, HSM_DATA_BYTES_MAX, HS_EXISTS,
    HS_NOARCHIVE, HS_RELEASED,
};
use weft_proto::msg::{mdt, FileType, Timestamp};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// The action a request queues on one file, None when it has nothing to do; an error names
/// the file and why.
fn plan_action(
    ctx: &OpCtx<'_>,
    req: &mdt::HsmRequest,
    fid: Fid,
    rec: &InodeRecord,
    s: HsmState,
    active: &[HsmActionItem],
) -> WeftResult<Option<u32>> {
    let refuse = |code, why: &str| Err(WeftError::new(code, format!("{} of {fid}: {why}", req.action.name())));
    if rec.kind != FileType::Regular {
        return refuse(ErrorCode::Invalid, "HSM works on regular files");
    }
    let is_owner = perm::is_root(ctx.who) || ctx.who.uid == rec.uid;
    let pending = |action| active.iter().any(|a| a.action == action);
    let archive_of = |asked: u32| match (asked, s.archive_id) {
        (0, 0) => Ok(ctx.core.coordinator.default_archive_id()),
        (0, id) => Ok(id),
        (asked, id) if id != 0 && asked != id && s.states & HS_EXISTS != 0 => Err(WeftError::invalid(format!(
            "ARCHIVE of {fid}: its copy is in archive {id}, not {asked}: remove it from there first"
        ))),
        (asked, _) => Ok(asked),
    };
    match req.action {
        HsmAction::Archive => {
            if !is_owner {
                return refuse(ErrorCode::Perm, "only the owner or root archives a file");
            }
            if s.states & HS_NOARCHIVE != 0 {
                return refuse(ErrorCode::Perm, "it is marked noarchive");
            }
            let id = archive_of(req.archive_id)?;
            if !s.wants_archive() || pending(HsmAction::Archive) {
                return Ok(None);
            }
            if pending(HsmAction::Remove) || pending(HsmAction::Restore) {
                return refuse(ErrorCode::Busy, "a remove or restore is queued on it: wait for it or cancel it");
            }
            Ok(Some(id))
        }
        HsmAction::Restore => {
            // Whoever may open the file for reading or writing (an open restores it).
            if !perm::may(ctx.who, owner(rec), perm::MAY_READ) && !perm::may(ctx.who, owner(rec), perm::MAY_WRITE) {
                return refuse(ErrorCode::Access, "restoring needs read or write permission");
            }
            if s.states & HS_RELEASED == 0 || pending(HsmAction::Restore) {
                return Ok(None);
            }
            Ok(Some(archive_of(0)?))
        }
        HsmAction::Remove => {
            if !is_owner {
                return refuse(ErrorCode::Perm, "only the owner or root removes a file's archive copy");
            }
            if s.states & HS_RELEASED != 0 {
                return refuse(ErrorCode::Busy, "it is released: its only copy is the archive's (restore it first)");
            }
            if pending(HsmAction::Archive) {
                return refuse(ErrorCode::Busy, "an archive is queued on it: wait for it or cancel it");
            }
            if s.states & HS_EXISTS == 0 || pending(HsmAction::Remove) {
                return Ok(None);
            }
            Ok(Some(archive_of(req.archive_id)?))
        }
        HsmAction::Cancel => {
            if !is_owner {
                return refuse(ErrorCode::Perm, "only the owner or root cancels a file's actions");
            }
            Ok(None)
        }
    }
}

impl Mutation for mdt::HsmRequest {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<Vec<u64>> {
        if ctx.core.coordinator.control() == HsmControl::Shutdown {
            return Err(WeftError::new(
                ErrorCode::Again,
                "the HSM coordinator of this MDT is shut down (mdt.*.hsm_control=shutdown): enable it first",
            ));
        }
        if self.fids.len() > HSM_REQUEST_FILES_MAX {
            return Err(WeftError::invalid(format!(
                "an HSM request names {} files; at most {HSM_REQUEST_FILES_MAX} (send several)",
                self.fids.len()
            )));
        }
        if self.data.len() > HSM_DATA_BYTES_MAX {
            return Err(WeftError::invalid(format!(
                "the data of an HSM request has {} bytes; at most {HSM_DATA_BYTES_MAX}",
                self.data.len()
            )));
        }
        // Every file checked before anything is queued: all or none.
        let mut plans = Vec::with_capacity(self.fids.len());
        let mut named = std::collections::HashSet::with_capacity(self.fids.len());
        for &fid in &self.fids {
            if !named.insert(fid) {
                return Err(WeftError::invalid(format!("{fid} is named twice in one HSM request")));
            }
            let rec = ctx.t.must_inode(fid)?;
            let s = state(ctx.t, fid)?;
            let active: Vec<_> = ctx.t.hsm_actions_of(fid)?.into_iter().filter(|a| !a.status.is_final()).collect();
            let archive = plan_action(ctx, self, fid, &rec, s, &active)?;
            plans.push((fid, archive, active));
        }
        // Checks done: writes follow.
        let mut cookies = Vec::with_capacity(plans.len());
        for (fid, archive, active) in plans {
            if self.action == HsmAction::Cancel {
                for a in active {
                    cancel(ctx.core, ctx.t, a, ctx.now)?;
                    let s = state(ctx.t, fid)?;
                    record_event(ctx, fid, s, HsmEvent::Cancel, 0)?;
                }
                cookies.push(0);
                continue;
            }
            let Some(archive_id) = archive else {
                cookies.push(0);
                continue;
            };
            let cookie = ctx.t.next_hsm_cookie(ctx.core.mdt_index)?;
            let item = HsmActionItem {
                cookie,
                fid,
                action: self.action,
                archive_id,
                status: ActionStatus::Waiting,
                data: self.data.clone(),
                agent: String::new(),
                bytes: 0,
                submitted: ctx.now,
                changed: ctx.now,
                errno: 0,
                message: String::new(),
            };
            ctx.t.put_hsm_action(&item)?;
            mark_used(ctx)?;
            ctx.core.coordinator.add_waiting(cookie, archive_id);
            cookies.push(cookie);
        }
        Ok(cookies)
    }
}

/// Ends a waiting or running action as canceled (a copytool running it learns so at its
/// next report).
pub(crate) fn cancel(core: &crate::Core, t: &mut WriteTables, mut a: HsmActionItem, now: Timestamp) -> WeftResult<()> {
    core.coordinator.remove_waiting(a.cookie);
    a.status = ActionStatus::Canceled;
    a.changed = now;
    t.put_hsm_action(&a)
}
