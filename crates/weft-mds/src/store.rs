//! Typed access to the MDT's tables: what reads and mutations see, and how changes reach the
//! durable store (redb by default; see storage/).
//!
//! # The tables in memory over the last checkpoint
//!
//! A mutation does not write redb. Each batch of the writer (writer.rs) applies its changes
//! to the [`Overlay`], an in-memory copy-on-write map per table of every row changed since
//! the last checkpoint (`None`: removed), and appends the same changes to the journal
//! (journal.rs) before anyone is answered, so a process crash loses nothing acknowledged.
//! Every CHECKPOINT_INTERVAL_MS the checkpoint writes the whole overlay into redb in one
//! durable transaction and starts an empty one over the new state.
//!
//! A redb write transaction per batch cost about 70 us under load (begin, open the tables,
//! copy and checksum the dirty B-tree pages at commit), more than the operation itself; a
//! checkpoint writes thousands of rows in one, many to a page.
//!
//! Reads see [`Tables`]: the durable tables as of the last checkpoint (one snapshot of the
//! store, taken once per checkpoint) with the overlay over them. The overlay is a persistent map
//! (`imbl::OrdMap`), so a view is a snapshot: cloning it costs a few reference counts, and
//! the writer's next batch copies only the nodes it changes. A read keeps its view for the
//! whole operation and sees one committed state.

use crate::journal::Change;
use crate::schema::{self, InodeRecord};
use crate::storage::{KvSnapshot, KvStore, Row as StoreRow};
use imbl::OrdMap;
use std::ops::{Bound, Deref};
use std::sync::Arc;
use weft_proto::msg::changelog::ChangelogRecord;
use weft_proto::msg::hsm::HsmActionItem;
use weft_proto::msg::{FileType, MdtReply, RequestHeader};
use weft_proto::{Fid, WeftError, WeftResult};

/// Tables with rows in the overlay: every table but `meta`, by id (schema::TABLE_*).
const TABLE_SLOTS: usize = schema::TABLE_NAMES.len() - 1;

fn slot(table: u8) -> usize {
    assert!(schema::is_table_id(table), "table id {table} is not in the schema");
    table as usize - 1
}

/// A row changed since the last checkpoint: its new value, or `None` if removed.
type Row = Option<Arc<[u8]>>;

/// Calls `f` with an overlay row; a removal hides its key. False to stop.
fn emit(key: &[u8], row: &Row, f: &mut impl FnMut(&[u8], &[u8]) -> WeftResult<bool>) -> WeftResult<bool> {
    match row {
        Some(v) => f(key, v),
        None => Ok(true),
    }
}

/// Every row changed since the last checkpoint, by table.
#[derive(Clone, Default)]
pub struct Overlay {
    tables: [OrdMap<Arc<[u8]>, Row>; TABLE_SLOTS],
    /// Inodes added minus inodes removed since the checkpoint (for the inode count).
    inode_delta: i64,
}

impl Overlay {
    /// Rows held, removals included.
    pub fn rows(&self) -> usize {
        self.tables.iter().map(OrdMap::len).sum()
    }
}

/// What an operation reads: the tables at the last checkpoint with every change since over
/// them. Cheap to clone.
#[derive(Clone)]
pub struct Tables {
    /// The durable tables as of the last checkpoint.
    base: Arc<dyn KvSnapshot>,
    over: Overlay,
}

/// A batch's view while the writer applies it: its writes go into its own copy of the
/// overlay, and into `changes` for the journal.
pub struct WriteTables {
    view: Tables,
    /// Every write of this batch, in order, for the journal.
    pub changes: Vec<Change>,
}

impl Deref for WriteTables {
    type Target = Tables;
    fn deref(&self) -> &Tables {
        &self.view
    }
}

/// One directory entry as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEntry {
    pub hash: u64,
    pub name: Vec<u8>,
    pub fid: Fid,
    pub kind: FileType,
}

