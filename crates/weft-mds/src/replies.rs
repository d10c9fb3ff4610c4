//! Replies held back from the MDT's tables until the next checkpoint.
//!
//! Every resendable mutation stores its reply, so that a resend after a reconnect or an MDS
//! restart gets the first answer instead of a second effect. Written into redb with the
//! mutation, the reply costs two more B-tree inserts per commit, each copying and
//! checksumming its dirty pages. With two creators that was about a tenth of a create, and
//! the rows were deleted again by the pruner.
//!
//! So a reply goes into the batch's journal record (two `Change`s, as if written) and into
//! [`Unpersisted`], in memory; the next batch that carries a checkpoint (or a prune) writes
//! everything held there into the tables at once, where many replies share each page, and
//! the held entries are then dropped. A process crash loses nothing: the journal record is
//! written before the reply is sent, and replay applies its changes to the tables. The held
//! entries are at most one checkpoint interval old, so pruning by age never misses them.
//!
//! Lookups ([`crate::Core::cached_reply`]) ask the held entries first, then the tables. An
//! entry leaves the held set only after the commit that put it in the tables is visible to
//! new reads, so a lookup that opens its view of the tables after asking the held set finds
//! the reply in one place or the other.

use crate::store::WriteTables;
use std::collections::HashMap;
use weft_proto::msg::MdtReply;
use weft_proto::{WeftError, WeftResult};

/// The value of a reply-cache row: when it was stored (unix seconds), then the reply.
pub fn encode(now_secs: u64, reply: &WeftResult<MdtReply>) -> Vec<u8> {
    let mut v = now_secs.to_be_bytes().to_vec();
    v.extend_from_slice(&postcard::to_stdvec(reply).expect("encoding a reply into memory cannot fail"));
    v
}

fn stored_secs(v: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(v.get(..8)?.try_into().ok()?))
}

pub fn decode(client_id: u64, request_id: u64, v: &[u8]) -> WeftResult<WeftResult<MdtReply>> {
    if v.len() < 8 {
        return Err(WeftError::io(format!("corrupt reply-cache entry of client {client_id:#x}")));
    }
    postcard::from_bytes(&v[8..]).map_err(|e| {
        WeftError::io(format!("corrupt reply-cache entry of client {client_id:#x} request {request_id}: {e}"))
    })
}

/// Reply-cache rows journaled but not yet in the tables, by (client, request).
#[derive(Default)]
pub struct Unpersisted {
    held: HashMap<(u64, u64), Vec<u8>>,
}

impl Unpersisted {
    pub fn get(&self, client_id: u64, request_id: u64) -> Option<&[u8]> {
        self.held.get(&(client_id, request_id)).map(Vec::as_slice)
    }

    /// Called after the commit of the batch whose journal record holds `replies`.
    pub fn hold(&mut self, replies: HashMap<(u64, u64), Vec<u8>>) {
        self.held.extend(replies);
    }

    /// Writes every held reply into the tables of `t`; returns their keys, for
    /// [`Unpersisted::forget`] once that transaction has committed.
    pub fn write_into(&self, t: &mut WriteTables<'_>) -> WeftResult<Vec<(u64, u64)>> {
        let mut keys = Vec::with_capacity(self.held.len());
        for (&(client_id, request_id), v) in &self.held {
            let secs = stored_secs(v).ok_or_else(|| WeftError::io("corrupt held reply"))?;
            t.put_reply(client_id, request_id, secs, v)?;
            keys.push((client_id, request_id));
        }
        Ok(keys)
    }

    /// Drops entries that a committed transaction put in the tables.
    pub fn forget(&mut self, keys: &[(u64, u64)]) {
        for k in keys {
            self.held.remove(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::ErrorCode;

    #[test]
    fn encode_decode_and_hold() {
        let ok: WeftResult<MdtReply> = Ok(MdtReply::Empty);
        let err: WeftResult<MdtReply> = Err(WeftError::new(ErrorCode::Exists, "'f' exists already"));
        let (a, b) = (encode(7, &ok), encode(9, &err));
        assert_eq!(stored_secs(&a), Some(7));
        assert_eq!(decode(1, 2, &a).unwrap(), ok);
        assert_eq!(decode(1, 3, &b).unwrap(), err);
        assert!(decode(1, 2, &a[..5]).is_err());
        let mut u = Unpersisted::default();
        u.hold(HashMap::from([((1, 2), a), ((1, 3), b)]));
        assert!(u.get(1, 2).is_some() && u.get(1, 3).is_some() && u.get(2, 1).is_none());
        u.forget(&[(1, 2)]);
        assert!(u.get(1, 2).is_none() && u.get(1, 3).is_some());
    }

    /// Replay after a crash applies the journal's changes: a held reply's must be exactly
    /// what writing it into the tables records.
    #[test]
    fn a_held_reply_journals_the_writes_of_a_stored_one() {
        let dir = tempfile::tempdir().unwrap();
        let db = redb::Database::create(dir.path().join("t.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut t = crate::store::write_tables(&txn).unwrap();
            let v = encode(1234, &Ok(MdtReply::Empty));
            t.put_reply(5, 6, 1234, &v).unwrap();
            let stored = std::mem::take(&mut t.changes);
            t.journal_reply(5, 6, 1234, &v);
            assert_eq!(t.changes, stored);
            assert_eq!(stored.len(), 2);
        }
        txn.commit().unwrap();
    }

    /// A crash while a reply is held: the tables never got it, the journal did.
    #[test]
    fn a_held_reply_is_found_after_replay() {
        let dir = tempfile::tempdir().unwrap();
        let db = redb::Database::create(dir.path().join("mdt.redb")).unwrap();
        crate::writer::format_or_check(&db, 0).unwrap();
        let reply: WeftResult<MdtReply> = Ok(MdtReply::Empty);
        let changes = {
            let txn = db.begin_write().unwrap();
            let mut t = crate::store::write_tables(&txn).unwrap();
            t.journal_reply(7, 8, 99, &encode(99, &reply));
            let c = std::mem::take(&mut t.changes);
            drop(t);
            txn.abort().unwrap();
            c
        };
        let mut journal = crate::journal::Journal::open(dir.path(), 0).unwrap();
        journal.append(&changes).unwrap();
        drop(journal);
        let read = |db: &redb::Database| {
            let txn = redb::ReadableDatabase::begin_read(db).unwrap();
            crate::store::read_tables(&txn).unwrap().cached_reply(7, 8).unwrap()
        };
        assert_eq!(read(&db), None, "not in the tables before the replay");
        crate::writer::replay_journal(&db, dir.path()).unwrap();
        assert_eq!(read(&db), Some(reply));
    }
}
