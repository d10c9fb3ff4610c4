//! fallocate(2) over a file's layout (Lustre's `lfs`/`fallocate` on striped and composite
//! files): the file range is mapped onto each object's range with the striping math reads
//! and writes use, and each object gets one `ost::Fallocate`, in parallel, under the range's
//! write locks. The caller takes the locks and gives the range's components their objects
//! first where the mode needs them ([`FallocMode::needs_objects`]), as for a write.

use crate::io::bounded;
use crate::locks::ExtentGuard;
use crate::Client;
use bytes::Bytes;
use weft_proto::layout::Layout;
use weft_proto::limits::FILE_SIZE_MAX_BYTES;
use weft_proto::msg::ost::{self, FallocMode};
use weft_proto::msg::Caller;
use weft_proto::{ErrorCode, WeftError, WeftResult};

/// The part of `[offset, offset+len)` that lies in components with objects, as
/// `(offset, len)`: what a punch or a zeroing that keeps the size has to change (the rest
/// holds no byte); None when no part does.
pub fn range_with_objects(layout: &Layout, offset: u64, len: u64) -> Option<(u64, u64)> {
    let end = layout.segments(offset, len).filter(|s| s.comp.is_instantiated()).map(|s| s.offset + s.len).max()?;
    Some((offset, end - offset))
}

impl Client {
    /// Applies `mode` to `[offset, offset+len)` of a file with `layout`: one request per
    /// object the range touches. `locks`: the write locks of the range
    /// ([`Client::extent_lock`]). Parts in components without objects are skipped when the
    /// mode needs none there; when it does, the caller must have instantiated them.
    #[allow(clippy::too_many_arguments)]
    pub async fn fallocate(
        &self,
        who: &Caller,
        layout: &Layout,
        offset: u64,
        len: u64,
        mode: FallocMode,
        keep_size: bool,
        locks: &ExtentGuard,
    ) -> WeftResult<()> {
        if len == 0 {
            return Err(WeftError::invalid("fallocate of 0 bytes"));
        }
        if locks.client_id != self.client_id() {
            return Err(crate::evicted_error());
        }
        let end = offset.checked_add(len).filter(|end| *end <= FILE_SIZE_MAX_BYTES);
        if end.is_none() && mode != FallocMode::Punch {
            return Err(WeftError::new(
                ErrorCode::FileTooBig,
                format!("fallocate of {len} bytes at offset {offset} would pass the largest file size"),
            ));
        }
        layout.check_usable()?;
        let needs_objects = mode.needs_objects(keep_size);
        if needs_objects {
            layout.check_writable(offset, len)?;
            if layout.needs_instantiation(offset, len) {
                return Err(WeftError::io(format!(
                    "a fallocate of [{offset}, +{len}) reaches a component without objects: instantiate it first"
                )));
            }
        }
        let owner = locks.file.and_then(|f| self.owner_of(f));
        let requests: Vec<_> = layout
            .segments(offset, len)
            .filter(|seg| seg.comp.is_instantiated())
            .flat_map(|seg| {
                seg.comp.object_extents(seg.offset, seg.len).into_iter().map(move |e| {
                    let object = seg.comp.objects[e.stripe];
                    (
                        object,
                        ost::Fallocate { fid: object.fid, offset: e.object_offset, len: e.len, mode, keep_size, owner },
                    )
                })
            })
            .collect();
        bounded(requests.into_iter().map(|(object, op)| async move {
            self.ost_under(who, locks, object.ost, op, Bytes::new()).await.map(drop)
        }))
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::layout::{comp_flags, Layout, StripeObject};
    use weft_proto::Fid;

    #[test]
    fn a_hole_needs_changing_only_where_components_have_objects() {
        let objects = (0..2).map(|i| StripeObject { ost: i, fid: Fid::new(1, i, 0) }).collect();
        let mut layout = Layout::raid0(1 << 20, None, objects);
        assert_eq!(range_with_objects(&layout, 5, 10), Some((5, 10)));
        // A first component to 4 MiB with objects, a second without.
        let mut tail = layout.components[0].clone();
        layout.components[0].extent_end = 4 << 20;
        tail.extent_start = 4 << 20;
        tail.objects.clear();
        tail.flags &= !comp_flags::INIT;
        layout.components.push(tail);
        assert_eq!(range_with_objects(&layout, 3 << 20, 4 << 20), Some((3 << 20, 1 << 20)));
        assert_eq!(range_with_objects(&layout, 5 << 20, 1 << 20), None);
    }
}
