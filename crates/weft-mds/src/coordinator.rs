//! The HSM coordinator's memory (Lustre's `mdt_coordinator`): its switch (`hsm_control`),
//! the copytools (agents) heard from, and the waiting actions in arrival order.
//!
//! The actions themselves are rows of the MDT (`hsm_actions`, with an index by file), so
//! they survive a restart; the ops are in `ops/hsm.rs`. What is here is either settings or a
//! hint: the waiting list is checked against the table by whoever takes from it, and the
//! background sweep ([`crate::background`]) rebuilds it from the table every second, so a
//! batch that failed after changing it leaves nothing wrong for long.
//!
//! Nothing here reads a clock: every decision takes the time (`now`, the MDS's
//! [`crate::clock::Clock::instant`]) from its caller, so a test moves it on.
//!
//! A copytool is alive while it polls or reports: one not heard from for
//! [`HSM_AGENT_TIMEOUT_MS`] is dead, and the sweep hands its running actions out again, as
//! it does an action without progress for `active_request_timeout`. After a restart of the
//! MDS every copytool has that long to be heard from again.

use crate::limits::{HSM_ACTIVE_REQUEST_TIMEOUT_S, HSM_AGENT_TIMEOUT_MS, HSM_ENDED_KEEP_S};
use crate::store::Tables;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use weft_proto::msg::hsm::{ActionStatus, HsmControl};
use weft_proto::WeftResult;

/// Archive ids start at 1; a request without one goes to this archive unless the file has
/// one already (Lustre's `default_archive_id`).
pub const DEFAULT_ARCHIVE_ID: u32 = 1;

#[derive(Debug, Clone)]
pub struct Agent {
    /// The archives it serves; empty: every one.
    pub archive_ids: Vec<u32>,
    pub last_seen: Instant,
    pub ok: u64,
    pub errors: u64,
    /// The actions it said it runs at its last poll, and when (unix seconds).
    pub running: Vec<u64>,
    pub running_at: i64,
}

impl Agent {
    pub fn serves(&self, archive_id: u32) -> bool {
        serves(&self.archive_ids, archive_id)
    }
}

/// Whether a copytool last heard from at `last_seen` is alive at `now`.
fn alive(last_seen: Instant, now: Instant) -> bool {
    now.saturating_duration_since(last_seen) < Duration::from_millis(HSM_AGENT_TIMEOUT_MS)
}

/// Whether a copytool last heard from at `last_seen` is dead for long enough at `now` to be
/// forgotten: six times [`HSM_AGENT_TIMEOUT_MS`].
fn gone(last_seen: Instant, now: Instant) -> bool {
    now.saturating_duration_since(last_seen) >= Duration::from_millis(HSM_AGENT_TIMEOUT_MS * 6)
}

/// Whether a copytool serving `archive_ids` (empty: all) serves `archive_id`.
pub fn serves(archive_ids: &[u32], archive_id: u32) -> bool {
    archive_ids.is_empty() || archive_ids.contains(&archive_id)
}

#[derive(Default)]
struct Inner {
    /// Waiting actions: cookie -> archive id (see the module documentation: a hint).
    waiting: BTreeMap<u64, u32>,
    agents: BTreeMap<String, Agent>,
}

pub struct Coordinator {
    control: AtomicU8,
    active_request_timeout_s: AtomicU64,
    grace_delay_s: AtomicU64,
    default_archive_id: AtomicU32,
    /// When this MDS started: a copytool it never heard from counts as seen then.
    started: Instant,
    inner: Mutex<Inner>,
}

impl Coordinator {
    /// The coordinator of an MDT whose committed tables are `view`, started `now`.
    pub fn load(view: &Tables, now: Instant) -> WeftResult<Coordinator> {
        let c = Coordinator::new(now);
        c.rebuild(view)?;
        Ok(c)
    }

