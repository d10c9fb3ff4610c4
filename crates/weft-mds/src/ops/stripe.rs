//! Layouts: SetStripe (a directory's default, or a new layout for an empty file),
//! DeleteStripe (remove a directory's default) and GetStripe.

use super::{owner, Mutation, OpCtx, Query, QueryCtx};
use crate::perm;
use crate::schema::InodeRecord;
use crate::store::Tables;
use crate::Core;
use weft_proto::msg::{mdt, FileType, Identity};
use weft_proto::{ErrorCode, Fid, StripeSpec, WeftError, WeftResult};

/// Whether a new layout may replace this file's: no writer has it open and a writer's close
/// (or the create) recorded size 0, so no byte can be in the old objects.
fn check_file_empty(core: &Core, fid: Fid, rec: &InodeRecord) -> WeftResult<()> {
    if core.open_files().counts(fid).writers > 0 {
        return Err(WeftError::new(
            ErrorCode::Busy,
            format!("{fid} is open for writing: set its layout before writing, or create it with the layout"),
        ));
    }
    if !(rec.size_known && rec.size == 0) {
        return Err(WeftError::new(
            ErrorCode::Busy,
            format!("{fid} may hold data: a layout can only be changed on an empty file (copy it instead)"),
        ));
    }
    Ok(())
}

fn check_file_setstripe(who: &Identity, rec: &InodeRecord) -> WeftResult<()> {
    if !perm::may(who, owner(rec), perm::MAY_WRITE) {
        return Err(WeftError::new(ErrorCode::Access, "setting a file's layout needs write permission"));
    }
    Ok(())
}

/// The spec of a file's new layout: the given one over its directory's default.
pub fn file_spec(t: &Tables, fid: Fid, spec: &StripeSpec) -> WeftResult<StripeSpec> {
    spec.validate()?;
    let inherited = match t.first_link(fid)? {
        Some((parent, _)) => crate::inherited_spec(t, &t.must_dir(parent)?)?,
        None => StripeSpec::unset(),
    };
    let merged = spec.merged_over(&inherited);
    merged.validate()?;
    Ok(merged)
}

/// Before the batch: for a regular file, the spec to reserve objects for.
pub fn prepare(core: &Core, t: &Tables, fid: Fid, spec: &StripeSpec) -> WeftResult<Option<StripeSpec>> {
    match t.inode(fid)? {
        Some(rec) if rec.kind == FileType::Regular => {
            check_file_empty(core, fid, &rec)?;
            Ok(Some(file_spec(t, fid, spec)?))
        }
        _ => Ok(None),
    }
}

/// Before the batch: what a layout intent instantiates (None: no such file or no layout;
/// the writer reports it). `up`: whether an OST is up.
pub fn prepare_intent(
    t: &Tables,
    fid: Fid,
    end: u64,
    resync: bool,
    dom: u32,
    up: impl Fn(u32) -> bool,
) -> WeftResult<Option<Vec<(u32, StripeSpec)>>> {
    let Some(rec) = t.inode(fid)? else { return Ok(None) };
    Ok(rec.layout.as_ref().map(|l| {
        let mirror = intent_mirror(l, resync, &up);
        crate::objects::instantiation_wants(l, end, dom, mirror)
    }))
}

/// The mirror a write intent writes to (None: a file without mirrors, a resync, or a file
/// whose mirrors are written synchronously, all of which instantiate every mirror).
fn intent_mirror(layout: &weft_proto::Layout, resync: bool, up: &impl Fn(u32) -> bool) -> Option<u16> {
    (layout.is_mirrored() && !resync && !layout.sync_mirrors()).then(|| super::layout::primary(layout, up))
}

impl Mutation for mdt::LayoutIntent {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<weft_proto::msg::InodeInfo> {
        let mut rec = ctx.t.must_inode(self.fid)?;
        let Some(mut layout) = rec.layout.clone().filter(|_| rec.kind == FileType::Regular) else {
            return Err(WeftError::invalid(format!("{} is not a regular file with a layout", self.fid)));
        };
        let writer = super::setattr::opened_for_writing(ctx, self.fid, self.open_handle);
        if !writer && !perm::may(ctx.who, owner(&rec), perm::MAY_WRITE) {
            return Err(WeftError::new(ErrorCode::Access, "writing the file needs write permission"));
        }
        layout.check_usable()?;
        // Checks done: writes follow.
        let up = |ost| ctx.core.objects.is_up(ost);
        let mirror = intent_mirror(&layout, self.resync, &up);
        // A write on a file with several mirrors in sync: the others miss it from now on.
        let mut changed = match mirror {
            Some(keep) if layout.read_mirrors().len() > 1 => super::layout::mark_stale_except(&mut layout, keep),
            _ => false,
        };
        changed |= super::layout::instantiate(ctx, &mut layout, self.end, mirror)?;
        if changed {
            layout.generation = layout.generation.wrapping_add(1);
            rec.layout = Some(layout);
            ctx.t.put_inode(self.fid, &rec)?;
            if mirror.is_some() && !self.resync {
                ctx.record(weft_proto::msg::changelog::ChangelogType::Flrw, 0, self.fid, None)?;
            }
        }
        Ok(crate::inode_info(ctx.core, self.fid, &rec))
    }
}

