//! The frame that carries every message, documented byte by byte in docs/PROTOCOL.md.
//!
//! ```text
//! offset size field
//!      0    4 magic        "WFT1" (0x57465431), big-endian like every field
//!      4    2 version      PROTOCOL_VERSION
//!      6    1 kind         FrameKind
//!      7    1 flags        reserved, 0
//!      8    8 xid          matches a reply to its request on this connection
//!     16    4 msg_len      bytes of postcard-encoded message that follow the header
//!     20    4 bulk_len     bytes of bulk data that follow the message
//!     24    4 msg_crc      crc32c of the message bytes
//!     28    4 bulk_crc     crc32c of the bulk bytes (0 when bulk_len is 0)
//! ```
//!
//! A receiver checks magic, version and both lengths against [`crate::limits`] before it
//! reads anything else; a frame that fails is a [`FrameError`] and the connection is
//! dropped. A server that gets a frame of another version first answers with a bare header
//! of its own version (see [`FrameHeader::version_answer`]), so that the client can say
//! which versions met instead of resending until its timeout.

use crate::error::{WeftError, WeftResult};
use crate::limits::{BULK_BYTES_MAX, MESSAGE_BYTES_MAX};
use serde::de::DeserializeOwned;
use serde::Serialize;

pub const MAGIC: u32 = 0x5746_5431;
pub const PROTOCOL_VERSION: u16 = 28;
pub const HEADER_BYTES: usize = 32;

/// Why a frame header was refused. Callers tell them apart: a peer that is not Weft, or
/// speaks another version, will not do better on a resend; a version mismatch is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("bad frame magic {0:#010x}: not a Weft peer")]
    NotWeft(u32),
    #[error("the peer speaks Weft protocol version {theirs}, this build speaks {ours}: clients and servers must run the same Weft release")]
    Version { theirs: u16, ours: u16 },
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    #[error("message of {0} bytes exceeds {MESSAGE_BYTES_MAX}")]
    MessageTooLarge(u32),
    #[error("bulk of {0} bytes exceeds {BULK_BYTES_MAX}")]
    BulkTooLarge(u32),
}

impl From<FrameError> for WeftError {
    fn from(e: FrameError) -> WeftError {
        WeftError::protocol(e.to_string())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    /// Client to server.
    Request = 0,
    /// Server to client, answering a Request with the same xid.
    Reply = 1,
    /// Server to client, unasked (lock callbacks, later).
    Callback = 2,
    /// Client to server, answering a Callback.
    CallbackReply = 3,
    /// Server to client: the request with this xid is held back by a scheduling policy (a
    /// rate limit); its reply comes later. No message. The client may stop waiting for it
    /// on a thread it needs for other work.
    Held = 4,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub kind: FrameKind,
    pub xid: u64,
    pub msg_len: u32,
    pub bulk_len: u32,
    pub msg_crc: u32,
    pub bulk_crc: u32,
}

impl FrameHeader {
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&PROTOCOL_VERSION.to_be_bytes());
        b[6] = self.kind as u8;
        b[7] = 0;
        b[8..16].copy_from_slice(&self.xid.to_be_bytes());
        b[16..20].copy_from_slice(&self.msg_len.to_be_bytes());
        b[20..24].copy_from_slice(&self.bulk_len.to_be_bytes());
        b[24..28].copy_from_slice(&self.msg_crc.to_be_bytes());
        b[28..32].copy_from_slice(&self.bulk_crc.to_be_bytes());
        b
    }

    pub fn decode(b: &[u8; HEADER_BYTES]) -> Result<FrameHeader, FrameError> {
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let magic = u32_at(0);
        if magic != MAGIC {
            return Err(FrameError::NotWeft(magic));
        }
        let version = u16::from_be_bytes([b[4], b[5]]);
        if version != PROTOCOL_VERSION {
            return Err(FrameError::Version { theirs: version, ours: PROTOCOL_VERSION });
        }
        let kind = match b[6] {
            0 => FrameKind::Request,
            1 => FrameKind::Reply,
            2 => FrameKind::Callback,
            3 => FrameKind::CallbackReply,
            4 => FrameKind::Held,
            k => return Err(FrameError::UnknownKind(k)),
        };
        let msg_len = u32_at(16);
        let bulk_len = u32_at(20);
        if msg_len > MESSAGE_BYTES_MAX {
            return Err(FrameError::MessageTooLarge(msg_len));
        }
        if bulk_len > BULK_BYTES_MAX {
            return Err(FrameError::BulkTooLarge(bulk_len));
        }
        Ok(FrameHeader {
            kind,
            xid: u64::from_be_bytes(b[8..16].try_into().expect("8 bytes")),
            msg_len,
            bulk_len,
            msg_crc: u32_at(24),
            bulk_crc: u32_at(28),
        })
    }
}

