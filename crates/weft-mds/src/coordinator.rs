//! The HSM coordinator's memory (Lustre's `mdt_coordinator`): its switch (`hsm_control`),
//! the copytools (agents) heard from, and the waiting actions in arrival order.
//!
//! The actions themselves are rows of the MDT (`hsm_actions`, with an index by file), so
//! they survive a restart; the ops are in `ops/hsm.rs`. What is here is either settings or a
//! hint: the waiting list is checked against the table by whoever takes from it, and the
//! background sweep ([`crate::background`]) rebuilds it from the table every second, so a
//! batch that failed after changing it leaves nothing wrong for long.
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
    /// The coordinator of an MDT whose committed tables are `view`.
    pub fn load(view: &Tables) -> WeftResult<Coordinator> {
        let c = Coordinator {
            control: AtomicU8::new(HsmControl::Enabled as u8),
            active_request_timeout_s: AtomicU64::new(HSM_ACTIVE_REQUEST_TIMEOUT_S),
            grace_delay_s: AtomicU64::new(HSM_ENDED_KEEP_S),
            default_archive_id: AtomicU32::new(DEFAULT_ARCHIVE_ID),
            started: Instant::now(),
            inner: Mutex::new(Inner::default()),
        };
        c.rebuild(view)?;
        Ok(c)
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

    /// Whether any copytool alive serves `archive_id`.
    pub fn served(&self, archive_id: u32) -> bool {
        let timeout = Duration::from_millis(HSM_AGENT_TIMEOUT_MS);
        self.inner().agents.values().any(|a| a.serves(archive_id) && a.last_seen.elapsed() < timeout)
    }

    /// Copytools heard from within [`HSM_AGENT_TIMEOUT_MS`].
    pub fn copytools_alive(&self) -> usize {
        let timeout = Duration::from_millis(HSM_AGENT_TIMEOUT_MS);
        self.inner().agents.values().filter(|a| a.last_seen.elapsed() < timeout).count()
    }

    /// A copytool was heard from; at a poll (`poll`: the archives it serves, the actions it
    /// runs, the time) what it said.
    pub fn seen(&self, agent: &str, poll: Option<(&[u32], &[u64], i64)>) {
        let mut inner = self.inner();
        let a = inner.agents.entry(agent.to_string()).or_insert_with(|| Agent {
            archive_ids: Vec::new(),
            last_seen: Instant::now(),
            ok: 0,
            errors: 0,
            running: Vec::new(),
            running_at: 0,
        });
        a.last_seen = Instant::now();
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

    /// Forgets copytools not heard from for six times [`HSM_AGENT_TIMEOUT_MS`].
    pub fn forget_gone_agents(&self) {
        let forget = Duration::from_millis(HSM_AGENT_TIMEOUT_MS * 6);
        self.inner().agents.retain(|_, a| a.last_seen.elapsed() < forget);
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

    /// Whether `agent` is taken for dead: not heard from for [`HSM_AGENT_TIMEOUT_MS`]
    /// (never heard from by this MDS: since it started).
    pub fn agent_dead(&self, agent: &str) -> bool {
        let timeout = Duration::from_millis(HSM_AGENT_TIMEOUT_MS);
        let last = self.inner().agents.get(agent).map_or(self.started, |a| a.last_seen);
        last.elapsed() >= timeout
    }

    /// `mdt.*.hsm.agents`, Lustre's lines (`current` counted from `running`: agent ->
    /// actions it runs now); copytools dead for a while are left out.
    pub fn agents_listing(&self, running: &BTreeMap<String, u64>) -> String {
        let mut out = String::new();
        let forget = Duration::from_millis(HSM_AGENT_TIMEOUT_MS * 6);
        for (name, a) in self.inner().agents.iter().filter(|(_, a)| a.last_seen.elapsed() < forget) {
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
