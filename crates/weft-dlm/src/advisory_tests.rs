use super::*;
use Refused::{Conflict, NoLocks};

const EOF: u64 = u64::MAX;
const F: Fid = Fid::new(0x2_0000_0400, 7, 0);
const G: Fid = Fid::new(0x2_0000_0400, 8, 0);

fn spec(owner: u64, kind: FlockKind, start: u64, end: u64, flock: bool) -> FlockSpec {
    FlockSpec { owner, kind, start, end, pid: 1000 + owner as u32, flock }
}
fn rd(owner: u64, start: u64, end: u64) -> FlockSpec {
    spec(owner, FlockKind::Read, start, end, false)
}
fn wr(owner: u64, start: u64, end: u64) -> FlockSpec {
    spec(owner, FlockKind::Write, start, end, false)
}
fn un(owner: u64, start: u64, end: u64) -> FlockSpec {
    spec(owner, FlockKind::Unlock, start, end, false)
}
fn sh(owner: u64) -> FlockSpec {
    spec(owner, FlockKind::Read, 0, EOF, true)
}
fn ex(owner: u64) -> FlockSpec {
    spec(owner, FlockKind::Write, 0, EOF, true)
}
fn flock_un(owner: u64) -> FlockSpec {
    spec(owner, FlockKind::Unlock, 0, EOF, true)
}

/// The fcntl locks on `fid` as (client, owner, kind, start, end), in report order.
fn ranges(t: &AdvisoryLocks, fid: Fid) -> Vec<(u64, u64, FlockKind, u64, u64)> {
    t.files
        .get(&fid)
        .map(|f| f.ranges.iter().map(|l| (l.client, l.owner, l.mode.kind(), l.start, l.end)).collect())
        .unwrap_or_default()
}

#[test]
fn unlock_of_a_middle_part_splits() {
    let mut t = AdvisoryLocks::new();
    t.set(F, 1, &wr(1, 0, 99)).unwrap();
    t.set(F, 1, &un(1, 40, 59)).unwrap();
    assert_eq!(ranges(&t, F), vec![(1, 1, FlockKind::Write, 0, 39), (1, 1, FlockKind::Write, 60, 99)]);
    assert_eq!(t.count(), 2);
    // The hole is free for another client.
    t.set(F, 2, &wr(1, 40, 59)).unwrap();
    // Unlocking the start or the end trims.
    t.set(F, 1, &un(1, 0, 9)).unwrap();
    t.set(F, 1, &un(1, 90, EOF)).unwrap();
    assert_eq!(
        ranges(&t, F),
        vec![(1, 1, FlockKind::Write, 10, 39), (2, 1, FlockKind::Write, 40, 59), (1, 1, FlockKind::Write, 60, 89)]
    );
}

#[test]
fn split_to_eof() {
    let mut t = AdvisoryLocks::new();
    t.set(F, 1, &rd(1, 10, EOF)).unwrap();
    t.set(F, 1, &un(1, 20, 29)).unwrap();
    assert_eq!(ranges(&t, F), vec![(1, 1, FlockKind::Read, 10, 19), (1, 1, FlockKind::Read, 30, EOF)]);
}

#[test]
fn same_kind_merges_when_adjacent_or_overlapping() {
    let mut t = AdvisoryLocks::new();
    t.set(F, 1, &rd(1, 0, 9)).unwrap();
    t.set(F, 1, &rd(1, 10, 19)).unwrap(); // adjacent
    assert_eq!(ranges(&t, F), vec![(1, 1, FlockKind::Read, 0, 19)]);
    t.set(F, 1, &rd(1, 30, 39)).unwrap(); // a gap: stays apart
    assert_eq!(t.count(), 2);
    t.set(F, 1, &rd(1, 15, 34)).unwrap(); // overlaps both: one lock
    assert_eq!(ranges(&t, F), vec![(1, 1, FlockKind::Read, 0, 39)]);
    t.set(F, 1, &rd(1, 40, EOF)).unwrap();
    assert_eq!(ranges(&t, F), vec![(1, 1, FlockKind::Read, 0, EOF)]);
    assert_eq!(t.count(), 1);
}

