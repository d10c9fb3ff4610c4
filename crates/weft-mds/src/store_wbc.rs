//! What the metadata write-back cache needs of the tables: a savepoint inside a batch (a
//! client's `Batch` is all or none within the shared commit batch) and ranges of inode FIDs
//! handed to clients (ops/batch.rs).

use super::{Tables, WriteTables};
use crate::schema;
use weft_proto::fid::{SEQ_METADATA_BASE, SEQ_PER_MDT};
use weft_proto::{Fid, WeftResult};

/// The tables as they were at one point of a batch (see [`WriteTables::savepoint`]).
pub struct Savepoint {
    view: Tables,
    changes: usize,
}

impl Tables {
    /// The inode counter: the next inode number this MDT hands out.
    fn next_inode_number(&self) -> WeftResult<u64> {
        let stored = self.with_row(schema::TABLE_COUNTERS, schema::COUNTER_NEXT_INODE_KEY, |v| {
            schema::decode_u64(v, "inode counter")
        })?;
        Ok(stored.unwrap_or(2))
    }

    /// Whether `fid` is an inode FID of MDT `mdt_index` that was handed out already (by a
    /// create here or in a range granted to a client): a client may only give FIDs it was
    /// granted, and never one of the future.
    pub fn fid_handed_out(&self, mdt_index: u32, fid: Fid) -> WeftResult<bool> {
        let base = SEQ_METADATA_BASE + mdt_index as u64 * SEQ_PER_MDT;
        if fid.ver != 0 || fid.oid == 0 || fid.seq < base || fid.seq >= base + SEQ_PER_MDT {
            return Ok(false);
        }
        let n = ((fid.seq - base) << 32) | fid.oid as u64;
        Ok(n < self.next_inode_number()?)
    }
}

impl WriteTables {
    /// Where the batch is now: [`WriteTables::rollback`] brings it back here (cheap: the
    /// overlay's maps share their nodes).
    pub fn savepoint(&self) -> Savepoint {
        Savepoint { view: self.view.clone(), changes: self.changes.len() }
    }

    /// Undoes every write since `sp`: the rows, the inode count and the journal's changes.
    pub fn rollback(&mut self, sp: Savepoint) {
        self.view = sp.view;
        self.changes.truncate(sp.changes);
    }

    /// Hands out `count` (at least 1) inode FIDs of MDT `mdt_index` at once: the first, the
    /// rest following it in one sequence (a range never crosses into the next sequence, and
    /// object id 0 is never used).
    pub fn inode_fid_range(&mut self, mdt_index: u32, count: u32) -> WeftResult<Fid> {
        let mut n = self.next_inode_number()?;
        if n as u32 == 0 {
            n += 1;
        }
        if (n as u32 as u64) + count as u64 > 1 << 32 {
            n = ((n >> 32) + 1) << 32 | 1;
        }
        let first = schema::inode_fid(mdt_index, n);
        let next = n + count.max(1) as u64;
        self.put(schema::TABLE_COUNTERS, schema::COUNTER_NEXT_INODE_KEY, next.to_be_bytes().as_slice())?;
        Ok(first)
    }
}
