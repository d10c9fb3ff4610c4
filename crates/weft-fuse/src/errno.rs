//! Where the mount answers the kernel an errno for a Weft error (by weft-proto's one table,
//! `ErrorCode::errno`), and logs the ones that mean trouble.

use weft_proto::{ErrorCode, WeftError};

/// The errno the kernel gets for `code`: weft-proto's one table (`ErrorCode::errno`), which
/// the copytools report too.
pub fn errno(code: ErrorCode) -> i32 {
    code.errno()
}

/// The fuser errno for an error, logged at debug level (errors are often expected: ENOENT
/// on lookups, ENODATA on xattrs) except for the ones that mean trouble.
pub(crate) fn fuse_errno(op: &str, e: &WeftError) -> fuser::Errno {
    match e.code {
        ErrorCode::TimedOut | ErrorCode::Protocol | ErrorCode::Checksum | ErrorCode::Io | ErrorCode::Evicted => {
            tracing::warn!("{op}: {e}")
        }
        _ => tracing::debug!("{op}: {e}"),
    }
    fuser::Errno::from_i32(errno(e.code))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every error code, found by decoding variant indices as the wire does until one is no
    /// code: no hand-kept list that a new code could be missing from.
    fn every_code() -> Vec<ErrorCode> {
        let codes: Vec<ErrorCode> =
            (0u8..128).map_while(|i| weft_proto::wire::decode_message::<ErrorCode>(&[i]).ok()).collect();
        assert!(codes.len() > 1 && codes.len() < 128, "{codes:?}");
        codes
    }

    /// What weft-proto's error.rs says each code is at the mount: the errno its doc comment
    /// names (`(ENOENT)`, or `(ETIMEDOUT at the library, EIO at the mount)`), by variant name.
    fn documented() -> std::collections::BTreeMap<String, String> {
        let source = include_str!("../../weft-proto/src/error.rs");
        let body = source.split("pub enum ErrorCode {").nth(1).and_then(|b| b.split("\n}").next()).expect("the enum");
        let mut out = std::collections::BTreeMap::new();
        let mut doc = String::new();
        for line in body.lines().map(str::trim) {
            if let Some(text) = line.strip_prefix("///") {
                doc.push_str(text);
                doc.push(' ');
            } else if let Some(name) = line.strip_suffix(',') {
                let said = doc.rsplit_once('(').map_or("", |(_, inside)| inside);
                let said = said.split_once(" at the mount").map_or(said, |(before, _)| before);
                let errno = said.split(|c: char| !c.is_ascii_alphanumeric()).rfind(|w| w.starts_with('E'));
                let errno = errno.unwrap_or_else(|| panic!("the doc of {name} names no errno: {doc}"));
                out.insert(name.to_string(), errno.to_string());
                doc.clear();
            }
        }
        out
    }

    fn libc_errno(name: &str) -> i32 {
        match name {
            "ENOENT" => libc::ENOENT,
            "EEXIST" => libc::EEXIST,
            "ENOTDIR" => libc::ENOTDIR,
            "EISDIR" => libc::EISDIR,
            "ENOTEMPTY" => libc::ENOTEMPTY,
            "EACCES" => libc::EACCES,
            "EPERM" => libc::EPERM,
            "EINVAL" => libc::EINVAL,
            "ENOSPC" => libc::ENOSPC,
            "ENAMETOOLONG" => libc::ENAMETOOLONG,
            "ENODATA" => libc::ENODATA,
            "ERANGE" => libc::ERANGE,
            "EMLINK" => libc::EMLINK,
            "EFBIG" => libc::EFBIG,
            "EOPNOTSUPP" => libc::EOPNOTSUPP,
            "EBUSY" => libc::EBUSY,
            "ESTALE" => libc::ESTALE,
            "EIO" => libc::EIO,
            "EAGAIN" => libc::EAGAIN,
            "EPROTO" => libc::EPROTO,
            "ETIMEDOUT" => libc::ETIMEDOUT,
            "ENOLCK" => libc::ENOLCK,
            "EXDEV" => libc::EXDEV,
            "EDQUOT" => libc::EDQUOT,
            "EROFS" => libc::EROFS,
            other => panic!("{other}: add it to this test's names of libc errno values"),
        }
    }

    #[test]
    fn every_code_maps_to_the_errno_its_documentation_names() {
        let documented = documented();
        let codes = every_code();
        assert_eq!(codes.len(), documented.len(), "codes on the wire {codes:?}, documented {documented:?}");
        for code in codes {
            let name = format!("{code:?}");
            let want = libc_errno(documented.get(&name).unwrap_or_else(|| panic!("{name} is not documented")));
            assert_eq!(errno(code), want, "{name} maps to {} where its doc names {}", errno(code), documented[&name]);
            assert_eq!(fuse_errno("test", &WeftError::new(code, "x")).code(), want, "{name} through fuse_errno");
        }
    }
}
