//! Open an existing inode: permission by flags, O_TRUNC, the size rule for writers.

use super::{owner, Mutation, OpCtx};
use crate::perm;
use crate::schema::InodeRecord;
use weft_proto::msg::hsm::{ActionStatus, HsmAction, HS_PCCRW, HS_RELEASED};
use weft_proto::msg::{
    mdt, FileType, Timestamp, OPEN_EXEC, OPEN_HSM_RESTORE, OPEN_PASSTHROUGH, OPEN_PCC, OPEN_READ, OPEN_TRUNC,
    OPEN_WRITE,
};
use weft_proto::{ErrorCode, Fid, StripeSpec, WeftError, WeftResult};

/// The error an open (or a truncate) of a released file gets: the client asks for a restore
/// and opens again once it is done (see weft-client's `restore`).
pub fn released_error(fid: Fid) -> WeftError {
    WeftError::new(
        ErrorCode::NoData,
        format!("{fid} is released (its data is in an archive only): it must be restored first"),
    )
}

/// Before the batch: the objects a copytool's restore open of a released file needs (its
/// layout's shape).
pub fn prepare_restore(t: &crate::store::Tables, fid: Fid, flags: u32) -> WeftResult<Option<StripeSpec>> {
    if flags & OPEN_HSM_RESTORE == 0 {
        return Ok(None);
    }
    let Some(rec) = t.inode(fid)? else { return Ok(None) };
    let Some(comp) = rec.layout.as_ref().filter(|l| l.is_released()).and_then(|l| l.components.first()) else {
        return Ok(None);
    };
    Ok(Some(comp.spec()))
}

/// A copytool's open of a file it restores: the file must be released with a restore
/// running; a released layout gets the objects reserved for it. The open does not count as
/// a writer's (see `OPEN_HSM_RESTORE`).
fn open_for_restore(ctx: &mut OpCtx<'_>, fid: Fid, flags: u32) -> WeftResult<mdt::Opened> {
    let mut rec = ctx.t.must_inode(fid)?;
    if !perm::is_root(ctx.who) {
        return Err(WeftError::new(ErrorCode::Perm, "only a copytool (root) opens a file to restore it"));
    }
    let s = super::hsm::state(ctx.t, fid)?;
    let restoring =
        ctx.t.hsm_actions_of(fid)?.iter().any(|a| a.action == HsmAction::Restore && a.status == ActionStatus::Started);
    if rec.kind != FileType::Regular || s.states & HS_RELEASED == 0 || !restoring {
        return Err(WeftError::invalid(format!("{fid} is not a released file with a restore running")));
    }
    let released = rec.layout.as_ref().is_some_and(|l| l.is_released());
    // Checks done: writes follow.
    if released {
        let generation = rec.layout.as_ref().map_or(0, |l| l.generation.wrapping_add(1));
        let spec = prepare_restore(ctx.t, fid, flags)?.unwrap_or_else(StripeSpec::unset);
        rec.layout = Some(super::layout::layout_from(ctx, &spec, generation)?);
        rec.ctime = ctx.now;
        ctx.t.put_inode(fid, &rec)?;
    }
    // No open handle: a copytool that dies leaves none behind (the running restore keeps
    // releases and other restores away meanwhile); the copytool does not close it.
    let inode = crate::inode_info(ctx.core, fid, &rec);
    Ok(mdt::Opened { inode, handle: 0, io: weft_proto::msg::OpenIo::Cached })
}

