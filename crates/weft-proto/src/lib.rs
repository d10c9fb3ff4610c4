//! Weft's protocol crate: everything two Weft processes must agree on.
//!
//! * [`fid`]: file identifiers and their mapping to inode numbers;
//! * [`layout`]: where a file's bytes live, and the pure striping math;
//! * [`msg`]: every request and reply of every role;
//! * [`wire`]: the frame format that carries messages and bulk data;
//! * [`error`]: the error codes that cross the wire;
//! * [`limits`]: every bound in one place;
//! * [`lock`]: lock requests, grants and callbacks;
//! * [`faults`]: the faults storage layers inject for tests, and when.
//!
//! Nothing here performs I/O or reads a clock, so all of it is testable exhaustively.

pub mod acl;
pub mod dirstripe;
pub mod error;
pub mod faults;
pub mod fid;
pub mod glob;
pub mod layout;
pub mod limits;
pub mod lock;
pub mod msg;
pub mod name;
pub mod nodemap;
pub mod pcc;
pub mod rule_expr;
pub mod units;
pub mod wire;

pub use error::{ErrorCode, WeftError, WeftResult};
pub use fid::Fid;
pub use layout::{Layout, LayoutComponent, StripeObject, StripeSpec};
