//! The CLI reaches the mount through virtual extended attributes (`weft.layout`, `weft.fid`,
//! `weft.df`, `weft.map`, `weft.fid2path:FID`), as Lustre's lfs reaches llite through ioctls.
//! A refusal comes back with the mount's reason for it (errors.rs).

use anyhow::{anyhow, Context};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn cpath(path: &Path) -> anyhow::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| anyhow!("path {} contains a NUL byte", path.display()))
}

/// The attribute's value as the system answers it, the errno on failure.
pub fn get_raw(path: &Path, name: &str) -> std::io::Result<Vec<u8>> {
    let invalid = |_| std::io::Error::from_raw_os_error(libc::EINVAL);
    let p = CString::new(path.as_os_str().as_bytes()).map_err(invalid)?;
    let n = CString::new(name).map_err(invalid)?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: p and n are valid C strings; buf is writable for buf.len() bytes.
        let r = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if r >= 0 {
            buf.truncate(r as usize);
            return Ok(buf);
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ERANGE) && buf.len() < 64 << 20 {
            let len = buf.len();
            buf.resize(len * 4, 0);
            continue;
        }
        return Err(e);
    }
}

pub fn get(path: &Path, name: &str) -> anyhow::Result<Vec<u8>> {
    cpath(path)?;
    get_raw(path, name).map_err(|e| crate::errors::refused(path, e))
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
