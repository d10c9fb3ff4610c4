//! Typed access to the schema's tables, the same code for read and write transactions.
//! Reads are generic over redb's `ReadableTable`; writes exist only on write-transaction tables.

use crate::journal::Change;
use crate::schema::{self, Bytes, InodeRecord};
use redb::{ReadTransaction, ReadableTable, Table, WriteTransaction};
use weft_proto::msg::{FileType, MdtReply};
use weft_proto::{Fid, WeftError, WeftResult};

/// Storage errors become EIO with what failed; the MDT's state on disk is unchanged by a
/// failed transaction.
pub fn storage_err(e: impl std::fmt::Display) -> WeftError {
    WeftError::io(format!("MDT storage error: {e}"))
}

/// The two rows of a stored reply: the reply itself, and its entry in the by-time index
/// the pruner walks.
fn reply_rows(client_id: u64, request_id: u64, stored_secs: u64, value: &[u8]) -> [Change; 2] {
    [
        Change {
            table: schema::TABLE_REPLY_CACHE,
            key: schema::reply_key(client_id, request_id).to_vec(),
            value: Some(value.to_vec()),
        },
        Change {
            table: schema::TABLE_REPLY_BY_TIME,
            key: schema::reply_time_key(stored_secs, client_id, request_id).to_vec(),
            value: Some(Vec::new()),
        },
    ]
}

/// The tables of one transaction.
pub struct Tables<T> {
    pub inodes: T,
    pub dentries: T,
    pub links: T,
    pub xattrs: T,
    pub reply_cache: T,
    pub reply_by_time: T,
    pub orphans: T,
    pub destroy_queue: T,
    pub precreate: T,
    pub counters: T,
    /// Every write of this transaction, in order, for the journal (empty for reads).
    pub changes: Vec<Change>,
}

pub type ReadTables = Tables<redb::ReadOnlyTable<Bytes, Bytes>>;
pub type WriteTables<'t> = Tables<Table<'t, Bytes, Bytes>>;

/// Opens every table of the schema in `txn`; read and write transactions open the same list.
macro_rules! open_tables {
    ($txn:expr) => {{
        let txn = $txn;
        let open = |d| txn.open_table(d).map_err(storage_err);
        Ok(Tables {
            inodes: open(schema::INODES)?,
            dentries: open(schema::DENTRIES)?,
            links: open(schema::LINKS)?,
            xattrs: open(schema::XATTRS)?,
            reply_cache: open(schema::REPLY_CACHE)?,
            reply_by_time: open(schema::REPLY_BY_TIME)?,
            orphans: open(schema::ORPHANS)?,
            destroy_queue: open(schema::DESTROY_QUEUE)?,
            precreate: open(schema::PRECREATE)?,
            counters: open(schema::COUNTERS)?,
            changes: Vec::new(),
        })
    }};
}

pub fn read_tables(txn: &ReadTransaction) -> WeftResult<ReadTables> {
    open_tables!(txn)
}

pub fn write_tables(txn: &WriteTransaction) -> WeftResult<WriteTables<'_>> {
    open_tables!(txn)
}

/// One directory entry as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEntry {
    pub hash: u64,
    pub name: Vec<u8>,
    pub fid: Fid,
    pub kind: FileType,
}

impl<T: ReadableTable<Bytes, Bytes>> Tables<T> {
    pub fn inode(&self, fid: Fid) -> WeftResult<Option<InodeRecord>> {
        match self.inodes.get(fid.to_bytes().as_slice()).map_err(storage_err)? {
            Some(v) => Ok(Some(schema::decode_inode(fid, v.value())?)),
            None => Ok(None),
        }
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
        match self.dentries.get(schema::dentry_key(parent, name).as_slice()).map_err(storage_err)? {
            Some(v) => Ok(Some(schema::decode_dentry(v.value())?)),
            None => Ok(None),
        }
    }

    /// Entries of `dir` with hash >= `from_hash`, in hash order, at most `limit`.
    pub fn entries_from(&self, dir: Fid, from_hash: u64, limit: usize) -> WeftResult<Vec<StoredEntry>> {
        let lo = schema::dentry_key_from_hash(dir, from_hash);
        let hi = schema::dentry_key_end(dir);
        let mut out = Vec::new();
        for item in self.dentries.range::<&[u8]>(lo.as_slice()..hi.as_slice()).map_err(storage_err)? {
            if out.len() >= limit {
                break;
            }
            let (k, v) = item.map_err(storage_err)?;
            let (hash, name) = schema::split_dentry_key(k.value())?;
            let (fid, kind) = schema::decode_dentry(v.value())?;
            out.push(StoredEntry { hash, name: name.to_vec(), fid, kind });
        }
        Ok(out)
    }