impl Tables {
    /// The state right after a checkpoint: the store's tables and nothing over them.
    pub fn at_checkpoint(kv: &dyn KvStore) -> WeftResult<Tables> {
        Ok(Tables { base: kv.snapshot()?, over: Overlay::default() })
    }

    /// The changes since the last checkpoint.
    pub fn overlay(&self) -> &Overlay {
        &self.over
    }

    /// Calls `f` with the value of `key` in `table`, if the row exists.
    fn with_row<R>(&self, table: u8, key: &[u8], f: impl FnOnce(&[u8]) -> WeftResult<R>) -> WeftResult<Option<R>> {
        if let Some(row) = self.over.tables[slot(table)].get(key) {
            return row.as_deref().map(f).transpose();
        }
        let mut f = Some(f);
        let mut found = None;
        self.base.get(table, key, &mut |v| found = f.take().map(|f| f(v)))?;
        found.transpose()
    }

    fn exists(&self, table: u8, key: &[u8]) -> WeftResult<bool> {
        Ok(self.with_row(table, key, |_| Ok(()))?.is_some())
    }

    /// Calls `f` with every row of `table` whose key is `lo` or above and below `hi` (to the
    /// end of the table when `None`), in key order, until it returns false. The overlay's
    /// rows replace the checkpoint's and its removals hide them.
    fn scan(
        &self,
        table: u8,
        lo: &[u8],
        hi: Option<&[u8]>,
        mut f: impl FnMut(&[u8], &[u8]) -> WeftResult<bool>,
    ) -> WeftResult<()> {
        let upper = hi.map_or(Bound::Unbounded, Bound::Excluded);
        let mut over = self.over.tables[slot(table)].range::<_, [u8]>((Bound::Included(lo), upper)).peekable();
        let mut failed = None;
        let mut go_on = true;
        // Calls `f` with an overlay row (a removal hides the key); false to stop.
        // The store's rows, in order, with the overlay's merged in: an overlay row replaces
        // the stored row of the same key.
        self.base.scan(table, lo, hi, &mut |bk, bv| {
            let step = (|| {
                while let Some((ok, row)) = over.next_if(|(ok, _)| ok[..] < *bk) {
                    if !emit(ok, row, &mut f)? {
                        return Ok(false);
                    }
                }
                match over.next_if(|(ok, _)| ok[..] == *bk) {
                    Some((ok, row)) => emit(ok, row, &mut f),
                    None => f(bk, bv),
                }
            })();
            match step {
                Ok(more) => go_on = more,
                Err(e) => {
                    failed = Some(e);
                    go_on = false;
                }
            }
            go_on
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        while go_on {
            let Some((ok, row)) = over.next() else { break };
            go_on = emit(ok, row, &mut f)?;
        }
        Ok(())
    }

    /// Keys of `table` from `lo` (to the end when `hi` is `None`), at most `limit`.
    fn keys(&self, table: u8, lo: &[u8], hi: Option<&[u8]>, limit: usize) -> WeftResult<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        self.scan(table, lo, hi, |k, _| {
            out.push(k.to_vec());
            Ok(out.len() < limit)
        })?;
        Ok(out)
    }

    pub fn inode(&self, fid: Fid) -> WeftResult<Option<InodeRecord>> {
        self.with_row(schema::TABLE_INODES, fid.to_bytes().as_slice(), |v| schema::decode_inode(fid, v))
    }

    /// The inode, or NotFound naming it.
    pub fn must_inode(&self, fid: Fid) -> WeftResult<InodeRecord> {
        self.inode(fid)?.ok_or_else(|| WeftError::not_found(format!("no inode {fid} on this MDT")))
    }

    /// The inode of a directory, or NotFound / NotDir.
    pub fn must_dir(&self, fid: Fid) -> WeftResult<InodeRecord> {
        let rec = self.must_inode(fid)?;
        if rec.kind != FileType::Directory {
            return Err(WeftError::new(weft_proto::ErrorCode::NotDir, format!("{fid} is not a directory")));
        }
        Ok(rec)
    }

    pub fn dentry(&self, parent: Fid, name: &[u8]) -> WeftResult<Option<(Fid, FileType)>> {
        self.with_row(schema::TABLE_DENTRIES, schema::dentry_key(parent, name).as_slice(), schema::decode_dentry)
    }

    /// Calls `f` with the entries of `dir` whose hash is `from_hash` or above, in hash
    /// order, until it returns false.
    pub fn scan_entries(
        &self,
        dir: Fid,
        from_hash: u64,
        mut f: impl FnMut(StoredEntry) -> WeftResult<bool>,
    ) -> WeftResult<()> {
        let lo = schema::dentry_key_from_hash(dir, from_hash);
        let hi = schema::dentry_key_end(dir);
        self.scan(schema::TABLE_DENTRIES, &lo, Some(&hi), |k, v| {
            let (hash, name) = schema::split_dentry_key(k)?;
            let (fid, kind) = schema::decode_dentry(v)?;
            f(StoredEntry { hash, name: name.to_vec(), fid, kind })
        })
    }

    /// Entries of `dir` with hash >= `from_hash`, in hash order, at most `limit`.
    pub fn entries_from(&self, dir: Fid, from_hash: u64, limit: usize) -> WeftResult<Vec<StoredEntry>> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        self.scan_entries(dir, from_hash, |e| {
            out.push(e);
            Ok(out.len() < limit)
        })?;
        Ok(out)
    }