#[test]
fn different_kinds_of_one_owner_do_not_merge() {
    let mut t = AdvisoryLocks::new();
    t.set(F, 1, &rd(1, 0, 9)).unwrap();
    t.set(F, 1, &wr(1, 10, 19)).unwrap();
    assert_eq!(ranges(&t, F), vec![(1, 1, FlockKind::Read, 0, 9), (1, 1, FlockKind::Write, 10, 19)]);
}

#[test]
fn read_over_part_of_a_write_converts_that_part() {
    let mut t = AdvisoryLocks::new();
    t.set(F, 1, &wr(1, 0, 99)).unwrap();
    t.set(F, 1, &rd(1, 40, 59)).unwrap();
    assert_eq!(
        ranges(&t, F),
        vec![(1, 1, FlockKind::Write, 0, 39), (1, 1, FlockKind::Read, 40, 59), (1, 1, FlockKind::Write, 60, 99)]
    );
    // Another owner may now read the converted part, but not the rest.
    assert_eq!(t.set(F, 2, &rd(5, 40, 59)), Ok(()));
    assert!(t.set(F, 2, &rd(5, 39, 40)).is_err());
    // And back: the owner's write over all of it conflicts with the other reader...
    assert_eq!(t.set(F, 1, &wr(1, 0, 99)), Err(Conflict(rd(5, 40, 59))));
    // ...until that reader leaves, and then it is one write lock again.
    t.set(F, 2, &un(5, 0, EOF)).unwrap();
    t.set(F, 1, &wr(1, 0, 99)).unwrap();
    assert_eq!(ranges(&t, F), vec![(1, 1, FlockKind::Write, 0, 99)]);
}

#[test]
fn an_owner_never_conflicts_with_itself() {
    let mut t = AdvisoryLocks::new();
    t.set(F, 1, &wr(1, 0, 9)).unwrap();
    assert_eq!(t.get(F, 1, &wr(1, 0, 9)), None);
    t.set(F, 1, &wr(1, 5, 14)).unwrap();
    assert_eq!(ranges(&t, F), vec![(1, 1, FlockKind::Write, 0, 14)]);
}

#[test]
fn readers_share_writers_conflict() {
    let mut t = AdvisoryLocks::new();
    t.set(F, 1, &rd(1, 0, 9)).unwrap();
    t.set(F, 2, &rd(1, 5, 14)).unwrap();
    assert_eq!(t.set(F, 3, &wr(1, 12, 12)), Err(Conflict(rd(1, 5, 14))));
    assert_eq!(t.set(F, 3, &wr(1, 15, EOF)), Ok(()));
    t.set(F, 3, &un(1, 0, EOF)).unwrap();
    t.set(F, 1, &rd(2, 0, EOF)).unwrap(); // another owner of client 1
    assert_eq!(t.count(), 3);
    assert_eq!(t.set(F, 1, &wr(1, 0, 0)), Err(Conflict(rd(2, 0, EOF))), "another owner of the same client");
    assert_eq!(t.set(F, 3, &wr(1, 100, 199)), Err(Conflict(rd(2, 0, EOF))));
    // Write held: readers and writers of other owners both conflict, on overlap only.
    let mut t = AdvisoryLocks::new();
    t.set(F, 1, &wr(1, 100, 199)).unwrap();
    assert_eq!(t.set(F, 2, &rd(1, 150, 150)), Err(Conflict(wr(1, 100, 199))));
    assert_eq!(t.set(F, 2, &wr(1, 199, 300)), Err(Conflict(wr(1, 100, 199))));
    t.set(F, 2, &wr(1, 200, 300)).unwrap();
    t.set(F, 2, &rd(1, 0, 99)).unwrap();
    assert_eq!(t.count(), 3);
}

#[test]
fn a_failed_set_changes_nothing() {
    let mut t = AdvisoryLocks::new();
    t.set(F, 1, &rd(1, 0, 9)).unwrap();
    t.set(F, 2, &wr(1, 20, 29)).unwrap();
    // Would merge with client 1's own read and convert nothing, but 20..=29 conflicts.
    assert!(t.set(F, 1, &rd(1, 5, 25)).is_err());
    assert_eq!(ranges(&t, F), vec![(1, 1, FlockKind::Read, 0, 9), (2, 1, FlockKind::Write, 20, 29)]);
}

