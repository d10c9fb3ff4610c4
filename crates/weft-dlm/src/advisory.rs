//! POSIX advisory locks (fcntl byte ranges and flock), kept by the metadata server so that
//! they are coherent across client machines.
//!
//! A kernel keeps advisory locks per machine; two clients of one file system would never see
//! each other's locks. So a Weft client forwards every F_SETLK, F_SETLKW, F_GETLK and flock(2)
//! to the MDS, which decides them here. This module is pure logic: no I/O, no clock, no
//! waiting.
//!
//! # Owners
//!
//! A lock belongs to `(client, owner)`: the client's id plus the kernel's lock owner within
//! that client (`FlockSpec::owner`; per open file description for flock, per process's file
//! table for fcntl). Owner numbers of different clients are unrelated: owner 7 of client 1
//! and owner 7 of client 2 are strangers whose locks conflict.
//!
//! # Two families
//!
//! As on Linux, fcntl locks (`flock: false`) and flock locks (`flock: true`) are separate
//! families: a lock of one family never conflicts with, replaces or reports a lock of the
//! other. Every call works on the family its `flock` flag names.
//!
//! # fcntl rules (byte ranges)
//!
//! * Ranges are inclusive, `end == u64::MAX` reaches end of file and beyond. A range with
//!   `start > end` covers nothing: setting it does nothing, asking about it finds nothing.
//!   (Clients turn F_SETLK's negative lengths into ordinary ranges before sending.)
//! * Read locks of different owners share; a write lock conflicts with any overlapping lock
//!   of another owner.
//! * Locks of one owner never conflict with each other. Setting a range replaces whatever
//!   that owner held on it: a read over part of a write lock converts that part, an unlock
//!   of a middle part splits a lock in two, and ranges of one kind that overlap or touch
//!   (`a.end + 1 == b.start`) merge into one lock. So an owner's locks are always the
//!   maximal runs of bytes it holds in one kind.
//! * A merged lock carries the pid of the request that made it (Linux keeps the pid of the
//!   older lock; within one fcntl owner the pid is normally the same anyway). Pieces left
//!   over by a conversion or an unlock keep the pid they had.
//!
//! # flock rules (whole file)
//!
//! * A flock lock covers the whole file: `start` and `end` of the request are ignored and
//!   reports say `0..=u64::MAX`. One owner holds at most one flock lock per file.
//! * Shared (`Read`) locks of different owners share; exclusive (`Write`) conflicts with any
//!   lock of another owner. Setting again converts between shared and exclusive.
//! * **A conversion that conflicts keeps the old lock** and reports the conflict. Linux drops
//!   the old lock first, so a failed `LOCK_EX | LOCK_NB` upgrade there leaves the file
//!   unlocked; keeping it is the safer answer for a remote holder, which would otherwise
//!   lose its lock without knowing it.
//!
//! # Conflict reports
//!
//! [`AdvisoryLocks::set`] fails and [`AdvisoryLocks::get`] answers with the *first*
//! conflicting lock, as a [`FlockSpec`] giving its kind, range and holder's pid (what
//! F_GETLK reports). "First" is deterministic: lowest `start`, then lowest
//! `(client, owner)`; for flock, lowest `(client, owner)`. The `owner` field of a report is
//! the holder's owner number, meaningful only within the holder's client.
//!
//! # A bound per client
//!
//! A client holds at most [`ADVISORY_LOCKS_PER_CLIENT_MAX`] locks over all files (an fcntl
//! lock split in two counts twice). A set that would take it past its bound is refused with
//! [`ErrorCode::NoLocks`] (ENOLCK, as POSIX says) and changes nothing; a set that does not
//! add locks (an unlock that splits nothing, a conversion in place) is never refused.
//!
//! # What this table does not do
//!
//! It never waits: F_SETLKW is built by its caller on top of [`AdvisoryLocks::set`] (retry
//! when locks are released). It does no deadlock detection. It does not know which open
//! files a client has: the caller calls [`AdvisoryLocks::release`] on close and
//! [`AdvisoryLocks::drop_client`] when a client is evicted or leaves.

use std::collections::HashMap;

use crate::limits::ADVISORY_LOCKS_PER_CLIENT_MAX;
use weft_proto::lock::{FlockKind, FlockSpec};
use weft_proto::{ErrorCode, Fid, WeftError};

/// Why [`AdvisoryLocks::set`] refused: nothing changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Another owner holds a conflicting lock: the first one (what F_GETLK reports).
    Conflict(FlockSpec),
    /// The client would hold more locks than its bound ([`ErrorCode::NoLocks`]).
    NoLocks(WeftError),
}

