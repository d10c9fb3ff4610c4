//! Per-opcode request statistics: the "account" stage of the server pipeline. Lustre shows
//! the same shape in its `stats` and `job_stats` files: samples, min, max, sum.

use crate::account::{Account, Outcome};
use crate::context::RequestContext;
use std::collections::BTreeMap;
use std::sync::Mutex;
use weft_proto::msg::{Service, TargetKind};

/// Latency histogram buckets: bucket i counts requests that took < 2^i microseconds.
pub const LATENCY_BUCKETS: usize = 32;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpStats {
    pub samples: u64,
    pub errors: u64,
    pub min_us: u64,
    pub max_us: u64,
    pub sum_us: u64,
    /// Bulk bytes in and out, and of those the request's (a write's data) and the reply's.
    pub bytes: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub latency_log2_us: [u64; LATENCY_BUCKETS],
}

impl OpStats {
    fn merge(&mut self, o: &OpStats) {
        if self.samples == 0 || (o.samples > 0 && o.min_us < self.min_us) {
            self.min_us = o.min_us;
        }
        self.max_us = self.max_us.max(o.max_us);
        self.samples += o.samples;
        self.errors += o.errors;
        self.sum_us += o.sum_us;
        self.bytes += o.bytes;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        for (a, b) in self.latency_log2_us.iter_mut().zip(o.latency_log2_us) {
            *a += b;
        }
    }
}

/// What a request's statistics are kept under: the target it was for (None for requests
/// of no target: pings, the MGS's, parameters), its service and its opcode.
pub type OpKey = (Option<(TargetKind, u32)>, Option<Service>, &'static str);

#[derive(Default)]
pub struct Stats {
    // One short critical section per request; sharded later if it ever shows in a profile.
    ops: Mutex<BTreeMap<OpKey, OpStats>>,
}

impl Stats {
    pub fn record(&self, key: OpKey, outcome: &Outcome) {
        let us = outcome.took.as_micros().min(u64::MAX as u128) as u64;
        let bucket = (64 - us.leading_zeros() as usize).min(LATENCY_BUCKETS - 1);
        let mut ops = self.ops.lock().unwrap_or_else(|p| p.into_inner());
        let s = ops.entry(key).or_default();
        if s.samples == 0 || us < s.min_us {
            s.min_us = us;
        }
        s.max_us = s.max_us.max(us);
        s.samples += 1;
        s.sum_us += us;
        s.bytes += outcome.bytes;
        s.bytes_in += outcome.bytes_in;
        s.bytes_out += outcome.bytes_out;
        if !outcome.ok {
            s.errors += 1;
        }
        s.latency_log2_us[bucket] += 1;
    }

    /// Every opcode's statistics, over all targets.
    pub fn snapshot(&self) -> BTreeMap<&'static str, OpStats> {
        let mut out: BTreeMap<&'static str, OpStats> = BTreeMap::new();
        for ((_, _, opcode), s) in self.by_target() {
            out.entry(opcode).or_default().merge(&s);
        }
        out
    }

    /// The statistics of each target, service and opcode.
    pub fn by_target(&self) -> BTreeMap<OpKey, OpStats> {
        self.ops.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Account for Stats {
    fn record(&self, ctx: &RequestContext, outcome: &Outcome) {
        Stats::record(self, (outcome.target, outcome.service, ctx.opcode), outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn outcome(us: u64, ok: bool, bytes_in: u64, target: Option<(TargetKind, u32)>) -> Outcome {
        Outcome {
            service: Some(Service::OstIo),
            took: Duration::from_micros(us),
            waited: Duration::ZERO,
            ok,
            bytes: bytes_in,
            bytes_in,
            bytes_out: 0,
            target,
            at: std::time::Instant::now(),
        }
    }

    #[test]
    fn records_min_max_sum_and_buckets_per_target_and_opcode() {
        let s = Stats::default();
        let ost = |i| Some((TargetKind::Ost, i));
        s.record((ost(0), Some(Service::OstIo), "ost_write"), &outcome(3, true, 10, ost(0)));
        s.record((ost(1), Some(Service::OstIo), "ost_write"), &outcome(100, false, 5, ost(1)));
        let snap = s.snapshot();
        let r = &snap["ost_write"];
        assert_eq!((r.samples, r.errors, r.min_us, r.max_us, r.sum_us, r.bytes_in), (2, 1, 3, 100, 103, 15));
        assert_eq!(r.latency_log2_us[2], 1); // 3 us < 4
        assert_eq!(r.latency_log2_us[7], 1); // 100 us < 128
        let by = s.by_target();
        assert_eq!(by[&(ost(1), Some(Service::OstIo), "ost_write")].bytes_in, 5);
        assert_eq!(by.len(), 2);
    }
}
