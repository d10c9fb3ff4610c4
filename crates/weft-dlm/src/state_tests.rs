//! Tests of the lock table (state.rs), one per rule of compatibility, queueing, conversion
//! and extent growth. Longer than 600 lines on purpose: the table is the whole lock
//! manager's logic and every rule has its case here; split by topic if it grows further.

use super::*;
use weft_proto::lock::bits;

const OBJ: Fid = Fid::new(0x1_0000_0000, 1, 0);
const INODE: Fid = Fid::new(0x2_0000_0400, 7, 0);
const PLAIN: EnqueueOptions = EnqueueOptions { reuse: false, expand: false };
const EXPAND: EnqueueOptions = EnqueueOptions { reuse: false, expand: true };
const MODES: [LockMode; 3] = [LockMode::Pr, LockMode::Pw, LockMode::Ex];

fn ext(start: u64, end: u64) -> LockScope {
    LockScope::Extent(Extent { start, end })
}

fn granted_handle(e: &Enqueued) -> LockHandle {
    match e {
        Enqueued::Granted(g) => g.handle,
        other => panic!("expected a grant, got {other:?}"),
    }
}

fn waiting_handle(e: &Enqueued) -> LockHandle {
    match e {
        Enqueued::Waiting { handle, .. } => *handle,
        other => panic!("expected to wait, got {other:?}"),
    }
}

// ----- readable unit tests -----

#[test]
fn readers_share() {
    let mut t = LockTable::new();
    let a = t.enqueue(1, OBJ, LockMode::Pr, ext(0, 99), PLAIN);
    let b = t.enqueue(2, OBJ, LockMode::Pr, ext(50, 149), PLAIN);
    assert_eq!(granted_handle(&a), 1);
    assert_eq!(granted_handle(&b), 2);
    assert_eq!(t.granted(OBJ).count(), 2);
}

#[test]
fn writer_blocks_reader_of_another_owner_until_cancelled() {
    let mut t = LockTable::new();
    let w = granted_handle(&t.enqueue(1, OBJ, LockMode::Pw, ext(0, 99), PLAIN));
    let r = t.enqueue(2, OBJ, LockMode::Pr, ext(10, 10), PLAIN);
    let Enqueued::Waiting { handle, blockers } = r else { panic!("reader granted under a writer") };
    assert_eq!(blockers.len(), 1);
    assert_eq!((blockers[0].handle, blockers[0].owner), (w, 1));
    assert_eq!(t.blockers(handle), blockers);
    // A reader of a range the writer does not cover is not blocked.
    granted_handle(&t.enqueue(3, OBJ, LockMode::Pr, ext(100, 200), PLAIN));

    let changes = t.cancel(1, w);
    assert_eq!(changes.granted.len(), 1);
    assert_eq!(changes.granted[0].grant(), LockGrant { handle, resource: OBJ, mode: LockMode::Pr, scope: ext(10, 10) });
    assert!(t.lock(handle).unwrap().granted);
}

#[test]
fn same_owner_never_blocks_itself() {
    let mut t = LockTable::new();
    for mode in MODES {
        granted_handle(&t.enqueue(1, OBJ, mode, ext(0, 10), PLAIN));
        granted_handle(&t.enqueue(1, INODE, mode, LockScope::Bits(bits::ALL), PLAIN));
    }
    assert_eq!(t.owner_count(1), 6);
}

