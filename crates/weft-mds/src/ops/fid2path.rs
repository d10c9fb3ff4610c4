//! The path of a FID from the root, following one link per level.

use super::{Query, QueryCtx};
use crate::limits::FID2PATH_DEPTH_MAX;
use crate::store::Tables;
use weft_proto::msg::mdt;
use weft_proto::{Fid, WeftError, WeftResult};

pub fn fid2path(t: &Tables, fid: Fid) -> WeftResult<Vec<u8>> {
    match path_part(t, fid, None)? {
        (path, None) => Ok(path),
        (_, Some(rest)) => Err(WeftError::io(format!("the path of {fid} goes on at {rest}, on another MDT"))),
    }
}

/// The path of `fid` as far as this MDT (`mdt`; None: every FID is here) knows it: the
/// names from the root, or from a directory of another MDT, which comes back with them
/// (its MDT knows the rest). A stripe of a striped directory has no name of its own: the
/// path goes on at its master.
pub fn path_part(t: &Tables, fid: Fid, mdt: Option<u32>) -> WeftResult<(Vec<u8>, Option<Fid>)> {
    t.must_inode(fid)?;
    let mut parts: Vec<Vec<u8>> = Vec::new();
    let mut cur = fid;
    let mut rest = None;
    for _ in 0..=FID2PATH_DEPTH_MAX {
        if cur == Fid::ROOT {
            break;
        }
        if mdt.is_some_and(|m| cur.mdt_index() != m) {
            rest = Some(cur);
            break;
        }
        match t.first_link(cur)? {
            Some((parent, name)) => {
                parts.push(name);
                cur = parent;
            }
            None => match t.inode(cur)?.and_then(|r| r.master()) {
                Some(master) => cur = master,
                None => return Err(WeftError::not_found(format!("{cur} has no name (removed while open?)"))),
            },
        }
        if parts.len() > FID2PATH_DEPTH_MAX {
            return Err(WeftError::io(format!("{fid} is deeper than {FID2PATH_DEPTH_MAX} levels or in a cycle")));
        }
    }
    parts.reverse();
    Ok((parts.join(&b'/'), rest))
}

/// Whether `fid` is `top` or under it, following one link per level (a directory's parent,
/// a file's first name): a fileset's check. A file with no name left is not under anything.
pub fn within(t: &Tables, fid: Fid, top: Fid) -> WeftResult<bool> {
    let mut cur = fid;
    for _ in 0..=FID2PATH_DEPTH_MAX {
        if cur == top {
            return Ok(true);
        }
        if cur == Fid::ROOT {
            return Ok(false);
        }
        match t.first_link(cur)? {
            Some((parent, _)) => cur = parent,
            None => return Ok(false),
        }
    }
    Ok(false)
}

impl Query for mdt::Fid2Path {
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<Vec<u8>> {
        fid2path(q.t, self.fid)
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::*;
    use weft_proto::{ErrorCode, Fid};

    #[tokio::test]
    async fn paths_from_root() {
        let env = Env::new().await;
        let a = env.must_mkdir(Fid::ROOT, "a").await;
        let b = env.must_mkdir(a, "b").await;
        let f = env.must_file(b, "file").await;
        let path = |fid| MdtRequest::Fid2Path(mdt::Fid2Path { fid });
        assert_eq!(env.req(path(Fid::ROOT)).await.unwrap(), MdtReply::Data(vec![]));
        assert_eq!(env.req(path(a)).await.unwrap(), MdtReply::Data(b"a".to_vec()));
        assert_eq!(env.req(path(f)).await.unwrap(), MdtReply::Data(b"a/b/file".to_vec()));
        assert_eq!(code(env.req(path(Fid::new(Fid::ROOT.seq, 12345, 0))).await), ErrorCode::NotFound);
    }
}
