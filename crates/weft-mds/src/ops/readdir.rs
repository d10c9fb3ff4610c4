//! Readdir with a resumable cookie: entries come in name-hash order; an entry's cookie is
//! its hash; a listing resumes after a cookie. A page never splits a group of equal hashes,
//! so resuming never skips or repeats a name. "." and ".." are not listed (the client adds them).

use super::lookup::getattr;
use super::{owner, Query, QueryCtx};
use crate::perm;
use crate::store::Tables;
use weft_proto::limits::READDIR_ENTRIES_MAX;
use weft_proto::msg::{mdt, DirEntry, DirPage, Identity};
use weft_proto::{Fid, WeftResult};

pub fn readdir(t: &Tables, who: &Identity, dir: Fid, cookie: u64, max_entries: u32) -> WeftResult<DirPage> {
    let rec = t.must_dir(dir)?;
    perm::check_readdir(who, owner(&rec))?;
    page(t, dir, cookie, max_entries.clamp(1, READDIR_ENTRIES_MAX) as usize)
}

/// Entries with hash > `cookie`, at least `max` unless the directory ends first, plus the
/// rest of the last entry's hash group.
pub fn page(t: &Tables, dir: Fid, cookie: u64, max: usize) -> WeftResult<DirPage> {
    if cookie >= u64::MAX - 1 {
        return Ok(DirPage { entries: Vec::new(), eof: true });
    }
    let mut entries: Vec<DirEntry> = Vec::with_capacity(max.min(1024));
    let mut eof = true;
    t.scan_entries(dir, cookie + 1, |e| {
        if entries.len() >= max && entries.last().is_some_and(|last| last.cookie != e.hash) {
            eof = false;
            return Ok(false);
        }
        entries.push(DirEntry { name: e.name, fid: e.fid, kind: e.kind, cookie: e.hash });
        Ok(true)
    })?;
    Ok(DirPage { entries, eof })
}

impl Query for mdt::Readdir {
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<DirPage> {
        readdir(q.t, q.who, self.fid, self.cookie, self.max_entries)
    }
}

