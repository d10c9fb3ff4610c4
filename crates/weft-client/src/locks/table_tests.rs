use super::*;
use weft_proto::lock::{bits, Extent};

const OST: LockTarget = LockTarget::Ost(0);
const MDT: LockTarget = LockTarget::Mdt(0);

/// The ticket of a request sent after every callback of a test.
const FRESH: u64 = u64::MAX;

fn object(oid: u32) -> Fid {
    Fid::new(Fid::object_seq(0), oid, 0)
}

fn file(n: u32) -> Fid {
    Fid::new(0x200000400, n, 0)
}

fn extent_grant(handle: LockHandle, oid: u32, mode: LockMode, start: u64, end: u64) -> LockGrant {
    LockGrant { handle, resource: object(oid), mode, scope: LockScope::Extent(Extent { start, end }) }
}

fn bits_grant(handle: LockHandle, inode: Fid, have: u8) -> LockGrant {
    LockGrant { handle, resource: inode, mode: LockMode::Pr, scope: LockScope::Bits(have) }
}

fn range(start: u64, end: u64) -> LockScope {
    LockScope::Extent(Extent { start, end })
}

#[test]
fn a_read_uses_a_cached_lock_whose_mode_and_range_cover_it() {
    let mut t = LockTable::default();
    assert!(t.insert(OST, &extent_grant(1, 7, LockMode::Pr, 0, 8191), file(1), 0, FRESH));
    assert_eq!(t.use_matching(OST, object(7), LockMode::Pr, &range(4096, 8191)), Some(1));
    assert_eq!(t.get(&(OST, 1)).unwrap().users, 1);
    // A write needs PW; a read past the range needs more; another object has its own.
    assert_eq!(t.use_matching(OST, object(7), LockMode::Pw, &range(0, 4095)), None);
    assert_eq!(t.use_matching(OST, object(7), LockMode::Pr, &range(0, 12287)), None);
    assert_eq!(t.use_matching(OST, object(8), LockMode::Pr, &range(0, 4095)), None);
    // A PW lock serves reads too.
    assert!(t.insert(OST, &extent_grant(2, 8, LockMode::Pw, 0, u64::MAX), file(1), 0, FRESH));
    assert_eq!(t.use_matching(OST, object(8), LockMode::Pr, &range(0, 4095)), Some(2));
}

#[test]
fn a_lock_in_its_lockless_phase_still_serves_io_but_a_draining_one_does_not() {
    let mut t = LockTable::default();
    t.insert(OST, &extent_grant(1, 7, LockMode::Pw, 0, u64::MAX), file(1), 0, FRESH);
    let decision = t.callback((OST, 1), range(0, 4095), 1);
    assert_eq!(decision, Callback::GiveBack { file: file(1), scope: range(0, u64::MAX) });
    assert_eq!(t.get(&(OST, 1)).unwrap().phase, Phase::Lockless);
    assert_eq!(t.use_matching(OST, object(7), LockMode::Pw, &range(0, 4095)), Some(1));
    t.set_phase((OST, 1), Phase::Draining);
    assert_eq!(t.use_matching(OST, object(7), LockMode::Pw, &range(0, 4095)), None);
    // Its last user leaving is what the callback waits for.
    assert!(t.unuse((OST, 1)));
    assert!(!t.unuse((OST, 9)), "an unknown lock wakes nobody");
}

#[test]
fn the_last_user_of_a_held_lock_wakes_nobody() {
    let mut t = LockTable::default();
    t.insert(OST, &extent_grant(1, 7, LockMode::Pr, 0, u64::MAX), file(1), 2, FRESH);
    assert!(!t.unuse((OST, 1)));
    assert!(!t.unuse((OST, 1)));
    assert_eq!(t.get(&(OST, 1)).unwrap().users, 0);
}

