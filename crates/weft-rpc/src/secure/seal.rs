//! The record layer of a sealed connection (flavor skpi), under the framing: the frames are
//! written and read exactly as on a plain connection (`crate::frame`), and this layer turns
//! the byte stream into records and back, as TLS does under HTTP.
//!
//! A record is a 2-byte big-endian length, then that many bytes of one Noise transport
//! message: at most [`RECORD_PLAIN_MAX`] bytes of the stream sealed with AES-256-GCM under
//! the key of its direction and a nonce counting the records of that direction. A record
//! that was changed, dropped, replayed or reordered fails to open: the reader returns
//! [`AuthFailure`] and the connection is done for (a byte stream past a bad record cannot be
//! trusted to be in step again). A frame of many records is flushed as a whole by
//! `write_frame`, so a record never holds bytes of two writers.
//!
//! Why our own AsyncRead/AsyncWrite rather than a TLS crate's stream: the handshake is
//! Noise's (a pre-shared key and no certificates, which TLS 1.3 would need an external-PSK
//! mode for), and snow gives the transport messages but no stream.

use snow::StatelessTransportState;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The largest Noise message.
const RECORD_MAX: usize = 65535;
/// AES-GCM's tag.
const TAG_BYTES: usize = 16;
/// Bytes of the stream one record carries at most.
pub const RECORD_PLAIN_MAX: usize = RECORD_MAX - TAG_BYTES;

/// Why a sealed connection's read failed when a record did not open: the error inside the
/// `io::Error` the reader returns (see [`is_auth_failure`]).
#[derive(Debug)]
pub struct AuthFailure;

impl std::fmt::Display for AuthFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a record failed its authentication (changed on the way, or not sealed with the shared key)")
    }
}

impl std::error::Error for AuthFailure {}

/// Whether `e` is a sealed record that failed to open (an attack, or damage that TCP's
/// checksum missed), as opposed to the connection failing.
pub fn is_auth_failure(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<AuthFailure>())
}

/// Seals what is written to it into records on `inner`.
pub struct SealedWriter<W> {
    inner: W,
    state: Arc<StatelessTransportState>,
    nonce: u64,
    /// The sealed record being written (length prefix included), from `pos`.
    out: Vec<u8>,
    pos: usize,
    /// Gathers the slices of a vectored write into one record.
    gather: Vec<u8>,
}

impl<W: AsyncWrite + Unpin> SealedWriter<W> {
    /// `nonce`: the first record's (the handshake may have used some).
    pub fn new(inner: W, state: Arc<StatelessTransportState>, nonce: u64) -> SealedWriter<W> {
        SealedWriter { inner, state, nonce, out: Vec::with_capacity(RECORD_MAX + 2), pos: 0, gather: Vec::new() }
    }

    /// The stream it writes to (what was sealed and not flushed stays behind).
    pub fn into_inner(self) -> W {
        self.inner
    }

    /// Writes out the record sealed last.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.pos < self.out.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.out[self.pos..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.pos += n;
        }
        Poll::Ready(Ok(()))
    }

    fn seal(&mut self, plain: &[u8]) -> io::Result<()> {
        debug_assert!(plain.len() <= RECORD_PLAIN_MAX);
        self.out.resize(2 + plain.len() + TAG_BYTES, 0);
        let n = self.state.write_message(self.nonce, plain, &mut self.out[2..]).map_err(io::Error::other)?;
        self.out.truncate(2 + n);
        self.out[..2].copy_from_slice(&(n as u16).to_be_bytes());
        self.nonce += 1;
        self.pos = 0;
        Ok(())
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for SealedWriter<W> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        ready!(self.poll_drain(cx))?;
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let n = buf.len().min(RECORD_PLAIN_MAX);
        self.seal(&buf[..n])?;
        Poll::Ready(Ok(n))
    }

    /// A frame's header and message, and the start of its bulk, in one record.
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_drain(cx))?;
        let mut nonempty = bufs.iter().filter(|b| !b.is_empty());
        let Some(first) = nonempty.next() else { return Poll::Ready(Ok(0)) };
        if first.len() >= RECORD_PLAIN_MAX || nonempty.next().is_none() {
            let n = first.len().min(RECORD_PLAIN_MAX);
            self.seal(&first[..n])?;
            return Poll::Ready(Ok(n));
        }
        let mut gather = std::mem::take(&mut self.gather);
        gather.clear();
        for b in bufs {
            let room = RECORD_PLAIN_MAX - gather.len();
            gather.extend_from_slice(&b[..b.len().min(room)]);
            if gather.len() == RECORD_PLAIN_MAX {
                break;
            }
        }
        let sealed = self.seal(&gather);
        let n = gather.len();
        self.gather = gather;
        sealed?;
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Opens the records read from `inner` into the stream that was written.
pub struct SealedReader<R> {
    inner: R,
    state: Arc<StatelessTransportState>,
    nonce: u64,
    /// The record being read: its length prefix, then its sealed bytes.
    record: Vec<u8>,
    filled: usize,
    /// The opened bytes of the last record, given out from `pos`.
    plain: Vec<u8>,
    pos: usize,
    failed: bool,
}

impl<R: AsyncRead + Unpin> SealedReader<R> {
    /// `nonce`: the first record's (the handshake may have used some).
    pub fn new(inner: R, state: Arc<StatelessTransportState>, nonce: u64) -> SealedReader<R> {
        SealedReader {
            inner,
            state,
            nonce,
            record: vec![0; RECORD_MAX + 2],
            filled: 0,
            plain: Vec::with_capacity(RECORD_PLAIN_MAX),
            pos: 0,
            failed: false,
        }
    }

    /// Reads `record[filled..want]`; Ok(false) at the end of the stream before a record.
    fn poll_fill(&mut self, cx: &mut Context<'_>, want: usize) -> Poll<io::Result<bool>> {
        while self.filled < want {
            let mut buf = ReadBuf::new(&mut self.record[self.filled..want]);
            ready!(Pin::new(&mut self.inner).poll_read(cx, &mut buf))?;
            let n = buf.filled().len();
            if n == 0 {
                if self.filled == 0 {
                    return Poll::Ready(Ok(false));
                }
                return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
            }
            self.filled += n;
        }
        Poll::Ready(Ok(true))
    }

    /// Reads and opens the next record into `plain`; Ok(false) at a clean end of stream.
    fn poll_record(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        if !ready!(self.poll_fill(cx, 2))? {
            return Poll::Ready(Ok(false));
        }
        let len = u16::from_be_bytes([self.record[0], self.record[1]]) as usize;
        if len < TAG_BYTES {
            self.failed = true;
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, AuthFailure)));
        }
        ready!(self.poll_fill(cx, 2 + len))?;
        self.plain.resize(len - TAG_BYTES, 0);
        let opened = self.state.read_message(self.nonce, &self.record[2..2 + len], &mut self.plain);
        self.filled = 0;
        match opened {
            Ok(n) => {
                self.plain.truncate(n);
                self.pos = 0;
                self.nonce += 1;
                Poll::Ready(Ok(true))
            }
            Err(_) => {
                self.failed = true;
                Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, AuthFailure)))
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for SealedReader<R> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.failed {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, AuthFailure)));
        }
        while self.pos == self.plain.len() {
            if !ready!(self.poll_record(cx))? {
                return Poll::Ready(Ok(()));
            }
        }
        let n = buf.remaining().min(self.plain.len() - self.pos);
        buf.put_slice(&self.plain[self.pos..self.pos + n]);
        self.pos += n;
        Poll::Ready(Ok(()))
    }
}
