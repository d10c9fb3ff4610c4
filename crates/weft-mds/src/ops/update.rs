//! A participant's part of changes that touch several MDTs (see `weft_proto::msg::update`
//! and dne.rs, the coordinator's part), and the ops of directories over MDTs.
//!
//! A prepared step is done at once, in one batch with the record of how to undo it
//! ([`crate::schema::PreparedStep`]): what a step changes is visible before the outcome, as
//! an unnamed new directory, a link count one lower, a directory that refuses new entries.
//! The outcome keeps it (and finishes what waited for it: the inode whose last name went is
//! destroyed) or undoes it. Undoing is by meaning (a link count one higher again, an entry
//! put back), so that a change made meanwhile by anyone else stays.

use super::{err, owner, show, validate_name, Mutation, OpCtx, Query, QueryCtx};
use crate::limits::LINKS_PER_INODE_MAX;
use crate::perm;
use crate::schema::{self, DirPlacement, InodeRecord, PreparedStep};
use weft_proto::msg::update::{DirStripeInfo, TxnState, Update, UpdateAnswer};
use weft_proto::msg::{mdt, FileType, Identity, InodeInfo};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

impl Mutation for mdt::UpdatePrepare {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<UpdateAnswer> {
        if let Some(done) = ctx.t.prepared_step(&self.txn, self.step)? {
            return Ok(done.answer); // A resend of a step prepared already.
        }
        if ctx.core.dne.resolved(&self.txn) {
            // A late copy of a step whose change is over: done again, nobody would resolve it.
            return Err(err(ErrorCode::Stale, format!("change {} is over", self.txn)));
        }
        if let Update::Export { fid, name, .. } = &self.update {
            // Another change waiting here for its outcome names the inode (a name in the
            // directory, its own name): what the export would take along could still be
            // undone or kept after it, on the old inode (the DNE simulation's seed 405: an
            // aborted rename's name, taken along by a directory's migration, stayed).
            if ctx.t.prepared_step_names(*fid, &self.txn)? {
                return Err(err(
                    ErrorCode::Busy,
                    format!(
                        "a change over several MDTs waiting for its outcome holds '{}'; migrate it again",
                        show(name)
                    ),
                ));
            }
        }
        let (answer, before) = prepare(ctx, &self.who, &self.update)?;
        if answer == UpdateAnswer::Same {
            return Ok(answer); // Nothing done, nothing to undo.
        }
        let prepared_secs = ctx.now.sec.max(0) as u64;
        let step =
            PreparedStep { txn: self.txn, update: self.update.clone(), answer: answer.clone(), before, prepared_secs };
        ctx.t.put_prepared_step(&self.txn, self.step, &step)?;
        Ok(answer)
    }
}