/// The kind of a held lock: a holder is never "unlocked", so this is [`FlockKind`] without
/// `Unlock`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// fcntl F_RDLCK, flock LOCK_SH.
    Read,
    /// fcntl F_WRLCK, flock LOCK_EX.
    Write,
}

impl Mode {
    /// The mode a request asks for; `None` for an unlock.
    fn of(kind: FlockKind) -> Option<Mode> {
        match kind {
            FlockKind::Read => Some(Mode::Read),
            FlockKind::Write => Some(Mode::Write),
            FlockKind::Unlock => None,
        }
    }

    fn kind(self) -> FlockKind {
        match self {
            Mode::Read => FlockKind::Read,
            Mode::Write => FlockKind::Write,
        }
    }

    /// Whether a lock wanted in `self` conflicts with one held in `held` by another owner.
    fn conflicts(self, held: Mode) -> bool {
        self == Mode::Write || held == Mode::Write
    }
}

/// Whether two inclusive ranges share a byte.
fn overlaps(a_start: u64, a_end: u64, b_start: u64, b_end: u64) -> bool {
    a_start <= b_end && b_start <= a_end
}

/// Whether two inclusive ranges share a byte or are adjacent (so that their union is one
/// range). `saturating_add` is exact here: a range ending at `u64::MAX` touches everything
/// after its start.
fn touches(a_start: u64, a_end: u64, b_start: u64, b_end: u64) -> bool {
    a_start <= b_end.saturating_add(1) && b_start <= a_end.saturating_add(1)
}

/// A held fcntl lock on a byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RangeLock {
    client: u64,
    owner: u64,
    mode: Mode,
    start: u64,
    /// Inclusive; `u64::MAX` = to end of file and beyond.
    end: u64,
    pid: u32,
}

impl RangeLock {
    fn spec(&self) -> FlockSpec {
        FlockSpec {
            owner: self.owner,
            kind: self.mode.kind(),
            start: self.start,
            end: self.end,
            pid: self.pid,
            flock: false,
        }
    }

    /// The order conflict reports follow: lowest start first, then lowest (client, owner).
    /// Unique, since one owner's locks never overlap.
    fn order(&self) -> (u64, u64, u64) {
        (self.start, self.client, self.owner)
    }
}

/// A held flock lock (always the whole file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WholeLock {
    client: u64,
    owner: u64,
    mode: Mode,
    pid: u32,
}

impl WholeLock {
    fn spec(&self) -> FlockSpec {
        FlockSpec { owner: self.owner, kind: self.mode.kind(), start: 0, end: u64::MAX, pid: self.pid, flock: true }
    }
}

/// The advisory locks of one file. Never kept empty in [`AdvisoryLocks::files`].
#[derive(Debug, Default, Clone)]
struct FileLocks {
    /// fcntl locks, sorted by [`RangeLock::order`].
    ranges: Vec<RangeLock>,
    /// flock locks, at most one per (client, owner), sorted by (client, owner).
    whole: Vec<WholeLock>,
}

impl FileLocks {
    fn len(&self) -> usize {
        self.ranges.len() + self.whole.len()
    }

    /// The locks of `client`, both families.
    fn count_of(&self, client: u64) -> usize {
        self.ranges.iter().filter(|l| l.client == client).count()
            + self.whole.iter().filter(|l| l.client == client).count()
    }

    /// The first lock of another owner in family `flock` that conflicts with `mode` on
    /// `start..=end` (ignored for flock).
    fn first_conflict(
        &self,
        client: u64,
        owner: u64,
        mode: Mode,
        flock: bool,
        start: u64,
        end: u64,
    ) -> Option<FlockSpec> {
        self.conflicts(|c, o| (c, o) != (client, owner), mode, flock, start, end).next().map(|(_, spec)| spec)
    }