    pub fn dir_is_empty(&self, dir: Fid) -> WeftResult<bool> {
        Ok(self.entries_from(dir, 0, 1)?.is_empty())
    }

    /// One (parent, name) of `fid`, if it has any name.
    pub fn first_link(&self, fid: Fid) -> WeftResult<Option<(Fid, Vec<u8>)>> {
        let lo = fid.to_bytes();
        let hi = schema::prefix_end(&lo);
        let mut range = self.links.range::<&[u8]>(lo.as_slice()..hi.as_slice()).map_err(storage_err)?;
        match range.next() {
            Some(item) => {
                let (k, _) = item.map_err(storage_err)?;
                let (parent, name) = schema::split_link_key(k.value())?;
                Ok(Some((parent, name.to_vec())))
            }
            None => Ok(None),
        }
    }

    pub fn xattr(&self, fid: Fid, name: &[u8]) -> WeftResult<Option<Vec<u8>>> {
        Ok(self.xattrs.get(schema::xattr_key(fid, name).as_slice()).map_err(storage_err)?.map(|v| v.value().to_vec()))
    }

    pub fn xattr_names(&self, fid: Fid) -> WeftResult<Vec<Vec<u8>>> {
        let lo = fid.to_bytes();
        let hi = schema::prefix_end(&lo);
        let mut out = Vec::new();
        for item in self.xattrs.range::<&[u8]>(lo.as_slice()..hi.as_slice()).map_err(storage_err)? {
            let (k, _) = item.map_err(storage_err)?;
            out.push(k.value()[16..].to_vec());
        }
        Ok(out)
    }

    /// A stored reply of a mutation, if this request was executed already and its reply is
    /// in the tables (see [`crate::Core::cached_reply`] for the replies held in memory).
    pub fn cached_reply(&self, client_id: u64, request_id: u64) -> WeftResult<Option<WeftResult<MdtReply>>> {
        let key = schema::reply_key(client_id, request_id);
        match self.reply_cache.get(key.as_slice()).map_err(storage_err)? {
            Some(v) => Ok(Some(crate::replies::decode(client_id, request_id, v.value())?)),
            None => Ok(None),
        }
    }

    pub fn precreate_state(&self, ost: u32) -> WeftResult<Option<(u32, u32)>> {
        match self.precreate.get(ost.to_be_bytes().as_slice()).map_err(storage_err)? {
            Some(v) => Ok(Some(schema::decode_precreate(ost, v.value())?)),
            None => Ok(None),
        }
    }

    /// Up to `limit` destroy-queue entries.
    pub fn destroy_entries(&self, limit: usize) -> WeftResult<Vec<(u32, Fid)>> {
        let mut out = Vec::new();
        for item in self.destroy_queue.iter().map_err(storage_err)? {
            if out.len() >= limit {
                break;
            }
            let (k, _) = item.map_err(storage_err)?;
            out.push(schema::split_destroy_key(k.value())?);
        }
        Ok(out)
    }

    pub fn orphan_fids(&self, limit: usize) -> WeftResult<Vec<Fid>> {
        let mut out = Vec::new();
        for item in self.orphans.iter().map_err(storage_err)? {
            if out.len() >= limit {
                break;
            }
            let (k, _) = item.map_err(storage_err)?;
            out.push(schema::decode_fid(k.value(), "the orphan table")?);
        }
        Ok(out)
    }

    pub fn inode_count(&self) -> WeftResult<u64> {
        self.inodes.len().map_err(storage_err)
    }
}