/// Checks, then does, one step for `who`; answers it with the inode as it was before (to
/// undo by).
fn prepare(ctx: &mut OpCtx<'_>, who: &Identity, update: &Update) -> WeftResult<(UpdateAnswer, Option<InodeRecord>)> {
    match update {
        Update::MakeDir { record, parent, name, master, stripe } => {
            let mut rec = schema::decode_inode(*parent, record)?;
            if rec.kind != FileType::Directory {
                return Err(WeftError::invalid("a distributed mkdir of something else than a directory"));
            }
            let admitted = super::quota::admit_inode(ctx.t, who, rec.quota_owner(), ctx.now)?;
            // Checks done: writes follow.
            admitted.write(ctx.t)?;
            let fid = ctx.t.next_inode_fid(ctx.core.mdt_index)?;
            rec.nlink = 2;
            rec.parent = Some(*parent);
            if let Some(m) = master {
                let placement = rec.placement.get_or_insert_with(Default::default);
                placement.master = Some(*m);
                placement.stripes = None;
                tracing::debug!(stripe, master = %m, %fid, "made a stripe of a striped directory");
            }
            ctx.t.put_inode(fid, &rec)?;
            if let Some(name) = name {
                ctx.t.add_link_row(fid, *parent, name)?;
            }
            Ok((UpdateAnswer::Made(Box::new(super::inode_info_with(fid, &rec, 0))), None))
        }
        Update::SetStripes { fid, stripes } => {
            let mut rec = ctx.t.must_dir(*fid)?;
            let before = rec.clone();
            rec.placement.get_or_insert_with(Default::default).stripes = Some(stripes.clone());
            ctx.t.put_inode(*fid, &rec)?;
            Ok((UpdateAnswer::Done, Some(before)))
        }
        Update::AddLink { fid, parent, name } => {
            let mut rec = ctx.t.must_inode(*fid)?;
            if rec.kind == FileType::Directory {
                return Err(err(ErrorCode::Perm, "hard links to directories are not allowed"));
            }
            let unnamed = rec.nlink == 0;
            if unnamed && ctx.core.open_files().counts(*fid).opens == 0 {
                return Err(err(ErrorCode::NotFound, format!("{fid} has been removed")));
            }
            if rec.nlink >= LINKS_PER_INODE_MAX {
                return Err(err(ErrorCode::TooManyLinks, format!("{fid} has {LINKS_PER_INODE_MAX} links already")));
            }
            let before = rec.clone();
            rec.nlink += 1;
            rec.ctime = ctx.now;
            ctx.t.put_inode(*fid, &rec)?;
            if unnamed {
                ctx.t.remove_orphan(*fid)?;
            }
            ctx.t.add_link_row(*fid, *parent, name)?;
            Ok((UpdateAnswer::Done, Some(before)))
        }
        Update::DropLink { fid, parent, name, sticky_dir_uid } => {
            let mut rec = ctx.t.must_inode(*fid)?;
            if rec.kind == FileType::Directory {
                return Err(err(ErrorCode::IsDir, format!("{fid} is a directory")));
            }
            if !ctx.t.has_link_row(*fid, *parent, name)? || rec.nlink == 0 {
                return Err(err(ErrorCode::NotFound, format!("{fid} has no name '{}' in {parent}", show(name))));
            }
            check_sticky(who, *sticky_dir_uid, &rec)?;
            let before = rec.clone();
            rec.nlink -= 1;
            rec.ctime = ctx.now;
            ctx.t.put_inode(*fid, &rec)?;
            ctx.t.remove_link_row(*fid, *parent, name)?;
            Ok((UpdateAnswer::Done, Some(before)))
        }
        Update::RemoveDir { fid, parent, sticky_dir_uid } => {
            let mut rec = ctx.t.must_dir(*fid)?;
            if rec.nlink == 0 {
                return Err(err(ErrorCode::NotFound, format!("directory {fid} was removed")));
            }
            check_sticky(who, *sticky_dir_uid, &rec)?;
            if !ctx.t.dir_is_empty(*fid)? {
                let what = parent.as_ref().map_or_else(|| fid.to_string(), |(_, n)| format!("'{}'", show(n)));
                return Err(err(ErrorCode::NotEmpty, format!("directory {what} is not empty")));
            }
            let before = rec.clone();
            // No link left: nothing is made in it from now on (check_new_entry).
            rec.nlink = 0;
            rec.ctime = ctx.now;
            ctx.t.put_inode(*fid, &rec)?;
            if let Some((p, n)) = parent {
                ctx.t.remove_link_row(*fid, *p, n)?;
            }
            Ok((UpdateAnswer::Done, Some(before)))
        }
        Update::AddEntry { parent, name, fid, kind, noreplace } => {
            let mut dir = ctx.t.must_dir(*parent)?;
            validate_name(name)?;
            perm::check_dir_write(who, owner(&dir))?;
            if dir.nlink == 0 {
                return Err(err(ErrorCode::NotFound, format!("directory {parent} was removed")));
            }
            if dir.stripes().is_some_and(|s| s.stripe_for(name) != *parent) {
                return Err(err(ErrorCode::WrongStripe, format!("'{}' is in another stripe of {parent}", show(name))));
            }
            if *kind == FileType::Directory {
                return Err(err(ErrorCode::CrossDevice, "a directory moves between MDTs only by migration"));
            }
            let existing = ctx.t.dentry(*parent, name)?;
            if let Some((old, old_kind)) = existing {
                if old == *fid {
                    return Ok((UpdateAnswer::Same, None)); // Another name of the same file.
                }
                if *noreplace {
                    return Err(err(ErrorCode::Exists, format!("'{}' exists already", show(name))));
                }
                if old_kind == FileType::Directory {
                    return Err(err(
                        ErrorCode::IsDir,
                        format!("cannot put a non-directory over directory '{}'", show(name)),
                    ));
                }
                if let Some(old_rec) = ctx.t.inode(old)? {
                    perm::check_sticky(who, owner(&dir), old_rec.uid)?;
                }
            }
            let sticky_dir_uid = (dir.mode & perm::S_ISVTX != 0).then_some(dir.uid);
            let before = dir.clone();
            // The name's old file keeps its reverse link until its own step drops it.
            if existing.is_some() {
                ctx.t.remove_dentry(*parent, name)?;
            }
            ctx.t.add_entry(*parent, name, *fid, *kind)?;
            super::touch_dir(&mut dir, ctx.now);
            ctx.t.put_inode(*parent, &dir)?;
            Ok((UpdateAnswer::Replaced { entry: existing, sticky_dir_uid }, Some(before)))
        }
        Update::Export { fid, parent, name } => {
            let exported = super::migrate::export(ctx, *fid, *parent, name)?;
            Ok((UpdateAnswer::Exported(Box::new(exported)), None))
        }
        Update::Import { exported, parent, name } => {
            let (fid, rec) = super::migrate::import(ctx, exported, *parent, name)?;
            Ok((UpdateAnswer::Made(Box::new(super::inode_info_with(fid, &rec, 0))), None))
        }
        Update::MoveLinks { from, to, children } => {
            super::migrate::move_links(ctx, *from, *to, children)?;
            Ok((UpdateAnswer::Done, None))
        }
    }
}

