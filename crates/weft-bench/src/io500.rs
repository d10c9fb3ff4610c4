//! `weft bench io500`: the parent. Makes a fresh directory, runs the phases in IO-500's order
//! with N worker processes each, prints each phase as it ends and the score, optionally runs
//! the same on a baseline directory (after Weft) and compares.

use crate::cpu::CpuClock;
use crate::fsapi::{drop_system_caches, BenchFs, PosixFs};
use crate::limits::{POLL_MS, PROGRESS_REDRAW_MS};
use crate::native::NativeFs;
use crate::phase::*;
use crate::report::{self, Report, Suite};
use crate::worker::*;
use anyhow::{anyhow, bail, Context, Result};
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub struct Options {
    /// Where the run's directory is made: a path, or with the native API a path in the Weft
    /// namespace.
    pub dir: String,
    pub api: Api,
    pub procs: u32,
    pub stonewall_s: f64,
    /// A local directory to run the same phases on, after Weft.
    pub baseline: Option<PathBuf>,
    pub json: Option<PathBuf>,
    pub ior_max_bytes: Option<u64>,
    /// Before every phase, of Weft and of the baseline: sync, drop the node's caches and let
    /// the machine settle ([`drop_system_caches`]). Needs root.
    pub drop_caches: bool,
    /// Only these phases (in IO-500's order); None: all. A phase left out leaves what it
    /// would have read or removed (the run's directory then stays).
    pub phases: Option<Vec<Phase>>,
    /// The program and arguments that run a worker; `--spec JSON` is appended.
    pub worker_command: Vec<OsString>,
}

pub fn run(opts: &Options) -> Result<Report> {
    if opts.procs == 0 {
        bail!("--procs must be at least 1");
    }
    if opts.worker_command.is_empty() {
        bail!("no worker command");
    }
    println!(
        "weft bench io500: {} processes, stonewall {} s, api {}{}{}",
        opts.procs,
        opts.stonewall_s,
        opts.api.name(),
        opts.ior_max_bytes.map(|b| format!(", ior writes at most {b} bytes per process")).unwrap_or_default(),
        if opts.drop_caches { ", caches dropped before each phase" } else { "" }
    );
    let weft = suite(opts, &opts.api, &opts.dir)?;
    let baseline = match &opts.baseline {
        Some(dir) => {
            println!();
            println!("baseline:");
            Some(suite(opts, &Api::Posix, &dir.to_string_lossy())?)
        }
        None => None,
    };
    if let Some(b) = &baseline {
        println!();
        for line in report::compare_lines(&weft, b) {
            println!("{line}");
        }
    }
    let ratios = baseline.as_ref().map(|b| Report::ratios(&weft, b));
    let report = Report {
        procs: opts.procs,
        stonewall_s: opts.stonewall_s,
        ior_max_bytes: opts.ior_max_bytes,
        drop_caches: opts.drop_caches,
        weft,
        baseline,
        ratios,
    };
    if let Some(path) = &opts.json {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text + "\n").with_context(|| format!("write {}", path.display()))?;
    }
    Ok(report)
}

