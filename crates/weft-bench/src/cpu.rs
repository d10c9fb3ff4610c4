//! CPU time of the whole machine from /proc/stat: what a phase cost everyone on this node
//! (the benchmark's processes, the FUSE daemon, the servers), not just the benchmark.

use anyhow::{anyhow, Context};

/// Busy ticks (USER_HZ) of all CPUs: user + nice + system + irq + softirq of the `cpu` line.
/// Guest time is already inside user and nice; idle, iowait and steal are not busy.
pub fn parse_busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line.split_whitespace().skip(1).map(|f| f.parse().ok()).collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq [steal guest guest_nice]
    if fields.len() < 7 {
        return None;
    }
    Some(fields[0] + fields[1] + fields[2] + fields[5] + fields[6])
}

pub fn busy_ticks() -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string("/proc/stat").context("cannot read /proc/stat")?;
    parse_busy_ticks(&stat).ok_or_else(|| anyhow!("/proc/stat has no cpu line in the expected format"))
}

/// USER_HZ: the unit of /proc/stat.
pub fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

/// A snapshot to measure from; `None` where /proc/stat cannot be read (not Linux).
#[derive(Debug, Clone, Copy)]
pub struct CpuClock(Option<u64>);

impl CpuClock {
    pub fn now() -> CpuClock {
        CpuClock(busy_ticks().ok())
    }

    /// Busy CPU seconds of the machine since `self`.
    pub fn seconds_since(&self) -> Option<f64> {
        let start = self.0?;
        let end = busy_ticks().ok()?;
        Some(end.saturating_sub(start) as f64 / ticks_per_second() as f64)
    }
}

/// CPU seconds per GB (10^9 bytes) moved; `None` when nothing moved.
pub fn seconds_per_gb(cpu_seconds: f64, bytes: u64) -> Option<f64> {
    (bytes > 0).then(|| cpu_seconds / (bytes as f64 / 1e9))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_busy_ticks() {
        let stat = "cpu  100 5 50 9000 30 7 3 2 0 0\ncpu0 50 2 25 4500 15 3 1 1 0 0\nintr 1 2 3\n";
        assert_eq!(parse_busy_ticks(stat), Some(100 + 5 + 50 + 7 + 3));
        assert_eq!(parse_busy_ticks("cpu0 1 2 3 4 5 6 7\n"), None, "only the all-CPU line counts");
        assert_eq!(parse_busy_ticks("cpu  1 2 3\n"), None, "too few fields");
        assert_eq!(parse_busy_ticks("cpu  1 2 x 4 5 6 7\n"), None);
        assert!(busy_ticks().is_ok(), "this machine has /proc/stat");
    }

    #[test]
    fn per_gb() {
        assert_eq!(seconds_per_gb(3.0, 2_000_000_000), Some(1.5));
        assert_eq!(seconds_per_gb(3.0, 0), None);
    }
}