#[test]
fn fifo_writer_is_not_starved_by_later_readers() {
    let mut t = LockTable::new();
    let r1 = granted_handle(&t.enqueue(1, OBJ, LockMode::Pr, ext(0, 99), PLAIN));
    let w = waiting_handle(&t.enqueue(2, OBJ, LockMode::Pw, ext(0, 99), PLAIN));
    // A reader arriving after the writer queues behind it though it is compatible with
    // every granted lock: it has no granted blocker, only the waiting writer ahead.
    let r3 = t.enqueue(3, OBJ, LockMode::Pr, ext(50, 50), PLAIN);
    assert_eq!(r3, Enqueued::Waiting { handle: 3, blockers: vec![] });

    let changes = t.cancel(1, r1);
    assert_eq!(changes.granted.iter().map(|l| l.handle).collect::<Vec<_>>(), vec![w]);
    // Now the reader's blocker is the writer.
    assert_eq!(t.blockers(3).iter().map(|l| l.handle).collect::<Vec<_>>(), vec![w]);
    let changes = t.cancel(2, w);
    assert_eq!(changes.granted.iter().map(|l| l.handle).collect::<Vec<_>>(), vec![3]);
    assert_eq!(t.len(), 1);
}

#[test]
fn a_cancel_does_not_let_a_request_pass_an_earlier_one_that_still_waits() {
    let mut t = LockTable::new();
    granted_handle(&t.enqueue(1, OBJ, LockMode::Pw, ext(0, 9), PLAIN));
    let right = granted_handle(&t.enqueue(1, OBJ, LockMode::Pw, ext(20, 29), PLAIN));
    let writer = waiting_handle(&t.enqueue(2, OBJ, LockMode::Pw, ext(0, 29), PLAIN));
    let reader = waiting_handle(&t.enqueue(3, OBJ, LockMode::Pr, ext(20, 20), PLAIN));
    // The reader's only granted blocker goes, but the writer ahead of it still waits.
    assert!(t.cancel(1, right).is_empty());
    assert!(!t.lock(writer).unwrap().granted && !t.lock(reader).unwrap().granted);
    assert!(t.blockers(reader).is_empty());
}

#[test]
fn expansion_to_whole_when_alone_and_up_to_the_neighbours_otherwise() {
    let mut t = LockTable::new();
    let g = t.enqueue(1, OBJ, LockMode::Pw, ext(4096, 8191), EXPAND);
    let Enqueued::Granted(g) = g else { panic!() };
    assert_eq!(g.scope, LockScope::Extent(Extent::WHOLE));
    assert!(t.cancel(1, g.handle).is_empty());

    granted_handle(&t.enqueue(1, OBJ, LockMode::Pw, ext(0, 999), PLAIN));
    granted_handle(&t.enqueue(1, OBJ, LockMode::Pw, ext(10_000, 10_999), PLAIN));
    // Owner 2 grows up to owner 1's locks on both sides.
    let Enqueued::Granted(g) = t.enqueue(2, OBJ, LockMode::Pr, ext(5000, 5000), EXPAND) else { panic!() };
    assert_eq!(g.scope, ext(1000, 9999));
    // Compatible locks do not limit growth: another reader grows over owner 2's lock.
    let Enqueued::Granted(g) = t.enqueue(3, OBJ, LockMode::Pr, ext(1000, 1000), EXPAND) else { panic!() };
    assert_eq!(g.scope, ext(1000, 9999));
    // Without `expand`, exactly what was asked.
    let Enqueued::Granted(g) = t.enqueue(3, OBJ, LockMode::Pr, ext(20_000, 20_000), PLAIN) else { panic!() };
    assert_eq!(g.scope, ext(20_000, 20_000));
}

#[test]
fn no_expansion_while_a_conflicting_request_waits() {
    let mut t = LockTable::new();
    granted_handle(&t.enqueue(1, OBJ, LockMode::Pr, ext(0, 9), PLAIN));
    waiting_handle(&t.enqueue(2, OBJ, LockMode::Pw, ext(0, 9), PLAIN));
    let Enqueued::Granted(g) = t.enqueue(3, OBJ, LockMode::Pr, ext(100, 199), EXPAND) else { panic!() };
    assert_eq!(g.scope, ext(100, 199));
}

