//! The CLI reaches the mount through virtual extended attributes (`weft.layout`, `weft.fid`,
//! `weft.df`, `weft.map`, `weft.fid2path:FID`), as Lustre's lfs reaches llite through ioctls.
//! A refusal comes back with the mount's reason for it (errors.rs).

use crate::sys_xattr;
use anyhow::{anyhow, Context};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn cpath(path: &Path) -> anyhow::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| anyhow!("path {} contains a NUL byte", path.display()))
}

pub fn get(path: &Path, name: &str) -> anyhow::Result<Vec<u8>> {
    cpath(path)?;
    sys_xattr::get(path, name).map_err(|e| crate::errors::refused(path, e))
}

pub fn get_json<T: serde::de::DeserializeOwned>(path: &Path, name: &str) -> anyhow::Result<T> {
    let bytes = get(path, name)?;
    serde_json::from_slice(&bytes)
        .with_context(|| format!("{}: the mount answered {name} with unreadable data", path.display()))
}

pub fn set(path: &Path, name: &str, value: &[u8]) -> anyhow::Result<()> {
    let p = cpath(path)?;
    let n = CString::new(name)?;
    // SAFETY: p and n are valid C strings; value is readable for value.len() bytes.
    let r = unsafe { libc::setxattr(p.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
    if r == 0 {
        Ok(())
    } else {
        Err(crate::errors::refused(path, std::io::Error::last_os_error()))
    }
}
