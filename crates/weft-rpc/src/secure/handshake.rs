//! The handshake that opens a connection to a server that requires the shared key: Noise's
//! NNpsk0 pattern (both sides prove the pre-shared key; fresh ephemeral keys make each
//! connection's transport keys its own), with AES-256-GCM and SHA-256.
//!
//! ```text
//! client → server  hello: "WFTK" (4) version (2) flavor (1) 0 (1) key id (8)
//!                  length (2) Noise message 1 (psk, e)
//! server → client  hello: "WFTK" version 0 0 key id
//!                  length (2) Noise message 2 (e, ee) whose sealed payload is the flavor
//! client → server  length (2) the confirmation: a transport message (nonce 0) sealing a
//!                  constant under the keys message 2 made
//! ```
//!
//! The confirmation is what proves the client: message 1 can be replayed by whoever saw
//! it, but without the key no one makes the transport keys it needs.
//!
//! The client's hello is the Noise prologue, so both sides agree on it or the handshake
//! fails. The flavor used is the stronger of the two sides' (sealed in message 2, so a
//! client sees the server's choice unchanged); a client whose key asks for more than it is
//! given refuses. A server that refuses answers with an ordinary reply frame carrying the
//! error (`NotAuthenticated`), which a client reads in place of the server's hello: so a
//! client without the key, with another key (told apart by the key id), or speaking to a
//! server without a key, gets a sentence saying which.

use super::key::{Flavor, SharedKey};
use crate::frame::{read_frame, write_frame};
use bytes::Bytes;
use snow::StatelessTransportState;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use weft_proto::msg::Reply;
use weft_proto::wire::{decode_message, encode_message, FrameHeader, FrameKind, MAGIC, PROTOCOL_VERSION};
use weft_proto::{ErrorCode, WeftError, WeftResult};

/// The first 4 bytes of a handshake, where a frame has [`MAGIC`].
pub const KEY_MAGIC: u32 = 0x5746_544b;
const HELLO_BYTES: usize = 16;
const NOISE_PARAMS: &str = "Noise_NNpsk0_25519_AESGCM_SHA256";
/// Noise messages of the handshake are 48 and 65 bytes; anything longer is not one.
const HANDSHAKE_MESSAGE_MAX: usize = 256;

/// What protects a connection after its handshake.
pub enum Protection {
    /// Frames as without a key (no key, or flavor skn).
    Plain,
    /// Every byte sealed (flavor skpi).
    Sealed(Sealing),
}

/// The transport keys of a sealed connection, and the first nonce of each direction on this
/// side (the confirmation took the client's first).
pub struct Sealing {
    pub state: Arc<StatelessTransportState>,
    pub send_from: u64,
    pub recv_from: u64,
}

/// What the client seals under the new keys to prove it holds them (the confirmation).
const CONFIRM: &[u8] = b"weft key confirmed";

/// Why a server refused a connection, for its counters and its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A client without a key (it sent a frame).
    NoKey,
    /// A client with another key (its id is another).
    WrongKey,
    /// A handshake that failed or was not one (garbage, a forged id, a client that stopped).
    Handshake,
}

impl Refusal {
    pub fn label(self) -> &'static str {
        match self {
            Refusal::NoKey => "no_key",
            Refusal::WrongKey => "wrong_key",
            Refusal::Handshake => "handshake",
        }
    }
}

fn hello(flavor: u8, id: [u8; 8]) -> [u8; HELLO_BYTES] {
    let mut h = [0u8; HELLO_BYTES];
    h[..4].copy_from_slice(&KEY_MAGIC.to_be_bytes());
    h[4..6].copy_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    h[6] = flavor;
    h[8..].copy_from_slice(&id);
    h
}

fn noise<'a>() -> snow::Builder<'a> {
    // The parameters are a constant that parses.
    let params = NOISE_PARAMS.parse().expect("Noise parameters");
    snow::Builder::new(params)
}

fn snow_error(what: &str, e: snow::Error) -> WeftError {
    WeftError::new(ErrorCode::NotAuthenticated, format!("{what}: {e}"))
}

async fn write_message<W: AsyncWrite + Unpin>(w: &mut W, head: &[u8], message: &[u8]) -> std::io::Result<()> {
    let mut out = Vec::with_capacity(head.len() + 2 + message.len());
    out.extend_from_slice(head);
    out.extend_from_slice(&(message.len() as u16).to_be_bytes());
    out.extend_from_slice(message);
    w.write_all(&out).await?;
    w.flush().await
}

