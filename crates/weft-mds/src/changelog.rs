//! The MDT's changelog (Lustre's): every change to the namespace and to attributes, recorded
//! in the batch that commits the change (so durably and in commit order), numbered from 1.
//! Records are written only while a reader is registered (`changelog_register`); each
//! reader clears what it has processed, and records every reader cleared are removed in the
//! background ([`crate::background`]), a batch at a time. The ops are in `ops/changelog.rs`,
//! the rows in `store.rs` and `schema.rs`.
//!
//! A reader that stops clearing holds every record since; past
//! [`CHANGELOG_IDLE_RECORDS_WARN`] records the MDS says so in its log, and `changelog_users`
//! shows each reader's last cleared record and idle time (as Lustre's).

use crate::limits::CHANGELOG_IDLE_RECORDS_WARN;
use crate::store::Tables;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use weft_proto::msg::changelog::{ChangelogType, CHANGELOG_MASK_DEFAULT};
use weft_proto::WeftResult;

/// What every mutation asks before it records (kept in memory: a check costs two atomic
/// loads, nothing while no reader is registered).
pub struct State {
    /// A reader is registered.
    on: AtomicBool,
    /// The types recorded (bits of [`ChangelogType::bit`]).
    mask: AtomicU32,
    /// Records may wait for removal (a reader cleared, or left).
    purge: AtomicBool,
    /// When the MDS last warned of a reader holding too many records (unix seconds).
    pub(crate) warned_at: AtomicU64,
}

impl State {
    /// The state of an MDT whose committed tables are `view`.
    pub fn load(view: &Tables) -> WeftResult<State> {
        let on = !view.changelog_users()?.is_empty();
        Ok(State {
            on: AtomicBool::new(on),
            mask: AtomicU32::new(CHANGELOG_MASK_DEFAULT),
            purge: AtomicBool::new(true),
            warned_at: AtomicU64::new(0),
        })
    }

    /// Whether a change of `kind` is recorded now.
    pub fn records(&self, kind: ChangelogType) -> bool {
        self.on.load(Ordering::Relaxed) && self.mask.load(Ordering::Relaxed) & kind.bit() != 0
    }

    pub fn mask(&self) -> u32 {
        self.mask.load(Ordering::Relaxed)
    }

    pub fn set_mask(&self, mask: u32) {
        self.mask.store(mask, Ordering::Relaxed);
    }

    /// Readers were registered or deregistered: `any` is whether one is left.
    pub(crate) fn set_on(&self, any: bool) {
        self.on.store(any, Ordering::Relaxed);
    }

    pub(crate) fn want_purge(&self) {
        self.purge.store(true, Ordering::Relaxed);
    }

    /// True once after [`State::want_purge`].
    pub(crate) fn take_purge(&self) -> bool {
        self.purge.swap(false, Ordering::Relaxed)
    }
}

/// The last record every reader cleared (all of them when no reader is left), and the
/// reader furthest behind with how many records it holds, when that is past the warning.
pub fn purge_point(t: &Tables) -> WeftResult<(u64, Option<(String, u64)>)> {
    let users = t.changelog_users()?;
    let last = t.changelog_next()?.saturating_sub(1);
    let Some((number, slowest)) = users.iter().min_by_key(|(_, u)| u.cleared) else {
        return Ok((last, None));
    };
    let held = last.saturating_sub(slowest.cleared);
    let warn = (held >= CHANGELOG_IDLE_RECORDS_WARN).then(|| (slowest.id(*number), held));
    Ok((slowest.cleared, warn))
}
