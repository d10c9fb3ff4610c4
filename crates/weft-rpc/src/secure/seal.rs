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
    /// What was read from `inner` and not opened yet, `record[start..end]`: the next
    /// record (its length prefix, then its sealed bytes), and whatever followed it in the
    /// same read. Room for two whole records, so that reads take as much as the socket has
    /// (one syscall for many small records) and a record is opened where it was read.
    record: Vec<u8>,
    start: usize,
    end: usize,
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
            record: vec![0; 2 * (RECORD_MAX + 2)],
            start: 0,
            end: 0,
            plain: Vec::with_capacity(RECORD_PLAIN_MAX),
            pos: 0,
            failed: false,
        }
    }

    /// Reads until `want` bytes from `start` are in; Ok(false) at the end of the stream
    /// before a record.
    fn poll_fill(&mut self, cx: &mut Context<'_>, want: usize) -> Poll<io::Result<bool>> {
        if self.start + want > self.record.len() {
            self.record.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        while self.end - self.start < want {
            let mut buf = ReadBuf::new(&mut self.record[self.end..]);
            ready!(Pin::new(&mut self.inner).poll_read(cx, &mut buf))?;
            let n = buf.filled().len();
            if n == 0 {
                if self.end == self.start {
                    return Poll::Ready(Ok(false));
                }
                return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
            }
            self.end += n;
        }
        Poll::Ready(Ok(true))
    }

    /// Reads the next record whole: Ok(Some(its sealed length)), or Ok(None) at a clean end
    /// of the stream.
    fn poll_sealed(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<usize>>> {
        if !ready!(self.poll_fill(cx, 2))? {
            return Poll::Ready(Ok(None));
        }
        let len = u16::from_be_bytes([self.record[self.start], self.record[self.start + 1]]) as usize;
        if len < TAG_BYTES {
            self.failed = true;
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, AuthFailure)));
        }
        ready!(self.poll_fill(cx, 2 + len))?;
        Poll::Ready(Ok(Some(len)))
    }

    /// Opens the record read (`len` sealed bytes) into `out`: the bytes it held.
    fn open_into(&mut self, len: usize, out: &mut [u8]) -> io::Result<usize> {
        let sealed = self.start + 2..self.start + 2 + len;
        let opened = self.state.read_message(self.nonce, &self.record[sealed], out);
        self.start += 2 + len;
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        }
        match opened {
            Ok(n) => {
                self.nonce += 1;
                Ok(n)
            }
            Err(_) => {
                self.failed = true;
                Err(io::Error::new(io::ErrorKind::InvalidData, AuthFailure))
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for SealedReader<R> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.failed {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, AuthFailure)));
        }
        if this.pos == this.plain.len() {
            loop {
                let Some(len) = ready!(this.poll_sealed(cx))? else { return Poll::Ready(Ok(())) };
                let plain_len = len - TAG_BYTES;
                if plain_len == 0 {
                    this.open_into(len, &mut [])?;
                    continue;
                }
                if buf.remaining() >= plain_len {
                    // A bulk's read: opened straight into the caller's buffer, a copy saved.
                    let n = this.open_into(len, buf.initialize_unfilled_to(plain_len))?;
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                let mut plain = std::mem::take(&mut this.plain);
                plain.resize(plain_len, 0);
                let opened = this.open_into(len, &mut plain);
                this.plain = plain;
                let n = opened?;
                this.plain.truncate(n);
                this.pos = 0;
                break;
            }
        }
        let n = buf.remaining().min(this.plain.len() - this.pos);
        buf.put_slice(&this.plain[this.pos..this.pos + n]);
        this.pos += n;
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn states() -> (Arc<StatelessTransportState>, Arc<StatelessTransportState>) {
        let psk = [9u8; 32];
        let params: snow::params::NoiseParams = "Noise_NNpsk0_25519_AESGCM_SHA256".parse().unwrap();
        let mut i = snow::Builder::new(params.clone()).psk(0, &psk).unwrap().build_initiator().unwrap();
        let mut r = snow::Builder::new(params).psk(0, &psk).unwrap().build_responder().unwrap();
        let (mut a, mut b) = ([0u8; 256], [0u8; 256]);
        let n = i.write_message(&[], &mut a).unwrap();
        r.read_message(&a[..n], &mut b).unwrap();
        let n = r.write_message(&[], &mut a).unwrap();
        i.read_message(&a[..n], &mut b).unwrap();
        (Arc::new(i.into_stateless_transport_mode().unwrap()), Arc::new(r.into_stateless_transport_mode().unwrap()))
    }

    /// Writes of every size, through a pipe that passes a few bytes at a time and one that
    /// passes much at once, read back in reads of every size: the same bytes, in order.
    #[tokio::test]
    async fn what_is_written_is_read_back_whatever_the_pieces() {
        for pipe in [7, 1 << 20] {
            let (i, r) = states();
            let (a, b) = tokio::io::duplex(pipe);
            let sizes = [0usize, 1, 2, 17, 1000, RECORD_PLAIN_MAX - 1, RECORD_PLAIN_MAX, RECORD_PLAIN_MAX + 1, 300_000];
            let sent: Vec<u8> = (0..sizes.iter().sum::<usize>()).map(|k| (k * 13 % 253) as u8).collect();
            let expected = sent.clone();
            let writer = tokio::spawn(async move {
                let mut w = SealedWriter::new(a, i, 5);
                let mut at = 0;
                for n in sizes {
                    // Two slices, as write_frame gives a header and a bulk.
                    let (head, tail) = sent[at..at + n].split_at(n / 2);
                    let mut parts = [io::IoSlice::new(head), io::IoSlice::new(tail)];
                    let mut parts = &mut parts[..];
                    while !parts.is_empty() && parts.iter().any(|p| !p.is_empty()) {
                        let k = w.write_vectored(parts).await.unwrap();
                        io::IoSlice::advance_slices(&mut parts, k);
                    }
                    w.flush().await.unwrap();
                    at += n;
                }
                w.shutdown().await.unwrap();
            });
            let mut rd = SealedReader::new(b, r, 5);
            let mut got = Vec::new();
            let mut chunk = 1;
            loop {
                let mut buf = vec![0u8; chunk];
                let n = rd.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
                chunk = chunk * 3 % 70_001 + 1;
            }
            writer.await.unwrap();
            assert!(got == expected, "pipe {pipe}: {} bytes back of {}", got.len(), expected.len());
        }
    }

    /// A record changed on the way does not open, and the reader stays failed.
    #[tokio::test]
    async fn a_changed_record_fails_and_stays_failed() {
        let (i, r) = states();
        let mut w = SealedWriter::new(Vec::new(), i, 0);
        w.write_all(b"first record").await.unwrap();
        w.flush().await.unwrap();
        let mut bytes = w.into_inner();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        let mut rd = SealedReader::new(&bytes[..], r, 0);
        let mut buf = [0u8; 64];
        let e = rd.read(&mut buf).await.unwrap_err();
        assert!(is_auth_failure(&e), "{e}");
        assert!(is_auth_failure(&rd.read(&mut buf).await.unwrap_err()));
    }
}
