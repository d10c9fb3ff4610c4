//! Several writes of one file in as few requests as its objects allow: each object's share
//! of all of them goes in one request of several extents (`ost::Write`'s `extents`, Lustre's
//! niobufs), so that small writes that do not continue each other cost a request per object
//! and RPC_BULK_BYTES_MAX, not one each. The mount's write-behind sends what it gathered
//! this way (IO-500's ior-hard: 47,008-byte records of processes far apart in one file).

use crate::io::{bounded, plan_layout};
use crate::locks::ExtentGuard;
use crate::striping::gather;
use crate::uncommitted::Kept;
use crate::Client;
use bytes::{Bytes, BytesMut};
use std::collections::BTreeMap;
use weft_proto::layout::Layout;
use weft_proto::limits::RPC_BULK_BYTES_MAX;
use weft_proto::msg::{ost, Caller};
use weft_proto::WeftResult;

/// One object's pieces of the writes, `(object offset, bytes)`, in object order, cut into
/// requests of at most `bytes_max` (a piece is never cut: none is larger).
fn requests_of(mut pieces: Vec<(u64, Bytes)>, bytes_max: usize) -> Vec<Vec<(u64, Bytes)>> {
    pieces.sort_by_key(|(offset, _)| *offset);
    let mut requests = Vec::new();
    let (mut current, mut bytes) = (Vec::new(), 0);
    for piece in pieces {
        if !current.is_empty() && bytes + piece.1.len() > bytes_max {
            requests.push(std::mem::take(&mut current));
            bytes = 0;
        }
        bytes += piece.1.len();
        current.push(piece);
    }
    if !current.is_empty() {
        requests.push(current);
    }
    requests
}

/// The extents of one request's pieces (those that continue each other joined) and its
/// bulk: the pieces' bytes in order, copied into one buffer unless there is one piece.
fn extents_and_bulk(pieces: &[(u64, Bytes)]) -> (Vec<ost::Extent>, Bytes) {
    let mut extents: Vec<ost::Extent> = Vec::new();
    for (offset, data) in pieces {
        match extents.last_mut() {
            Some(last) if last.offset + u64::from(last.len) == *offset => last.len += data.len() as u32,
            _ => extents.push(ost::Extent { offset: *offset, len: data.len() as u32 }),
        }
    }
    let bulk = match pieces {
        [(_, one)] => one.clone(),
        _ => {
            let mut bulk = BytesMut::with_capacity(pieces.iter().map(|(_, d)| d.len()).sum());
            for (_, data) in pieces {
                bulk.extend_from_slice(data);
            }
            bulk.freeze()
        }
    };
    (extents, bulk)
}

impl Client {
    /// Writes every `(offset, bytes)` of `writes` (ranges of the file that do not overlap,
    /// each smaller than RPC_BULK_BYTES_MAX) under `locks`: one request per object and
    /// RPC_BULK_BYTES_MAX, in parallel; returns once every OST acknowledged. One write goes
    /// as [`Client::write`] does; so do the writes of a file with synchronous mirrors, one
    /// after another.
    pub async fn write_many(
        &self,
        who: &Caller,
        layout: &Layout,
        mut writes: Vec<(u64, Bytes)>,
        locks: &ExtentGuard,
    ) -> WeftResult<()> {
        writes.retain(|(_, data)| !data.is_empty());
        if writes.len() <= 1 || (layout.sync_mirrors() && layout.write_mirrors().len() > 1) {
            for (offset, data) in writes {
                self.write(who, layout, offset, data, locks).await?;
            }
            return Ok(());
        }
        for (offset, data) in &writes {
            self.check_write(layout, *offset, data.len() as u64, locks)?;
        }
        let mut by_object: BTreeMap<(usize, usize), Vec<(u64, Bytes)>> = BTreeMap::new();
        for (offset, data) in &writes {
            for (k, piece) in plan_layout(layout, *offset, data.len() as u64) {
                let bulk = gather(&layout.components[k], *offset, &piece, data);
                by_object.entry((k, piece.stripe)).or_default().push((piece.object_offset, bulk));
            }
        }
        let requests = by_object.into_iter().flat_map(|((k, stripe), pieces)| {
            requests_of(pieces, RPC_BULK_BYTES_MAX as usize).into_iter().map(move |r| (k, stripe, r))
        });
        let owner = locks.file.and_then(|f| self.owner_of(f));
        bounded(requests.map(|(k, stripe, pieces)| async move {
            let object = &layout.components[k].objects[stripe];
            let (extents, bulk) = extents_and_bulk(&pieces);
            let offset = extents[0].offset;
            let extents = if extents.len() == 1 { Vec::new() } else { extents };
            let op = ost::Write { fid: object.fid, offset, sync: false, owner, extents: extents.clone() };
            let done = self.write_object(who, locks, object, op, bulk.clone()).await?;
            // Kept until the OST commits them, each extent to be replayed on its own.
            let mut at = 0usize;
            let whole = [ost::Extent { offset, len: bulk.len() as u32 }];
            for e in if extents.is_empty() { &whole[..] } else { &extents[..] } {
                let piece = bulk.slice(at..at + e.len as usize);
                at += e.len as usize;
                let kept = Kept { fid: object.fid, offset: e.offset, bulk: piece, owner };
                self.answered_write(object.ost, &done, kept);
            }
            Ok(())
        }))
        .await?;
        self.bound_uncommitted(who).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(offset: u64, len: usize) -> (u64, Bytes) {
        (offset, Bytes::from(vec![offset as u8; len]))
    }

    #[test]
    fn pieces_go_in_object_order_in_requests_of_the_bound() {
        let requests = requests_of(vec![piece(300, 100), piece(0, 100), piece(100, 100), piece(500, 100)], 250);
        let offsets: Vec<Vec<u64>> = requests.iter().map(|r| r.iter().map(|p| p.0).collect()).collect();
        assert_eq!(offsets, vec![vec![0, 100], vec![300, 500]]);
    }

    #[test]
    fn pieces_that_continue_each_other_are_one_extent_and_the_bulk_keeps_their_order() {
        let pieces = vec![piece(0, 2), piece(2, 3), piece(10, 1)];
        let (extents, bulk) = extents_and_bulk(&pieces);
        assert_eq!(extents, vec![ost::Extent { offset: 0, len: 5 }, ost::Extent { offset: 10, len: 1 }]);
        assert_eq!(bulk.as_ref(), &[0, 0, 2, 2, 2, 10]);
        let (one, bulk) = extents_and_bulk(&pieces[2..]);
        assert_eq!((one, bulk.as_ref()), (vec![ost::Extent { offset: 10, len: 1 }], &[10u8][..]));
    }
}
