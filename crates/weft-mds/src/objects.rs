//! OST objects for new layouts: the cluster view (which OSTs are up, pools), the in-memory
//! pools of precreated objects per OST, and the choice of OSTs for a layout.
//!
//! A create never talks to an OST: it takes object ids from these pools (in memory, before
//! its batch), and its batch persists the highest id handed out. A background
//! task ([`crate::background`]) refills pools that run low.

use crate::limits::PRECREATE_WAIT_MS_MAX;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use weft_proto::layout::{select_osts, Pattern};
use weft_proto::msg::{ClusterMap, TargetState};
use weft_proto::{ErrorCode, Fid, Layout, StripeObject, StripeSpec, WeftError, WeftResult};

/// Precreated object ids of one OST: `next_oid ..= created_oid` are free to hand out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OstPool {
    pub next_oid: u32,
    pub created_oid: u32,
    /// A precreate call is in flight.
    pub refilling: bool,
    /// No refill before this instant (after a failure).
    pub retry_at: Option<Instant>,
    pub failures: u32,
    /// The OST has destroyed every object past the last one this MDS handed out (Lustre's
    /// orphan cleanup, done once per start), or this pool skipped past them: until then
    /// nothing is handed out. After a power loss the MDS's record of what it handed out may
    /// be older than what it did hand out, to files whose creates the power loss took back;
    /// their objects may hold data, which a new file given the same id would show.
    pub orphans_destroyed: bool,
    /// The MDS has a record of this OST (else its objects are none of this MDS's: the
    /// cleanup destroys nothing and the pool starts past the OST's LAST_ID).
    pub recorded: bool,
}

impl OstPool {
    pub fn new(next_oid: u32, created_oid: u32) -> Self {
        OstPool {
            next_oid: next_oid.max(1),
            created_oid,
            refilling: false,
            retry_at: None,
            failures: 0,
            orphans_destroyed: false,
            recorded: true,
        }
    }

    /// A pool for an OST this MDS (of MDT `mdt`) has no record of: its ids start at the
    /// beginning of the MDT's range, or past what the OST says it has.
    pub fn unrecorded(mdt: u32) -> Self {
        let first = *weft_proto::fid::object_oid_range(mdt).start();
        OstPool { recorded: false, ..OstPool::new(first, first - 1) }
    }

    /// What the orphan cleanup asks: the last id handed out, if the MDS knows it.
    pub fn orphans_above(&self) -> Option<u32> {
        self.recorded.then(|| self.next_oid.saturating_sub(1))
    }

    /// Takes the orphan cleanup's answer. When the OST destroyed nothing (no record, a gap
    /// too wide to be this MDS's), the ids up to its LAST_ID are someone's: hand out none.
    pub fn orphans_cleaned(&mut self, answer: weft_proto::msg::ost::Orphans) {
        if !answer.destroyed {
            self.next_oid = self.next_oid.max(answer.last_oid.saturating_add(1));
            self.created_oid = self.created_oid.max(answer.last_oid);
            self.recorded = true;
        }
        self.orphans_destroyed = true;
    }

    pub fn available(&self) -> u64 {
        if !self.orphans_destroyed {
            return 0;
        }
        (self.created_oid as u64 + 1).saturating_sub(self.next_oid as u64)
    }

    /// The first oid the next precreate asks for: past everything created or handed out.
    pub fn refill_start(&self) -> u32 {
        self.created_oid.max(self.next_oid.saturating_sub(1)).saturating_add(1)
    }
}

/// Objects taken from the pools for the components of one layout that a request
/// instantiates, not yet committed: per component, its id, the spec they were chosen for
/// and the objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub parts: Vec<(u32, StripeSpec, Vec<StripeObject>)>,
}

impl Reservation {
    pub fn objects(&self) -> impl Iterator<Item = &StripeObject> {
        self.parts.iter().flat_map(|(_, _, objects)| objects)
    }

