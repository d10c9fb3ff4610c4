//! `weft bench stream`: the single streams people try first. One writer (sequential, fsync
//! at the end), then one reader of a fresh open (after posix_fadvise DONTNEED on posix, or
//! with `--drop-caches` after dropping the node's caches, so the reads reach the file
//! system), every byte checked; MB/s and the machine's CPU seconds per GB for each. With
//! `--loopback`, first one TCP stream over loopback in the same calls, the wire a client on
//! this node would have, and each stream's rate as a ratio of it.

use crate::cpu::{seconds_per_gb, CpuClock};
use crate::fsapi::{drop_system_caches, BenchFs, PosixFs};
use crate::native::NativeFs;
use crate::pattern::{self, Stream};
use crate::phase::Api;
use anyhow::{bail, Context, Result};
use bytes::BytesMut;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

pub struct Options {
    pub dir: String,
    pub api: Api,
    pub size_bytes: u64,
    pub block_bytes: u64,
    pub json: Option<PathBuf>,
    /// Sync and drop the node's caches before the writer and before the reader (root only).
    pub drop_caches: bool,
    /// Measure one loopback TCP stream first (see [`loopback`]).
    pub loopback: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    pub bytes: u64,
    pub seconds: f64,
    /// 10^6 bytes per second.
    pub mb_s: f64,
    pub cpu_s: Option<f64>,
    pub cpu_s_per_gb: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StreamReport {
    pub dir: String,
    pub api: String,
    pub block_bytes: u64,
    pub write: Figure,
    pub read: Figure,
    /// One TCP stream over loopback, measured in the same run (`--loopback`).
    pub loopback: Option<Figure>,
}

fn figure(bytes: u64, start: Instant, cpu: CpuClock) -> Figure {
    let seconds = start.elapsed().as_secs_f64();
    let cpu_s = cpu.seconds_since();
    Figure {
        bytes,
        seconds,
        mb_s: if seconds > 0.0 { bytes as f64 / 1e6 / seconds } else { 0.0 },
        cpu_s,
        cpu_s_per_gb: cpu_s.and_then(|c| seconds_per_gb(c, bytes)),
    }
}

pub fn line(what: &str, f: &Figure) -> String {
    let cpu = f.cpu_s_per_gb.map(|c| format!(" : cpu {c:.3} s/GB")).unwrap_or_default();
    format!("{what:<6} {:>10.1} MB/s : {} bytes in {:.3} seconds{cpu}", f.mb_s, f.bytes, f.seconds)
}

pub fn run(opts: &Options) -> Result<StreamReport> {
    if opts.block_bytes == 0 || opts.block_bytes > u32::MAX as u64 {
        bail!("--bs must be between 1 byte and 4G");
    }
    let name = format!("weft-stream.{}", std::process::id());
    let loopback = if opts.loopback { Some(loopback(opts.size_bytes, opts.block_bytes)?) } else { None };
    if let Some(l) = &loopback {
        println!("{}", line("tcp", l));
    }
    let (write, read) = match &opts.api {
        Api::Posix => {
            let mut fs = PosixFs::new(&opts.dir);
            fs.stat("").with_context(|| format!("--dir {}", opts.dir))?;
            streams(&mut fs, &name, opts)?
        }
        Api::Native { mgs, .. } => streams(&mut NativeFs::connect(mgs, &opts.dir)?, &name, opts)?,
    };
    println!("{}", line("write", &write));
    println!("{}", line("read", &read));
    if let Some(l) = &loopback {
        println!(
            "ratio  write / tcp {:.2} : read / tcp {:.2}",
            write.mb_s / l.mb_s.max(f64::MIN_POSITIVE),
            read.mb_s / l.mb_s.max(f64::MIN_POSITIVE)
        );
    }
    let report = StreamReport {
        dir: opts.dir.clone(),
        api: opts.api.name().to_string(),
        block_bytes: opts.block_bytes,
        write,
        read,
        loopback,
    };
    if let Some(path) = &opts.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("write {}", path.display()))?;
    }
    Ok(report)
}

