//! libweft: a program's own client of a Weft file system, without FUSE and without the
//! kernel (as DAOS's libdfs): a Rust API (`Fs`, `File`, `Dir`, `LayoutEdit`) and over it the
//! C API of `include/weft.h` (`ffi`), which libweft.so exports and the interception library
//! (weft-preload) builds on.
//!
//! Each `Fs` is one client of the file system: its own connections, lock cache and inode
//! cache, coherent with every other client (a FUSE mount, another process) through the
//! servers' locks as mounts are with each other.

pub mod error;
pub mod ffi;
pub mod file;
pub mod fs;
pub mod hsm;
pub mod layout;
mod limits;
pub mod mounts;
pub mod namespace;
pub mod params;
pub mod paths;
pub mod qos;
pub mod stat;

pub use error::{Error, Result};
pub use file::File;
pub use fs::{Fs, MountOptions, STATAHEAD_ENV, WBC_ENV};
pub use layout::{Component, LayoutEdit, Select};
pub use namespace::{Dir, Entry};
pub use weft_proto::msg::qos::ReservationState;

/// libweft's version (the workspace's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