    /// Whether it was made for exactly these wants (ids and specs, in order): a layout that
    /// changed since the request was prepared may have other components under the same ids.
    pub fn serves(&self, wants: &[(u32, StripeSpec)]) -> bool {
        self.parts.len() == wants.len() && self.parts.iter().zip(wants).all(|((i, s, _), (j, t))| i == j && s == t)
    }
}

/// What the components of `layout` (of mirror `mirror` only, when given) that reach below
/// `end` and have no objects yet need: (component id, the spec to reserve for it). An MDT
/// component wants the one object of this MDT's data-on-MDT target `dom`.
pub fn instantiation_wants(layout: &Layout, end: u64, dom: u32, mirror: Option<u16>) -> Vec<(u32, StripeSpec)> {
    layout
        .components
        .iter()
        .filter(|c| mirror.is_none_or(|m| c.mirror_id == m))
        .filter(|c| !c.is_instantiated() && c.extent_start < end && !matches!(c.pattern, Pattern::Released { .. }))
        .map(|c| {
            let spec = match c.pattern {
                Pattern::Mdt => StripeSpec { stripe_count: 1, ost_list: vec![dom], ..StripeSpec::unset() },
                _ => StripeSpec { stripe_size: c.stripe_size, pool: c.pool.clone(), ..c.want.clone() },
            };
            (c.id, spec)
        })
        .collect()
}

#[derive(Debug, Default)]
pub struct ObjectsState {
    pub up_osts: Vec<u32>,
    /// This MDT's data-on-MDT target: refilled as the OSTs, used by MDT components only.
    pub dom: Option<u32>,
    /// Whether this MDT keeps file data at all (`MdsConfig::data_on_mdt`): until its target
    /// is served a data-on-MDT component waits for it; without, it goes to an OST.
    pub data_on_mdt: bool,
    pub pools_by_name: BTreeMap<String, Vec<u32>>,
    /// Pools whose new files' mirrors are written synchronously (the map's).
    pub sync_mirror_pools: std::collections::BTreeSet<String>,
    pub ost_pools: HashMap<u32, OstPool>,
    pub map_version: u64,
    /// The OSTs whose `osp.*.max_create_count` is not [`OST_MAX_PRECREATE`]: 0 drains one
    /// (no new objects there; destroys go on), another value bounds its precreates. Only
    /// those set: nothing here grows with the number of OSTs.
    pub max_create: BTreeMap<u32, u32>,
    /// How objects are placed once the OSTs are out of balance (`lod.*.qos_*`).
    pub qos: crate::qos::QosSettings,
    /// Each OST's free bytes, as its last statfs said (refreshed in turn by `qos_task`).
    pub free: HashMap<u32, u64>,
    /// Where the next round of statfs calls starts in `up_osts`.
    pub statfs_cursor: usize,
    /// This MDT: its range of object ids on every OST.
    pub mdt: u32,
    /// The I/O zone rules (`lod.*.zone_rule`): new files of a matching job go to its pool;
    /// others keep off every zone's OSTs.
    pub zones: crate::zone::ZoneRules,
}

/// Lustre's `OST_MAX_PRECREATE`: the default and largest `max_create_count`.
pub const OST_MAX_PRECREATE: u32 = 20_000;

impl ObjectsState {
    /// The OSTs a layout may use: up, and in the named pool if any. Without a pool and
    /// without OSTs named (`explicit`), off every zone's OSTs while others can take it.
    fn candidates(&self, pool: Option<&str>, explicit: bool) -> WeftResult<Vec<u32>> {
        let mut c: Vec<u32> = match pool {
            Some(p) => {
                let members = self.pools_by_name.get(p).ok_or_else(|| {
                    WeftError::invalid(format!("pool '{p}' does not exist: create it with 'weft pool add' first"))
                })?;
                self.up_osts.iter().copied().filter(|o| members.contains(o)).collect()
            }
            None => self.up_osts.clone(),
        };
        c.retain(|o| self.creates_on(*o));
        if pool.is_none() && !explicit && !self.zones.is_empty() {
            let zoned: Vec<u32> = self.zone_osts();
            if c.iter().any(|o| !zoned.contains(o)) {
                c.retain(|o| !zoned.contains(o));
            }
        }
        c.sort_unstable();
        if c.is_empty() {
            let msg = match pool {
                Some(p) => format!("no OST of pool '{p}' is up: new files cannot be created there"),
                None => "no OST is up: new files cannot be created".to_string(),
            };
            return Err(WeftError::new(ErrorCode::NoSpace, msg));
        }
        Ok(c)
    }

