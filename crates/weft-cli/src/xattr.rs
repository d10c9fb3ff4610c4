//! The CLI reaches the mount through virtual extended attributes (`weft.layout`, `weft.fid`,
//! `weft.df`, `weft.map`, `weft.fid2path:FID`), as Lustre's lfs reaches llite through ioctls.

use anyhow::{anyhow, Context};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn cpath(path: &Path) -> anyhow::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| anyhow!("path {} contains a NUL byte", path.display()))
}

pub fn get(path: &Path, name: &str) -> anyhow::Result<Vec<u8>> {
    let p = cpath(path)?;
    let n = CString::new(name)?;
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
        return Err(explain(path, e));
    }
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
        Err(explain(path, std::io::Error::last_os_error()))
    }
}

fn explain(path: &Path, e: std::io::Error) -> anyhow::Error {
    match e.raw_os_error() {
        Some(libc::ENODATA) | Some(libc::EOPNOTSUPP) => {
            anyhow!("{} is not on a Weft file system (or the mount is too old for this command)", path.display())
        }
        // The io::Error stays the source, so callers can test its errno.
        _ => anyhow::Error::new(e).context(path.display().to_string()),
    }
}