/// Before the batch: the spec of a volatile file's layout (None: no such file; the writer
/// reports it).
pub fn prepare_volatile(t: &Tables, like: Fid, spec: &StripeSpec) -> WeftResult<Option<StripeSpec>> {
    match t.inode(like)? {
        Some(rec) if rec.kind == FileType::Regular => Ok(Some(file_spec(t, like, spec)?)),
        _ => Ok(None),
    }
}

/// The file `fid` as a migration needs it: a regular file with a usable layout that the
/// caller may write.
fn migratable(ctx: &OpCtx<'_>, fid: Fid) -> WeftResult<(InodeRecord, weft_proto::Layout)> {
    let rec = ctx.t.must_inode(fid)?;
    let Some(layout) = rec.layout.clone().filter(|_| rec.kind == FileType::Regular) else {
        return Err(WeftError::invalid(format!("{fid} is not a regular file with a layout")));
    };
    check_file_setstripe(ctx.who, &rec)?;
    layout.check_usable()?;
    Ok((rec, layout))
}

impl Mutation for mdt::CreateVolatile {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<mdt::Opened> {
        let (like, _) = migratable(ctx, self.like)?;
        let spec = file_spec(ctx.t, self.like, &self.spec)?;
        // Checks done: writes follow.
        let layout = super::layout::layout_from(ctx, &spec, 0)?;
        let fid = ctx.t.next_inode_fid(ctx.core.mdt_index)?;
        let mut rec = InodeRecord::new(FileType::Regular, like.mode & 0o7777, like.uid, like.gid, ctx.now);
        // Its objects take the file's place: they count against the file's project too.
        rec.projid = like.projid;
        rec.nlink = 0;
        rec.layout = Some(layout);
        ctx.t.put_inode(fid, &rec)?;
        ctx.t.add_orphan(fid)?;
        let flags = weft_proto::msg::OPEN_READ | weft_proto::msg::OPEN_WRITE;
        let (handle, io) = ctx.core.open_files().open(fid, flags, ctx.client_id, true, false, ctx.undo);
        let mut inode = crate::inode_info(ctx.core, fid, &rec);
        inode.attr.size_known = true;
        Ok(mdt::Opened { inode, handle, io })
    }
}

impl Mutation for mdt::SwapLayouts {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<weft_proto::msg::InodeInfo> {
        if self.fid == self.with {
            return Err(WeftError::invalid("a file's layout is swapped with another file's"));
        }
        let (mut a, la) = migratable(ctx, self.fid)?;
        let (mut b, lb) = migratable(ctx, self.with)?;
        if la.generation != self.generation {
            return Err(WeftError::new(
                ErrorCode::Busy,
                format!(
                    "the layout of {} changed since the copy began (generation {} now, {} then): copy again",
                    self.fid, la.generation, self.generation
                ),
            ));
        }
        // Checks done: writes follow.
        let generation = la.generation.max(lb.generation).wrapping_add(1);
        a.layout = Some(weft_proto::Layout { generation, ..lb });
        b.layout = Some(weft_proto::Layout { generation, ..la });
        a.ctime = ctx.now;
        ctx.t.put_inode(self.fid, &a)?;
        ctx.t.put_inode(self.with, &b)?;
        // Stale synchronous mirrors went with the old layout: nothing of them to resync.
        ctx.t.unqueue_resync(self.fid)?;
        ctx.record(weft_proto::msg::changelog::ChangelogType::Layout, 0, self.fid, None)?;
        Ok(crate::inode_info(ctx.core, self.fid, &a))
    }
}