    /// Whether zone pool `pool` takes files: it exists and has OSTs (Lustre ignores an
    /// empty pool: its rule is passed over).
    pub fn zone_usable(&self, pool: &str) -> bool {
        self.pools_by_name.get(pool).is_some_and(|m| !m.is_empty())
    }

    /// The OSTs of the zones in use, sorted.
    fn zone_osts(&self) -> Vec<u32> {
        let mut osts: Vec<u32> =
            self.zones.pools().filter_map(|p| self.pools_by_name.get(p)).flatten().copied().collect();
        osts.sort_unstable();
        osts.dedup();
        osts
    }

    /// What `get-param lod.*.zone_rule` says of a rule's pool when it places nothing.
    pub fn zone_note(&self, pool: &str) -> Option<String> {
        match self.pools_by_name.get(pool) {
            None if self.map_version == 0 => None,
            None => Some("no such pool: ignored".into()),
            Some(m) if m.is_empty() => Some("pool empty: ignored".into()),
            Some(_) => None,
        }
    }

    /// The `max_create_count` of `ost`.
    pub fn max_create_count(&self, ost: u32) -> u32 {
        self.max_create.get(&ost).copied().unwrap_or(OST_MAX_PRECREATE)
    }

    /// Whether new objects may go to `ost` (its `max_create_count` is not 0).
    pub fn creates_on(&self, ost: u32) -> bool {
        self.max_create_count(ost) > 0
    }

    fn ready(&self, ost: u32) -> bool {
        self.ost_pools.get(&ost).is_some_and(|p| p.available() > 0)
    }

    /// Chooses OSTs for `spec`. `Ok(None)` means "wait for a refill"; with `give_up` set it
    /// settles for fewer stripes on the OSTs that have objects, or fails with NoSpace.
    fn plan(&self, spec: &StripeSpec, cursor: u64, give_up: bool) -> WeftResult<Option<Vec<u32>>> {
        if let [one] = spec.ost_list[..] {
            if weft_proto::layout::dom_mdt(one).is_some() && self.dom != Some(one) {
                // Served soon (the server calls serve_dom once it follows the map): wait.
                if self.data_on_mdt && self.dom.is_none() && !give_up {
                    return Ok(None);
                }
                return Err(WeftError::new(ErrorCode::NotSupported, "this MDT's server keeps no data on the MDT"));
            }
        }
        if let Some(dom) = self.dom.filter(|d| spec.ost_list == [*d]) {
            return match (self.ready(dom), give_up) {
                (true, _) => Ok(Some(vec![dom])),
                (false, false) => Ok(None),
                (false, true) => Err(WeftError::new(
                    ErrorCode::NoSpace,
                    format!("no data-on-MDT objects after waiting {PRECREATE_WAIT_MS_MAX} ms"),
                )),
            };
        }
        let named = spec.ost_list.iter().copied().chain(u32::try_from(spec.start_ost).ok());
        if let Some(drained) = named.into_iter().find(|o| self.up_osts.binary_search(o).is_ok() && !self.creates_on(*o))
        {
            return Err(WeftError::new(
                ErrorCode::NoSpace,
                format!("OST {drained} takes no new objects (its osp.*.max_create_count is 0): name another"),
            ));
        }
        let explicit = !spec.ost_list.is_empty() || spec.start_ost >= 0;
        let candidates = match self.candidates(spec.pool.as_deref(), explicit) {
            // Right after a start the map may not list the OSTs yet: wait for it like a refill.
            Err(e) if e.code == ErrorCode::NoSpace && !give_up => return Ok(None),
            other => other?,
        };
        let wanted = self.choose(spec, &candidates, cursor)?;
        if wanted.iter().all(|o| self.ready(*o)) {
            return Ok(Some(wanted));
        }
        let ready: Vec<u32> = candidates.iter().copied().filter(|o| self.ready(*o)).collect();
        if !explicit && ready.len() >= wanted.len() {
            return Ok(Some(self.choose(spec, &ready, cursor)?));
        }
        if !give_up {
            return Ok(None);
        }
        if explicit || ready.is_empty() {
            let missing: Vec<String> = wanted.iter().filter(|o| !self.ready(**o)).map(|o| o.to_string()).collect();
            return Err(WeftError::new(
                ErrorCode::NoSpace,
                format!(
                    "no precreated objects on OST(s) {} after waiting {PRECREATE_WAIT_MS_MAX} ms: check that they are up and not full",
                    missing.join(",")
                ),
            ));
        }
        Ok(Some(self.choose(spec, &ready, cursor)?))
    }

