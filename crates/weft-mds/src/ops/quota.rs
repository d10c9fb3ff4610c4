//! Quotas on the MDT: the limits the quota master keeps (this MDT, the file system's only
//! one; with several MDTs MDT0's), the inode limits it enforces at every create, and the
//! reads `weft quota` makes. Limits of 0 are none; id 0 (root's user, group and the "no
//! project" project) and callers that are root are never limited, as Linux lets
//! CAP_SYS_RESOURCE past quotas and Lustre does not limit root.

use super::{Mutation, OpCtx, Query, QueryCtx};
use crate::perm;
use crate::schema::{QuotaGrace, QuotaRecord};
use crate::store::{Tables, WriteTables};
use weft_proto::msg::mdt;
use weft_proto::msg::quota::{QuotaChange, QuotaInfo, QuotaKind, QuotaLimits, QuotaOwner, DEFAULT_ID};
use weft_proto::msg::{Identity, Timestamp};
use weft_proto::{ErrorCode, WeftError, WeftResult};

/// The limits that apply to `id`: for blocks and for inodes each, its own when it has
/// any, else the kind's default; whether any of them are the default's; and its record
/// (grace deadlines).
pub fn effective(t: &Tables, kind: QuotaKind, id: u32) -> WeftResult<(QuotaLimits, bool, QuotaRecord)> {
    let rec = t.quota_record(kind, id)?.unwrap_or_default();
    let own = rec.limits;
    let own_blocks = own.block_soft_kib != 0 || own.block_hard_kib != 0;
    let own_inodes = own.inode_soft != 0 || own.inode_hard != 0;
    if (own_blocks && own_inodes) || id == DEFAULT_ID {
        return Ok((own, false, rec));
    }
    let default = t.quota_record(kind, DEFAULT_ID)?.map(|d| d.limits).unwrap_or_default();
    let limits = QuotaLimits {
        block_soft_kib: if own_blocks { own.block_soft_kib } else { default.block_soft_kib },
        block_hard_kib: if own_blocks { own.block_hard_kib } else { default.block_hard_kib },
        inode_soft: if own_inodes { own.inode_soft } else { default.inode_soft },
        inode_hard: if own_inodes { own.inode_hard } else { default.inode_hard },
    };
    Ok((limits, limits != own, rec))
}

fn who_name(kind: QuotaKind, id: u32) -> String {
    match kind {
        QuotaKind::User => format!("user {id}"),
        QuotaKind::Group => format!("group {id}"),
        QuotaKind::Project => format!("project {id}"),
    }
}

fn exceeded(why: String) -> WeftError {
    WeftError::new(ErrorCode::QuotaExceeded, why)
}

/// Grace deadlines that an admitted create starts (an id that goes over its soft limit):
/// written once every check of the op passed.
#[must_use]
pub struct Admitted(Vec<(QuotaKind, u32, QuotaRecord)>);

impl Admitted {
    pub fn write(self, t: &mut WriteTables) -> WeftResult<()> {
        for (kind, id, rec) in self.0 {
            t.put_quota_record(kind, id, &rec)?;
        }
        Ok(())
    }
}

/// Whether one more inode owned by `owner` may be made by `who`: EDQUOT past a hard limit,
/// or past a soft limit whose grace time is over. Writes nothing (see [`Admitted`]).
pub fn admit_inode(t: &Tables, who: &Identity, owner: QuotaOwner, now: Timestamp) -> WeftResult<Admitted> {
    admit(t, who, QuotaKind::ALL.map(|k| (k, owner.id(k))), now)
}

/// Whether an inode may move from `old`'s ids to `new`'s (a chgrp by its owner): the ids it
/// joins are checked as for a new inode (Linux's quota transfer).
pub fn admit_transfer(
    t: &Tables,
    who: &Identity,
    old: QuotaOwner,
    new: QuotaOwner,
    now: Timestamp,
) -> WeftResult<Admitted> {
    let joined = QuotaKind::ALL.into_iter().filter(|&k| old.id(k) != new.id(k)).map(|k| (k, new.id(k)));
    admit(t, who, joined, now)
}

