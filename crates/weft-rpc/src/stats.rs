//! Per-opcode request statistics: the "account" stage of the server pipeline. Lustre shows
//! the same shape in its `stats` and `job_stats` files: samples, min, max, sum.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// Latency histogram buckets: bucket i counts requests that took < 2^i microseconds.
pub const LATENCY_BUCKETS: usize = 32;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpStats {
    pub samples: u64,
    pub errors: u64,
    pub min_us: u64,
    pub max_us: u64,
    pub sum_us: u64,
    pub bytes: u64,
    pub latency_log2_us: [u64; LATENCY_BUCKETS],
}

#[derive(Default)]
pub struct Stats {
    // One short critical section per request; sharded later if it ever shows in a profile.
    ops: Mutex<BTreeMap<&'static str, OpStats>>,
}

impl Stats {
    pub fn record(&self, opcode: &'static str, took: Duration, ok: bool, bytes: u64) {
        let us = took.as_micros().min(u64::MAX as u128) as u64;
        let bucket = (64 - us.leading_zeros() as usize).min(LATENCY_BUCKETS - 1);
        let mut ops = self.ops.lock().unwrap_or_else(|p| p.into_inner());
        let s = ops.entry(opcode).or_default();
        if s.samples == 0 || us < s.min_us {
            s.min_us = us;
        }
        s.max_us = s.max_us.max(us);
        s.samples += 1;
        s.sum_us += us;
        s.bytes += bytes;
        if !ok {
            s.errors += 1;
        }
        s.latency_log2_us[bucket] += 1;
    }

    pub fn snapshot(&self) -> BTreeMap<&'static str, OpStats> {
        self.ops.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_min_max_sum_and_buckets() {
        let s = Stats::default();
        s.record("ost_read", Duration::from_micros(3), true, 10);
        s.record("ost_read", Duration::from_micros(100), false, 5);
        let snap = s.snapshot();
        let r = &snap["ost_read"];
        assert_eq!((r.samples, r.errors, r.min_us, r.max_us, r.sum_us, r.bytes), (2, 1, 3, 100, 103, 15));
        assert_eq!(r.latency_log2_us[2], 1); // 3 us < 4
        assert_eq!(r.latency_log2_us[7], 1); // 100 us < 128
    }
}