    /// The OSTs of `candidates` for `spec`: round robin from `cursor` (or where the spec
    /// says), or, once the candidates' free space is out of balance (`lod.*.qos_*`, known
    /// for each of them), drawn by weight (`qos.rs`).
    fn choose(&self, spec: &StripeSpec, candidates: &[u32], cursor: u64) -> WeftResult<Vec<u32>> {
        let explicit = !spec.ost_list.is_empty() || spec.start_ost >= 0;
        let count = match spec.stripe_count {
            -1 => candidates.len(),
            0 => weft_proto::limits::STRIPE_COUNT_DEFAULT as usize,
            n => usize::try_from(n).unwrap_or(usize::MAX),
        };
        let free: Option<Vec<(u32, u64)>> = candidates.iter().map(|o| self.free.get(o).map(|f| (*o, *f))).collect();
        match free {
            Some(free)
                if !explicit
                    && count < candidates.len()
                    && crate::qos::out_of_balance(
                        &free.iter().map(|(_, f)| *f).collect::<Vec<_>>(),
                        self.qos.threshold_rr,
                    ) =>
            {
                Ok(crate::qos::weighted_pick(&free, count, self.qos.prio_free, cursor))
            }
            _ => select_osts(spec, candidates, cursor),
        }
    }

    fn take(&mut self, osts: &[u32]) -> Vec<StripeObject> {
        osts.iter()
            .map(|ost| {
                let pool = self.ost_pools.get_mut(ost).expect("plan chose an OST with a pool");
                assert!(pool.available() > 0, "plan chose OST {ost} with an empty pool");
                let oid = pool.next_oid;
                pool.next_oid += 1;
                StripeObject { ost: *ost, fid: Fid::new(Fid::object_seq(*ost), oid, 0) }
            })
            .collect()
    }
}

/// Whether `spec` (or one of its components or mirrors) names a pool or OSTs: placement
/// the creator chose, which zoning leaves alone.
fn names_placement(spec: &StripeSpec) -> bool {
    spec.pool.is_some()
        || !spec.ost_list.is_empty()
        || spec.start_ost >= 0
        || spec.components.iter().any(|c| names_placement(&c.stripe))
        || spec.mirrors.iter().any(names_placement)
}

/// Puts every OST component of `spec` in `pool`.
fn set_pool(spec: &mut StripeSpec, pool: &str) {
    if spec.components.is_empty() && spec.mirrors.is_empty() {
        spec.pool = Some(pool.to_string());
    }
    for c in spec.components.iter_mut().filter(|c| !c.on_mdt) {
        set_pool(&mut c.stripe, pool);
    }
    for m in &mut spec.mirrors {
        set_pool(m, pool);
    }
}

pub struct Objects {
    pub state: Mutex<ObjectsState>,
    /// Wakes the refill task.
    pub refill_wake: Notify,
    /// Wakes creates waiting for a refill.
    pub refilled: Notify,
    cursor: AtomicU64,
    /// A pool with fewer objects than this is refilled: a reservation that leaves one below
    /// it wakes the refill task.
    pub refill_below: u64,
}