pub fn set(ctx: &mut OpCtx<'_>, fid: Fid, spec: &StripeSpec) -> WeftResult<mdt::StripeInfo> {
    let mut rec = ctx.t.must_inode(fid)?;
    match rec.kind {
        FileType::Directory => {
            spec.validate()?;
            ctx.core.objects.check_pool(spec)?;
            perm::check_owner(ctx.who, owner(&rec), "only the owner or root may set a directory's default layout")?;
            // Checks done: writes follow.
            rec.dir_default = Some(spec.clone());
            rec.ctime = ctx.now;
            ctx.t.put_inode(fid, &rec)?;
            Ok(mdt::StripeInfo { layout: None, default: Some(spec.clone()) })
        }
        FileType::Regular => {
            check_file_setstripe(ctx.who, &rec)?;
            check_file_empty(ctx.core, fid, &rec)?;
            let merged = file_spec(ctx.t, fid, spec)?;
            let generation = rec.layout.as_ref().map_or(0, |l| l.generation.wrapping_add(1));
            // Checks done: writes follow.
            let layout = super::layout::layout_from(ctx, &merged, generation)?;
            if let Some(old) = &rec.layout {
                for comp in &old.components {
                    for obj in &comp.objects {
                        ctx.t.queue_destroy(obj.ost, obj.fid)?;
                    }
                }
            }
            rec.layout = Some(layout.clone());
            rec.ctime = ctx.now;
            ctx.t.put_inode(fid, &rec)?;
            Ok(mdt::StripeInfo { layout: Some(layout), default: None })
        }
        k => {
            Err(WeftError::invalid(format!("a {k:?} has no layout: setstripe works on directories and regular files")))
        }
    }
}

pub fn delete(ctx: &mut OpCtx<'_>, fid: Fid) -> WeftResult<()> {
    let mut rec = ctx.t.must_dir(fid)?;
    perm::check_owner(ctx.who, owner(&rec), "only the owner or root may remove a directory's default layout")?;
    // Checks done: writes follow.
    if rec.dir_default.take().is_some() {
        rec.ctime = ctx.now;
        ctx.t.put_inode(fid, &rec)?;
    }
    Ok(())
}

pub fn get(t: &Tables, fid: Fid) -> WeftResult<mdt::StripeInfo> {
    let rec = t.must_inode(fid)?;
    Ok(match rec.kind {
        FileType::Directory => mdt::StripeInfo { layout: None, default: rec.dir_default },
        _ => mdt::StripeInfo { layout: rec.layout, default: None },
    })
}

impl Mutation for mdt::SetStripe {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<mdt::StripeInfo> {
        let info = set(ctx, self.fid, &self.spec)?;
        ctx.record(weft_proto::msg::changelog::ChangelogType::Layout, 0, self.fid, None)?;
        Ok(info)
    }
}

impl Mutation for mdt::DeleteStripe {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<()> {
        delete(ctx, self.fid)?;
        ctx.record(weft_proto::msg::changelog::ChangelogType::Layout, 0, self.fid, None)
    }
}

impl Query for mdt::GetStripe {
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<mdt::StripeInfo> {
        get(q.t, self.fid)
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid, Layout, StripeSpec};

    fn layout_of(r: MdtReply) -> Layout {
        match r {
            MdtReply::Opened(mdt::Opened { inode, .. }) | MdtReply::Inode(inode) => inode.layout.unwrap(),
            MdtReply::Stripe(mdt::StripeInfo { layout: Some(l), .. }) => l,
            r => panic!("{r:?}"),
        }
    }

    fn osts(l: &Layout) -> Vec<u32> {
        l.plain().unwrap().objects.iter().map(|o| o.ost).collect()
    }

    fn create(parent: Fid, name: &str, spec: Option<StripeSpec>) -> MdtRequest {
        MdtRequest::Create(mdt::Create {
            parent,
            name: name.into(),
            mode: 0o644,
            exclusive: true,
            spec,
            open_flags: OPEN_READ,
            umask: 0,
        })
    }

