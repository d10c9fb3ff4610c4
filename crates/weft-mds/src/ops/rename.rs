//! Rename (renameat2): files and directories, across directories, over an existing target,
//! RENAME_NOREPLACE and RENAME_EXCHANGE; atomic because it is one op in one batch (one journal record).

use super::{err, owner, show, validate_name, Mutation, OpCtx};
use crate::limits::{FID2PATH_DEPTH_MAX, LINKS_PER_INODE_MAX};
use crate::perm;
use crate::schema::InodeRecord;
use crate::store::Tables;
use std::collections::BTreeMap;
use weft_proto::msg::{mdt, FileType, RENAME_EXCHANGE, RENAME_NOREPLACE};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// Whether `ancestor` is `fid` or a directory above it.
pub fn is_ancestor(t: &Tables, ancestor: Fid, fid: Fid) -> WeftResult<bool> {
    let mut cur = fid;
    for _ in 0..FID2PATH_DEPTH_MAX {
        if cur == ancestor {
            return Ok(true);
        }
        if cur == Fid::ROOT {
            return Ok(false);
        }
        if cur.mdt_index() != ancestor.mdt_index() {
            // Above is another MDT's: whether the move would make a loop through it is not
            // known here, so it is refused as a move between devices (mv then copies).
            return Err(WeftError::new(
                ErrorCode::CrossDevice,
                format!("directory {fid} is below a directory of another MDT: moving a directory there is not done by rename"),
            ));
        }
        let rec = t.must_inode(cur)?;
        cur = rec.parent.ok_or_else(|| WeftError::io(format!("directory {cur} has no parent recorded")))?;
    }
    Err(WeftError::io(format!("directory {fid} is deeper than {FID2PATH_DEPTH_MAX} levels or in a parent cycle")))
}

fn missing(name: &[u8], fid: Fid) -> WeftError {
    WeftError::io(format!("entry '{}' names missing inode {fid}", show(name)))
}