pub fn open(ctx: &mut OpCtx<'_>, fid: Fid, flags: u32) -> WeftResult<mdt::Opened> {
    if flags & OPEN_HSM_RESTORE != 0 {
        return open_for_restore(ctx, fid, flags);
    }
    let mut rec = ctx.t.must_inode(fid)?;
    let read = flags & OPEN_READ != 0;
    let write = flags & (OPEN_WRITE | OPEN_TRUNC) != 0;
    if rec.kind == FileType::Directory && write {
        return Err(WeftError::new(ErrorCode::IsDir, format!("{fid} is a directory: it cannot be opened for writing")));
    }
    if rec.kind == FileType::Symlink {
        return Err(WeftError::invalid(format!("{fid} is a symlink: the client follows it before opening")));
    }
    if flags & OPEN_EXEC != 0 {
        perm::check_exec(ctx.who, owner(&rec))?;
    } else {
        perm::check_open(ctx.who, owner(&rec), read, write)?;
    }
    // The owner of a read-write cached file opens it as it is: released, its data in the
    // owner's cache (see OPEN_PCC).
    let cached = flags & OPEN_PCC != 0 && rec.kind == FileType::Regular && pcc_released(ctx, fid, &rec)?;
    if flags & OPEN_PCC != 0 && !cached {
        return Err(WeftError::new(
            ErrorCode::Stale,
            format!("{fid} is not in a read-write client cache any more (another client had it restored)"),
        ));
    }
    if rec.kind == FileType::Regular && !cached && super::hsm::is_released(ctx.core, ctx.t, fid, &rec)? {
        return Err(released_error(fid));
    }
    // Checks done: writes follow.
    let regular = rec.kind == FileType::Regular;
    if regular && write && !cached {
        super::hsm::mark_dirty_on_write(ctx, fid)?;
    }
    // Trusted before this open, with no other writer: the opener need not glimpse. A
    // truncating open is not: the client must see the old size to cut the objects.
    let trusted =
        regular && rec.size_known && flags & OPEN_TRUNC == 0 && ctx.core.open_files().counts(fid).writers == 0;
    let mut changed = false;
    if regular && flags & OPEN_TRUNC != 0 {
        // The client punches the objects; the MDS records the new size and times.
        rec.size = 0;
        rec.blocks = 0;
        rec.mtime = ctx.now;
        rec.ctime = ctx.now;
        changed = true;
    }
    if regular && write && rec.size_known {
        // A writer may change the size at any time: not trusted until a writer's close.
        rec.size_known = false;
        changed = true;
    }
    if atime_moves(flags, &rec, ctx.now) {
        rec.atime = ctx.now;
        changed = true;
    }
    if changed {
        ctx.t.put_inode(fid, &rec)?;
    }
    let passthrough = !cached && passthrough_wanted(flags, &rec);
    let (handle, io) = ctx.core.open_files().open(fid, flags, ctx.client_id, trusted, passthrough, ctx.undo);
    let mut inode = crate::inode_info(ctx.core, fid, &rec);
    if write && trusted {
        inode.attr.size_known = true;
    }
    // Not in the default mask (it would record every read); the open flags in the flags.
    ctx.record(weft_proto::msg::changelog::ChangelogType::Open, flags, fid, None)?;
    Ok(mdt::Opened { inode, handle, io })
}

/// Whether `fid` is released into a client's read-write cache, with no restore running (a
/// restore running takes the data back from the cache: the file is the servers' again).
fn pcc_released(ctx: &OpCtx<'_>, fid: Fid, rec: &InodeRecord) -> WeftResult<bool> {
    let s = super::hsm::state(ctx.t, fid)?;
    let restoring = ctx.t.hsm_actions_of(fid)?.iter().any(|a| a.action == HsmAction::Restore && !a.status.is_final());
    Ok(s.states & (HS_PCCRW | HS_RELEASED) == (HS_PCCRW | HS_RELEASED)
        && rec.layout.as_ref().is_some_and(|l| l.is_released())
        && !restoring)
}

/// Whether an open with `flags` moves the atime of `rec` to `now`
/// ([`weft_proto::msg::atime_moves`]).
pub(crate) fn atime_moves(flags: u32, rec: &InodeRecord, now: Timestamp) -> bool {
    weft_proto::msg::atime_moves(flags, rec.atime, rec.mtime, rec.ctime, now)
}

/// Whether an open with `flags` asks for passthrough and the file can have it: a regular
/// file whose data is one object (what the kernel can read and write itself).
pub(crate) fn passthrough_wanted(flags: u32, rec: &InodeRecord) -> bool {
    flags & OPEN_PASSTHROUGH != 0
        && rec.kind == FileType::Regular
        && rec.layout.as_ref().and_then(|l| l.plain().ok()).is_some_and(|c| c.stripe_count() == 1)
}

impl Mutation for mdt::Open {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<mdt::Opened> {
        open(ctx, self.fid, self.flags)
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    #[tokio::test]
    async fn open_checks_permissions_by_flags() {
        let env = Env::new().await;
        let f = env.must_file(Fid::ROOT, "f").await; // 0644 root
        let open = |flags| MdtRequest::Open(mdt::Open { fid: f, flags });
        let u = user(1000);
        assert!(env.req_as(&u, open(OPEN_READ)).await.is_ok());
        assert_eq!(code(env.req_as(&u, open(OPEN_WRITE)).await), ErrorCode::Access);
        assert_eq!(code(env.req_as(&u, open(OPEN_READ | OPEN_TRUNC)).await), ErrorCode::Access);
        assert_eq!(code(env.req_as(&u, open(OPEN_EXEC)).await), ErrorCode::Access, "0644: no execute bit");
        assert_eq!(
            code(env.req(MdtRequest::Open(mdt::Open { fid: Fid::ROOT, flags: OPEN_WRITE })).await),
            ErrorCode::IsDir
        );
        assert!(env.req(MdtRequest::Open(mdt::Open { fid: Fid::ROOT, flags: OPEN_READ })).await.is_ok());
    }