#[test]
fn getlk_reports_the_holder_range_and_pid() {
    let mut t = AdvisoryLocks::new();
    assert_eq!(t.get(F, 1, &wr(1, 0, EOF)), None);
    t.set(F, 2, &FlockSpec { pid: 4242, ..wr(9, 50, 59) }).unwrap();
    t.set(F, 3, &FlockSpec { pid: 777, ..rd(9, 10, 19) }).unwrap();
    let found = t.get(F, 1, &wr(1, 0, EOF)).unwrap();
    // The first conflict is the one with the lowest start.
    assert_eq!(found, FlockSpec { owner: 9, kind: FlockKind::Read, start: 10, end: 19, pid: 777, flock: false });
    let found = t.get(F, 1, &rd(1, 55, 100)).unwrap();
    assert_eq!(found, FlockSpec { owner: 9, kind: FlockKind::Write, start: 50, end: 59, pid: 4242, flock: false });
    assert_eq!(t.get(F, 1, &rd(1, 0, 49)), None, "reads share");
    assert_eq!(t.get(F, 1, &un(1, 0, EOF)), None, "an unlock conflicts with nothing");
    assert_eq!(t.get(G, 1, &wr(1, 0, EOF)), None, "another file");
    // Same start: the lower (client, owner) comes first.
    t.set(F, 2, &rd(1, 10, 12)).unwrap();
    assert_eq!(t.get(F, 1, &wr(1, 10, 10)).map(|l| l.owner), Some(1));
    // get changes nothing.
    assert_eq!(t.count(), 3);
}

#[test]
fn merged_lock_takes_the_latest_pid_split_pieces_keep_theirs() {
    let mut t = AdvisoryLocks::new();
    t.set(F, 1, &FlockSpec { pid: 1, ..wr(1, 0, 9) }).unwrap();
    t.set(F, 1, &FlockSpec { pid: 2, ..wr(1, 10, 19) }).unwrap();
    t.set(F, 1, &FlockSpec { pid: 3, ..rd(1, 5, 5) }).unwrap();
    let pids: Vec<_> = t.files[&F].ranges.iter().map(|l| (l.start, l.end, l.pid)).collect();
    assert_eq!(pids, vec![(0, 4, 2), (5, 5, 3), (6, 19, 2)]);
}

#[test]
fn empty_ranges_do_nothing() {
    let mut t = AdvisoryLocks::new();
    t.set(F, 1, &wr(1, 10, 19)).unwrap();
    assert_eq!(t.set(F, 2, &wr(1, 15, 14)), Ok(()));
    assert_eq!(t.get(F, 2, &wr(1, 15, 14)), None);
    t.set(F, 1, &un(1, 15, 14)).unwrap();
    assert_eq!(ranges(&t, F), vec![(1, 1, FlockKind::Write, 10, 19)]);
}

#[test]
fn flock_shares_and_excludes_the_whole_file() {
    let mut t = AdvisoryLocks::new();
    t.set(F, 1, &sh(1)).unwrap();
    t.set(F, 2, &FlockSpec { start: 500, end: 600, ..sh(1) }).unwrap(); // range ignored
    assert_eq!(t.count(), 2);
    let err = t.set(F, 3, &FlockSpec { start: 1 << 40, end: 1 << 40, ..ex(1) }).unwrap_err();
    assert_eq!(err, Conflict(sh(1)), "the first holder, reported as the whole file with its pid");
    t.set(F, 1, &flock_un(1)).unwrap();
    t.set(F, 2, &flock_un(1)).unwrap();
    assert_eq!(t.count(), 0);
    t.set(F, 3, &ex(1)).unwrap();
    assert_eq!(t.get(F, 1, &sh(1)), Some(ex(1)));
    assert_eq!(t.get(F, 3, &sh(1)), None, "the holder itself");
}

