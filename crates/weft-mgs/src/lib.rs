//! The management service: the cluster map, target registration, pools.
//!
//! The map is the one thing every client and server must agree on, so it has one writer
//! (this service), one version number that moves on every change and never otherwise, and
//! it is persisted before any change is acknowledged or published. Followers learn of
//! changes by version ([`Mgs::wait_for_change`], `GetMap { known_version }`), so an
//! unchanged map costs a follower nothing but the version.
//!
//! The rules live in [`rules`] as pure functions; this file only serializes updates,
//! persists and publishes. No networking here: weft-server wires [`Mgs::handle`] to it.
//!
//! A replicated MGS ([`Mgs::open_replica`], [`replica`]) is the same service as the group's
//! state machine: an update is proposed to the group instead of saved, and every replica
//! saves and publishes the maps its group commits ([`Mgs::apply`]).

pub mod decay;
mod evictions;
pub mod history;
pub mod lease;
pub mod limits;
pub mod planner;
pub mod qos;
pub mod replica;
pub mod rules;
pub mod store;

use crate::limits::{LEASE_MS, WATCH_WAIT_MS_MAX};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use weft_proto::msg::ops::{Op, Payload};
use weft_proto::msg::{
    mgs, ClusterMap, DecayActions, GlobalShares, HistoryReply, LeaseGrant, MgsReply, MgsRequest, UsageTotal,
};
use weft_proto::{WeftError, WeftResult};

/// The management service of one file system.
#[derive(Debug)]
pub struct Mgs {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    /// Held for a whole update (apply, persist, publish), so updates apply in one order and
    /// each starts from the published map.
    update_lock: Mutex<()>,
    /// The current map; only ever replaced after it is persisted.
    published: watch::Sender<ClusterMap>,
    /// The servers' latest demand on global TBF rules (in memory: a restarted MGS learns it
    /// again within a second).
    global: Mutex<qos::GlobalTable>,
    epoch: std::time::Instant,
    /// The monitor's history (`history.redb` in the MGS directory), and the seconds its
    /// intervals last once a monitor feeds it.
    history: history::History,
    interval_s: std::sync::atomic::AtomicU64,
    /// The decay engine's memory (`decay.json`).
    decay: Mutex<decay::DecayState>,
    /// Some for a replica of a replicated MGS ([`replica`]).
    replica: Option<replica::ReplicaState>,
    /// The clients servers evicted, for their map watches.
    evictions: evictions::Evictions,
    /// The servers' leases ([`lease`]): the serving MGS's, in memory.
    leases: Mutex<lease::Leases>,
}

impl Mgs {
    /// Opens (creating when new) the MGS state in `dir` (a JSON file `cluster-map.json`,
    /// written atomically: tmp + fsync + rename + fsync dir). `fsname` is the file system
    /// name; opening a dir of another fsname is an error.
    pub fn open(dir: &Path, fsname: &str) -> WeftResult<Arc<Mgs>> {
        Mgs::open_as(dir, fsname, false)
    }

    /// Opens a replica of a replicated MGS in `dir`, as [`Mgs::open`]: it serves nothing
    /// until [`Mgs::serve`], and its map moves only by what its group commits
    /// ([`Mgs::apply`], [`Mgs::install`]).
    pub fn open_replica(dir: &Path, fsname: &str) -> WeftResult<Arc<Mgs>> {
        Mgs::open_as(dir, fsname, true)
    }