    #[test]
    fn atime_moves_by_linux_rules() {
        use crate::ops::open::atime_moves;
        let at = |sec| Timestamp { sec, nsec: 0 };
        let mut rec = crate::schema::InodeRecord::new(FileType::Regular, 0o644, 0, 0, at(1000));
        let (rel, strict) = (OPEN_READ | OPEN_ATIME_RELATIME, OPEN_READ | OPEN_ATIME_STRICT);
        assert!(atime_moves(rel, &rec, at(1001)), "relatime: atime not later than mtime");
        assert!(!atime_moves(OPEN_READ, &rec, at(1001)), "noatime");
        assert!(!atime_moves(OPEN_WRITE | OPEN_ATIME_STRICT, &rec, at(1001)), "a write-only open reads nothing");
        assert!(atime_moves(OPEN_EXEC | OPEN_ATIME_RELATIME, &rec, at(1001)), "execve reads the program");
        rec.atime = at(1001);
        assert!(!atime_moves(rel, &rec, at(1002)), "relatime: read since the last change");
        assert!(atime_moves(strict, &rec, at(1002)));
        assert!(!atime_moves(strict, &rec, at(1001)), "already now");
        let day = weft_proto::msg::RELATIME_INTERVAL_S;
        assert!(!atime_moves(rel, &rec, at(1001 + day - 1)));
        assert!(atime_moves(rel, &rec, at(1001 + day)), "relatime: a day old");
        rec.ctime = at(1001);
        assert!(atime_moves(rel, &rec, at(1002)), "relatime: changed (ctime) since");
    }

    #[tokio::test]
    async fn size_rule_follows_writers() {
        let env = Env::new().await;
        let f = env.must_file(Fid::ROOT, "f").await;
        assert!(env.must_attr(f).await.size_known);
        let (h1, h2) = {
            let open = |flags| MdtRequest::Open(mdt::Open { fid: f, flags });
            let h = |r| match r {
                MdtReply::Opened(mdt::Opened { handle, inode, .. }) => (handle, inode.attr.size_known),
                r => panic!("{r:?}"),
            };
            let (h1, k1) = h(env.req(open(OPEN_WRITE)).await.unwrap());
            let (h2, k2) = h(env.req(open(OPEN_WRITE)).await.unwrap());
            assert!(k1, "the first writer is told the trusted size");
            assert!(!k2, "a second writer is not: the first may be writing");
            (h1, h2)
        };
        // Not the last writer: its size is not recorded.
        env.must_close(f, h1, Some((10, 1))).await;
        assert!(!env.must_attr(f).await.size_known);
        env.must_close(f, h2, Some((5000, 16))).await;
        let a = env.must_attr(f).await;
        assert_eq!((a.size, a.blocks, a.size_known), (5000, 16, true));
        // O_TRUNC resets the size; a reader does not make it unknown.
        let r = env.req(MdtRequest::Open(mdt::Open { fid: f, flags: OPEN_READ })).await.unwrap();
        assert!(matches!(r, MdtReply::Opened(mdt::Opened { ref inode, .. }) if inode.attr.size_known));
        let h = match env.req(MdtRequest::Open(mdt::Open { fid: f, flags: OPEN_WRITE | OPEN_TRUNC })).await.unwrap() {
            MdtReply::Opened(mdt::Opened { handle, inode, .. }) => {
                assert_eq!((inode.attr.size, inode.attr.size_known), (0, false));
                handle
            }
            r => panic!("{r:?}"),
        };
        // The last writer closing without a size leaves it unknown.
        env.must_close(f, h, None).await;
        assert!(!env.must_attr(f).await.size_known);
    }

    #[tokio::test]
    async fn a_writer_that_wrote_nothing_keeps_a_trusted_size_only_when_alone() {
        let env = Env::new().await;
        let f = env.must_file(Fid::ROOT, "f").await;
        let open = |flags| MdtRequest::Open(mdt::Open { fid: f, flags });
        let handle = |r| match r {
            MdtReply::Opened(mdt::Opened { handle, .. }) => handle,
            r => panic!("{r:?}"),
        };
        // Alone: the size stays trusted after a close without a size.
        let h = handle(env.req(open(OPEN_WRITE)).await.unwrap());
        assert!(!env.must_attr(f).await.size_known, "unknown while a writer has it open");
        env.must_close(f, h, None).await;
        assert!(env.must_attr(f).await.size_known);
        // Another writer came and went meanwhile: it may have written, so not trusted.
        let a = handle(env.req(open(OPEN_WRITE)).await.unwrap());
        let b = handle(env.req(open(OPEN_WRITE)).await.unwrap());
        env.must_close(f, b, None).await;
        env.must_close(f, a, None).await;
        assert!(!env.must_attr(f).await.size_known);
        // A truncate while open: not trusted either.
        env.must_close(f, handle(env.req(open(OPEN_WRITE)).await.unwrap()), Some((0, 0))).await;
        assert!(env.must_attr(f).await.size_known);
        let c = handle(env.req(open(OPEN_WRITE)).await.unwrap());
        let set = SetAttr { size: Some(7), ..Default::default() };
        env.req(MdtRequest::Setattr(mdt::Setattr { fid: f, set, open_handle: None })).await.unwrap();
        env.must_close(f, c, None).await;
        assert!(!env.must_attr(f).await.size_known);
    }
}