#[test]
fn flock_converts_and_a_failed_conversion_keeps_the_old_lock() {
    let mut t = AdvisoryLocks::new();
    t.set(F, 1, &sh(1)).unwrap();
    t.set(F, 1, &ex(1)).unwrap(); // upgrade, nobody else there
    assert_eq!(t.count(), 1);
    t.set(F, 1, &sh(1)).unwrap(); // downgrade
    t.set(F, 2, &sh(4)).unwrap();
    // Upgrade while another client shares: fails, and client 1 still holds its shared lock
    // (Linux would have dropped it).
    assert_eq!(t.set(F, 1, &ex(1)), Err(Conflict(sh(4))));
    assert_eq!(t.get(F, 3, &ex(1)), Some(sh(1)));
    assert_eq!(t.count(), 2);
}

#[test]
fn families_never_meet() {
    let mut t = AdvisoryLocks::new();
    t.set(F, 1, &ex(1)).unwrap();
    t.set(F, 2, &wr(1, 0, EOF)).unwrap();
    assert_eq!(t.get(F, 3, &rd(1, 0, 0)), Some(wr(1, 0, EOF)));
    assert_eq!(t.get(F, 3, &sh(1)), Some(ex(1)));
    // One owner's locks of the two families live side by side.
    t.set(F, 1, &wr(1, 0, 9)).unwrap_err();
    t.set(F, 2, &sh(1)).unwrap_err();
    t.set(F, 2, &ex(2)).unwrap_err();
    let mut t = AdvisoryLocks::new();
    t.set(F, 1, &wr(1, 0, 9)).unwrap();
    t.set(F, 1, &ex(1)).unwrap();
    assert_eq!(t.count(), 2);
    // An fcntl unlock leaves the flock lock, and the other way round.
    t.set(F, 1, &un(1, 0, EOF)).unwrap();
    assert_eq!(t.get(F, 2, &sh(1)), Some(ex(1)));
    t.set(F, 1, &rd(1, 0, 9)).unwrap();
    t.set(F, 1, &flock_un(1)).unwrap();
    assert_eq!(ranges(&t, F), vec![(1, 1, FlockKind::Read, 0, 9)]);
    assert_eq!(t.count(), 1);
}

#[test]
fn release_removes_one_owners_family_on_one_file() {
    let mut t = AdvisoryLocks::new();
    t.set(F, 1, &wr(1, 0, 9)).unwrap();
    t.set(F, 1, &wr(1, 20, 29)).unwrap();
    t.set(F, 1, &sh(1)).unwrap();
    t.set(F, 1, &wr(2, 10, 19)).unwrap(); // another owner, same client
    t.set(F, 2, &rd(1, 30, 39)).unwrap(); // same owner number, another client
    t.set(G, 1, &wr(1, 0, 9)).unwrap(); // another file
    t.release(F, 1, 1, false);
    assert_eq!(ranges(&t, F), vec![(1, 2, FlockKind::Write, 10, 19), (2, 1, FlockKind::Read, 30, 39)]);
    assert_eq!(t.get(F, 2, &sh(2)), None, "flock lock still there, shared");
    assert_eq!(t.get(F, 2, &ex(2)), Some(sh(1)));
    assert_eq!(ranges(&t, G).len(), 1);
    t.release(F, 1, 1, true);
    assert_eq!(t.get(F, 2, &ex(2)), None);
    assert_eq!(t.count(), 3);
    // Releasing what is not there is harmless.
    t.release(F, 9, 9, false);
    t.release(Fid::new(1, 2, 3), 1, 1, true);
    t.release(F, 1, 2, false);
    t.release(F, 2, 1, false);
    assert!(!t.files.contains_key(&F), "an emptied file's entry is removed");
    assert_eq!(t.count(), 1);
}

#[test]
fn drop_client_removes_everything_it_held() {
    let mut t = AdvisoryLocks::new();
    t.set(F, 1, &wr(1, 0, 9)).unwrap();
    t.set(F, 1, &rd(2, 20, 29)).unwrap();
    t.set(F, 1, &sh(1)).unwrap();
    t.set(G, 1, &ex(3)).unwrap();
    t.set(F, 2, &rd(1, 20, 29)).unwrap();
    assert_eq!(t.set(F, 2, &wr(1, 0, 0)), Err(Conflict(wr(1, 0, 9))));
    t.drop_client(1);
    assert_eq!(t.count(), 1);
    assert!(!t.files.contains_key(&G));
    t.set(F, 2, &wr(1, 0, 9)).unwrap();
    t.set(G, 2, &ex(1)).unwrap();
    t.drop_client(2);
    t.drop_client(3);
    assert_eq!(t.count(), 0);
    assert!(t.files.is_empty());
}

