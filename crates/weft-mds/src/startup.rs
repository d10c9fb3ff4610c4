//! What the MDS does to its store before it serves: format a new MDT or check (and upgrade)
//! the format of an existing one, replay the journal after a crash, destroy the inodes left
//! without a name when their last open went with the process. Each is written as the changes
//! it makes ([`format_changes`], [`orphan_changes`]) so that a replicated MDT proposes them to
//! its group (replica.rs) where a single MDT commits them to its store directly.

use crate::journal::{self, Change};
use crate::schema::{self, InodeRecord};
use crate::storage::{JournalStore, KvStore};
use crate::store::{self, WriteTables};
use std::sync::Arc;
use weft_proto::msg::FileType;
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// The value of a `meta` row, if any.
pub fn meta(kv: &dyn KvStore, key: &[u8]) -> WeftResult<Option<Vec<u8>>> {
    let mut value = None;
    kv.snapshot()?.get(schema::TABLE_META, key, &mut |v| value = Some(v.to_vec()))?;
    Ok(value)
}

/// Formats a new MDT (the format version, the root directory on MDT 0) or checks the format
/// version of an existing one, upgrading it when this version can.
pub fn format_or_check(kv: &dyn KvStore, mdt_index: u32) -> WeftResult<()> {
    if let Some(changes) = format_changes(kv, mdt_index)? {
        kv.commit(&mut store::change_rows(&changes)?)?;
    }
    Ok(())
}

/// What formatting a new MDT, or upgrading the format of an existing one, writes; None when
/// the MDT has this version's format. Fails for a format this version cannot read.
pub fn format_changes(kv: &dyn KvStore, mdt_index: u32) -> WeftResult<Option<Vec<Change>>> {
    let version = schema::FORMAT_VERSION.to_be_bytes().to_vec();
    let format = Change { table: schema::TABLE_META, key: schema::META_FORMAT_KEY.to_vec(), value: Some(version) };
    match meta(kv, schema::META_FORMAT_KEY)? {
        Some(v) => {
            let v: [u8; 4] = v.as_slice().try_into().map_err(|_| WeftError::io("corrupt MDT format marker"))?;
            let v = u32::from_be_bytes(v);
            if schema::FORMAT_VERSIONS_UPGRADABLE.contains(&v) {
                // The new version adds tables, which opening the store made (empty), and
                // inode records that still decode; the quota counters (format 6) are
                // counted from the inodes the checkpoint holds.
                tracing::info!(from = v, to = schema::FORMAT_VERSION, "MDT format upgraded");
                // (Format 6 has them: 7 only added tables and record forms.)
                let counts = if v == 5 { store::Tables::at_checkpoint(kv)?.quota_scan()? } else { Default::default() };
                let mut changes = vec![format];
                changes.extend(counts.into_iter().map(|((kind, id), n)| Change {
                    table: schema::TABLE_QUOTA_USAGE,
                    key: schema::quota_key(kind, id).to_vec(),
                    value: Some(n.to_be_bytes().to_vec()),
                }));
                return Ok(Some(changes));
            }
            if v != schema::FORMAT_VERSION {
                return Err(WeftError::new(
                    ErrorCode::NotSupported,
                    format!(
                        "the MDT on disk has format version {v}; this build of Weft reads version {} only: \
                         run the matching Weft version",
                        schema::FORMAT_VERSION
                    ),
                ));
            }
            Ok(None)
        }
        None => {
            // A new MDT has no client: its record of them is complete.
            let clients_complete = Change {
                table: schema::TABLE_COUNTERS,
                key: schema::COUNTER_CLIENTS_COMPLETE_KEY.to_vec(),
                value: Some(vec![1]),
            };
            let mut changes = vec![format, clients_complete];
            if mdt_index == 0 {
                let now = crate::now();
                let rec =
                    InodeRecord { parent: Some(Fid::ROOT), ..InodeRecord::new(FileType::Directory, 0o755, 0, 0, now) };
                changes.push(Change {
                    table: schema::TABLE_INODES,
                    key: Fid::ROOT.to_bytes().to_vec(),
                    value: Some(schema::encode_inode(&rec)),
                });
                // The root counts against user, group and project 0, as every inode counts.
                for kind in weft_proto::msg::quota::QuotaKind::ALL {
                    changes.push(Change {
                        table: schema::TABLE_QUOTA_USAGE,
                        key: schema::quota_key(kind, 0).to_vec(),
                        value: Some(1u64.to_be_bytes().to_vec()),
                    });
                }
            }
            Ok(Some(changes))
        }
    }
}

