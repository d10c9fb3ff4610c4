//! One worker process: runs one phase as one rank. The parent starts N of these with a
//! [`WorkerSpec`]; each opens its file system, prints `ready`, waits for `go` on stdin (so
//! all start together), runs the phase and prints one [`WorkerResult`] as a JSON line.
//!
//! Beside stdout, a worker talks to the others and to the parent through files in the
//! control directory (a local directory the parent made): `progress.<rank>` (ops and bytes
//! so far, two little-endian u64, rewritten about four times a second) and
//! `<phase>.count.<rank>` (items made at the stonewall, for the wear-out).

use crate::fsapi::{join, BenchFs, PosixFs};
use crate::limits::{PROGRESS_INTERVAL_MS, WEAR_OUT_POLL_MS, WEAR_OUT_WAIT_S};
use crate::native::NativeFs;
use crate::pattern::{self, Stream};
use crate::phase::*;
use anyhow::{anyhow, bail, Context, Result};
use bytes::BytesMut;
use std::fs::File;
use std::io::{BufRead, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub fn ior_easy_path(rank: u32) -> String {
    format!("ior_easy/ior_file_easy.{rank}")
}
pub const IOR_HARD_PATH: &str = "ior_hard/IOR_file";
pub fn mdtest_easy_dir(rank: u32) -> String {
    format!("mdt_easy/rank{rank}")
}
pub fn mdtest_easy_path(rank: u32, i: u64) -> String {
    format!("mdt_easy/rank{rank}/file.{i}")
}
pub fn mdtest_hard_path(rank: u32, i: u64) -> String {
    format!("mdt_hard/file.{rank}.{i}")
}

/// The clock of one rank in one phase: start, stonewall, progress, wear-out exchange.
pub struct Run<'a> {
    spec: &'a WorkerSpec,
    start: Instant,
    deadline: Instant,
    progress: Option<File>,
    next_progress: Instant,
}

impl<'a> Run<'a> {
    pub fn new(spec: &'a WorkerSpec) -> Result<Run<'a>> {
        let progress = if spec.ctl_dir.is_empty() {
            None
        } else {
            let path = Path::new(&spec.ctl_dir).join(format!("progress.{}", spec.rank));
            Some(File::create(&path).with_context(|| format!("create {}", path.display()))?)
        };
        let now = Instant::now();
        Ok(Run { spec, start: now, deadline: now, progress, next_progress: now })
    }

    /// Starts the clock (at `go`).
    pub fn start(&mut self) {
        self.start = Instant::now();
        self.deadline = self.start + Duration::from_secs_f64(self.spec.stonewall_s.max(0.0));
        self.next_progress = self.start + Duration::from_millis(PROGRESS_INTERVAL_MS);
    }

    /// Called after every operation: is the stonewall reached? Also publishes the progress
    /// now and then (one pwrite of 16 bytes).
    fn tick(&mut self, ops: u64, bytes: u64) -> bool {
        let now = Instant::now();
        if now >= self.next_progress {
            self.next_progress = now + Duration::from_millis(PROGRESS_INTERVAL_MS);
            self.publish(ops, bytes);
        }
        now >= self.deadline
    }

    fn publish(&self, ops: u64, bytes: u64) {
        if let Some(f) = &self.progress {
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&ops.to_le_bytes());
            b[8..].copy_from_slice(&bytes.to_le_bytes());
            // Progress is advisory: a failed write only leaves the display behind.
            let _ = f.write_at(&b, 0);
        }
    }