    /// The locks in family `flock` of the (client, owner)s `others` accepts that conflict
    /// with `mode` on `start..=end` (ignored for flock), with their clients.
    fn conflicts<'a>(
        &'a self,
        others: impl Fn(u64, u64) -> bool + 'a,
        mode: Mode,
        flock: bool,
        start: u64,
        end: u64,
    ) -> Box<dyn Iterator<Item = (u64, FlockSpec)> + 'a> {
        if flock {
            Box::new(
                self.whole
                    .iter()
                    .filter(move |l| others(l.client, l.owner) && mode.conflicts(l.mode))
                    .map(|l| (l.client, l.spec())),
            )
        } else {
            Box::new(
                self.ranges
                    .iter()
                    .filter(move |l| {
                        others(l.client, l.owner) && mode.conflicts(l.mode) && overlaps(l.start, l.end, start, end)
                    })
                    .map(|l| (l.client, l.spec())),
            )
        }
    }

    /// Makes `start..=end` of (client, owner)'s fcntl locks be `mode` (`None`: unlocked),
    /// splitting, converting and merging as the module documentation says. Conflicts with
    /// other owners must have been checked already.
    fn set_range(&mut self, client: u64, owner: u64, mode: Option<Mode>, start: u64, end: u64, pid: u32) {
        // The new lock grows over every lock of the same kind it overlaps or touches.
        let (mut new_start, mut new_end) = (start, end);
        let mut kept = Vec::with_capacity(self.ranges.len() + 2);
        for l in self.ranges.drain(..) {
            if (l.client, l.owner) != (client, owner) {
                kept.push(l);
            } else if Some(l.mode) == mode && touches(l.start, l.end, start, end) {
                // Merged into the new lock. One owner's same-kind locks never touch each
                // other, so growing by the locks that touch the request is enough.
                new_start = new_start.min(l.start);
                new_end = new_end.max(l.end);
            } else if overlaps(l.start, l.end, start, end) {
                // Converted or unlocked on the overlap: keep what sticks out on either side.
                if l.start < start {
                    kept.push(RangeLock { end: start - 1, ..l });
                }
                if l.end > end {
                    kept.push(RangeLock { start: end + 1, ..l });
                }
            } else {
                kept.push(l);
            }
        }
        if let Some(mode) = mode {
            kept.push(RangeLock { client, owner, mode, start: new_start, end: new_end, pid });
        }
        kept.sort_unstable_by_key(RangeLock::order);
        self.ranges = kept;
    }

    /// Makes (client, owner)'s flock lock be `mode` (`None`: none).
    fn set_whole(&mut self, client: u64, owner: u64, mode: Option<Mode>, pid: u32) {
        let at = self.whole.binary_search_by_key(&(client, owner), |l| (l.client, l.owner));
        match (at, mode) {
            (Ok(i), Some(mode)) => self.whole[i] = WholeLock { client, owner, mode, pid },
            (Err(i), Some(mode)) => self.whole.insert(i, WholeLock { client, owner, mode, pid }),
            (Ok(i), None) => {
                self.whole.remove(i);
            }
            (Err(_), None) => {}
        }
    }
}

/// The advisory locks of every file one metadata server serves, by [`Fid`].
///
/// See the [module documentation](self) for the rules. Files without locks take no memory.
#[derive(Debug)]
pub struct AdvisoryLocks {
    /// Only files that hold at least one lock.
    files: HashMap<Fid, FileLocks>,
    /// Locks held over all files, both families (kept so that [`Self::count`] is O(1)).
    total: usize,
    /// Locks held by each client over all files; clients without locks are removed.
    per_client: HashMap<u64, usize>,
    /// The most locks a client may hold.
    per_client_max: usize,
}

impl Default for AdvisoryLocks {
    fn default() -> Self {
        Self::with_bound(ADVISORY_LOCKS_PER_CLIENT_MAX)
    }
}

impl AdvisoryLocks {
    /// An empty table, each client bounded by [`ADVISORY_LOCKS_PER_CLIENT_MAX`].
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty table whose clients may hold at most `per_client_max` locks each.
    pub fn with_bound(per_client_max: usize) -> Self {
        AdvisoryLocks { files: HashMap::new(), total: 0, per_client: HashMap::new(), per_client_max }
    }

    /// F_SETLK / flock(2) without waiting, for `client`.
    ///
    /// `Read` or `Write` sets the lock if no other owner holds a conflicting one; otherwise
    /// nothing changes and the first conflicting lock is returned (with its holder's pid).
    /// `Unlock` removes the owner's locks on the range (fcntl) or its flock lock, and fails
    /// only when it would split a lock of a client at its bound. A failed flock conversion
    /// keeps the lock the owner had. Past the client's bound: [`Refused::NoLocks`], nothing
    /// changed.
    pub fn set(&mut self, fid: Fid, client: u64, lock: &FlockSpec) -> Result<(), Refused> {
        let mode = Mode::of(lock.kind);
        if !lock.flock && lock.start > lock.end {
            return Ok(()); // An empty range: nothing to set or remove.
        }
        if mode.is_some() {
            if let Some(conflict) = self.get(fid, client, lock) {
                return Err(Refused::Conflict(conflict));
            }
        }
        let change = |file: &mut FileLocks| {
            if lock.flock {
                file.set_whole(client, lock.owner, mode, lock.pid);
            } else {
                file.set_range(client, lock.owner, mode, lock.start, lock.end, lock.pid);
            }
        };
        // A set adds at most two locks (a lock of another kind split around the new one):
        // only near the bound is the change tried on a copy first.
        let held = self.held(client);
        if held + 2 > self.per_client_max {
            let mut file = self.files.get(&fid).cloned().unwrap_or_default();
            let before = file.count_of(client);
            change(&mut file);
            let after = held - before + file.count_of(client);
            if after > held && after > self.per_client_max {
                return Err(Refused::NoLocks(WeftError::new(
                    ErrorCode::NoLocks,
                    format!(
                        "client {client} holds {held} advisory locks, and this one would take it past the bound of {}",
                        self.per_client_max
                    ),
                )));
            }
        }
        self.update(fid, client, mode.is_some(), change);
        Ok(())
    }