#[test]
fn reuse_hands_out_a_covering_lock() {
    let mut t = LockTable::new();
    let reuse = EnqueueOptions { reuse: true, expand: false };
    let w = granted_handle(&t.enqueue(1, OBJ, LockMode::Pw, ext(0, 99), PLAIN));
    let again = t.enqueue(1, OBJ, LockMode::Pr, ext(10, 20), reuse);
    assert_eq!(again, Enqueued::Granted(LockGrant { handle: w, resource: OBJ, mode: LockMode::Pw, scope: ext(0, 99) }));
    // Not covering (wider range, or stronger mode): a new lock.
    assert_ne!(granted_handle(&t.enqueue(1, OBJ, LockMode::Pr, ext(50, 150), reuse)), w);
    assert_ne!(granted_handle(&t.enqueue(1, OBJ, LockMode::Ex, ext(10, 20), reuse)), w);
    // Another owner's lock is never reused.
    assert_eq!(waiting_handle(&t.enqueue(2, OBJ, LockMode::Pr, ext(10, 20), reuse)), 4);
    assert_eq!(t.len(), 4);
    // Nor is one that a waiting request waits for (it is being called back): the new
    // request queues behind the waiting one.
    assert_eq!(waiting_handle(&t.enqueue(1, OBJ, LockMode::Pw, ext(10, 20), reuse)), 5);
}

#[test]
fn bits_convert_drops_update_and_grants_the_waiting_update_ex() {
    let mut t = LockTable::new();
    let lookup_update = LockScope::Bits(bits::LOOKUP | bits::UPDATE);
    let r = granted_handle(&t.enqueue(1, INODE, LockMode::Pr, lookup_update, PLAIN));
    let ex = waiting_handle(&t.enqueue(2, INODE, LockMode::Ex, LockScope::Bits(bits::UPDATE), PLAIN));
    // Widening is refused and changes nothing.
    let err = t.convert(1, r, LockMode::Pr, LockScope::Bits(bits::ALL)).unwrap_err();
    assert_eq!(err.code, ErrorCode::Invalid);
    assert_eq!(t.convert(1, r, LockMode::Pw, lookup_update).unwrap_err().code, ErrorCode::Invalid);
    assert_eq!(t.convert(2, r, LockMode::Pr, LockScope::Bits(bits::LOOKUP)).unwrap_err().code, ErrorCode::NotFound);
    assert_eq!(t.convert(2, ex, LockMode::Ex, LockScope::Bits(bits::UPDATE)).unwrap_err().code, ErrorCode::Invalid);
    assert!(!t.lock(ex).unwrap().granted);

    let changes = t.convert(1, r, LockMode::Pr, LockScope::Bits(bits::LOOKUP)).unwrap();
    assert_eq!(changes.granted.iter().map(|l| l.handle).collect::<Vec<_>>(), vec![ex]);
    assert_eq!(t.lock(r).unwrap().scope, LockScope::Bits(bits::LOOKUP));
    // Bits never grow, even when asked to.
    let g = t.enqueue(3, INODE, LockMode::Pr, LockScope::Bits(bits::LAYOUT), EXPAND);
    assert_eq!(
        g,
        Enqueued::Granted(LockGrant {
            handle: 3,
            resource: INODE,
            mode: LockMode::Pr,
            scope: LockScope::Bits(bits::LAYOUT)
        })
    );
}

#[test]
fn drop_owner_removes_everything_and_frees_resources() {
    let mut t = LockTable::new();
    granted_handle(&t.enqueue(1, OBJ, LockMode::Pw, ext(0, 9), PLAIN));
    granted_handle(&t.enqueue(1, INODE, LockMode::Ex, LockScope::Bits(bits::UPDATE), PLAIN));
    let w = waiting_handle(&t.enqueue(2, OBJ, LockMode::Pw, ext(5, 5), PLAIN));
    waiting_handle(&t.enqueue(1, OBJ, LockMode::Pr, ext(5, 5), PLAIN));
    let (removed, changes) = t.drop_owner(1);
    assert_eq!(removed, vec![1, 2, 4]);
    assert_eq!(changes.granted.iter().map(|l| l.handle).collect::<Vec<_>>(), vec![w]);
    assert_eq!((t.owner_count(1), t.len(), t.resource_count()), (0, 1, 1));
    let _ = t.cancel(2, w);
    assert_eq!((t.len(), t.resource_count()), (0, 0));
    assert!(t.owners.is_empty() && t.index.is_empty());
}

