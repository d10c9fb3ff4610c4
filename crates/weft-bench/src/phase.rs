//! The IO-500 phases, what a worker is asked to do and what it answers, and the figures
//! (rates, geometric means, score) made from the answers. Pure: no I/O.

use serde::{Deserialize, Serialize};

/// ior-easy: one file per process, written in transfers of this size.
pub const IOR_EASY_TRANSFER_BYTES: u64 = 1 << 20;
/// ior-hard: one shared file, transfers of this size interleaved across processes.
pub const IOR_HARD_TRANSFER_BYTES: u64 = 47_008;
/// mdtest-hard: the size of every file.
pub const MDTEST_HARD_FILE_BYTES: u64 = 3_901;

const GIB_BYTES: f64 = (1u64 << 30) as f64;

/// The phases in IO-500's order (io500 2.x): writes and creates first, then find, then the
/// reads, stats and deletes, interleaved so that no phase reads what the one before it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    IorEasyWrite,
    MdtestEasyWrite,
    IorHardWrite,
    MdtestHardWrite,
    Find,
    IorEasyRead,
    MdtestEasyStat,
    IorHardRead,
    MdtestHardStat,
    MdtestEasyDelete,
    MdtestHardRead,
    MdtestHardDelete,
}

pub const ORDER: [Phase; 12] = [
    Phase::IorEasyWrite,
    Phase::MdtestEasyWrite,
    Phase::IorHardWrite,
    Phase::MdtestHardWrite,
    Phase::Find,
    Phase::IorEasyRead,
    Phase::MdtestEasyStat,
    Phase::IorHardRead,
    Phase::MdtestHardStat,
    Phase::MdtestEasyDelete,
    Phase::MdtestHardRead,
    Phase::MdtestHardDelete,
];

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::IorEasyWrite => "ior-easy-write",
            Phase::MdtestEasyWrite => "mdtest-easy-write",
            Phase::IorHardWrite => "ior-hard-write",
            Phase::MdtestHardWrite => "mdtest-hard-write",
            Phase::Find => "find",
            Phase::IorEasyRead => "ior-easy-read",
            Phase::MdtestEasyStat => "mdtest-easy-stat",
            Phase::IorHardRead => "ior-hard-read",
            Phase::MdtestHardStat => "mdtest-hard-stat",
            Phase::MdtestEasyDelete => "mdtest-easy-delete",
            Phase::MdtestHardRead => "mdtest-hard-read",
            Phase::MdtestHardDelete => "mdtest-hard-delete",
        }
    }

    /// Measured in GiB/s (the ior phases); the others in kIOPS.
    pub fn is_bandwidth(self) -> bool {
        matches!(self, Phase::IorEasyWrite | Phase::IorEasyRead | Phase::IorHardWrite | Phase::IorHardRead)
    }

    /// Runs until the stonewall, then wears out to the most any process did.
    pub fn is_stonewalled(self) -> bool {
        matches!(self, Phase::IorEasyWrite | Phase::IorHardWrite | Phase::MdtestEasyWrite | Phase::MdtestHardWrite)
    }

    /// The phase whose per-process counts this phase replays.
    pub fn source(self) -> Option<Phase> {
        match self {
            Phase::IorEasyRead => Some(Phase::IorEasyWrite),
            Phase::IorHardRead => Some(Phase::IorHardWrite),
            Phase::MdtestEasyStat | Phase::MdtestEasyDelete => Some(Phase::MdtestEasyWrite),
            Phase::MdtestHardStat | Phase::MdtestHardRead | Phase::MdtestHardDelete => Some(Phase::MdtestHardWrite),
            _ => None,
        }
    }

    pub fn unit(self) -> &'static str {
        if self.is_bandwidth() {
            "GiB/s"
        } else {
            "kiops"
        }
    }

    /// The figure of a phase that moved `bytes` and did `ops` in `seconds`.
    pub fn value(self, ops: u64, bytes: u64, seconds: f64) -> f64 {
        if seconds <= 0.0 {
            return 0.0;
        }
        if self.is_bandwidth() {
            bytes as f64 / GIB_BYTES / seconds
        } else {
            ops as f64 / 1000.0 / seconds
        }
    }
}

/// The rank whose files rank `rank` reads, stats or deletes: the next one, as IOR's -C and
/// mdtest's -N 1 shift tasks so that no process reads back what it wrote itself.
pub fn neighbour(rank: u32, nprocs: u32) -> u32 {
    (rank + 1) % nprocs.max(1)
}

