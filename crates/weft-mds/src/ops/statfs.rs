//! Statfs: the MDT's inode count and the space of the file system holding it.

use super::{Query, QueryCtx};
use crate::limits::INODE_ESTIMATE_BYTES;
use crate::store::Tables;
use crate::Core;
use std::os::unix::ffi::OsStrExt;
use weft_proto::msg::{mdt, StatfsInfo};
use weft_proto::{WeftError, WeftResult};

pub fn statfs(core: &Core, t: &Tables) -> WeftResult<StatfsInfo> {
    let path = std::ffi::CString::new(core.data_dir.as_os_str().as_bytes())
        .map_err(|_| WeftError::io("the MDT directory path contains a NUL byte"))?;
    // SAFETY: statvfs writes into the zeroed struct we own and reads the NUL-terminated path.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(path.as_ptr(), &mut vfs) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(WeftError::io(format!("statvfs of {}: {e}", core.data_dir.display())));
    }
    let frsize = if vfs.f_frsize > 0 { vfs.f_frsize as u64 } else { vfs.f_bsize as u64 };
    let used_inodes = t.inode_count()?;
    let ffree = (vfs.f_bavail as u64).saturating_mul(frsize) / INODE_ESTIMATE_BYTES;
    Ok(StatfsInfo {
        bsize: frsize as u32,
        blocks: vfs.f_blocks as u64,
        bfree: vfs.f_bfree as u64,
        bavail: vfs.f_bavail as u64,
        files: used_inodes + ffree,
        ffree,
    })
}

impl Query for mdt::Statfs {
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<StatfsInfo> {
        statfs(q.core, q.t)
    }
}

#[cfg(test)]
mod tests {
    use crate::ops::t::*;
    use weft_proto::msg::*;
    use weft_proto::Fid;

    #[tokio::test]
    async fn statfs_counts_inodes() {
        let env = Env::new().await;
        let s0 = match env.req(MdtRequest::Statfs(mdt::Statfs {})).await.unwrap() {
            MdtReply::Statfs(s) => s,
            r => panic!("{r:?}"),
        };
        assert!(s0.bsize > 0 && s0.blocks > 0 && s0.files >= 1);
        env.must_mkdir(Fid::ROOT, "d").await;
        let s1 = match env.req(MdtRequest::Statfs(mdt::Statfs {})).await.unwrap() {
            MdtReply::Statfs(s) => s,
            r => panic!("{r:?}"),
        };
        assert_eq!(s1.files - s1.ffree, s0.files - s0.ffree + 1);
    }
}