    pub fn dir_is_empty(&self, dir: Fid) -> WeftResult<bool> {
        Ok(self.entries_from(dir, 0, 1)?.is_empty())
    }

    /// One (parent, name) of `fid`, if it has any name.
    pub fn first_link(&self, fid: Fid) -> WeftResult<Option<(Fid, Vec<u8>)>> {
        let lo = fid.to_bytes();
        let hi = schema::prefix_end(&lo);
        match self.keys(schema::TABLE_LINKS, &lo, Some(&hi), 1)?.first() {
            Some(k) => {
                let (parent, name) = schema::split_link_key(k)?;
                Ok(Some((parent, name.to_vec())))
            }
            None => Ok(None),
        }
    }

    pub fn xattr(&self, fid: Fid, name: &[u8]) -> WeftResult<Option<Vec<u8>>> {
        self.with_row(schema::TABLE_XATTRS, schema::xattr_key(fid, name).as_slice(), |v| Ok(v.to_vec()))
    }

    pub fn xattr_names(&self, fid: Fid) -> WeftResult<Vec<Vec<u8>>> {
        let lo = fid.to_bytes();
        let hi = schema::prefix_end(&lo);
        let keys = self.keys(schema::TABLE_XATTRS, &lo, Some(&hi), usize::MAX)?;
        Ok(keys.into_iter().map(|k| k[16..].to_vec()).collect())
    }

    /// What the reply cache answers `header`'s mutation without executing it, if anything
    /// (see [`crate::replies::answer`]).
    pub fn cached_reply(&self, header: &RequestHeader) -> WeftResult<Option<WeftResult<MdtReply>>> {
        let key = schema::reply_key(header.client_id, header.reply_slot);
        Ok(self.with_row(schema::TABLE_REPLY_CACHE, key.as_slice(), |v| crate::replies::answer(header, v))?.flatten())
    }

    /// Rows in the reply cache.
    #[cfg(test)]
    pub(crate) fn reply_rows(&self) -> usize {
        self.keys(schema::TABLE_REPLY_CACHE, &[], None, usize::MAX).map_or(0, |k| k.len())
    }

    pub fn precreate_state(&self, ost: u32) -> WeftResult<Option<(u32, u32)>> {
        self.with_row(schema::TABLE_PRECREATE, ost.to_be_bytes().as_slice(), |v| schema::decode_precreate(ost, v))
    }

