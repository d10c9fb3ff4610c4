//! The lock protocol (Lustre's LDLM, in Weft's words): what a client asks a target for, what
//! it is granted, and the callbacks a target sends back when someone else needs the lock.
//!
//! Two kinds of locks guard two kinds of caches:
//!
//! * **extent locks** on OST objects, a byte range in a mode, guard a client's cached pages
//!   and its queued writes of that object;
//! * **inode-bit locks** on MDT inodes ([`bits`]: lookup, update, layout, open) guard the
//!   names, attributes and layouts a client caches.
//!
//! Locks of one owner (one client instance) never conflict with each other: within one
//! client the kernel keeps one page cache and one attribute cache, so only other clients can
//! make its caches stale.
//!
//! The state machine that decides grants lives in the `weft-dlm` crate; this module holds
//! only the values that cross the wire.

use crate::fid::Fid;
use serde::{Deserialize, Serialize};

/// Identifies a granted lock within one target. Assigned by the target, never reused while
/// the target runs.
pub type LockHandle = u64;

/// Lock modes, a subset of Lustre's: protected read, protected write, exclusive.
/// PR is compatible with PR; every other pair conflicts (between different owners).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum LockMode {
    /// Protected read: readers may cache; nobody else writes.
    Pr,
    /// Protected write: this owner may write and cache; nobody else reads or writes.
    Pw,
    /// Exclusive: taken by a target on behalf of a metadata change.
    Ex,
}

impl LockMode {
    /// Whether two locks of different owners in these modes may be granted at once.
    pub fn compatible(self, other: LockMode) -> bool {
        matches!((self, other), (LockMode::Pr, LockMode::Pr))
    }

    /// Whether a lock held in `self` lets its owner do what `wanted` would.
    pub fn covers(self, wanted: LockMode) -> bool {
        self >= wanted
    }
}

/// A byte range of an object, both ends included. `end == EXTENT_EOF` reaches any size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Extent {
    pub start: u64,
    pub end: u64,
}

pub const EXTENT_EOF: u64 = u64::MAX;

impl Extent {
    pub const WHOLE: Extent = Extent { start: 0, end: EXTENT_EOF };

    /// The extent of `len > 0` bytes at `offset`.
    pub fn of(offset: u64, len: u64) -> Extent {
        Extent { start: offset, end: offset.saturating_add(len.max(1) - 1) }
    }

    /// Widened outward to whole pages of `page` bytes (a power of two): a client caches
    /// pages, so a lock must cover every byte of each page it caches.
    pub fn page_aligned(self, page: u64) -> Extent {
        let start = self.start & !(page - 1);
        let end = match self.end.checked_add(1) {
            Some(e) => e.checked_next_multiple_of(page).map(|e| e - 1).unwrap_or(EXTENT_EOF),
            None => EXTENT_EOF,
        };
        Extent { start, end }
    }

    pub fn overlaps(&self, other: &Extent) -> bool {
        self.start <= other.end && other.start <= self.end
    }

    pub fn contains(&self, other: &Extent) -> bool {
        self.start <= other.start && other.end <= self.end
    }
}

/// Inode-bit lock bits (Lustre's MDS_INODELOCK_*). Two inode-bit locks conflict only if
/// their bit sets intersect (and their modes and owners conflict).
pub mod bits {
    /// The names (dentries) that lead to this inode, and permission to walk through it.
    pub const LOOKUP: u8 = 1;
    /// Attributes: mode, owner, times, link count, size when the MDS knows it.
    pub const UPDATE: u8 = 2;
    /// The file's layout.
    pub const LAYOUT: u8 = 4;
    /// An open of the file.
    pub const OPEN: u8 = 8;
    pub const ALL: u8 = LOOKUP | UPDATE | LAYOUT | OPEN;
    /// A directory whose entries a client's metadata write-back cache changes (protocol
    /// 25): only in [`super::WBC_LOCK_BITS`].
    pub const WBC: u8 = 16;
}

/// What the write-back cache's exclusive lock on a directory covers: every bit, so that any
/// other client's lock on the directory (its names, attributes, a change in it) calls it
/// back, and [`bits::WBC`], which the MDT's reads in such a directory take too.
pub const WBC_LOCK_BITS: u8 = bits::ALL | bits::WBC;

/// What a lock covers on its resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LockScope {
    /// A byte range of an OST object.
    Extent(Extent),
    /// Inode bits of an MDT inode.
    Bits(u8),
}

impl LockScope {
    /// Whether two scopes on one resource touch the same thing.
    pub fn intersects(&self, other: &LockScope) -> bool {
        match (self, other) {
            (LockScope::Extent(a), LockScope::Extent(b)) => a.overlaps(b),
            (LockScope::Bits(a), LockScope::Bits(b)) => a & b != 0,
            // A resource is either an object or an inode; mixing is a caller bug, and
            // treating it as a conflict is the safe answer.
            _ => true,
        }
    }