fn unix_now() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// All phases on a fresh directory under `dir`.
fn suite(opts: &Options, api: &Api, dir: &str) -> Result<Suite> {
    let name = format!("weft-io500.{}.{}", unix_now().as_secs(), std::process::id());
    let root = format!("{}/{name}", dir.trim_end_matches('/'));
    let newer_than_ns = match api {
        Api::Posix => {
            let mut fs = PosixFs::new(dir);
            fs.stat("").with_context(|| format!("--dir {dir}"))?;
            fs.mkdir(&name)?;
            setup(&mut PosixFs::new(&root), opts.procs)?
        }
        Api::Native { mgs, wbc } => {
            NativeFs::connect(mgs, dir)?.mkdir(&name)?;
            setup(&mut NativeFs::connect_with(mgs, &root, *wbc)?, opts.procs)?
        }
    };
    println!("dir {root} (api {})", api.name());
    let ctl = tempfile::Builder::new().prefix("weft-bench-").tempdir().context("control directory")?;
    let base = WorkerSpec {
        phase: Phase::Find,
        rank: 0,
        nprocs: opts.procs,
        api: api.clone(),
        root: root.clone(),
        ctl_dir: ctl.path().to_string_lossy().into_owned(),
        stonewall_s: opts.stonewall_s,
        run_seed: crate::pattern::mix(unix_now().as_nanos() as u64 ^ std::process::id() as u64),
        count: 0,
        ior_max_bytes: opts.ior_max_bytes,
        newer_than_ns,
    };
    let mut counts: HashMap<Phase, Vec<u64>> = HashMap::new();
    let mut phases = Vec::new();
    for phase in ORDER {
        if opts.phases.as_ref().is_some_and(|only| !only.contains(&phase)) {
            continue;
        }
        if opts.drop_caches {
            drop_system_caches()?;
        } else if *api == Api::Posix && matches!(phase, Phase::IorEasyRead | Phase::IorHardRead) {
            // The reads measure the file system, not this node's page cache. (Pages a file
            // system keeps elsewhere, as in the object file behind a FUSE passthrough open,
            // are out of reach of this; --drop-caches reaches them.)
            let mut fs = PosixFs::new(&root);
            let files: Vec<String> = if phase == Phase::IorEasyRead {
                (0..opts.procs).map(ior_easy_path).collect()
            } else {
                vec![IOR_HARD_PATH.to_string()]
            };
            for f in files {
                fs.drop_cache(&f)?;
            }
        }
        let specs: Vec<WorkerSpec> = (0..opts.procs)
            .map(|rank| {
                let count = match phase.source() {
                    Some(src) => {
                        let of = match phase {
                            Phase::MdtestEasyDelete | Phase::MdtestHardDelete => rank,
                            _ => neighbour(rank, opts.procs),
                        };
                        counts.get(&src).and_then(|c| c.get(of as usize)).copied().unwrap_or(0)
                    }
                    None => 0,
                };
                WorkerSpec { phase, rank, count, ..base.clone() }
            })
            .collect();
        let result = run_phase_procs(opts, phase, &specs, ctl.path())
            .with_context(|| format!("{} failed; the run's files are left in {root}", phase.name()))?;
        println!("{}", report::result_line(&result));
        if phase.is_stonewalled() {
            counts.insert(phase, result.counts.clone());
        }
        phases.push(result);
    }
    let score = Score::of(&phases);
    println!("{}", report::score_line(&score));
    let cleanup = match api {
        Api::Posix => teardown(&mut PosixFs::new(&root), opts.procs).and_then(|_| PosixFs::new(dir).rmdir(&name)),
        Api::Native { mgs, .. } => NativeFs::connect(mgs, &root)
            .and_then(|mut fs| teardown(&mut fs, opts.procs))
            .and_then(|_| NativeFs::connect(mgs, dir)?.rmdir(&name)),
    };
    if let Err(e) = cleanup {
        eprintln!("weft bench: could not remove {root}: {e:#}");
    }
    Ok(Suite { dir: root, api: api.name().to_string(), phases, score })
}

/// The run's tree: the phases' directories, the shared ior-hard file and the timestamp file
/// find compares with. Returns the timestamp's modification time.
fn setup<F: BenchFs>(fs: &mut F, procs: u32) -> Result<i128> {
    for d in ["ior_easy", "ior_hard", "mdt_easy", "mdt_hard"] {
        fs.mkdir(d)?;
    }
    for rank in 0..procs {
        fs.mkdir(&mdtest_easy_dir(rank))?;
    }
    for f in ["timestampfile", IOR_HARD_PATH] {
        let file = fs.create_excl(f)?;
        fs.close(file)?;
    }
    Ok(fs.stat("timestampfile")?.mtime_ns)
}

fn teardown<F: BenchFs>(fs: &mut F, procs: u32) -> Result<()> {
    for rank in 0..procs {
        fs.unlink(&ior_easy_path(rank)).ok();
        fs.rmdir(&mdtest_easy_dir(rank))?;
    }
    fs.unlink(IOR_HARD_PATH)?;
    fs.unlink("timestampfile")?;
    for d in ["ior_easy", "ior_hard", "mdt_easy", "mdt_hard"] {
        fs.rmdir(d)?;
    }
    Ok(())
}

struct Worker {
    rank: u32,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Worker {
    /// The result line a worker printed (all of its remaining stdout).
    fn result(&mut self) -> Result<WorkerResult> {
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).context("read a worker's output")?;
        let line = rest.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
        serde_json::from_str(line).map_err(|_| anyhow!("rank {} printed no result (output: {rest:?})", self.rank))
    }
}