#[test]
fn holders_of_write_lists_other_owners_extent_writers() {
    let mut t = LockTable::new();
    granted_handle(&t.enqueue(1, OBJ, LockMode::Pw, ext(0, 9), PLAIN));
    granted_handle(&t.enqueue(2, OBJ, LockMode::Pr, ext(10, 19), PLAIN));
    granted_handle(&t.enqueue(3, OBJ, LockMode::Ex, ext(20, 29), PLAIN));
    waiting_handle(&t.enqueue(4, OBJ, LockMode::Pw, ext(0, 29), PLAIN));
    let owners: Vec<u64> = t.holders_of_write(OBJ, 3).map(|l| l.owner).collect();
    assert_eq!(owners, vec![1]);
}

// ----- exhaustive and pseudo-random checks -----

/// Every lock, sorted by handle.
fn snapshot(t: &LockTable) -> Vec<Lock> {
    let mut all: Vec<Lock> = t.index.keys().map(|&h| t.lock(h).unwrap()).collect();
    all.sort_by_key(|l| l.handle);
    all
}

/// The invariants that hold after every operation.
fn check_invariants(t: &LockTable) {
    // The structures agree with each other; nothing empty is kept.
    let mut count = 0;
    for (fid, res) in &t.resources {
        assert!(!res.is_empty(), "empty resource kept");
        for (h, e) in res.granted.iter().chain(res.waiting.iter()) {
            count += 1;
            assert_eq!(t.index.get(h), Some(fid));
            assert!(t.owners[&e.owner].contains(h));
            assert!(*h < t.next_handle);
        }
        assert!(res.granted.keys().all(|h| !res.waiting.contains_key(h)));
    }
    assert_eq!(count, t.index.len());
    assert_eq!(t.owners.values().map(BTreeSet::len).sum::<usize>(), count);
    assert!(t.owners.values().all(|s| !s.is_empty()));

    let all = snapshot(t);
    for a in &all {
        let others = all.iter().filter(|b| b.resource == a.resource && b.handle != a.handle);
        if a.granted {
            // No two granted locks of different owners conflict.
            for b in others.filter(|b| b.granted) {
                assert!(!a.conflicts_with(b), "granted locks conflict: {a:?} {b:?}");
            }
        } else {
            // A waiting lock is blocked by a granted lock or an earlier waiting one
            // (so nothing that could be granted is left waiting).
            let blocked = others.filter(|b| b.granted || b.handle < a.handle).any(|b| a.conflicts_with(b));
            assert!(blocked, "{a:?} waits for nothing in {all:?}");
            let expected: Vec<Lock> =
                all.iter().filter(|b| b.resource == a.resource && b.granted && a.conflicts_with(b)).copied().collect();
            assert_eq!(t.blockers(a.handle), expected);
        }
    }
}

/// What a test sequence does.
#[derive(Debug, Clone, Copy)]
enum Op {
    Enqueue { owner: u64, resource: Fid, mode: LockMode, scope: LockScope, opts: EnqueueOptions },
    Cancel { owner: u64, handle: LockHandle },
    Convert { owner: u64, handle: LockHandle, mode: LockMode, scope: LockScope },
    DropOwner { owner: u64 },
}