/// One TCP stream over loopback (127.0.0.1): `size` bytes sent in `block`-byte writes, each
/// received into a reused buffer of that size by a thread of this process. The rate and
/// CPU per GB a client on this node gets from the wire alone, with nothing stored.
pub fn loopback(size: u64, block: u64) -> Result<Figure> {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("loopback stream: bind 127.0.0.1")?;
    let address = listener.local_addr()?;
    let block = usize::try_from(block).context("--bs")?;
    let receiver = std::thread::spawn(move || -> std::io::Result<u64> {
        let (mut socket, _) = listener.accept()?;
        let mut buf = vec![0u8; block];
        let mut total = 0u64;
        loop {
            match socket.read(&mut buf)? {
                0 => return Ok(total),
                n => total += n as u64,
            }
        }
    });
    let cpu = CpuClock::now();
    let start = Instant::now();
    let mut socket = std::net::TcpStream::connect(address).context("loopback stream: connect")?;
    let data = vec![0x5au8; block];
    let mut sent = 0u64;
    while sent < size {
        let n = (size - sent).min(block as u64) as usize;
        socket.write_all(&data[..n]).context("loopback stream: send")?;
        sent += n as u64;
    }
    socket.shutdown(std::net::Shutdown::Write)?;
    let received = receiver.join().map_err(|_| anyhow::anyhow!("loopback stream: the receiver panicked"))??;
    if received != size {
        bail!("loopback stream: {received} bytes received of {size} sent");
    }
    Ok(figure(size, start, cpu))
}

fn streams<F: BenchFs>(fs: &mut F, name: &str, opts: &Options) -> Result<(Figure, Figure)> {
    let seed = pattern::seed(pattern::mix(std::process::id() as u64), Stream::Single);
    let bs = opts.block_bytes;
    let result = (|| {
        if opts.drop_caches {
            drop_system_caches()?;
        }
        let cpu = CpuClock::now();
        let start = Instant::now();
        let mut f = fs.create_excl(name)?;
        let mut buf = BytesMut::with_capacity(bs as usize);
        let mut off = 0;
        while off < opts.size_bytes {
            let n = bs.min(opts.size_bytes - off) as usize;
            buf.resize(n, 0);
            pattern::fill(seed, off, &mut buf[..]);
            fs.pwrite(&mut f, off, buf.split().freeze())?;
            buf.reserve(n);
            off += n as u64;
        }
        fs.fsync(&mut f)?;
        fs.close(f)?;
        let write = figure(opts.size_bytes, start, cpu);

        if opts.drop_caches {
            drop_system_caches()?;
        } else {
            fs.drop_cache(name)?;
        }
        let cpu = CpuClock::now();
        let start = Instant::now();
        let mut f = fs.open_read(name)?;
        let mut off = 0;
        while off < opts.size_bytes {
            let n = bs.min(opts.size_bytes - off) as usize;
            let data = fs.pread(&mut f, off, n)?;
            if data.len() != n {
                bail!("verification failed: {name} is short: {} bytes at offset {off}, expected {n}", data.len());
            }
            if let Err(m) = pattern::verify(seed, off, data) {
                bail!("verification failed: {name} at {m} (the data read is not what was written)");
            }
            off += n as u64;
        }
        fs.close(f)?;
        Ok((write, figure(opts.size_bytes, start, cpu)))
    })();
    let removed = fs.unlink(name);
    let figures = result?;
    removed?;
    Ok(figures)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream of `size` bytes in 1 MiB calls in `dir`, no JSON, caches left alone.
    fn local(size: u64, dir: &tempfile::TempDir) -> Options {
        Options {
            dir: dir.path().to_string_lossy().into_owned(),
            api: Api::Posix,
            size_bytes: size,
            block_bytes: 1 << 20,
            json: None,
            drop_caches: false,
            loopback: false,
        }
    }

    #[test]
    fn a_local_stream() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options { json: Some(dir.path().join("s.json")), ..local((3 << 20) + 5, &dir) };
        let r = run(&opts).unwrap();
        assert_eq!(r.read.bytes, (3 << 20) + 5);
        assert!(r.write.mb_s > 0.0 && r.read.mb_s > 0.0);
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("s.json")).unwrap()).unwrap();
        assert!(json["read"]["mb_s"].as_f64().unwrap() > 0.0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "only the JSON is left");
    }

    #[test]
    fn a_stream_beside_loopback_tcp() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options { loopback: true, json: Some(dir.path().join("s.json")), ..local(5 << 20, &dir) };
        let r = run(&opts).unwrap();
        let tcp = r.loopback.expect("measured with --loopback");
        assert_eq!(tcp.bytes, 5 << 20);
        assert!(tcp.mb_s > 0.0 && tcp.seconds > 0.0);
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("s.json")).unwrap()).unwrap();
        assert_eq!(json["loopback"]["bytes"].as_u64(), Some(5 << 20));
    }

    #[test]
    fn drop_caches_runs_as_root_and_names_root_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options { drop_caches: true, ..local(1 << 20, &dir) };
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        match run(&opts) {
            Ok(r) => {
                assert!(root, "dropping caches worked without root");
                assert_eq!(r.read.bytes, 1 << 20);
            }
            Err(e) => {
                assert!(!root, "as root: {e:#}");
                assert!(format!("{e:#}").contains("needs root"), "{e:#}");
            }
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the stream's file is removed");
    }
}
