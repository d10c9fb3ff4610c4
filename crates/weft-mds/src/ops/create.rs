//! Create a regular file and open it (open(2) with O_CREAT).

use super::layout::layout_from;
use super::{check_new_entry, err, owner, show, validate_name, Mutation, OpCtx};
use crate::perm;
use crate::store::Tables;
use weft_proto::msg::{mdt, FileType, Identity, OPEN_WRITE};
use weft_proto::{ErrorCode, Fid, StripeSpec, WeftResult};

/// Before the batch: if this create will make a new file, the layout spec to reserve
/// objects for. Errors that need no writer come back at once.
pub fn prepare(
    t: &Tables,
    who: &Identity,
    parent: Fid,
    name: &[u8],
    explicit: Option<&StripeSpec>,
) -> WeftResult<Option<StripeSpec>> {
    let dir = t.must_dir(parent)?;
    validate_name(name)?;
    perm::check_lookup(who, owner(&dir))?;
    if t.dentry(parent, name)?.is_some() {
        return Ok(None); // Exists, IsDir or an open of the existing file: the writer decides.
    }
    perm::check_dir_write(who, owner(&dir))?;
    Ok(Some(layout_spec(t, &dir, explicit)?))
}

/// Before the batch: the layout spec of an unnamed file in `parent` (O_TMPFILE), once the
/// caller may make files there.
pub fn prepare_tmpfile(t: &Tables, who: &Identity, parent: Fid) -> WeftResult<Option<StripeSpec>> {
    let dir = t.must_dir(parent)?;
    perm::check_lookup(who, owner(&dir))?;
    perm::check_dir_write(who, owner(&dir))?;
    Ok(Some(layout_spec(t, &dir, None)?))
}

/// The spec of a new file: the explicit one over the directory's (or root's) default.
pub fn layout_spec(
    t: &Tables,
    dir: &crate::schema::InodeRecord,
    explicit: Option<&StripeSpec>,
) -> WeftResult<StripeSpec> {
    let inherited = crate::inherited_spec(t, dir)?;
    match explicit {
        Some(s) => {
            s.validate()?;
            let merged = s.merged_over(&inherited);
            merged.validate()?;
            Ok(merged)
        }
        None => Ok(inherited),
    }
}

pub fn create(ctx: &mut OpCtx<'_>, req: &mdt::Create) -> WeftResult<mdt::Opened> {
    let mdt::Create { parent, ref name, mode, exclusive, spec: ref explicit, open_flags, umask } = *req;
    let explicit = explicit.as_ref();
    let dir = ctx.t.must_dir(parent)?;
    validate_name(name)?;
    perm::check_lookup(ctx.who, owner(&dir))?;
    if let Some((fid, kind)) = ctx.t.dentry(parent, name)? {
        if exclusive {
            return Err(err(ErrorCode::Exists, format!("'{}' exists already", show(name))));
        }
        if kind == FileType::Directory {
            return Err(err(ErrorCode::IsDir, format!("'{}' is a directory", show(name))));
        }
        return super::open::open(ctx, fid, open_flags);
    }
    let mut dir = check_new_entry(ctx, parent, name)?;
    let spec = ctx.core.objects.zoned(layout_spec(ctx.t, &dir, explicit)?, ctx.who, ctx.jobid);
    let mut rec = super::new_record(FileType::Regular, mode, umask, ctx.who, &dir, ctx.now);
    let admitted = super::quota::admit_inode(ctx.t, ctx.who, rec.quota_owner(), ctx.now)?;
    // Checks done: writes follow.
    let layout = layout_from(ctx, &spec, 0)?;
    admitted.write(ctx.t)?;
    let fid = ctx.t.next_inode_fid(ctx.core.mdt_index)?;
    rec.layout = Some(layout);
    let writes = open_flags & OPEN_WRITE != 0;
    rec.size_known = !writes;
    ctx.t.put_inode(fid, &rec)?;
    ctx.t.add_entry(parent, name, fid, FileType::Regular)?;
    super::touch_dir(&mut dir, ctx.now);
    ctx.t.put_inode(parent, &dir)?;
    ctx.record(weft_proto::msg::changelog::ChangelogType::Create, 0, fid, Some((parent, name)))?;
    // A new file is empty: its size is trusted, and the creator is told so (no glimpse).
    let passthrough = super::open::passthrough_wanted(open_flags, &rec);
    let (handle, io) = ctx.core.open_files().open(fid, open_flags, ctx.client_id, true, passthrough, ctx.undo);
    let mut inode = crate::inode_info(ctx.core, fid, &rec);
    inode.attr.size_known = true;
    Ok(mdt::Opened { inode, handle, io })
}