/// `changes` lists exactly the locks that went from waiting to granted between `before`
/// and `t`, and granted locks other than `touched` did not change.
fn check_changes(before: &[Lock], t: &LockTable, changes: &Changes, touched: Option<LockHandle>) {
    let after = snapshot(t);
    let now = |h: LockHandle| after.iter().find(|l| l.handle == h).copied();
    let mut promoted: Vec<Lock> =
        before.iter().filter(|l| !l.granted).filter_map(|l| now(l.handle)).filter(|l| l.granted).collect();
    let mut listed = changes.granted.clone();
    promoted.sort_by_key(|l| l.handle);
    listed.sort_by_key(|l| l.handle);
    assert_eq!(promoted, listed, "changes do not list the newly granted locks");
    for old in before {
        let new = now(old.handle);
        if old.granted && Some(old.handle) != touched {
            assert_eq!(new, Some(*old), "a granted lock changed behind its owner's back");
        }
        if !old.granted && Some(old.handle) != touched {
            // A waiting lock leaves only by being granted, or with its owner.
            if let Some(new) = new {
                assert_eq!((new.owner, new.mode, new.resource), (old.owner, old.mode, old.resource));
                assert!(new.scope.contains(&old.scope));
                if new.granted {
                    check_grant(&after, &new, &old.scope, None);
                    // FIFO: it did not pass an earlier request that still waits and
                    // that it conflicts with.
                    let passed = after.iter().any(|w| {
                        !w.granted && w.resource == new.resource && w.handle < new.handle && w.conflicts_with(&new)
                    });
                    assert!(!passed, "{new:?} was granted ahead of a conflicting earlier request");
                } else {
                    assert_eq!(new.scope, old.scope);
                }
            }
        }
    }
}

/// A fresh grant of `asked`: contains it, conflicts with nothing granted, and if it grew,
/// with nothing waiting either, and could not grow further. `expand` None = unknown.
fn check_grant(all: &[Lock], g: &Lock, asked: &LockScope, expand: Option<bool>) {
    assert!(g.scope.contains(asked));
    let others: Vec<&Lock> = all.iter().filter(|l| l.resource == g.resource && l.handle != g.handle).collect();
    for o in &others {
        if o.granted {
            assert!(!g.conflicts_with(o), "{g:?} granted over {o:?}");
        }
    }
    match (g.scope, asked) {
        (LockScope::Extent(got), LockScope::Extent(a)) if got != *a => {
            assert_ne!(expand, Some(false), "grew without being asked");
            let incompatible = |o: &&&Lock| o.owner != g.owner && !o.mode.compatible(g.mode);
            assert!(!others.iter().filter(incompatible).any(|o| !o.granted), "grew while a conflicting request waits");
            // Maximal: one more unit on either side would touch a conflicting lock.
            let probe = |x: u64| Lock { scope: ext(x, x), ..*g };
            if got.start > 0 {
                assert!(
                    others.iter().any(|o| o.granted && probe(got.start - 1).conflicts_with(o)),
                    "{g:?} could grow left"
                );
            }
            if got.end < EXTENT_EOF {
                assert!(
                    others.iter().any(|o| o.granted && probe(got.end + 1).conflicts_with(o)),
                    "{g:?} could grow right"
                );
            }
        }
        _ => assert_eq!(g.scope, *asked),
    }
    // When allowed to grow, it grew as far as it could.
    if expand == Some(true) {
        if let (LockScope::Extent(got), LockScope::Extent(_)) = (g.scope, asked) {
            let incompatible_waiting =
                others.iter().any(|o| !o.granted && o.owner != g.owner && !o.mode.compatible(g.mode));
            if !incompatible_waiting {
                let probe = |x: u64| Lock { scope: ext(x, x), ..*g };
                if got.start > 0 {
                    assert!(others.iter().any(|o| o.granted && probe(got.start - 1).conflicts_with(o)));
                }
                if got.end < EXTENT_EOF {
                    assert!(others.iter().any(|o| o.granted && probe(got.end + 1).conflicts_with(o)));
                }
            }
        }
    }
}