impl Objects {
    /// Pools refilled when they hold fewer than `refill_below` objects.
    pub fn new(refill_below: u64, data_on_mdt: bool, mdt: u32) -> Objects {
        Objects {
            state: Mutex::new(ObjectsState { data_on_mdt, mdt, ..ObjectsState::default() }),
            refill_wake: Notify::new(),
            refilled: Notify::new(),
            cursor: AtomicU64::new(0),
            refill_below,
        }
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, ObjectsState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the new map; `load` gives the persisted (next_oid, created_oid) of an OST seen
    /// for the first time, None when there is no record of it.
    pub fn set_map(&self, map: &ClusterMap, mut load: impl FnMut(u32) -> Option<(u32, u32)>) {
        let mut st = self.lock();
        st.map_version = map.version;
        st.up_osts = map.osts().filter(|t| t.state == TargetState::Up).map(|t| t.index).collect();
        st.up_osts.sort_unstable();
        st.pools_by_name = map.pools.clone();
        st.sync_mirror_pools.clone_from(&map.sync_mirror_pools);
        let mdt = st.mdt;
        for t in map.osts() {
            st.ost_pools.entry(t.index).or_insert_with(|| match load(t.index) {
                Some((next, created)) => OstPool::new(next, created),
                None => OstPool::unrecorded(mdt),
            });
        }
        // An OST taken out of the map (`weft del-ost`) is forgotten; its record stays in the
        // store, so that one added back under the same index starts past what it handed out.
        let in_map: std::collections::HashSet<u32> = map.osts().map(|t| t.index).collect();
        let dom = st.dom;
        st.ost_pools.retain(|o, _| in_map.contains(o) || Some(*o) == dom);
        st.max_create.retain(|o, _| in_map.contains(o));
        drop(st);
        self.refill_wake.notify_one();
    }

    /// Whether object target `ost` answers: an OST up in the map, or this MDT's own
    /// data-on-MDT target while it serves one (the map lists OSTs only: without it, the
    /// objects of removed data-on-MDT files were never destroyed).
    pub fn is_up(&self, ost: u32) -> bool {
        let st = self.lock();
        st.dom == Some(ost) || st.up_osts.binary_search(&ost).is_ok()
    }

    /// The layout a new file of `spec` gets here: where this MDT keeps no file data (a
    /// replicated MDT: its data would live on one replica's disk only), a data-on-MDT
    /// component goes to one OST over the same extent (`StripeSpec::off_mdt`), as Lustre
    /// places it when `dom_stripesize` is 0, so that `-L mdt` defaults keep working.
    pub fn planned(&self, spec: &weft_proto::StripeSpec) -> weft_proto::Layout {
        match spec.off_mdt().filter(|_| !self.lock().data_on_mdt) {
            Some(off) => weft_proto::Layout::planned(&off),
            None => weft_proto::Layout::planned(spec),
        }
    }

    /// Whether a new file of `layout` writes its mirrors synchronously by its pools' setting
    /// (`weft pool set POOL --sync-mirrors on`): it has mirrors, one of them in such a pool.
    pub fn sync_mirrors_by_pool(&self, layout: &weft_proto::Layout) -> bool {
        if !layout.is_mirrored() {
            return false;
        }
        let st = self.lock();
        layout.components.iter().any(|c| c.pool.as_ref().is_some_and(|p| st.sync_mirror_pools.contains(p)))
    }

    /// The spec of a new file created by `who` for job `jobid` under the zone rules: when
    /// the spec names no pool and no OST (from the request or an inherited default), the
    /// pool of the first rule that matches, in every component. Without rules, the spec as
    /// it is, after one test.
    pub fn zoned(&self, mut spec: StripeSpec, who: &weft_proto::msg::Identity, jobid: &str) -> StripeSpec {
        let st = self.lock();
        if st.zones.is_empty() || names_placement(&spec) {
            return spec;
        }
        if let Some(pool) = st.zones.pool_for(jobid, who.uid, who.gid, |p| st.zone_usable(p)) {
            set_pool(&mut spec, pool);
        }
        spec
    }

    /// Validates that a spec names only a known pool (for directory defaults).
    pub fn check_pool(&self, spec: &StripeSpec) -> WeftResult<()> {
        if let Some(p) = &spec.pool {
            if !self.lock().pools_by_name.contains_key(p) {
                return Err(WeftError::invalid(format!(
                    "pool '{p}' does not exist: create it with 'weft pool add' first"
                )));
            }
        }
        Ok(())
    }

    /// Sets `osp.OST.max_create_count` of `ost` (0 to [`OST_MAX_PRECREATE`]): 0 stops new
    /// objects there, any other value bounds each precreate. Kept in memory, as Lustre's
    /// `lctl set_param` (`set-param -P` keeps it in the map).
    pub fn set_max_create_count(&self, ost: u32, count: u32) -> WeftResult<()> {
        if count > OST_MAX_PRECREATE {
            return Err(WeftError::invalid(format!(
                "max_create_count {count}: 0 (no new objects) to {OST_MAX_PRECREATE} (the default)"
            )));
        }
        let mut st = self.lock();
        if count == OST_MAX_PRECREATE {
            st.max_create.remove(&ost);
        } else {
            st.max_create.insert(ost, count);
        }
        drop(st);
        self.refill_wake.notify_one();
        Ok(())
    }

    /// The data-on-MDT target of this MDT: its pool is kept filled from now on.
    pub fn serve_dom(&self, dom: u32, load: Option<(u32, u32)>) {
        let mut st = self.lock();
        st.dom = Some(dom);
        let mdt = st.mdt;
        st.ost_pools.entry(dom).or_insert_with(|| match load {
            Some((next, created)) => OstPool::new(next, created),
            None => OstPool::unrecorded(mdt),
        });
        drop(st);
        self.refill_wake.notify_one();
    }

    /// Reserves the objects of every part, without waiting (the writer's fallback when the
    /// layout changed since the request was prepared). On an error nothing is kept: the
    /// objects taken so far are returned in the reservation for release.
    pub fn reserve_now(&self, wants: &[(u32, StripeSpec)]) -> Result<Reservation, (Reservation, WeftError)> {
        let mut res = Reservation { parts: Vec::new() };
        for (id, spec) in wants {
            let cursor = self.cursor.fetch_add(1, Ordering::Relaxed);
            let mut st = self.lock();
            match st.plan(spec, cursor, true) {
                Ok(osts) => {
                    let osts = osts.expect("plan with give_up always decides");
                    res.parts.push((*id, spec.clone(), st.take(&osts)));
                }
                Err(e) => return Err((res, e)),
            }
        }
        Ok(res)
    }

    /// Reserves the objects of every part, waiting up to PRECREATE_WAIT_MS_MAX for refills.
    pub async fn reserve_all(&self, wants: &[(u32, StripeSpec)]) -> WeftResult<Reservation> {
        let mut res = Reservation { parts: Vec::new() };
        for (id, spec) in wants {
            // An error (no objects on some OST after the wait) leaves the empty objects taken
            // for earlier parts unused on their OSTs.
            res.parts.push((*id, spec.clone(), self.reserve(spec).await?));
        }
        Ok(res)
    }

    /// Reserves objects for one component, waiting up to PRECREATE_WAIT_MS_MAX for refills.
    async fn reserve(&self, spec: &StripeSpec) -> WeftResult<Vec<StripeObject>> {
        let cursor = self.cursor.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + Duration::from_millis(PRECREATE_WAIT_MS_MAX);
        loop {
            let notified = self.refilled.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let give_up = Instant::now() >= deadline;
                let mut st = self.lock();
                if let Some(osts) = st.plan(spec, cursor, give_up)? {
                    let objects = st.take(&osts);
                    let low =
                        osts.iter().any(|o| st.ost_pools.get(o).is_some_and(|p| p.available() < self.refill_below));
                    drop(st);
                    // Waking the refill task costs a thread switch: only when it has work.
                    if low {
                        self.refill_wake.notify_one();
                    }
                    return Ok(objects);
                }
            }
            self.refill_wake.notify_one();
            let _ = tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), notified).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(pools: &[(u32, u32, u32)]) -> ObjectsState {
        let mut st = ObjectsState::default();
        for (ost, next, created) in pools {
            st.up_osts.push(*ost);
            st.ost_pools.insert(*ost, OstPool { orphans_destroyed: true, ..OstPool::new(*next, *created) });
        }
        st.up_osts.sort_unstable();
        st
    }

