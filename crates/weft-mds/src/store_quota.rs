//! Quota rows: the inodes each user, group and project holds on this MDT (kept by
//! `put_inode` and `destroy_inode` in the same batch as the inode), and the quota master's
//! limits and grace times.

use super::{Tables, WriteTables};
use crate::schema::{self, QuotaGrace, QuotaRecord};
use std::collections::BTreeMap;
use weft_proto::msg::quota::{QuotaKind, QuotaOwner};
use weft_proto::{Fid, WeftError, WeftResult};

impl Tables {
    /// Inodes counted for `kind` `id`.
    pub fn quota_inodes(&self, kind: QuotaKind, id: u32) -> WeftResult<u64> {
        let key = schema::quota_key(kind, id);
        Ok(self.with_row(schema::TABLE_QUOTA_USAGE, &key, |v| schema::decode_u64(v, "a quota usage row"))?.unwrap_or(0))
    }

    /// The id's own limits and grace deadlines, if it has any.
    pub fn quota_record(&self, kind: QuotaKind, id: u32) -> WeftResult<Option<QuotaRecord>> {
        let key = schema::quota_key(kind, id);
        self.with_row(schema::TABLE_QUOTA_LIMITS, &key, |v| {
            postcard::from_bytes(v).map_err(|e| WeftError::io(format!("a corrupt quota limits row: {e}")))
        })
    }

    pub fn quota_grace(&self, kind: QuotaKind) -> WeftResult<QuotaGrace> {
        let key = schema::quota_grace_key(kind);
        let stored = self.with_row(schema::TABLE_QUOTA_LIMITS, &key, |v| {
            postcard::from_bytes(v).map_err(|e| WeftError::io(format!("a corrupt quota grace row: {e}")))
        })?;
        Ok(stored.unwrap_or_default())
    }

    /// The ids (the defaults' `DEFAULT_ID` among them) whose record has a block limit or a
    /// block grace running, with their records: what the quota master grants blocks for.
    pub fn quota_block_records(&self) -> WeftResult<Vec<(QuotaKind, u32, QuotaRecord)>> {
        let mut out = Vec::new();
        self.scan(schema::TABLE_QUOTA_LIMITS, &[], None, |k, v| {
            let (Ok(key), Some(kind)) = (<[u8; 5]>::try_from(k), k.first().and_then(|&b| QuotaKind::from_index(b)))
            else {
                // A kind's grace times.
                return Ok(true);
            };
            let id = u32::from_be_bytes([key[1], key[2], key[3], key[4]]);
            let rec: QuotaRecord =
                postcard::from_bytes(v).map_err(|e| WeftError::io(format!("a corrupt quota limits row: {e}")))?;
            let l = rec.limits;
            if l.block_hard_kib != 0 || l.block_soft_kib != 0 || rec.block_grace_end.is_some() {
                out.push((kind, id, rec));
            }
            Ok(true)
        })?;
        Ok(out)
    }

    /// Counts the inodes of every id by reading every inode (for an upgrade, and to verify
    /// the counters): per (kind, id).
    pub fn quota_scan(&self) -> WeftResult<BTreeMap<(QuotaKind, u32), u64>> {
        let mut counts = BTreeMap::new();
        self.scan(schema::TABLE_INODES, &[], None, |k, v| {
            let fid = Fid::from_bytes(k).ok_or_else(|| WeftError::io("a corrupt inode key"))?;
            let owner = schema::decode_inode(fid, v)?.quota_owner();
            for kind in QuotaKind::ALL {
                *counts.entry((kind, owner.id(kind))).or_insert(0) += 1;
            }
            Ok(true)
        })?;
        Ok(counts)
    }
}

impl WriteTables {
    /// Moves one inode's count from `old`'s ids to `new`'s (None: made, or removed).
    pub(super) fn account_inode(&mut self, old: Option<QuotaOwner>, new: Option<QuotaOwner>) -> WeftResult<()> {
        if old == new {
            return Ok(());
        }
        for kind in QuotaKind::ALL {
            let (from, to) = (old.map(|o| o.id(kind)), new.map(|o| o.id(kind)));
            if from == to {
                continue;
            }
            if let Some(id) = from {
                let n = self.quota_inodes(kind, id)?;
                self.set_quota_inodes(kind, id, n.saturating_sub(1))?;
            }
            if let Some(id) = to {
                let n = self.quota_inodes(kind, id)?;
                self.set_quota_inodes(kind, id, n + 1)?;
            }
        }
        Ok(())
    }

    fn set_quota_inodes(&mut self, kind: QuotaKind, id: u32, n: u64) -> WeftResult<()> {
        let key = schema::quota_key(kind, id);
        if n == 0 {
            self.del(schema::TABLE_QUOTA_USAGE, &key)?;
            Ok(())
        } else {
            self.put(schema::TABLE_QUOTA_USAGE, &key, &n.to_be_bytes())
        }
    }

    pub fn put_quota_record(&mut self, kind: QuotaKind, id: u32, rec: &QuotaRecord) -> WeftResult<()> {
        let key = schema::quota_key(kind, id);
        if *rec == QuotaRecord::default() {
            self.del(schema::TABLE_QUOTA_LIMITS, &key)?;
            return Ok(());
        }
        let value = postcard::to_stdvec(rec).expect("encoding quota limits into memory cannot fail");
        self.put(schema::TABLE_QUOTA_LIMITS, &key, &value)
    }

    pub fn put_quota_grace(&mut self, kind: QuotaKind, grace: QuotaGrace) -> WeftResult<()> {
        let value = postcard::to_stdvec(&grace).expect("encoding grace times into memory cannot fail");
        self.put(schema::TABLE_QUOTA_LIMITS, &schema::quota_grace_key(kind), &value)
    }
}