    /// Destroy-queue entries in queue order whose OST `take` accepts, at most `limit`.
    pub fn destroy_entries(&self, limit: usize, mut take: impl FnMut(u32) -> bool) -> WeftResult<Vec<(u32, Fid)>> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        self.scan(schema::TABLE_DESTROY_QUEUE, &[], None, |k, _| {
            let (ost, fid) = schema::split_destroy_key(k)?;
            if take(ost) {
                out.push((ost, fid));
            }
            Ok(out.len() < limit)
        })?;
        Ok(out)
    }

    pub fn orphan_fids(&self, limit: usize) -> WeftResult<Vec<Fid>> {
        let keys = self.keys(schema::TABLE_ORPHANS, &[], None, limit)?;
        keys.iter().map(|k| schema::decode_fid(k, "the orphan table")).collect()
    }

    pub fn inode_count(&self) -> WeftResult<u64> {
        let base = self.base.len(schema::TABLE_INODES)?;
        Ok(base.saturating_add_signed(self.over.inode_delta))
    }
}

/// The changelog's rows (see schema.rs and changelog.rs).
impl Tables {
    fn counter(&self, key: &[u8], what: &str) -> WeftResult<Option<u64>> {
        self.with_row(schema::TABLE_COUNTERS, key, |v| schema::decode_u64(v, what))
    }

    /// Whether any file of the MDT ever had an HSM state.
    pub fn hsm_used(&self) -> WeftResult<bool> {
        Ok(self.counter(schema::COUNTER_HSM_USED_KEY, "HSM marker")?.is_some())
    }

    /// The index the next changelog record takes (from 1).
    pub fn changelog_next(&self) -> WeftResult<u64> {
        Ok(self.counter(schema::COUNTER_CHANGELOG_NEXT_KEY, "changelog counter")?.unwrap_or(1))
    }

    /// The first record kept, if any.
    pub fn changelog_first(&self) -> WeftResult<Option<u64>> {
        let keys = self.keys(schema::TABLE_CHANGELOG, &[], None, 1)?;
        keys.first().map(|k| schema::decode_u64(k, "changelog key")).transpose()
    }

    /// Records from index `from` up to `to` (inclusive), at most `limit`.
    pub fn changelog_records(&self, from: u64, to: u64, limit: usize) -> WeftResult<Vec<ChangelogRecord>> {
        let mut out = Vec::new();
        if limit == 0 || from > to {
            return Ok(out);
        }
        let hi = to.checked_add(1).map(u64::to_be_bytes);
        self.scan(schema::TABLE_CHANGELOG, &from.to_be_bytes(), hi.as_ref().map(|h| h.as_slice()), |k, v| {
            let index = schema::decode_u64(k, "changelog key")?;
            let rec: ChangelogRecord = postcard::from_bytes(v)
                .map_err(|e| WeftError::io(format!("changelog record {index} is corrupt on the MDT: {e}")))?;
            out.push(rec);
            Ok(out.len() < limit)
        })?;
        Ok(out)
    }

    /// The registered readers, by number.
    pub fn changelog_users(&self) -> WeftResult<Vec<(u64, schema::StoredChangelogUser)>> {
        let mut out = Vec::new();
        self.scan(schema::TABLE_CHANGELOG_USERS, &[], None, |k, v| {
            let number = schema::decode_u64(k, "changelog reader key")?;
            let user = postcard::from_bytes(v)
                .map_err(|e| WeftError::io(format!("changelog reader cl{number} is corrupt on the MDT: {e}")))?;
            out.push((number, user));
            Ok(true)
        })?;
        Ok(out)
    }
}

/// The HSM coordinator's rows (see schema.rs and coordinator.rs).
impl Tables {
    pub fn hsm_action(&self, cookie: u64) -> WeftResult<Option<HsmActionItem>> {
        self.with_row(schema::TABLE_HSM_ACTIONS, &cookie.to_be_bytes(), |v| decode_action(cookie, v))
    }

