//! An OST's commits and its replay window (Lustre's transno, last_committed and replay).
//!
//! A write lands in the page cache (or on the device without a flush, for large aligned
//! writes) and is answered at once: it survives the death of the server's process, not a
//! power loss. So each write is answered with a transaction number (transno) and the last
//! one the OST made durable (`committed`); the client keeps the bytes of every write above
//! `committed` and sends them again if the server restarts first. A commit (every
//! `COMMIT_INTERVAL_MS` on the server, at once on an fsync, a truncate or when a client
//! holds too much) syncs every object written since the last one, then persists the last
//! transno it covers in the store's commit record.
//!
//! A transno is the OST's start count above a count within the start
//! (`weft_proto::msg::ost::TRANSNO_START_SHIFT`), so every write of a later start is
//! numbered above every write of an earlier one. A start in the same boot of the machine as
//! the one before (a restart of the process: kill -9) finds every answered write in the
//! page cache: it syncs the whole store before it serves, and a replay writes nothing (it
//! would overwrite later writes whose writers do not replay: an evicted client, one that
//! exited, one in the OSS's own process). A start in another boot (a power loss, a reboot,
//! a failover to another node) takes replays for [`REPLAY_WINDOW_MS`]: each writes only the parts of its range that no write of a later
//! transno (a replay of one, or a new write since the restart) covered, so whatever order
//! replays and new writes arrive in, each byte ends as the last write to it left it. A
//! replay at or below what the previous start committed, or of this start, changes nothing.
//!
//! Why this order of a commit: the objects first, the record after. A power loss between
//! the two keeps a record older than what is durable; the replays it lets through rewrite
//! durable bytes with the same bytes, in transno order.

use crate::limits::{REPLAY_SPANS_MAX, REPLAY_WINDOW_MS};
use crate::lock_unpoisoned;
use crate::store::CommitRecord;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use weft_proto::msg::ost::TRANSNO_START_SHIFT;

/// A range of an object written since the restart, by the write of `transno` (a replay's
/// original transno, or a new write's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub start: u64,
    pub end: u64,
    pub transno: u64,
}

/// The parts of `[start, end)` that no span of a transno above `transno` covers, in order:
/// what a replay of `transno` may write.
pub(crate) fn uncovered(spans: &[Span], start: u64, end: u64, transno: u64) -> Vec<(u64, u64)> {
    let mut later: Vec<(u64, u64)> = spans
        .iter()
        .filter(|s| s.transno > transno && s.start < end && s.end > start)
        .map(|s| (s.start.max(start), s.end.min(end)))
        .collect();
    later.sort_unstable();
    let mut free = Vec::new();
    let mut at = start;
    for (a, b) in later {
        if a > at {
            free.push((at, a));
        }
        at = at.max(b);
    }
    if at < end {
        free.push((at, end));
    }
    free
}

/// The transnos given since the last commit, and the objects they wrote.
#[derive(Debug)]
struct Issued {
    /// The last transno given (the previous start's committed one before any).
    last: u64,
    /// The count within this start of the next one.
    next: u64,
    dirty: HashSet<u32>,
}

/// The replay window after a restart.
#[derive(Debug)]
pub(crate) struct Window {
    until: Instant,
    spans: HashMap<u32, Vec<Span>>,
    count: usize,
}

impl Window {
    pub(crate) fn spans(&self, oid: u32) -> &[Span] {
        self.spans.get(&oid).map_or(&[], |v| v.as_slice())
    }

    /// Whether the window still holds a span more (past [`REPLAY_SPANS_MAX`] it closes).
    fn record(&mut self, oid: u32, span: Span) -> bool {
        if span.start < span.end {
            self.spans.entry(oid).or_default().push(span);
            self.count += 1;
        }
        self.count < REPLAY_SPANS_MAX
    }
}

