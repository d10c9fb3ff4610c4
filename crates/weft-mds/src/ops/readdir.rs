//! Readdir with a resumable cookie: entries come in name-hash order; an entry's cookie is
//! its hash; a listing resumes after a cookie. A page never splits a group of equal hashes,
//! so resuming never skips or repeats a name. "." and ".." are not listed (the client adds them).

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
