//! Changelog readers and records: register, deregister, read, clear (root), and the list
//! of readers. The records themselves are written by every other op ([`OpCtx::record`]);
//! see changelog.rs.

use super::{err, Mutation, OpCtx, Query, QueryCtx};
use crate::limits::{CHANGELOG_READ_RECORDS_MAX, CHANGELOG_USERS_MAX, CHANGELOG_USER_NAME_BYTES_MAX};
use crate::perm;
use crate::schema::{changelog_user_number, StoredChangelogUser};
use crate::store::Tables;
use weft_proto::msg::changelog::{ChangelogRecord, ChangelogUser, ChangelogUsers};
use weft_proto::msg::mdt;
use weft_proto::{ErrorCode, WeftError, WeftResult};

/// The reader `id` names (`clN`, or `clN-NAME` with its name), and its number.
fn reader(t: &Tables, id: &str) -> WeftResult<(u64, StoredChangelogUser)> {
    let unknown = || err(ErrorCode::NotFound, format!("no changelog reader '{id}' on this MDT"));
    let number = changelog_user_number(id).ok_or_else(unknown)?;
    let (_, user) = t.changelog_users()?.into_iter().find(|(n, _)| *n == number).ok_or_else(unknown)?;
    if id.contains('-') && user.id(number) != id {
        return Err(unknown());
    }
    Ok((number, user))
}

impl Mutation for mdt::ChangelogRegister {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<ChangelogUser> {
        perm::check_root(ctx.who, "only root registers changelog readers")?;
        let users = ctx.t.changelog_users()?;
        if let Some(name) = &self.name {
            let ok = !name.is_empty()
                && name.len() <= CHANGELOG_USER_NAME_BYTES_MAX
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !ok {
                return Err(WeftError::invalid(format!(
                    "changelog reader name '{name}': 1 to {CHANGELOG_USER_NAME_BYTES_MAX} letters, digits, '_' or '-'"
                )));
            }
            if users.iter().any(|(_, u)| u.name.as_deref() == Some(name.as_str())) {
                return Err(err(ErrorCode::Exists, format!("a changelog reader named '{name}' is registered already")));
            }
        }
        if users.len() >= CHANGELOG_USERS_MAX {
            return Err(err(
                ErrorCode::NoSpace,
                format!("{CHANGELOG_USERS_MAX} changelog readers are registered already: deregister one first"),
            ));
        }
        // Checks done: writes follow. The reader starts after the last record written.
        let number = ctx.t.next_changelog_user()?;
        let cleared = ctx.t.changelog_next()?.saturating_sub(1);
        let user = StoredChangelogUser { name: self.name.clone(), cleared, since: ctx.now };
        ctx.t.put_changelog_user(number, &user)?;
        // On at once, for the ops after this one in the batch; should the batch fail, the
        // records go to nobody and the next purge turns it off again.
        ctx.core.changelog.set_on(true);
        ctx.core.changelog.want_purge();
        tracing::info!(reader = %user.id(number), "changelog reader registered");
        Ok(ChangelogUser { id: user.id(number), cleared, since: ctx.now })
    }
}

impl Mutation for mdt::ChangelogDeregister {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<()> {
        perm::check_root(ctx.who, "only root deregisters changelog readers")?;
        let (number, _) = reader(ctx.t, &self.id)?;
        // Checks done: writes follow. Recording stops when the purge (in the writer, after
        // this batch committed) finds no reader left: until then records go to nobody and
        // are removed with the rest.
        ctx.t.remove_changelog_user(number)?;
        ctx.core.changelog.want_purge();
        tracing::info!(reader = %self.id, "changelog reader deregistered");
        Ok(())
    }
}

impl Mutation for mdt::ChangelogClear {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<()> {
        perm::check_root(ctx.who, "only root clears changelog records")?;
        let (number, mut user) = reader(ctx.t, &self.id)?;
        let last = ctx.t.changelog_next()?.saturating_sub(1);
        if self.end > last {
            return Err(WeftError::invalid(format!(
                "record {} is not written yet: the last is {last} (0 clears up to the last)",
                self.end
            )));
        }
        // Checks done: writes follow.
        let end = if self.end == 0 { last } else { self.end };
        user.cleared = user.cleared.max(end);
        user.since = ctx.now;
        ctx.t.put_changelog_user(number, &user)?;
        ctx.core.changelog.want_purge();
        Ok(())
    }
}