/// The page and the inodes of its entries on this MDT (search permission needed for
/// those, as for a lookup); locking.rs keeps those it could lock and takes the locks
/// before this reads them.
impl Query for mdt::ReaddirPlus {
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<mdt::DirPlus> {
        let page = readdir(q.t, q.who, self.fid, self.cookie, self.max_entries)?;
        let dir = q.t.must_dir(self.fid)?;
        if perm::check_lookup(q.who, owner(&dir)).is_err() {
            return Ok(mdt::DirPlus { page, inodes: Vec::new() });
        }
        let here = |fid: &Fid| fid.mdt_index() == q.core.mdt_index;
        // An entry removed since the page was read is left out, not an error.
        let inodes = page.entries.iter().filter(|e| here(&e.fid)).filter_map(|e| getattr(q.core, q.t, e.fid).ok());
        let inodes = inodes.collect();
        Ok(mdt::DirPlus { page, inodes })
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use std::collections::HashSet;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    #[tokio::test]
    async fn readdir_pages_and_permissions() {
        let env = Env::new().await;
        let d = env.must_mkdir(Fid::ROOT, "d").await;
        for i in 0..10 {
            env.must_mkdir(d, &format!("n{i}")).await;
        }
        let all = env.list(d, 3).await;
        assert_eq!(all.len(), 10);
        assert_eq!(all.iter().collect::<HashSet<_>>().len(), 10);
        assert_eq!(env.list(d, 1).await, all);
        let p = match env
            .req(MdtRequest::Readdir(mdt::Readdir { fid: d, cookie: u64::MAX, max_entries: 5 }))
            .await
            .unwrap()
        {
            MdtReply::Dir(p) => p,
            r => panic!("{r:?}"),
        };
        assert!(p.eof && p.entries.is_empty());
        env.req(MdtRequest::Setattr(mdt::Setattr {
            fid: d,
            set: SetAttr { mode: Some(0o311), ..Default::default() },
            open_handle: None,
        }))
        .await
        .unwrap();
        let r = env.req_as(&user(1000), MdtRequest::Readdir(mdt::Readdir { fid: d, cookie: 0, max_entries: 5 })).await;
        assert_eq!(code(r), ErrorCode::Access);
        let f = env.must_file(Fid::ROOT, "f").await;
        assert_eq!(
            code(env.req(MdtRequest::Readdir(mdt::Readdir { fid: f, cookie: 0, max_entries: 5 })).await),
            ErrorCode::NotDir
        );
    }

    /// Statahead's page: every entry's inode with an intent lock; without search
    /// permission on the directory the entries alone; without read permission nothing.
    #[tokio::test]
    async fn readdir_plus_brings_locked_inodes_and_needs_search_for_them() {
        let env = Env::new().await;
        env.mds().set_lock_namespace(crate::testutil::namespace());
        let d = env.must_mkdir(Fid::ROOT, "d").await;
        let mut made = HashSet::new();
        for i in 0..5 {
            made.insert(env.must_mkdir(d, &format!("n{i}")).await);
        }
        let plus = |who: Identity| {
            let req = MdtRequest::ReaddirPlus(mdt::ReaddirPlus { fid: d, cookie: 0, max_entries: 1024 });
            let env = &env;
            async move {
                match env.req_as(&who, req).await {
                    Ok(MdtReply::DirPlus(p)) => Ok(p),
                    Ok(r) => panic!("{r:?}"),
                    Err(e) => Err(e),
                }
            }
        };
        let all = plus(Identity::root()).await.unwrap();
        assert!(all.page.eof);
        assert_eq!(all.page.entries.iter().map(|e| e.fid).collect::<HashSet<_>>(), made);
        assert_eq!(all.inodes.iter().map(|i| i.attr.fid).collect::<HashSet<_>>(), made);
        assert!(all.inodes.iter().all(|i| i.lock.is_some() && i.attr.kind == FileType::Directory));
        let set_mode = |mode| {
            env.req(MdtRequest::Setattr(mdt::Setattr {
                fid: d,
                set: SetAttr { mode: Some(mode), ..Default::default() },
                open_handle: None,
            }))
        };
        set_mode(0o744).await.unwrap();
        let names_only = plus(user(1000)).await.unwrap();
        assert_eq!((names_only.page.entries.len(), names_only.inodes.len()), (5, 0));
        set_mode(0o311).await.unwrap();
        assert_eq!(code(plus(user(1000)).await), ErrorCode::Access);
    }

    /// A big directory lists completely, each name exactly once, through repeated calls.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn large_directory_lists_every_name_once() {
        let n: usize = if cfg!(debug_assertions) { 20_000 } else { 100_000 };
        let env = Env::new().await;
        let d = env.must_mkdir(Fid::ROOT, "big").await;
        let mut tasks = Vec::new();
        for w in 0..16 {
            let mds = env.mds().clone();
            let headers: Vec<_> = (0..n / 16).map(|_| env.header_as(&Identity::root())).collect();
            tasks.push(tokio::spawn(async move {
                for (i, h) in headers.into_iter().enumerate() {
                    let name = format!("entry-{w}-{i}").into_bytes();
                    mds.handle(
                        &h,
                        MdtRequest::Mknod(mdt::Mknod {
                            parent: d,
                            name,
                            kind: FileType::Fifo,
                            mode: 0o644,
                            rdev: 0,
                            umask: 0,
                        }),
                        Run::Inline,
                    )
                    .await
                    .unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let names = env.list(d, 1000).await;
        assert_eq!(names.len(), n / 16 * 16);
        assert_eq!(names.iter().collect::<HashSet<_>>().len(), names.len(), "a name was listed twice");
    }
}