pub fn rename(
    ctx: &mut OpCtx<'_>,
    src_parent: Fid,
    src_name: &[u8],
    dst_parent: Fid,
    dst_name: &[u8],
    flags: u32,
) -> WeftResult<()> {
    if flags & !(RENAME_NOREPLACE | RENAME_EXCHANGE) != 0 || flags == RENAME_NOREPLACE | RENAME_EXCHANGE {
        return Err(WeftError::invalid(format!("rename flags {flags:#x} are invalid")));
    }
    let exchange = flags & RENAME_EXCHANGE != 0;
    let sp = ctx.t.must_dir(src_parent)?;
    let dp = ctx.t.must_dir(dst_parent)?;
    if dp.nlink == 0 {
        // Removed, or its removal prepared by a change over several MDTs (ops/update.rs).
        return Err(err(ErrorCode::NotFound, format!("directory {dst_parent} was removed")));
    }
    validate_name(src_name)?;
    validate_name(dst_name)?;
    perm::check_dir_write(ctx.who, owner(&sp))?;
    perm::check_dir_write(ctx.who, owner(&dp))?;
    let (sfid, skind) = ctx
        .t
        .dentry(src_parent, src_name)?
        .ok_or_else(|| err(ErrorCode::NotFound, format!("no entry '{}'", show(src_name))))?;
    let mut srec = ctx.t.inode(sfid)?.ok_or_else(|| missing(src_name, sfid))?;
    perm::check_sticky(ctx.who, owner(&sp), srec.uid)?;
    let dst = ctx.t.dentry(dst_parent, dst_name)?;
    if exchange && dst.is_none() {
        return Err(err(ErrorCode::NotFound, format!("no entry '{}' to exchange with", show(dst_name))));
    }
    if flags & RENAME_NOREPLACE != 0 && dst.is_some() {
        return Err(err(ErrorCode::Exists, format!("'{}' exists already", show(dst_name))));
    }
    if let Some((dfid, _)) = dst {
        if dfid == sfid {
            return Ok(()); // Two names of one inode: POSIX says do nothing.
        }
    }
    let mut drec = match dst {
        Some((dfid, _)) => Some(ctx.t.inode(dfid)?.ok_or_else(|| missing(dst_name, dfid))?),
        None => None,
    };
    if let Some(d) = &drec {
        perm::check_sticky(ctx.who, owner(&dp), d.uid)?;
    }
    if src_parent != dst_parent {
        super::check_project(&dp, &srec)?;
        if let (Some(d), true) = (&drec, exchange) {
            super::check_project(&sp, d)?;
        }
    }
    let s_dir = skind == FileType::Directory;
    let d_dir = dst.is_some_and(|(_, k)| k == FileType::Directory);
    if let (Some((dfid, _)), false) = (dst, exchange) {
        if s_dir && !d_dir {
            return Err(err(
                ErrorCode::NotDir,
                format!("cannot put directory '{}' over a non-directory", show(src_name)),
            ));
        }
        if !s_dir && d_dir {
            return Err(err(
                ErrorCode::IsDir,
                format!("cannot put a non-directory over directory '{}'", show(dst_name)),
            ));
        }
        if d_dir && !ctx.t.dir_is_empty(dfid)? {
            return Err(err(ErrorCode::NotEmpty, format!("directory '{}' is not empty", show(dst_name))));
        }
    }
    let moves = src_parent != dst_parent;
    if s_dir && moves && is_ancestor(ctx.t, sfid, dst_parent)? {
        return Err(WeftError::invalid(format!("cannot move directory '{}' into itself", show(src_name))));
    }
    if let (Some((dfid, _)), true, true, true) = (dst, exchange, d_dir, moves) {
        if is_ancestor(ctx.t, dfid, src_parent)? {
            return Err(WeftError::invalid(format!("cannot move directory '{}' into itself", show(dst_name))));
        }
    }
    let dst_gains_dir = s_dir && moves && !d_dir;
    if dst_gains_dir && dp.nlink >= LINKS_PER_INODE_MAX {
        return Err(err(ErrorCode::TooManyLinks, format!("directory {dst_parent} has too many subdirectories")));
    }

    // The changelog's flags: the name replaced was its file's last (and the file had an
    // archive copy).
    let replaced_last = !exchange && drec.as_ref().is_some_and(|d| d_dir || d.nlink == 1);
    let flags = match (&dst, &drec) {
        (Some((dfid, _)), Some(d)) => super::hsm::removal_flags(ctx, *dfid, d, replaced_last)?,
        _ => 0,
    };
    // Checks done: writes follow.
    let mut dirs: BTreeMap<Fid, InodeRecord> = BTreeMap::new();
    dirs.insert(src_parent, sp);
    dirs.entry(dst_parent).or_insert(dp);
    let now = ctx.now;
    ctx.t.remove_entry(src_parent, src_name, sfid)?;
    match (dst, exchange) {
        (Some((dfid, dkind)), true) => {
            let mut d = drec.take().expect("exchange has a target");
            ctx.t.remove_entry(dst_parent, dst_name, dfid)?;
            ctx.t.add_entry(src_parent, src_name, dfid, dkind)?;
            if moves && d_dir {
                dirs.get_mut(&dst_parent).expect("staged").nlink -= 1;
                dirs.get_mut(&src_parent).expect("staged").nlink += 1;
                d.parent = Some(src_parent);
            }
            d.ctime = now;
            ctx.t.put_inode(dfid, &d)?;
        }
        (Some((dfid, _)), false) => {
            let d = drec.take().expect("replace has a target");
            ctx.t.remove_entry(dst_parent, dst_name, dfid)?;
            if d_dir {
                ctx.t.destroy_inode(dfid, &d)?;
                dirs.get_mut(&dst_parent).expect("staged").nlink -= 1;
            } else {
                super::drop_link(ctx, dfid, d)?;
            }
        }
        (None, _) => {}
    }
    ctx.t.add_entry(dst_parent, dst_name, sfid, skind)?;
    if s_dir && moves {
        dirs.get_mut(&src_parent).expect("staged").nlink -= 1;
        dirs.get_mut(&dst_parent).expect("staged").nlink += 1;
        srec.parent = Some(dst_parent);
    }
    srec.ctime = now;
    ctx.t.put_inode(sfid, &srec)?;
    for (fid, mut rec) in dirs {
        assert!(rec.nlink >= 2, "directory {fid} would have nlink {}", rec.nlink);
        super::touch_dir(&mut rec, now);
        ctx.t.put_inode(fid, &rec)?;
    }
    let target = dst.map_or(Fid::new(0, 0, 0), |(f, _)| f);
    ctx.record_rename(
        weft_proto::msg::changelog::ChangelogType::Rename,
        flags,
        target,
        Some((dst_parent, dst_name)),
        Some((sfid, src_parent, src_name)),
    )?;
    Ok(())
}