    /// Every action of `fid` the coordinator holds, oldest first.
    pub fn hsm_actions_of(&self, fid: Fid) -> WeftResult<Vec<HsmActionItem>> {
        let lo = schema::hsm_by_fid_key(fid, 0);
        let hi = schema::prefix_end(&fid.to_bytes());
        let mut cookies = Vec::new();
        self.scan(schema::TABLE_HSM_BY_FID, &lo, Some(&hi), |k, _| {
            cookies.push(schema::decode_u64(&k[16..], "HSM action index key")?);
            Ok(true)
        })?;
        let mut out = Vec::with_capacity(cookies.len());
        for cookie in cookies {
            out.extend(self.hsm_action(cookie)?);
        }
        Ok(out)
    }

    /// Every action, in cookie (arrival) order.
    pub fn all_hsm_actions(&self) -> WeftResult<Vec<HsmActionItem>> {
        let mut out = Vec::new();
        self.scan(schema::TABLE_HSM_ACTIONS, &[], None, |k, v| {
            out.push(decode_action(schema::decode_u64(k, "HSM action key")?, v)?);
            Ok(true)
        })?;
        Ok(out)
    }
}

fn decode_action(cookie: u64, v: &[u8]) -> WeftResult<HsmActionItem> {
    postcard::from_bytes(v).map_err(|e| WeftError::io(format!("HSM action {cookie:#x} is corrupt on the MDT: {e}")))
}

impl WriteTables {
    /// A new action's cookie, in MDT `mdt`'s range (`weft_proto::msg::hsm::hsm_cookie_mdt`).
    pub fn next_hsm_cookie(&mut self, mdt: u32) -> WeftResult<u64> {
        let key = schema::COUNTER_HSM_COOKIE_NEXT_KEY;
        let first = (u64::from(mdt) << weft_proto::msg::hsm::HSM_COOKIE_MDT_SHIFT).max(1);
        let n = self.counter(key, "HSM cookie counter")?.unwrap_or(1).max(first);
        self.put(schema::TABLE_COUNTERS, key, &(n + 1).to_be_bytes())?;
        Ok(n)
    }

    /// Stores an action (new or changed).
    pub fn put_hsm_action(&mut self, item: &HsmActionItem) -> WeftResult<()> {
        let value = postcard::to_stdvec(item).expect("encoding an HSM action into memory cannot fail");
        self.put(schema::TABLE_HSM_ACTIONS, &item.cookie.to_be_bytes(), &value)?;
        self.put(schema::TABLE_HSM_BY_FID, &schema::hsm_by_fid_key(item.fid, item.cookie), &[])
    }

    pub fn remove_hsm_action(&mut self, item: &HsmActionItem) -> WeftResult<()> {
        self.del(schema::TABLE_HSM_ACTIONS, &item.cookie.to_be_bytes())?;
        self.del(schema::TABLE_HSM_BY_FID, &schema::hsm_by_fid_key(item.fid, item.cookie))?;
        Ok(())
    }
}

impl WriteTables {
    /// Appends a changelog record (its index is set here); returns the index.
    pub fn append_changelog(&mut self, mut rec: ChangelogRecord) -> WeftResult<u64> {
        let index = self.changelog_next()?;
        rec.index = index;
        let value = postcard::to_stdvec(&rec).expect("encoding a changelog record into memory cannot fail");
        self.put(schema::TABLE_CHANGELOG, &index.to_be_bytes(), &value)?;
        self.put(schema::TABLE_COUNTERS, schema::COUNTER_CHANGELOG_NEXT_KEY, &(index + 1).to_be_bytes())?;
        Ok(index)
    }

    /// Notes that a file of the MDT has an HSM state (see [`Tables::hsm_used`]).
    pub fn mark_hsm_used(&mut self) -> WeftResult<()> {
        self.put(schema::TABLE_COUNTERS, schema::COUNTER_HSM_USED_KEY, &1u64.to_be_bytes())
    }