    fn open_as(dir: &Path, fsname: &str, replicated: bool) -> WeftResult<Arc<Mgs>> {
        if fsname.is_empty() {
            return Err(WeftError::invalid("the file system name (fsname) is empty"));
        }
        std::fs::create_dir_all(dir).map_err(|e| {
            let mut err = WeftError::from(e);
            err.message = format!("MGS directory {}: {}", dir.display(), err.message);
            err
        })?;
        let mut kept = None;
        let map = match store::load_with_state(dir)? {
            Some((map, _)) if map.fsname != fsname => {
                return Err(WeftError::invalid(format!(
                    "MGS directory {} holds file system '{}', but the configuration asks for '{fsname}'",
                    dir.display(),
                    map.fsname
                )));
            }
            Some((mut map, state)) => {
                kept = state;
                // Our own writes keep the order; restore it should a person have edited the file.
                map.targets.sort_by_key(|t| (t.kind, t.index));
                map
            }
            None => {
                let map = ClusterMap { version: 1, fsname: fsname.to_string(), ..Default::default() };
                store::save(dir, &map)?;
                map
            }
        };
        let inner = Inner {
            dir: dir.to_path_buf(),
            update_lock: Mutex::new(()),
            published: watch::Sender::new(map),
            global: Mutex::new(qos::GlobalTable::default()),
            epoch: std::time::Instant::now(),
            history: history::History::open(&dir.join("history.redb"), history::Retention::default())?,
            interval_s: std::sync::atomic::AtomicU64::new(0),
            decay: Mutex::new(decay::DecayState::load(dir)?),
            replica: replicated.then(|| replica::ReplicaState::new(kept)),
            evictions: evictions::Evictions::default(),
            leases: Mutex::new(lease::Leases::new(Duration::from_millis(LEASE_MS), std::time::Instant::now())),
        };
        Ok(Arc::new(Mgs { inner: Arc::new(inner) }))
    }