    /// Every lock `client` holds, by file, both families, each lock as [`FlockSpec`]: what
    /// a client keeps of its own locks to replay them to a new server.
    pub fn held_by(&self, client: u64) -> Vec<(Fid, FlockSpec)> {
        let mut held = Vec::new();
        for (fid, file) in &self.files {
            let ranges = file.ranges.iter().filter(|l| l.client == client).map(RangeLock::spec);
            let whole = file.whole.iter().filter(|l| l.client == client).map(WholeLock::spec);
            held.extend(ranges.chain(whole).map(|spec| (*fid, spec)));
        }
        held
    }

    /// The advisory locks `client` holds over all files.
    pub fn held(&self, client: u64) -> usize {
        self.per_client.get(&client).copied().unwrap_or(0)
    }

    /// F_GETLK: the first lock of another (client, owner), in the family `lock.flock` names,
    /// that conflicts with `lock`; `None` if `lock` could be set now. An `Unlock` request
    /// conflicts with nothing.
    pub fn get(&self, fid: Fid, client: u64, lock: &FlockSpec) -> Option<FlockSpec> {
        let mode = Mode::of(lock.kind)?;
        if !lock.flock && lock.start > lock.end {
            return None;
        }
        self.files.get(&fid)?.first_conflict(client, lock.owner, mode, lock.flock, lock.start, lock.end)
    }

    /// The clients (other than `client` itself) holding a lock that conflicts with `lock`:
    /// whom to check on when a request keeps finding the file locked.
    pub fn conflicting_clients(&self, fid: Fid, client: u64, lock: &FlockSpec) -> Vec<u64> {
        let Some(mode) = Mode::of(lock.kind) else { return Vec::new() };
        let Some(file) = self.files.get(&fid) else { return Vec::new() };
        let mut clients: Vec<u64> =
            file.conflicts(|c, _| c != client, mode, lock.flock, lock.start, lock.end).map(|(c, _)| c).collect();
        clients.sort_unstable();
        clients.dedup();
        clients
    }

    /// On close: removes every lock of (client, owner) on `fid` in one family (`flock`:
    /// the flock lock; otherwise all fcntl ranges). The other family is left alone.
    pub fn release(&mut self, fid: Fid, client: u64, owner: u64, flock: bool) {
        self.update(fid, client, false, |file| {
            if flock {
                file.set_whole(client, owner, None, 0);
            } else {
                file.ranges.retain(|l| (l.client, l.owner) != (client, owner));
            }
        });
    }

    /// A client evicted or gone: removes all its locks, both families, on every file.
    /// Walks every file that holds locks.
    pub fn drop_client(&mut self, client: u64) {
        let mut total = 0;
        self.files.retain(|_, file| {
            file.ranges.retain(|l| l.client != client);
            file.whole.retain(|l| l.client != client);
            total += file.len();
            file.len() > 0
        });
        self.total = total;
        self.per_client.remove(&client);
    }

    /// The number of locks held, over all files and both families. An fcntl lock split in
    /// two counts twice; merged ranges count once.
    pub fn count(&self) -> usize {
        self.total
    }

    /// Runs `change`, which changes only locks of `client`, on the locks of `fid` (created
    /// empty first if `create`, else skipped when the file holds none), then keeps
    /// [`Self::total`] and [`Self::per_client`] right and drops the file's entry if it
    /// emptied.
    fn update(&mut self, fid: Fid, client: u64, create: bool, change: impl FnOnce(&mut FileLocks)) {
        let file = match self.files.get_mut(&fid) {
            Some(file) => file,
            None if create => self.files.entry(fid).or_default(),
            None => return,
        };
        let (before, before_client) = (file.len(), file.count_of(client));
        change(file);
        let (after, after_client) = (file.len(), file.count_of(client));
        self.total = self.total - before + after;
        if after == 0 {
            self.files.remove(&fid);
        }
        let held = self.per_client.get(&client).copied().unwrap_or(0) - before_client + after_client;
        if held == 0 {
            self.per_client.remove(&client);
        } else {
            self.per_client.insert(client, held);
        }
    }
}

#[cfg(test)]
#[path = "advisory_tests.rs"]
mod tests;