#[test]
fn unlock_never_fails_and_empties_the_table() {
    let mut t = AdvisoryLocks::new();
    assert_eq!(t.set(F, 1, &un(1, 0, EOF)), Ok(()));
    assert_eq!(t.set(F, 1, &flock_un(1)), Ok(()));
    t.set(F, 2, &wr(1, 0, EOF)).unwrap();
    t.set(F, 2, &ex(1)).unwrap();
    assert_eq!(t.set(F, 1, &un(1, 0, EOF)), Ok(()), "another owner's locks are not in the way");
    t.set(F, 2, &un(1, 0, EOF)).unwrap();
    t.set(F, 2, &flock_un(1)).unwrap();
    assert_eq!(t.count(), 0);
    assert!(t.files.is_empty());
}

// ---------------------------------------------------------------------------------------
// Model check: random operation sequences against a naive per-byte model.
// ---------------------------------------------------------------------------------------

/// Bytes the model tracks: 0..=15 one each, and [`TAIL`] for "16 to EOF".
const BYTES: usize = 17;
const TAIL: usize = 16;
const CLIENTS: u64 = 3;
const OWNERS: u64 = 2;
const HOLDERS: usize = (CLIENTS * OWNERS) as usize;
const FIDS: [Fid; 2] = [F, G];

/// xorshift64*, enough randomness for generating cases and reproducible from a seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Holder index in the model of (client, owner); clients are 1..=3, owners 1..=2 (the same
/// owner numbers on every client, so that only the client tells them apart).
fn holder(client: u64, owner: u64) -> usize {
    ((client - 1) * OWNERS + (owner - 1)) as usize
}
fn client_owner(h: usize) -> (u64, u64) {
    (h as u64 / OWNERS + 1, h as u64 % OWNERS + 1)
}

/// The model byte range of an inclusive range drawn from [`random_range`].
fn bytes(start: u64, end: u64) -> std::ops::RangeInclusive<usize> {
    start as usize..=if end == EOF { TAIL } else { end as usize }
}

/// Converts a byte index back to a range end.
fn end_of(byte: usize) -> u64 {
    if byte == TAIL {
        EOF
    } else {
        byte as u64
    }
}

/// A range in the model's terms: starts anywhere in 0..=16, ends in start..=15 or at EOF
/// (an end of 16 or more other than EOF would cut the "16 to EOF" byte in two).
fn random_range(rng: &mut Rng) -> (u64, u64) {
    let start = rng.below(BYTES as u64);
    if start as usize == TAIL || rng.below(4) == 0 {
        return (start, EOF);
    }
    let end = start + rng.below(TAIL as u64 - start);
    (start, end)
}

/// The model's own compatibility rule, written apart from [`Mode::conflicts`] so that a
/// mistake there shows: only two readers may share.
fn model_conflict(want: Mode, held: Mode) -> bool {
    !(want == Mode::Read && held == Mode::Read)
}

/// The naive model of one file: what every holder holds on every byte, and its flock lock.
#[derive(Clone, Default)]
struct Model {
    bytes: [[Option<(Mode, u32)>; HOLDERS]; BYTES],
    whole: [Option<(Mode, u32)>; HOLDERS],
}

impl Model {
    /// A holder's fcntl locks as Linux would list them: maximal runs of bytes held in one
    /// kind, as (start, end, mode, pid).
    fn runs(&self, h: usize) -> Vec<(u64, u64, Mode, u32)> {
        let mut runs: Vec<(u64, u64, Mode, u32)> = Vec::new();
        for b in 0..BYTES {
            match (self.bytes[b][h], runs.last_mut()) {
                (Some((mode, pid)), Some(last)) if last.2 == mode && last.1 + 1 == b as u64 => {
                    assert_eq!(last.3, pid, "model: one run, one pid");
                    last.1 = b as u64;
                }
                (Some((mode, pid)), _) => runs.push((b as u64, b as u64, mode, pid)),
                (None, _) => {}
            }
        }
        runs.into_iter().map(|(s, e, m, p)| (s, end_of(e as usize), m, p)).collect()
    }

