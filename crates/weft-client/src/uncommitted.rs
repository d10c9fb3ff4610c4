//! Writes an OST answered but had not committed (weft-oss `commit.rs`: Lustre's transno
//! and last_committed): kept here by OST and transno until an answer from that OST says
//! they are committed, and sent again (`ost::Replay`) when its server restarts, since a
//! power loss takes back what the server had not made durable. No copy: what is kept is
//! the write's own bytes (a reference to the buffer it was sent from). The decisions are
//! here; the sending is the client's (io.rs, recovery.rs).

use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use weft_proto::msg::ost::{transno_start, TRANSNO_START_SHIFT};
use weft_proto::Fid;

/// One write kept for replay.
#[derive(Debug, Clone)]
pub(crate) struct Kept {
    pub fid: Fid,
    pub offset: u64,
    pub bulk: Bytes,
    /// Whose quotas the write counted against (sent again with its replay).
    pub owner: Option<weft_proto::msg::quota::QuotaOwner>,
}

#[derive(Debug, Default)]
struct Target {
    /// The highest committed transno an answer of this OST gave (of its latest start).
    committed: u64,
    /// By transno: one write, or the pieces of one request of several extents.
    writes: BTreeMap<u64, Vec<Kept>>,
    bytes: u64,
}

/// Whether an OST's `committed` covers the write of `transno`: both of one start of its
/// server, the write at or below it. A commit of a later start says nothing of an earlier
/// start's writes, which that start may have lost (kept until they are replayed).
fn covers(committed: u64, transno: u64) -> bool {
    transno_start(transno) == transno_start(committed) && transno <= committed
}

impl Target {
    /// Forgets the writes `committed` covers.
    fn prune(&mut self, committed: u64) {
        self.committed = self.committed.max(committed);
        let first = transno_start(committed) << TRANSNO_START_SHIFT;
        let covered: Vec<u64> = self.writes.range(first..=committed).map(|(t, _)| *t).collect();
        for transno in covered {
            for kept in self.writes.remove(&transno).unwrap_or_default() {
                self.bytes -= kept.bulk.len() as u64;
            }
        }
    }
}

/// Every OST's kept writes, with their bytes counted.
#[derive(Debug, Default)]
pub(crate) struct Uncommitted {
    targets: Mutex<HashMap<u32, Target>>,
}

impl Uncommitted {
    fn targets(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Target>> {
        self.targets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An answer of OST `ost`: the write of `transno` (0: nothing to keep) and what the OST
    /// committed. Whether the write was kept. The pieces of a request of several extents
    /// are answered one by one under its one transno, and all kept.
    pub fn answered(&self, ost: u32, transno: u64, committed: u64, write: Kept) -> bool {
        let mut targets = self.targets();
        let target = targets.entry(ost).or_default();
        target.prune(committed);
        let keep = transno != 0 && !covers(committed, transno) && !covers(target.committed, transno);
        if keep {
            target.bytes += write.bulk.len() as u64;
            target.writes.entry(transno).or_default().push(write);
        }
        if target.writes.is_empty() {
            targets.remove(&ost);
        }
        keep
    }

    /// OST `ost` committed everything up to `committed`: forgets what that covers.
    pub fn committed(&self, ost: u32, committed: u64) {
        let mut targets = self.targets();
        if let Some(target) = targets.get_mut(&ost) {
            target.prune(committed);
            if target.writes.is_empty() {
                targets.remove(&ost);
            }
        }
    }

    /// Takes every write kept for OST `ost`, in transno order, to replay.
    pub fn take(&self, ost: u32) -> Vec<(u64, Kept)> {
        let Some(target) = self.targets().remove(&ost) else { return Vec::new() };
        target.writes.into_iter().flat_map(|(transno, kept)| kept.into_iter().map(move |k| (transno, k))).collect()
    }

    pub fn holds_any(&self, ost: u32) -> bool {
        self.targets().contains_key(&ost)
    }

    /// The OSTs it keeps writes for.
    pub fn osts(&self) -> Vec<u32> {
        self.targets().keys().copied().collect()
    }

    /// The bytes kept in all, and the OST keeping the most.
    pub fn bytes(&self) -> (u64, Option<u32>) {
        let targets = self.targets();
        let total = targets.values().map(|t| t.bytes).sum();
        (total, targets.iter().max_by_key(|(_, t)| t.bytes).map(|(ost, _)| *ost))
    }

    /// Forgets everything (an evicted client: its writes were refused or are lost).
    pub fn clear(&self) -> usize {
        let mut targets = self.targets();
        let n = targets.values().flat_map(|t| t.writes.values()).map(Vec::len).sum();
        targets.clear();
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(len: usize) -> Kept {
        Kept { fid: Fid::new(0x100000000, 1, 0), offset: 0, bulk: Bytes::from(vec![7u8; len]), owner: None }
    }

    #[test]
    fn writes_above_what_is_committed_are_kept_until_an_answer_covers_them() {
        let kept = Uncommitted::default();
        assert!(kept.answered(1, 10, 5, write(100)));
        assert!(kept.answered(1, 11, 5, write(50)));
        assert!(!kept.answered(1, 12, 12, write(1)), "an answer that covers its own write keeps nothing");
        // That answer's committed 12 covered 10 and 11 too.
        assert!(!kept.holds_any(1));
        assert!(kept.answered(2, 20, 0, write(30)));
        assert!(kept.answered(3, 30, 0, write(40)));
        assert!(kept.answered(3, 31, 0, write(40)));
        assert_eq!(kept.bytes(), (110, Some(3)));
        kept.committed(3, 30);
        assert_eq!(kept.bytes(), (70, Some(3)));
        // A late answer with an older committed number takes nothing back.
        assert!(!kept.answered(3, 29, 28, write(5)));
        // A commit of a later start of the OST's server covers none of an earlier start's
        // writes: they are kept to be replayed.
        let later = 2 << TRANSNO_START_SHIFT;
        assert!(kept.answered(3, later + 1, later, write(10)), "a write of the new start, not committed");
        assert_eq!(kept.bytes(), (80, Some(3)));
        kept.committed(3, later + 1);
        assert_eq!(kept.bytes(), (70, Some(3)), "31 of the first start is still kept");
        let replay = kept.take(3);
        assert_eq!(replay.iter().map(|(t, _)| *t).collect::<Vec<_>>(), vec![31]);
        assert_eq!(kept.osts(), vec![2]);
        assert_eq!(kept.clear(), 1);
        assert_eq!(kept.bytes(), (0, None));
    }

    #[test]
    fn the_pieces_of_one_request_are_kept_replayed_and_pruned_together() {
        let kept = Uncommitted::default();
        let piece = |offset: u64, len: usize| Kept { offset, ..write(len) };
        assert!(kept.answered(1, 10, 5, piece(0, 100)));
        assert!(kept.answered(1, 10, 5, piece(4096, 50)), "a second extent under the same transno");
        assert_eq!(kept.bytes(), (150, Some(1)));
        let replay = kept.take(1);
        assert_eq!(replay.iter().map(|(t, k)| (*t, k.offset)).collect::<Vec<_>>(), vec![(10, 0), (10, 4096)]);
        for (transno, k) in replay {
            kept.answered(1, transno, 5, k);
        }
        assert_eq!(kept.bytes(), (150, Some(1)));
        kept.committed(1, 10);
        assert_eq!(kept.bytes(), (0, None), "one commit covers every piece");
    }
}
