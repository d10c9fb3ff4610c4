//! Requests the simulations make as a client would.

use weft_proto::msg::{mdt, Identity, RequestHeader, OPEN_READ, OPEN_WRITE};
use weft_proto::Fid;

/// A root client's request header.
pub fn header(client_id: u64, request_id: u64) -> RequestHeader {
    RequestHeader { client_id, request_id, reply_slot: 1, identity: Identity::root(), jobid: "sim".into() }
}

/// A new file `name` in `parent`, of the default layout, opened for reading and writing.
pub fn create_file(parent: Fid, name: String) -> mdt::Create {
    mdt::Create {
        parent,
        name: name.into_bytes(),
        mode: 0o644,
        exclusive: true,
        spec: None,
        open_flags: OPEN_READ | OPEN_WRITE,
        umask: 0,
    }
}
