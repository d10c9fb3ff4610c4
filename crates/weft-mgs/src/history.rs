//! The monitor's history: what each target, job and user did, interval by interval, in an
//! embedded store (redb) beside the MGS's map.
//!
//! Every row is one interval's usage of one series (requests, bytes read, bytes written),
//! keyed by (interval end in Unix seconds, series kind, name), so the oldest rows come first
//! and a "since" query is one range. Each row goes twice: to the raw table, kept for
//! `raw_keep_s` (a day), and added into its bucket of `bucket_s` (five minutes) in the
//! downsampled table. Both tables are capped in rows: past a cap the oldest rows go, so the
//! store stays within its size however long the load (a test runs days of a synthetic load
//! against a small cap).
//!
//! A total since T adds the downsampled buckets that lie before the raw rows still kept, and
//! the raw rows after: exact to the interval for the last day, to the bucket before.
//!
//! Pure logic over an injected clock (the caller says the time of each interval).

use redb::{Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use weft_proto::{WeftError, WeftResult};

/// (interval end, kind, name) -> (requests, bytes read, bytes written)
type Table = TableDefinition<'static, (u64, u8, &'static str), (u64, u64, u64)>;
const RAW: Table = TableDefinition::new("raw");
const DOWN: Table = TableDefinition::new("down");

/// What a series is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Kind {
    Target,
    Job,
    User,
    Group,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Target, Kind::Job, Kind::User, Kind::Group];

    fn code(self) -> u8 {
        match self {
            Kind::Target => 0,
            Kind::Job => 1,
            Kind::User => 2,
            Kind::Group => 3,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Target => "target",
            Kind::Job => "job",
            Kind::User => "user",
            Kind::Group => "group",
        }
    }

    pub fn parse(text: &str) -> Result<Kind, String> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == text)
            .ok_or_else(|| format!("'{text}': one of target, job, user, group"))
    }
}

/// Usage over some time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub ops: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

impl Totals {
    fn add(&mut self, o: Totals) {
        self.ops = self.ops.saturating_add(o.ops);
        self.read_bytes = self.read_bytes.saturating_add(o.read_bytes);
        self.write_bytes = self.write_bytes.saturating_add(o.write_bytes);
    }

    pub fn bytes(&self) -> u64 {
        self.read_bytes.saturating_add(self.write_bytes)
    }

    fn tuple(self) -> (u64, u64, u64) {
        (self.ops, self.read_bytes, self.write_bytes)
    }

    fn of(t: (u64, u64, u64)) -> Totals {
        Totals { ops: t.0, read_bytes: t.1, write_bytes: t.2 }
    }
}

/// How much the history keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Raw intervals are kept this long.
    pub raw_keep_s: u64,
    /// The downsampled buckets' width.
    pub bucket_s: u64,
    /// Most rows of each table.
    pub raw_rows_max: u64,
    pub down_rows_max: u64,
}

impl Default for Retention {
    fn default() -> Self {
        use crate::limits::{HISTORY_BUCKET_S, HISTORY_DOWN_ROWS_MAX, HISTORY_RAW_KEEP_S, HISTORY_RAW_ROWS_MAX};
        Retention {
            raw_keep_s: HISTORY_RAW_KEEP_S,
            bucket_s: HISTORY_BUCKET_S,
            raw_rows_max: HISTORY_RAW_ROWS_MAX,
            down_rows_max: HISTORY_DOWN_ROWS_MAX,
        }
    }
}

pub struct History {
    db: Database,
    retention: Retention,
    durability: Durability,
}

/// The bucket of an interval that ends at `t`: the one of (start, start + b] that holds it,
/// named by its start.
fn bucket_of(t: u64, b: u64) -> u64 {
    let t = t.saturating_sub(1);
    t - t % b
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History").field("retention", &self.retention).finish()
    }
}

fn io(e: impl std::fmt::Display) -> WeftError {
    WeftError::io(format!("monitor history: {e}"))
}

