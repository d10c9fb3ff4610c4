//! `weft bench`: arguments only; the benchmarks live in the weft-bench crate.

use anyhow::{anyhow, Context};
use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;
use weft_bench::phase::Api;
use weft_proto::units::parse_size;

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Run the IO-500 phases (ior-easy/hard, mdtest-easy/hard, find) with N processes.
    Io500(Io500Args),
    /// One writer then one reader of one file: MB/s and CPU seconds per GB.
    Stream(StreamArgs),
    /// One worker process of io500 (started by io500 itself).
    #[command(hide = true)]
    Worker(WorkerArgs),
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ApiArg {
    /// System calls on the directory (a Weft mount, or any directory).
    Posix,
    /// The Weft client library, without FUSE; --dir is a path in the Weft namespace.
    Native,
}

#[derive(Args)]
struct ApiArgs {
    /// How to reach the file system.
    #[arg(long, value_enum, default_value = "posix")]
    api: ApiArg,
    /// With --api native: where the management service is.
    #[command(flatten)]
    at: crate::cluster_addr::MgsArgs,
    /// With --api native: the client library's metadata write-back cache on (files made in
    /// a directory the client holds alone are sent to the MDT in batches).
    #[arg(long)]
    wbc: bool,
}

impl ApiArgs {
    fn api(&self) -> anyhow::Result<Api> {
        Ok(match self.api {
            ApiArg::Posix => Api::Posix,
            ApiArg::Native => {
                let mgs = self.at.address(None).map_err(|e| anyhow!("--api native: {e:#}"))?;
                Api::Native { mgs, wbc: self.wbc }
            }
        })
    }
}

#[derive(Args)]
struct Io500Args {
    /// Where to run: a directory on the file system to measure (a fresh subdirectory is made).
    #[arg(long, value_name = "PATH")]
    dir: String,
    /// Worker processes (default: the number of CPUs).
    #[arg(long, value_name = "N")]
    procs: Option<u32>,
    /// Seconds the write and create phases run (IO-500 uses 300).
    #[arg(long, default_value_t = 30.0, value_name = "SECONDS")]
    stonewall: f64,
    /// Also run the phases on this local directory and print Weft's figures as ratios of its.
    #[arg(long, value_name = "DIR")]
    baseline: Option<PathBuf>,
    /// Write every figure as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Most bytes each process writes in ior-easy and ior-hard even before the stonewall
    /// (IOR's block size; a valid IO-500 run has none), e.g. 1G.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    ior_max: Option<u64>,
    /// Before every phase (Weft's and the baseline's): sync, drop this node's page cache,
    /// dentries and inodes (/proc/sys/vm/drop_caches, needs root) and wait 3 s, as IO-500's
    /// drop-caches option. Reads then reach the storage, and every write phase starts from
    /// the same memory state.
    #[arg(long)]
    drop_caches: bool,
    /// Only these phases, comma-separated (e.g. mdtest-easy-write,mdtest-easy-stat,
    /// mdtest-easy-delete); a phase left out leaves its files (the run's directory stays).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_phase)]
    phases: Option<Vec<weft_bench::phase::Phase>>,
    #[command(flatten)]
    api: ApiArgs,
}

fn parse_phase(s: &str) -> anyhow::Result<weft_bench::phase::Phase> {
    weft_bench::phase::ORDER.into_iter().find(|p| p.name() == s).ok_or_else(|| {
        let names: Vec<&str> = weft_bench::phase::ORDER.iter().map(|p| p.name()).collect();
        anyhow!("no phase {s}; the phases: {}", names.join(", "))
    })
}

#[derive(Args)]
struct StreamArgs {
    /// The directory to write the file in.
    #[arg(long, value_name = "PATH")]
    dir: String,
    /// How much to write and read, e.g. 4G.
    #[arg(long, default_value = "4G", value_name = "SIZE", value_parser = parse_size)]
    size: u64,
    /// Bytes per write and read call.
    #[arg(long, default_value = "1M", value_name = "SIZE", value_parser = parse_size)]
    bs: u64,
    /// Write the figures as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Sync, drop this node's caches (needs root) and wait 3 s before the writer and before
    /// the reader.
    #[arg(long)]
    drop_caches: bool,
    /// First measure one TCP stream over loopback with the same size and calls, and print
    /// the writer's and reader's rates as ratios of it.
    #[arg(long)]
    loopback: bool,
    #[command(flatten)]
    api: ApiArgs,
}

#[derive(Args)]
struct WorkerArgs {
    /// The phase to run, as JSON.
    #[arg(long, value_name = "JSON")]
    spec: String,
}

pub fn bench(a: BenchArgs) -> anyhow::Result<()> {
    match a.command {
        BenchCommand::Io500(a) => {
            let procs = match a.procs {
                Some(n) => n,
                None => std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1),
            };
            let exe = std::env::current_exe().context("cannot find the weft binary to start workers")?;
            let opts = weft_bench::io500::Options {
                dir: a.dir,
                api: a.api.api()?,
                procs,
                stonewall_s: a.stonewall,
                baseline: a.baseline,
                json: a.json,
                ior_max_bytes: a.ior_max,
                drop_caches: a.drop_caches,
                phases: a.phases,
                worker_command: vec![exe.into(), "bench".into(), "worker".into()],
            };
            weft_bench::io500::run(&opts).map(|_| ())
        }
        BenchCommand::Stream(a) => {
            let opts = weft_bench::stream::Options {
                dir: a.dir,
                api: a.api.api()?,
                size_bytes: a.size,
                block_bytes: a.bs,
                json: a.json,
                drop_caches: a.drop_caches,
                loopback: a.loopback,
            };
            weft_bench::stream::run(&opts).map(|_| ())
        }
        BenchCommand::Worker(a) => weft_bench::worker::worker_main(&a.spec),
    }
}