async fn read_message<R: AsyncRead + Unpin>(r: &mut R) -> std::io::Result<Vec<u8>> {
    let len = r.read_u16().await? as usize;
    if len > HANDSHAKE_MESSAGE_MAX {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "handshake message too long"));
    }
    let mut m = vec![0u8; len];
    r.read_exact(&mut m).await?;
    Ok(m)
}

/// The client's side, on a connection just opened to `address`: Ok(how the connection is
/// protected from now on), or the server's refusal, or why the handshake failed.
pub async fn client<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    key: &SharedKey,
    address: &str,
) -> WeftResult<Protection> {
    let io = |e: std::io::Error| WeftError::io(format!("key handshake with {address}: {e}"));
    let ours = hello(key.flavor() as u8, key.id());
    let mut hs = noise()
        .prologue(&ours)
        .and_then(|b| b.psk(0, key.secret()))
        .and_then(|b| b.build_initiator())
        .map_err(|e| snow_error("key handshake", e))?;
    let mut m1 = [0u8; HANDSHAKE_MESSAGE_MAX];
    let n = hs.write_message(&[], &mut m1).map_err(|e| snow_error("key handshake", e))?;
    write_message(stream, &ours, &m1[..n]).await.map_err(io)?;

    let mut first = [0u8; 4];
    stream.read_exact(&mut first).await.map_err(io)?;
    match u32::from_be_bytes(first) {
        KEY_MAGIC => {}
        MAGIC => return Err(refusal_read(&first, stream, address).await),
        other => {
            return Err(WeftError::protocol(format!(
                "{address} answered the key handshake with {other:#010x}: not Weft"
            )))
        }
    }
    let mut theirs = [0u8; HELLO_BYTES];
    theirs[..4].copy_from_slice(&first);
    stream.read_exact(&mut theirs[4..]).await.map_err(io)?;
    let m2 = read_message(stream).await.map_err(io)?;
    let mut payload = [0u8; HANDSHAKE_MESSAGE_MAX];
    let n = hs.read_message(&m2, &mut payload).map_err(|e| {
        WeftError::new(
            ErrorCode::NotAuthenticated,
            format!("{address} failed the key handshake ({e}): it does not hold key {}", key.id_hex()),
        )
    })?;
    let flavor = (n == 1)
        .then(|| Flavor::from_byte(payload[0]))
        .flatten()
        .ok_or_else(|| WeftError::protocol(format!("{address} named no flavor in the key handshake")))?;
    if flavor < key.flavor() {
        return Err(WeftError::new(
            ErrorCode::NotAuthenticated,
            format!("{address} offers flavor {flavor}, this node's key asks for {}", key.flavor()),
        ));
    }
    let state = hs.into_stateless_transport_mode().map_err(|e| snow_error("key handshake", e))?;
    let mut confirm = [0u8; HANDSHAKE_MESSAGE_MAX];
    let n = state.write_message(0, CONFIRM, &mut confirm).map_err(|e| snow_error("key handshake", e))?;
    write_message(stream, &[], &confirm[..n]).await.map_err(io)?;
    Ok(protection(state, flavor, true))
}

/// Reads the reply frame a server refused with (its first 4 bytes read already): the error
/// in it, or what was wrong with it.
async fn refusal_read<R: AsyncRead + Unpin>(first: &[u8; 4], stream: &mut R, address: &str) -> WeftError {
    let mut chained = (&first[..]).chain(stream);
    let frame = match read_frame(&mut chained).await {
        Ok(Some(f)) => f,
        Ok(None) => return WeftError::io(format!("{address} closed the connection during the key handshake")),
        Err(e) => {
            let mut e = WeftError::from(e);
            e.message = format!("{address}: {}", e.message);
            return e;
        }
    };
    match decode_message::<Reply>(&frame.msg) {
        Ok(Err(e)) => WeftError::new(e.code, format!("{address} refused the connection: {}", e.message)),
        Ok(Ok(_)) | Err(_) => WeftError::protocol(format!("{address} answered the key handshake with a frame")),
    }
}