impl Mutation for mdt::Rename {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<()> {
        rename(ctx, self.src_parent, &self.src_name, self.dst_parent, &self.dst_name, self.flags)
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    fn rename(sp: Fid, sn: &str, dp: Fid, dn: &str, flags: u32) -> MdtRequest {
        MdtRequest::Rename(mdt::Rename {
            src_parent: sp,
            src_name: sn.into(),
            dst_parent: dp,
            dst_name: dn.into(),
            flags,
        })
    }

    #[tokio::test]
    async fn rename_rules_table() {
        let env = Env::new().await;
        let r = Fid::ROOT;
        let a = env.must_mkdir(r, "a").await;
        let full = env.must_mkdir(r, "full").await;
        env.must_file(full, "x").await;
        env.must_mkdir(r, "empty").await;
        env.must_file(r, "f").await;
        env.must_file(r, "g").await;
        let sub = env.must_mkdir(a, "sub").await;
        // (request, expected error or None for success)
        let table: Vec<(MdtRequest, Option<ErrorCode>)> = vec![
            (rename(r, "nope", r, "x", 0), Some(ErrorCode::NotFound)),
            (rename(r, "a", r, "full", 0), Some(ErrorCode::NotEmpty)),
            (rename(r, "f", r, "empty", 0), Some(ErrorCode::IsDir)),
            (rename(r, "a", r, "f", 0), Some(ErrorCode::NotDir)),
            (rename(r, "a", sub, "a2", 0), Some(ErrorCode::Invalid)),
            (rename(r, "a", a, "self", 0), Some(ErrorCode::Invalid)),
            (rename(r, "f", r, "g", RENAME_NOREPLACE), Some(ErrorCode::Exists)),
            (rename(r, "f", r, "zz", RENAME_EXCHANGE), Some(ErrorCode::NotFound)),
            (rename(r, "f", r, "g", 3), Some(ErrorCode::Invalid)),
            (rename(r, "f", r, "..", 0), Some(ErrorCode::Invalid)),
            (rename(r, "f", r, "f", 0), None),
        ];
        for (req, want) in table {
            let got = env.req(req.clone()).await;
            match want {
                Some(c) => assert_eq!(got.map_err(|e| e.code).err(), Some(c), "{req:?}"),
                None => assert!(got.is_ok(), "{req:?}: {got:?}"),
            }
        }
        assert_eq!(env.sorted_names(r).await, vec!["a", "empty", "f", "full", "g"]);
        assert_eq!(env.must_attr(r).await.nlink, 5);
    }