impl History {
    /// Opens (creating when new) the history at `path`.
    pub fn open(path: &Path, retention: Retention) -> WeftResult<History> {
        let db = Database::create(path).map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => WeftError::new(
                weft_proto::ErrorCode::Busy,
                format!("{} is in use (another management service running on this directory?)", path.display()),
            ),
            e => WeftError::io(format!("history {}: {e}", path.display())),
        })?;
        let txn = db.begin_write().map_err(io)?;
        txn.open_table(RAW).map_err(io)?;
        txn.open_table(DOWN).map_err(io)?;
        txn.commit().map_err(io)?;
        Ok(History { db, retention, durability: Durability::Immediate })
    }

    /// Commits without waiting for the disk (tests that write years of intervals).
    pub fn without_sync(mut self) -> History {
        self.durability = Durability::None;
        self
    }

    /// Adds one interval's usage, ending at `t` (Unix seconds), and drops what the
    /// retention no longer keeps.
    pub fn add(&self, t: u64, rows: &[(Kind, String, Totals)]) -> WeftResult<()> {
        let r = self.retention;
        let mut txn = self.db.begin_write().map_err(io)?;
        txn.set_durability(self.durability).map_err(io)?;
        {
            let mut raw = txn.open_table(RAW).map_err(io)?;
            let mut down = txn.open_table(DOWN).map_err(io)?;
            let bucket = bucket_of(t, r.bucket_s.max(1));
            for (kind, name, totals) in rows {
                for (table, at) in [(&mut raw, t), (&mut down, bucket)] {
                    let key = (at, kind.code(), name.as_str());
                    let mut sum = table.get(key).map_err(io)?.map_or_else(Totals::default, |v| Totals::of(v.value()));
                    sum.add(*totals);
                    table.insert(key, sum.tuple()).map_err(io)?;
                }
            }
            let oldest_kept = t.saturating_sub(r.raw_keep_s);
            loop {
                let Some(at) = raw.first().map_err(io)?.map(|(k, _)| k.value().0) else { break };
                if at >= oldest_kept && raw.len().map_err(io)? <= r.raw_rows_max {
                    break;
                }
                raw.pop_first().map_err(io)?;
            }
            while down.len().map_err(io)? > r.down_rows_max {
                down.pop_first().map_err(io)?;
            }
        }
        txn.commit().map_err(io)
    }

    /// Each series of `kind`'s usage over the intervals ending after `since` (Unix seconds),
    /// busiest (by bytes, then requests) first.
    pub fn totals(&self, since: u64, kind: Kind) -> WeftResult<Vec<(String, Totals)>> {
        let mut sums: BTreeMap<String, Totals> = BTreeMap::new();
        self.each_since(since, kind, &mut |_, name, t| sums.entry(name.to_string()).or_default().add(t))?;
        let mut out: Vec<(String, Totals)> = sums.into_iter().collect();
        out.sort_by(|a, b| b.1.bytes().cmp(&a.1.bytes()).then(b.1.ops.cmp(&a.1.ops)).then(a.0.cmp(&b.0)));
        Ok(out)
    }

    /// Each series of `kind` over time since `since`: (time, name, usage) per `step` seconds
    /// (at least the interval the rows have there), oldest first.
    pub fn series(&self, since: u64, kind: Kind, step: u64) -> WeftResult<Vec<(u64, String, Totals)>> {
        let step = step.max(1);
        let mut sums: BTreeMap<(u64, String), Totals> = BTreeMap::new();
        self.each_since(since, kind, &mut |at, name, t| {
            sums.entry((at - at % step, name.to_string())).or_default().add(t)
        })?;
        Ok(sums.into_iter().map(|((at, name), t)| (at, name, t)).collect())
    }

    /// Calls `f` with every row of `kind` that ends after `since`: downsampled buckets before
    /// the oldest raw row kept (the bucket holding `since` counts whole), the part of that
    /// row's bucket the raw table no longer has, and raw rows from there.
    fn each_since(&self, since: u64, kind: Kind, f: &mut dyn FnMut(u64, &str, Totals)) -> WeftResult<()> {
        let txn = self.db.begin_read().map_err(io)?;
        let raw = txn.open_table(RAW).map_err(io)?;
        let down = txn.open_table(DOWN).map_err(io)?;
        let b = self.retention.bucket_s.max(1);
        let from = since - since % b;
        let oldest = raw.first().map_err(io)?.map(|(k, _)| k.value().0);
        let ob = oldest.map_or(u64::MAX, |t| bucket_of(t, b));
        let in_down = |lo: u64, hi: u64, f: &mut dyn FnMut(u64, &str, Totals)| -> WeftResult<()> {
            for row in down.range((lo, 0u8, "")..(hi, 0u8, "")).map_err(io)? {
                let (k, v) = row.map_err(io)?;
                let (at, code, name) = k.value();
                if code == kind.code() {
                    f(at, name, Totals::of(v.value()));
                }
            }
            Ok(())
        };
        // Buckets wholly before the raw rows.
        if from < ob {
            in_down(from, ob, f)?;
        }
        // The bucket of the oldest raw row: what the raw table no longer has of it.
        if let Some(oldest) = oldest.filter(|_| ob >= from) {
            let mut kept: BTreeMap<String, Totals> = BTreeMap::new();
            for row in raw.range((oldest, 0u8, "")..=(ob + b, u8::MAX, "\u{10ffff}")).map_err(io)? {
                let (k, v) = row.map_err(io)?;
                let (_, code, name) = k.value();
                if code == kind.code() {
                    kept.entry(name.to_string()).or_default().add(Totals::of(v.value()));
                }
            }
            in_down(ob, ob + 1, &mut |at, name, whole| {
                let k = kept.get(name).copied().unwrap_or_default();
                let gone = Totals {
                    ops: whole.ops.saturating_sub(k.ops),
                    read_bytes: whole.read_bytes.saturating_sub(k.read_bytes),
                    write_bytes: whole.write_bytes.saturating_sub(k.write_bytes),
                };
                if gone != Totals::default() {
                    f(at, name, gone);
                }
            })?;
        }
        for row in raw.range((since.saturating_add(1), 0u8, "")..).map_err(io)? {
            let (k, v) = row.map_err(io)?;
            let (at, code, name) = k.value();
            if code == kind.code() {
                f(at, name, Totals::of(v.value()));
            }
        }
        Ok(())
    }

    /// Rows in the raw and downsampled tables.
    pub fn rows(&self) -> WeftResult<(u64, u64)> {
        let txn = self.db.begin_read().map_err(io)?;
        let raw = txn.open_table(RAW).map_err(io)?.len().map_err(io)?;
        let down = txn.open_table(DOWN).map_err(io)?.len().map_err(io)?;
        Ok((raw, down))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ops: u64, read: u64, write: u64) -> Totals {
        Totals { ops, read_bytes: read, write_bytes: write }
    }

    fn small() -> Retention {
        Retention { raw_keep_s: 3600, bucket_s: 300, raw_rows_max: 10_000, down_rows_max: 10_000 }
    }

    #[test]
    fn totals_since_add_up_each_jobs_intervals() {
        let dir = tempfile::tempdir().unwrap();
        let h = History::open(&dir.path().join("h.redb"), small()).unwrap().without_sync();
        for i in 1..=6u64 {
            let rows = vec![
                (Kind::Job, "a".to_string(), t(1, 0, 100)),
                (Kind::Job, "b".to_string(), t(2, 10, 0)),
                (Kind::User, "1000".to_string(), t(3, 10, 100)),
            ];
            h.add(10_000 + 10 * i, &rows).unwrap();
        }
        // Since the third interval's end: the last three.
        let jobs = h.totals(10_030, Kind::Job).unwrap();
        assert_eq!(jobs, vec![("a".to_string(), t(3, 0, 300)), ("b".to_string(), t(6, 30, 0))]);
        assert_eq!(h.totals(0, Kind::User).unwrap(), vec![("1000".to_string(), t(18, 60, 600))]);
        assert!(h.totals(0, Kind::Target).unwrap().is_empty());
        let series = h.series(0, Kind::Job, 20).unwrap();
        assert_eq!(series.first(), Some(&(10_000, "a".to_string(), t(1, 0, 100))));
        assert_eq!(series.iter().filter(|s| s.1 == "a").map(|s| s.2.ops).sum::<u64>(), 6);
    }

    #[test]
    fn old_intervals_are_kept_downsampled_after_the_raw_ones_go() {
        let dir = tempfile::tempdir().unwrap();
        let h = History::open(&dir.path().join("h.redb"), small()).unwrap().without_sync();
        // Three hours of 10 s intervals: raw keeps the last hour, the buckets all of it.
        let start = 1_000_000 - 1_000_000 % 300;
        for i in 1..=1080u64 {
            h.add(start + 10 * i, &[(Kind::Job, "j".to_string(), t(1, 0, 5))]).unwrap();
        }
        let (raw, down) = h.rows().unwrap();
        assert!((360..=361).contains(&raw), "{raw} raw rows for an hour");
        assert_eq!(down, 36, "three hours in 5-minute buckets");
        assert_eq!(h.totals(0, Kind::Job).unwrap()[0].1, t(1080, 0, 5400), "nothing lost to downsampling");
        // Since two hours ago: the buckets of the second hour and the raw last hour.
        let since = start + 3600;
        assert_eq!(h.totals(since, Kind::Job).unwrap()[0].1.ops, 720);
        // Within a bucket: the bucket holding `since` counts whole.
        assert_eq!(h.totals(since + 100, Kind::Job).unwrap()[0].1.ops, 720);
    }

    #[test]
    fn the_store_stays_within_its_caps_under_a_long_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.redb");
        let cap = Retention { raw_keep_s: 86_400, bucket_s: 300, raw_rows_max: 2_000, down_rows_max: 1_000 };
        let h = History::open(&path, cap).unwrap().without_sync();
        // Two days of 60 s intervals of 20 jobs (57,600 rows offered).
        let mut size_after_first_day = 0;
        for i in 1..=2880u64 {
            let rows: Vec<_> = (0..20).map(|j| (Kind::Job, format!("job{j}"), t(1, 1, 1))).collect();
            h.add(i * 60, &rows).unwrap();
            if i == 1440 {
                size_after_first_day = std::fs::metadata(&path).unwrap().len();
            }
            let (raw, down) = h.rows().unwrap();
            assert!(raw <= 2_000 && down <= 1_000, "after {i} intervals: {raw} raw, {down} downsampled rows");
        }
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size <= size_after_first_day * 2, "the file keeps growing: {size_after_first_day} then {size} bytes");
        // The newest are what is kept.
        assert!(h.totals(2880 * 60 - 60, Kind::Job).unwrap().len() == 20);
    }
}