/// One OST's commit state.
#[derive(Debug)]
pub(crate) struct Commits {
    starts: u64,
    /// The previous start's last commit: a replay at or below it is durable already.
    committed_before: u64,
    committed: AtomicU64,
    issued: Mutex<Issued>,
    /// One commit at a time: one that waited finds what it needs committed by the one before.
    committing: Mutex<()>,
    /// Whether a replay window is open (checked without the lock on every write).
    replaying: AtomicBool,
    window: Mutex<Option<Window>>,
    /// The machine rebooted since the last start: what was not committed may be lost.
    rebooted: bool,
    /// The boot this start runs in (kept in every record).
    boot: u64,
    /// A sync failed: what the store holds is no longer known to be what was written
    /// (Linux reports a writeback error once), so nothing more is counted committed.
    broken: AtomicBool,
}

/// Why a replay is not written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skip {
    /// It is of this start: nothing was lost (a reconnect without a restart); the client
    /// keeps it until it is committed.
    ThisStart,
    /// It was durable before this start (committed, or synced at a start in the same boot).
    Durable,
    /// It is of a start before the last one that committed: two restarts passed, and this
    /// OST cannot tell whether it was committed.
    Unknown,
    /// The replay window ended: the write is lost unless it was durable.
    WindowOver,
}

impl Commits {
    /// The state of an OST whose store kept `record`, started once more in the machine's
    /// boot `boot`: the record to persist before it serves, and the state. A replay window
    /// opens when the OST served before in another boot (its clients may hold writes it
    /// lost); in the same boot the caller syncs the store first ([`Commits::rebooted`]).
    pub(crate) fn start(record: CommitRecord, boot: u64, now: Instant) -> (CommitRecord, Commits) {
        let starts = record.starts + 1;
        let rebooted = record.starts > 0 && record.boot != boot;
        let window = rebooted.then(|| Window {
            until: now + Duration::from_millis(REPLAY_WINDOW_MS),
            spans: HashMap::new(),
            count: 0,
        });
        let commits = Commits {
            starts,
            committed_before: record.committed,
            committed: AtomicU64::new(record.committed),
            issued: Mutex::new(Issued { last: record.committed, next: 1, dirty: HashSet::new() }),
            committing: Mutex::new(()),
            replaying: AtomicBool::new(window.is_some()),
            window: Mutex::new(window),
            rebooted,
            boot,
            broken: AtomicBool::new(false),
        };
        (CommitRecord { starts, committed: record.committed, boot }, commits)
    }

    /// Whether the machine rebooted since the OST's last start (else the caller syncs
    /// what the last start wrote before serving).
    pub(crate) fn rebooted(&self) -> bool {
        self.rebooted
    }

    /// Whether a sync failed: no commit is claimed from then on.
    pub(crate) fn broken(&self) -> bool {
        self.broken.load(Ordering::Acquire)
    }

    pub(crate) fn committed(&self) -> u64 {
        self.committed.load(Ordering::Acquire)
    }

    /// A transno for a change of `oid` that has just been made.
    pub(crate) fn issue(&self, oid: u32) -> u64 {
        let mut issued = lock_unpoisoned(&self.issued);
        let transno = (self.starts << TRANSNO_START_SHIFT) | issued.next;
        issued.next += 1;
        issued.last = transno;
        issued.dirty.insert(oid);
        transno
    }

    /// Whether anything was changed since the last commit.
    pub(crate) fn pending(&self) -> bool {
        lock_unpoisoned(&self.issued).last > self.committed()
    }

