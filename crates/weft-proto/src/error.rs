//! Errors that cross the wire. Each code means exactly one POSIX condition; the FUSE adapter
//! maps them to errno in one place and the CLI to sentences in one place.

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

impl From<std::io::Error> for WeftError {
    /// Local storage errors on a server: ENOSPC and ENOENT keep their meaning, the rest is EIO.
    fn from(e: std::io::Error) -> Self {
        let code = match e.raw_os_error() {
            Some(28) | Some(122) => ErrorCode::NoSpace, // ENOSPC, EDQUOT
            Some(2) => ErrorCode::NotFound,
            Some(27) => ErrorCode::FileTooBig,
            _ => match e.kind() {
                std::io::ErrorKind::NotFound => ErrorCode::NotFound,
                std::io::ErrorKind::TimedOut => ErrorCode::TimedOut,
                _ => ErrorCode::Io,
            },
        };
        WeftError::new(code, e.to_string())
    }
}