    #[test]
    fn plan_prefers_osts_with_objects_and_waits_for_explicit_ones() {
        let st = state(&[(0, 1, 10), (7, 1, 0), (1000, 1, 10)]);
        let spec = StripeSpec::unset();
        // Cursor 1 would pick OST 7, which is empty: another OST is used instead.
        let osts = st.plan(&spec, 1, false).unwrap().unwrap();
        assert_eq!(osts.len(), 1);
        assert_ne!(osts[0], 7);
        let mut all = StripeSpec::unset();
        all.stripe_count = -1;
        assert_eq!(st.plan(&all, 0, false).unwrap(), None);
        assert_eq!(st.plan(&all, 0, true).unwrap().unwrap(), vec![0, 1000]);
        let mut seven = StripeSpec::unset();
        seven.start_ost = 7;
        assert_eq!(st.plan(&seven, 0, false).unwrap(), None);
        assert_eq!(st.plan(&seven, 0, true).unwrap_err().code, ErrorCode::NoSpace);
        let mut pooled = StripeSpec::unset();
        pooled.pool = Some("nope".into());
        assert_eq!(st.plan(&pooled, 0, true).unwrap_err().code, ErrorCode::Invalid);
    }

    #[test]
    fn placement_follows_free_space_once_out_of_balance_and_skips_drained_osts() {
        let mut st = state(&[(0, 1, 1000), (1, 1, 1000), (2, 1, 1000)]);
        let one = StripeSpec::unset();
        let count = |st: &ObjectsState, ost: u32| {
            (0..300).filter(|c| st.plan(&one, *c, false).unwrap().unwrap()[0] == ost).count()
        };
        // No free figures yet, or balanced: round robin, a third each.
        assert_eq!(count(&st, 2), 100);
        st.free = [(0, 100 << 30), (1, 95 << 30), (2, 90 << 30)].into();
        assert_eq!(count(&st, 2), 100, "within qos_threshold_rr: round robin");
        // OST 2 much emptier: it draws most new objects.
        st.free.insert(2, 1000 << 30);
        assert!(count(&st, 2) > 200, "{} of 300 on the emptier OST", count(&st, 2));
        // A threshold of 100%: round robin again.
        st.qos.threshold_rr = 100;
        assert_eq!(count(&st, 2), 100);
        // Drained: never chosen, and refused when named.
        st.max_create.insert(2, 0);
        assert_eq!(count(&st, 2), 0);
        let mut named = StripeSpec::unset();
        named.start_ost = 2;
        assert_eq!(st.plan(&named, 0, true).unwrap_err().code, ErrorCode::NoSpace);
    }