    /// Every fcntl lock as (client, owner, mode, start, end, pid), in report order.
    fn all_ranges(&self) -> Vec<(u64, u64, Mode, u64, u64, u32)> {
        let mut all = Vec::new();
        for h in 0..HOLDERS {
            let (c, o) = client_owner(h);
            all.extend(self.runs(h).into_iter().map(|(s, e, m, p)| (c, o, m, s, e, p)));
        }
        all.sort_by_key(|&(c, o, _, s, _, _)| (s, c, o));
        all
    }

    fn is_empty(&self) -> bool {
        self.bytes.iter().flatten().chain(self.whole.iter()).all(Option::is_none)
    }

    fn count(&self) -> usize {
        self.all_ranges().len() + self.whole.iter().flatten().count()
    }

    /// The locks of `client`, both families.
    fn count_of(&self, client: u64) -> usize {
        (1..=OWNERS).map(|o| holder(client, o)).map(|h| self.runs(h).len() + usize::from(self.whole[h].is_some())).sum()
    }

    /// What get must answer, worked out from scratch: the conflicting run of another
    /// holder with the lowest (start, client, owner).
    fn conflict(&self, me: usize, lock: &FlockSpec) -> Option<FlockSpec> {
        let want = Mode::of(lock.kind)?;
        if lock.flock {
            return (0..HOLDERS).filter(|&h| h != me).find_map(|h| {
                let (mode, pid) = self.whole[h]?;
                model_conflict(want, mode).then(|| {
                    let (_, owner) = client_owner(h);
                    FlockSpec { owner, kind: mode.kind(), start: 0, end: EOF, pid, flock: true }
                })
            });
        }
        let wanted = bytes(lock.start, lock.end);
        self.all_ranges()
            .into_iter()
            .filter(|&(c, o, mode, s, e, _)| {
                holder(c, o) != me && model_conflict(want, mode) && bytes(s, e).any(|b| wanted.contains(&b))
            })
            .map(|(_, owner, mode, start, end, pid)| FlockSpec {
                owner,
                kind: mode.kind(),
                start,
                end,
                pid,
                flock: false,
            })
            .next()
    }

    /// What set must do, byte by byte.
    fn set(&mut self, me: usize, lock: &FlockSpec) -> Result<(), FlockSpec> {
        if let Some(conflict) = self.conflict(me, lock) {
            return Err(conflict);
        }
        let mode = Mode::of(lock.kind);
        if lock.flock {
            self.whole[me] = mode.map(|m| (m, lock.pid));
            return Ok(());
        }
        let range = bytes(lock.start, lock.end);
        for b in range.clone() {
            self.bytes[b][me] = mode.map(|m| (m, lock.pid));
        }
        // The lock grows over the same-kind bytes it touches; all of it takes the new pid.
        if let Some(m) = mode {
            let same = |x: Option<(Mode, u32)>| x.is_some_and(|(xm, _)| xm == m);
            let mut b = *range.start();
            while b > 0 && same(self.bytes[b - 1][me]) {
                b -= 1;
                self.bytes[b][me] = Some((m, lock.pid));
            }
            let mut b = *range.end();
            while b + 1 < BYTES && same(self.bytes[b + 1][me]) {
                b += 1;
                self.bytes[b][me] = Some((m, lock.pid));
            }
        }
        Ok(())
    }

    fn release(&mut self, me: usize, flock: bool) {
        if flock {
            self.whole[me] = None;
        } else {
            for byte in &mut self.bytes {
                byte[me] = None;
            }
        }
    }

    fn drop_client(&mut self, client: u64) {
        for owner in 1..=OWNERS {
            self.release(holder(client, owner), true);
            self.release(holder(client, owner), false);
        }
    }
}

