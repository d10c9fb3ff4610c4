//! The MDT's tables in redb: pure Rust, transactional and crash-safe, a build of seconds.
//! One redb table per schema table, bytes to bytes.

use super::{KvSnapshot, KvStore, Row, StorageError, StorageResult};
use crate::schema::TABLE_NAMES;
use redb::{Database, ReadOnlyTable, ReadableDatabase, ReadableTableMetadata, TableDefinition};
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

type Def = TableDefinition<'static, &'static [u8], &'static [u8]>;

fn def(table: u8) -> Def {
    TableDefinition::new(TABLE_NAMES[usize::from(table)])
}

fn io(e: impl std::fmt::Display) -> StorageError {
    StorageError::Io(e.to_string())
}

pub struct RedbKv {
    db: Database,
}

impl RedbKv {
    /// Opens (creating when new) the database at `path`, with every table of the schema.
    pub fn open(path: &Path) -> StorageResult<RedbKv> {
        RedbKv::open_with(path, false)
    }

    /// As [`RedbKv::open`], after checking every page of the file (redb's integrity check,
    /// which reads the whole file): a file damaged outside redb is refused with an error
    /// naming it, where a plain open may not notice until a read meets the damage. A
    /// replica of a replicated MDT opens its store so, since it must not join its group
    /// with a state it cannot vouch for.
    pub fn open_checked(path: &Path) -> StorageResult<RedbKv> {
        RedbKv::open_with(path, true)
    }

    fn open_with(path: &Path, check: bool) -> StorageResult<RedbKv> {
        let db = Database::builder().set_check_integrity_on_open(check).create(path).map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => StorageError::InUse(format!(
                "MDT database {} is already open (another MDS running on it?)",
                path.display()
            )),
            redb::DatabaseError::Storage(redb::StorageError::Corrupted(why)) => {
                StorageError::Io(format!("MDT database {} is corrupt: {why}", path.display()))
            }
            e => StorageError::Io(format!("cannot open MDT database {}: {e}", path.display())),
        })?;
        // A read transaction fails on a table that was never made: make them all.
        let txn = db.begin_write().map_err(io)?;
        for table in 0..TABLE_NAMES.len() as u8 {
            txn.open_table(def(table)).map_err(io)?;
        }
        txn.commit().map_err(io)?;
        Ok(RedbKv { db })
    }
}

impl KvStore for RedbKv {
    fn snapshot(&self) -> StorageResult<Arc<dyn KvSnapshot>> {
        let txn = self.db.begin_read().map_err(io)?;
        let tables =
            (0..TABLE_NAMES.len() as u8).map(|t| txn.open_table(def(t)).map_err(io)).collect::<Result<_, _>>()?;
        Ok(Arc::new(RedbSnapshot { tables }))
    }

    fn commit(&self, rows: &mut dyn Iterator<Item = Row<'_>>) -> StorageResult<()> {
        let txn = self.db.begin_write().map_err(io)?;
        {
            let mut tables = Vec::with_capacity(TABLE_NAMES.len());
            for table in 0..TABLE_NAMES.len() as u8 {
                tables.push(txn.open_table(def(table)).map_err(io)?);
            }
            for (table, key, value) in rows {
                let t = tables
                    .get_mut(usize::from(table))
                    .ok_or_else(|| StorageError::Io(format!("no table {table} in the schema")))?;
                match value {
                    Some(v) => t.insert(key, v).map(drop),
                    None => t.remove(key).map(drop),
                }
                .map_err(io)?;
            }
        }
        txn.commit().map_err(io)
    }
}

/// One read transaction, every table open in it.
struct RedbSnapshot {
    tables: Vec<ReadOnlyTable<&'static [u8], &'static [u8]>>,
}

impl RedbSnapshot {
    fn table(&self, table: u8) -> StorageResult<&ReadOnlyTable<&'static [u8], &'static [u8]>> {
        self.tables.get(usize::from(table)).ok_or_else(|| StorageError::Io(format!("no table {table} in the schema")))
    }
}

impl KvSnapshot for RedbSnapshot {
    fn get(&self, table: u8, key: &[u8], f: &mut dyn FnMut(&[u8])) -> StorageResult<bool> {
        match self.table(table)?.get(key).map_err(io)? {
            Some(v) => {
                f(v.value());
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn scan(
        &self,
        table: u8,
        lo: &[u8],
        hi: Option<&[u8]>,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> StorageResult<()> {
        let upper = hi.map_or(Bound::Unbounded, Bound::Excluded);
        for row in self.table(table)?.range::<&[u8]>((Bound::Included(lo), upper)).map_err(io)? {
            let (k, v) = row.map_err(io)?;
            if !f(k.value(), v.value()) {
                break;
            }
        }
        Ok(())
    }

    fn len(&self, table: u8) -> StorageResult<u64> {
        self.table(table)?.len().map_err(io)
    }
}