fn kill_all(workers: &mut [Worker]) {
    for w in workers {
        let _ = w.child.kill();
        let _ = w.child.wait();
    }
}

/// Starts the workers of one phase, starts them together, draws the progress line, collects
/// their results and measures the machine's CPU time.
fn run_phase_procs(opts: &Options, phase: Phase, specs: &[WorkerSpec], ctl: &std::path::Path) -> Result<PhaseResult> {
    let mut workers = Vec::new();
    for spec in specs {
        let mut cmd = Command::new(&opts.worker_command[0]);
        cmd.args(&opts.worker_command[1..]).arg("--spec").arg(serde_json::to_string(spec)?);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
        let spawned = cmd.spawn().with_context(|| format!("start worker {:?}", opts.worker_command[0]));
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                kill_all(&mut workers);
                return Err(e);
            }
        };
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let Some(stdout) = stdout else {
            kill_all(&mut workers);
            bail!("worker without stdout");
        };
        workers.push(Worker { rank: spec.rank, child, stdin, stdout: BufReader::new(stdout) });
    }
    // Everyone ready (file system open), then go.
    for i in 0..workers.len() {
        let mut line = String::new();
        let _ = workers[i].stdout.read_line(&mut line);
        if line.trim() != "ready" {
            let why = serde_json::from_str::<WorkerResult>(line.trim())
                .ok()
                .and_then(|r| r.error)
                .unwrap_or_else(|| format!("it printed {line:?}"));
            let rank = workers[i].rank;
            kill_all(&mut workers);
            bail!("rank {rank} did not start: {why}");
        }
    }
    let cpu = CpuClock::now();
    let t0 = Instant::now();
    for w in &mut workers {
        if let Some(mut stdin) = w.stdin.take() {
            let _ = stdin.write_all(b"go\n");
        }
    }
    let show = std::io::stderr().is_terminal();
    let mut next_draw = t0 + Duration::from_millis(PROGRESS_REDRAW_MS);
    let mut drawn = false;
    loop {
        let mut running = 0;
        let mut failed = None;
        for (i, w) in workers.iter_mut().enumerate() {
            match w.child.try_wait() {
                Ok(None) => running += 1,
                Ok(Some(status)) if !status.success() => failed = Some((i, status)),
                Ok(Some(_)) => {}
                Err(e) => return Err(e).context("wait for a worker"),
            }
        }
        if let Some((i, status)) = failed {
            if drawn {
                eprint!("\r{:80}\r", "");
            }
            let rank = workers[i].rank;
            let why = match workers[i].result() {
                Ok(WorkerResult { error: Some(e), .. }) => e,
                _ => format!("the worker exited with {status}"),
            };
            kill_all(&mut workers);
            bail!("rank {rank}: {why}");
        }
        if running == 0 {
            break;
        }
        if show && Instant::now() >= next_draw {
            next_draw = Instant::now() + Duration::from_millis(PROGRESS_REDRAW_MS);
            eprint!("\r{:80}\r{}", "", progress_line(phase, ctl, specs.len() as u32, t0.elapsed().as_secs_f64()));
            drawn = true;
        }
        std::thread::sleep(Duration::from_millis(POLL_MS));
    }
    let cpu_s = cpu.seconds_since();
    if drawn {
        eprint!("\r{:80}\r", "");
    }
    let mut results = Vec::new();
    for w in &mut workers {
        let r = w.result()?;
        if let Some(e) = r.error {
            bail!("rank {}: {e}", r.rank);
        }
        results.push(r);
    }
    Ok(PhaseResult::from_workers(phase, &results, cpu_s))
}

/// `ior-easy-write   12.5 s   1.234 GiB/s so far`, from the workers' progress files.
fn progress_line(phase: Phase, ctl: &std::path::Path, procs: u32, elapsed_s: f64) -> String {
    let (mut ops, mut bytes) = (0u64, 0u64);
    for rank in 0..procs {
        if let Ok(b) = std::fs::read(ctl.join(format!("progress.{rank}"))) {
            if b.len() >= 16 {
                let word = |r: std::ops::Range<usize>| {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(&b[r]);
                    u64::from_le_bytes(a)
                };
                ops += word(0..8);
                bytes += word(8..16);
            }
        }
    }
    format!(
        "{:<20} {:>7.1} s {:>12.3} {} so far",
        phase.name(),
        elapsed_s,
        phase.value(ops, bytes, elapsed_s),
        phase.unit()
    )
}