impl Query for mdt::ChangelogRead {
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<Vec<ChangelogRecord>> {
        perm::check_root(q.who, "only root reads changelogs")?;
        let end = if self.end == 0 { u64::MAX } else { self.end };
        let max = self.max.clamp(1, CHANGELOG_READ_RECORDS_MAX);
        q.t.changelog_records(self.start.max(1), end, max as usize)
    }
}

/// Anyone may list the readers (as Lustre's `changelog_users` is readable by all): their ids
/// and positions, not the records.
impl Query for mdt::ChangelogUsersList {
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<ChangelogUsers> {
        users(q.t, q.core.changelog.mask())
    }
}

/// The readers, the last record and how many are kept.
pub fn users(t: &Tables, mask: u32) -> WeftResult<ChangelogUsers> {
    let current_index = t.changelog_next()?.saturating_sub(1);
    let records = t.changelog_first()?.map_or(0, |first| current_index + 1 - first);
    let users = t
        .changelog_users()?
        .into_iter()
        .map(|(n, u)| ChangelogUser { id: u.id(n), cleared: u.cleared, since: u.since })
        .collect();
    Ok(ChangelogUsers { current_index, records, users, mask })
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::changelog::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    /// What the background task does once a second: removes the records every reader
    /// cleared (called here instead of waiting for it).
    async fn purge(env: &Env) {
        crate::background::internal(&env.mds().queue, crate::writer::InternalOp::PurgeChangelog).await.unwrap();
    }

    async fn register(env: &Env, name: Option<&str>) -> String {
        match env.req(MdtRequest::ChangelogRegister(mdt::ChangelogRegister { name: name.map(Into::into) })).await {
            Ok(MdtReply::ChangelogUser(u)) => u.id,
            r => panic!("register replied {r:?}"),
        }
    }

    async fn records(env: &Env, start: u64) -> Vec<ChangelogRecord> {
        match env.req(MdtRequest::ChangelogRead(mdt::ChangelogRead { start, end: 0, max: 100 })).await {
            Ok(MdtReply::ChangelogRecords(r)) => r,
            r => panic!("read replied {r:?}"),
        }
    }

    async fn users(env: &Env) -> ChangelogUsers {
        match env.req(MdtRequest::ChangelogUsersList(mdt::ChangelogUsersList {})).await {
            Ok(MdtReply::ChangelogUsers(u)) => u,
            r => panic!("users replied {r:?}"),
        }
    }

    fn kinds(r: &[ChangelogRecord]) -> Vec<(ChangelogType, String)> {
        r.iter().map(|r| (r.kind, String::from_utf8_lossy(&r.name).into_owned())).collect()
    }

    #[tokio::test]
    async fn nothing_is_recorded_until_a_reader_registers_then_every_change_in_order() {
        let env = Env::new().await;
        env.must_mkdir(Fid::ROOT, "before").await;
        assert_eq!(register(&env, None).await, "cl1");
        assert!(records(&env, 0).await.is_empty(), "changes before the first reader are not recorded");
        let d = env.must_mkdir(Fid::ROOT, "d").await;
        let f = env.must_file(d, "f").await;
        env.req(MdtRequest::Link(mdt::Link { fid: f, parent: d, name: "g".into() })).await.unwrap();
        let set = SetAttr { mode: Some(0o600), ..Default::default() };
        env.req(MdtRequest::Setattr(mdt::Setattr { fid: f, set, open_handle: None })).await.unwrap();
        let rename =
            mdt::Rename { src_parent: d, src_name: "g".into(), dst_parent: Fid::ROOT, dst_name: "h".into(), flags: 0 };
        env.req(MdtRequest::Rename(rename)).await.unwrap();
        env.req(MdtRequest::Unlink(mdt::Unlink { parent: d, name: "f".into() })).await.unwrap();
        env.req(MdtRequest::Unlink(mdt::Unlink { parent: Fid::ROOT, name: "h".into() })).await.unwrap();
        env.req(MdtRequest::Rmdir(mdt::Rmdir { parent: Fid::ROOT, name: "d".into() })).await.unwrap();
        // A failed op records nothing.
        assert_eq!(
            code(env.req(MdtRequest::Rmdir(mdt::Rmdir { parent: Fid::ROOT, name: "d".into() })).await),
            ErrorCode::NotFound
        );
        let r = records(&env, 0).await;
        use ChangelogType::*;
        let want = [
            (Mkdir, "d"),
            (Create, "f"),
            (Close, ""),
            (Hardlink, "g"),
            (Setattr, ""),
            (Rename, "h"),
            (Unlink, "f"),
            (Unlink, "h"),
            (Rmdir, "d"),
        ];
        assert_eq!(kinds(&r), want.map(|(k, n)| (k, n.to_string())));
        assert_eq!(r.iter().map(|r| r.index).collect::<Vec<_>>(), (1..=9).collect::<Vec<_>>());
        assert_eq!((r[0].target, r[0].parent, r[0].jobid.as_str(), r[0].uid), (d, Some(Fid::ROOT), "test", 0));
        assert_eq!(r[5].source, Some((f, d, b"g".to_vec())), "a rename names its source");
        assert_eq!((r[6].flags, r[7].flags), (0, CLF_LAST), "the second unlink removed the last link");
        assert!(r[1].line().starts_with("2 01CREAT "), "{}", r[1].line());
    }

    #[tokio::test]
    async fn records_stay_until_every_reader_cleared_them_and_survive_a_restart() {
        let mut env = Env::new().await;
        let a = register(&env, None).await;
        let b = register(&env, Some("policy")).await;
        assert_eq!(b, "cl2-policy");
        for i in 0..5 {
            env.must_mkdir(Fid::ROOT, &format!("d{i}")).await;
        }
        let clear = |id: &str, end| MdtRequest::ChangelogClear(mdt::ChangelogClear { id: id.into(), end });
        env.req(clear(&a, 3)).await.unwrap();
        assert_eq!(code(env.req(clear(&a, 99)).await), ErrorCode::Invalid, "past the last record");
        assert_eq!(code(env.req(clear("cl9", 1)).await), ErrorCode::NotFound);
        assert_eq!(code(env.req(clear("cl2-other", 1)).await), ErrorCode::NotFound, "the name must match");
        // b has cleared nothing, so all five stay.
        purge(&env).await;
        assert_eq!(records(&env, 0).await.len(), 5);
        env.req(clear(&b, 0)).await.unwrap();
        purge(&env).await;
        assert_eq!(records(&env, 0).await.len(), 2, "records 1-3 cleared by both readers go, 4-5 stay for cl1");
        let u = users(&env).await;
        assert_eq!((u.current_index, u.records, u.users.len()), (5, 2, 2));
        assert_eq!((u.users[0].id.as_str(), u.users[0].cleared), ("cl1", 3));
        env.restart().await;
        assert_eq!(records(&env, 0).await.iter().map(|r| r.index).collect::<Vec<_>>(), [4, 5]);
        env.must_mkdir(Fid::ROOT, "after").await;
        assert_eq!(records(&env, 6).await.len(), 1, "still recording after the restart: readers are durable");
        // The last reader leaves: recording stops and the records go.
        for id in [&a, &b] {
            env.req(MdtRequest::ChangelogDeregister(mdt::ChangelogDeregister { id: id.clone() })).await.unwrap();
        }
        env.must_mkdir(Fid::ROOT, "unrecorded").await;
        purge(&env).await;
        assert!(records(&env, 0).await.is_empty());
        assert_eq!(register(&env, None).await, "cl3", "reader numbers are not reused");
    }

    #[tokio::test]
    async fn a_reader_registered_right_after_the_last_one_left_gets_every_record() {
        let env = Env::new().await;
        let a = register(&env, None).await;
        env.req(MdtRequest::ChangelogDeregister(mdt::ChangelogDeregister { id: a })).await.unwrap();
        register(&env, None).await;
        env.must_mkdir(Fid::ROOT, "x").await;
        // The purges that the two changes asked for run and must not stop the recording for
        // the new reader.
        purge(&env).await;
        purge(&env).await;
        env.must_mkdir(Fid::ROOT, "y").await;
        let names: Vec<String> =
            records(&env, 0).await.iter().map(|r| String::from_utf8_lossy(&r.name).into()).collect();
        assert_eq!(names, ["x", "y"]);
    }

    #[tokio::test]
    async fn only_root_registers_reads_and_clears() {
        let env = Env::new().await;
        let u = user(1000);
        let reg = MdtRequest::ChangelogRegister(mdt::ChangelogRegister { name: None });
        assert_eq!(code(env.req_as(&u, reg).await), ErrorCode::Perm);
        let read = MdtRequest::ChangelogRead(mdt::ChangelogRead { start: 0, end: 0, max: 10 });
        assert_eq!(code(env.req_as(&u, read).await), ErrorCode::Perm);
        let bad = MdtRequest::ChangelogRegister(mdt::ChangelogRegister { name: Some("a b".into()) });
        assert_eq!(code(env.req(bad).await), ErrorCode::Invalid);
        register(&env, Some("x")).await;
        let again = MdtRequest::ChangelogRegister(mdt::ChangelogRegister { name: Some("x".into()) });
        assert_eq!(code(env.req(again).await), ErrorCode::Exists);
    }
}
