//! `AdvisoryLocks::held_by`: a client's own locks, as it replays them to a new server.

use super::*;

#[test]
fn held_by_lists_one_client_s_locks_as_set_after_splits_and_merges() {
    let mut t = AdvisoryLocks::new();
    t.set(F, 1, &wr(10, 0, 99)).unwrap();
    t.set(F, 1, &un(10, 40, 59)).unwrap(); // split in two
    t.set(F, 1, &rd(11, 200, 299)).unwrap();
    t.set(F, 1, &rd(11, 300, 399)).unwrap(); // merged with the one before
    t.set(G, 1, &ex(12)).unwrap();
    t.set(F, 2, &rd(10, 500, 599)).unwrap(); // another client's owner 10
    let mut held = t.held_by(1);
    held.sort_by_key(|(fid, l)| (*fid, l.owner, l.start));
    assert_eq!(held, vec![(F, wr(10, 0, 39)), (F, wr(10, 60, 99)), (F, rd(11, 200, 399)), (G, ex(12))]);
    assert_eq!(t.held_by(2), vec![(F, rd(10, 500, 599))]);
    assert!(t.held_by(3).is_empty());
    // Set again on an empty table, they make the same state: what a replay relies on.
    let mut again = AdvisoryLocks::new();
    for (fid, l) in &held {
        again.set(*fid, 1, l).unwrap();
    }
    let mut replayed = again.held_by(1);
    replayed.sort_by_key(|(fid, l)| (*fid, l.owner, l.start));
    assert_eq!(replayed, held);
}