/// Where segment `segment` of rank `rank` lives in the ior-hard file: segments are
/// interleaved across the `nprocs` ranks, one transfer each (IOR's -s with -b = -t).
pub fn ior_hard_offset(segment: u64, nprocs: u32, rank: u32) -> u64 {
    (segment * nprocs as u64 + rank as u64) * IOR_HARD_TRANSFER_BYTES
}

/// IO-500's wear-out: after the stonewall every rank goes on to the most any rank reached,
/// so the ranks end equal and the shared ior-hard file has no holes.
pub fn wear_out_target(counts: &[u64]) -> u64 {
    counts.iter().copied().max().unwrap_or(0)
}

/// The geometric mean; 0 when any figure is 0 or there are none (as IO-500: a phase that did
/// nothing zeroes the score).
pub fn geometric_mean(values: &[f64]) -> f64 {
    if values.is_empty() || values.iter().any(|v| v.is_nan() || *v <= 0.0 || v.is_infinite()) {
        return 0.0;
    }
    (values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp()
}

/// How the API reaches the file system.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Api {
    /// System calls on a path (a Weft mount, or any local directory).
    Posix,
    /// The Weft client library, without FUSE; `dir` is a path in the Weft namespace.
    /// `wbc`: the client's metadata write-back cache on.
    Native {
        mgs: String,
        #[serde(default)]
        wbc: bool,
    },
}

impl Api {
    pub fn name(&self) -> &'static str {
        match self {
            Api::Posix => "posix",
            Api::Native { wbc: false, .. } => "native",
            Api::Native { wbc: true, .. } => "native+wbc",
        }
    }
}

/// What one worker process does in one phase.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerSpec {
    pub phase: Phase,
    pub rank: u32,
    pub nprocs: u32,
    pub api: Api,
    /// The run's directory (a path, or a path in the Weft namespace with the native API).
    pub root: String,
    /// Where the worker writes its progress and exchanges wear-out counts (a local dir).
    pub ctl_dir: String,
    pub stonewall_s: f64,
    pub run_seed: u64,
    /// Read, stat and delete phases: how many items the rank whose files this one handles
    /// made (transfers, segments or files).
    pub count: u64,
    /// ior phases: the most each process writes before the stonewall (IOR's block size).
    pub ior_max_bytes: Option<u64>,
    /// find: the modification time (ns since the epoch) of the run's timestamp file.
    pub newer_than_ns: i128,
}

/// What a worker answers, one JSON line on stdout.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WorkerResult {
    pub rank: u32,
    pub ops: u64,
    pub bytes: u64,
    pub elapsed_s: f64,
    /// Items made (write phases, after wear-out): what the later phases replay.
    pub count: u64,
    /// Items made when the stonewall came.
    pub stonewall_count: u64,
    /// find: entries that matched.
    pub found: u64,
    pub error: Option<String>,
}

/// One phase, all workers together.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseResult {
    pub phase: Phase,
    pub name: String,
    pub value: f64,
    pub unit: String,
    /// The slowest worker's time, wear-out included.
    pub seconds: f64,
    pub ops: u64,
    pub bytes: u64,
    /// Busy CPU seconds of the whole machine per GB (10^9 bytes) moved, for ior phases.
    pub cpu_s_per_gb: Option<f64>,
    pub cpu_s: Option<f64>,
    /// find: entries that matched the criteria.
    pub found: Option<u64>,
    /// Per rank: items made (write phases).
    pub counts: Vec<u64>,
}

impl PhaseResult {
    pub fn from_workers(phase: Phase, results: &[WorkerResult], cpu_s: Option<f64>) -> PhaseResult {
        let ops = results.iter().map(|r| r.ops).sum();
        let bytes = results.iter().map(|r| r.bytes).sum();
        let seconds = results.iter().map(|r| r.elapsed_s).fold(0.0, f64::max);
        let mut by_rank: Vec<&WorkerResult> = results.iter().collect();
        by_rank.sort_by_key(|r| r.rank);
        PhaseResult {
            phase,
            name: phase.name().to_string(),
            value: phase.value(ops, bytes, seconds),
            unit: phase.unit().to_string(),
            seconds,
            ops,
            bytes,
            cpu_s_per_gb: if phase.is_bandwidth() {
                cpu_s.and_then(|c| crate::cpu::seconds_per_gb(c, bytes))
            } else {
                None
            },
            cpu_s,
            found: (phase == Phase::Find).then(|| results.iter().map(|r| r.found).sum()),
            counts: by_rank.iter().map(|r| r.count).collect(),
        }
    }
}