/// Destroys inodes that had no name left but were open when the MDS stopped: no open
/// survives a restart. Their objects go to the destroy queue. Returns how many.
pub fn destroy_orphans(kv: &dyn KvStore) -> WeftResult<u64> {
    let mut total = 0;
    loop {
        let (changes, n) = orphan_changes(kv)?;
        if n == 0 {
            return Ok(total);
        }
        kv.commit(&mut store::change_rows(&changes)?)?;
        total += n;
    }
}

/// The changes that destroy up to ORPHAN_CLEANUP_BATCH_INODES_MAX orphan inodes of the
/// store's state (see [`destroy_orphans`]), and how many they destroy: none when none is left.
pub fn orphan_changes(kv: &dyn KvStore) -> WeftResult<(Vec<Change>, u64)> {
    let mut t = WriteTables::over(store::Tables::at_checkpoint(kv)?);
    let n = destroy_orphans_in(&mut t, |_| false)?;
    Ok((std::mem::take(&mut t.changes), n))
}

/// Destroys, in `t`, up to ORPHAN_CLEANUP_BATCH_INODES_MAX orphan inodes but those `open`
/// says are open (a client replayed an open of them to a replicated MDT's new leader);
/// returns how many marks it handled (destroyed or dropped).
pub fn destroy_orphans_in(t: &mut WriteTables, open: impl Fn(Fid) -> bool) -> WeftResult<u64> {
    let fids = t.orphan_fids(crate::limits::ORPHAN_CLEANUP_BATCH_INODES_MAX)?;
    let mut n = 0;
    for fid in fids.into_iter().filter(|f| !open(*f)) {
        match t.inode(fid)? {
            Some(rec) if rec.nlink == 0 => t.destroy_inode(fid, &rec)?,
            Some(rec) => {
                // Linked again (cannot happen today): keep the inode, drop the mark.
                tracing::warn!(%fid, nlink = rec.nlink, "orphan mark on a linked inode; keeping the inode");
                t.remove_orphan(fid)?;
            }
            None => t.remove_orphan(fid)?,
        }
        n += 1;
    }
    Ok(n)
}

/// Applies the journal records that the last durable checkpoint does not hold, commits them
/// durably and empties the journal. Returns the last sequence number, for appending after it.
pub fn replay_journal(kv: &dyn KvStore, journal: &Arc<dyn JournalStore>) -> WeftResult<u64> {
    let durable_seq = match meta(kv, schema::META_JOURNAL_SEQ_KEY)? {
        Some(v) => schema::decode_u64(&v, "journal sequence")?,
        None => 0,
    };
    let records = journal::read_records(&**journal)?;
    let newer: Vec<&(u64, Vec<journal::Change>)> = records.iter().filter(|(seq, _)| *seq > durable_seq).collect();
    let last = newer.iter().map(|(seq, _)| *seq).max().unwrap_or(durable_seq).max(durable_seq);
    let mut rows = Vec::new();
    for (_, changes) in &newer {
        rows.extend(store::change_rows(changes)?);
    }
    let seq = last.to_be_bytes();
    rows.push((schema::TABLE_META, schema::META_JOURNAL_SEQ_KEY, Some(seq.as_slice())));
    kv.commit(&mut rows.into_iter())?;
    if !newer.is_empty() {
        tracing::info!(records = newer.len(), last_seq = last, "replayed the MDT journal after a crash");
    }
    journal::Journal::open(journal.clone(), last)?.reset()?;
    Ok(last)
}