/// An unnamed file (O_TMPFILE): a new inode as a create in `parent` makes it (layout, group,
/// mode), with no link, an orphan from the start, so that its last close destroys it as it
/// does a file unlinked while open; a `Link` while it is open names it.
impl Mutation for mdt::CreateTmpfile {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<mdt::Opened> {
        let dir = ctx.t.must_dir(self.parent)?;
        perm::check_lookup(ctx.who, owner(&dir))?;
        perm::check_dir_write(ctx.who, owner(&dir))?;
        if dir.nlink == 0 {
            return Err(err(ErrorCode::NotFound, format!("directory {} was removed", self.parent)));
        }
        let spec = ctx.core.objects.zoned(layout_spec(ctx.t, &dir, None)?, ctx.who, ctx.jobid);
        let mut rec = super::new_record(FileType::Regular, self.mode, self.umask, ctx.who, &dir, ctx.now);
        let admitted = super::quota::admit_inode(ctx.t, ctx.who, rec.quota_owner(), ctx.now)?;
        // Checks done: writes follow.
        let layout = layout_from(ctx, &spec, 0)?;
        admitted.write(ctx.t)?;
        let fid = ctx.t.next_inode_fid(ctx.core.mdt_index)?;
        rec.nlink = 0;
        rec.layout = Some(layout);
        rec.size_known = self.open_flags & OPEN_WRITE == 0;
        ctx.t.put_inode(fid, &rec)?;
        ctx.t.add_orphan(fid)?;
        let passthrough = super::open::passthrough_wanted(self.open_flags, &rec);
        let (handle, io) = ctx.core.open_files().open(fid, self.open_flags, ctx.client_id, true, passthrough, ctx.undo);
        let mut inode = crate::inode_info(ctx.core, fid, &rec);
        inode.attr.size_known = true;
        Ok(mdt::Opened { inode, handle, io })
    }
}

impl Mutation for mdt::Create {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<mdt::Opened> {
        create(ctx, self)
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    fn create(parent: Fid, name: &str, exclusive: bool) -> MdtRequest {
        MdtRequest::Create(mdt::Create {
            parent,
            name: name.into(),
            mode: 0o644,
            exclusive,
            spec: None,
            open_flags: OPEN_WRITE,
            umask: 0,
        })
    }

    #[tokio::test]
    async fn create_makes_an_open_file_with_a_layout() {
        let env = Env::new().await;
        let (inode, h) = env.create_as(&Identity::root(), Fid::ROOT, "f", 0o100644).await.unwrap();
        let a = &inode.attr;
        assert_eq!((a.kind, a.mode, a.nlink, a.size, a.size_known), (FileType::Regular, 0o644, 1, 0, true));
        let layout = inode.layout.clone().unwrap();
        let comp = layout.plain().unwrap();
        assert_eq!(comp.objects.len(), 1);
        assert_eq!(comp.objects[0].fid.seq, Fid::object_seq(0));
        assert_eq!(comp.stripe_size, 1 << 20);
        // Created while the precreated pool existed: the OST never saw a create on our path.
        assert!(env.targets.objects.lock().unwrap()[&0].contains(&comp.objects[0].fid.oid));
        let root = env.must_attr(Fid::ROOT).await;
        assert!(root.mtime >= a.ctime);
        env.must_close(a.fid, h, Some((0, 0))).await;
        assert!(env.must_attr(a.fid).await.size_known);
    }

    #[tokio::test]
    async fn exclusive_existing_and_directories() {
        let env = Env::new().await;
        let f = env.must_file(Fid::ROOT, "f").await;
        assert_eq!(code(env.req(create(Fid::ROOT, "f", true)).await), ErrorCode::Exists);
        match env.req(create(Fid::ROOT, "f", false)).await.unwrap() {
            MdtReply::Opened(mdt::Opened { inode, .. }) => assert_eq!(inode.attr.fid, f),
            r => panic!("{r:?}"),
        }
        env.must_mkdir(Fid::ROOT, "d").await;
        assert_eq!(code(env.req(create(Fid::ROOT, "d", false)).await), ErrorCode::IsDir);
        assert_eq!(code(env.req(create(f, "x", false)).await), ErrorCode::NotDir);
        assert_eq!(code(env.req(create(Fid::ROOT, "a/b", false)).await), ErrorCode::Invalid);
        assert_eq!(env.stats_open(), 1);
    }

    #[tokio::test]
    async fn setgid_directory_gives_its_group() {
        let env = Env::new().await;
        let d = env.must_mkdir(Fid::ROOT, "shared").await;
        env.req(MdtRequest::Setattr(mdt::Setattr {
            fid: d,
            set: SetAttr { mode: Some(0o2777), gid: Some(500), ..Default::default() },
            open_handle: None,
        }))
        .await
        .unwrap();
        let (i, _) = env.create_as(&user(1000), d, "f", 0o644).await.unwrap();
        assert_eq!((i.attr.uid, i.attr.gid), (1000, 500));
        let sub = env.mkdir_as(&user(1000), d, "sub", 0o755).await.unwrap();
        let a = env.must_attr(sub).await;
        assert_eq!((a.gid, a.mode), (500, 0o2755));
    }

    #[tokio::test]
    async fn no_up_ost_is_nospace_and_nothing_is_created() {
        let env = Env::with_map(cluster_map(&[], &[]), 16).await;
        let r = env.req(create(Fid::ROOT, "f", true)).await;
        let e = r.unwrap_err();
        assert_eq!(e.code, ErrorCode::NoSpace, "{e}");
        assert!(e.message.contains("no OST"), "{e}");
        assert_eq!(code(env.lookup(Fid::ROOT, "f").await), ErrorCode::NotFound);
    }
}
