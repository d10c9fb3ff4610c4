//! fallocate(2) through the mount: allocate (mode 0, `FALLOC_FL_KEEP_SIZE`), punch a hole
//! (`PUNCH_HOLE|KEEP_SIZE`) and zero a range (`ZERO_RANGE`, with or without keeping the
//! size), over any layout (the client library's `fallocate.rs` maps the range onto the
//! objects). Collapsing and inserting ranges move the bytes after them: refused
//! (EOPNOTSUPP), as by many local file systems.
//!
//! The kernel holds the inode lock through the request and has written its dirty pages of
//! a punched or zeroed range to the mount first; those writes may still be queued here
//! (write-behind), so they land before the range is cleared, or a stale byte would come
//! back. After the answer the kernel drops its pages of the range and, when the size was
//! not kept, takes `offset + len` as the size if larger.

use crate::mount::{evicted, reply_empty, Mount};
use fuser::{Errno, FileHandle, ReplyEmpty};
use std::sync::Arc;
use weft_client::fallocate::range_with_objects;
use weft_proto::lock::LockMode;
use weft_proto::msg::ost::FallocMode;
use weft_proto::msg::Caller;
use weft_proto::{ErrorCode, WeftError, WeftResult};

/// How many times the range to clear is looked at again when the layout under the locks has
/// objects in more of it than the layout the open knew (another client wrote further).
const CLEAR_RANGE_ROUNDS_MAX: usize = 4;

/// The mode the kernel asks for, as `(mode, keep_size)`; EOPNOTSUPP for those not served
/// (a punch without `KEEP_SIZE` too: Linux refuses it so).
pub(crate) fn falloc_mode(flags: i32) -> WeftResult<(FallocMode, bool)> {
    let keep = flags & libc::FALLOC_FL_KEEP_SIZE != 0;
    match flags & !libc::FALLOC_FL_KEEP_SIZE {
        0 => Ok((FallocMode::Allocate, keep)),
        libc::FALLOC_FL_PUNCH_HOLE if keep => Ok((FallocMode::Punch, true)),
        libc::FALLOC_FL_ZERO_RANGE => Ok((FallocMode::Zero, keep)),
        _ => Err(WeftError::new(
            ErrorCode::NotSupported,
            format!(
                "fallocate mode {flags:#x}: served are 0, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE and ZERO_RANGE (with or \
                 without KEEP_SIZE)"
            ),
        )),
    }
}

impl Mount {
    pub(crate) async fn fallocate(
        self: Arc<Self>,
        who: Caller,
        fh: FileHandle,
        offset: u64,
        len: u64,
        flags: i32,
        reply: ReplyEmpty,
    ) {
        let Some(file) = self.files.get(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        let done = async {
            let (mode, keep_size) = falloc_mode(flags)?;
            if len == 0 {
                return Err(WeftError::invalid("fallocate of 0 bytes"));
            }
            if file.generation != self.client.generation() {
                return Err(evicted());
            }
            if self.pcc.owned_path(file.fid).is_some() {
                return Err(WeftError::new(
                    ErrorCode::NotSupported,
                    format!("{} is in this mount's persistent client cache: fallocate is not served there", file.fid),
                ));
            }
            let Some(mut known) = file.layout() else {
                return Err(WeftError::io(format!("{} has no layout", file.fid)));
            };
            if !known.fully_instantiated() {
                // Another client may have given components objects since this open.
                known = self.refresh_layout(&who, &file).await?;
            }
            self.writes.wait_idle(file.fid).await;
            if mode.needs_objects(keep_size) {
                // As a write: the components the range reaches get their objects.
                let (layout, locks) = self.locked_layout(&who, &file, offset, len, LockMode::Pw, None).await?;
                self.client.fallocate(&who, &layout, offset, len, mode, keep_size, &locks).await?;
            } else {
                // A hole: only where components have objects (none is a hole already).
                let mut range = range_with_objects(&known, offset, len);
                for round in 0.. {
                    let Some((start, n)) = range else { break };
                    let (layout, locks) = self.locked_layout(&who, &file, start, n, LockMode::Pw, None).await?;
                    let now = range_with_objects(&layout, offset, len);
                    if now == range || round == CLEAR_RANGE_ROUNDS_MAX {
                        self.client.fallocate(&who, &layout, start, n, mode, keep_size, &locks).await?;
                        break;
                    }
                    range = now;
                }
            }
            // The objects changed: the last close tells the MDS their size and version.
            if mode.may_extend(keep_size) {
                for other in self.files.find_all(|f| f.fid == file.fid) {
                    other.raise_size(offset + len);
                }
                file.note_write(offset + len);
            } else {
                file.assume_written();
            }
            Ok(())
        }
        .await;
        if let Err(e) = &done {
            tracing::debug!("fallocate of {} [{offset}, +{len}) mode {flags:#x}: {e}", file.fid);
        }
        reply_empty(reply, "fallocate", done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errno::fuse_errno;

    #[test]
    fn the_modes_served_and_the_ones_refused() {
        use libc::{FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE, FALLOC_FL_KEEP_SIZE as K};
        use libc::{FALLOC_FL_PUNCH_HOLE as P, FALLOC_FL_ZERO_RANGE as Z};
        assert_eq!(falloc_mode(0).unwrap(), (FallocMode::Allocate, false));
        assert_eq!(falloc_mode(K).unwrap(), (FallocMode::Allocate, true));
        assert_eq!(falloc_mode(P | K).unwrap(), (FallocMode::Punch, true));
        assert_eq!(falloc_mode(Z).unwrap(), (FallocMode::Zero, false));
        assert_eq!(falloc_mode(Z | K).unwrap(), (FallocMode::Zero, true));
        for refused in [P, FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE, P | Z | K] {
            let e = falloc_mode(refused).unwrap_err();
            assert_eq!(fuse_errno("fallocate", &e), Errno::EOPNOTSUPP, "{refused:#x}");
        }
    }
}
