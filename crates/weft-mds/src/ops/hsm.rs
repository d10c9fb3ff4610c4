//! HSM states (Lustre's `hsm_states`, see weft-proto's `msg::hsm`): kept per file in a
//! reserved attribute (`weft.hsm`, as Lustre keeps them in `trusted.hsm`), which no client
//! reads or writes as an attribute and which goes with the file.

use super::{owner, Mutation, OpCtx, Query, QueryCtx};
use crate::coordinator::serves;
use crate::limits::{HSM_AGENT_NAME_BYTES_MAX, HSM_REQUEST_FILES_MAX, HSM_TAKE_ACTIONS_MAX, HSM_TAKE_RUNNING_MAX};
use crate::perm;
use crate::schema::InodeRecord;
use crate::store::{Tables, WriteTables};
use std::sync::atomic::Ordering;
use weft_proto::msg::changelog::ChangelogType;
use weft_proto::msg::hsm::{
    hsm_changelog_flags, ActionStatus, HsmAction, HsmActionItem, HsmControl, HsmEvent, HsmState, HSM_DATA_BYTES_MAX,
    HS_ARCHIVED, HS_DIRTY, HS_EXISTS, HS_LOST, HS_NOARCHIVE, HS_PCCRW, HS_RELEASED, HS_USER_SETTABLE,
};
use weft_proto::msg::{mdt, FileType, InodeInfo, Timestamp};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// The reserved attribute a file's HSM state is kept in.
pub const HSM_XATTR: &[u8] = b"weft.hsm";

/// A file's HSM state (all clear when it never had one).
pub fn state(t: &Tables, fid: Fid) -> WeftResult<HsmState> {
    match t.xattr(fid, HSM_XATTR)? {
        None => Ok(HsmState::default()),
        Some(v) => postcard::from_bytes(&v)
            .map_err(|e| WeftError::io(format!("the HSM state of {fid} is corrupt on the MDT: {e}"))),
    }
}

/// Stores `new` (removes the attribute when it is all clear) and records the change in the
/// changelog.
pub fn put_state(ctx: &mut OpCtx<'_>, fid: Fid, new: HsmState, event: HsmEvent) -> WeftResult<()> {
    put_state_with(ctx, fid, new, event, 0)
}

/// As [`put_state`], with the errno of a failed action for the record.
fn put_state_with(ctx: &mut OpCtx<'_>, fid: Fid, new: HsmState, event: HsmEvent, errno: i32) -> WeftResult<()> {
    mark_used(ctx)?;
    if new == HsmState::default() {
        ctx.t.remove_xattr(fid, HSM_XATTR)?;
    } else {
        let value = postcard::to_stdvec(&new).expect("encoding an HSM state into memory cannot fail");
        ctx.t.put_xattr(fid, HSM_XATTR, &value)?;
    }
    record_event(ctx, fid, new, event, errno)
}

/// Notes that a file of the MDT has HSM state or actions. The durable marker is decided by
/// the batch's own tables (a failed or retried batch must not leave a state without it);
/// the flag in memory only ever goes on.
fn mark_used(ctx: &mut OpCtx<'_>) -> WeftResult<()> {
    if !ctx.t.hsm_used()? {
        ctx.t.mark_hsm_used()?;
    }
    ctx.core.hsm_used.store(true, Ordering::Relaxed);
    Ok(())
}

fn record_event(ctx: &mut OpCtx<'_>, fid: Fid, state: HsmState, event: HsmEvent, errno: i32) -> WeftResult<()> {
    let error = errno.clamp(0, 0x7f) as u8;
    let flags = hsm_changelog_flags(event, error, state.states & HS_DIRTY != 0);
    ctx.record(ChangelogType::Hsm, flags, fid, None)
}

/// Whether `fid`'s data is in the archive only: its layout is released, or a copytool is
/// restoring it (new objects, state still released). Only the layout while no file of the
/// MDT ever had an HSM state.
pub fn is_released(core: &crate::Core, t: &Tables, fid: Fid, rec: &InodeRecord) -> WeftResult<bool> {
    if rec.layout.as_ref().is_some_and(|l| l.is_released()) {
        return Ok(true);
    }
    Ok(core.hsm_used.load(Ordering::Relaxed) && state(t, fid)?.states & HS_RELEASED != 0)
}

/// The changelog flags of a removal of `fid`'s name: [`CLF_LAST`] when it was the last, with
/// [`CLF_HSM_EXISTS`] when the file had a copy in an archive. Read before the removal.
pub fn removal_flags(ctx: &OpCtx<'_>, fid: Fid, rec: &InodeRecord, last: bool) -> WeftResult<u32> {
    use weft_proto::msg::changelog::{CLF_HSM_EXISTS, CLF_LAST};
    if !last {
        return Ok(0);
    }
    let copy = rec.kind == FileType::Regular
        && ctx.core.hsm_used.load(Ordering::Relaxed)
        && state(ctx.t, fid)?.states & HS_EXISTS != 0;
    Ok(CLF_LAST | if copy { CLF_HSM_EXISTS } else { 0 })
}