#[test]
fn a_grant_of_a_lock_being_given_back_is_refused_and_one_held_gains_users() {
    let mut t = LockTable::default();
    let g = extent_grant(1, 7, LockMode::Pr, 0, u64::MAX);
    assert!(t.insert(OST, &g, file(1), 1, FRESH));
    assert!(t.insert(OST, &g, file(1), 1, FRESH), "the server reused a lock we hold");
    assert_eq!(t.get(&(OST, 1)).unwrap().users, 2);
    t.set_phase((OST, 1), Phase::Draining);
    assert!(!t.insert(OST, &g, file(1), 1, FRESH), "reused before our cancel arrived");
    assert_eq!(t.get(&(OST, 1)).unwrap().users, 2);
}

#[test]
fn a_callback_narrows_an_inode_lock_to_the_bits_nobody_wants() {
    let mut t = LockTable::default();
    let inode = file(3);
    t.insert(MDT, &bits_grant(5, inode, bits::LOOKUP | bits::UPDATE), inode, 0, FRESH);
    // A chmod wants UPDATE: the cached name (LOOKUP) stays.
    let d = t.callback((MDT, 5), LockScope::Bits(bits::UPDATE), 1);
    assert_eq!(d, Callback::Narrow { inode, dropped: bits::UPDATE, keep: bits::LOOKUP });
    assert!(t.holds_bits_on((MDT, 5), inode, bits::LOOKUP));
    assert!(!t.holds_bits_on((MDT, 5), inode, bits::UPDATE));
    // A rename wants LOOKUP: nothing is left to keep, the lock goes.
    let d = t.callback((MDT, 5), LockScope::Bits(bits::LOOKUP | bits::UPDATE), 1);
    assert_eq!(d, Callback::GiveBack { file: inode, scope: LockScope::Bits(bits::LOOKUP) });
    assert!(!t.holds_bits_on((MDT, 5), inode, bits::LOOKUP), "not held while going");
    // A second callback for it waits for it to be gone; an unknown one is unknown.
    assert_eq!(t.callback((MDT, 5), LockScope::Bits(bits::LOOKUP), 1), Callback::AlreadyGoing);
    assert_eq!(t.callback((MDT, 6), LockScope::Bits(bits::LOOKUP), 1), Callback::Unknown);
}

#[test]
fn removing_forgets_the_lock_everywhere() {
    let mut t = LockTable::default();
    t.insert(OST, &extent_grant(1, 7, LockMode::Pr, 0, 4095), file(1), 0, FRESH);
    t.insert(OST, &extent_grant(2, 7, LockMode::Pr, 4096, 8191), file(2), 0, FRESH);
    t.insert(LockTarget::Ost(1), &extent_grant(3, 7, LockMode::Pr, 0, 4095), file(1), 0, FRESH);
    assert_eq!(t.files_of(OST, object(7)), vec![file(1), file(2)]);
    t.callback((OST, 2), range(0, 4095), 1);
    assert_eq!(t.remove((OST, 2)).map(|e| e.file), Some(file(2)));
    assert_eq!(t.files_of(OST, object(7)), vec![file(1)]);
    assert_eq!(t.use_matching(OST, object(7), LockMode::Pr, &range(4096, 4096)), None);
    let gone = t.remove_where(|target| *target == OST);
    assert_eq!(gone.len(), 1);
    assert!(t.files_of(OST, object(7)).is_empty());
    assert_eq!(t.len(), 1, "another target's lock stays");
    assert_eq!(t.clear(), vec![(LockTarget::Ost(1), 3)]);
    assert_eq!(t.len(), 0);
    assert!(t.take_lru_excess(0, 1).is_empty());
}

#[test]
fn the_lru_bound_gives_back_the_oldest_unused_held_locks() {
    let mut t = LockTable::default();
    for h in 1..=10u64 {
        t.insert(OST, &extent_grant(h, h as u32, LockMode::Pr, 0, u64::MAX), file(h as u32), 0, FRESH);
    }
    // Lock 1 is used again (now the newest) and lock 2 is in use: neither goes.
    assert_eq!(t.use_matching(OST, object(1), LockMode::Pr, &range(0, 0)), Some(1));
    t.unuse((OST, 1));
    assert_eq!(t.use_matching(OST, object(2), LockMode::Pr, &range(0, 0)), Some(2));
    assert!(t.take_lru_excess(10, 1).is_empty(), "at the bound");
    t.insert(OST, &extent_grant(11, 11, LockMode::Pr, 0, u64::MAX), file(11), 0, FRESH);
    // 11 held past a bound of 10: down to 9.
    let mut out = t.take_lru_excess(10, 1);
    out.sort_unstable();
    assert_eq!(out, vec![(OST, 3), (OST, 4)]);
    assert!(out.iter().all(|k| t.get(k).unwrap().phase == Phase::Draining));
    // Those on their way back count as gone: no second trim until the bound is passed again.
    assert!(t.take_lru_excess(10, 1).is_empty());
}

