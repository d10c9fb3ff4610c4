//! The record every file of a replica is made of (its log, vote, committed log id, purged
//! log id and snapshot), big-endian like the wire:
//!
//! ```text
//! offset size field
//!      0    4 magic    "WRLG" (0x57524C47)
//!      4    4 len      bytes of payload that follow
//!      8    4 crc      crc32c of the payload
//!     12  len payload  postcard of what the file holds (an openraft Entry in the log)
//! ```
//!
//! Small files (vote, committed, purged, snapshot) hold one record and are replaced whole:
//! written to `NAME.tmp`, fsync'd when they must survive a power loss, renamed over `NAME`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use weft_proto::{ErrorCode, WeftError, WeftResult};

pub const MAGIC: u32 = 0x5752_4C47;
pub const HEADER_BYTES: u64 = 12;

/// The record holding `payload`.
pub fn encode(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES as usize + payload.len());
    out.extend_from_slice(&MAGIC.to_be_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// What lies at an offset of a file.
#[derive(Debug)]
pub enum Read {
    /// A whole record: its payload, and the offset of what follows.
    Record { payload: Vec<u8>, next: u64 },
    /// Nothing more.
    End,
    /// The file's last record, not all of it on disk (or zeros where it should be): it was
    /// being written when the process or the machine died, so never acknowledged.
    Torn(String),
    /// A record that cannot be what was written, with more after it: the log is damaged.
    Corrupt(String),
}

/// Reads the record at `offset` of `file`, whose length is `len`; `payload_bytes_max` bounds
/// a length read from the header.
pub fn read_at(file: &File, offset: u64, len: u64, payload_bytes_max: u32) -> std::io::Result<Read> {
    if offset >= len {
        return Ok(Read::End);
    }
    if len - offset < HEADER_BYTES {
        return Ok(Read::Torn(format!("a record header of {} bytes of {HEADER_BYTES}", len - offset)));
    }
    let mut header = [0u8; HEADER_BYTES as usize];
    file.read_exact_at(&mut header, offset)?;
    let magic = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
    let payload_len = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
    let crc = u32::from_be_bytes([header[8], header[9], header[10], header[11]]);
    if magic != MAGIC {
        if all_zero(file, offset, len)? {
            return Ok(Read::Torn("zeros where a record should start".into()));
        }
        return Ok(Read::Corrupt(format!("bad record magic {magic:#010x}")));
    }
    if payload_len > payload_bytes_max {
        return Ok(Read::Corrupt(format!("a record length of {payload_len} bytes (at most {payload_bytes_max})")));
    }
    let next = offset + HEADER_BYTES + payload_len as u64;
    if next > len {
        return Ok(Read::Torn(format!("a record of {payload_len} bytes with {} on disk", len - offset - HEADER_BYTES)));
    }
    let mut payload = vec![0u8; payload_len as usize];
    file.read_exact_at(&mut payload, offset + HEADER_BYTES)?;
    let actual = crc32c::crc32c(&payload);
    if actual != crc {
        let why = format!("checksum {actual:#010x}, the record says {crc:#010x}");
        // The last record, its length on disk but not all its bytes: torn by a crash.
        return Ok(if next == len { Read::Torn(why) } else { Read::Corrupt(why) });
    }
    Ok(Read::Record { payload, next })
}

fn all_zero(file: &File, mut offset: u64, len: u64) -> std::io::Result<bool> {
    let mut buf = vec![0u8; 64 * 1024];
    while offset < len {
        let n = (len - offset).min(buf.len() as u64) as usize;
        file.read_exact_at(&mut buf[..n], offset)?;
        if buf[..n].iter().any(|b| *b != 0) {
            return Ok(false);
        }
        offset += n as u64;
    }
    Ok(true)
}

/// An error about `path` that a person can act on.
pub fn file_error(path: &Path, what: impl std::fmt::Display) -> WeftError {
    WeftError::io(format!("{}: {what}", path.display()))
}

/// A damaged file: refuses to start, saying where and why.
pub fn corrupt(path: &Path, offset: u64, why: impl std::fmt::Display) -> WeftError {
    WeftError::new(
        ErrorCode::Checksum,
        format!("{} is corrupt at offset {offset}: {why}; this replica refuses to start (remove its directory to have it rebuilt from the others)", path.display()),
    )
}

/// The one record of a small file, or None when there is no file. A torn or damaged file is
/// an error; the caller decides whether it may do without.
pub fn read_small(path: &Path, payload_bytes_max: u32) -> WeftResult<Option<Vec<u8>>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(file_error(path, e)),
    };
    let len = file.metadata().map_err(|e| file_error(path, e))?.len();
    match read_at(&file, 0, len, payload_bytes_max).map_err(|e| file_error(path, e))? {
        Read::Record { payload, next } if next == len => Ok(Some(payload)),
        Read::Record { next, .. } => Err(corrupt(path, next, "bytes after its one record")),
        Read::End => Err(corrupt(path, 0, "empty")),
        Read::Torn(why) | Read::Corrupt(why) => Err(corrupt(path, 0, why)),
    }
}

/// Replaces `path` with one record of `payload`: a temporary file renamed over it, fsync'd
/// (the file and the directory) when `durable`.
pub fn write_small(path: &Path, payload: &[u8], durable: bool) -> std::io::Result<()> {
    let tmp = tmp_path(path);
    {
        let mut file = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
        file.write_all(&encode(payload))?;
        if durable {
            file.sync_all()?;
        }
    }
    std::fs::rename(&tmp, path)?;
    if durable {
        sync_dir(path)?;
    }
    Ok(())
}

pub fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Makes a rename in `path`'s directory durable.
pub fn sync_dir(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(dir) => File::open(dir)?.sync_all(),
        None => Ok(()),
    }
}