    fn elapsed_s(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Publishes this rank's count at the stonewall and returns the most any rank reached.
    fn wear_out(&self, count: u64) -> Result<u64> {
        if self.spec.nprocs <= 1 || self.spec.ctl_dir.is_empty() {
            return Ok(count);
        }
        let dir = PathBuf::from(&self.spec.ctl_dir);
        let name = |rank: u32| dir.join(format!("{}.count.{rank}", self.spec.phase.name()));
        let tmp = dir.join(format!("{}.count.{}.tmp", self.spec.phase.name(), self.spec.rank));
        std::fs::write(&tmp, count.to_string()).with_context(|| format!("write {}", tmp.display()))?;
        std::fs::rename(&tmp, name(self.spec.rank)).with_context(|| format!("rename {}", tmp.display()))?;
        let give_up = Instant::now() + Duration::from_secs(WEAR_OUT_WAIT_S);
        let mut counts = Vec::with_capacity(self.spec.nprocs as usize);
        for rank in 0..self.spec.nprocs {
            loop {
                match std::fs::read_to_string(name(rank)) {
                    Ok(text) => {
                        let n: u64 = text.trim().parse().map_err(|_| anyhow!("bad wear-out count from rank {rank}"))?;
                        counts.push(n);
                        break;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound && Instant::now() < give_up => {
                        std::thread::sleep(Duration::from_millis(WEAR_OUT_POLL_MS));
                    }
                    Err(e) => return Err(e).context(format!("waiting for the stonewall count of rank {rank}")),
                }
            }
        }
        Ok(wear_out_target(&counts))
    }
}

fn check(spec: &WorkerSpec, path: &str, m: Result<(), pattern::Mismatch>) -> Result<()> {
    match m {
        Ok(()) => Ok(()),
        Err(m) => bail!(
            "verification failed in {} on rank {}: {} at {m} (the data read is not what was written)",
            spec.phase.name(),
            spec.rank,
            path
        ),
    }
}

fn write_pattern<F: BenchFs>(
    fs: &mut F,
    file: &mut F::File,
    buf: &mut BytesMut,
    seed: u64,
    offset: u64,
    len: usize,
) -> Result<()> {
    buf.resize(len, 0);
    pattern::fill(seed, offset, &mut buf[..]);
    let data = buf.split().freeze();
    fs.pwrite(file, offset, data)?;
    // Takes the allocation back when the file system let go of the bytes.
    buf.reserve(len);
    Ok(())
}

/// Runs `spec.phase` as `spec.rank` on `fs`; `run` must be started.
pub fn run_phase<F: BenchFs>(fs: &mut F, spec: &WorkerSpec, run: &mut Run) -> Result<WorkerResult> {
    let rank = spec.rank;
    let src = neighbour(rank, spec.nprocs);
    let mut r = WorkerResult { rank, ..Default::default() };
    match spec.phase {
        Phase::IorEasyWrite | Phase::IorHardWrite => {
            let easy = spec.phase == Phase::IorEasyWrite;
            let (path, t, seed) = if easy {
                (ior_easy_path(rank), IOR_EASY_TRANSFER_BYTES, pattern::seed(spec.run_seed, Stream::IorEasy { rank }))
            } else {
                (IOR_HARD_PATH.to_string(), IOR_HARD_TRANSFER_BYTES, pattern::seed(spec.run_seed, Stream::IorHard))
            };
            let offset = |n: u64| if easy { n * t } else { ior_hard_offset(n, spec.nprocs, rank) };
            let cap = spec.ior_max_bytes.map(|b| b / t).unwrap_or(u64::MAX);
            let mut file = if easy { fs.create_excl(&path)? } else { fs.open_write(&path)? };
            let mut buf = BytesMut::with_capacity(t as usize);
            let mut n = 0;
            let mut walled = false;
            while n < cap && !walled {
                write_pattern(fs, &mut file, &mut buf, seed, offset(n), t as usize).with_context(|| path.clone())?;
                n += 1;
                walled = run.tick(n, n * t);
            }
            r.stonewall_count = n;
            let target = run.wear_out(n)?;
            while n < target {
                write_pattern(fs, &mut file, &mut buf, seed, offset(n), t as usize).with_context(|| path.clone())?;
                n += 1;
                run.tick(n, n * t);
            }
            fs.fsync(&mut file).with_context(|| path.clone())?;
            fs.close(file).with_context(|| path.clone())?;
            (r.ops, r.bytes, r.count) = (n, n * t, n);
        }
        Phase::IorEasyRead | Phase::IorHardRead => {
            let easy = spec.phase == Phase::IorEasyRead;
            let (path, t, seed) = if easy {
                (
                    ior_easy_path(src),
                    IOR_EASY_TRANSFER_BYTES,
                    pattern::seed(spec.run_seed, Stream::IorEasy { rank: src }),
                )
            } else {
                (IOR_HARD_PATH.to_string(), IOR_HARD_TRANSFER_BYTES, pattern::seed(spec.run_seed, Stream::IorHard))
            };
            let mut file = fs.open_read(&path)?;
            for n in 0..spec.count {
                let off = if easy { n * t } else { ior_hard_offset(n, spec.nprocs, src) };
                let data = fs.pread(&mut file, off, t as usize).with_context(|| path.clone())?;
                if data.len() as u64 != t {
                    bail!(
                        "verification failed in {} on rank {rank}: {path} is short: {} bytes at offset {off}, expected {t}",
                        spec.phase.name(),
                        data.len()
                    );
                }
                check(spec, &path, pattern::verify(seed, off, data))?;
                run.tick(n + 1, (n + 1) * t);
            }
            fs.close(file).with_context(|| path.clone())?;
            (r.ops, r.bytes, r.count) = (spec.count, spec.count * t, spec.count);
        }
        Phase::MdtestEasyWrite | Phase::MdtestHardWrite => {
            let easy = spec.phase == Phase::MdtestEasyWrite;
            let mut buf = BytesMut::new();
            let mut make = |fs: &mut F, i: u64| -> Result<()> {
                if easy {
                    let f = fs.create_excl(&mdtest_easy_path(rank, i))?;
                    fs.close(f)
                } else {
                    let path = mdtest_hard_path(rank, i);
                    let mut f = fs.create_excl(&path)?;
                    let seed = pattern::seed(spec.run_seed, Stream::MdtestHard { rank, index: i });
                    write_pattern(fs, &mut f, &mut buf, seed, 0, MDTEST_HARD_FILE_BYTES as usize)
                        .with_context(|| path.clone())?;
                    fs.close(f).with_context(|| path.clone())
                }
            };
            let mut n = 0;
            let mut walled = false;
            while !walled {
                make(fs, n)?;
                n += 1;
                walled = run.tick(n, 0);
            }
            r.stonewall_count = n;
            let target = run.wear_out(n)?;
            while n < target {
                make(fs, n)?;
                n += 1;
                run.tick(n, 0);
            }
            // What a write-back cache holds is part of the phase's work.
            let dir = if easy { mdtest_easy_dir(rank) } else { "mdt_hard".to_string() };
            fs.sync_dir(&dir).with_context(|| format!("sync of {dir}"))?;
            (r.ops, r.count) = (n, n);
            if !easy {
                r.bytes = n * MDTEST_HARD_FILE_BYTES;
            }
        }
        Phase::MdtestEasyStat | Phase::MdtestHardStat => {
            let easy = spec.phase == Phase::MdtestEasyStat;
            let want = if easy { 0 } else { MDTEST_HARD_FILE_BYTES };
            for i in 0..spec.count {
                let path = if easy { mdtest_easy_path(src, i) } else { mdtest_hard_path(src, i) };
                let st = fs.stat(&path)?;
                if !st.is_file || st.size != want {
                    bail!(
                        "verification failed in {} on rank {rank}: {path} has size {} (regular file: {}), expected a file of {want} bytes",
                        spec.phase.name(),
                        st.size,
                        st.is_file
                    );
                }
                run.tick(i + 1, 0);
            }
            (r.ops, r.count) = (spec.count, spec.count);
        }
        Phase::MdtestHardRead => {
            let len = MDTEST_HARD_FILE_BYTES as usize;
            for i in 0..spec.count {
                let path = mdtest_hard_path(src, i);
                let mut f = fs.open_read(&path)?;
                let data = fs.pread(&mut f, 0, len + 1).with_context(|| path.clone())?;
                if data.len() != len {
                    bail!(
                        "verification failed in {} on rank {rank}: {path} holds {} bytes, expected {len}",
                        spec.phase.name(),
                        data.len()
                    );
                }
                let seed = pattern::seed(spec.run_seed, Stream::MdtestHard { rank: src, index: i });
                check(spec, &path, pattern::verify(seed, 0, data))?;
                fs.close(f).with_context(|| path.clone())?;
                run.tick(i + 1, (i + 1) * MDTEST_HARD_FILE_BYTES);
            }
            (r.ops, r.bytes, r.count) = (spec.count, spec.count * MDTEST_HARD_FILE_BYTES, spec.count);
        }
        Phase::MdtestEasyDelete | Phase::MdtestHardDelete => {
            let easy = spec.phase == Phase::MdtestEasyDelete;
            for i in 0..spec.count {
                fs.unlink(&if easy { mdtest_easy_path(rank, i) } else { mdtest_hard_path(rank, i) })?;
                run.tick(i + 1, 0);
            }
            (r.ops, r.count) = (spec.count, spec.count);
        }
        Phase::Find => {
            let mut f = Find { spec, scanned: 0, found: 0 };
            f.walk(fs, "", run)?;
            (r.ops, r.found) = (f.scanned, f.found);
        }
    }
    r.elapsed_s = run.elapsed_s();
    run.publish(r.ops, r.bytes);
    Ok(r)
}

/// IO-500's find, approximately: files whose name contains `01`, of 3901 bytes, modified
/// after the run's timestamp file (`find -name '*01*' -size 3901c -newer timestampfile`).
/// Every rank lists every directory; entry k of a listing is examined (counted, and stat'ed
/// when its name matches) by rank k mod N only. The rate counts entries examined.
struct Find<'a> {
    spec: &'a WorkerSpec,
    scanned: u64,
    found: u64,
}

impl Find<'_> {
    fn walk<F: BenchFs>(&mut self, fs: &mut F, dir: &str, run: &mut Run) -> Result<()> {
        let n = self.spec.nprocs.max(1) as usize;
        for (k, (name, is_dir)) in fs.readdir(dir)?.into_iter().enumerate() {
            let path = join(dir, &name);
            if k % n == self.spec.rank as usize {
                self.scanned += 1;
                if !is_dir && name.contains("01") {
                    let st = fs.stat(&path)?;
                    if st.is_file && st.size == MDTEST_HARD_FILE_BYTES && st.mtime_ns > self.spec.newer_than_ns {
                        self.found += 1;
                    }
                }
                run.tick(self.scanned, 0);
            }
            if is_dir {
                self.walk(fs, &path, run)?;
            }
        }
        Ok(())
    }
}

