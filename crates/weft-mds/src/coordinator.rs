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

use crate::limits::{HSM_ACTIVE_REQUEST_TIMEOUT_S, HSM_AGENT_TIMEOUT_MS};
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

    pub fn default_archive_id(&self) -> u32 {
        self.default_archive_id.load(Ordering::Relaxed)
    }

    pub fn set_default_archive_id(&self, id: u32) {
        self.default_archive_id.store(id, Ordering::Relaxed);
    }

    /// The waiting list from the table as `view` has it (cheap enough once a second: the
    /// table holds the actions of the last minute and those still to do).
    pub fn rebuild(&self, view: &Tables) -> WeftResult<()> {
        let mut waiting = BTreeMap::new();
        let mut from = 0;
        loop {
            let page = view.hsm_actions(from, 4096)?;
            let Some(last) = page.last() else { break };
            from = last.cookie + 1;
            waiting.extend(page.iter().filter(|a| a.status == ActionStatus::Waiting).map(|a| (a.cookie, a.archive_id)));
        }
        self.inner().waiting = waiting;
        Ok(())
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

    /// A copytool was heard from; `archive_ids` when it said which archives it serves.
    pub fn seen(&self, agent: &str, archive_ids: Option<&[u32]>) {
        let mut inner = self.inner();
        let now = Instant::now();
        match inner.agents.get_mut(agent) {
            Some(a) => {
                a.last_seen = now;
                if let Some(ids) = archive_ids {
                    a.archive_ids = ids.to_vec();
                }
            }
            None => {
                let ids = archive_ids.map(<[u32]>::to_vec).unwrap_or_default();
                inner.agents.insert(agent.to_string(), Agent { archive_ids: ids, last_seen: now, ok: 0, errors: 0 });
            }
        }
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