    #[test]
    fn zones_keep_their_jobs_files_and_everyone_elses_apart() {
        use crate::zone::ZoneCommand;
        use std::collections::BTreeSet;
        use weft_proto::layout::ComponentSpec;
        let objects = Objects::new(10, false, 0);
        *objects.lock() = state(&[(0, 1, 100), (1, 1, 100), (2, 1, 100), (3, 1, 100)]);
        {
            let mut st = objects.lock();
            st.pools_by_name =
                [("zone1".into(), vec![0, 1]), ("zone2".into(), vec![2]), ("empty".into(), vec![])].into();
            st.map_version = 1;
        }
        let who = weft_proto::msg::Identity { uid: 1000, gid: 1000, groups: Vec::new() };
        let unset = StripeSpec::unset;
        assert_eq!(objects.zoned(unset(), &who, "ckpt.1"), unset(), "no rule: the spec as it is");
        for cmd in ["jobid={ckpt*} pool=zone1", "jobid={ana*} pool=zone2", "uid={7} pool=empty"] {
            objects.lock().zones.apply(ZoneCommand::parse(cmd).unwrap()).unwrap();
        }
        let ckpt = objects.zoned(unset(), &who, "ckpt.1");
        assert_eq!(ckpt.pool.as_deref(), Some("zone1"));
        let ana = objects.zoned(unset(), &who, "ana.3");
        let other = objects.zoned(unset(), &who, "other");
        assert_eq!(other.pool, None);
        let seven = objects.zoned(unset(), &weft_proto::msg::Identity { uid: 7, ..who.clone() }, "x");
        assert_eq!(seven.pool, None, "an empty zone is passed over (Lustre ignores an empty pool)");
        // What the creator chose stays: a pool, or OSTs.
        let chosen = StripeSpec { pool: Some("zone2".into()), ..unset() };
        assert_eq!(objects.zoned(chosen.clone(), &who, "ckpt.1"), chosen);
        let on_two = StripeSpec { start_ost: 2, ..unset() };
        assert_eq!(objects.zoned(on_two.clone(), &who, "other"), on_two);
        // A composite spec: each OST component in the zone.
        let component = |end| ComponentSpec { end, on_mdt: false, stripe: unset() };
        let pfl = StripeSpec { components: vec![component(1 << 20), component(u64::MAX)], ..unset() };
        let zoned = objects.zoned(pfl, &who, "ana.1");
        assert!(zoned.components.iter().all(|c| c.stripe.pool.as_deref() == Some("zone2")), "{zoned:?}");

        let mut st = objects.lock();
        let on = |st: &ObjectsState, spec: &StripeSpec| -> BTreeSet<u32> {
            (0..40).flat_map(|c| st.plan(spec, c, true).unwrap().unwrap()).collect()
        };
        assert_eq!(on(&st, &ckpt), [0, 1].into());
        assert_eq!(on(&st, &ana), [2].into());
        assert_eq!(on(&st, &other), [3].into(), "off every zone");
        assert_eq!(on(&st, &seven), [3].into());
        assert_eq!(on(&st, &on_two), [2].into(), "named OSTs are the creator's choice");
        // The one OST outside the zones drained: the others go anywhere rather than nowhere.
        st.max_create.insert(3, 0);
        assert_eq!(on(&st, &other), [0, 1, 2].into());
        // A zone whose OSTs take nothing: ENOSPC, as a pool named by setstripe -p.
        st.max_create.insert(2, 0);
        let e = st.plan(&ana, 0, true).unwrap_err();
        assert!(e.code == ErrorCode::NoSpace && e.message.contains("pool 'zone2'"), "{e}");
        assert_eq!(st.zone_note("empty").as_deref(), Some("pool empty: ignored"));
        assert_eq!(st.zone_note("zone1"), None);
    }

