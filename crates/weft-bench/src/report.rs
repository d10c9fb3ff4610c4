//! The text and JSON the parent prints: IO-500's `[RESULT]` and `[SCORE ]` lines, with the
//! CPU cost of each bandwidth phase, and the comparison with a baseline.

use crate::phase::{PhaseResult, Score};
use serde::Serialize;

/// `[RESULT]       ior-easy-write        1.234567 GiB/s : time 30.123 seconds`, as IO-500
/// prints it, then the machine's CPU seconds per GB for bandwidth phases.
pub fn result_line(p: &PhaseResult) -> String {
    let mut line = format!("[RESULT] {:>20} {:>15.6} {} : time {:.3} seconds", p.name, p.value, p.unit, p.seconds);
    if let Some(c) = p.cpu_s_per_gb {
        line.push_str(&format!(" : cpu {c:.3} s/GB"));
    }
    if let Some(found) = p.found {
        line.push_str(&format!(" : found {found} of {} entries", p.ops));
    }
    line
}

pub fn score_line(s: &Score) -> String {
    format!("[SCORE ] Bandwidth {:.6} GiB/s : IOPS {:.6} kiops : TOTAL {:.6}", s.bandwidth_gib_s, s.iops_kiops, s.score)
}

/// weft / baseline; `None` when the baseline is 0.
pub fn ratio(weft: f64, baseline: f64) -> Option<f64> {
    (baseline > 0.0).then(|| weft / baseline)
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map(|r| format!("{r:.3}")).unwrap_or_else(|| "-".to_string())
}

/// One line per phase (Weft's value, the baseline's, the ratio), then the summary figures.
pub fn compare_lines(weft: &Suite, baseline: &Suite) -> Vec<String> {
    let mut lines = Vec::new();
    for (w, b) in weft.phases.iter().zip(&baseline.phases) {
        let mut line = format!(
            "[COMPARE] {:>20} weft {:>12.6} {} : baseline {:>12.6} {} : ratio {}",
            w.name,
            w.value,
            w.unit,
            b.value,
            b.unit,
            fmt_ratio(ratio(w.value, b.value))
        );
        if let (Some(wc), Some(bc)) = (w.cpu_s_per_gb, b.cpu_s_per_gb) {
            line.push_str(&format!(" : cpu {wc:.3} vs {bc:.3} s/GB"));
        }
        lines.push(line);
    }
    let (w, b) = (&weft.score, &baseline.score);
    lines.push(format!(
        "[COMPARE] {:>20} weft {:>12.6} GiB/s : baseline {:>12.6} GiB/s : ratio {}",
        "bandwidth",
        w.bandwidth_gib_s,
        b.bandwidth_gib_s,
        fmt_ratio(ratio(w.bandwidth_gib_s, b.bandwidth_gib_s))
    ));
    lines.push(format!(
        "[COMPARE] {:>20} weft {:>12.6} kiops : baseline {:>12.6} kiops : ratio {}",
        "iops",
        w.iops_kiops,
        b.iops_kiops,
        fmt_ratio(ratio(w.iops_kiops, b.iops_kiops))
    ));
    lines.push(format!(
        "[COMPARE] {:>20} weft {:>12.6}       : baseline {:>12.6}       : ratio {}",
        "score",
        w.score,
        b.score,
        fmt_ratio(ratio(w.score, b.score))
    ));
    lines
}

/// One run of all phases on one directory.
#[derive(Debug, Clone, Serialize)]
pub struct Suite {
    pub dir: String,
    pub api: String,
    pub phases: Vec<PhaseResult>,
    pub score: Score,
}

#[derive(Debug, Clone, Serialize)]
pub struct Ratios {
    pub phases: Vec<(String, Option<f64>)>,
    pub bandwidth: Option<f64>,
    pub iops: Option<f64>,
    pub score: Option<f64>,
}

/// Everything `--json` writes.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub procs: u32,
    pub stonewall_s: f64,
    pub ior_max_bytes: Option<u64>,
    /// Whether the node's caches were dropped before every phase.
    pub drop_caches: bool,
    pub weft: Suite,
    pub baseline: Option<Suite>,
    pub ratios: Option<Ratios>,
}

impl Report {
    pub fn ratios(weft: &Suite, baseline: &Suite) -> Ratios {
        Ratios {
            phases: weft
                .phases
                .iter()
                .zip(&baseline.phases)
                .map(|(w, b)| (w.name.clone(), ratio(w.value, b.value)))
                .collect(),
            bandwidth: ratio(weft.score.bandwidth_gib_s, baseline.score.bandwidth_gib_s),
            iops: ratio(weft.score.iops_kiops, baseline.score.iops_kiops),
            score: ratio(weft.score.score, baseline.score.score),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phase::{Phase, WorkerResult};

    fn phase(p: Phase, ops: u64, bytes: u64, s: f64) -> PhaseResult {
        let w = WorkerResult { ops, bytes, elapsed_s: s, ..Default::default() };
        PhaseResult::from_workers(p, &[w], Some(2.0))
    }

    #[test]
    fn lines_look_like_io500() {
        let p = phase(Phase::IorEasyWrite, 1, 3 << 30, 2.0);
        assert_eq!(
            result_line(&p),
            "[RESULT]       ior-easy-write        1.500000 GiB/s : time 2.000 seconds : cpu 0.621 s/GB"
        );
        let m = phase(Phase::MdtestHardStat, 5000, 0, 0.5);
        assert_eq!(result_line(&m), "[RESULT]     mdtest-hard-stat       10.000000 kiops : time 0.500 seconds");
        let s = Score { bandwidth_gib_s: 1.5, iops_kiops: 6.0, score: 3.0 };
        assert_eq!(score_line(&s), "[SCORE ] Bandwidth 1.500000 GiB/s : IOPS 6.000000 kiops : TOTAL 3.000000");
    }

    #[test]
    fn comparison() {
        let suite = |v: u64| {
            let phases = vec![phase(Phase::IorEasyWrite, 1, v << 30, 1.0), phase(Phase::Find, v * 1000, 0, 1.0)];
            let score = Score::of(&phases);
            Suite { dir: "d".into(), api: "posix".into(), phases, score }
        };
        let (w, b) = (suite(1), suite(4));
        let lines = compare_lines(&w, &b);
        assert!(
            lines[0].contains("ior-easy-write") && lines[0].ends_with("ratio 0.250 : cpu 1.863 vs 0.466 s/GB"),
            "{}",
            lines[0]
        );
        assert!(lines[4].contains("score") && lines[4].contains("ratio 0.250"), "{}", lines[4]);
        let r = Report::ratios(&w, &b);
        assert_eq!(r.phases[1], ("find".to_string(), Some(0.25)));
        assert_eq!(ratio(1.0, 0.0), None);
    }
}