impl FrameHeader {
    /// What a server sends to a peer whose frame had another version, before it drops the
    /// connection: a reply header of this build's version with nothing after it. The peer's
    /// [`FrameHeader::decode`] refuses it with [`FrameError::Version`], naming both versions.
    pub fn version_answer() -> [u8; HEADER_BYTES] {
        FrameHeader { kind: FrameKind::Reply, xid: 0, msg_len: 0, bulk_len: 0, msg_crc: 0, bulk_crc: 0 }.encode()
    }
}

pub fn encode_message<T: Serialize>(msg: &T) -> WeftResult<Vec<u8>> {
    let bytes = postcard::to_stdvec(msg).map_err(|e| WeftError::protocol(format!("cannot encode message: {e}")))?;
    if bytes.len() > MESSAGE_BYTES_MAX as usize {
        return Err(WeftError::protocol(format!("message of {} bytes exceeds {MESSAGE_BYTES_MAX}", bytes.len())));
    }
    Ok(bytes)
}

pub fn decode_message<T: DeserializeOwned>(bytes: &[u8]) -> WeftResult<T> {
    postcard::from_bytes(bytes).map_err(|e| WeftError::protocol(format!("malformed message: {e}")))
}

/// An empty buffer with room for `len` bytes after `pad` bytes of zeros already in it, so
/// that what is put in after them starts at a multiple of `BULK_ALIGN_BYTES`: slice it from
/// `pad`. For bulk handed to direct I/O (a frame's received bulk, an OSS's direct read).
pub fn page_aligned_buffer(len: usize) -> (bytes::BytesMut, usize) {
    let align = crate::limits::BULK_ALIGN_BYTES;
    let mut buf = bytes::BytesMut::with_capacity(len + align);
    let pad = buf.as_ptr().align_offset(align);
    buf.resize(pad, 0);
    (buf, pad)
}

pub fn checksum(bytes: &[u8]) -> u32 {
    if bytes.is_empty() {
        0
    } else {
        crc32c::crc32c(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::*;

    #[test]
    fn header_round_trips_and_rejects_garbage() {
        let h = FrameHeader { kind: FrameKind::Reply, xid: 42, msg_len: 10, bulk_len: 4096, msg_crc: 7, bulk_crc: 9 };
        assert_eq!(FrameHeader::decode(&h.encode()).unwrap(), h);
        let mut bad = h.encode();
        bad[0] = b'X';
        assert!(matches!(FrameHeader::decode(&bad), Err(FrameError::NotWeft(_))));
        let big = FrameHeader { bulk_len: BULK_BYTES_MAX + 1, ..h };
        assert_eq!(FrameHeader::decode(&big.encode()), Err(FrameError::BulkTooLarge(BULK_BYTES_MAX + 1)));
        let mut kind = h.encode();
        kind[6] = 9;
        assert_eq!(FrameHeader::decode(&kind), Err(FrameError::UnknownKind(9)));
        // A newer peer's frame: both versions are named.
        let mut newer = FrameHeader::version_answer();
        newer[4..6].copy_from_slice(&(PROTOCOL_VERSION + 1).to_be_bytes());
        let e = FrameHeader::decode(&newer).unwrap_err();
        assert_eq!(e, FrameError::Version { theirs: PROTOCOL_VERSION + 1, ours: PROTOCOL_VERSION });
        let text = WeftError::from(e).message;
        assert!(text.contains(&format!("version {}", PROTOCOL_VERSION + 1)), "{text}");
        assert!(text.contains(&format!("speaks {PROTOCOL_VERSION}")), "{text}");
    }

    #[test]
    fn messages_round_trip_and_truncation_is_an_error() {
        let req = Request {
            header: RequestHeader {
                client_id: 1,
                request_id: 2,
                reply_slot: 3,
                identity: Identity::root(),
                jobid: "dd.0".into(),
            },
            body: RequestBody::Mdt {
                mdt: 0,
                op: MdtRequest::Lookup(mdt::Lookup { parent: crate::Fid::ROOT, name: b"a".to_vec() }),
            },
        };
        let bytes = encode_message(&req).unwrap();
        assert_eq!(decode_message::<Request>(&bytes).unwrap(), req);
        assert!(decode_message::<Request>(&bytes[..bytes.len() - 1]).is_err());
    }

    /// docs/PROTOCOL.md is what a peer written from it speaks: it names this version in the
    /// frame table and says what the version changed.
    #[test]
    fn the_protocol_document_names_this_version_and_its_changes() {
        let doc = include_str!("../../../docs/PROTOCOL.md");
        let field = format!("| version | protocol version, {PROTOCOL_VERSION} (");
        assert!(doc.contains(&field), "docs/PROTOCOL.md's frame table does not name version {PROTOCOL_VERSION}");
        let note = format!("version {PROTOCOL_VERSION} added");
        assert!(doc.contains(&note), "docs/PROTOCOL.md has no note for version {PROTOCOL_VERSION} ({note:?})");
    }
}
