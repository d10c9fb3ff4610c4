//! The C API (`include/weft.h`, made from these declarations by cbindgen at build time).
//!
//! Conventions, as the header says: functions that return `int` give 0 (or a count) on
//! success and a negative errno value on failure (`-ENOENT`); those that return `ssize_t`
//! or `off_t` give the count or offset, or a negative errno. `weft_strerror` gives the last
//! failure's message on the calling thread. A panic inside the library never crosses into
//! C: the call fails with `-EIO`. Handles (`weft_fs`, `weft_file`, `weft_dir`,
//! `weft_layout`) are opaque; a file or directory handle must be closed before its file
//! system is unmounted.

pub mod common;
pub mod dirs;
pub mod files;
pub mod hsm;
pub mod layout;
pub mod mount;
pub mod names;
pub mod qos;
pub mod xattr;