fn check_sticky(who: &Identity, sticky_dir_uid: Option<u32>, rec: &InodeRecord) -> WeftResult<()> {
    match sticky_dir_uid {
        Some(dir_uid) => {
            perm::check_sticky(who, perm::Owner { uid: dir_uid, gid: 0, mode: perm::S_ISVTX, acl: None }, rec.uid)
        }
        None => Ok(()),
    }
}

impl Mutation for mdt::UpdateResolve {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<()> {
        resolve(ctx, &self.txn, self.commit)
    }
}

/// Keeps (commit) or undoes every step of `txn` prepared here, the last first; nothing
/// for a change resolved already.
pub fn resolve(ctx: &mut OpCtx<'_>, txn: &weft_proto::msg::update::TxnId, commit: bool) -> WeftResult<()> {
    ctx.core.dne.note_resolved(*txn);
    let mut steps = ctx.t.prepared_steps_of(txn)?;
    steps.reverse();
    for (step, prepared) in steps {
        if commit {
            keep(ctx, &prepared)?;
        } else {
            undo(ctx, &prepared)?;
        }
        ctx.t.remove_prepared_step(txn, step)?;
    }
    Ok(())
}

/// What a kept step finishes: the file whose last name went, the removed directory.
fn keep(ctx: &mut OpCtx<'_>, prepared: &PreparedStep) -> WeftResult<()> {
    match &prepared.update {
        Update::DropLink { fid, .. } => {
            if let Some(rec) = ctx.t.inode(*fid)? {
                if rec.nlink == 0 {
                    if ctx.core.open_files().counts(*fid).opens > 0 {
                        ctx.t.add_orphan(*fid)?;
                    } else {
                        ctx.t.destroy_inode(*fid, &rec)?;
                    }
                }
            }
        }
        Update::RemoveDir { fid, .. } => {
            if let Some(rec) = ctx.t.inode(*fid)? {
                ctx.t.destroy_inode(*fid, &rec)?;
            }
        }
        // The inode went to another MDT: forgotten here, its objects kept (the new inode
        // has them).
        Update::Export { fid, .. } => {
            super::migrate::forget(ctx, *fid)?;
            ctx.core.dne.note_moved(*fid);
        }
        Update::MakeDir { .. }
        | Update::SetStripes { .. }
        | Update::AddLink { .. }
        | Update::AddEntry { .. }
        | Update::Import { .. }
        | Update::MoveLinks { .. } => {}
    }
    Ok(())
}