    /// Commits every change issued so far: `sync` makes the objects written durable, then
    /// `persist` records the last transno. On an error nothing is counted committed, and
    /// the objects stay to be synced by the next commit.
    pub(crate) fn commit<E>(
        &self,
        sync: impl FnOnce(&[u32]) -> Result<(), E>,
        persist: impl FnOnce(CommitRecord) -> Result<(), E>,
    ) -> Result<u64, E> {
        let _one = lock_unpoisoned(&self.committing);
        let (last, dirty) = {
            let mut issued = lock_unpoisoned(&self.issued);
            (issued.last, std::mem::take(&mut issued.dirty))
        };
        if last <= self.committed() {
            return Ok(self.committed());
        }
        let put_back = |dirty: HashSet<u32>| lock_unpoisoned(&self.issued).dirty.extend(dirty);
        let mut oids: Vec<u32> = dirty.iter().copied().collect();
        oids.sort_unstable();
        if let Err(e) = sync(&oids) {
            put_back(dirty);
            self.broken.store(true, Ordering::Release);
            return Err(e);
        }
        if let Err(e) = persist(CommitRecord { starts: self.starts, committed: last, boot: self.boot }) {
            put_back(dirty);
            return Err(e);
        }
        self.committed.store(last, Ordering::Release);
        Ok(last)
    }

    /// Runs `f` with the replay window, when one is open (None once it ended): a write that
    /// records its span and a replay that looks at the spans hold it across their I/O, so
    /// the two never interleave on one range.
    pub(crate) fn with_window<R>(&self, now: Instant, f: impl FnOnce(Option<&mut Window>) -> R) -> R {
        if !self.replaying.load(Ordering::Acquire) {
            return f(None);
        }
        let mut window = lock_unpoisoned(&self.window);
        if window.as_ref().is_some_and(|w| now >= w.until) {
            tracing::info!(starts = self.starts, "the replay window ended");
            *window = None;
            self.replaying.store(false, Ordering::Release);
        }
        f(window.as_mut())
    }

    /// Records a write of `transno` over `[start, end)` of `oid` in an open window.
    pub(crate) fn record(&self, window: &mut Window, oid: u32, start: u64, end: u64, transno: u64) {
        if !window.record(oid, Span { start, end, transno }) {
            tracing::warn!(
                starts = self.starts,
                "the replay window holds {REPLAY_SPANS_MAX} ranges: it ends early, later replays are refused"
            );
            window.until = Instant::now();
        }
    }

    /// An object destroyed in the replay window (unlinked, or an orphan the MDS's cleanup
    /// removed, whose id it hands out again): no replay may make it again.
    pub(crate) fn destroyed(&self, oid: u32) {
        self.with_window(Instant::now(), |window| {
            if let Some(window) = window {
                self.record(window, oid, 0, u64::MAX, u64::MAX);
            }
        })
    }

