//! Which copies a cache evicts to make room for a file being attached: a decision over what
//! the cache holds and nothing else (no lock, no clock, no disk), so that it is tested on its
//! own; attach.rs carries it out (a read-only copy deleted, a read-write file detached) and
//! asks again, since opens and writes elsewhere change the cache meanwhile.

use super::state::{Held, Kind, Phase};
use std::time::Instant;
use weft_proto::pcc::Evict;
use weft_proto::Fid;

/// What the choice looks at of one file a cache holds.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub fid: Fid,
    pub kind: Kind,
    pub bytes: u64,
    /// Its last open through the cache (or its attach).
    pub used: Instant,
    pub opens: u32,
    pub phase: Phase,
}

impl Entry {
    pub(super) fn of(fid: Fid, held: &Held) -> Entry {
        Entry { fid, kind: held.kind, bytes: held.bytes, used: held.used, opens: held.opens, phase: held.phase }
    }
}

/// A cache's rules for the choice.
#[derive(Debug, Clone, Copy)]
pub(super) struct Quota {
    /// What the cache may hold (0: no bound).
    pub bytes: u64,
    /// What goes first.
    pub evict: Evict,
    /// Read-write files may go back to the servers to make room: an explicit attach's, not
    /// an open's or a prefetch's, which must not wait on a restore.
    pub may_detach_rw: bool,
}

/// Why no room can be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NoRoom {
    /// The file alone is larger than the quota: refused before anything is evicted.
    LargerThanQuota,
    /// What may not go (open, being attached or restored, read-write files when they may not
    /// be detached) leaves too little: the bytes held once everything that may go has gone.
    Held { held_bytes: u64 },
}

/// The outcome of [`make_room`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Plan {
    /// The copies to evict, in order.
    pub evict: Vec<(Fid, Kind)>,
    /// Why the file does not fit even after them; None: it fits once they are gone.
    pub refused: Option<NoRoom>,
}