fn undo(ctx: &mut OpCtx<'_>, prepared: &PreparedStep) -> WeftResult<()> {
    match (&prepared.update, &prepared.answer) {
        (Update::MakeDir { parent, name, .. }, UpdateAnswer::Made(made)) => {
            let fid = made.attr.fid;
            if let Some(rec) = ctx.t.inode(fid)? {
                if let Some(name) = name {
                    ctx.t.remove_link_row(fid, *parent, name)?;
                }
                ctx.t.destroy_inode(fid, &rec)?;
            }
        }
        (Update::SetStripes { fid, .. }, _) => {
            if let Some(mut rec) = ctx.t.inode(*fid)? {
                let was = prepared.before.as_ref().and_then(|b| b.stripes().cloned());
                rec.placement.get_or_insert_with(Default::default).stripes = was;
                ctx.t.put_inode(*fid, &rec)?;
            }
        }
        (Update::AddLink { fid, parent, name }, _) => {
            if let Some(mut rec) = ctx.t.inode(*fid)? {
                ctx.t.remove_link_row(*fid, *parent, name)?;
                rec.nlink = rec.nlink.saturating_sub(1);
                if rec.nlink == 0 && ctx.core.open_files().counts(*fid).opens == 0 {
                    ctx.t.destroy_inode(*fid, &rec)?;
                } else {
                    if rec.nlink == 0 {
                        ctx.t.add_orphan(*fid)?;
                    }
                    ctx.t.put_inode(*fid, &rec)?;
                }
            }
        }
        (Update::DropLink { fid, parent, name, .. }, _) => {
            if let Some(mut rec) = ctx.t.inode(*fid)? {
                rec.nlink += 1;
                ctx.t.put_inode(*fid, &rec)?;
                ctx.t.add_link_row(*fid, *parent, name)?;
            }
        }
        (Update::RemoveDir { fid, parent, .. }, _) => {
            if let (Some(mut rec), Some(before)) = (ctx.t.inode(*fid)?, &prepared.before) {
                rec.nlink = before.nlink;
                ctx.t.put_inode(*fid, &rec)?;
                if let Some((p, n)) = parent {
                    ctx.t.add_link_row(*fid, *p, n)?;
                }
            }
        }
        (Update::AddEntry { parent, name, fid, .. }, UpdateAnswer::Replaced { entry: replaced, .. }) => {
            if ctx.t.dentry(*parent, name)?.is_some_and(|(f, _)| f == *fid) {
                ctx.t.remove_entry(*parent, name, *fid)?;
                if let Some((old, kind)) = replaced {
                    // The old file's reverse link stayed: the entry alone comes back.
                    ctx.t.put_dentry(*parent, name, *old, *kind)?;
                }
            }
        }
        // An export changed nothing before its outcome.
        (Update::Export { .. }, _) => {}
        (Update::Import { .. }, UpdateAnswer::Made(made)) => super::migrate::forget(ctx, made.attr.fid)?,
        (Update::MoveLinks { from, to, children }, _) => super::migrate::move_links(ctx, *to, *from, children)?,
        (update, answer) => {
            return Err(WeftError::io(format!("a prepared step {update:?} with answer {answer:?} cannot be undone")));
        }
    }
    Ok(())
}

impl Query for mdt::TxnOutcome {
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<TxnState> {
        // Running first, then the newest state: a change that ends between the two has its
        // commit record published by then (the commit is published before it ends).
        let mine = self.txn.coordinator == q.core.mdt_index && self.txn.start == q.core.mds_start;
        if mine && q.core.dne.running(self.txn.seq) {
            return Ok(TxnState::Running);
        }
        if q.core.read_view().committed_txn(&self.txn)?.is_some() {
            return Ok(TxnState::Committed);
        }
        Ok(TxnState::Aborted)
    }
}

impl Query for mdt::GetDirStripe {
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<DirStripeInfo> {
        let rec = q.t.must_dir(self.fid)?;
        let placement = rec.placement.as_deref().cloned().unwrap_or_default();
        Ok(DirStripeInfo { mdt: q.core.mdt_index, stripes: placement.stripes, default: placement.default })
    }
}