    /// Whether `self` covers all of `other`.
    pub fn contains(&self, other: &LockScope) -> bool {
        match (self, other) {
            (LockScope::Extent(a), LockScope::Extent(b)) => a.contains(b),
            (LockScope::Bits(a), LockScope::Bits(b)) => a & b == *b,
            _ => false,
        }
    }
}

/// A lock as granted: the handle to cancel it by, and what it covers (an extent lock may be
/// granted wider than asked when nobody else wants the rest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockGrant {
    pub handle: LockHandle,
    pub resource: Fid,
    pub mode: LockMode,
    pub scope: LockScope,
}

/// Which target a lock request goes to: inode-bit locks live on MDTs, extent locks on OSTs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum LockTarget {
    Mdt(u32),
    Ost(u32),
}

impl LockTarget {
    /// The lock namespace of a target of the cluster map.
    pub fn of(kind: crate::msg::target::TargetKind, index: u32) -> LockTarget {
        match kind {
            crate::msg::target::TargetKind::Mdt => LockTarget::Mdt(index),
            crate::msg::target::TargetKind::Ost => LockTarget::Ost(index),
        }
    }

    /// The cluster map's name of the target whose namespace this is.
    pub fn target(self) -> (crate::msg::target::TargetKind, u32) {
        match self {
            LockTarget::Mdt(i) => (crate::msg::target::TargetKind::Mdt, i),
            LockTarget::Ost(i) => (crate::msg::target::TargetKind::Ost, i),
        }
    }
}

/// POSIX advisory lock kinds (fcntl F_RDLCK / F_WRLCK / F_UNLCK; flock LOCK_SH / LOCK_EX / LOCK_UN).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FlockKind {
    Read,
    Write,
    Unlock,
}

/// One advisory lock request or holder. `owner` is the kernel's lock owner (per open file
/// description for flock, per process's files for fcntl), unique within one client; a lock
/// belongs to (client, owner). Range ends are inclusive; `flock` locks cover the whole file
/// and never conflict with fcntl locks (as on Linux).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlockSpec {
    pub owner: u64,
    pub kind: FlockKind,
    pub start: u64,
    pub end: u64,
    pub pid: u32,
    pub flock: bool,
}

/// Every operation of a target's lock manager (see [`mdt_ops!`](crate::mdt_ops) for the
/// list's form).
#[macro_export]
macro_rules! ldlm_ops {
    ($then:ident) => {
        $then! {
            LdlmRequest / LdlmReply;
            /// Asks for a lock; answered when granted (after the target called back
            /// conflicting holders).
            write Enqueue {
                resource: $crate::Fid,
                mode: $crate::lock::LockMode,
                scope: $crate::lock::LockScope,
            } -> $crate::lock::LockGrant = "ldlm_enqueue";
            /// Gives locks back.
            write Cancel { handles: Vec<$crate::lock::LockHandle> } -> () = "ldlm_cancel";
            /// Sets or removes an advisory lock without waiting: when another owner holds a
            /// conflicting one the answer names it (EAGAIN would be resent by the transport).
            write FlockSet { fid: $crate::Fid, lock: $crate::lock::FlockSpec } -> $crate::lock::FlockOutcome = "ldlm_flock_set";
            /// F_GETLK: the first lock that would conflict with `lock`, if any.
            read FlockGet { fid: $crate::Fid, lock: $crate::lock::FlockSpec }
                -> Option<$crate::lock::FlockSpec> = "ldlm_flock_get";
            /// Removes every advisory lock this client's `owner` holds on `fid` (close of a file).
            write FlockRelease { fid: $crate::Fid, owner: u64, flock: bool } -> $crate::lock::FlockOutcome = "ldlm_flock_release";
            /// Lock replay: the locks this client held from the target's previous server (a
            /// replicated MDT's old leader), asked to be kept under the same handles. Taken
            /// only during the new server's recovery window; answers the handles kept (the
            /// others are refused: forget them and what they guarded).
            write Replay { locks: Vec<$crate::lock::LockGrant> } -> $crate::lock::Replayed = "ldlm_replay";
            /// Advisory lock replay: every lock this client holds, for each (file, owner,
            /// family) it names, from the MDT's previous server. Each replaces what the
            /// server has of that (file, owner, family), so a replay sent twice, or after a
            /// release, leaves what the client holds now. Set and get requests wait out the
            /// new server's recovery window, so inside it nothing conflicts; a replay that
            /// conflicts later is refused for that (file, owner, family), named in the answer.
            write FlockReplay { held: Vec<$crate::lock::FlockHeld> } -> $crate::lock::FlockReplayed = "ldlm_flock_replay";
            /// The client leaves (unmount): the target drops its locks and forgets it, so
            /// that no recovery window after its server's death waits for it.
            write Disconnect {} -> () = "ldlm_disconnect";
        }
    };
}

