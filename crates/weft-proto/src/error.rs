//! Errors that cross the wire. Each code means exactly one POSIX condition, turned into an
//! errno in one place (`ErrorCode::errno`, for the mount and the copytools) and into words
//! in one place (the CLI's errors.rs, with the message that came with the code).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ErrorCode {
    /// No such file, directory, object or target (ENOENT).
    NotFound,
    /// The name exists already (EEXIST).
    Exists,
    /// A path component is not a directory (ENOTDIR).
    NotDir,
    /// The operation needs a non-directory (EISDIR).
    IsDir,
    /// The directory is not empty (ENOTEMPTY).
    NotEmpty,
    /// Permission denied by mode bits (EACCES).
    Access,
    /// Operation not permitted for this user (EPERM).
    Perm,
    /// An argument is invalid (EINVAL).
    Invalid,
    /// A target is full (ENOSPC).
    NoSpace,
    /// A name is too long (ENAMETOOLONG).
    NameTooLong,
    /// No such extended attribute (ENODATA).
    NoData,
    /// A buffer given is too small (ERANGE).
    Range,
    /// Too many links (EMLINK).
    TooManyLinks,
    /// The file would be too large (EFBIG).
    FileTooBig,
    /// The operation is not supported (EOPNOTSUPP).
    NotSupported,
    /// A resource is busy (EBUSY).
    Busy,
    /// A handle refers to something that is gone (ESTALE).
    Stale,
    /// The server did not answer in time (ETIMEDOUT at the library, EIO at the mount).
    TimedOut,
    /// The request was malformed (EIO at the mount).
    Protocol,
    /// The data arrived corrupted: checksum mismatch (EIO, after retries).
    Checksum,
    /// A storage or internal failure (EIO).
    Io,
    /// The server is shutting down or recovering; retry (EAGAIN).
    Again,
    /// This client was evicted and must reconnect (EIO).
    Evicted,
    /// The client holds as many locks as the server allows it (ENOLCK).
    NoLocks,
    /// The target is not served here (now): a replica that does not lead its group, a
    /// server the target moved away from. The cluster map says where it is; the client
    /// library follows it and resends, so a program sees this only if the target found no
    /// new home within the request's time (EAGAIN).
    Moved,
    /// A rename or link that would take a file out of its project into a directory that
    /// passes another one on; programs such as mv then copy instead (EXDEV).
    CrossDevice,
    /// A user's, group's or project's quota is used up: past its hard limit, or past its
    /// soft limit for longer than the grace time (EDQUOT).
    QuotaExceeded,
    /// The connection did not prove that it holds the file system's shared key: a client
    /// without the key, with another key, or a frame whose authentication failed (EACCES).
    NotAuthenticated,
    /// The change is refused: the client's nodemap mounts read-only (EROFS).
    ReadOnly,
    /// A name sent to the wrong stripe of a striped directory: the client's copy of the
    /// directory's stripes is out of date; it reads them again and resends (EIO if it
    /// ever reached a program).
    WrongStripe,
}

/// An error with its code and a sentence a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} ({code:?})")]
pub struct WeftError {
    pub code: ErrorCode,
    pub message: String,
}

pub type WeftResult<T> = Result<T, WeftError>;

impl WeftError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        WeftError { code, message: message.into() }
    }
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, what)
    }
    pub fn invalid(what: impl Into<String>) -> Self {
        Self::new(ErrorCode::Invalid, what)
    }
    pub fn io(what: impl Into<String>) -> Self {
        Self::new(ErrorCode::Io, what)
    }
    pub fn protocol(what: impl Into<String>) -> Self {
        Self::new(ErrorCode::Protocol, what)
    }
}

impl ErrorCode {
    /// The errno this code is for a process: what the mount answers the kernel and what a
    /// copytool reports to the coordinator. Timeouts, protocol and checksum failures and
    /// evictions are EIO, as a local disk failing would be.
    pub fn errno(self) -> i32 {
        match self {
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
            ErrorCode::NoLocks => libc::ENOLCK,
            ErrorCode::Moved => libc::EAGAIN,
            ErrorCode::CrossDevice => libc::EXDEV,
            ErrorCode::QuotaExceeded => libc::EDQUOT,
            ErrorCode::NotAuthenticated => libc::EACCES,
            ErrorCode::ReadOnly => libc::EROFS,
            ErrorCode::WrongStripe => libc::EIO,
        }
    }
}

impl From<std::io::Error> for WeftError {
    /// Local storage errors on a server: ENOSPC (and EDQUOT), ENOENT and EFBIG keep their
    /// meaning, the rest is EIO.
    fn from(e: std::io::Error) -> Self {
        let code = match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => ErrorCode::NoSpace,
            Some(libc::ENOENT) => ErrorCode::NotFound,
            Some(libc::EFBIG) => ErrorCode::FileTooBig,
            _ => match e.kind() {
                std::io::ErrorKind::NotFound => ErrorCode::NotFound,
                std::io::ErrorKind::TimedOut => ErrorCode::TimedOut,
                _ => ErrorCode::Io,
            },
        };
        WeftError::new(code, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_errors_keep_space_absence_and_size_and_the_rest_is_eio() {
        let of = |errno| WeftError::from(std::io::Error::from_raw_os_error(errno)).code;
        assert_eq!(of(libc::ENOSPC), ErrorCode::NoSpace);
        assert_eq!(of(libc::EDQUOT), ErrorCode::NoSpace);
        assert_eq!(of(libc::ENOENT), ErrorCode::NotFound);
        assert_eq!(of(libc::EFBIG), ErrorCode::FileTooBig);
        assert_eq!(of(libc::EIO), ErrorCode::Io);
        assert_eq!(of(libc::EACCES), ErrorCode::Io);
        let timed_out = std::io::Error::new(std::io::ErrorKind::TimedOut, "slow disk");
        assert_eq!(WeftError::from(timed_out).code, ErrorCode::TimedOut);
        assert_eq!(WeftError::from(std::io::Error::from_raw_os_error(libc::ENOSPC)).code.errno(), libc::ENOSPC);
    }
}
