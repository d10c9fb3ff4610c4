//! The reply cache's values. Every resendable mutation stores its reply (store.rs,
//! `put_reply`), so that a resend after a reconnect or an MDS restart gets the first answer
//! instead of a second effect. Replies live with every other change: in memory and in the
//! journal until the next checkpoint writes them into redb, many to a page.

use weft_proto::msg::MdtReply;
use weft_proto::{WeftError, WeftResult};

/// The value of a reply-cache row: when it was stored (unix seconds), then the reply.
pub fn encode(now_secs: u64, reply: &WeftResult<MdtReply>) -> Vec<u8> {
    let mut v = now_secs.to_be_bytes().to_vec();
    v.extend_from_slice(&postcard::to_stdvec(reply).expect("encoding a reply into memory cannot fail"));
    v
}

pub fn decode(client_id: u64, request_id: u64, v: &[u8]) -> WeftResult<WeftResult<MdtReply>> {
    if v.len() < 8 {
        return Err(WeftError::io(format!("corrupt reply-cache entry of client {client_id:#x}")));
    }
    postcard::from_bytes(&v[8..]).map_err(|e| {
        WeftError::io(format!("corrupt reply-cache entry of client {client_id:#x} request {request_id}: {e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Base, Tables, WriteTables};
    use weft_proto::ErrorCode;

    #[test]
    fn encode_decode() {
        let ok: WeftResult<MdtReply> = Ok(MdtReply::Empty);
        let err: WeftResult<MdtReply> = Err(WeftError::new(ErrorCode::Exists, "'f' exists already"));
        let (a, b) = (encode(7, &ok), encode(9, &err));
        assert_eq!(a[..8], 7u64.to_be_bytes());
        assert_eq!(decode(1, 2, &a).unwrap(), ok);
        assert_eq!(decode(1, 3, &b).unwrap(), err);
        assert!(decode(1, 2, &a[..5]).is_err());
    }

    /// A crash before the checkpoint: redb never got the reply, the journal did, and replay
    /// puts it where a resend finds it.
    #[test]
    fn a_journaled_reply_is_found_after_replay() {
        let dir = tempfile::tempdir().unwrap();
        let db = redb::Database::create(dir.path().join("mdt.redb")).unwrap();
        crate::writer::format_or_check(&db, 0).unwrap();
        let reply: WeftResult<MdtReply> = Ok(MdtReply::Empty);
        let read = |db: &redb::Database| Tables::at_checkpoint(Base::open(db).unwrap()).cached_reply(7, 8).unwrap();
        let mut t = WriteTables::over(Tables::at_checkpoint(Base::open(&db).unwrap()));
        t.put_reply(7, 8, 99, &reply).unwrap();
        assert_eq!(t.cached_reply(7, 8).unwrap(), Some(reply.clone()), "the batch sees its own reply");
        assert_eq!(t.changes.len(), 2, "the reply and its entry in the by-time index");
        let mut journal = crate::journal::Journal::open(dir.path(), 0).unwrap();
        journal.append(&t.changes).unwrap();
        drop(journal);
        assert_eq!(read(&db), None, "not in redb before the replay");
        crate::writer::replay_journal(&db, dir.path()).unwrap();
        assert_eq!(read(&db), Some(reply));
    }
}
