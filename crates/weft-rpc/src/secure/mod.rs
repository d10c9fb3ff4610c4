//! Node authentication: a file system may require a shared key (Lustre's shared-secret key,
//! SSK) of every node that connects to its servers. `weft key new` makes the key file
//! ([`key`]); each server and client is given it; a connection opens with a Noise handshake
//! in which both sides prove they hold it ([`handshake`]); with flavor skpi every byte after
//! that is sealed ([`seal`]). In-process requests (`weft up`'s own mount) cross no network
//! and are not sealed.
//!
//! What a server without the key's proof gets: a client without a key, or with another key,
//! is answered with a reply that says so (`NotAuthenticated`) and disconnected; a
//! connection whose handshake fails, or a sealed record that does not open, is dropped.
//! Each is counted ([`AuthCounters`], the metric `weft_auth_failures_total`) and logged,
//! and the server goes on serving everyone else.

pub mod handshake;
pub mod key;
pub mod seal;

pub use handshake::{Protection, Refusal, Sealing};
pub use key::{process_key, set_process_key, Flavor, SharedKey, KEY_FILE_ENV};
pub use seal::is_auth_failure;

use seal::{SealedReader, SealedWriter};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, BufReader, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// The read half of a connection: as it comes, or opened record by record.
pub enum ConnReader {
    Plain(BufReader<OwnedReadHalf>),
    /// Unbuffered below: the reader takes whole records, and a buffer under it would copy
    /// each record once more.
    Sealed(Box<SealedReader<OwnedReadHalf>>),
}

/// The write half of a connection: as it goes, or sealed record by record.
pub enum ConnWriter {
    Plain(OwnedWriteHalf),
    Sealed(Box<SealedWriter<OwnedWriteHalf>>),
}

/// Splits a connection whose handshake is done into its halves, sealed or not.
pub fn split(stream: tokio::net::TcpStream, protection: Protection) -> (ConnReader, ConnWriter) {
    let (reader, writer) = stream.into_split();
    match protection {
        Protection::Plain => (
            ConnReader::Plain(BufReader::with_capacity(crate::limits::SOCKET_READ_BUFFER_BYTES, reader)),
            ConnWriter::Plain(writer),
        ),
        Protection::Sealed(s) => (
            ConnReader::Sealed(Box::new(SealedReader::new(reader, s.state.clone(), s.recv_from))),
            ConnWriter::Sealed(Box::new(SealedWriter::new(writer, s.state, s.send_from))),
        ),
    }
}

impl AsyncRead for ConnReader {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnReader::Plain(r) => Pin::new(r).poll_read(cx, buf),
            ConnReader::Sealed(r) => Pin::new(r.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ConnWriter {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ConnWriter::Plain(w) => Pin::new(w).poll_write(cx, buf),
            ConnWriter::Sealed(w) => Pin::new(w.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ConnWriter::Plain(w) => Pin::new(w).poll_write_vectored(cx, bufs),
            ConnWriter::Sealed(w) => Pin::new(w.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnWriter::Plain(w) => Pin::new(w).poll_flush(cx),
            ConnWriter::Sealed(w) => Pin::new(w.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnWriter::Plain(w) => Pin::new(w).poll_shutdown(cx),
            ConnWriter::Sealed(w) => Pin::new(w.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A server's count of connections and frames it refused for want of the key's proof.
#[derive(Debug, Default)]
pub struct AuthCounters {
    no_key: AtomicU64,
    wrong_key: AtomicU64,
    handshake: AtomicU64,
    /// Sealed records that did not open (each ends its connection).
    frame: AtomicU64,
}

impl AuthCounters {
    pub fn refused(&self, why: Refusal) {
        let c = match why {
            Refusal::NoKey => &self.no_key,
            Refusal::WrongKey => &self.wrong_key,
            Refusal::Handshake => &self.handshake,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub fn frame_rejected(&self) {
        self.frame.fetch_add(1, Ordering::Relaxed);
    }

    /// (reason, count) for each reason, as the metric's `reason` label spells it.
    pub fn snapshot(&self) -> [(&'static str, u64); 4] {
        [
            (Refusal::NoKey.label(), self.no_key.load(Ordering::Relaxed)),
            (Refusal::WrongKey.label(), self.wrong_key.load(Ordering::Relaxed)),
            (Refusal::Handshake.label(), self.handshake.load(Ordering::Relaxed)),
            ("frame", self.frame.load(Ordering::Relaxed)),
        ]
    }
}