/// Checks the table holds exactly what the models say, lock by lock, and no empty entry.
fn check_state(t: &AdvisoryLocks, models: &[Model], context: &str) {
    let mut total = 0;
    for (fid, model) in FIDS.iter().zip(models) {
        total += model.count();
        let Some(file) = t.files.get(fid) else {
            assert!(model.is_empty(), "{context}: {fid} lost its locks");
            continue;
        };
        assert!(!model.is_empty(), "{context}: {fid} kept an empty entry");
        let got: Vec<_> = file.ranges.iter().map(|l| (l.client, l.owner, l.mode, l.start, l.end, l.pid)).collect();
        assert_eq!(got, model.all_ranges(), "{context}: fcntl locks of {fid}");
        let mut want_whole = Vec::new();
        for (h, held) in model.whole.iter().enumerate() {
            if let Some((mode, pid)) = *held {
                let (client, owner) = client_owner(h);
                want_whole.push(WholeLock { client, owner, mode, pid });
            }
        }
        assert_eq!(file.whole, want_whole, "{context}: flock locks of {fid}");
    }
    assert_eq!(t.files.len(), models.iter().filter(|m| !m.is_empty()).count(), "{context}: stray files");
    assert_eq!(t.count(), total, "{context}: count");
}

/// The bound the odd sequences of [`model_check`] run under: small enough to be met often
/// with three clients, two owners and two files.
const MODEL_BOUND: usize = 3;

#[test]
fn model_check() {
    const SEQUENCES: u64 = 20_000;
    const OPS: usize = 30;
    let (mut sets, mut refused, mut bounded) = (0u64, 0u64, 0u64);
    for seed in 0..SEQUENCES {
        let mut rng = Rng::new(seed);
        // Half the sequences under a small bound, the other half under the real one.
        let bound = if seed % 2 == 1 { MODEL_BOUND } else { crate::limits::ADVISORY_LOCKS_PER_CLIENT_MAX };
        let mut t = AdvisoryLocks::with_bound(bound);
        let mut models = vec![Model::default(); FIDS.len()];
        for op in 0..OPS {
            let f = rng.below(FIDS.len() as u64) as usize;
            let fid = FIDS[f];
            let client = 1 + rng.below(CLIENTS);
            let owner = 1 + rng.below(OWNERS);
            let me = holder(client, owner);
            let kind = match rng.below(3) {
                0 => FlockKind::Read,
                1 => FlockKind::Write,
                _ => FlockKind::Unlock,
            };
            // Mostly fcntl, where the interesting cases are; flock often enough to mix.
            let flock = rng.below(5) == 0;
            let (start, end) = random_range(&mut rng);
            let pid = rng.below(4) as u32; // few pids, so that equal and unequal both occur
            let lock = FlockSpec { owner, kind, start, end, pid, flock };
            let context = format!("seed {seed} op {op}");
            match rng.below(10) {
                0..=5 if bound != MODEL_BOUND => {
                    let want = models[f].set(me, &lock);
                    sets += 1;
                    refused += u64::from(want.is_err());
                    assert_eq!(
                        t.set(fid, client, &lock),
                        want.map_err(Conflict),
                        "{context}: set {lock:?} by client {client}"
                    );
                }
                0..=5 => {
                    let held: usize = models.iter().map(|m| m.count_of(client)).sum();
                    let mut model = models[f].clone();
                    let want = model.set(me, &lock);
                    sets += 1;
                    refused += u64::from(want.is_err());
                    let after = held - models[f].count_of(client) + model.count_of(client);
                    let got = t.set(fid, client, &lock);
                    if want.is_ok() && after > held && after > bound {
                        bounded += 1;
                        assert!(
                            matches!(&got, Err(NoLocks(e)) if e.code == weft_proto::ErrorCode::NoLocks),
                            "{context}: set {lock:?} by client {client} holding {held} of {bound}: {got:?}"
                        );
                        assert_eq!(t.held(client), held, "{context}: a refused set changed nothing");
                    } else {
                        assert_eq!(got, want.map_err(Conflict), "{context}: set {lock:?} by client {client}");
                        models[f] = model;
                    }
                    let held_now: usize = models.iter().map(|m| m.count_of(client)).sum();
                    assert_eq!(t.held(client), held_now, "{context}: locks of client {client}");
                }
                6 | 7 => {
                    let want = models[f].conflict(me, &lock);
                    assert_eq!(t.get(fid, client, &lock), want, "{context}: get {lock:?} by client {client}");
                }
                8 => {
                    models[f].release(me, flock);
                    t.release(fid, client, owner, flock);
                }
                _ => {
                    if rng.below(4) == 0 {
                        for model in &mut models {
                            model.drop_client(client);
                        }
                        t.drop_client(client);
                    }
                }
            }
            check_state(&t, &models, &context);
        }
    }
    // The generator must exercise both outcomes of set, or the check proves little.
    assert!(refused > sets / 20 && refused < sets / 2, "{refused} of {sets} sets refused");
    // And the bound must be met often in the bounded half.
    assert!(bounded > sets / 100, "{bounded} of {sets} sets past the bound");
}