fn say(line: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|_| out.flush()).context("write to the parent")
}

fn run_with<F: BenchFs>(fs: &mut F, spec: &WorkerSpec) -> Result<WorkerResult> {
    let mut run = Run::new(spec)?;
    say("ready")?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).context("waiting for go")?;
    if line.trim() != "go" {
        bail!("the parent went away before the start");
    }
    run.start();
    run_phase(fs, spec, &mut run)
}

/// `weft bench worker --spec JSON`: the worker process's main. Prints the result line, also
/// for a failure (with `error` set), and fails when the phase failed.
pub fn worker_main(spec_json: &str) -> Result<()> {
    let spec: WorkerSpec = serde_json::from_str(spec_json).context("bad worker spec")?;
    let result = match &spec.api {
        Api::Posix => run_with(&mut PosixFs::new(&spec.root), &spec),
        Api::Native { mgs, wbc } => {
            NativeFs::connect_with(mgs, &spec.root, *wbc).and_then(|mut fs| run_with(&mut fs, &spec))
        }
    };
    let out = match &result {
        Ok(r) => r.clone(),
        Err(e) => WorkerResult { rank: spec.rank, error: Some(format!("{e:#}")), ..Default::default() },
    };
    say(&serde_json::to_string(&out)?)?;
    result.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(phase: Phase, root: &Path, count: u64) -> WorkerSpec {
        WorkerSpec {
            phase,
            rank: 0,
            nprocs: 1,
            api: Api::Posix,
            root: root.to_string_lossy().into_owned(),
            ctl_dir: String::new(),
            stonewall_s: 0.05,
            run_seed: 99,
            count,
            ior_max_bytes: Some(4 << 20),
            newer_than_ns: 0,
        }
    }

    fn go<F: BenchFs>(fs: &mut F, s: &WorkerSpec) -> Result<WorkerResult> {
        let mut run = Run::new(s)?;
        run.start();
        run_phase(fs, s, &mut run)
    }

    #[test]
    fn phases_replay_what_was_written_and_catch_a_flipped_byte() {
        let dir = tempfile::tempdir().unwrap();
        let mut fs = PosixFs::new(dir.path());
        for d in ["ior_easy", "ior_hard", "mdt_easy", "mdt_easy/rank0", "mdt_hard"] {
            fs.mkdir(d).unwrap();
        }
        let f = fs.create_excl(IOR_HARD_PATH).unwrap();
        fs.close(f).unwrap();

        let w = go(&mut fs, &spec(Phase::IorEasyWrite, dir.path(), 0)).unwrap();
        assert!(w.count >= 1 && w.count <= 4, "capped at 4 MiB: {w:?}");
        assert_eq!(w.bytes, w.count << 20);
        let r = go(&mut fs, &spec(Phase::IorEasyRead, dir.path(), w.count)).unwrap();
        assert_eq!(r.bytes, w.bytes);

        let h = go(&mut fs, &spec(Phase::IorHardWrite, dir.path(), 0)).unwrap();
        go(&mut fs, &spec(Phase::IorHardRead, dir.path(), h.count)).unwrap();

        let m = go(&mut fs, &spec(Phase::MdtestHardWrite, dir.path(), 0)).unwrap();
        assert!(m.count > 0);
        go(&mut fs, &spec(Phase::MdtestHardStat, dir.path(), m.count)).unwrap();
        go(&mut fs, &spec(Phase::MdtestHardRead, dir.path(), m.count)).unwrap();
        let found = go(&mut fs, &spec(Phase::Find, dir.path(), 0)).unwrap();
        assert!(found.ops >= m.count + 5, "every entry scanned: {found:?}");
        let expect = (0..m.count).filter(|i| format!("file.0.{i}").contains("01")).count() as u64;
        assert_eq!(found.found, expect);

        // One flipped byte in the middle of the second transfer of the ior-easy file.
        let path = dir.path().join(ior_easy_path(0));
        let mut bytes = std::fs::read(&path).unwrap();
        let at = (1 << 20) + 12345;
        bytes[at] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let err = go(&mut fs, &spec(Phase::IorEasyRead, dir.path(), w.count)).unwrap_err().to_string();
        assert!(err.contains("ior-easy-read") && err.contains("rank 0"), "{err}");
        assert!(err.contains("ior_easy/ior_file_easy.0") && err.contains(&format!("offset {at}")), "{err}");

        // A shorter mdtest-hard file.
        let p = dir.path().join(mdtest_hard_path(0, 0));
        std::fs::write(&p, b"short").unwrap();
        let err = go(&mut fs, &spec(Phase::MdtestHardRead, dir.path(), m.count)).unwrap_err().to_string();
        assert!(err.contains("mdt_hard/file.0.0"), "{err}");

        let e = go(&mut fs, &spec(Phase::MdtestEasyWrite, dir.path(), 0)).unwrap();
        go(&mut fs, &spec(Phase::MdtestEasyStat, dir.path(), e.count)).unwrap();
        go(&mut fs, &spec(Phase::MdtestEasyDelete, dir.path(), e.count)).unwrap();
        assert!(fs.readdir("mdt_easy/rank0").unwrap().is_empty());
    }

    #[test]
    fn wear_out_takes_the_most_any_rank_made() {
        let ctl = tempfile::tempdir().unwrap();
        let mut s = spec(Phase::IorHardWrite, ctl.path(), 0);
        s.ctl_dir = ctl.path().to_string_lossy().into_owned();
        s.nprocs = 3;
        std::fs::write(ctl.path().join("ior-hard-write.count.1"), "17").unwrap();
        std::fs::write(ctl.path().join("ior-hard-write.count.2"), "4").unwrap();
        let run = Run::new(&s).unwrap();
        assert_eq!(run.wear_out(9).unwrap(), 17);
        assert_eq!(std::fs::read_to_string(ctl.path().join("ior-hard-write.count.0")).unwrap(), "9");
    }
}