    #[tokio::test]
    async fn rename_moves_replaces_and_exchanges() {
        let env = Env::new().await;
        let r = Fid::ROOT;
        let a = env.must_mkdir(r, "a").await;
        let b = env.must_mkdir(r, "b").await;
        let f = env.must_file(r, "f").await;
        let g = env.must_file(a, "g").await;
        // File over file across directories: the target's inode goes.
        env.req(rename(r, "f", a, "g", 0)).await.unwrap();
        assert_eq!(env.lookup(a, "g").await.unwrap().attr.fid, f);
        assert_eq!(code(env.getattr(g).await), ErrorCode::NotFound);
        env.wait_destroyed(1).await;
        // Directory into another directory: nlink moves.
        env.req(rename(r, "b", a, "b", 0)).await.unwrap();
        assert_eq!((env.must_attr(r).await.nlink, env.must_attr(a).await.nlink), (3, 3));
        let fid2path = env.req(MdtRequest::Fid2Path(mdt::Fid2Path { fid: b })).await.unwrap();
        assert_eq!(fid2path, MdtReply::Data(b"a/b".to_vec()));
        // Directory over an empty directory.
        env.must_mkdir(r, "c").await;
        env.req(rename(a, "b", r, "c", 0)).await.unwrap();
        assert_eq!(env.lookup(r, "c").await.unwrap().attr.fid, b);
        assert_eq!((env.must_attr(r).await.nlink, env.must_attr(a).await.nlink), (4, 2));
        // Exchange a file and a directory across directories.
        env.req(rename(a, "g", r, "c", RENAME_EXCHANGE)).await.unwrap();
        assert_eq!(env.lookup(a, "g").await.unwrap().attr.fid, b);
        assert_eq!(env.lookup(r, "c").await.unwrap().attr.fid, f);
        assert_eq!((env.must_attr(r).await.nlink, env.must_attr(a).await.nlink), (3, 3));
        assert_eq!(
            env.req(MdtRequest::Fid2Path(mdt::Fid2Path { fid: b })).await.unwrap(),
            MdtReply::Data(b"a/g".to_vec())
        );
        // Hard links of one file: no-op.
        env.req(MdtRequest::Link(mdt::Link { fid: f, parent: r, name: "f2".into() })).await.unwrap();
        env.req(rename(r, "c", r, "f2", 0)).await.unwrap();
        assert_eq!(env.must_attr(f).await.nlink, 2);
        assert_eq!(env.sorted_names(r).await, vec!["a", "c", "f2"]);
    }

    /// A failed rename batched with successful creates leaves exactly what the model says.
    #[tokio::test]
    async fn failed_rename_in_a_batch_leaves_nothing_behind() {
        let env = Env::new().await;
        let r = Fid::ROOT;
        let full = env.must_mkdir(r, "full").await;
        env.must_file(full, "x").await;
        env.must_mkdir(r, "src").await;
        let before = env.mds().stats().commits;
        let mut tasks = Vec::new();
        for i in 0..40 {
            let mds = env.mds().clone();
            let header = env.header_as(&Identity::root());
            let req = if i % 4 == 0 {
                // Each fails after finding its source: NotEmpty.
                rename(r, "src", r, "full", 0)
            } else {
                MdtRequest::Mkdir(mdt::Mkdir { parent: r, name: format!("d{i}").into(), mode: 0o755, umask: 0 })
            };
            tasks.push(tokio::spawn(async move { (i, mds.handle(&header, req, Run::Inline).await) }));
        }
        for t in tasks {
            let (i, r) = t.await.unwrap();
            if i % 4 == 0 {
                assert_eq!(r.unwrap_err().code, ErrorCode::NotEmpty);
            } else {
                r.unwrap();
            }
        }
        assert!(env.mds().stats().commits - before < 40, "mutations were not batched");
        let mut want: Vec<String> = (0..40).filter(|i| i % 4 != 0).map(|i| format!("d{i}")).collect();
        want.extend(["full".to_string(), "src".to_string()]);
        want.sort();
        assert_eq!(env.sorted_names(r).await, want);
        assert_eq!(env.sorted_names(full).await, vec!["x"]);
        assert_eq!(env.must_attr(r).await.nlink, 2 + want.len() as u32);
    }
}
