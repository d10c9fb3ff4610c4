//! The one place where Weft's error codes become errno values.

use weft_proto::{ErrorCode, WeftError};

/// The errno the kernel gets for `code`. Timeouts, protocol and checksum failures and
/// evictions are EIO at the mount, as a local disk failing would be.
pub fn errno(code: ErrorCode) -> i32 {
    match code {
        ErrorCode::NotFound => libc::ENOENT,
        ErrorCode::Exists => libc::EEXIST,
        ErrorCode::NotDir => libc::ENOTDIR,
        ErrorCode::IsDir => libc::EISDIR,
        ErrorCode::NotEmpty => libc::ENOTEMPTY,
        ErrorCode::Access => libc::EACCES,
        ErrorCode::Perm => libc::EPERM,
        ErrorCode::Invalid => libc::EINVAL,
        ErrorCode::NoSpace => libc::ENOSPC,
        ErrorCode::NameTooLong => libc::ENAMETOOLONG,
        ErrorCode::NoData => libc::ENODATA,
        ErrorCode::Range => libc::ERANGE,
        ErrorCode::TooManyLinks => libc::EMLINK,
        ErrorCode::FileTooBig => libc::EFBIG,
        ErrorCode::NotSupported => libc::EOPNOTSUPP,
        ErrorCode::Busy => libc::EBUSY,
        ErrorCode::Stale => libc::ESTALE,
        ErrorCode::TimedOut => libc::EIO,
        ErrorCode::Protocol => libc::EIO,
        ErrorCode::Checksum => libc::EIO,
        ErrorCode::Io => libc::EIO,
        ErrorCode::Again => libc::EAGAIN,
        ErrorCode::Evicted => libc::EIO,
    }
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

    #[test]
    fn every_code_maps_to_its_posix_errno() {
        let table = [
            (ErrorCode::NotFound, libc::ENOENT),
            (ErrorCode::Exists, libc::EEXIST),
            (ErrorCode::NotDir, libc::ENOTDIR),
            (ErrorCode::IsDir, libc::EISDIR),
            (ErrorCode::NotEmpty, libc::ENOTEMPTY),
            (ErrorCode::Access, libc::EACCES),
            (ErrorCode::Perm, libc::EPERM),
            (ErrorCode::Invalid, libc::EINVAL),
            (ErrorCode::NoSpace, libc::ENOSPC),
            (ErrorCode::NameTooLong, libc::ENAMETOOLONG),
            (ErrorCode::NoData, libc::ENODATA),
            (ErrorCode::Range, libc::ERANGE),
            (ErrorCode::TooManyLinks, libc::EMLINK),
            (ErrorCode::FileTooBig, libc::EFBIG),
            (ErrorCode::NotSupported, libc::EOPNOTSUPP),
            (ErrorCode::Busy, libc::EBUSY),
            (ErrorCode::Stale, libc::ESTALE),
            (ErrorCode::TimedOut, libc::EIO),
            (ErrorCode::Protocol, libc::EIO),
            (ErrorCode::Checksum, libc::EIO),
            (ErrorCode::Io, libc::EIO),
            (ErrorCode::Again, libc::EAGAIN),
            (ErrorCode::Evicted, libc::EIO),
        ];
        for (code, want) in table {
            assert_eq!(errno(code), want, "{code:?}");
            assert_eq!(fuse_errno("test", &WeftError::new(code, "x")).code(), want);
        }
        // The table above lists every code: adding one to ErrorCode breaks this match until
        // the table (and errno) learn it.
        for (code, _) in table {
            match code {
                ErrorCode::NotFound
                | ErrorCode::Exists
                | ErrorCode::NotDir
                | ErrorCode::IsDir
                | ErrorCode::NotEmpty
                | ErrorCode::Access
                | ErrorCode::Perm
                | ErrorCode::Invalid
                | ErrorCode::NoSpace
                | ErrorCode::NameTooLong
                | ErrorCode::NoData
                | ErrorCode::Range
                | ErrorCode::TooManyLinks
                | ErrorCode::FileTooBig
                | ErrorCode::NotSupported
                | ErrorCode::Busy
                | ErrorCode::Stale
                | ErrorCode::TimedOut
                | ErrorCode::Protocol
                | ErrorCode::Checksum
                | ErrorCode::Io
                | ErrorCode::Again
                | ErrorCode::Evicted => {}
            }
        }
        assert_eq!(table.len(), 23);
    }
}
