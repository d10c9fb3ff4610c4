//! One frame on a byte stream. The header is checked before any allocation, so an oversized
//! or garbage frame costs nothing but the connection it came on.

use bytes::{BufMut, Bytes, BytesMut};
use std::io::IoSlice;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use weft_proto::limits::BULK_ALIGNED_FROM_BYTES;
use weft_proto::wire::{checksum, page_aligned_buffer, FrameError, FrameHeader, FrameKind, HEADER_BYTES};
use weft_proto::{ErrorCode, WeftError, WeftResult};

pub struct Frame {
    pub header: FrameHeader,
    pub msg: Vec<u8>,
    pub bulk: Bytes,
    /// False when the bulk's crc32c did not match: the receiver answers with a checksum
    /// error instead of using the data (the sender resends).
    pub bulk_ok: bool,
}

/// Why a frame could not be read. The connection is done for either way; what differs is
/// whether a request may be resent on a new one.
#[derive(Debug)]
pub enum ReadError {
    /// The stream failed or ended inside a frame.
    Io(std::io::Error),
    /// The header was refused: the other side is not Weft, speaks another version, or
    /// breaks the protocol's limits. A resend would meet the same.
    Frame(FrameError),
    /// The message's crc32c did not match: damaged on the way.
    MessageChecksum,
}

impl ReadError {
    /// Whether a request may do better on a new connection.
    pub fn resendable(&self) -> bool {
        !matches!(self, ReadError::Frame(_))
    }
}

impl From<ReadError> for WeftError {
    /// A failure that a resend may cure is `Io` (the peer resends it); a refused frame is
    /// `Protocol` (the peer gives up at once).
    fn from(e: ReadError) -> WeftError {
        match e {
            ReadError::Io(e) => transport(e),
            ReadError::Frame(f) => f.into(),
            ReadError::MessageChecksum => WeftError::new(ErrorCode::Io, "a message arrived damaged (checksum)"),
        }
    }
}

/// Reads one frame. `Ok(None)` on a clean end of stream before a header.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> Result<Option<Frame>, ReadError> {
    let mut hb = [0u8; HEADER_BYTES];
    match r.read_exact(&mut hb).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(ReadError::Io(e)),
    }
    let header = FrameHeader::decode(&hb).map_err(ReadError::Frame)?;
    let mut msg = vec![0u8; header.msg_len as usize];
    r.read_exact(&mut msg).await.map_err(ReadError::Io)?;
    if checksum(&msg) != header.msg_crc {
        return Err(ReadError::MessageChecksum);
    }
    // Read into unfilled capacity: zeroing a megabyte first would cost a pass over it.
    let len = header.bulk_len as usize;
    let (mut bulk, pad) = bulk_buffer(len);
    while bulk.len() < pad + len {
        let remaining = pad + len - bulk.len();
        let mut rest = (&mut bulk).limit(remaining);
        if r.read_buf(&mut rest).await.map_err(ReadError::Io)? == 0 {
            return Err(ReadError::Io(std::io::ErrorKind::UnexpectedEof.into()));
        }
    }
    let bulk = bulk.freeze().slice(pad..);
    let bulk_ok = checksum(&bulk) == header.bulk_crc;
    Ok(Some(Frame { header, msg, bulk, bulk_ok }))
}

/// A buffer to receive a bulk of `len` bytes into, and how many bytes of padding come
/// first: a large bulk then starts page-aligned (an OSS writes it to its object file with
/// direct I/O as it is).
fn bulk_buffer(len: usize) -> (BytesMut, usize) {
    if len < BULK_ALIGNED_FROM_BYTES {
        return (BytesMut::with_capacity(len), 0);
    }
    page_aligned_buffer(len)
}

/// Writes one frame: header and message in one buffer, the bulk straight from its buffer.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    kind: FrameKind,
    xid: u64,
    msg: &[u8],
    bulk: &Bytes,
) -> WeftResult<()> {
    let header = FrameHeader {
        kind,
        xid,
        msg_len: msg.len() as u32,
        bulk_len: bulk.len() as u32,
        msg_crc: checksum(msg),
        bulk_crc: checksum(bulk),
    };
    let mut head = Vec::with_capacity(HEADER_BYTES + msg.len());
    head.extend_from_slice(&header.encode());
    head.extend_from_slice(msg);
    // One writev for the whole frame where the socket takes it: a syscall less per bulk,
    // and the peer wakes once for it.
    let mut parts = [IoSlice::new(&head), IoSlice::new(bulk)];
    let mut parts = &mut parts[..];
    while !parts.is_empty() {
        let n = w.write_vectored(parts).await.map_err(transport)?;
        if n == 0 {
            return Err(transport(std::io::ErrorKind::WriteZero.into()));
        }
        IoSlice::advance_slices(&mut parts, n);
    }
    w.flush().await.map_err(transport)?;
    Ok(())
}

/// A failure of the connection itself (as opposed to an error reply): the request may be
/// resent on a new connection.
pub fn transport(e: std::io::Error) -> WeftError {
    WeftError::new(ErrorCode::Io, format!("connection failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::limits::BULK_ALIGN_BYTES;

    async fn round_trip(bulk: &Bytes) -> Frame {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        let sent = bulk.clone();
        let writer = tokio::spawn(async move { write_frame(&mut a, FrameKind::Request, 7, b"msg", &sent).await });
        let frame = read_frame(&mut b).await.unwrap().expect("a frame");
        writer.await.unwrap().unwrap();
        frame
    }

    #[tokio::test]
    async fn a_large_bulk_arrives_whole_and_page_aligned() {
        for len in [0, 1, 4095, BULK_ALIGNED_FROM_BYTES - 1, BULK_ALIGNED_FROM_BYTES, (1 << 20) + 3] {
            let bulk = Bytes::from((0..len).map(|i| (i * 7 % 251) as u8).collect::<Vec<u8>>());
            let frame = round_trip(&bulk).await;
            assert_eq!(frame.msg, b"msg");
            assert!(frame.bulk == bulk && frame.bulk_ok, "{len} bytes came back different");
            if len >= BULK_ALIGNED_FROM_BYTES {
                assert_eq!(frame.bulk.as_ptr() as usize % BULK_ALIGN_BYTES, 0, "{len} bytes not aligned");
            }
        }
    }
}