    /// A coordinator started `now` with nothing waiting.
    fn new(now: Instant) -> Coordinator {
        Coordinator {
            control: AtomicU8::new(HsmControl::Enabled as u8),
            active_request_timeout_s: AtomicU64::new(HSM_ACTIVE_REQUEST_TIMEOUT_S),
            grace_delay_s: AtomicU64::new(HSM_ENDED_KEEP_S),
            default_archive_id: AtomicU32::new(DEFAULT_ARCHIVE_ID),
            started: now,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn control(&self) -> HsmControl {
        match self.control.load(Ordering::Relaxed) {
            0 => HsmControl::Enabled,
            1 => HsmControl::Disabled,
            _ => HsmControl::Shutdown,
        }
    }

    pub fn set_control(&self, c: HsmControl) {
        self.control.store(c as u8, Ordering::Relaxed);
    }

    pub fn active_request_timeout(&self) -> Duration {
        Duration::from_secs(self.active_request_timeout_s.load(Ordering::Relaxed))
    }

    pub fn set_active_request_timeout(&self, d: Duration) {
        self.active_request_timeout_s.store(d.as_secs(), Ordering::Relaxed);
    }

    /// How long an ended action stays to be seen (Lustre's `grace_delay`).
    pub fn grace_delay(&self) -> Duration {
        Duration::from_secs(self.grace_delay_s.load(Ordering::Relaxed))
    }

    pub fn set_grace_delay(&self, d: Duration) {
        self.grace_delay_s.store(d.as_secs(), Ordering::Relaxed);
    }

    pub fn default_archive_id(&self) -> u32 {
        self.default_archive_id.load(Ordering::Relaxed)
    }

    pub fn set_default_archive_id(&self, id: u32) {
        self.default_archive_id.store(id, Ordering::Relaxed);
    }

    /// The waiting list from the table as `view` has it (cheap enough once a second: the
    /// table holds the actions of the last minute and those still to do).
    pub fn rebuild(&self, view: &Tables) -> WeftResult<()> {
        let actions = view.all_hsm_actions()?;
        let newest = actions.last().map_or(0, |a| a.cookie);
        let waiting = actions.iter().filter(|a| a.status == ActionStatus::Waiting).map(|a| (a.cookie, a.archive_id));
        self.set_waiting(waiting.collect(), newest);
        Ok(())
    }

    /// The waiting list as a reading of the table found it (cookie -> archive id), with the
    /// actions queued after the newest that reading saw (`newest`) kept.
    pub fn set_waiting(&self, mut waiting: BTreeMap<u64, u32>, newest: u64) {
        let mut inner = self.inner();
        waiting.extend(inner.waiting.range(newest.saturating_add(1)..).map(|(c, a)| (*c, *a)));
        inner.waiting = waiting;
    }

    pub fn add_waiting(&self, cookie: u64, archive_id: u32) {
        self.inner().waiting.insert(cookie, archive_id);
    }

    pub fn remove_waiting(&self, cookie: u64) {
        self.inner().waiting.remove(&cookie);
    }

    /// Waiting cookies a copytool serving `archive_ids` may take, oldest first.
    pub fn candidates(&self, archive_ids: &[u32], limit: usize) -> Vec<u64> {
        let inner = self.inner();
        inner.waiting.iter().filter(|(_, a)| serves(archive_ids, **a)).map(|(c, _)| *c).take(limit).collect()
    }

    /// Whether any copytool alive at `now` serves `archive_id`.
    pub fn served(&self, archive_id: u32, now: Instant) -> bool {
        self.inner().agents.values().any(|a| a.serves(archive_id) && alive(a.last_seen, now))
    }

    /// Copytools heard from within [`HSM_AGENT_TIMEOUT_MS`] before `now`.
    pub fn copytools_alive(&self, now: Instant) -> usize {
        self.inner().agents.values().filter(|a| alive(a.last_seen, now)).count()
    }

    /// A copytool was heard from `now`; at a poll (`poll`: the archives it serves, the
    /// actions it runs, the time) what it said.
    pub fn seen(&self, agent: &str, poll: Option<(&[u32], &[u64], i64)>, now: Instant) {
        let mut inner = self.inner();
        let a = inner.agents.entry(agent.to_string()).or_insert_with(|| Agent {
            archive_ids: Vec::new(),
            last_seen: now,
            ok: 0,
            errors: 0,
            running: Vec::new(),
            running_at: 0,
        });
        a.last_seen = a.last_seen.max(now);
        if let Some((ids, running, at)) = poll {
            a.archive_ids = ids.to_vec();
            a.running = running.to_vec();
            a.running_at = at;
        }
    }

    /// Whether `agent`, alive, said at a poll at least 2 s after `since` (unix seconds) that
    /// it does not run `cookie`: it never got it (a lost answer) or lost it (a restart).
    pub fn agent_dropped(&self, agent: &str, cookie: u64, since: i64) -> bool {
        let inner = self.inner();
        inner.agents.get(agent).is_some_and(|a| a.running_at >= since + 2 && !a.running.contains(&cookie))
    }

    /// Forgets copytools not heard from for six times [`HSM_AGENT_TIMEOUT_MS`] before `now`.
    pub fn forget_gone_agents(&self, now: Instant) {
        self.inner().agents.retain(|_, a| !gone(a.last_seen, now));
    }

    /// A copytool ended an action.
    pub fn ended(&self, agent: &str, ok: bool) {
        if let Some(a) = self.inner().agents.get_mut(agent) {
            if ok {
                a.ok += 1;
            } else {
                a.errors += 1;
            }
        }
    }

    /// Whether `agent` is taken for dead at `now`: not heard from for
    /// [`HSM_AGENT_TIMEOUT_MS`] (never heard from by this MDS: since it started).
    pub fn agent_dead(&self, agent: &str, now: Instant) -> bool {
        let last = self.inner().agents.get(agent).map_or(self.started, |a| a.last_seen);
        !alive(last, now)
    }

    /// `mdt.*.hsm.agents` at `now`, Lustre's lines (`current` counted from `running`:
    /// agent -> actions it runs now); copytools dead for a while are left out.
    pub fn agents_listing(&self, running: &BTreeMap<String, u64>, now: Instant) -> String {
        let mut out = String::new();
        for (name, a) in self.inner().agents.iter().filter(|(_, a)| !gone(a.last_seen, now)) {
            let ids = if a.archive_ids.is_empty() {
                "ANY".to_string()
            } else {
                a.archive_ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
            };
            let current = running.get(name).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "uuid={name} archive_id={ids} requests=[current:{current} ok:{} errors:{}]",
                a.ok, a.errors
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_millis(HSM_AGENT_TIMEOUT_MS);

    /// A copytool is alive for the timeout after it was last heard from, then dead, and
    /// forgotten after six times the timeout; the time is the caller's, no clock is read.
    #[test]
    fn a_copytool_lives_for_the_timeout_after_it_was_heard_from() {
        let start = Instant::now();
        let c = Coordinator::new(start);
        // Never heard from: dead once the timeout passed since the start.
        assert!(!c.agent_dead("ct", start + TIMEOUT - Duration::from_millis(1)));
        assert!(c.agent_dead("ct", start + TIMEOUT));
        let heard = start + TIMEOUT * 2;
        c.seen("ct", Some((&[2], &[], 0)), heard);
        let just_before = heard + TIMEOUT - Duration::from_millis(1);
        assert!(!c.agent_dead("ct", just_before));
        assert!(c.served(2, just_before) && !c.served(3, just_before));
        assert_eq!(c.copytools_alive(just_before), 1);
        assert!(c.agent_dead("ct", heard + TIMEOUT));
        assert!(!c.served(2, heard + TIMEOUT));
        assert_eq!(c.copytools_alive(heard + TIMEOUT), 0);
        // Listed while dead for less than six timeouts, then forgotten.
        assert!(c.agents_listing(&BTreeMap::new(), heard + TIMEOUT * 5).contains("uuid=ct archive_id=2"));
        c.forget_gone_agents(heard + TIMEOUT * 5);
        assert!(c.agents_listing(&BTreeMap::new(), heard + TIMEOUT * 6).is_empty());
        c.forget_gone_agents(heard + TIMEOUT * 6);
        assert_eq!(c.copytools_alive(heard), 0, "forgotten");
        // A report (no poll) keeps it alive as well.
        c.seen("ct", None, heard + TIMEOUT * 7);
        assert!(!c.agent_dead("ct", heard + TIMEOUT * 7 + TIMEOUT / 2));
    }
}