/// Which copies of `copies` (what one cache holds) to evict so that `need` more bytes fit
/// within `quota`, `attaching` being the file that needs them. Only copies no open uses and
/// that are attached may go, read-write ones only when the quota lets them; the least
/// recently used or the largest first, as the cache's `evict` says, ties to the lower FID;
/// only as many as needed. A file larger than the quota is refused first. When even all of
/// them would not make room the plan still names them before its refusal: the cache frees
/// what it can, as it always has.
pub(super) fn make_room(copies: &[Entry], need: u64, attaching: Fid, quota: &Quota) -> Plan {
    if quota.bytes == 0 {
        return Plan::default();
    }
    if need > quota.bytes {
        return Plan { evict: Vec::new(), refused: Some(NoRoom::LargerThanQuota) };
    }
    let mut used: u64 = copies.iter().map(|c| c.bytes).sum();
    let mut idle: Vec<&Entry> = copies
        .iter()
        .filter(|c| {
            c.fid != attaching
                && c.opens == 0
                && c.phase == Phase::Attached
                && (quota.may_detach_rw || c.kind == Kind::Readonly)
        })
        .collect();
    idle.sort_by(|a, b| {
        let first = match quota.evict {
            Evict::Lru => a.used.cmp(&b.used),
            Evict::Size => b.bytes.cmp(&a.bytes),
        };
        first.then(a.fid.cmp(&b.fid))
    });
    let mut evict = Vec::new();
    for c in idle {
        if used.saturating_add(need) <= quota.bytes {
            break;
        }
        used = used.saturating_sub(c.bytes);
        evict.push((c.fid, c.kind));
    }
    let refused = (used.saturating_add(need) > quota.bytes).then_some(NoRoom::Held { held_bytes: used });
    Plan { evict, refused }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn fid(oid: u32) -> Fid {
        Fid::new(0x200000400, oid, 0)
    }

    /// An idle read-only copy of `bytes`, last used `age_s` seconds before `now`.
    fn copy(now: Instant, oid: u32, bytes: u64, age_s: u64) -> Entry {
        Entry {
            fid: fid(oid),
            kind: Kind::Readonly,
            bytes,
            used: now - Duration::from_secs(age_s),
            opens: 0,
            phase: Phase::Attached,
        }
    }

    fn quota(bytes: u64, evict: Evict) -> Quota {
        Quota { bytes, evict, may_detach_rw: false }
    }

    fn evicted(plan: &Plan) -> Vec<u32> {
        plan.evict.iter().map(|(f, _)| f.oid).collect()
    }

    #[test]
    fn the_least_recently_used_go_first_and_only_as_many_as_needed() {
        let now = Instant::now() + Duration::from_secs(100);
        let copies = [copy(now, 1, 30, 5), copy(now, 2, 30, 50), copy(now, 3, 30, 20)];
        let q = quota(100, Evict::Lru);
        // 90 held: 10 more fit as they are.
        assert_eq!(make_room(&copies, 10, fid(9), &q), Plan::default());
        let plan = make_room(&copies, 40, fid(9), &q);
        assert_eq!((evicted(&plan), plan.refused), (vec![2], None), "the oldest alone makes room");
        let plan = make_room(&copies, 70, fid(9), &q);
        assert_eq!((evicted(&plan), plan.refused), (vec![2, 3], None));
        assert_eq!(evicted(&make_room(&copies, 100, fid(9), &q)), vec![2, 3, 1]);
    }

    #[test]
    fn the_largest_go_first_when_the_cache_evicts_by_size() {
        let now = Instant::now() + Duration::from_secs(100);
        let copies = [copy(now, 1, 10, 50), copy(now, 2, 50, 1), copy(now, 3, 30, 90)];
        let plan = make_room(&copies, 40, fid(9), &quota(100, Evict::Size));
        assert_eq!((evicted(&plan), plan.refused), (vec![2], None));
        let plan = make_room(&copies, 80, fid(9), &quota(100, Evict::Size));
        assert_eq!((evicted(&plan), plan.refused), (vec![2, 3], None));
    }

    #[test]
    fn ties_go_to_the_lower_fid_whatever_the_order_they_are_found_in() {
        let now = Instant::now() + Duration::from_secs(100);
        let mut copies = vec![copy(now, 7, 40, 10), copy(now, 3, 40, 10), copy(now, 5, 40, 10)];
        for evict in [Evict::Lru, Evict::Size] {
            for _ in 0..3 {
                copies.rotate_left(1);
                assert_eq!(evicted(&make_room(&copies, 40, fid(9), &quota(120, evict))), vec![3], "{evict:?}");
                assert_eq!(evicted(&make_room(&copies, 80, fid(9), &quota(120, evict))), vec![3, 5], "{evict:?}");
            }
        }
    }

    #[test]
    fn open_changing_and_attaching_copies_stay() {
        let now = Instant::now() + Duration::from_secs(100);
        let open = Entry { opens: 1, ..copy(now, 1, 20, 90) };
        let attaching = Entry { phase: Phase::Attaching, ..copy(now, 2, 20, 80) };
        let invalidated = Entry { phase: Phase::Invalidated, ..copy(now, 3, 20, 70) };
        let restoring = Entry { kind: Kind::Readwrite, phase: Phase::Restoring, ..copy(now, 4, 20, 60) };
        let same_file = copy(now, 5, 10, 95);
        let idle = copy(now, 6, 5, 0);
        let copies = [open, attaching, invalidated, restoring, same_file, idle];
        let q = Quota { bytes: 100, evict: Evict::Lru, may_detach_rw: true };
        // 95 held; only the idle copy may go (the file being attached is not its own room).
        let plan = make_room(&copies, 10, fid(5), &q);
        assert_eq!((evicted(&plan), plan.refused), (vec![6], None));
        let plan = make_room(&copies, 30, fid(5), &q);
        assert_eq!(evicted(&plan), vec![6], "what may go is freed first, as the cache always did");
        assert_eq!(plan.refused, Some(NoRoom::Held { held_bytes: 90 }));
    }

    #[test]
    fn read_write_files_go_only_when_the_attach_may_detach_them() {
        let now = Instant::now() + Duration::from_secs(100);
        let rw = Entry { kind: Kind::Readwrite, ..copy(now, 1, 50, 90) };
        let copies = [rw, copy(now, 2, 40, 10)];
        let open_or_prefetch = Quota { bytes: 100, evict: Evict::Lru, may_detach_rw: false };
        let plan = make_room(&copies, 20, fid(9), &open_or_prefetch);
        assert_eq!((plan.evict, plan.refused), (vec![(fid(2), Kind::Readonly)], None));
        let plan = make_room(&copies, 70, fid(9), &open_or_prefetch);
        assert_eq!(plan.refused, Some(NoRoom::Held { held_bytes: 50 }), "the read-write file stays");
        let explicit = Quota { may_detach_rw: true, ..open_or_prefetch };
        let plan = make_room(&copies, 20, fid(9), &explicit);
        assert_eq!((plan.evict, plan.refused), (vec![(fid(1), Kind::Readwrite)], None), "the older goes");
    }

    #[test]
    fn a_file_larger_than_the_quota_is_refused_before_anything_goes() {
        let now = Instant::now() + Duration::from_secs(100);
        let copies = [copy(now, 1, 60, 90)];
        let plan = make_room(&copies, 101, fid(9), &quota(100, Evict::Lru));
        assert_eq!(plan, Plan { evict: Vec::new(), refused: Some(NoRoom::LargerThanQuota) });
        assert_eq!(make_room(&[], 101, fid(9), &quota(100, Evict::Lru)).refused, Some(NoRoom::LargerThanQuota));
        // Exactly the quota fits once the rest has gone.
        assert_eq!(evicted(&make_room(&copies, 100, fid(9), &quota(100, Evict::Lru))), vec![1]);
    }

    #[test]
    fn a_cache_without_a_quota_evicts_nothing() {
        let now = Instant::now() + Duration::from_secs(100);
        let copies = [copy(now, 1, u64::MAX / 2, 90)];
        assert_eq!(make_room(&copies, u64::MAX, fid(9), &quota(0, Evict::Size)), Plan::default());
    }
}