    /// Records one interval of the monitor (`interval_s` long, ending at `t` in Unix
    /// seconds). Runs on the blocking pool: it writes to disk.
    pub async fn record_usage(
        &self,
        t: u64,
        interval_s: u64,
        rows: Vec<(history::Kind, String, history::Totals)>,
    ) -> WeftResult<()> {
        self.inner.interval_s.store(interval_s, std::sync::atomic::Ordering::Relaxed);
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || inner.history.add(t, &rows))
            .await
            .map_err(|e| WeftError::io(format!("monitor history: {e}")))?
    }

    /// The decay engine's state, to read or change (save it after a change).
    pub fn decay(&self) -> std::sync::MutexGuard<'_, decay::DecayState> {
        self.inner.decay.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Each series of `kind`'s usage since `since` (Unix seconds), from the history.
    pub async fn usage_since(&self, since: u64, kind: history::Kind) -> WeftResult<Vec<(String, history::Totals)>> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || inner.history.totals(since, kind))
            .await
            .map_err(|e| WeftError::io(format!("monitor history: {e}")))?
    }

    /// The current map.
    pub fn map(&self) -> ClusterMap {
        self.inner.published.borrow().clone()
    }

    pub async fn handle(&self, req: MgsRequest) -> WeftResult<MgsReply> {
        if let Some(r) = &self.inner.replica {
            r.check()?;
        }
        dispatch(self, req).await
    }

    #[cfg(test)]
    fn subscribe_for_test(&self) -> watch::Receiver<ClusterMap> {
        self.inner.published.subscribe()
    }

    /// Whether this is a replica of a replicated MGS.
    pub fn is_replica(&self) -> bool {
        self.inner.replica.is_some()
    }

    /// Whether this MGS answers requests now: a single one always, a replica while it leads
    /// ([`Mgs::serve`]) and its read lease holds.
    pub fn serves(&self) -> bool {
        self.inner.replica.as_ref().is_none_or(|r| r.check().is_ok())
    }

    /// A replica starts serving: it leads its group and has applied everything committed
    /// before (weft-server asked the group for a read index), so its map is the group's.
    /// Its updates go through `proposer` from now on.
    pub fn serve(&self, proposer: Arc<dyn replica::Proposer>) {
        if let Some(r) = &self.inner.replica {
            // It cannot know the renewals the previous leader saw: every lease counts as
            // renewed now.
            self.inner.leases().restart(std::time::Instant::now());
            r.serve(Some(proposer));
        }
    }

    /// Resolves once this replica does not lead (never for a single MGS).
    pub async fn stops_leading(&self) {
        match &self.inner.replica {
            Some(r) => {
                let _ = r.leading.subscribe().wait_for(|leads| !leads).await;
            }
            None => std::future::pending().await,
        }
    }

    /// A replica stops serving (it lost the lead): requests are refused with `Moved`, and the
    /// followers waiting on it are answered so at once.
    pub fn follow(&self) {
        if let Some(r) = &self.inner.replica {
            r.serve(None);
        }
    }

    /// The group confirmed the lead after `asked`: reads may be answered until `asked +
    /// length` (see [`replica`]).
    pub fn renew_lease(&self, asked: std::time::Instant, length: Duration) {
        if let Some(r) = &self.inner.replica {
            r.renew(asked, length);
        }
    }

    fn replica_state(&self) -> WeftResult<&replica::ReplicaState> {
        self.inner.replica.as_ref().ok_or_else(|| WeftError::invalid("this MGS is not a replica of a group"))
    }

    /// Applies one committed entry of the group (in log order; `payload` None for entries
    /// without a map): saves its map with `state` in the map file and publishes it. A map
    /// not newer than the one applied (an entry proposed from an older map by a leader that
    /// was deposed) is skipped, on every replica alike.
    pub fn apply(&self, payload: Option<&[u8]>, state: &[u8]) -> WeftResult<()> {
        let r = self.replica_state()?;
        let map = payload.map(replica::decode_entry).transpose()?;
        let mut applied = r.applied();
        applied.state = Some(state.to_vec());
        let Some(map) = map else { return Ok(()) };
        let current = self.inner.published.borrow().version;
        if map.version <= current || map.fsname != self.inner.published.borrow().fsname {
            tracing::warn!(
                version = map.version,
                current,
                "an MGS entry that does not follow the applied map: skipped"
            );
            return Ok(());
        }
        store::save_with_state(&self.inner.dir, &map, Some(state))?;
        applied.kept = Some(state.to_vec());
        self.inner.published.send_replace(map);
        Ok(())
    }

    /// The group's state of the last entry whose map the map file holds (None: none).
    pub fn applied_state(&self) -> Option<Vec<u8>> {
        self.inner.replica.as_ref().and_then(|r| r.applied().kept.clone())
    }

    /// The whole state as of the last entry applied, with that entry's state: `(state,
    /// map)`.
    pub fn snapshot(&self) -> WeftResult<(Vec<u8>, Vec<u8>)> {
        let r = self.replica_state()?;
        let applied = r.applied();
        let data = replica::encode_entry(&self.inner.published.borrow())?;
        Ok((applied.state.clone().unwrap_or_default(), data))
    }

    /// Replaces the map with another replica's [`Mgs::snapshot`], durably, and publishes it.
    pub fn install(&self, state: &[u8], data: &[u8]) -> WeftResult<()> {
        let r = self.replica_state()?;
        let map = replica::decode_entry(data)?;
        let mut applied = r.applied();
        store::save_with_state(&self.inner.dir, &map, Some(state))?;
        applied.state = Some(state.to_vec());
        applied.kept = Some(state.to_vec());
        tracing::info!(version = map.version, "installed an MGS snapshot from the group");
        self.inner.published.send_replace(map);
        Ok(())
    }

    /// Resolves when the map version becomes greater than `known` (for servers/clients that
    /// follow the map); returns the new map.
    pub async fn wait_for_change(&self, known: u64) -> ClusterMap {
        let mut follower = self.inner.published.subscribe();
        let woken = follower.wait_for(|m| m.version > known).await.map(|map| map.clone());
        // An error is unreachable while `self` holds the sender; the current map is the best answer.
        woken.unwrap_or_else(|_| self.map())
    }

    /// Applies `rule` to the map; when it changed something, bumps the version, persists
    /// and publishes. Returns the resulting map.
    ///
    /// Runs on the blocking pool (it fsyncs), and as one task: a caller that stops waiting
    /// cannot leave a change persisted but unpublished.
    /// Records the group's voters in the map (`ClusterMap::mgs_replicas`), when they
    /// differ: what the replicated MGS's leader does as its group's membership changes.
    pub async fn set_replicas(&self, replicas: Vec<String>) -> WeftResult<ClusterMap> {
        self.update(move |m| rules::set_mgs_replicas(m, replicas)).await
    }

    async fn update<F>(&self, rule: F) -> WeftResult<ClusterMap>
    where
        F: FnOnce(&mut ClusterMap) -> WeftResult<bool> + Send + 'static,
    {
        let inner = self.inner.clone();
        let task = tokio::task::spawn_blocking(move || {
            let _serial = inner.update_lock.lock().unwrap_or_else(|e| e.into_inner());
            let proposer = inner.replica.as_ref().map(replica::ReplicaState::proposer).transpose()?;
            let mut next = inner.published.borrow().clone();
            if !rule(&mut next)? {
                return Ok(next);
            }
            next.version += 1;
            match proposer {
                None => {
                    store::save(&inner.dir, &next)?;
                    inner.published.send_replace(next.clone());
                }
                Some(group) => {
                    // Saved and published by `apply`, here as on every replica.
                    group.propose(replica::encode_entry(&next)?)?;
                    if *inner.published.borrow() != next {
                        return Err(replica::not_leader("the MGS's group committed another map first"));
                    }
                }
            }
            Ok(next)
        });
        match task.await {
            Ok(result) => result,
            Err(e) => Err(WeftError::io(format!("MGS update did not complete: {e}"))),
        }
    }
}

