//! Directory entry names, checked alike by the MDS, which keeps them, and the client,
//! which answers some lookups from what it knows.

use crate::error::{ErrorCode, WeftError, WeftResult};
use crate::limits::NAME_BYTES_MAX;

/// A name longer than NAME_BYTES_MAX (ENAMETOOLONG), whatever else it is.
pub fn check_length(name: &[u8]) -> WeftResult<()> {
    if name.len() > NAME_BYTES_MAX {
        return Err(WeftError::new(
            ErrorCode::NameTooLong,
            format!("name of {} bytes is longer than {NAME_BYTES_MAX}", name.len()),
        ));
    }
    Ok(())
}

/// Directory entry names: not empty, not "." or "..", no '/' or NUL, at most NAME_BYTES_MAX.
pub fn validate_name(name: &[u8]) -> WeftResult<()> {
    if name.is_empty() || name == b"." || name == b".." {
        return Err(WeftError::invalid(format!("'{}' cannot be used as a name", String::from_utf8_lossy(name))));
    }
    if name.contains(&b'/') || name.contains(&0) {
        return Err(WeftError::invalid(format!(
            "name '{}' contains '/' or a NUL byte",
            String::from_utf8_lossy(name).escape_debug()
        )));
    }
    check_length(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_as_a_local_file_system_checks_them() {
        assert!(validate_name(b"ok").is_ok());
        assert_eq!(validate_name(&[b'x'; NAME_BYTES_MAX + 1]).unwrap_err().code, ErrorCode::NameTooLong);
        assert!(validate_name(&[b'x'; NAME_BYTES_MAX]).is_ok());
        assert_eq!(validate_name(b"a/b").unwrap_err().code, ErrorCode::Invalid);
        assert_eq!(validate_name(b"..").unwrap_err().code, ErrorCode::Invalid);
        assert!(check_length(b"..").is_ok(), "a lookup of .. is fine");
    }
}