    /// A new reader's number.
    pub fn next_changelog_user(&mut self) -> WeftResult<u64> {
        let key = schema::COUNTER_CHANGELOG_USER_NEXT_KEY;
        let n = self.counter(key, "changelog reader counter")?.unwrap_or(1);
        self.put(schema::TABLE_COUNTERS, key, &(n + 1).to_be_bytes())?;
        Ok(n)
    }

    pub fn put_changelog_user(&mut self, number: u64, user: &schema::StoredChangelogUser) -> WeftResult<()> {
        let value = postcard::to_stdvec(user).expect("encoding a changelog reader into memory cannot fail");
        self.put(schema::TABLE_CHANGELOG_USERS, &number.to_be_bytes(), &value)
    }

    /// True if the reader was there.
    pub fn remove_changelog_user(&mut self, number: u64) -> WeftResult<bool> {
        self.del(schema::TABLE_CHANGELOG_USERS, &number.to_be_bytes())
    }

    /// Removes at most `limit` records with an index up to `upto`; returns how many.
    pub fn purge_changelog(&mut self, upto: u64, limit: usize) -> WeftResult<usize> {
        let hi = upto.checked_add(1).map(u64::to_be_bytes);
        let keys = self.keys(schema::TABLE_CHANGELOG, &[], hi.as_ref().map(|h| h.as_slice()), limit)?;
        for k in &keys {
            self.del(schema::TABLE_CHANGELOG, k)?;
        }
        Ok(keys.len())
    }
}

impl WriteTables {
    /// A batch's tables, starting from the committed `view`.
    pub fn over(view: Tables) -> WriteTables {
        WriteTables { view, changes: Vec::new() }
    }

    /// The state after this batch, for reads once it is journaled.
    pub fn into_view(self) -> Tables {
        self.view
    }

    /// Every write goes through here or [`Self::del`], so the journal sees all of them.
    fn put(&mut self, table: u8, key: &[u8], value: &[u8]) -> WeftResult<()> {
        if table == schema::TABLE_INODES && !self.exists(table, key)? {
            self.view.over.inode_delta += 1;
        }
        self.view.over.tables[slot(table)].insert(Arc::from(key), Some(Arc::from(value)));
        self.changes.push(Change { table, key: key.to_vec(), value: Some(value.to_vec()) });
        Ok(())
    }

    /// Removes a key; true if it was there.
    fn del(&mut self, table: u8, key: &[u8]) -> WeftResult<bool> {
        let existed = self.exists(table, key)?;
        if existed {
            if table == schema::TABLE_INODES {
                self.view.over.inode_delta -= 1;
            }
            self.view.over.tables[slot(table)].insert(Arc::from(key), None);
            self.changes.push(Change { table, key: key.to_vec(), value: None });
        }
        Ok(existed)
    }

    /// Writes `value` as it is, bypassing every encoding (tests inject corrupt rows).
    #[cfg(test)]
    pub(crate) fn put_raw(&mut self, table: u8, key: &[u8], value: &[u8]) -> WeftResult<()> {
        self.put(table, key, value)
    }

    /// Writes an inode; its count moves to its owner's quota ids when it is new or they
    /// changed (store_quota.rs).
    pub fn put_inode(&mut self, fid: Fid, rec: &InodeRecord) -> WeftResult<()> {
        let old = self.inode(fid)?.map(|r| r.quota_owner());
        self.account_inode(old, Some(rec.quota_owner()))?;
        self.put(schema::TABLE_INODES, fid.to_bytes().as_slice(), schema::encode_inode(rec).as_slice())?;
        Ok(())
    }

    /// Adds a name: the entry and its reverse link (on the child's MDT: here unless the
    /// child is on another MDT, whose own change adds it; see ops/update.rs).
    pub fn add_entry(&mut self, parent: Fid, name: &[u8], child: Fid, kind: FileType) -> WeftResult<()> {
        let key = schema::dentry_key(parent, name);
        self.put(schema::TABLE_DENTRIES, key.as_slice(), schema::encode_dentry(child, kind).as_slice())?;
        if child.mdt_index() == parent.mdt_index() {
            self.add_link_row(child, parent, name)?;
        }
        Ok(())
    }