impl Mutation for mdt::SetDirStripe {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<()> {
        let mut rec = ctx.t.must_dir(self.fid)?;
        if !perm::is_root(ctx.who) && ctx.who.uid != rec.uid {
            return Err(err(ErrorCode::Perm, "only the directory's owner or root may set its default placement"));
        }
        if let Some(spec) = &self.default {
            check_spec(ctx.core, spec)?;
        }
        let placement = rec.placement.get_or_insert_with(Default::default);
        placement.default = self.default;
        if *placement.as_ref() == DirPlacement::default() {
            rec.placement = None;
        }
        rec.ctime = ctx.now;
        ctx.t.put_inode(self.fid, &rec)
    }
}

/// A placement the file system can give: its MDTs exist, its count is within them.
pub fn check_spec(core: &crate::Core, spec: &weft_proto::dirstripe::DirStripeSpec) -> WeftResult<()> {
    let mdts = core.dne.mdts();
    spec.place(&mdts, core.mdt_index, core.mdt_index).map(drop).map_err(WeftError::invalid)
}

impl Mutation for mdt::SyncStripe {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<()> {
        let master = schema::decode_inode(self.fid, &self.record)?;
        let Some(mut rec) = ctx.t.inode(self.fid)? else { return Ok(()) };
        // What names in a stripe are checked against and what new entries take.
        rec.mode = master.mode;
        rec.uid = master.uid;
        rec.gid = master.gid;
        rec.acl = master.acl;
        rec.default_acl = master.default_acl;
        rec.dir_default = master.dir_default;
        rec.projid = master.projid;
        rec.proj_inherit = master.proj_inherit;
        if let Some(p) = rec.placement.as_mut() {
            p.default = master.placement.as_ref().and_then(|m| m.default);
        }
        rec.ctime = ctx.now;
        ctx.t.put_inode(self.fid, &rec)
    }
}

impl Mutation for mdt::MkdirStriped {
    /// Reaches the writer only when the placement is this MDT alone (dne.rs coordinates
    /// the others): a plain directory.
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<InodeInfo> {
        let mdts = ctx.core.dne.mdts();
        let at = self.spec.place(&mdts, ctx.core.mdt_index, ctx.core.mdt_index).map_err(WeftError::invalid)?;
        if at != [ctx.core.mdt_index] {
            return Err(WeftError::invalid(format!("a directory on MDTs {at:?} is made by its coordinator")));
        }
        super::mkdir::mkdir(ctx, self.parent, &self.name, self.mode, self.umask)
    }
}

