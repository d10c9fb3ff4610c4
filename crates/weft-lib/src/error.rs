//! What a call of the library fails with: an errno value (what the C API returns, negated)
//! and a sentence for people (`weft_strerror`'s thread-local last message).

use weft_proto::{ErrorCode, WeftError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub errno: i32,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(errno: i32, message: impl Into<String>) -> Error {
        Error { errno, message: message.into() }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, std::io::Error::from_raw_os_error(self.errno))
    }
}

impl std::error::Error for Error {}

impl From<WeftError> for Error {
    /// By weft-proto's one table of errno values (`ErrorCode::errno`), as the mount answers
    /// the kernel, except that a request that timed out says so (the mount says EIO).
    fn from(e: WeftError) -> Error {
        let errno = match e.code {
            ErrorCode::TimedOut => libc::ETIMEDOUT,
            code => code.errno(),
        };
        Error { errno, message: e.message }
    }
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        std::io::Error::new(std::io::Error::from_raw_os_error(e.errno).kind(), e.to_string())
    }
}
