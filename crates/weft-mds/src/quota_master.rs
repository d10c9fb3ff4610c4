//! The quota master's block grants (Lustre's QMT): each OST counts the blocks of its
//! objects per id and refuses a write that would take an id past the share of its limit the
//! master granted that OST. Every round (a second, and at once when a client's write was
//! refused) the master asks every OST for its blocks, and gives each limited id's room left
//! (its limit less all its blocks) to the OSTs: in proportion to how much each grew since
//! the last round, or, for a client's acquire, all of it to the OST that refused, after
//! taking back what the others hold unused. A write past the limit is thus refused within
//! what one OST can write between two rounds, and a striped file's writes are spread as its
//! stripes are. Soft limits: past one, the grace time starts (recorded in the MDT, as the
//! inode limits' is); when it is over, the id may not grow.
//!
//! Grants live in the OSTs' memory: an OST that restarts is unlimited until the next round
//! grants again. Ids with no block limit are granted nothing (not limited), and with no
//! block limit anywhere a round asks nothing of the OSTs.

use crate::background::internal;
use crate::schema::QuotaRecord;
use crate::store::Tables;
use crate::writer::{InternalOp, Queue};
use crate::Core;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use weft_proto::msg::quota::{QuotaGrant, QuotaKind, QuotaLimits, QuotaOwner, DEFAULT_ID};
use weft_proto::WeftResult;

/// How often the master grants again.
pub const QUOTA_ROUND_MS: u64 = 1000;

/// What the master remembers between rounds.
#[derive(Default)]
pub struct Master {
    state: tokio::sync::Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Blocks (KiB) per (kind, id, OST) at the last round: growth since is each OST's weight.
    last_used: HashMap<(QuotaKind, u32, u32), u64>,
    /// Whether the last round granted anything (then a round with no limits left clears).
    granted: bool,
}

/// One id's limits as the master applies them.
struct Limited {
    kind: QuotaKind,
    id: u32,
    limits: QuotaLimits,
    rec: QuotaRecord,
}

/// The ids with block limits: their own, and for kinds with default block limits every id
/// with blocks somewhere (`seen`).
fn limited_ids(
    view: &Tables,
    records: Vec<(QuotaKind, u32, QuotaRecord)>,
    seen: &BTreeMap<(QuotaKind, u32), u64>,
) -> WeftResult<Vec<Limited>> {
    let mut defaults: HashMap<QuotaKind, QuotaLimits> = HashMap::new();
    let mut own: BTreeMap<(QuotaKind, u32), QuotaRecord> = BTreeMap::new();
    for (kind, id, rec) in records {
        if id == DEFAULT_ID {
            defaults.insert(kind, rec.limits);
        } else {
            own.insert((kind, id), rec);
        }
    }
    let mut out = Vec::new();
    for (&(kind, id), rec) in &own {
        let has_own = rec.limits.block_hard_kib != 0 || rec.limits.block_soft_kib != 0;
        let limits = if has_own { rec.limits } else { defaults.get(&kind).copied().unwrap_or_default() };
        out.push(Limited { kind, id, limits, rec: *rec });
    }
    for &(kind, id) in seen.keys() {
        if id == 0 || own.contains_key(&(kind, id)) {
            continue;
        }
        if let Some(&limits) = defaults.get(&kind) {
            // An id following the default: its grace deadline, if any, is in its record.
            let rec = view.quota_record(kind, id)?.unwrap_or_default();
            out.push(Limited { kind, id, limits, rec });
        }
    }
    out.retain(|l| l.id != 0);
    Ok(out)
}

/// The most `l` may hold in all (KiB) given `total` now, None for no bound; and the grace
/// deadline to record when it changes.
fn bound(l: &Limited, total: u64, now: u64, grace_s: u64) -> (Option<u64>, Option<Option<u64>>) {
    let QuotaLimits { block_soft_kib: soft, block_hard_kib: hard, .. } = l.limits;
    let mut grace_change = None;
    let mut bound = (hard != 0).then_some(hard);
    if soft != 0 && total > soft {
        match l.rec.block_grace_end {
            None => grace_change = Some(Some(now.saturating_add(grace_s))),
            // Over since longer than the grace time: no more growth.
            Some(end) if now >= end => bound = Some(bound.map_or(total, |b| b.min(total))),
            Some(_) => {}
        }
    } else if l.rec.block_grace_end.is_some() {
        grace_change = Some(None);
    }
    (bound, grace_change)
}

