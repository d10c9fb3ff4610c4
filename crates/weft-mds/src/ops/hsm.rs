//! HSM states (Lustre's `hsm_states`, see weft-proto's `msg::hsm`): kept per file in a
//! reserved attribute (`weft.hsm`, as Lustre keeps them in `trusted.hsm`), which no client
//! reads or writes as an attribute and which goes with the file.

use super::{owner, Mutation, OpCtx, Query, QueryCtx};
use crate::perm;
use crate::store::Tables;
use std::sync::atomic::Ordering;
use weft_proto::msg::changelog::ChangelogType;
use weft_proto::msg::hsm::{hsm_changelog_flags, HsmEvent, HsmState, HS_DIRTY, HS_EXISTS, HS_USER_SETTABLE};
use weft_proto::msg::{mdt, FileType};
use weft_proto::{Fid, WeftError, WeftResult};

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
    // The durable marker is decided by the batch's own tables (a failed or retried batch
    // must not leave a state without it); the flag in memory only ever goes on.
    if !ctx.t.hsm_used()? {
        ctx.t.mark_hsm_used()?;
    }
    ctx.core.hsm_used.store(true, Ordering::Relaxed);
    if new == HsmState::default() {
        ctx.t.remove_xattr(fid, HSM_XATTR)?;
    } else {
        let value = postcard::to_stdvec(&new).expect("encoding an HSM state into memory cannot fail");
        ctx.t.put_xattr(fid, HSM_XATTR, &value)?;
    }
    let flags = hsm_changelog_flags(event, 0, new.states & HS_DIRTY != 0);
    ctx.record(ChangelogType::Hsm, flags, fid, None)
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
    if old.states & HS_EXISTS != 0 && old.states & HS_DIRTY == 0 {
        let new = HsmState { states: old.states | HS_DIRTY, ..old };
        put_state(ctx, fid, new, HsmEvent::State)?;
    }
    Ok(())
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
}
