//! HSM states (Lustre's `hsm_states`, see weft-proto's `msg::hsm`): kept per file in a
//! reserved attribute (`weft.hsm`, as Lustre keeps them in `trusted.hsm`), which no client
//! reads or writes as an attribute and which goes with the file.
//!
//! One file per operation: `release.rs`, `request.rs` (archive, restore, remove, cancel),
//! `take.rs` and `progress.rs` (a copytool's), `action_get.rs`, `state_get.rs`, `state_set.rs`;
//! here what they and the other operations share: the state kept per file, its events in
//! the changelog, what writes and removals do to it, the checks of a copytool's name.

mod action_get;
mod progress;
mod release;
mod request;
mod state_get;
mod state_set;
mod take;

pub(crate) use request::cancel;

use super::OpCtx;
use crate::limits::HSM_AGENT_NAME_BYTES_MAX;
use crate::perm;
use crate::schema::InodeRecord;
use crate::store::Tables;
use std::sync::atomic::Ordering;
use weft_proto::msg::changelog::ChangelogType;
use weft_proto::msg::hsm::{hsm_changelog_flags, HsmEvent, HsmState, HS_DIRTY, HS_EXISTS, HS_PCCRW, HS_RELEASED};
use weft_proto::msg::FileType;
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
            umask: 0,
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