impl Master {
    /// One round: asks every OST for its blocks, grants each limited id's room, records
    /// grace deadlines. With `focus` (a client's write refused by that OST for that owner),
    /// the room goes to that OST, once the others hold no more than they use; answers
    /// whether it has room for the owner now.
    pub async fn round(&self, core: &Arc<Core>, queue: &Queue, focus: Option<(QuotaOwner, u32)>) -> WeftResult<bool> {
        let mut st = self.state.lock().await;
        let osts: Vec<u32> = {
            let objects = core.objects.lock();
            objects.up_osts.iter().copied().chain(objects.dom).collect()
        };
        let view = core.read_view();
        let records = view.quota_block_records()?;
        if records.is_empty() && !st.granted {
            return Ok(false);
        }
        // Every OST's blocks per id; an OST that does not answer keeps its grants.
        let asked = futures::future::join_all(osts.iter().map(|&ost| {
            let call = core.targets.quota_usage(ost);
            async move { (ost, call.await) }
        }))
        .await;
        let mut used: HashMap<u32, HashMap<(QuotaKind, u32), u64>> = HashMap::new();
        let mut totals: BTreeMap<(QuotaKind, u32), u64> = BTreeMap::new();
        for (ost, answer) in asked {
            match answer {
                Ok(entries) => {
                    let per: HashMap<_, _> = entries.iter().map(|e| ((e.kind, e.id), e.used_kib)).collect();
                    for (&k, &v) in &per {
                        *totals.entry(k).or_insert(0) += v;
                    }
                    used.insert(ost, per);
                }
                Err(e) => {
                    // Its blocks as the last round found them still count: the room given to
                    // the others must not include what it holds.
                    tracing::debug!(ost, error = %e, "quota round: the OST did not give its blocks");
                    for (&(kind, id, o), &v) in &st.last_used {
                        if o == ost {
                            *totals.entry((kind, id)).or_insert(0) += v;
                        }
                    }
                }
            }
        }
        let limited = limited_ids(&view, records, &totals)?;
        let now = core.clock.now().sec.max(0) as u64;
        let mut grants: HashMap<u32, Vec<QuotaGrant>> = used.keys().map(|&o| (o, Vec::new())).collect();
        let mut room_for_focus = focus.is_some();
        for l in &limited {
            let key = (l.kind, l.id);
            let total = totals.get(&key).copied().unwrap_or(0);
            let grace_s = view.quota_grace(l.kind)?.block_s;
            let (bound, grace_change) = bound(l, total, now, grace_s);
            if let Some(end) = grace_change {
                internal(queue, InternalOp::QuotaBlockGrace { kind: l.kind, id: l.id, end }).await?;
            }
            let Some(bound) = bound else { continue };
            let room = bound.saturating_sub(total);
            let of = |ost: u32| used.get(&ost).and_then(|u| u.get(&key)).copied().unwrap_or(0);
            let focus_ost = focus.filter(|(owner, _)| owner.id(l.kind) == l.id).map(|(_, ost)| ost);
            if let Some(f) = focus_ost {
                // The asking OST gets most of the room; the others keep a little each, so
                // that a writer there is not refused at once in turn.
                room_for_focus &= room > 0;
                let n = used.len().max(1) as u64;
                let keep = room / (4 * n);
                let to_focus = room - keep * (n - 1);
                for &ost in used.keys() {
                    let share = if ost == f { to_focus } else { keep };
                    grants.entry(ost).or_default().push(QuotaGrant {
                        kind: l.kind,
                        id: l.id,
                        grant_kib: of(ost) + share,
                    });
                }
            } else {
                // In proportion to growth since the last round, each OST at least an equal
                // part of a tenth of the room.
                let growth =
                    |ost: u32| of(ost).saturating_sub(st.last_used.get(&(l.kind, l.id, ost)).copied().unwrap_or(0));
                let n = used.len().max(1) as u64;
                let floor = room / 10 / n;
                let weights: u64 = used.keys().map(|&o| growth(o)).sum();
                let spread = room - floor * n;
                for &ost in used.keys() {
                    let share = floor
                        + if weights == 0 {
                            spread / n
                        } else {
                            (u128::from(spread) * u128::from(growth(ost)) / u128::from(weights)) as u64
                        };
                    grants.entry(ost).or_default().push(QuotaGrant {
                        kind: l.kind,
                        id: l.id,
                        grant_kib: of(ost) + share,
                    });
                }
            }
        }
        // What the OSTs that answered hold now; those that did not keep their last known.
        let answered: Vec<u32> = used.keys().copied().collect();
        st.last_used.retain(|&(_, _, ost), _| !answered.contains(&ost));
        st.last_used
            .extend(used.iter().flat_map(|(&ost, per)| per.iter().map(move |(&(k, id), &v)| ((k, id, ost), v))));
        st.granted = grants.values().any(|g| !g.is_empty());
        // The others first: what they held unused is taken back before the focus gets it.
        let focus_ost = focus.map(|(_, ost)| ost);
        let (first, last): (Vec<_>, Vec<_>) = grants.into_iter().partition(|(ost, _)| Some(*ost) != focus_ost);
        for batch in [first, last] {
            let pushed = futures::future::join_all(batch.into_iter().map(|(ost, g)| {
                let call = core.targets.quota_grants(ost, g);
                async move { (ost, call.await) }
            }))
            .await;
            for (ost, r) in pushed {
                if let Err(e) = r {
                    tracing::debug!(ost, error = %e, "quota round: the OST did not take its grants");
                }
            }
        }
        Ok(room_for_focus)
    }
}

/// Grants every second while the MDS runs (and leads, for a replicated MDT).
pub(crate) async fn quota_task(core: Arc<Core>, queue: Queue) {
    loop {
        tokio::time::sleep(Duration::from_millis(QUOTA_ROUND_MS)).await;
        // MDT0 is the quota master of a file system with several MDTs: the OSTs' grants
        // come from one master.
        if core.lease_ok().is_err() || core.mdt_index != 0 {
            continue;
        }
        if let Err(e) = core.quota.round(&core, &queue, None).await {
            tracing::debug!(error = %e, "quota round failed");
        }
    }
}
