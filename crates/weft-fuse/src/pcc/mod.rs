//! The persistent client cache (Lustre's PCC): chosen files' data in a directory on this
//! node's own disk, read and written there by the kernel through FUSE passthrough.
//!
//! * **Caches** are added to a mount (`weft pcc add MNT DIR --param "RULE KEYS"`, the
//!   settings of `weft-proto/src/pcc.rs`) and kept in its memory; the files are
//!   `DIR/rw/FID` and `DIR/ro/FID`.
//! * **Read-only copies** (`attach -r`, or a read-only open of a file the rule matches):
//!   the data is copied under a read lock on every object of the file, to its end, and the
//!   lock stays cached. A write or truncate anywhere needs a write lock, so its callback
//!   reaches this mount before the write is done: [`Pcc::invalidate`] drops the copy
//!   (from the lock hooks, `coherence.rs`), and the next open reads the servers. The lock
//!   going for any other reason (the lock LRU, a lost server) drops the copy too.
//! * **Read-write files** (`attach -w`) are built on HSM, as Lustre's: the data is copied
//!   into the cache under a write lock on the whole file, the file is marked archived in
//!   the cache's archive id (`rwid`, with `HS_PCCRW`) and released on the servers. This
//!   mount then opens it with `OPEN_PCC` and the kernel does its I/O on the cache file;
//!   the size goes to the MDT at each writer's close. Any other client's open, truncate or
//!   stat for the size is a restore, which the coordinator hands to the copytool this
//!   mount runs for `rwid`: it waits until this mount's writers closed, writes the cache
//!   file into new objects, and the file is the servers' again (the restore clears the
//!   HSM flags; the copy is deleted). A mount that dies leaves its files released, their
//!   data in `DIR/rw`: others' opens wait for the restore and fail with the reason after
//!   their `restore_timeout`, until the mount is back and the cache added again (it takes
//!   up what `DIR/rw` holds).
//! * **Prefetch** (`prefetch=1`, Weft's): the mount registers a changelog reader (its id
//!   kept in `DIR/.prefetch-reader`, so that a mount that comes back goes on where it
//!   stopped) and follows the MDT's records: a file closed after writing anywhere that
//!   the rule matches gets a read-only copy, no scan needed (not at its create: a writer
//!   may be writing it through passthrough, past the locks, until it closes). `pcc del`
//!   deregisters the reader.
//! * **Quota**: a cache's `quota` bounds what it holds; an attach that does not fit first
//!   evicts copies that no open uses (least recently used or largest first, as `evict`
//!   says). A read-only copy is deleted; a read-write file is detached (restored) first,
//!   so no data is lost. What cannot be made room for is refused with ENOSPC.
//!
//! Known limits: an open made through a read-only copy keeps reading it after the copy
//! was dropped (passthrough cannot be taken back from an open), as NFS's close-to-open;
//! opens made after the write read the new bytes. A read-write file's restore waits for
//! this mount's writers to close.
//!
//! The files: `state.rs` (what the mount keeps), `admin.rs` (add, del, list, state, detach),
//! `attach.rs` (a file's data into a cache), `evict.rs` (which copies make room),
//! `open.rs` (opens through a cache), `restore.rs` (read-write files back to the servers),
//! `prefetch.rs` (following the changelog).

mod admin;
mod attach;
mod evict;
mod open;
mod prefetch;
mod restore;
mod state;

pub use admin::{AddRequest, AttachRequest, CacheInfo, DelRequest, DetachRequest, FileState};
pub use state::Kind;
pub(crate) use state::Pcc;