/// IO-500's summary: bandwidth is the geometric mean of the four ior figures, IOPS of the
/// eight mdtest figures and find, the score the square root of their product.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Score {
    pub bandwidth_gib_s: f64,
    pub iops_kiops: f64,
    pub score: f64,
}

impl Score {
    pub fn of(phases: &[PhaseResult]) -> Score {
        let bw: Vec<f64> = phases.iter().filter(|p| p.phase.is_bandwidth()).map(|p| p.value).collect();
        let md: Vec<f64> = phases.iter().filter(|p| !p.phase.is_bandwidth()).map(|p| p.value).collect();
        let bandwidth_gib_s = geometric_mean(&bw);
        let iops_kiops = geometric_mean(&md);
        Score { bandwidth_gib_s, iops_kiops, score: (bandwidth_gib_s * iops_kiops).sqrt() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_and_kinds() {
        let names: Vec<&str> = ORDER.iter().map(|p| p.name()).collect();
        assert_eq!(names[0], "ior-easy-write");
        assert_eq!(names[4], "find");
        assert_eq!(names[11], "mdtest-hard-delete");
        assert_eq!(ORDER.iter().filter(|p| p.is_bandwidth()).count(), 4);
        for p in ORDER {
            if let Some(src) = p.source() {
                let at = |q| ORDER.iter().position(|x| *x == q).unwrap();
                assert!(at(src) < at(p), "{} runs after {}", p.name(), src.name());
                assert!(src.is_stonewalled());
            }
        }
        let json = serde_json::to_string(&Phase::MdtestHardStat).unwrap();
        assert_eq!(json, "\"mdtest-hard-stat\"");
    }

    #[test]
    fn ior_hard_segments_tile_the_file() {
        let n = 3;
        let mut offsets: Vec<u64> = (0..4).flat_map(|s| (0..n).map(move |r| ior_hard_offset(s, n, r))).collect();
        offsets.sort();
        for (i, off) in offsets.iter().enumerate() {
            assert_eq!(*off, i as u64 * IOR_HARD_TRANSFER_BYTES, "no holes, no overlaps");
        }
        assert_eq!(ior_hard_offset(2, 4, 1), 9 * 47_008);
        assert_eq!(wear_out_target(&[5, 9, 7]), 9);
        assert_eq!(wear_out_target(&[]), 0);
        assert_eq!(neighbour(2, 3), 0);
        assert_eq!(neighbour(0, 1), 0);
    }

    #[test]
    fn means_and_score() {
        assert!((geometric_mean(&[2.0, 8.0]) - 4.0).abs() < 1e-12);
        assert_eq!(geometric_mean(&[2.0, 0.0]), 0.0);
        assert_eq!(geometric_mean(&[]), 0.0);
        let phase = |p: Phase, value: f64| PhaseResult {
            phase: p,
            name: p.name().into(),
            value,
            unit: p.unit().into(),
            seconds: 1.0,
            ops: 0,
            bytes: 0,
            cpu_s_per_gb: None,
            cpu_s: None,
            found: None,
            counts: vec![],
        };
        let phases: Vec<PhaseResult> =
            ORDER.iter().map(|p| phase(*p, if p.is_bandwidth() { 4.0 } else { 9.0 })).collect();
        let s = Score::of(&phases);
        assert!((s.bandwidth_gib_s - 4.0).abs() < 1e-9);
        assert!((s.iops_kiops - 9.0).abs() < 1e-9);
        assert!((s.score - 6.0).abs() < 1e-9);
    }

    #[test]
    fn figures_from_workers() {
        let w = |rank, ops, bytes, elapsed_s| WorkerResult {
            rank,
            ops,
            bytes,
            elapsed_s,
            count: ops,
            ..Default::default()
        };
        let r = PhaseResult::from_workers(
            Phase::IorEasyWrite,
            &[w(1, 10, 3 << 30, 2.0), w(0, 20, 1 << 30, 4.0)],
            Some(8.0),
        );
        assert_eq!(r.seconds, 4.0, "the slowest worker's time");
        assert!((r.value - 1.0).abs() < 1e-12, "4 GiB in 4 s");
        assert_eq!(r.counts, vec![20, 10], "counts by rank");
        let gb = (4u64 << 30) as f64 / 1e9;
        assert!((r.cpu_s_per_gb.unwrap() - 8.0 / gb).abs() < 1e-9);
        let m = PhaseResult::from_workers(Phase::MdtestEasyWrite, &[w(0, 3000, 0, 1.5)], Some(1.0));
        assert!((m.value - 2.0).abs() < 1e-12);
        assert_eq!(m.cpu_s_per_gb, None);
    }
}