fn admit(
    t: &Tables,
    who: &Identity,
    ids: impl IntoIterator<Item = (QuotaKind, u32)>,
    now: Timestamp,
) -> WeftResult<Admitted> {
    let mut starts = Vec::new();
    if perm::is_root(who) {
        return Ok(Admitted(starts));
    }
    for (kind, id) in ids {
        if id == 0 {
            continue;
        }
        let (limits, _, mut rec) = effective(t, kind, id)?;
        if limits.inode_hard == 0 && limits.inode_soft == 0 {
            continue;
        }
        let used = t.quota_inodes(kind, id)?;
        if limits.inode_hard != 0 && used + 1 > limits.inode_hard {
            return Err(exceeded(format!(
                "{} holds {used} inodes, its hard limit is {}",
                who_name(kind, id),
                limits.inode_hard
            )));
        }
        if limits.inode_soft == 0 || used < limits.inode_soft {
            continue;
        }
        let now_s = now.sec.max(0) as u64;
        match rec.inode_grace_end {
            // Over the soft limit since an earlier create, and its grace is over.
            Some(end) if used > limits.inode_soft && now_s >= end => {
                return Err(exceeded(format!(
                    "{} holds {used} inodes, over its soft limit of {} since longer than its grace time",
                    who_name(kind, id),
                    limits.inode_soft
                )))
            }
            Some(_) if used > limits.inode_soft => {}
            // Going over now (again): the grace time starts.
            _ => {
                rec.inode_grace_end = Some(now_s.saturating_add(t.quota_grace(kind)?.inode_s));
                starts.push((kind, id, rec));
            }
        }
    }
    Ok(Admitted(starts))
}

fn check_may_read(who: &Identity, kind: QuotaKind, id: u32) -> WeftResult<()> {
    let own = match kind {
        QuotaKind::User => who.uid == id,
        QuotaKind::Group => who.in_group(id),
        // Project ids say which tree a file is in, not who may read it: anyone may ask.
        QuotaKind::Project => true,
    };
    if own || perm::is_root(who) || id == DEFAULT_ID {
        Ok(())
    } else {
        Err(WeftError::new(ErrorCode::Perm, format!("only root reads the quota of another {}", kind.name())))
    }
}

/// What `weft quota` shows of `kind` `id` here.
pub fn info(t: &Tables, kind: QuotaKind, id: u32, verify: bool) -> WeftResult<QuotaInfo> {
    let (limits, default, rec) = effective(t, kind, id)?;
    let inodes = t.quota_inodes(kind, id)?;
    let grace = t.quota_grace(kind)?;
    let over_inodes = limits.inode_soft != 0 && inodes > limits.inode_soft;
    let inodes_scanned = if verify { Some(t.quota_scan()?.get(&(kind, id)).copied().unwrap_or(0)) } else { None };
    Ok(QuotaInfo {
        kind,
        id,
        limits,
        default: default && id != DEFAULT_ID,
        inodes,
        block_grace_end: rec.block_grace_end,
        inode_grace_end: rec.inode_grace_end.filter(|_| over_inodes),
        block_grace_s: grace.block_s,
        inode_grace_s: grace.inode_s,
        inodes_scanned,
    })
}

impl Query for mdt::QuotaGet {
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<QuotaInfo> {
        check_may_read(q.who, self.kind, self.id)?;
        if self.verify {
            perm::check_root(q.who, "only root verifies quota usage (a scan of the MDT)")?;
        }
        info(q.t, self.kind, self.id, self.verify)
    }
}

/// The longest grace time (Lustre's: 2^48 - 1 seconds).
pub const GRACE_MAX_S: u64 = (1 << 48) - 1;

/// Who may ask the master for room for `owner`'s writes: the owner, a member of its group,
/// root (a project's writer is any of them).
pub fn check_may_acquire(who: &Identity, owner: &QuotaOwner) -> WeftResult<()> {
    if perm::is_root(who) || who.uid == owner.uid || who.in_group(owner.gid) {
        Ok(())
    } else {
        Err(WeftError::new(ErrorCode::Perm, "only the file's owner, its group or root asks for quota room"))
    }
}

impl Query for mdt::QuotaAcquire {
    fn query(&self, _: &QueryCtx<'_>) -> WeftResult<bool> {
        // Mds::handle answers it (the quota master's round talks to the OSTs).
        Err(WeftError::new(ErrorCode::Protocol, "a quota acquire is answered by the quota master, not a snapshot"))
    }
}

