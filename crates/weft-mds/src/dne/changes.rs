//! The distributed changes, each as its coordinator runs it: what it prepares where and
//! what it commits here.

use super::txn::Txn;
use super::Plan;
use crate::ops::{self, OpCtx};
use crate::schema::{self, InodeRecord};
use crate::writer::Apply;
use std::sync::Arc;
use weft_proto::dirstripe::DirStripes;
use weft_proto::msg::changelog::ChangelogType;
use weft_proto::msg::update::{Update, UpdateAnswer};
use weft_proto::msg::{FileType, InodeInfo, MdtReply, MdtRequest, Run};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

impl Txn<'_> {
    pub(super) async fn run(&mut self, plan: Plan, req: MdtRequest, run: Run) -> WeftResult<MdtReply> {
        match plan {
            Plan::Local => unreachable!("a local change is not distributed"),
            Plan::MakeDir { parent, name, mode, umask, at, hash } => {
                self.make_dir(req, run, parent, name, mode, umask, at, hash).await
            }
            Plan::RemoveDir { parent, name, fid } => self.remove_dir(req, run, parent, name, fid).await,
            Plan::Unlink { parent, name, fid } => self.unlink(req, run, parent, name, fid).await,
            Plan::Link { fid, parent, name } => self.link(req, run, fid, parent, name).await,
            Plan::Rename { src_parent, src_name, dst_parent, dst_name, noreplace, fid, kind } => {
                self.rename(req, run, (src_parent, src_name), (dst_parent, dst_name), noreplace, fid, kind).await
            }
            Plan::Migrate { parent, name, fid, kind, to } => self.migrate(req, run, parent, name, fid, kind, to).await,
            Plan::Migrated { fid } => Ok(MdtReply::Inode(self.getattr(fid).await?)),
        }
    }

    /// An inode moves to MDT `to`: exported by its MDT, imported there under a new FID,
    /// its children's reverse links moved (a directory), the name here changed to lead to
    /// it; its old MDT forgets it at the commit.
    #[allow(clippy::too_many_arguments)]
    async fn migrate(
        &mut self,
        req: MdtRequest,
        run: Run,
        parent: Fid,
        name: Vec<u8>,
        fid: Fid,
        kind: FileType,
        to: u32,
    ) -> WeftResult<MdtReply> {
        let exported = match self.prepare(fid.mdt_index(), Update::Export { fid, parent, name: name.clone() }).await? {
            UpdateAnswer::Exported(e) => e,
            other => return Err(WeftError::protocol(format!("an export answered {other:?}"))),
        };
        let mut children: std::collections::BTreeMap<u32, Vec<(Fid, Vec<u8>)>> = Default::default();
        for (entry, child, _) in &exported.entries {
            children.entry(child.mdt_index()).or_default().push((*child, entry.clone()));
        }
        let made = self.prepare(to, Update::Import { exported, parent, name: name.clone() }).await?;
        let new = ops::update::made_fid(&made)?;
        let info = match made {
            UpdateAnswer::Made(info) => *info,
            _ => unreachable!("made_fid checked"),
        };
        for (mdt, list) in children {
            for chunk in list.chunks(crate::limits::MIGRATE_LINKS_PER_STEP) {
                self.prepare(mdt, Update::MoveLinks { from: fid, to: new, children: chunk.to_vec() }).await?;
            }
        }
        let part: Apply = Arc::new(move |ctx: &mut OpCtx<'_>| {
            ctx.t.must_dir(parent)?;
            expect_entry(ctx, parent, &name, fid)?;
            // Checks done: writes follow. The reverse links are the MDTs' (moved by the steps).
            ctx.t.remove_dentry(parent, &name)?;
            ctx.t.put_dentry(parent, &name, new, kind)?;
            ctx.record(ChangelogType::Migrate, 0, new, Some((parent, &name)))?;
            Ok(MdtReply::Inode(info.clone()))
        });
        self.commit(req, run, part).await
    }

    /// A directory on another MDT, or striped over several: the master made where its
    /// stripe 0 goes (named, its reverse link there), each further stripe on its MDT
    /// (unnamed), then the master told its stripes; the name here.
    #[allow(clippy::too_many_arguments)]
    async fn make_dir(
        &mut self,
        req: MdtRequest,
        run: Run,
        parent: Fid,
        name: Vec<u8>,
        mode: u32,
        umask: u32,
        at: Vec<u32>,
        hash: weft_proto::dirstripe::DirHash,
    ) -> WeftResult<MdtReply> {
        let record = {
            let t = self.mds.core.read_view();
            let dir = ops::check_new_name(&t, &self.header.identity, parent, &name)?;
            if dir.nlink >= crate::limits::LINKS_PER_INODE_MAX {
                return Err(WeftError::new(
                    ErrorCode::TooManyLinks,
                    format!("directory {parent} has too many subdirectories"),
                ));
            }
            let mut rec = ops::new_record(FileType::Directory, mode, umask, &self.header.identity, &dir, crate::now());
            rec.dir_default = dir.dir_default.clone();
            // New subdirectories keep the parent's default placement, as Lustre's do.
            if let Some(default) = dir.placement.as_ref().and_then(|p| p.default) {
                rec.placement = Some(Box::new(schema::DirPlacement { default: Some(default), ..Default::default() }));
            }
            rec
        };
        let encoded = schema::encode_inode(&record);
        let made = self
            .prepare(
                at[0],
                Update::MakeDir { record: encoded.clone(), parent, name: Some(name.clone()), master: None, stripe: 0 },
            )
            .await?;
        let master = ops::update::made_fid(&made)?;
        let mut info = match made {
            UpdateAnswer::Made(info) => *info,
            _ => unreachable!("made_fid checked"),
        };
        if at.len() > 1 {
            let mut fids = vec![master];
            for (i, mdt) in at.iter().enumerate().skip(1) {
                let stripe = Update::MakeDir {
                    record: encoded.clone(),
                    parent,
                    name: None,
                    master: Some(master),
                    stripe: i as u32,
                };
                fids.push(ops::update::made_fid(&self.prepare(*mdt, stripe).await?)?);
            }
            let stripes = DirStripes { hash, fids };
            self.prepare(at[0], Update::SetStripes { fid: master, stripes: stripes.clone() }).await?;
            info.stripes = Some(Box::new(stripes));
        }
        let part: Apply = Arc::new(move |ctx: &mut OpCtx<'_>| {
            let mut dir = ops::check_new_entry(ctx, parent, &name)?;
            if dir.nlink >= crate::limits::LINKS_PER_INODE_MAX {
                return Err(WeftError::new(
                    ErrorCode::TooManyLinks,
                    format!("directory {parent} has too many subdirectories"),
                ));
            }
            // Checks done: writes follow.
            ctx.t.add_entry(parent, &name, master, FileType::Directory)?;
            dir.nlink += 1;
            ops::touch_dir(&mut dir, ctx.now);
            ctx.t.put_inode(parent, &dir)?;
            ctx.record(ChangelogType::Mkdir, 0, master, Some((parent, &name)))?;
            Ok(MdtReply::Inode(info.clone()))
        });
        self.commit(req, run, part).await
    }

    /// A directory on another MDT or striped: every stripe must be empty; each refuses new
    /// entries from its prepare on, and goes at the commit; the name goes here.
    async fn remove_dir(
        &mut self,
        req: MdtRequest,
        run: Run,
        parent: Fid,
        name: Vec<u8>,
        fid: Fid,
    ) -> WeftResult<MdtReply> {
        let sticky = self.removal_checks(parent, &name)?;
        let stripes = match fid.mdt_index() == self.mds.core.mdt_index {
            true => self.mds.core.read_view().inode(fid)?.and_then(|r| r.stripes().cloned()),
            false => self.getattr(fid).await?.stripes.map(|s| *s),
        };
        for stripe in stripes.iter().flat_map(|s| s.fids.iter().skip(1)) {
            self.prepare(stripe.mdt_index(), Update::RemoveDir { fid: *stripe, parent: None, sticky_dir_uid: sticky })
                .await?;
        }
        let master = Update::RemoveDir { fid, parent: Some((parent, name.clone())), sticky_dir_uid: sticky };
        self.prepare(fid.mdt_index(), master).await?;
        let part: Apply = Arc::new(move |ctx: &mut OpCtx<'_>| {
            let mut dir = ctx.t.must_dir(parent)?;
            expect_entry(ctx, parent, &name, fid)?;
            // Checks done: writes follow.
            ctx.t.remove_entry(parent, &name, fid)?;
            dir.nlink = dir.nlink.saturating_sub(1).max(2);
            ops::touch_dir(&mut dir, ctx.now);
            ctx.t.put_inode(parent, &dir)?;
            ctx.record(ChangelogType::Rmdir, 0, fid, Some((parent, &name)))?;
            Ok(MdtReply::Empty)
        });
        self.commit(req, run, part).await
    }

    /// The checks of a name's removal this MDT can make (its directory); answers the
    /// directory's owner when it is sticky, for the MDT of the inode to check.
    fn removal_checks(&self, parent: Fid, name: &[u8]) -> WeftResult<Option<u32>> {
        let t = self.mds.core.read_view();
        let dir = t.must_dir(parent)?;
        ops::validate_name(name)?;
        crate::perm::check_dir_write(&self.header.identity, ops::owner(&dir))?;
        Ok((dir.mode & crate::perm::S_ISVTX != 0).then_some(dir.uid))
    }

    /// A name of a file on another MDT: the file drops a link there (and goes at the
    /// commit if it was its last), the name goes here.
    async fn unlink(
        &mut self,
        req: MdtRequest,
        run: Run,
        parent: Fid,
        name: Vec<u8>,
        fid: Fid,
    ) -> WeftResult<MdtReply> {
        let sticky = self.removal_checks(parent, &name)?;
        self.prepare(fid.mdt_index(), Update::DropLink { fid, parent, name: name.clone(), sticky_dir_uid: sticky })
            .await?;
        let part: Apply = Arc::new(move |ctx: &mut OpCtx<'_>| {
            let mut dir = ctx.t.must_dir(parent)?;
            expect_entry(ctx, parent, &name, fid)?;
            ctx.t.remove_entry(parent, &name, fid)?;
            ops::touch_dir(&mut dir, ctx.now);
            ctx.t.put_inode(parent, &dir)?;
            ctx.record(ChangelogType::Unlink, 0, fid, Some((parent, &name)))?;
            Ok(MdtReply::Empty)
        });
        self.commit(req, run, part).await
    }

    /// A hard link here to a file on another MDT.
    async fn link(&mut self, req: MdtRequest, run: Run, fid: Fid, parent: Fid, name: Vec<u8>) -> WeftResult<MdtReply> {
        {
            let t = self.mds.core.read_view();
            ops::check_new_name(&t, &self.header.identity, parent, &name)?;
        }
        let file = self.getattr(fid).await?;
        let kind = file.attr.kind;
        self.check_project(parent, &file)?;
        self.prepare(fid.mdt_index(), Update::AddLink { fid, parent, name: name.clone() }).await?;
        let mut linked = file;
        linked.attr.nlink += 1;
        linked.lock = None;
        let part: Apply = Arc::new(move |ctx: &mut OpCtx<'_>| {
            let mut dir = ops::check_new_entry(ctx, parent, &name)?;
            ctx.t.add_entry(parent, &name, fid, kind)?;
            ops::touch_dir(&mut dir, ctx.now);
            ctx.t.put_inode(parent, &dir)?;
            ctx.record(ChangelogType::Hardlink, 0, fid, Some((parent, &name)))?;
            Ok(MdtReply::Inode(linked.clone()))
        });
        self.commit(req, run, part).await
    }

    /// A file may gain a name in a directory that passes its project on only if it is of
    /// that project (ops::check_project, for a file on another MDT).
    fn check_project(&self, parent: Fid, file: &InodeInfo) -> WeftResult<()> {
        let Some(dir) = self.mds.core.read_view().inode(parent)? else { return Ok(()) };
        let mut rec = InodeRecord::new(file.attr.kind, file.attr.mode, file.attr.uid, file.attr.gid, file.attr.ctime);
        rec.projid = file.attr.projid;
        ops::check_project(&dir, &rec)
    }

    /// A file's name moves from a directory here to one anywhere (the file anywhere too):
    /// the file's reverse links move on its MDT (the new one first: its link count never
    /// reaches 0), the new name is made on its directory's MDT (replacing a file there,
    /// which drops that link on its own MDT), the old name goes here.
    #[allow(clippy::too_many_arguments)]
    async fn rename(
        &mut self,
        req: MdtRequest,
        run: Run,
        (src_parent, src_name): (Fid, Vec<u8>),
        (dst_parent, dst_name): (Fid, Vec<u8>),
        noreplace: bool,
        fid: Fid,
        kind: FileType,
    ) -> WeftResult<MdtReply> {
        let me = self.mds.core.mdt_index;
        let local_file = fid.mdt_index() == me;
        let local_dst = dst_parent.mdt_index() == me;
        ops::validate_name(&dst_name)?;
        let sticky = self.removal_checks(src_parent, &src_name)?;
        let who = self.original.identity.clone();
        // The source's sticky rule and the destination's project need the file (checked in
        // the commit for a file here).
        let file = match local_file {
            true => None,
            false => Some(self.getattr(fid).await?),
        };
        if let (Some(dir_uid), Some(f)) = (sticky, &file) {
            let dir = crate::perm::Owner { uid: dir_uid, gid: 0, mode: crate::perm::S_ISVTX, acl: None };
            crate::perm::check_sticky(&who, dir, f.attr.uid)?;
        }
        if let (true, Some(f)) = (local_dst, &file) {
            self.check_project(dst_parent, f)?;
        }
        // The name's file now, if any, and the directory's sticky owner: checked again in
        // the commit (a directory here), or found by the AddEntry step (there), which goes
        // first so that a name already the file's changes nothing anywhere.
        let (replaced, dst_sticky) = if local_dst {
            let t = self.mds.core.read_view();
            let dp = t.must_dir(dst_parent)?;
            crate::perm::check_dir_write(&who, ops::owner(&dp))?;
            if dp.nlink == 0 {
                return Err(WeftError::new(ErrorCode::NotFound, format!("directory {dst_parent} was removed")));
            }
            let target = t.dentry(dst_parent, &dst_name)?;
            if noreplace && target.is_some() {
                return Err(WeftError::new(ErrorCode::Exists, format!("'{}' exists already", ops::show(&dst_name))));
            }
            if target.is_some_and(|(t, _)| t == fid) {
                return Ok(MdtReply::Empty); // Two names of one file: POSIX says do nothing.
            }
            (target, (dp.mode & crate::perm::S_ISVTX != 0).then_some(dp.uid))
        } else {
            let add = Update::AddEntry { parent: dst_parent, name: dst_name.clone(), fid, kind, noreplace };
            match self.prepare(dst_parent.mdt_index(), add).await? {
                UpdateAnswer::Replaced { entry, sticky_dir_uid } => (entry, sticky_dir_uid),
                UpdateAnswer::Same => return Ok(MdtReply::Empty),
                other => return Err(WeftError::protocol(format!("a new entry answered {other:?}"))),
            }
        };
        if !local_file {
            self.prepare(fid.mdt_index(), Update::AddLink { fid, parent: dst_parent, name: dst_name.clone() }).await?;
            let drop = Update::DropLink { fid, parent: src_parent, name: src_name.clone(), sticky_dir_uid: None };
            self.prepare(fid.mdt_index(), drop).await?;
        }
        // The replaced file drops its link where it is, unless the commit does it here.
        let replaced_here = replaced.filter(|(t, _)| local_dst && t.mdt_index() == me);
        if let Some((target, _)) = replaced.filter(|_| replaced_here.is_none()) {
            let drop = Update::DropLink {
                fid: target,
                parent: dst_parent,
                name: dst_name.clone(),
                sticky_dir_uid: dst_sticky,
            };
            self.prepare(target.mdt_index(), drop).await?;
        }
        let part: Apply = Arc::new(move |ctx: &mut OpCtx<'_>| {
            let mut sp = ctx.t.must_dir(src_parent)?;
            expect_entry(ctx, src_parent, &src_name, fid)?;
            if local_file {
                let rec = ctx.t.must_inode(fid)?;
                crate::perm::check_sticky(ctx.who, ops::owner(&sp), rec.uid)?;
            }
            let mut dp = None;
            if local_dst {
                let d = ctx.t.must_dir(dst_parent)?;
                if ctx.t.dentry(dst_parent, &dst_name)? != replaced {
                    return Err(WeftError::new(
                        ErrorCode::Busy,
                        format!("'{}' changed meanwhile", ops::show(&dst_name)),
                    ));
                }
                if let Some((t, _)) = replaced_here {
                    let rec = ctx.t.must_inode(t)?;
                    crate::perm::check_sticky(ctx.who, ops::owner(&d), rec.uid)?;
                }
                dp = Some(d);
            }
            // Checks done: writes follow.
            ctx.t.remove_entry(src_parent, &src_name, fid)?;
            if let Some(mut d) = dp {
                match replaced {
                    Some((t, _)) if replaced_here.is_some() => {
                        let rec = ctx.t.must_inode(t)?;
                        ctx.t.remove_entry(dst_parent, &dst_name, t)?;
                        ops::drop_link(ctx, t, rec)?;
                    }
                    Some(_) => ctx.t.remove_dentry(dst_parent, &dst_name)?,
                    None => {}
                }
                ctx.t.add_entry(dst_parent, &dst_name, fid, kind)?;
                ops::touch_dir(&mut d, ctx.now);
                if dst_parent != src_parent {
                    ctx.t.put_inode(dst_parent, &d)?;
                } else {
                    sp = d;
                }
            } else if local_file {
                ctx.t.add_link_row(fid, dst_parent, &dst_name)?;
            }
            if local_file {
                let mut rec = ctx.t.must_inode(fid)?;
                rec.ctime = ctx.now;
                ctx.t.put_inode(fid, &rec)?;
            }
            ops::touch_dir(&mut sp, ctx.now);
            ctx.t.put_inode(src_parent, &sp)?;
            let target = replaced.map_or(Fid::new(0, 0, 0), |(f, _)| f);
            ctx.record_rename(
                ChangelogType::Rename,
                0,
                target,
                Some((dst_parent, &dst_name)),
                Some((fid, src_parent, &src_name)),
            )?;
            Ok(MdtReply::Empty)
        });
        self.commit(req, run, part).await
    }
}

/// The commit's check that a name still leads where the change found it.
fn expect_entry(ctx: &OpCtx<'_>, parent: Fid, name: &[u8], fid: Fid) -> WeftResult<()> {
    match ctx.t.dentry(parent, name)? {
        Some((f, _)) if f == fid => Ok(()),
        Some(_) => Err(WeftError::new(ErrorCode::Busy, format!("'{}' changed meanwhile", ops::show(name)))),
        None => Err(WeftError::new(ErrorCode::NotFound, format!("no entry '{}'", ops::show(name)))),
    }
}