impl<'t> WriteTables<'t> {
    fn table(&mut self, id: u8) -> &mut Table<'t, Bytes, Bytes> {
        match id {
            schema::TABLE_INODES => &mut self.inodes,
            schema::TABLE_DENTRIES => &mut self.dentries,
            schema::TABLE_LINKS => &mut self.links,
            schema::TABLE_XATTRS => &mut self.xattrs,
            schema::TABLE_REPLY_CACHE => &mut self.reply_cache,
            schema::TABLE_REPLY_BY_TIME => &mut self.reply_by_time,
            schema::TABLE_ORPHANS => &mut self.orphans,
            schema::TABLE_DESTROY_QUEUE => &mut self.destroy_queue,
            schema::TABLE_PRECREATE => &mut self.precreate,
            schema::TABLE_COUNTERS => &mut self.counters,
            other => panic!("table id {other} is not in the schema"),
        }
    }

    /// Every write goes through here or [`Self::del`], so the journal sees all of them.
    fn put(&mut self, table: u8, key: &[u8], value: &[u8]) -> WeftResult<()> {
        self.table(table).insert(key, value).map_err(storage_err)?;
        self.changes.push(Change { table, key: key.to_vec(), value: Some(value.to_vec()) });
        Ok(())
    }

    /// Removes a key; true if it was there.
    fn del(&mut self, table: u8, key: &[u8]) -> WeftResult<bool> {
        let existed = self.table(table).remove(key).map_err(storage_err)?.is_some();
        if existed {
            self.changes.push(Change { table, key: key.to_vec(), value: None });
        }
        Ok(existed)
    }

    /// Applies one journaled write again (replay after a crash).
    pub fn replay(&mut self, c: &Change) -> WeftResult<()> {
        if !schema::is_table_id(c.table) {
            return Err(WeftError::io(format!(
                "the MDT journal names table {} that this version does not know",
                c.table
            )));
        }
        match &c.value {
            Some(v) => self.put(c.table, &c.key, v),
            None => self.del(c.table, &c.key).map(|_| ()),
        }
    }

    pub fn put_inode(&mut self, fid: Fid, rec: &InodeRecord) -> WeftResult<()> {
        self.put(schema::TABLE_INODES, fid.to_bytes().as_slice(), schema::encode_inode(rec).as_slice())?;
        Ok(())
    }

    /// Adds a name: the entry and its reverse link.
    pub fn add_entry(&mut self, parent: Fid, name: &[u8], child: Fid, kind: FileType) -> WeftResult<()> {
        let key = schema::dentry_key(parent, name);
        self.put(schema::TABLE_DENTRIES, key.as_slice(), schema::encode_dentry(child, kind).as_slice())?;
        let link = schema::link_key(child, parent, name);
        self.put(schema::TABLE_LINKS, link.as_slice(), [].as_slice())?;
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
        let mut n = match self.counters.get(schema::COUNTER_NEXT_INODE_KEY).map_err(storage_err)? {
            Some(v) => schema::decode_u64(v.value(), "inode counter")?,
            None => 2,
        };
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

    /// Removes an inode for good: its record, xattrs, orphan mark; queues its objects for
    /// destroy. The caller has removed every name already.
    pub fn destroy_inode(&mut self, fid: Fid, rec: &InodeRecord) -> WeftResult<()> {
        self.del(schema::TABLE_INODES, fid.to_bytes().as_slice())?;
        self.del(schema::TABLE_ORPHANS, fid.to_bytes().as_slice())?;
        for name in self.xattr_names(fid)? {
            self.remove_xattr(fid, &name)?;
        }
        if let Some(layout) = &rec.layout {
            for comp in &layout.components {
                for obj in &comp.objects {
                    self.queue_destroy(obj.ost, obj.fid)?;
                }
            }
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

    /// Writes a reply-cache row (`value` from [`crate::replies::encode`], stored at
    /// `stored_secs`) and its entry in the by-time index.
    pub fn put_reply(&mut self, client_id: u64, request_id: u64, stored_secs: u64, value: &[u8]) -> WeftResult<()> {
        for c in reply_rows(client_id, request_id, stored_secs, value) {
            self.put(c.table, &c.key, c.value.as_deref().unwrap_or_default())?;
        }
        Ok(())
    }

    /// Records the same writes as [`Tables::put_reply`] for the journal only, leaving the
    /// tables alone: the reply is held in memory until a checkpoint (see replies.rs).
    pub fn journal_reply(&mut self, client_id: u64, request_id: u64, stored_secs: u64, value: &[u8]) {
        self.changes.extend(reply_rows(client_id, request_id, stored_secs, value));
    }

    /// Removes at most `limit` replies stored before `before_secs`; returns how many.
    pub fn prune_replies(&mut self, before_secs: u64, limit: usize) -> WeftResult<usize> {
        let hi = before_secs.to_be_bytes();
        let mut old = Vec::new();
        for item in self.reply_by_time.range::<&[u8]>(..hi.as_slice()).map_err(storage_err)? {
            if old.len() >= limit {
                break;
            }
            let (k, _) = item.map_err(storage_err)?;
            old.push(k.value().to_vec());
        }
        for k in &old {
            self.del(schema::TABLE_REPLY_BY_TIME, k.as_slice())?;
            self.del(schema::TABLE_REPLY_CACHE, &k[8..])?;
        }
        Ok(old.len())
    }
}
