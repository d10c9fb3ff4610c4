//! The reply cache's values. Every resendable mutation stores its reply under its client's
//! reply slot (store.rs, `put_reply`; the client side is weft-client's reply_slots.rs), so
//! that a resend after a reconnect or an MDS restart gets the first answer instead of a
//! second effect. A client sends its next mutation in a slot only once it has the answer to
//! the last one or gave up on it, so each slot's row is overwritten rather than added to:
//! the table holds one row per slot in use, not one per mutation. Replies live with every
//! other change: in memory and in the journal until the next checkpoint writes them into
//! redb.

use weft_proto::msg::{MdtReply, RequestHeader};
use weft_proto::{ErrorCode, WeftError, WeftResult};

/// Bytes before the encoded reply: the stored time and the request id.
const PREFIX_BYTES: usize = 16;

/// The value of a reply-cache row: when it was stored (unix seconds), which request it
/// answered, then the reply.
pub fn encode(now_secs: u64, request_id: u64, reply: &WeftResult<MdtReply>) -> Vec<u8> {
    let mut v = Vec::with_capacity(64);
    v.extend_from_slice(&now_secs.to_be_bytes());
    v.extend_from_slice(&request_id.to_be_bytes());
    postcard::to_io(reply, &mut v).expect("encoding a reply into memory cannot fail");
    v
}

/// When a row was stored (unix seconds) and the request it answered.
pub fn stored(v: &[u8]) -> WeftResult<(u64, u64)> {
    let Some(prefix) = v.get(..PREFIX_BYTES) else {
        return Err(WeftError::io(format!("corrupt reply-cache entry of {} bytes", v.len())));
    };
    let secs = crate::schema::decode_u64(&prefix[..8], "reply-cache time")?;
    Ok((secs, crate::schema::decode_u64(&prefix[8..], "reply-cache request id")?))
}

/// What `header`'s request gets from its slot's row `v` without executing: the stored
/// reply if it is this request's (a resend), an error if the slot has moved on to a later
/// request (this is a stale resend its client no longer waits for), or `None` to execute
/// it (the row answered an earlier request, whose reply the client has).
pub fn answer(header: &RequestHeader, v: &[u8]) -> WeftResult<Option<WeftResult<MdtReply>>> {
    let (_, stored_id) = stored(v)?;
    let (client, slot, id) = (header.client_id, header.reply_slot, header.request_id);
    if stored_id < id {
        return Ok(None);
    }
    if stored_id > id {
        return Ok(Some(Err(WeftError::new(
            ErrorCode::Stale,
            format!(
                "request {id} of client {client:#x} is older than request {stored_id} in its reply slot {slot}: \
                 a stale resend, not executed"
            ),
        ))));
    }
    postcard::from_bytes(&v[PREFIX_BYTES..]).map(Some).map_err(|e| {
        WeftError::io(format!("corrupt reply-cache entry of client {client:#x} slot {slot} request {id}: {e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::mem::{MemJournal, MemKv};
    use crate::storage::{JournalStore, KvStore};
    use crate::store::{Tables, WriteTables};
    use std::sync::Arc;

    fn header(client_id: u64, reply_slot: u32, request_id: u64) -> RequestHeader {
        RequestHeader { client_id, request_id, reply_slot, ..Default::default() }
    }

    #[test]
    fn a_row_answers_its_own_request_refuses_older_ones_and_lets_newer_ones_run() {
        let ok: WeftResult<MdtReply> = Ok(MdtReply::Empty);
        let err: WeftResult<MdtReply> = Err(WeftError::new(ErrorCode::Exists, "'f' exists already"));
        let (a, b) = (encode(7, 20, &ok), encode(9, 21, &err));
        assert_eq!(stored(&a).unwrap(), (7, 20));
        assert_eq!(answer(&header(1, 0, 20), &a).unwrap(), Some(ok));
        assert_eq!(answer(&header(1, 0, 21), &b).unwrap(), Some(err));
        assert_eq!(answer(&header(1, 0, 22), &b).unwrap(), None, "the next request in the slot runs");
        let stale = answer(&header(1, 0, 19), &a).unwrap().unwrap().unwrap_err();
        assert_eq!(stale.code, ErrorCode::Stale);
        assert!(stale.message.contains("stale resend"), "{stale}");
        assert!(stored(&a[..12]).is_err());
        assert!(answer(&header(1, 0, 20), &a[..17]).is_err(), "a cut reply is corrupt");
    }

    /// A crash before the checkpoint: the store never got the reply, the journal did, and
    /// replay puts it where a resend finds it.
    #[test]
    fn a_journaled_reply_is_found_after_replay() {
        let kv = MemKv::default();
        let store: Arc<dyn JournalStore> = Arc::new(MemJournal::default());
        crate::startup::format_or_check(&kv, 0).unwrap();
        let reply: WeftResult<MdtReply> = Ok(MdtReply::Empty);
        let h = header(7, 3, 8);
        let read = |kv: &dyn KvStore| Tables::at_checkpoint(kv).unwrap().cached_reply(&h).unwrap();
        let mut t = WriteTables::over(Tables::at_checkpoint(&kv).unwrap());
        t.put_reply(&h, 99, &reply).unwrap();
        assert_eq!(t.cached_reply(&h).unwrap(), Some(reply.clone()), "the batch sees its own reply");
        assert_eq!(t.changes.len(), 1, "one row per reply");
        let mut journal = crate::journal::Journal::open(store.clone(), 0).unwrap();
        journal.append(&t.changes).unwrap();
        drop(journal);
        assert_eq!(read(&kv), None, "not in the store before the replay");
        crate::startup::replay_journal(&kv, &store).unwrap();
        assert_eq!(read(&kv), Some(reply));
    }
}