    /// Whether a replay of `transno` is to be written (Ok), or why not.
    pub(crate) fn replay_check(&self, transno: u64, window_open: bool) -> Result<(), Skip> {
        let start = weft_proto::msg::ost::transno_start;
        if start(transno) >= self.starts {
            return Err(Skip::ThisStart);
        }
        if !self.rebooted {
            return Err(Skip::Durable);
        }
        // The record names the last start that committed: a number of that start is
        // durable up to it; one of an earlier start is of a start whose end is unknown.
        match start(transno).cmp(&start(self.committed_before)) {
            std::cmp::Ordering::Equal if transno <= self.committed_before => return Err(Skip::Durable),
            std::cmp::Ordering::Less => return Err(Skip::Unknown),
            _ => {}
        }
        if !window_open {
            return Err(Skip::WindowOver);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: u64, end: u64, transno: u64) -> Span {
        Span { start, end, transno }
    }

    #[test]
    fn a_replay_writes_only_what_no_later_write_covered() {
        let spans = [span(10, 20, 5), span(30, 40, 9), span(35, 50, 3)];
        // Transno 4: spans of 5 and 9 are later, 3 is earlier.
        assert_eq!(uncovered(&spans, 0, 60, 4), vec![(0, 10), (20, 30), (40, 60)]);
        // Transno 7: only 9 is later.
        assert_eq!(uncovered(&spans, 0, 60, 7), vec![(0, 30), (40, 60)]);
        // Transno 10: nothing later.
        assert_eq!(uncovered(&spans, 15, 45, 10), vec![(15, 45)]);
        // Wholly covered.
        assert_eq!(uncovered(&spans, 12, 18, 1), Vec::<(u64, u64)>::new());
        // Overlapping later spans merge.
        let spans = [span(0, 10, 8), span(5, 15, 8)];
        assert_eq!(uncovered(&spans, 0, 20, 1), vec![(15, 20)]);
    }

    #[test]
    fn transnos_of_a_later_start_are_above_every_earlier_one_and_a_commit_covers_what_was_issued() {
        let (record, first) = Commits::start(CommitRecord::default(), 7, Instant::now());
        assert_eq!(record, CommitRecord { starts: 1, committed: 0, boot: 7 });
        let a = first.issue(7);
        let b = first.issue(8);
        assert!(b > a && a > 0);
        let mut synced = Vec::new();
        let mut persisted = None;
        let committed = first
            .commit(
                |oids| {
                    synced.extend_from_slice(oids);
                    Ok::<_, ()>(())
                },
                |r| {
                    persisted = Some(r);
                    Ok(())
                },
            )
            .unwrap();
        synced.sort();
        assert_eq!(
            (committed, synced, persisted),
            (b, vec![7, 8], Some(CommitRecord { starts: 1, committed: b, boot: 7 }))
        );
        assert!(!first.pending());
        // A failed sync commits nothing, and the next commit syncs the object again.
        let c = first.issue(9);
        assert_eq!(first.commit(|_| Err("disk"), |_| Ok(())), Err("disk"));
        assert_eq!(first.committed(), b);
        assert_eq!(first.commit(|oids| if oids == [9] { Ok(()) } else { Err("wrong objects") }, |_| Ok(())), Ok(c));

        // After a power loss (another boot): what the first start committed is durable,
        // what it did not is replayed, this start's own writes never are.
        let (record, second) = Commits::start(CommitRecord { starts: 1, committed: b, boot: 7 }, 8, Instant::now());
        assert_eq!((record.starts, second.rebooted()), (2, true));
        let own = second.issue(1);
        assert!(own > c, "a later start numbers above every earlier transno");
        assert_eq!(second.replay_check(a, true), Err(Skip::Durable));
        assert_eq!(second.replay_check(c, true), Ok(()));
        assert_eq!(second.replay_check(c, false), Err(Skip::WindowOver));
        assert_eq!(second.replay_check(own, true), Err(Skip::ThisStart));
        // After a restart of the process (the same boot), nothing is replayed: the caller
        // synced what the last start wrote, from the cache.
        let (_, same_boot) = Commits::start(CommitRecord { starts: 1, committed: b, boot: 7 }, 7, Instant::now());
        assert!(!same_boot.rebooted());
        assert_eq!(same_boot.replay_check(c, false), Err(Skip::Durable));
        // Two restarts on: the second start committed, so a number of the first above its
        // own last commit is of a start whose end is unknown.
        let second_committed = own;
        let (_, third) =
            Commits::start(CommitRecord { starts: 2, committed: second_committed, boot: 8 }, 9, Instant::now());
        assert_eq!(third.replay_check(c, true), Err(Skip::Unknown));
        assert_eq!(third.replay_check(second_committed, true), Err(Skip::Durable));
    }

    #[test]
    fn a_first_start_or_one_in_the_same_boot_opens_no_window_a_reboot_does_until_it_ends() {
        let now = Instant::now();
        let (_, first) = Commits::start(CommitRecord::default(), 1, now);
        assert!(first.with_window(now, |w| w.is_none()));
        let (_, restarted) = Commits::start(CommitRecord { starts: 3, committed: 0, boot: 1 }, 1, now);
        assert!(restarted.with_window(now, |w| w.is_none()), "the same boot: nothing was lost");
        let (_, again) = Commits::start(CommitRecord { starts: 3, committed: 0, boot: 1 }, 2, now);
        assert!(again.with_window(now, |w| w.is_some()));
        let later = now + Duration::from_millis(REPLAY_WINDOW_MS);
        assert!(again.with_window(later, |w| w.is_none()));
        assert!(again.with_window(now, |w| w.is_none()), "a window that ended stays ended");
    }
}
