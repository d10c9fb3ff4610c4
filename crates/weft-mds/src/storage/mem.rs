//! The MDT's storage in memory, for tests and simulations, with what a power loss leaves:
//! [`MemKv`]'s commits are durable (as a redb commit is), the journal's appends are not
//! ([`MemJournal::after_power_loss`]).

use super::{JournalStore, KvSnapshot, KvStore, Row, StorageError, StorageResult};
use crate::schema::TABLE_NAMES;
use imbl::OrdMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex};

type Table = OrdMap<Vec<u8>, Vec<u8>>;

/// Tables as persistent maps: a snapshot is a clone of a few pointers.
#[derive(Clone)]
struct Tables(Vec<Table>);

fn no_table(table: u8) -> StorageError {
    StorageError::Io(format!("no table {table} in the schema"))
}

impl Tables {
    fn table(&self, table: u8) -> StorageResult<&Table> {
        self.0.get(usize::from(table)).ok_or_else(|| no_table(table))
    }
}

pub struct MemKv {
    tables: Mutex<Tables>,
}

impl Default for MemKv {
    fn default() -> Self {
        MemKv { tables: Mutex::new(Tables(vec![Table::new(); TABLE_NAMES.len()])) }
    }
}

impl MemKv {
    fn tables(&self) -> std::sync::MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl KvStore for MemKv {
    fn snapshot(&self) -> StorageResult<Arc<dyn KvSnapshot>> {
        Ok(Arc::new(self.tables().clone()))
    }

    fn commit(&self, rows: &mut dyn Iterator<Item = Row<'_>>) -> StorageResult<()> {
        // All or nothing: applied to a copy that replaces the tables only when every row went in.
        let mut next = self.tables().clone();
        for (table, key, value) in rows {
            let t = next.0.get_mut(usize::from(table)).ok_or_else(|| no_table(table))?;
            match value {
                Some(v) => t.insert(key.to_vec(), v.to_vec()),
                None => t.remove(key),
            };
        }
        *self.tables() = next;
        Ok(())
    }
}

impl KvSnapshot for Tables {
    fn get(&self, table: u8, key: &[u8], f: &mut dyn FnMut(&[u8])) -> StorageResult<bool> {
        match self.table(table)?.get(key) {
            Some(v) => {
                f(v);
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
        for (k, v) in self.table(table)?.range::<_, [u8]>((Bound::Included(lo), upper)) {
            if !f(k, v) {
                break;
            }
        }
        Ok(())
    }

    fn len(&self, table: u8) -> StorageResult<u64> {
        Ok(self.table(table)?.len() as u64)
    }
}

/// The journal in memory: everything appended survives a crash of the process; nothing
/// survives a power loss (it was never synced).
#[derive(Default)]
pub struct MemJournal {
    bytes: Mutex<Vec<u8>>,
}

impl MemJournal {
    fn bytes(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.bytes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The journal as a machine finds it after losing power: empty.
    pub fn after_power_loss(&self) -> MemJournal {
        MemJournal::default()
    }
}

impl JournalStore for MemJournal {
    fn append(&self, bytes: &[u8]) -> StorageResult<()> {
        self.bytes().extend_from_slice(bytes);
        Ok(())
    }

    fn read_all(&self) -> StorageResult<Vec<u8>> {
        Ok(self.bytes().clone())
    }

    fn truncate(&self, len: u64) -> StorageResult<()> {
        let mut bytes = self.bytes();
        let len = usize::try_from(len).unwrap_or(usize::MAX).min(bytes.len());
        bytes.truncate(len);
        Ok(())
    }

    fn len_bytes(&self) -> StorageResult<u64> {
        Ok(self.bytes().len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(kv: &MemKv, table: u8) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        kv.snapshot()
            .unwrap()
            .scan(table, &[], None, &mut |k, v| {
                out.push((k.to_vec(), v.to_vec()));
                true
            })
            .unwrap();
        out
    }

    #[test]
    fn a_snapshot_keeps_its_view_and_a_commit_is_all_or_nothing() {
        let kv = MemKv::default();
        kv.commit(&mut [(1, b"a".as_slice(), Some(b"1".as_slice())), (1, b"b", Some(b"2"))].into_iter()).unwrap();
        let before = kv.snapshot().unwrap();
        kv.commit(&mut [(1, b"a".as_slice(), None), (2, b"x", Some(b"y".as_slice()))].into_iter()).unwrap();
        assert_eq!(before.len(1).unwrap(), 2, "an older snapshot is unchanged");
        assert_eq!(rows(&kv, 1), vec![(b"b".to_vec(), b"2".to_vec())]);
        let bad = kv.commit(&mut [(1, b"c".as_slice(), Some(b"3".as_slice())), (99, b"k", Some(b"v"))].into_iter());
        assert!(bad.is_err());
        assert_eq!(rows(&kv, 1).len(), 1, "nothing of a failed commit stays");
    }

    #[test]
    fn the_journal_keeps_appends_until_cut_and_loses_them_with_power() {
        let j = MemJournal::default();
        j.append(b"abc").unwrap();
        j.append(b"de").unwrap();
        assert_eq!(j.read_all().unwrap(), b"abcde");
        j.truncate(3).unwrap();
        assert_eq!((j.len_bytes().unwrap(), j.read_all().unwrap()), (3, b"abc".to_vec()));
        assert_eq!(j.after_power_loss().len_bytes().unwrap(), 0);
    }
}