    /// Removes a name: the entry and its reverse link.
    pub fn remove_entry(&mut self, parent: Fid, name: &[u8], child: Fid) -> WeftResult<()> {
        let existed = self.del(schema::TABLE_DENTRIES, schema::dentry_key(parent, name).as_slice())?;
        assert!(existed, "removing a directory entry that the op checked exists");
        self.del(schema::TABLE_LINKS, schema::link_key(child, parent, name).as_slice())?;
        Ok(())
    }

    /// Allocates a new inode FID in this MDT's sequences.
    pub fn next_inode_fid(&mut self, mdt_index: u32) -> WeftResult<Fid> {
        let stored = self.with_row(schema::TABLE_COUNTERS, schema::COUNTER_NEXT_INODE_KEY, |v| {
            schema::decode_u64(v, "inode counter")
        })?;
        let mut n = stored.unwrap_or(2);
        // Object id 0 is never used: FIDs with oid 0 look like "none" to tools.
        if n as u32 == 0 {
            n += 1;
        }
        let fid = schema::inode_fid(mdt_index, n);
        self.put(schema::TABLE_COUNTERS, schema::COUNTER_NEXT_INODE_KEY, (n + 1).to_be_bytes().as_slice())?;
        Ok(fid)
    }

    pub fn put_xattr(&mut self, fid: Fid, name: &[u8], value: &[u8]) -> WeftResult<()> {
        self.put(schema::TABLE_XATTRS, schema::xattr_key(fid, name).as_slice(), value)?;
        Ok(())
    }

    pub fn remove_xattr(&mut self, fid: Fid, name: &[u8]) -> WeftResult<()> {
        self.del(schema::TABLE_XATTRS, schema::xattr_key(fid, name).as_slice())?;
        Ok(())
    }

    pub fn queue_destroy(&mut self, ost: u32, object: Fid) -> WeftResult<()> {
        self.put(schema::TABLE_DESTROY_QUEUE, schema::destroy_key(ost, object).as_slice(), [].as_slice())?;
        Ok(())
    }

    pub fn unqueue_destroy(&mut self, ost: u32, object: Fid) -> WeftResult<()> {
        self.del(schema::TABLE_DESTROY_QUEUE, schema::destroy_key(ost, object).as_slice())?;
        Ok(())
    }

    pub fn add_orphan(&mut self, fid: Fid) -> WeftResult<()> {
        self.put(schema::TABLE_ORPHANS, fid.to_bytes().as_slice(), [].as_slice())?;
        Ok(())
    }

    pub fn remove_orphan(&mut self, fid: Fid) -> WeftResult<()> {
        self.del(schema::TABLE_ORPHANS, fid.to_bytes().as_slice())?;
        Ok(())
    }

    /// Removes an inode for good: its record, xattrs, orphan mark; queues its objects for
    /// destroy. The caller has removed every name already.
    pub fn destroy_inode(&mut self, fid: Fid, rec: &InodeRecord) -> WeftResult<()> {
        self.forget_inode(fid, rec)?;
        if let Some(layout) = &rec.layout {
            for comp in &layout.components {
                for obj in &comp.objects {
                    self.queue_destroy(obj.ost, obj.fid)?;
                }
            }
        }
        Ok(())
    }

    /// Removes the inode's record and what hangs on it here (extended attributes, orphan
    /// and resync marks), but not its objects: [`WriteTables::destroy_inode`] queues those,
    /// a migration hands them to the inode's new record on another MDT.
    pub fn forget_inode(&mut self, fid: Fid, rec: &InodeRecord) -> WeftResult<()> {
        if self.del(schema::TABLE_INODES, fid.to_bytes().as_slice())? {
            self.account_inode(Some(rec.quota_owner()), None)?;
        }
        self.remove_orphan(fid)?;
        if rec.layout.as_ref().is_some_and(|l| l.is_mirrored()) {
            self.unqueue_resync(fid)?;
        }
        for name in self.xattr_names(fid)? {
            self.remove_xattr(fid, &name)?;
        }
        Ok(())
    }