/// Applies `op` to `t`, checking everything it promises, then the invariants.
fn apply(t: &mut LockTable, op: Op) {
    let before = snapshot(t);
    let next_before = t.next_handle;
    match op {
        Op::Enqueue { owner, resource, mode, scope, opts } => {
            let doomed =
                |l: &Lock| before.iter().any(|w| !w.granted && w.resource == l.resource && w.conflicts_with(l));
            let reusable = before
                .iter()
                .find(|l| {
                    l.granted
                        && l.owner == owner
                        && l.resource == resource
                        && l.mode.covers(mode)
                        && l.scope.contains(&scope)
                        && !doomed(l)
                })
                .filter(|_| opts.reuse)
                .copied();
            let result = t.enqueue(owner, resource, mode, scope, opts);
            if let Some(held) = reusable {
                assert_eq!(result, Enqueued::Granted(held.grant()));
                assert_eq!(snapshot(t), before);
                assert_eq!(t.next_handle, next_before);
            } else {
                let after = snapshot(t);
                let handle = match &result {
                    Enqueued::Granted(g) => g.handle,
                    Enqueued::Waiting { handle, .. } => *handle,
                };
                assert_eq!(handle, next_before, "handles are not taken from the counter");
                assert_eq!(after.len(), before.len() + 1);
                assert!(before.iter().all(|l| after.contains(l)), "an enqueue changed other locks");
                let new = t.lock(handle).unwrap();
                assert_eq!((new.owner, new.resource, new.mode), (owner, resource, mode));
                match result {
                    Enqueued::Granted(g) => {
                        assert_eq!(g, new.grant());
                        check_grant(&after, &new, &scope, Some(opts.expand));
                        // Granted at once: nothing of another owner waits that it conflicts with
                        // on the asked scope (FIFO).
                        let asked = Lock { scope, ..new };
                        assert!(!before.iter().any(|o| o.resource == resource && asked.conflicts_with(o)));
                    }
                    Enqueued::Waiting { blockers, .. } => {
                        assert!(!new.granted);
                        assert_eq!(new.scope, scope);
                        assert_eq!(blockers, t.blockers(handle));
                    }
                }
            }
        }
        Op::Cancel { owner, handle } => {
            let target = before.iter().find(|l| l.handle == handle).copied();
            let changes = t.cancel(owner, handle);
            match target {
                Some(l) if l.owner == owner => {
                    assert!(t.lock(handle).is_none());
                    check_changes(&before, t, &changes, Some(handle));
                }
                _ => {
                    assert!(changes.is_empty());
                    assert_eq!(snapshot(t), before, "a cancel of a foreign or unknown handle changed something");
                }
            }
        }
        Op::Convert { owner, handle, mode, scope } => {
            let target = before.iter().find(|l| l.handle == handle).copied();
            let result = t.convert(owner, handle, mode, scope);
            let valid = target.is_some_and(|l| {
                l.owner == owner
                    && l.granted
                    && l.mode.covers(mode)
                    && l.scope.contains(&scope)
                    && scope != LockScope::Bits(0)
            });
            match result {
                Ok(changes) => {
                    assert!(valid, "convert accepted {op:?} of {target:?}");
                    let now = t.lock(handle).unwrap();
                    assert_eq!((now.mode, now.scope, now.granted), (mode, scope, true));
                    check_changes(&before, t, &changes, Some(handle));
                }
                Err(_) => {
                    assert!(!valid, "convert refused {op:?} of {target:?}");
                    assert_eq!(snapshot(t), before);
                }
            }
        }
        Op::DropOwner { owner } => {
            let (removed, changes) = t.drop_owner(owner);
            let expected: Vec<LockHandle> = before.iter().filter(|l| l.owner == owner).map(|l| l.handle).collect();
            assert_eq!(removed, expected);
            assert_eq!(t.owner_count(owner), 0);
            assert!(snapshot(t).iter().all(|l| l.owner != owner));
            let kept: Vec<Lock> = before.iter().filter(|l| l.owner != owner).copied().collect();
            check_changes(&kept, t, &changes, None);
        }
    }
    assert!(t.next_handle >= next_before);
    check_invariants(t);
}