use crate::define_ops;
crate::ldlm_ops!(define_ops);

crate::define_replies! {
    /// A lock manager's answers.
    LdlmReply {
        Granted(LockGrant),
        Cancelled = (),
        /// FlockSet or FlockRelease took effect.
        FlockDone,
        /// FlockSet could not, or FlockGet found: the conflicting lock (None = no conflict).
        FlockConflict(Option<FlockSpec>),
        Replayed(Replayed),
        FlockReplayed(FlockReplayed),
    }
}

/// The advisory locks one owner of a client holds on one file in one family (`flock`):
/// what [`FlockReplay`] carries. Empty `locks`: it holds none there now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlockHeld {
    pub fid: Fid,
    pub owner: u64,
    pub flock: bool,
    pub locks: Vec<FlockSpec>,
}

/// What an advisory lock replay refused (another client holds a conflicting lock): those
/// locks are lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct FlockReplayed {
    pub refused: Vec<FlockHeld>,
}

/// What a lock replay kept: the handles of the locks the target holds for the client again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Replayed {
    pub kept: Vec<LockHandle>,
}

/// What FlockSet and FlockRelease answer: done, or the lock in the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlockOutcome {
    Done,
    Conflict(Option<FlockSpec>),
}

impl crate::msg::ops::Payload<LdlmReply> for FlockOutcome {
    fn from_reply(reply: LdlmReply) -> Result<Self, LdlmReply> {
        match reply {
            LdlmReply::FlockDone => Ok(FlockOutcome::Done),
            LdlmReply::FlockConflict(holder) => Ok(FlockOutcome::Conflict(holder)),
            other => Err(other),
        }
    }
    fn into_reply(self) -> LdlmReply {
        match self {
            FlockOutcome::Done => LdlmReply::FlockDone,
            FlockOutcome::Conflict(holder) => LdlmReply::FlockConflict(holder),
        }
    }
}

/// Server to client, in a Callback frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CallbackRequest {
    /// Someone needs `wanted` on this resource, which conflicts with the lock `handle` this
    /// client holds: flush what the lock protects, drop the caches it guards, and answer
    /// (release, or keep a part that does not conflict).
    Blocking { target: LockTarget, handle: LockHandle, resource: Fid, wanted: LockScope },
    /// Someone asks the size of this object: write out what is queued for it, then answer.
    Glimpse { target: LockTarget, resource: Fid },
}

/// Client to server, in a CallbackReply frame (as `Result<CallbackAnswer, WeftError>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CallbackAnswer {
    /// The lock is given back.
    Released,
    /// The lock is kept with this narrower scope, which no longer conflicts (an inode-bit
    /// lock that drops the bits the other side needs: Lustre's lock convert).
    Narrowed(LockScope),
    /// Glimpse done: the object holds everything this client wrote to it.
    Flushed,
    /// The client does not hold this lock (already cancelled): nothing to do.
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes() {
        assert!(LockMode::Pr.compatible(LockMode::Pr));
        for (a, b) in [(LockMode::Pr, LockMode::Pw), (LockMode::Pw, LockMode::Pw), (LockMode::Ex, LockMode::Pr)] {
            assert!(!a.compatible(b) && !b.compatible(a));
        }
        assert!(LockMode::Pw.covers(LockMode::Pr));
        assert!(!LockMode::Pr.covers(LockMode::Pw));
    }

    #[test]
    fn extents() {
        let e = Extent::of(47_008, 47_008).page_aligned(4096);
        assert_eq!(e, Extent { start: 45_056, end: 94_207 });
        assert_eq!(Extent { start: 5, end: EXTENT_EOF }.page_aligned(4096), Extent { start: 0, end: EXTENT_EOF });
        assert_eq!(Extent { start: 0, end: u64::MAX - 1 }.page_aligned(4096).end, EXTENT_EOF);
        assert!(Extent::of(0, 10).overlaps(&Extent::of(9, 1)));
        assert!(!Extent::of(0, 10).overlaps(&Extent::of(10, 1)));
        assert!(Extent::WHOLE.contains(&Extent::of(7, 100)));
        assert!(LockScope::Bits(bits::LOOKUP | bits::UPDATE).contains(&LockScope::Bits(bits::UPDATE)));
        assert!(!LockScope::Bits(bits::LOOKUP).intersects(&LockScope::Bits(bits::UPDATE)));
    }
}