    /// Records that oids below `next_oid` of `ost` are handed out (never lowers it).
    pub fn persist_next_oid(&mut self, ost: u32, next_oid: u32) -> WeftResult<()> {
        self.raise_precreate(ost, next_oid, 0)
    }

    /// Records that the OST created every oid up to `created_oid` (never lowers it).
    pub fn persist_created_oid(&mut self, ost: u32, created_oid: u32) -> WeftResult<()> {
        self.raise_precreate(ost, 0, created_oid)
    }

    /// The precreate state only moves forward: an object handed out or created stays so.
    fn raise_precreate(&mut self, ost: u32, next_oid: u32, created_oid: u32) -> WeftResult<()> {
        let (next, created) = self.precreate_state(ost)?.unwrap_or((1, 0));
        let raised = (next.max(next_oid), created.max(created_oid));
        if raised != (next, created) {
            self.put(
                schema::TABLE_PRECREATE,
                ost.to_be_bytes().as_slice(),
                schema::encode_precreate(raised.0, raised.1).as_slice(),
            )?;
        }
        Ok(())
    }

    /// Stores the reply of `header`'s mutation at `stored_secs`, in place of the last one of
    /// its slot.
    pub fn put_reply(
        &mut self,
        header: &RequestHeader,
        stored_secs: u64,
        reply: &WeftResult<MdtReply>,
    ) -> WeftResult<()> {
        let value = crate::replies::encode(stored_secs, header.request_id, reply);
        self.put(schema::TABLE_REPLY_CACHE, schema::reply_key(header.client_id, header.reply_slot).as_slice(), &value)
    }

    /// Removes at most `limit` replies stored before `before_secs` (the slots of clients gone
    /// or idle since), and rows too damaged to read (each would fail every mutation sent in
    /// its slot); returns how many. Reads the whole table: one row per slot in use.
    pub fn prune_replies(&mut self, before_secs: u64, limit: usize) -> WeftResult<usize> {
        let mut old = Vec::new();
        if limit > 0 {
            self.scan(schema::TABLE_REPLY_CACHE, &[], None, |k, v| {
                if crate::replies::stored(v).map_or(true, |(secs, _)| secs < before_secs) {
                    old.push(k.to_vec());
                }
                Ok(old.len() < limit)
            })?;
        }
        for k in &old {
            self.del(schema::TABLE_REPLY_CACHE, k)?;
        }
        Ok(old.len())
    }
}

/// Every row of the overlay of `view`, for a checkpoint's commit.
pub fn overlay_rows(view: &Tables) -> impl Iterator<Item = StoreRow<'_>> {
    view.over
        .tables
        .iter()
        .enumerate()
        .flat_map(|(i, rows)| rows.iter().map(move |(k, v)| (i as u8 + 1, &k[..], v.as_deref())))
}

/// Journaled changes as rows to commit (replay after a crash); unknown tables are refused.
pub fn change_rows(changes: &[Change]) -> WeftResult<impl Iterator<Item = StoreRow<'_>>> {
    let known = |c: &Change| {
        schema::is_table_id(c.table) || (c.table == schema::TABLE_META && schema::is_journaled_meta(&c.key))
    };
    if let Some(c) = changes.iter().find(|c| !known(c)) {
        return Err(WeftError::io(format!("the MDT journal names table {} that this version does not know", c.table)));
    }
    Ok(changes.iter().map(|c| (c.table, c.key.as_slice(), c.value.as_deref())))
}

#[path = "store_dne.rs"]
mod dne;
#[path = "store_lists.rs"]
mod lists;
#[path = "store_quota.rs"]
mod quota;
#[path = "store_wbc.rs"]
mod wbc;

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
