//! One extended attribute read as the system answers it: the value, or the errno. A leaf:
//! `xattr.rs` (the CLI's requests to the mount) and `errors.rs` (reading back the mount's
//! reason for a refusal) both read through it.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The attribute's value as the system answers it, the errno on failure.
pub fn get(path: &Path, name: &str) -> std::io::Result<Vec<u8>> {
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