/// The inode of a stripe or master, as its answer shows it.
pub fn made_fid(answer: &UpdateAnswer) -> WeftResult<Fid> {
    match answer {
        UpdateAnswer::Made(info) => Ok(info.attr.fid),
        other => Err(WeftError::protocol(format!("a directory's making answered {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use crate::schema::{encode_inode, InodeRecord};
    use weft_proto::msg::update::{TxnId, Update, UpdateAnswer};
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    /// A step as another MDS sends it: no reply slot, the step's own record makes a resend
    /// harmless.
    async fn step(env: &Env, txn: TxnId, step: u32, update: Update) -> weft_proto::WeftResult<UpdateAnswer> {
        let header = RequestHeader { request_id: 0, reply_slot: 0, ..env.header_as(&Identity::root()) };
        let req = mdt::UpdatePrepare { txn, step, update, who: Identity::root() }.into();
        match env.mds().handle(&header, req, Run::Inline).await? {
            MdtReply::Update(a) => Ok(a),
            other => panic!("a step answered {other:?}"),
        }
    }

    async fn resolve(env: &Env, txn: TxnId, commit: bool) {
        env.req(mdt::UpdateResolve { txn, commit }.into()).await.unwrap();
    }

    fn new_dir() -> Vec<u8> {
        encode_inode(&InodeRecord::new(FileType::Directory, 0o755, 0, 0, crate::now()))
    }

    async fn path_of(env: &Env, fid: Fid) -> String {
        match env.req(mdt::Fid2Path { fid }.into()).await.unwrap() {
            MdtReply::Data(p) => String::from_utf8(p).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    /// An export waits for the outcome of another change with a step here that names the
    /// inode: a directory holding a name a rename's step added is not exported until that
    /// rename is resolved (else the name would travel, and stay when the rename aborts).
    #[tokio::test]
    async fn an_export_waits_for_the_outcome_of_a_step_naming_the_inode() {
        let env = Env::new().await;
        let d = env.must_mkdir(Fid::ROOT, "d").await;
        let remote = Fid { seq: Fid::ROOT.seq + (1 << 20), oid: 9, ver: 0 };
        let rename = TxnId { coordinator: 1, start: 9, seq: 1 };
        let add =
            Update::AddEntry { parent: d, name: b"r".to_vec(), fid: remote, kind: FileType::Regular, noreplace: false };
        step(&env, rename, 0, add).await.unwrap();
        let migrate = TxnId { coordinator: 0, start: 9, seq: 2 };
        let export = Update::Export { fid: d, parent: Fid::ROOT, name: b"d".to_vec() };
        assert_eq!(code(step(&env, migrate, 0, export.clone()).await), ErrorCode::Busy);
        resolve(&env, rename, false).await;
        let UpdateAnswer::Exported(exported) = step(&env, migrate, 0, export).await.unwrap() else {
            panic!("an export answers what leaves")
        };
        assert!(exported.entries.is_empty(), "the aborted rename's name is gone: {:?}", exported.entries);
    }

    /// A migration's steps (here both ends on one MDT): an export refuses what may not
    /// leave and changes nothing; an import makes the inode anew with its extended
    /// attributes and entries; the children's reverse links move. Undone, all is as it
    /// was; kept, the old inode is forgotten and its objects are not destroyed.
    #[tokio::test]
    async fn a_migration_is_undone_to_what_was_or_kept_without_destroying_objects() {
        let env = Env::new().await;
        let d = env.must_mkdir(Fid::ROOT, "d").await;
        let x = env.must_file(d, "x").await;
        let sub = env.must_mkdir(d, "sub").await;
        let xattr = mdt::SetXattr { fid: d, name: b"user.k".to_vec(), value: b"v".to_vec(), flags: 0 };
        env.req(xattr.into()).await.unwrap();
        let (opened, handle) = env.create_as(&Identity::root(), Fid::ROOT, "open", 0o644).await.unwrap();
        let txn = TxnId { coordinator: 0, start: 9, seq: 1 };
        let export = |fid, name: &str| Update::Export { fid, parent: Fid::ROOT, name: name.as_bytes().to_vec() };
        let refused = step(&env, txn, 0, export(opened.attr.fid, "open")).await;
        assert_eq!(code(refused), ErrorCode::Busy, "an open file stays");
        env.must_close(opened.attr.fid, handle, None).await;

        for commit in [false, true] {
            let txn = TxnId { coordinator: 0, start: 9, seq: 2 + u64::from(commit) };
            let UpdateAnswer::Exported(exported) = step(&env, txn, 0, export(d, "d")).await.unwrap() else {
                panic!("an export answers what leaves")
            };
            assert_eq!(exported.entries.len(), 2);
            assert_eq!(exported.xattrs, vec![(b"user.k".to_vec(), b"v".to_vec())]);
            let import = Update::Import { exported, parent: Fid::ROOT, name: b"d".to_vec() };
            let UpdateAnswer::Made(made) = step(&env, txn, 1, import).await.unwrap() else { panic!() };
            let new = made.attr.fid;
            assert_eq!((made.attr.kind, made.attr.nlink), (FileType::Directory, 3));
            let children = vec![(x, b"x".to_vec()), (sub, b"sub".to_vec())];
            step(&env, txn, 2, Update::MoveLinks { from: d, to: new, children }).await.unwrap();
            assert_eq!(env.sorted_names(new).await, ["sub", "x"]);
            resolve(&env, txn, commit).await;
            if !commit {
                assert_eq!(code(env.getattr(new).await), ErrorCode::NotFound, "the import is undone");
                assert_eq!(path_of(&env, x).await, "d/x");
                assert_eq!(path_of(&env, sub).await, "d/sub");
                assert_eq!(env.sorted_names(d).await, ["sub", "x"]);
                continue;
            }
            // Kept: the old inode is forgotten (the coordinator's commit names the new one).
            assert_eq!(code(env.getattr(d).await), ErrorCode::NotFound);
            assert_eq!(env.sorted_names(new).await, ["sub", "x"]);
            match env.req(mdt::GetXattr { fid: new, name: b"user.k".to_vec() }.into()).await.unwrap() {
                MdtReply::Data(v) => assert_eq!(v, b"v"),
                other => panic!("{other:?}"),
            }
            assert_eq!(env.targets.destroyed(), vec![], "no object was destroyed");
        }
    }

    #[tokio::test]
    async fn steps_are_undone_by_their_meaning_or_kept_and_a_resend_does_nothing_twice() {
        let env = Env::new().await;
        let txn = TxnId { coordinator: 1, start: 7, seq: 1 };
        let make = Update::MakeDir {
            record: new_dir(),
            parent: Fid::ROOT,
            name: Some(b"r".to_vec()),
            master: None,
            stripe: 0,
        };
        let made = step(&env, txn, 0, make.clone()).await.unwrap();
        assert_eq!(step(&env, txn, 0, make).await.unwrap(), made, "a resent step answers as the first");
        let UpdateAnswer::Made(info) = &made else { panic!("{made:?}") };
        let dir = info.attr.fid;
        assert_eq!(env.must_attr(dir).await.nlink, 2);
        let f = env.must_file(Fid::ROOT, "f").await;
        step(&env, txn, 1, Update::DropLink { fid: f, parent: Fid::ROOT, name: b"f".to_vec(), sticky_dir_uid: None })
            .await
            .unwrap();
        assert_eq!(env.must_attr(f).await.nlink, 0);
        // Abort: the new directory goes, the link comes back.
        resolve(&env, txn, false).await;
        assert_eq!(code(env.getattr(dir).await), ErrorCode::NotFound);
        assert_eq!(env.must_attr(f).await.nlink, 1);
        resolve(&env, txn, false).await; // Resolved already: nothing.
        assert_eq!(env.must_attr(f).await.nlink, 1);

        // Commit: the file whose last name went is destroyed; an empty directory goes, and
        // nothing can be made in it once its removal is prepared.
        let txn = TxnId { coordinator: 1, start: 7, seq: 2 };
        let d = env.must_mkdir(Fid::ROOT, "d").await;
        env.must_file(d, "inside").await;
        let refused = step(&env, txn, 0, Update::RemoveDir { fid: d, parent: None, sticky_dir_uid: None }).await;
        assert_eq!(code(refused), ErrorCode::NotEmpty);
        env.req(mdt::Unlink { parent: d, name: b"inside".to_vec() }.into()).await.unwrap();
        step(&env, txn, 0, Update::RemoveDir { fid: d, parent: None, sticky_dir_uid: None }).await.unwrap();
        assert_eq!(code(env.create_as(&Identity::root(), d, "late", 0o644).await), ErrorCode::NotFound);
        step(&env, txn, 1, Update::DropLink { fid: f, parent: Fid::ROOT, name: b"f".to_vec(), sticky_dir_uid: None })
            .await
            .unwrap();
        resolve(&env, txn, true).await;
        assert_eq!(code(env.getattr(d).await), ErrorCode::NotFound);
        assert_eq!(code(env.getattr(f).await), ErrorCode::NotFound);
    }

    /// A coordinator that died before its commit left only prepared steps: the MDT asks it
    /// (here, itself under a start that is over) and undoes them.
    #[tokio::test]
    async fn steps_of_a_coordinator_that_is_gone_are_asked_for_and_undone() {
        let env = Env::new().await;
        let gone = TxnId { coordinator: 0, start: 1, seq: 9 };
        let make = Update::MakeDir {
            record: new_dir(),
            parent: Fid::ROOT,
            name: Some(b"x".to_vec()),
            master: None,
            stripe: 0,
        };
        let UpdateAnswer::Made(info) = step(&env, gone, 0, make).await.unwrap() else { panic!() };
        assert_eq!(
            env.req(mdt::TxnOutcome { txn: gone }.into()).await.unwrap(),
            MdtReply::Txn(update::TxnState::Aborted)
        );
        let start = std::time::Instant::now();
        while env.getattr(info.attr.fid).await.is_ok() {
            assert!(start.elapsed() < std::time::Duration::from_secs(20), "the prepared directory was never undone");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }
}