/// How a connection goes on after its handshake; `client` for the side that sent the
/// confirmation (its first record from client to server is the second message under those
/// keys).
fn protection(state: StatelessTransportState, flavor: Flavor, client: bool) -> Protection {
    match flavor {
        Flavor::Skn => Protection::Plain,
        Flavor::Skpi => {
            let (send_from, recv_from) = if client { (1, 0) } else { (0, 1) };
            Protection::Sealed(Sealing { state: Arc::new(state), send_from, recv_from })
        }
    }
}

/// A refusal of the server: why (for its counters), the error, and whether to answer it on
/// the connection (not a client that broke off or sent garbage).
pub type Refused = (Refusal, WeftError, bool);

/// The server's side, on a connection whose first 4 bytes, [`KEY_MAGIC`], were read. A
/// refusal is returned, to be counted and then answered ([`answer`]) by the caller.
pub async fn server<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, key: &SharedKey) -> Result<Protection, Refused> {
    let failed = |why: String| (Refusal::Handshake, WeftError::new(ErrorCode::NotAuthenticated, why), false);
    let mut theirs = [0u8; HELLO_BYTES];
    theirs[..4].copy_from_slice(&KEY_MAGIC.to_be_bytes());
    stream.read_exact(&mut theirs[4..]).await.map_err(|e| failed(format!("the hello: {e}")))?;
    let version = u16::from_be_bytes([theirs[4], theirs[5]]);
    if version != PROTOCOL_VERSION {
        let _ = stream.write_all(&FrameHeader::version_answer()).await;
        return Err(failed(format!("the client speaks protocol version {version}, this server {PROTOCOL_VERSION}")));
    }
    let client_flavor = Flavor::from_byte(theirs[6]).ok_or_else(|| failed(format!("unknown flavor {}", theirs[6])))?;
    let id: [u8; 8] = theirs[8..].try_into().unwrap_or_default();
    let m1 = read_message(stream).await.map_err(|e| failed(format!("message 1: {e}")))?;
    if id != key.id() {
        let theirs_hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        // The client is told its key is another, not which is this file system's.
        let e = WeftError::new(
            ErrorCode::NotAuthenticated,
            format!("the client's key ({theirs_hex}) is not this file system's: give it the file system's key file"),
        );
        return Err((Refusal::WrongKey, e, true));
    }
    let opened =
        noise().prologue(&theirs).and_then(|b| b.psk(0, key.secret())).and_then(|b| b.build_responder()).and_then(
            |mut hs| {
                let mut payload = [0u8; HANDSHAKE_MESSAGE_MAX];
                hs.read_message(&m1, &mut payload)?;
                Ok(hs)
            },
        );
    let mut hs = opened.map_err(|e| {
        // The id matched but the proof did not: not a client of ours.
        (
            Refusal::Handshake,
            WeftError::new(ErrorCode::NotAuthenticated, format!("the key handshake failed ({e})")),
            true,
        )
    })?;
    let flavor = client_flavor.max(key.flavor());
    let mut m2 = [0u8; HANDSHAKE_MESSAGE_MAX];
    let n = hs.write_message(&[flavor as u8], &mut m2).map_err(|e| failed(e.to_string()))?;
    write_message(stream, &hello(0, key.id()), &m2[..n]).await.map_err(|e| failed(format!("message 2: {e}")))?;
    // Message 1 alone proves nothing: it can be replayed. The client's confirmation, sealed
    // under the keys that message 2 made, proves it holds the key now.
    let state = hs.into_stateless_transport_mode().map_err(|e| failed(e.to_string()))?;
    let confirm = read_message(stream).await.map_err(|e| failed(format!("the confirmation: {e}")))?;
    let mut payload = [0u8; HANDSHAKE_MESSAGE_MAX];
    match state.read_message(0, &confirm, &mut payload) {
        Ok(n) if payload[..n] == *CONFIRM => {}
        _ => return Err(failed("the confirmation did not open: a replayed handshake, or not our key".into())),
    }
    Ok(protection(state, flavor, false))
}

/// Writes `e` as the reply (xid 0) a refused client reads in place of a hello, and closes.
pub async fn answer<W: AsyncWrite + Unpin>(w: &mut W, e: &WeftError) {
    let reply: Reply = Err(e.clone());
    if let Ok(msg) = encode_message(&reply) {
        let _ = write_frame(w, FrameKind::Reply, 0, &msg, &Bytes::new()).await;
    }
    let _ = w.shutdown().await;
}