/// The extents over a small domain: ends in 0..=3 or EOF.
fn extents(points: u64) -> Vec<LockScope> {
    let mut all = Vec::new();
    for start in 0..points {
        for end in (start..points).chain([EXTENT_EOF]) {
            all.push(ext(start, end));
        }
    }
    all
}

/// Depth-first over every sequence of `depth` operations from `alphabet` (the handles
/// it names are whatever the sequence created).
fn exhaust(t: &LockTable, alphabet: &[Op], depth: usize, visited: &mut usize) {
    if depth == 0 {
        return;
    }
    for &op in alphabet {
        let mut next = t.clone();
        apply(&mut next, op);
        *visited += 1;
        exhaust(&next, alphabet, depth - 1, visited);
    }
}

fn ops_on_handles(owners: &[u64], handles: std::ops::RangeInclusive<LockHandle>) -> Vec<Op> {
    let mut ops = Vec::new();
    for &owner in owners {
        ops.push(Op::DropOwner { owner });
        for handle in handles.clone() {
            ops.push(Op::Cancel { owner, handle });
        }
    }
    ops
}

#[test]
fn exhaustive_extents() {
    let owners = [1, 2];
    let mut alphabet = Vec::new();
    for owner in owners {
        for mode in MODES {
            for scope in extents(2) {
                for opts in [PLAIN, EXPAND] {
                    alphabet.push(Op::Enqueue { owner, resource: OBJ, mode, scope, opts });
                }
            }
            let opts = EnqueueOptions { reuse: true, expand: false };
            alphabet.push(Op::Enqueue { owner, resource: OBJ, mode, scope: ext(1, 1), opts });
        }
    }
    alphabet.extend(ops_on_handles(&owners, 1..=3));
    for handle in 1..=2 {
        for owner in owners {
            alphabet.push(Op::Convert { owner, handle, mode: LockMode::Pr, scope: ext(1, 1) });
            alphabet.push(Op::Convert { owner, handle, mode: LockMode::Ex, scope: ext(0, EXTENT_EOF) });
        }
    }
    let mut visited = 0;
    exhaust(&LockTable::new(), &alphabet, 3, &mut visited);
    assert!(visited > 500_000, "{visited}");
}

#[test]
fn exhaustive_bits() {
    let owners = [1, 2, 3];
    let mut alphabet = Vec::new();
    for owner in owners {
        for mode in MODES {
            for b in 1..=3u8 {
                alphabet.push(Op::Enqueue { owner, resource: INODE, mode, scope: LockScope::Bits(b), opts: PLAIN });
            }
            alphabet.push(Op::Enqueue {
                owner,
                resource: INODE,
                mode,
                scope: LockScope::Bits(1),
                opts: EnqueueOptions { reuse: true, expand: true },
            });
        }
    }
    alphabet.extend(ops_on_handles(&owners, 1..=3));
    for handle in 1..=3 {
        for owner in owners {
            for b in 0..=3u8 {
                alphabet.push(Op::Convert { owner, handle, mode: LockMode::Pr, scope: LockScope::Bits(b) });
            }
        }
    }
    let mut visited = 0;
    exhaust(&LockTable::new(), &alphabet, 3, &mut visited);
    assert!(visited > 500_000, "{visited}");
}

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }
}

/// A scope inside `scope` (for converts), or any scope of its kind now and then.
fn sub_scope(rng: &mut Rng, scope: LockScope, all_extents: &[LockScope]) -> LockScope {
    match scope {
        LockScope::Bits(b) if rng.below(4) > 0 => LockScope::Bits(b & rng.below(16) as u8),
        LockScope::Bits(_) => LockScope::Bits(rng.below(16) as u8),
        LockScope::Extent(e) if rng.below(4) > 0 => {
            let inside: Vec<LockScope> =
                all_extents.iter().copied().filter(|s| LockScope::Extent(e).contains(s)).collect();
            rng.pick(&inside)
        }
        LockScope::Extent(_) => rng.pick(all_extents),
    }
}