#[test]
fn a_layout_this_client_changed_is_vouched_for_again_only_by_a_new_grant() {
    let mut t = LockTable::default();
    let all = bits::LOOKUP | bits::UPDATE | bits::LAYOUT;
    t.insert(MDT, &bits_grant(1, file(1), all), file(1), 0, FRESH);
    t.insert(MDT, &bits_grant(2, file(2), all), file(2), 0, FRESH);
    t.insert(OST, &extent_grant(3, 7, LockMode::Pw, 0, u64::MAX), file(1), 0, FRESH);
    // A synchronous mirror of file 1 went stale by this client's own request.
    t.drop_bits_locally(file(1), bits::LAYOUT);
    assert!(!t.holds_bits_on((MDT, 1), file(1), bits::LAYOUT));
    assert!(t.holds_bits_on((MDT, 1), file(1), bits::LOOKUP | bits::UPDATE));
    // Other files' locks and the file's extent locks are left alone.
    assert!(t.holds_bits_on((MDT, 2), file(2), bits::LAYOUT));
    assert_eq!(t.get(&(OST, 3)).unwrap().scope, range(0, u64::MAX));
    // The server hands the same lock out again with a fresh layout: it vouches again.
    assert!(t.insert(MDT, &bits_grant(1, file(1), all), file(1), 1, FRESH));
    assert!(t.holds_bits_on((MDT, 1), file(1), bits::LAYOUT));
}

/// An answer the server sent before it called a lock back can land after the callback:
/// the grant it carries is older than the callback and must neither bring back the bits
/// the callback took nor the lock once it is gone; a request sent after the callback may.
#[test]
fn a_grant_from_before_a_callback_landing_after_it_is_not_recorded() {
    let mut t = LockTable::default();
    let inode = file(3);
    let all = bits::LOOKUP | bits::UPDATE | bits::LAYOUT;
    assert!(t.insert(MDT, &bits_grant(5, inode, all), inode, 0, 1));
    // Requests 2..=4 are in flight when another client's chmod calls UPDATE back.
    let d = t.callback((MDT, 5), LockScope::Bits(bits::UPDATE), 4);
    assert!(matches!(d, Callback::Narrow { .. }));
    assert!(t.insert(MDT, &bits_grant(5, inode, all), inode, 0, 3), "the lock is still held");
    assert!(!t.holds_bits_on((MDT, 5), inode, bits::LOOKUP | bits::UPDATE), "request 3's grant is stale");
    assert!(t.insert(MDT, &bits_grant(5, inode, all), inode, 0, 5));
    assert!(t.holds_bits_on((MDT, 5), inode, bits::LOOKUP | bits::UPDATE), "request 5 left after the callback");

    // Called back whole and given back while request 6 is in flight.
    assert!(matches!(t.callback((MDT, 5), LockScope::Bits(all), 6), Callback::GiveBack { .. }));
    t.remove((MDT, 5));
    assert!(!t.insert(MDT, &bits_grant(5, inode, all), inode, 0, 6), "gone before its answer landed");
    assert!(t.get(&(MDT, 5)).is_none());
    // Once nothing sent before the callback is in flight, the record goes.
    t.forget_gone(7);
    assert!(t.insert(MDT, &bits_grant(5, inode, all), inode, 0, 7));

    // A callback for a lock never recorded: its grant landing late is stale too.
    t.mark_gone((MDT, 9), 8);
    assert!(!t.insert(MDT, &bits_grant(9, inode, all), inode, 0, 8));
    assert!(t.insert(MDT, &bits_grant(9, inode, all), inode, 0, 9));
}