    #[test]
    fn pool_arithmetic() {
        let p = OstPool::new(1, 0);
        assert_eq!((p.available(), p.refill_start()), (0, 1));
        let mut p = OstPool::new(5, 10);
        assert_eq!((p.available(), p.refill_start()), (0, 11), "nothing before the orphan cleanup");
        assert_eq!(p.orphans_above(), Some(4));
        p.orphans_cleaned(weft_proto::msg::ost::Orphans { last_oid: 10, destroyed: true });
        assert_eq!((p.available(), p.refill_start()), (6, 11));
        // An OST this MDS has no record of: nothing destroyed, start past its LAST_ID.
        let mut p = OstPool::unrecorded(0);
        assert_eq!(p.orphans_above(), None);
        p.orphans_cleaned(weft_proto::msg::ost::Orphans { last_oid: 700, destroyed: false });
        assert_eq!((p.available(), p.refill_start(), p.next_oid), (0, 701, 701));
        // A refused gap likewise: the ids up to LAST_ID are never handed out.
        let mut p = OstPool::new(5, 10);
        p.orphans_cleaned(weft_proto::msg::ost::Orphans { last_oid: 90_000, destroyed: false });
        assert_eq!((p.available(), p.refill_start()), (0, 90_001));
        // Handed out beyond what was recorded as created (crash between the two): never reuse.
        let p = OstPool::new(20, 10);
        assert_eq!((p.available(), p.refill_start()), (0, 20));
    }
}