#[test]
fn random_sequences() {
    let all_extents = extents(4);
    let mut rng = Rng(0x5eed_1234_abcd_9876);
    for _ in 0..4000 {
        let mut t = LockTable::new();
        for _ in 0..40 {
            let owner = 1 + rng.below(3);
            let live: Vec<LockHandle> = t.index.keys().copied().collect();
            let handle =
                if !live.is_empty() && rng.below(5) > 0 { rng.pick(&live) } else { rng.below(t.next_handle + 2) };
            // The right owner most of the time, to exercise the effective paths.
            let owner_of = |t: &LockTable, rng: &mut Rng| match t.lock(handle) {
                Some(l) if rng.below(6) > 0 => l.owner,
                _ => owner,
            };
            let op = match rng.below(20) {
                0..=10 => {
                    let (resource, scope) = if rng.below(2) == 0 {
                        (OBJ, rng.pick(&all_extents))
                    } else {
                        (INODE, LockScope::Bits(1 + rng.below(15) as u8))
                    };
                    let opts = EnqueueOptions { reuse: rng.below(3) == 0, expand: rng.below(2) == 0 };
                    Op::Enqueue { owner, resource, mode: rng.pick(&MODES), scope, opts }
                }
                11..=15 => Op::Cancel { owner: owner_of(&t, &mut rng), handle },
                16..=18 => {
                    let current = t.lock(handle).map_or(ext(0, 0), |l| l.scope);
                    Op::Convert {
                        owner: owner_of(&t, &mut rng),
                        handle,
                        mode: rng.pick(&MODES),
                        scope: sub_scope(&mut rng, current, &all_extents),
                    }
                }
                _ => Op::DropOwner { owner },
            };
            apply(&mut t, op);
        }
        // Everything leaves cleanly.
        for owner in 1..=3 {
            apply(&mut t, Op::DropOwner { owner });
        }
        assert!(t.is_empty() && t.resources.is_empty() && t.owners.is_empty());
    }
}

/// Lock replay keeps the old server's handles, refuses what conflicts or reuses a handle,
/// and numbers new locks past every replayed one.
#[test]
fn replayed_locks_keep_their_handles_and_conflicting_ones_are_refused() {
    let mut t = LockTable::new();
    let grant = |handle, mode, scope| LockGrant { handle, resource: INODE, mode, scope };
    let lookup = LockScope::Bits(bits::LOOKUP);
    assert!(t.replay(1, grant(40, LockMode::Pr, lookup)));
    assert!(t.replay(2, grant(41, LockMode::Pr, lookup)), "readers of two clients share");
    assert!(!t.replay(3, grant(42, LockMode::Ex, lookup)), "a writer conflicting with them is refused");
    assert!(!t.replay(3, grant(40, LockMode::Pr, lookup)), "a handle in use is refused");
    assert!(!t.replay(3, grant(0, LockMode::Pr, lookup)), "handle 0 names no lock");
    assert!(t.replay(1, grant(40, LockMode::Pr, lookup)), "the same lock replayed again by its owner is kept");
    assert!(!t.replay(1, grant(40, LockMode::Pw, lookup)), "but not under another mode");
    assert_eq!(t.lock(40).map(|l| (l.owner, l.granted)), Some((1, true)));
    assert_eq!(t.lock(42), None);
    // New locks come after the replayed ones, and the replayed ones block as granted ones.
    let w = t.enqueue(3, INODE, LockMode::Ex, lookup, PLAIN);
    assert_eq!(waiting_handle(&w), 42, "numbered past the highest handle kept");
    assert!(t.cancel(1, 40).granted.is_empty(), "client 2's reader still blocks the writer");
    let granted = t.cancel(2, 41).granted;
    assert_eq!(granted.iter().map(|l| l.handle).collect::<Vec<_>>(), vec![42]);
}