/// A write is about to change `fid`'s data, or did (an open for writing, a truncate, the
/// close of a handle opened for writing before the file was archived): a file whose copy
/// exists in an archive becomes dirty, as in Lustre. Nothing to read while no file of
/// the MDT ever had an HSM state.
pub fn mark_dirty_on_write(ctx: &mut OpCtx<'_>, fid: Fid) -> WeftResult<()> {
    if !ctx.core.hsm_used.load(Ordering::Relaxed) {
        return Ok(());
    }
    let old = state(ctx.t, fid)?;
    // A client's read-write cache holds the data being written: its copy stays the file.
    if old.states & HS_EXISTS != 0 && old.states & (HS_DIRTY | HS_PCCRW) == 0 {
        let new = HsmState { states: old.states | HS_DIRTY, ..old };
        put_state(ctx, fid, new, HsmEvent::State)?;
    }
    Ok(())
}

/// The reserved attribute holding the data version of a file's archive copy.
pub const HSM_VERSION_XATTR: &[u8] = b"weft.hsm.dv";

fn archived_version(t: &Tables, fid: Fid) -> WeftResult<u64> {
    Ok(t.xattr(fid, HSM_VERSION_XATTR)?.and_then(|v| v.try_into().ok()).map_or(0, u64::from_be_bytes))
}

/// The close of a handle that wrote, whose glimpse gave `data_version` (0: unknown): a file
/// whose archive copy is of other data (or of unknown data) becomes dirty. Equal versions:
/// the writes came before the copy was made (a close that arrives after the archive, as
/// FUSE sends them after close(2) returned).
pub fn written_at_close(ctx: &mut OpCtx<'_>, fid: Fid, data_version: u64) -> WeftResult<()> {
    if !ctx.core.hsm_used.load(Ordering::Relaxed) {
        return Ok(());
    }
    let old = state(ctx.t, fid)?;
    if old.states & HS_EXISTS == 0 || old.states & (HS_DIRTY | HS_PCCRW) != 0 {
        return Ok(());
    }
    if data_version != 0 && data_version == archived_version(ctx.t, fid)? {
        return Ok(());
    }
    put_state(ctx, fid, HsmState { states: old.states | HS_DIRTY, ..old }, HsmEvent::State)
}

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
            let cookie = ctx.t.next_hsm_cookie()?;
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

fn check_agent(agent: &str) -> WeftResult<()> {
    if agent.is_empty() || agent.len() > HSM_AGENT_NAME_BYTES_MAX {
        return Err(WeftError::invalid(format!(
            "a copytool's name has 1 to {HSM_AGENT_NAME_BYTES_MAX} bytes, not {}",
            agent.len()
        )));
    }
    Ok(())
}

fn check_agent_caller(ctx: &OpCtx<'_>, agent: &str) -> WeftResult<()> {
    check_agent(agent)?;
    if !perm::is_root(ctx.who) {
        return Err(WeftError::new(ErrorCode::Perm, "copytools run as root"));
    }
    Ok(())
}

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