fn check_limits(l: &QuotaLimits) -> WeftResult<()> {
    for (what, soft, hard) in [("block", l.block_soft_kib, l.block_hard_kib), ("inode", l.inode_soft, l.inode_hard)] {
        if soft != 0 && hard != 0 && soft > hard {
            return Err(WeftError::invalid(format!("the {what} soft limit {soft} is above the hard limit {hard}")));
        }
    }
    Ok(())
}

impl Mutation for mdt::QuotaSet {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<QuotaInfo> {
        perm::check_root(ctx.who, "only root sets quotas")?;
        if self.id == 0 {
            return Err(WeftError::invalid(format!("{} 0 (root's) is never limited", self.kind.name())));
        }
        // What the id has now of its own (none where it follows the default).
        let base = ctx.t.quota_record(self.kind, self.id)?.map(|r| r.limits).unwrap_or_default();
        let QuotaChange { block_soft_kib, block_hard_kib, inode_soft, inode_hard } = self.change;
        let limits = QuotaLimits {
            block_soft_kib: block_soft_kib.unwrap_or(base.block_soft_kib),
            block_hard_kib: block_hard_kib.unwrap_or(base.block_hard_kib),
            inode_soft: inode_soft.unwrap_or(base.inode_soft),
            inode_hard: inode_hard.unwrap_or(base.inode_hard),
        };
        check_limits(&limits)?;
        // Checks done: writes follow.
        let mut rec = ctx.t.quota_record(self.kind, self.id)?.unwrap_or_default();
        rec.limits = limits;
        ctx.t.put_quota_record(self.kind, self.id, &rec)?;
        info(ctx.t, self.kind, self.id, false)
    }
}

impl Mutation for mdt::QuotaDelete {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<()> {
        perm::check_root(ctx.who, "only root sets quotas")?;
        // Checks done: writes follow. The grace deadlines go too: the id starts afresh.
        ctx.t.put_quota_record(self.kind, self.id, &QuotaRecord::default())
    }
}

impl Mutation for mdt::QuotaSetGrace {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<()> {
        perm::check_root(ctx.who, "only root sets grace times")?;
        for t in [self.block_s, self.inode_s].into_iter().flatten() {
            if t > GRACE_MAX_S {
                return Err(WeftError::invalid(format!("a grace time of {t} s is longer than {GRACE_MAX_S} s")));
            }
        }
        let old = ctx.t.quota_grace(self.kind)?;
        let grace =
            QuotaGrace { block_s: self.block_s.unwrap_or(old.block_s), inode_s: self.inode_s.unwrap_or(old.inode_s) };
        // Checks done: writes follow.
        ctx.t.put_quota_grace(self.kind, grace)
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::quota::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    fn set(kind: QuotaKind, id: u32, change: QuotaChange) -> MdtRequest {
        MdtRequest::QuotaSet(mdt::QuotaSet { kind, id, change })
    }

    fn inodes(soft: u64, hard: u64) -> QuotaChange {
        QuotaChange { inode_soft: Some(soft), inode_hard: Some(hard), ..QuotaChange::default() }
    }

    /// Creates a file as `who` and closes it (an open file unlinked still counts).
    async fn file_as(env: &Env, who: &Identity, dir: Fid, name: &str) -> weft_proto::WeftResult<()> {
        let (i, h) = env.create_as(who, dir, name, 0o644).await?;
        env.must_close(i.attr.fid, h, Some((0, 0))).await;
        Ok(())
    }

    async fn info(env: &Env, kind: QuotaKind, id: u32) -> QuotaInfo {
        match env.req(MdtRequest::QuotaGet(mdt::QuotaGet { kind, id, verify: true })).await.unwrap() {
            MdtReply::Quota(q) => q,
            r => panic!("{r:?}"),
        }
    }