    #[tokio::test]
    async fn stripe_all_over_sparse_osts_and_directory_default() {
        let env = Env::with_map(cluster_map(&[0, 7, 1000], &[("fast", &[7, 1000])]), 16).await;
        let l = layout_of(env.req(create(Fid::ROOT, "wide", Some(spec(-1)))).await.unwrap());
        let mut o = osts(&l);
        o.sort();
        assert_eq!(o, vec![0, 7, 1000]);
        for obj in &l.plain().unwrap().objects {
            assert_eq!(obj.fid.seq, Fid::object_seq(obj.ost));
            assert!(obj.fid.oid >= 1);
        }
        // Directory default: inherited by new files and new subdirectories.
        let d = env.must_mkdir(Fid::ROOT, "d").await;
        let dflt = StripeSpec { stripe_count: 2, stripe_size: 4 << 20, ..StripeSpec::unset() };
        env.req(MdtRequest::SetStripe(mdt::SetStripe { fid: d, spec: dflt.clone() })).await.unwrap();
        let got = env.req(MdtRequest::GetStripe(mdt::GetStripe { fid: d })).await.unwrap();
        assert_eq!(got, MdtReply::Stripe(mdt::StripeInfo { layout: None, default: Some(dflt.clone()) }));
        let l = layout_of(env.req(create(d, "f", None)).await.unwrap());
        assert_eq!((osts(&l).len(), l.plain().unwrap().stripe_size), (2, 4 << 20));
        let sub = env.must_mkdir(d, "sub").await;
        let l = layout_of(env.req(create(sub, "f", Some(spec(1)))).await.unwrap());
        assert_eq!((osts(&l).len(), l.plain().unwrap().stripe_size), (1, 4 << 20));
        // Pool restriction.
        let pooled = StripeSpec { stripe_count: -1, pool: Some("fast".into()), ..StripeSpec::unset() };
        let l = layout_of(env.req(create(Fid::ROOT, "p", Some(pooled))).await.unwrap());
        let mut o = osts(&l);
        o.sort();
        assert_eq!(o, vec![7, 1000]);
        assert_eq!(l.plain().unwrap().pool.as_deref(), Some("fast"));
        let unknown = StripeSpec { pool: Some("slow".into()), ..StripeSpec::unset() };
        assert_eq!(code(env.req(create(Fid::ROOT, "q", Some(unknown.clone()))).await), ErrorCode::Invalid);
        assert_eq!(
            code(env.req(MdtRequest::SetStripe(mdt::SetStripe { fid: d, spec: unknown })).await),
            ErrorCode::Invalid
        );
        let bad = StripeSpec { stripe_size: 1000, ..StripeSpec::unset() };
        assert_eq!(
            code(env.req(MdtRequest::SetStripe(mdt::SetStripe { fid: d, spec: bad })).await),
            ErrorCode::Invalid
        );
        // Explicit start OST.
        let at = StripeSpec { start_ost: 1000, stripe_count: 2, ..StripeSpec::unset() };
        assert_eq!(osts(&layout_of(env.req(create(Fid::ROOT, "s", Some(at))).await.unwrap())), vec![1000, 0]);
        // Delete the default.
        env.req(MdtRequest::DeleteStripe(mdt::DeleteStripe { fid: d })).await.unwrap();
        let l = layout_of(env.req(create(d, "g", None)).await.unwrap());
        assert_eq!(osts(&l).len(), 1);
        // Root default applies where a directory has none.
        env.req(MdtRequest::SetStripe(mdt::SetStripe { fid: Fid::ROOT, spec: spec(3) })).await.unwrap();
        let l = layout_of(env.req(create(d, "h", None)).await.unwrap());
        assert_eq!(osts(&l).len(), 3);
    }

    #[tokio::test]
    async fn new_layout_on_an_empty_file_only() {
        let env = Env::with_map(cluster_map(&[0, 7], &[]), 16).await;
        let f = env.must_file(Fid::ROOT, "f").await;
        let old = env.getattr(f).await.unwrap().layout.unwrap();
        let r = env.req(MdtRequest::SetStripe(mdt::SetStripe { fid: f, spec: spec(2) })).await.unwrap();
        let new = layout_of(r);
        assert_eq!((new.generation, osts(&new).len()), (old.generation + 1, 2));
        assert_eq!(env.getattr(f).await.unwrap().layout.unwrap(), new);
        let destroyed = env.wait_destroyed(1).await;
        assert_eq!(destroyed[0].1, old.plain().unwrap().objects[0].fid);
        // Open for writing: Busy.
        let h = match env.req(MdtRequest::Open(mdt::Open { fid: f, flags: OPEN_WRITE })).await.unwrap() {
            MdtReply::Opened(mdt::Opened { handle, .. }) => handle,
            r => panic!("{r:?}"),
        };
        assert_eq!(
            code(env.req(MdtRequest::SetStripe(mdt::SetStripe { fid: f, spec: spec(1) })).await),
            ErrorCode::Busy
        );
        // Holding data: Busy.
        env.must_close(f, h, Some((100, 8))).await;
        let e = env.req(MdtRequest::SetStripe(mdt::SetStripe { fid: f, spec: spec(1) })).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::Busy);
        assert!(e.message.contains("may hold data"), "{e}");
        let l = MdtRequest::Symlink(mdt::Symlink { parent: Fid::ROOT, name: "l".into(), target: b"f".to_vec() });
        let lf = match env.req(l).await.unwrap() {
            MdtReply::Inode(i) => i.attr.fid,
            r => panic!("{r:?}"),
        };
        assert_eq!(
            code(env.req(MdtRequest::SetStripe(mdt::SetStripe { fid: lf, spec: spec(1) })).await),
            ErrorCode::Invalid
        );
        assert_eq!(code(env.req(MdtRequest::DeleteStripe(mdt::DeleteStripe { fid: f })).await), ErrorCode::NotDir);
    }
}