// ---------------------------------------------------------------------------------------
// The bound on a client's locks.
// ---------------------------------------------------------------------------------------

/// Takes `n` separate fcntl read locks for client 1 on `fid` (bytes 0, 2, 4, ...).
fn take(t: &mut AdvisoryLocks, fid: Fid, n: u64) {
    for i in 0..n {
        t.set(fid, 1, &rd(1, 2 * i, 2 * i)).unwrap();
    }
}

#[test]
fn a_client_takes_locks_up_to_its_bound_over_all_files() {
    let mut t = AdvisoryLocks::with_bound(4);
    take(&mut t, F, 2);
    t.set(G, 1, &ex(1)).unwrap(); // one below
    t.set(G, 1, &rd(2, 0, 0)).unwrap(); // at the bound
    assert_eq!(t.held(1), 4);
    let err = t.set(F, 1, &rd(1, 100, 100)).unwrap_err();
    let Refused::NoLocks(e) = err else { panic!("{err:?}") };
    assert_eq!(e.code, ErrorCode::NoLocks);
    assert!(e.message.contains("bound of 4"), "{}", e.message);
    assert_eq!(ranges(&t, F).len(), 2, "nothing changed");
    assert_eq!((t.held(1), t.count()), (4, 4));
    // Other clients are not bounded by client 1's locks.
    t.set(F, 2, &rd(1, 100, 100)).unwrap();
    assert_eq!(t.held(2), 1);
}

#[test]
fn at_the_bound_what_adds_no_lock_still_succeeds() {
    let mut t = AdvisoryLocks::with_bound(2);
    take(&mut t, F, 2);
    // A merge with a lock held, a conversion in place, an unlock at an end: no lock more.
    t.set(F, 1, &rd(1, 1, 1)).unwrap();
    assert_eq!(t.held(1), 1);
    t.set(F, 1, &rd(1, 10, 10)).unwrap();
    t.set(F, 1, &wr(1, 10, 10)).unwrap();
    assert_eq!(t.held(1), 2);
    // A split would make three: refused, and the lock stays whole.
    let before = ranges(&t, F);
    assert!(matches!(t.set(F, 1, &un(1, 1, 1)), Err(NoLocks(_))));
    assert_eq!(ranges(&t, F), before);
    // An unlock at an end shrinks the lock: no lock more.
    t.set(F, 1, &un(1, 0, 0)).unwrap();
    assert_eq!(t.held(1), 2);
    // A flock conversion in place is no new lock either.
    let mut t = AdvisoryLocks::with_bound(1);
    t.set(F, 1, &sh(1)).unwrap();
    t.set(F, 1, &ex(1)).unwrap();
    assert!(matches!(t.set(G, 1, &sh(1)), Err(NoLocks(_))));
}

#[test]
fn a_release_or_an_eviction_makes_room_again() {
    let mut t = AdvisoryLocks::with_bound(3);
    take(&mut t, F, 3);
    assert!(matches!(t.set(G, 1, &sh(1)), Err(NoLocks(_))));
    t.set(F, 1, &un(1, 0, 0)).unwrap();
    t.set(G, 1, &sh(1)).unwrap();
    assert!(matches!(t.set(G, 1, &wr(1, 50, 60)), Err(NoLocks(_))));
    t.release(F, 1, 1, false);
    assert_eq!(t.held(1), 1);
    t.set(G, 1, &wr(1, 50, 60)).unwrap();
    t.drop_client(1);
    assert_eq!(t.held(1), 0);
    take(&mut t, F, 3);
}

/// What a client keeps of its own locks to replay them (`AdvisoryLocks::held_by`).
#[path = "advisory_held_tests.rs"]
mod held;