    #[tokio::test]
    async fn inode_limits_stop_creates_and_the_counts_follow_every_change() {
        let env = Env::new().await;
        let d = env.mkdir_as(&Identity::root(), Fid::ROOT, "d", 0o777).await.unwrap();
        let alice = user(1000);
        assert_eq!(code(env.req_as(&alice, set(QuotaKind::User, 1000, inodes(0, 3))).await), ErrorCode::Perm);
        assert_eq!(code(env.req(set(QuotaKind::User, 0, inodes(0, 3))).await), ErrorCode::Invalid);
        assert_eq!(code(env.req(set(QuotaKind::User, 1000, inodes(5, 3))).await), ErrorCode::Invalid);
        env.req(set(QuotaKind::User, 1000, inodes(0, 3))).await.unwrap();
        file_as(&env, &alice, d, "a").await.unwrap();
        env.mkdir_as(&alice, d, "b", 0o755).await.unwrap();
        env.create_as(&alice, d, "c", 0o644).await.unwrap();
        assert_eq!(code(env.create_as(&alice, d, "d", 0o644).await), ErrorCode::QuotaExceeded);
        assert_eq!(code(env.mkdir_as(&alice, d, "e", 0o755).await), ErrorCode::QuotaExceeded);
        let q = info(&env, QuotaKind::User, 1000).await;
        assert_eq!((q.inodes, q.inodes_scanned, q.limits.inode_hard), (3, Some(3), 3));
        assert_eq!(info(&env, QuotaKind::Group, 1000).await.inodes, 3, "the group counts them too");
        // Root is never limited, and what root makes for itself counts against id 0.
        env.create_as(&Identity::root(), d, "r", 0o644).await.unwrap();
        // A removal frees one; a chown moves the count.
        let rm = |name: &str| MdtRequest::Unlink(mdt::Unlink { parent: d, name: name.into() });
        env.req_as(&alice, rm("a")).await.unwrap();
        env.create_as(&alice, d, "a2", 0o644).await.unwrap();
        let c = env.lookup(d, "c").await.unwrap().attr.fid;
        let chown = MdtRequest::Setattr(mdt::Setattr {
            fid: c,
            set: SetAttr { uid: Some(2000), ..SetAttr::default() },
            open_handle: None,
        });
        env.req(chown).await.unwrap();
        assert_eq!(info(&env, QuotaKind::User, 1000).await.inodes, 2);
        assert_eq!(info(&env, QuotaKind::User, 2000).await.inodes, 1);
        // Anyone reads their own quota, not another user's.
        env.req_as(&alice, MdtRequest::QuotaGet(mdt::QuotaGet { kind: QuotaKind::User, id: 1000, verify: false }))
            .await
            .unwrap();
        let other = MdtRequest::QuotaGet(mdt::QuotaGet { kind: QuotaKind::User, id: 2000, verify: false });
        assert_eq!(code(env.req_as(&alice, other).await), ErrorCode::Perm);
    }

    #[tokio::test]
    async fn a_soft_limit_turns_hard_after_its_grace_and_defaults_apply_to_ids_without_limits() {
        let env = Env::new().await;
        let d = env.mkdir_as(&Identity::root(), Fid::ROOT, "d", 0o777).await.unwrap();
        let grace =
            MdtRequest::QuotaSetGrace(mdt::QuotaSetGrace { kind: QuotaKind::Group, block_s: None, inode_s: Some(1) });
        env.req(grace).await.unwrap();
        // The group default: soft 1, hard 10.
        env.req(set(QuotaKind::Group, DEFAULT_ID, inodes(1, 10))).await.unwrap();
        let bob = user(1001);
        file_as(&env, &bob, d, "a").await.unwrap();
        file_as(&env, &bob, d, "b").await.unwrap();
        let q = info(&env, QuotaKind::Group, 1001).await;
        assert!(q.default && q.inode_grace_end.is_some(), "{q:?}");
        file_as(&env, &bob, d, "c").await.unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2100));
        assert_eq!(code(env.create_as(&bob, d, "late", 0o644).await), ErrorCode::QuotaExceeded, "grace over");
        // Back under the soft limit, then over it again: a new grace time.
        for name in ["a", "b", "c"] {
            env.req_as(&bob, MdtRequest::Unlink(mdt::Unlink { parent: d, name: name.into() })).await.unwrap();
        }
        env.create_as(&bob, d, "x", 0o644).await.unwrap();
        env.create_as(&bob, d, "y", 0o644).await.unwrap();
        // An id's own limits replace the default's; deleting them brings the default back.
        env.req(set(QuotaKind::Group, 1001, inodes(0, 2))).await.unwrap();
        assert_eq!(code(env.create_as(&bob, d, "z", 0o644).await), ErrorCode::QuotaExceeded);
        env.req(MdtRequest::QuotaDelete(mdt::QuotaDelete { kind: QuotaKind::Group, id: 1001 })).await.unwrap();
        env.create_as(&bob, d, "z", 0o644).await.unwrap();
        assert_eq!(info(&env, QuotaKind::Group, 1001).await.limits.inode_hard, 10);
    }
}