impl Query for mdt::HsmStateGet {
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<HsmState> {
        let rec = q.t.must_inode(self.fid)?;
        if rec.kind != FileType::Regular {
            return Ok(HsmState::default());
        }
        state(q.t, self.fid)
    }
}

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

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::hsm::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    fn set(fid: Fid, set: u32, clear: u32, archive_id: u32) -> MdtRequest {
        MdtRequest::HsmStateSet(mdt::HsmStateSet { fid, set, clear, archive_id })
    }

    async fn get(env: &Env, fid: Fid) -> HsmState {
        match env.req(MdtRequest::HsmStateGet(mdt::HsmStateGet { fid })).await {
            Ok(MdtReply::Hsm(s)) => s,
            r => panic!("hsm state replied {r:?}"),
        }
    }

    #[tokio::test]
    async fn flags_are_set_and_cleared_by_whom_lustre_allows() {
        let env = Env::new().await;
        // The root directory is root's: make a file the user owns in a directory they may write.
        let d = env.must_mkdir(Fid::ROOT, "d").await;
        let set_mode = SetAttr { mode: Some(0o777), ..Default::default() };
        env.req(MdtRequest::Setattr(mdt::Setattr { fid: d, set: set_mode, open_handle: None })).await.unwrap();
        let (file, handle) = env.create_as(&user(1000), d, "f", 0o644).await.unwrap();
        let f = file.attr.fid;
        env.must_close(f, handle, Some((0, 0))).await;
        assert_eq!(get(&env, f).await, HsmState::default());
        // The owner: norelease (dirty needs a copy first), not exists.
        let mine = env.req_as(&user(1000), set(f, HS_NORELEASE, 0, 0)).await.unwrap();
        assert!(matches!(mine, MdtReply::Hsm(HsmState { states: HS_NORELEASE, archive_id: 0 })));
        assert_eq!(code(env.req_as(&user(1000), set(f, HS_EXISTS, 0, 0)).await), ErrorCode::Perm);
        assert_eq!(code(env.req_as(&user(1001), set(f, HS_NOARCHIVE, 0, 0)).await), ErrorCode::Perm);
        // Root: exists and archived in archive 3; the line as lfs prints it.
        env.req(set(f, HS_EXISTS | HS_ARCHIVED, 0, 3)).await.unwrap();
        let s = get(&env, f).await;
        assert_eq!(s.describe(), "(0x00000019) exists archived never_release, archive_id:3");
        assert_eq!(code(env.req(set(f, HS_RELEASED, 0, 0)).await), ErrorCode::Invalid);
        env.req_as(&user(1000), set(f, HS_DIRTY, 0, 0)).await.unwrap();
        assert_eq!(code(env.req(set(f, 0, HS_EXISTS, 0)).await), ErrorCode::Invalid, "dirty needs exists");
        env.req(set(f, 0, HS_NORELEASE | HS_ARCHIVED | HS_EXISTS | HS_DIRTY, 0)).await.unwrap();
        assert_eq!(get(&env, f).await, HsmState { states: 0, archive_id: 3 });
        assert_eq!(code(env.req(set(d, HS_NORELEASE, 0, 0)).await), ErrorCode::Invalid, "a directory");
    }

    #[tokio::test]
    async fn a_write_makes_an_archived_file_dirty_also_after_a_restart() {
        let mut env = Env::new().await;
        let f = env.must_file(Fid::ROOT, "f").await;
        let g = env.must_file(Fid::ROOT, "g").await;
        env.req(set(f, HS_EXISTS | HS_ARCHIVED, 0, 1)).await.unwrap();
        env.restart().await;
        let open = |fid, flags| MdtRequest::Open(mdt::Open { fid, flags });
        // A read leaves it clean; an open for writing makes it dirty; a file never archived
        // stays without a state.
        let Ok(MdtReply::Opened(o)) = env.req(open(f, OPEN_READ)).await else { panic!("open") };
        env.must_close(f, o.handle, None).await;
        assert_eq!(get(&env, f).await.states, HS_EXISTS | HS_ARCHIVED);
        let Ok(MdtReply::Opened(o)) = env.req(open(f, OPEN_WRITE)).await else { panic!("open") };
        env.must_close(f, o.handle, Some((0, 0))).await;
        assert_eq!(get(&env, f).await, HsmState { states: HS_EXISTS | HS_ARCHIVED | HS_DIRTY, archive_id: 1 });
        let Ok(MdtReply::Opened(o)) = env.req(open(g, OPEN_WRITE)).await else { panic!("open") };
        env.must_close(g, o.handle, Some((0, 0))).await;
        assert_eq!(get(&env, g).await, HsmState::default());
        // A handle opened for writing before the file was archived: its close does too.
        env.req(set(f, 0, HS_DIRTY, 0)).await.unwrap();
        let Ok(MdtReply::Opened(o)) = env.req(open(g, OPEN_WRITE)).await else { panic!("open") };
        env.req(set(g, HS_EXISTS | HS_ARCHIVED, 0, 1)).await.unwrap();
        env.must_close(g, o.handle, Some((5, 8))).await;
        assert_eq!(get(&env, g).await.states & HS_DIRTY, HS_DIRTY, "written through an older handle");
        // A truncate does too.
        env.req(set(f, 0, HS_DIRTY, 0)).await.unwrap();
        let cut = SetAttr { size: Some(0), ..Default::default() };
        env.req(MdtRequest::Setattr(mdt::Setattr { fid: f, set: cut, open_handle: None })).await.unwrap();
        assert_eq!(get(&env, f).await.states & HS_DIRTY, HS_DIRTY);
    }

    #[tokio::test]
    async fn a_state_change_is_a_changelog_record_of_type_hsm() {
        let env = Env::new().await;
        env.req(MdtRequest::ChangelogRegister(mdt::ChangelogRegister { name: None })).await.unwrap();
        let f = env.must_file(Fid::ROOT, "f").await;
        env.req(set(f, HS_EXISTS | HS_ARCHIVED | HS_DIRTY, 0, 1)).await.unwrap();
        let read = MdtRequest::ChangelogRead(mdt::ChangelogRead { start: 0, end: 0, max: 10 });
        let Ok(MdtReply::ChangelogRecords(r)) = env.req(read).await else { panic!("read") };
        let hsm = r.last().unwrap();
        assert_eq!((hsm.kind, hsm.target, hsm.flags), (changelog::ChangelogType::Hsm, f, 0x680));
        assert!(hsm.line().contains(" 16HSM ") && hsm.line().contains(" 0x680 t="), "{}", hsm.line());
    }

    fn request(action: HsmAction, archive_id: u32, fids: Vec<Fid>) -> MdtRequest {
        MdtRequest::HsmRequest(mdt::HsmRequest { action, archive_id, fids, data: Vec::new() })
    }

    async fn cookies(env: &Env, r: MdtRequest) -> Vec<u64> {
        match env.req(r).await {
            Ok(MdtReply::Cookies(c)) => c,
            r => panic!("hsm request replied {r:?}"),
        }
    }

    async fn take(env: &Env, agent: &str, archives: &[u32], max: u32) -> Vec<HsmActionItem> {
        let op = mdt::HsmTake { agent: agent.into(), archive_ids: archives.to_vec(), max, running: Vec::new() };
        match env.req(MdtRequest::HsmTake(op)).await {
            Ok(MdtReply::HsmActions(a)) => a,
            r => panic!("hsm take replied {r:?}"),
        }
    }

    fn progress(agent: &str, cookie: u64, bytes: u64, done: Option<i32>, blocks: u64) -> MdtRequest {
        let message = if done.is_some_and(|e| e != 0) { "tape jammed".to_string() } else { String::new() };
        let op = mdt::HsmProgress { agent: agent.into(), cookie, bytes, done, blocks, data_version: 7, message };
        MdtRequest::HsmProgress(op)
    }

    async fn action(env: &Env, fid: Fid) -> Option<HsmActionItem> {
        match env.req(MdtRequest::HsmActionGet(mdt::HsmActionGet { fid })).await {
            Ok(MdtReply::HsmAction(a)) => a,
            r => panic!("hsm action replied {r:?}"),
        }
    }

    fn release(fid: Fid, size: u64) -> MdtRequest {
        MdtRequest::HsmRelease(mdt::HsmRelease { fid, size, data_version: 0 })
    }

    /// A file of `size` bytes (its close recorded the size), on a layout of two objects.
    async fn file_of(env: &Env, name: &str, size: u64) -> Fid {
        let req = MdtRequest::Create(mdt::Create {
            parent: Fid::ROOT,
            name: name.into(),
            mode: 0o644,
            exclusive: true,
            spec: Some(spec(2)),
            open_flags: OPEN_WRITE,
        });
        let Ok(MdtReply::Opened(o)) = env.req(req).await else { panic!("create") };
        env.must_close(o.inode.attr.fid, o.handle, Some((size, size / 512))).await;
        o.inode.attr.fid
    }

    #[tokio::test]
    async fn an_archive_is_queued_taken_by_its_archive_s_copytool_and_ended() {
        let env = Env::new().await;
        let f = file_of(&env, "f", 5000).await;
        let [cookie] = cookies(&env, request(HsmAction::Archive, 0, vec![f])).await[..] else { panic!() };
        let waiting = action(&env, f).await.unwrap();
        assert_eq!((waiting.status, waiting.archive_id), (ActionStatus::Waiting, 1));
        assert!(waiting.describe().contains("no copytool serving archive 1"), "{}", waiting.describe());
        // A copytool of another archive gets nothing; one of archive 1 gets it, once.
        assert!(take(&env, "ct2", &[2], 8).await.is_empty());
        let got = take(&env, "ct1", &[1], 8).await;
        assert_eq!(
            got.iter().map(|a| (a.cookie, a.fid, a.action)).collect::<Vec<_>>(),
            [(cookie, f, HsmAction::Archive)]
        );
        assert!(take(&env, "ct3", &[], 8).await.is_empty(), "taken already");
        assert_eq!(action(&env, f).await.unwrap().describe(), "ARCHIVE running (0 bytes moved)");
        env.req(progress("ct1", cookie, 4096, None, 0)).await.unwrap();
        assert_eq!(action(&env, f).await.unwrap().describe(), "ARCHIVE running (4096 bytes moved)");
        assert_eq!(code(env.req(progress("ct2", cookie, 1, None, 0)).await), ErrorCode::Stale, "not its action");
        env.req(progress("ct1", cookie, 5000, Some(0), 0)).await.unwrap();
        assert_eq!(get(&env, f).await, HsmState { states: HS_EXISTS | HS_ARCHIVED, archive_id: 1 });
        assert_eq!(action(&env, f).await.unwrap().describe(), "ARCHIVE done (5000 bytes moved)");
        // Up to date: a second archive has nothing to do.
        assert_eq!(cookies(&env, request(HsmAction::Archive, 0, vec![f])).await, [0]);
        // A release whose glimpse saw other data than the copy's is refused.
        let other = MdtRequest::HsmRelease(mdt::HsmRelease { fid: f, size: 5000, data_version: 8 });
        let refused = env.req(other).await.unwrap_err();
        assert!(refused.message.contains("differs from the archive's copy"), "{refused:?}");
        env.req(MdtRequest::HsmRelease(mdt::HsmRelease { fid: f, size: 5000, data_version: 7 })).await.unwrap();
        let agents = env.mds().hsm_agents().unwrap();
        assert!(agents.contains("uuid=ct1 archive_id=1 requests=[current:0 ok:1 errors:0]"), "{agents}");
    }

    #[tokio::test]
    async fn a_request_is_all_or_none_and_survives_a_restart() {
        let mut env = Env::new().await;
        let (f, g) = (file_of(&env, "f", 10).await, file_of(&env, "g", 20).await);
        let d = env.must_mkdir(Fid::ROOT, "d").await;
        let bad = env.req(request(HsmAction::Archive, 3, vec![f, d])).await;
        assert_eq!(code(bad), ErrorCode::Invalid);
        assert_eq!(action(&env, f).await, None, "nothing queued for the good file either");
        assert_eq!(code(env.req(request(HsmAction::Archive, 3, vec![f, f])).await), ErrorCode::Invalid);
        let queued = cookies(&env, request(HsmAction::Archive, 3, vec![f, g])).await;
        assert!(queued.iter().all(|c| *c != 0), "{queued:?}");
        env.restart().await;
        let got = take(&env, "ct", &[3], 8).await;
        assert_eq!(got.iter().map(|a| a.cookie).collect::<Vec<_>>(), queued, "in arrival order, after the restart");
        // A user may not archive root's file.
        let mine = env.req_as(&user(1000), request(HsmAction::Archive, 0, vec![g])).await;
        assert_eq!(code(mine), ErrorCode::Perm);
    }

    #[tokio::test]
    async fn a_dead_copytool_s_actions_are_handed_out_again() {
        let env = Env::new().await;
        let f = file_of(&env, "f", 10).await;
        let [cookie] = cookies(&env, request(HsmAction::Archive, 0, vec![f])).await[..] else { panic!() };
        assert_eq!(take(&env, "dead", &[1], 1).await.len(), 1);
        // No progress for the timeout (0 here): the sweep hands it out again.
        env.mds().coordinator().set_active_request_timeout(std::time::Duration::ZERO);
        assert_eq!(env.mds().hsm_sweep().await.unwrap(), 1);
        env.mds().coordinator().set_active_request_timeout(std::time::Duration::from_secs(3600));
        assert_eq!(action(&env, f).await.unwrap().status, ActionStatus::Waiting);
        let again = take(&env, "alive", &[1], 1).await;
        assert_eq!(again[0].cookie, cookie);
        // The first copytool's late end is refused; the second's counts.
        assert_eq!(code(env.req(progress("dead", cookie, 10, Some(0), 0)).await), ErrorCode::Stale);
        env.req(progress("alive", cookie, 10, Some(0), 0)).await.unwrap();
        assert_eq!(get(&env, f).await.states, HS_EXISTS | HS_ARCHIVED);
        // A live copytool that says at a later poll it does not run an action it was given
        // (the answer was lost): handed out again.
        let g = file_of(&env, "g", 10).await;
        let [lost] = cookies(&env, request(HsmAction::Archive, 0, vec![g])).await[..] else { panic!() };
        assert_eq!(take(&env, "alive", &[1], 1).await[0].cookie, lost);
        env.mds().core.clock.advance(std::time::Duration::from_millis(2100));
        env.mds().hsm_sweep().await.unwrap();
        assert_eq!(action(&env, g).await.unwrap().status, ActionStatus::Started, "no poll said otherwise yet");
        take(&env, "alive", &[1], 0).await;
        env.mds().hsm_sweep().await.unwrap();
        assert_eq!(action(&env, g).await.unwrap().status, ActionStatus::Waiting);
    }

    #[tokio::test]
    async fn a_failure_cancel_and_the_coordinator_switch() {
        let env = Env::new().await;
        let (f, g) = (file_of(&env, "f", 10).await, file_of(&env, "g", 10).await);
        let [a] = cookies(&env, request(HsmAction::Archive, 0, vec![f])).await[..] else { panic!() };
        take(&env, "ct", &[], 1).await;
        env.req(progress("ct", a, 3, Some(5), 0)).await.unwrap();
        let failed = action(&env, f).await.unwrap();
        assert_eq!(failed.describe(), "ARCHIVE failed (3 bytes moved): errno 5: tape jammed");
        assert_eq!(get(&env, f).await, HsmState::default(), "a failed archive changes no state");
        // Cancel: the waiting action ends, a copytool gets nothing.
        cookies(&env, request(HsmAction::Archive, 0, vec![g])).await;
        assert_eq!(cookies(&env, request(HsmAction::Cancel, 0, vec![g])).await, [0]);
        assert_eq!(action(&env, g).await.unwrap().status, ActionStatus::Canceled);
        assert!(take(&env, "ct", &[], 8).await.is_empty());
        // Disabled: queued, not handed out; shut down: not even queued.
        env.mds().coordinator().set_control(HsmControl::Disabled);
        cookies(&env, request(HsmAction::Archive, 0, vec![g])).await;
        assert!(take(&env, "ct", &[], 8).await.is_empty());
        env.mds().coordinator().set_control(HsmControl::Enabled);
        assert_eq!(take(&env, "ct", &[], 8).await.len(), 1);
        env.mds().coordinator().set_control(HsmControl::Shutdown);
        assert_eq!(code(env.req(request(HsmAction::Archive, 0, vec![f])).await), ErrorCode::Again);
    }

    #[tokio::test]
    async fn release_needs_a_clean_archived_closed_file_and_restore_brings_it_back() {
        let env = Env::with_map(cluster_map(&[0, 1], &[]), 16).await;
        let f = file_of(&env, "f", 3_000_000).await;
        let objects = env.must_attr(f).await;
        assert_eq!(objects.size, 3_000_000);
        let refused = env.req(release(f, 0)).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::Perm);
        assert!(refused.message.contains("never archived"), "{refused:?}");
        env.req(set(f, HS_EXISTS | HS_ARCHIVED, 0, 1)).await.unwrap();
        let Ok(MdtReply::Opened(o)) = env.req(MdtRequest::Open(mdt::Open { fid: f, flags: OPEN_READ })).await else {
            panic!("open")
        };
        assert_eq!(code(env.req(release(f, 0)).await), ErrorCode::Busy, "open");
        env.must_close(f, o.handle, None).await;
        let layout = env.getattr(f).await.unwrap().layout.unwrap();
        env.req(release(f, 0)).await.unwrap();
        // The objects go; size and times stay; one block, as Lustre shows it.
        let gone = env.wait_destroyed(2).await;
        for o in &layout.components[0].objects {
            assert!(gone.contains(&(o.ost, o.fid)), "{gone:?}");
        }
        let after = env.getattr(f).await.unwrap();
        assert!(after.layout.as_ref().unwrap().is_released());
        assert_eq!((after.attr.size, after.attr.blocks, after.attr.size_known), (3_000_000, 1, true));
        assert_eq!(after.attr.mtime, objects.mtime);
        assert_eq!(get(&env, f).await.states, HS_EXISTS | HS_ARCHIVED | HS_RELEASED);
        // Opening or truncating it says it must be restored.
        let open = |flags| MdtRequest::Open(mdt::Open { fid: f, flags });
        assert_eq!(code(env.req(open(OPEN_READ)).await), ErrorCode::NoData);
        let cut = SetAttr { size: Some(0), ..Default::default() };
        assert_eq!(
            code(env.req(MdtRequest::Setattr(mdt::Setattr { fid: f, set: cut, open_handle: None })).await),
            ErrorCode::NoData
        );
        // A copytool may not restore without a restore running; then with one.
        assert_eq!(code(env.req(open(OPEN_WRITE | OPEN_HSM_RESTORE)).await), ErrorCode::Invalid);
        let [cookie] = cookies(&env, request(HsmAction::Restore, 0, vec![f])).await[..] else { panic!() };
        assert_eq!(cookies(&env, request(HsmAction::Restore, 0, vec![f])).await, [0], "one restore at a time");
        take(&env, "ct", &[1], 1).await;
        assert_eq!(code(env.req_as(&user(1000), open(OPEN_WRITE | OPEN_HSM_RESTORE)).await), ErrorCode::Perm);
        let Ok(MdtReply::Opened(r)) = env.req(open(OPEN_WRITE | OPEN_HSM_RESTORE)).await else {
            panic!("restore open")
        };
        let new = r.inode.layout.as_ref().unwrap();
        assert!(!new.is_released());
        assert_eq!(new.components[0].objects.len(), 2, "the stripe count it had");
        assert_eq!(code(env.req(open(OPEN_READ)).await), ErrorCode::NoData, "others wait until it is done");
        assert!(env.must_attr(f).await.size_known, "the copytool's open is no writer's");
        assert_eq!(env.stats_open(), 0, "and leaves no handle behind");
        assert_eq!(r.handle, 0);
        env.req(progress("ct", cookie, 3_000_000, Some(0), 5864)).await.unwrap();
        let restored = env.must_attr(f).await;
        assert_eq!((restored.size, restored.blocks, restored.size_known), (3_000_000, 5864, true));
        assert_eq!(get(&env, f).await.states, HS_EXISTS | HS_ARCHIVED, "restored, and still clean");
        assert!(env.req(open(OPEN_READ)).await.is_ok());
        // Remove: refused while released; clears the copy's flags otherwise.
        let [rm] = cookies(&env, request(HsmAction::Remove, 0, vec![f])).await[..] else { panic!() };
        take(&env, "ct", &[1], 1).await;
        env.req(progress("ct", rm, 0, Some(0), 0)).await.unwrap();
        assert_eq!(get(&env, f).await, HsmState { states: 0, archive_id: 1 });
    }

    #[tokio::test]
    async fn data_versions_tell_whether_an_archived_file_changed() {
        let env = Env::new().await;
        let f = file_of(&env, "f", 10).await;
        let end = |cookie, data_version| {
            let op = mdt::HsmProgress {
                agent: "ct".into(),
                cookie,
                bytes: 10,
                done: Some(0),
                blocks: 0,
                data_version,
                message: String::new(),
            };
            MdtRequest::HsmProgress(op)
        };
        let close = |handle, data_version| {
            MdtRequest::Close(mdt::Close { fid: f, handle, size_blocks: Some((10, 1)), data_version, mtime_ns: 0 })
        };
        let open_write = || MdtRequest::Open(mdt::Open { fid: f, flags: OPEN_WRITE });
        // A writer open while the copy is made (its close comes late, as FUSE sends it).
        let Ok(MdtReply::Opened(late)) = env.req(open_write()).await else { panic!("open") };
        let [cookie] = cookies(&env, request(HsmAction::Archive, 0, vec![f])).await[..] else { panic!() };
        take(&env, "ct", &[1], 1).await;
        // The file changed while it was copied: archived, but dirty.
        env.req(end(cookie, 0)).await.unwrap();
        assert_eq!(get(&env, f).await.states, HS_EXISTS | HS_ARCHIVED | HS_DIRTY);
        assert!(env.req(release(f, 0)).await.unwrap_err().message.contains("dirty"));
        // Archived again, of version 7; the late close of data version 7: still clean.
        let [cookie] = cookies(&env, request(HsmAction::Archive, 0, vec![f])).await[..] else { panic!() };
        take(&env, "ct", &[1], 1).await;
        env.req(end(cookie, 7)).await.unwrap();
        assert_eq!(get(&env, f).await.states, HS_EXISTS | HS_ARCHIVED);
        env.req(close(late.handle, 7)).await.unwrap();
        assert_eq!(get(&env, f).await.states, HS_EXISTS | HS_ARCHIVED, "written before the copy");
        // A handle that wrote other data: dirty (an open for writing marks it at once too).
        let Ok(MdtReply::Opened(o)) = env.req(open_write()).await else { panic!("open") };
        assert_eq!(get(&env, f).await.states, HS_EXISTS | HS_ARCHIVED | HS_DIRTY);
        env.req(set(f, 0, HS_DIRTY, 0)).await.unwrap();
        env.req(close(o.handle, 8)).await.unwrap();
        assert_eq!(get(&env, f).await.states, HS_EXISTS | HS_ARCHIVED | HS_DIRTY);
        assert_eq!(code(env.req(release(f, 0)).await), ErrorCode::Perm);
    }

    #[tokio::test]
    async fn a_failed_restore_gives_its_objects_back_and_the_next_starts_anew() {
        let env = Env::with_map(cluster_map(&[0, 1], &[]), 16).await;
        let f = file_of(&env, "f", 4096).await;
        env.req(set(f, HS_EXISTS | HS_ARCHIVED, 0, 1)).await.unwrap();
        env.req(release(f, 0)).await.unwrap();
        let released = env.wait_destroyed(2).await.len();
        let restore_open = || MdtRequest::Open(mdt::Open { fid: f, flags: OPEN_WRITE | OPEN_HSM_RESTORE });
        let [first] = cookies(&env, request(HsmAction::Restore, 0, vec![f])).await[..] else { panic!() };
        take(&env, "ct", &[1], 1).await;
        let Ok(MdtReply::Opened(o)) = env.req(restore_open()).await else { panic!("restore open") };
        let partial = o.inode.layout.unwrap().components[0].objects.clone();
        env.req(progress("ct", first, 100, Some(5), 0)).await.unwrap();
        // The partial copy's objects go; the file is released as it was.
        let gone = env.wait_destroyed(released + 2).await;
        assert!(partial.iter().all(|o| gone.contains(&(o.ost, o.fid))), "{gone:?}");
        assert!(env.getattr(f).await.unwrap().layout.unwrap().is_released());
        assert_eq!(get(&env, f).await.states, HS_EXISTS | HS_ARCHIVED | HS_RELEASED);
        // The next restore gets new objects.
        let [second] = cookies(&env, request(HsmAction::Restore, 0, vec![f])).await[..] else { panic!() };
        assert_ne!(second, first);
        take(&env, "ct", &[1], 1).await;
        let Ok(MdtReply::Opened(o)) = env.req(restore_open()).await else { panic!("restore open") };
        let fresh = o.inode.layout.unwrap().components[0].objects.clone();
        assert!(fresh.iter().all(|o| !partial.contains(o)), "{fresh:?} {partial:?}");
        env.req(progress("ct", second, 4096, Some(0), 8)).await.unwrap();
        assert_eq!(get(&env, f).await.states, HS_EXISTS | HS_ARCHIVED);
    }

    #[tokio::test]
    async fn removing_the_last_name_of_an_archived_file_says_a_copy_exists() {
        let env = Env::new().await;
        env.req(MdtRequest::ChangelogRegister(mdt::ChangelogRegister { name: None })).await.unwrap();
        let (f, g, h) = (file_of(&env, "f", 1).await, file_of(&env, "g", 1).await, file_of(&env, "h", 1).await);
        env.req(set(f, HS_EXISTS | HS_ARCHIVED, 0, 1)).await.unwrap();
        env.req(set(h, HS_EXISTS | HS_ARCHIVED, 0, 1)).await.unwrap();
        let unlink = |name: &str| MdtRequest::Unlink(mdt::Unlink { parent: Fid::ROOT, name: name.into() });
        env.req(unlink("f")).await.unwrap();
        env.req(unlink("g")).await.unwrap();
        // A rename over the last name of an archived file too.
        let over = mdt::Rename {
            src_parent: Fid::ROOT,
            src_name: "x".into(),
            dst_parent: Fid::ROOT,
            dst_name: "h".into(),
            flags: 0,
        };
        file_of(&env, "x", 1).await;
        env.req(MdtRequest::Rename(over)).await.unwrap();
        let read = MdtRequest::ChangelogRead(mdt::ChangelogRead { start: 0, end: 0, max: 100 });
        let Ok(MdtReply::ChangelogRecords(r)) = env.req(read).await else { panic!("read") };
        let removals: Vec<(changelog::ChangelogType, Fid, u32)> = r
            .iter()
            .filter(|r| matches!(r.kind, changelog::ChangelogType::Unlink | changelog::ChangelogType::Rename))
            .map(|r| (r.kind, r.target, r.flags))
            .collect();
        use changelog::ChangelogType::{Rename, Unlink};
        assert_eq!(removals, [(Unlink, f, 0x3), (Unlink, g, 0x1), (Rename, h, 0x3)]);
    }

    #[tokio::test]
    async fn a_read_write_cached_file_opens_for_its_owner_and_a_restore_ends_the_attachment() {
        let env = Env::new().await;
        let f = file_of(&env, "f", 4096).await;
        env.req(set(f, HS_EXISTS | HS_ARCHIVED | HS_PCCRW, 0, 3)).await.unwrap();
        env.req(release(f, 4096)).await.unwrap();
        let open = |flags| MdtRequest::Open(mdt::Open { fid: f, flags });
        // The cache's owner opens it as it is; everyone else meets a released file.
        let Ok(MdtReply::Opened(o)) = env.req(open(OPEN_READ | OPEN_WRITE | OPEN_PCC)).await else { panic!("open") };
        assert!(matches!(o.io, OpenIo::Cached), "no passthrough to objects it does not have");
        assert_eq!(code(env.req(open(OPEN_READ)).await), ErrorCode::NoData);
        // Its writer's close gives the copy's size and leaves it clean.
        env.must_close(f, o.handle, Some((10_000, 1))).await;
        assert_eq!(env.must_attr(f).await.size, 10_000);
        assert_eq!(get(&env, f).await.states & HS_DIRTY, 0);
        // The owner's truncate sets the MDT's size (no objects to cut).
        let cut = SetAttr { size: Some(9_000), ..Default::default() };
        env.req(MdtRequest::Setattr(mdt::Setattr { fid: f, set: cut, open_handle: None })).await.unwrap();
        let a = env.must_attr(f).await;
        assert_eq!((a.size, a.size_known), (9_000, true), "no objects: the size set is the file's");
        // Another client wants it: a restore, which the cache's copytool takes; the owner's
        // opens are refused from then on.
        let c = cookies(&env, request(HsmAction::Restore, 0, vec![f])).await;
        assert!(take(&env, "every-archive", &[], 4).await.is_empty(), "only the cache's copytool has the data");
        assert_eq!(take(&env, "pcc", &[3], 1).await.len(), 1);
        assert_eq!(code(env.req(open(OPEN_READ | OPEN_PCC)).await), ErrorCode::Stale);
        env.req(open(OPEN_WRITE | OPEN_HSM_RESTORE)).await.unwrap();
        env.req(progress("pcc", c[0], 9_000, Some(0), 18)).await.unwrap();
        // Restored: the size the copy had, and nothing of the cache left in its state.
        assert_eq!(get(&env, f).await, HsmState::default());
        let a = env.must_attr(f).await;
        assert_eq!((a.size, a.blocks), (9_000, 18));
        assert!(env.req(open(OPEN_READ)).await.is_ok());
        assert_eq!(code(env.req(open(OPEN_READ | OPEN_PCC)).await), ErrorCode::Stale);
    }
}