impl Inner {
    fn leases(&self) -> std::sync::MutexGuard<'_, lease::Leases> {
        self.leases.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The handler of one MGS op.
trait Handle: Op<Answer = MgsReply> {
    async fn run(self, mgs: &Mgs) -> WeftResult<Self::Reply>;
}

impl Handle for mgs::GetMap {
    async fn run(self, mgs: &Mgs) -> WeftResult<MgsReply> {
        let map = mgs.inner.published.borrow();
        if self.known_version != 0 && self.known_version == map.version {
            return Ok(MgsReply::Unchanged(map.version));
        }
        Ok(MgsReply::Map(map.clone()))
    }
}

impl Handle for mgs::WatchMap {
    /// The long poll followers use: answered once the version passes the one they know, or
    /// after `wait_ms` (at most [`WATCH_WAIT_MS_MAX`]) with `Unchanged`.
    async fn run(self, mgs: &Mgs) -> WeftResult<MgsReply> {
        let wait = Duration::from_millis(u64::from(self.wait_ms).min(WATCH_WAIT_MS_MAX));
        // A replica that stops leading answers at once: the follower goes to the new leader.
        let stops = mgs.stops_leading();
        let evictions = &mgs.inner.evictions;
        tokio::select! {
            biased;
            () = evictions.wait_for(self.client_id) => Ok(MgsReply::Evicted),
            answer = tokio::time::timeout(wait, mgs.wait_for_change(self.known_version)) => match answer {
                Ok(map) => Ok(MgsReply::Map(map)),
                Err(_) => Ok(MgsReply::Unchanged(mgs.inner.published.borrow().version)),
            },
            () = stops => Err(replica::not_leader("this MGS replica stopped leading its group")),
        }
    }
}

impl Handle for mgs::ClientsEvicted {
    async fn run(self, mgs: &Mgs) -> WeftResult<()> {
        if self.client_ids.len() > crate::limits::EVICTIONS_PER_REPORT_MAX {
            return Err(WeftError::invalid(format!(
                "{} evicted clients in one report: at most {} (send several)",
                self.client_ids.len(),
                crate::limits::EVICTIONS_PER_REPORT_MAX
            )));
        }
        mgs.inner.evictions.note(&self.client_ids);
        Ok(())
    }
}

impl Handle for mgs::Register {
    async fn run(self, mgs: &Mgs) -> WeftResult<ClusterMap> {
        mgs.update(move |m| rules::register(m, &self.target)).await
    }
}

impl Handle for mgs::RegisterTargets {
    async fn run(self, mgs: &Mgs) -> WeftResult<ClusterMap> {
        mgs.update(move |m| {
            for target in &self.targets {
                rules::register(m, target)?;
            }
            Ok(!self.targets.is_empty())
        })
        .await
    }
}

impl Handle for mgs::SetTargetState {
    async fn run(self, mgs: &Mgs) -> WeftResult<ClusterMap> {
        mgs.update(move |m| rules::set_target_state(m, self.kind, self.index, self.state)).await
    }
}

impl Handle for mgs::PoolAdd {
    async fn run(self, mgs: &Mgs) -> WeftResult<ClusterMap> {
        mgs.update(move |m| rules::pool_add(m, &self.pool, &self.osts)).await
    }
}

impl Handle for mgs::PoolNew {
    async fn run(self, mgs: &Mgs) -> WeftResult<ClusterMap> {
        mgs.update(move |m| rules::pool_new(m, &self.pool)).await
    }
}

impl Handle for mgs::PoolRemove {
    async fn run(self, mgs: &Mgs) -> WeftResult<ClusterMap> {
        mgs.update(move |m| rules::pool_remove(m, &self.pool, &self.osts)).await
    }
}

impl Handle for mgs::PoolSet {
    async fn run(self, mgs: &Mgs) -> WeftResult<ClusterMap> {
        mgs.update(move |m| rules::pool_set(m, &self.pool, self.sync_mirrors)).await
    }
}

impl Handle for mgs::Nodemap {
    async fn run(self, mgs: &Mgs) -> WeftResult<ClusterMap> {
        mgs.update(move |m| m.nodemap.apply(&self.command)).await
    }
}

impl Handle for mgs::RemoveTarget {
    async fn run(self, mgs: &Mgs) -> WeftResult<ClusterMap> {
        mgs.update(move |m| rules::remove_target(m, self.kind, self.index)).await
    }
}

impl Handle for mgs::PoolDestroy {
    async fn run(self, mgs: &Mgs) -> WeftResult<ClusterMap> {
        mgs.update(move |m| rules::pool_destroy(m, &self.pool)).await
    }
}

impl Handle for mgs::SetParamRecord {
    async fn run(self, mgs: &Mgs) -> WeftResult<ClusterMap> {
        if self.delete {
            mgs.update(move |m| rules::delete_param(m, &self.name)).await
        } else {
            mgs.update(move |m| rules::set_param(m, &self.name, &self.value)).await
        }
    }
}

impl Handle for mgs::QosDemand {
    async fn run(self, mgs: &Mgs) -> WeftResult<GlobalShares> {
        let now_ms = u64::try_from(mgs.inner.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut table = mgs.inner.global.lock().unwrap_or_else(|e| e.into_inner());
        table.report(now_ms, &self.server, self.service, &self.rules).map(GlobalShares)
    }
}

impl Handle for mgs::History {
    async fn run(self, mgs: &Mgs) -> WeftResult<HistoryReply> {
        let kind = history::Kind::parse(&self.kind).map_err(WeftError::invalid)?;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let since = now.saturating_sub(self.secs);
        let inner = mgs.inner.clone();
        let interval_s = mgs.inner.interval_s.load(std::sync::atomic::Ordering::Relaxed);
        // No step finer than the intervals the history has.
        let step = if self.step > 0 { self.step.max(interval_s) } else { 0 };
        let top = self.top as usize;
        let task = tokio::task::spawn_blocking(move || -> WeftResult<HistoryReply> {
            let total = |name: String, t: history::Totals| UsageTotal {
                name,
                ops: t.ops,
                read_bytes: t.read_bytes,
                write_bytes: t.write_bytes,
            };
            let mut totals = inner.history.totals(since, kind)?;
            if top > 0 {
                totals.truncate(top);
            }
            let series = if step > 0 {
                // The series of the busiest ones only, when `top` bounds them.
                let wanted: std::collections::HashSet<&str> = totals.iter().map(|(n, _)| n.as_str()).collect();
                inner
                    .history
                    .series(since, kind, step)?
                    .into_iter()
                    .filter(|(_, n, _)| top == 0 || wanted.contains(n.as_str()))
                    .map(|(at, n, t)| (at, total(n, t)))
                    .collect()
            } else {
                Vec::new()
            };
            Ok(HistoryReply {
                interval_s,
                totals: totals.into_iter().map(|(n, t)| total(n, t)).collect(),
                series,
                step_s: step,
            })
        });
        task.await.map_err(|e| WeftError::io(format!("monitor history: {e}")))?
    }
}

// The leader's clock decides, read under the update lock (changes follow each other in
// time); the map it makes is what every replica applies.
use weft_proto::msg::qos::now_ms;

impl Handle for mgs::QosCapacity {
    async fn run(self, mgs: &Mgs) -> WeftResult<ClusterMap> {
        mgs.update(move |m| planner::set_capacity(m, &self.osts, self.capacity, now_ms())).await
    }
}

impl Handle for mgs::QosReserve {
    async fn run(self, mgs: &Mgs) -> WeftResult<ClusterMap> {
        mgs.update(move |m| planner::reserve(m, &self.request, self.uid, now_ms())).await
    }
}

impl Handle for mgs::QosCancel {
    async fn run(self, mgs: &Mgs) -> WeftResult<ClusterMap> {
        mgs.update(move |m| planner::cancel(m, &self.id, self.uid, now_ms())).await
    }
}

impl Handle for mgs::DecaySet {
    async fn run(self, mgs: &Mgs) -> WeftResult<ClusterMap> {
        mgs.update(move |m| rules::decay_set(m, self.policy)).await
    }
}

impl Handle for mgs::DecayRemove {
    async fn run(self, mgs: &Mgs) -> WeftResult<ClusterMap> {
        mgs.update(move |m| rules::decay_remove(m, &self.name)).await
    }
}

impl Handle for mgs::DecayWarnings {
    /// The actions of the current periods about `uid` (user policies) and `gids` (group
    /// policies), or all of them.
    async fn run(self, mgs: &Mgs) -> WeftResult<DecayActions> {
        let map = mgs.map();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let uid = self.uid.map(|u| u.to_string());
        let state = mgs.decay();
        let actions = state
            .actions
            .iter()
            .filter(|a| {
                let Some(p) = map.decay.iter().find(|p| p.name == a.policy) else { return false };
                let current = a.at >= p.period_start(now);
                let mine = match p.by.as_str() {
                    "user" => uid.as_deref() == Some(a.key.as_str()),
                    "group" => a.key.parse().is_ok_and(|g: u32| self.gids.contains(&g)),
                    _ => false,
                };
                let whose = self.all || mine;
                current && whose
            })
            .cloned()
            .collect();
        Ok(DecayActions(actions))
    }
}

impl Handle for mgs::RenewLease {
    /// Records the renewal as it arrived and answers from the map. Taken in turn with the
    /// map's updates (the update lock): a claim decided on this server's lapsed lease is
    /// published before this answer is made, so the answer never covers an OST given away.
    async fn run(self, mgs: &Mgs) -> WeftResult<LeaseGrant> {
        let arrived = std::time::Instant::now();
        let inner = mgs.inner.clone();
        let task = tokio::task::spawn_blocking(move || {
            let _serial = inner.update_lock.lock().unwrap_or_else(|e| e.into_inner());
            let mut leases = inner.leases();
            leases.renew(&self.server, arrived)?;
            let map = inner.published.borrow();
            Ok(leases.grant(&map, &self.server, std::time::Instant::now()))
        });
        task.await.map_err(|e| WeftError::io(format!("lease renewal did not complete: {e}")))?
    }
}

impl Handle for mgs::ClaimTarget {
    async fn run(self, mgs: &Mgs) -> WeftResult<ClusterMap> {
        let inner = mgs.inner.clone();
        mgs.update(move |m| {
            // Decided under the update lock, at the moment of the change.
            let leases = inner.leases();
            let now = std::time::Instant::now();
            lease::claim(m, &self.target, self.serve, |s| leases.live(s, now))
        })
        .await
    }
}

impl Handle for mgs::MoveTarget {
    async fn run(self, mgs: &Mgs) -> WeftResult<ClusterMap> {
        let inner = mgs.inner.clone();
        let (kind, index, to) = (self.kind, self.index, self.to.clone());
        mgs.update(move |m| {
            let mut leases = inner.leases();
            let now = std::time::Instant::now();
            match lease::move_target(m, kind, index, &to, |s| leases.live(s, now))? {
                lease::Move::Done => Ok(false),
                lease::Move::Granted => Ok(true),
                lease::Move::AskHolder(holder) => {
                    leases.ask_release(&holder, index, &to);
                    Ok(false)
                }
            }
        })
        .await
    }
}

impl Handle for mgs::HandOver {
    async fn run(self, mgs: &Mgs) -> WeftResult<ClusterMap> {
        let (from, index) = (self.from.clone(), self.index);
        let map = mgs.update(move |m| lease::hand_over(m, self.kind, self.index, &self.from, &self.to)).await?;
        mgs.inner.leases().released(&from, index);
        Ok(map)
    }
}

/// `dispatch`, sending every op of `weft_proto::mgs_ops!` to its [`Handle`].
macro_rules! dispatch {
    (
        $Request:ident / $Answer:ident;
        $( $(#[$meta:meta])* $kind:ident $Op:ident { $($fields:tt)* } -> $Reply:ty = $name:literal; )*
    ) => {
        async fn dispatch(mgs: &Mgs, req: MgsRequest) -> WeftResult<MgsReply> {
            match req {
                $( MgsRequest::$Op(op) => Handle::run(op, mgs).await.map(Payload::into_reply), )*
            }
        }
    };
}

weft_proto::mgs_ops!(dispatch);

#[cfg(test)]
mod tests;
