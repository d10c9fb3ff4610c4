//! The bandwidth planner (the QoS Planner of JGU Mainz's work): each OST has a capacity; a
//! reservation takes a throughput on its OSTs for a duration, and starts at the earliest time
//! at which each of them has room for it for the whole duration, given every reservation
//! planned before it. This is conservative backfilling: a reservation that fits into a gap
//! before a later one starts there, and never delays one planned earlier. When one ends early
//! (cancelled, or given back by its job) the reservations still waiting are placed again in
//! the order they were asked for, each at its earliest time, which is never later than where
//! it was.
//!
//! Rules over the map like [`crate::rules`], pure and given the time, so every decision is
//! tested without a clock. The plan lives in the map (`ClusterMap::qos`): replicated with the
//! MGS, kept across its restarts, and followed by every OSS, which enforces what is active
//! (weft-server's `reservations`).

use crate::limits::{
    RESERVATIONS_DONE_KEPT_MAX, RESERVATIONS_MAX, RESERVATIONS_PER_USER_MAX, RESERVATION_DONE_KEPT_MS,
    RESERVATION_DURATION_MS_MAX, RESERVATION_ID_BYTES_MAX, RESERVATION_START_AHEAD_MS_MAX,
};

use weft_proto::msg::qos::{
    OstCapacity, QosPlan, Reservation, ReservationState, ReserveRequest, Throughput, SLURM_PREFIX,
};
use weft_proto::msg::{target_name, ClusterMap, TargetKind, TargetState};
use weft_proto::{ErrorCode, WeftError, WeftResult};

/// Sets (or with both units None, clears) the capacity of `osts` at `now_ms`.
pub fn set_capacity(map: &mut ClusterMap, osts: &[u32], capacity: OstCapacity, now_ms: u64) -> WeftResult<bool> {
    if osts.is_empty() {
        return Err(WeftError::invalid("name the OSTs whose capacity to set"));
    }
    for &ost in osts {
        if !map.osts().any(|t| t.index == ost) {
            return Err(WeftError::not_found(format!("{} is not in the file system", ost_name(map, ost))));
        }
    }
    if capacity.bytes == Some(0) || capacity.requests == Some(0) {
        return Err(WeftError::invalid("a capacity of 0: leave the unit out to clear it"));
    }
    let mut changed = false;
    for &ost in osts {
        let before = map.qos.capacity.get(&ost).copied();
        let after = (capacity != OstCapacity::default()).then_some(capacity);
        if before != after {
            changed = true;
            match after {
                Some(c) => map.qos.capacity.insert(ost, c),
                None => map.qos.capacity.remove(&ost),
            };
        }
    }
    if !changed {
        return Ok(false);
    }
    // What is planned must still fit: a capacity is not lowered under reservations that hold
    // it (cancel them first); a raised one lets the waiting start earlier.
    let now_ms = latest(&map.qos, now_ms);
    for (i, r) in map.qos.reservations.iter().enumerate() {
        if r.state(now_ms) == ReservationState::Done {
            continue;
        }
        for &ost in &r.osts {
            let capacity = capacity_of(map, ost, r.throughput);
            let held = load(&map.qos, Some(i), ost, r.throughput, r.start_ms.max(now_ms), r.end_ms());
            if held.saturating_add(r.per_ost().value()) > capacity {
                return Err(WeftError::invalid(format!(
                    "reservation '{}' holds {} of {} then: cancel it first, or change the capacity after it ends",
                    r.id,
                    r.per_ost(),
                    ost_name(map, ost)
                )));
            }
        }
    }
    replan(map, now_ms);
    Ok(true)
}

/// The capacity of `ost` in `unit`'s unit (0: none set).
fn capacity_of(map: &ClusterMap, ost: u32, unit: Throughput) -> u64 {
    map.qos.capacity.get(&ost).and_then(|c| c.of(unit)).unwrap_or(0)
}

/// `now_ms`, or the latest time the plan already records if the clock went back: decisions
/// follow each other in time whatever the leader's clock did.
fn latest(plan: &QosPlan, now_ms: u64) -> u64 {
    plan.reservations.iter().flat_map(|r| [r.submitted_ms, r.ended_ms.unwrap_or(0)]).fold(now_ms, u64::max)
}

/// Plans `req` for `uid` at `now_ms` (see the module documentation).
pub fn reserve(map: &mut ClusterMap, req: &ReserveRequest, uid: u32, now_ms: u64) -> WeftResult<bool> {
    check_name("reservation id", &req.id)?;
    let job = if req.job.is_empty() { req.id.clone() } else { req.job.clone() };
    check_name("job id", &job)?;
    if req.duration_ms == 0 || req.duration_ms > RESERVATION_DURATION_MS_MAX {
        return Err(WeftError::invalid(format!(
            "a reservation lasts 1 ms to {} days",
            RESERVATION_DURATION_MS_MAX / 86_400_000
        )));
    }
    if req.earliest_ms > now_ms.saturating_add(RESERVATION_START_AHEAD_MS_MAX) {
        return Err(WeftError::invalid(format!(
            "a reservation starts within {} days",
            RESERVATION_START_AHEAD_MS_MAX / 86_400_000
        )));
    }
    let mut osts = req.osts.clone();
    osts.sort_unstable();
    osts.dedup();
    if osts.is_empty() {
        return Err(WeftError::invalid("a reservation needs OSTs: name files, directories or a pool"));
    }
    if req.id.starts_with(SLURM_PREFIX) && uid != 0 {
        return Err(WeftError::new(
            ErrorCode::Perm,
            format!("ids '{SLURM_PREFIX}...' are the Slurm prolog's (root): take another id"),
        ));
    }
    let now_ms = latest(&map.qos, now_ms);
    prune(&mut map.qos, now_ms);
    if let Some(r) = map.qos.get(&req.id).filter(|r| r.state(now_ms) != ReservationState::Done) {
        return Err(WeftError::new(
            ErrorCode::Exists,
            format!(
                "reservation '{}' is {} already: cancel it first, or take another id",
                r.id,
                r.state(now_ms).name()
            ),
        ));
    }
    let live = map.qos.live(now_ms).count();
    if live >= RESERVATIONS_MAX {
        return Err(WeftError::new(
            ErrorCode::NoSpace,
            format!("{RESERVATIONS_MAX} reservations are planned or active: wait for some to end"),
        ));
    }
    let own = map.qos.live(now_ms).filter(|r| r.uid == uid).count();
    if uid != 0 && own >= RESERVATIONS_PER_USER_MAX {
        return Err(WeftError::new(
            ErrorCode::NoSpace,
            format!("uid {uid} has {own} reservations planned or active, the most a user may: cancel some"),
        ));
    }
    let mut new = Reservation {
        id: req.id.clone(),
        job,
        throughput: req.throughput,
        osts,
        submitted_ms: now_ms,
        earliest_ms: req.earliest_ms.max(now_ms),
        start_ms: 0,
        duration_ms: req.duration_ms,
        ended_ms: None,
        uid,
    };
    let share = new.per_ost().value();
    for &ost in &new.osts {
        let Some(target) = map.osts().find(|t| t.index == ost) else {
            return Err(WeftError::not_found(format!("{} is not in the file system", ost_name(map, ost))));
        };
        if target.state != TargetState::Up {
            return Err(WeftError::new(
                ErrorCode::Busy,
                format!("{} is down: its bandwidth cannot be promised until it is back", ost_name(map, ost)),
            ));
        }
        let Some(capacity) = map.qos.capacity.get(&ost).and_then(|c| c.of(req.throughput)) else {
            return Err(WeftError::invalid(format!(
                "{} has no capacity in {}: set it with 'weft qos capacity' or measure it with 'weft qos calibrate'",
                ost_name(map, ost),
                req.throughput.unit()
            )));
        };
        if share > capacity {
            let free = capacity.saturating_sub(load(&map.qos, None, ost, req.throughput, now_ms, now_ms + 1));
            let unit = req.throughput;
            return Err(WeftError::invalid(format!(
                "reservation '{}' asks {} of each of its {} OSTs ({} {}), over {}'s capacity of {} (free now: {}): \
                 at most {} in all on these OSTs",
                new.id,
                unit.with(share),
                new.osts.len(),
                share,
                unit.unit(),
                ost_name(map, ost),
                unit.with(capacity),
                unit.with(free),
                unit.with(capacity.saturating_mul(new.osts.len() as u64))
            )));
        }
    }
    new.start_ms = earliest_start(map, &new, None, new.earliest_ms, now_ms);
    map.qos.reservations.push(new);
    Ok(true)
}

/// Ends reservation `id` at `now_ms` for `uid` (its owner or root), and moves the waiting
/// ones earlier where they now fit. One already done is no change.
pub fn cancel(map: &mut ClusterMap, id: &str, uid: u32, now_ms: u64) -> WeftResult<bool> {
    let now_ms = latest(&map.qos, now_ms);
    let Some(i) = map.qos.reservations.iter().rposition(|r| r.id == id) else {
        return Err(WeftError::not_found(format!("no reservation '{id}'")));
    };
    let r = &mut map.qos.reservations[i];
    if uid != 0 && uid != r.uid {
        return Err(WeftError::new(
            ErrorCode::Perm,
            format!("reservation '{id}' is uid {}'s: only it or root cancels it", r.uid),
        ));
    }
    if r.state(now_ms) == ReservationState::Done {
        return Ok(false);
    }
    r.ended_ms = Some(now_ms);
    replan(map, now_ms);
    prune(&mut map.qos, now_ms);
    Ok(true)
}

/// Places every reservation that has not started again, in the order they were asked for,
/// each at its earliest time (never later than it was: its own place is still free).
fn replan(map: &mut ClusterMap, now_ms: u64) {
    for i in 0..map.qos.reservations.len() {
        let r = &map.qos.reservations[i];
        if r.state(now_ms) != ReservationState::Scheduled {
            continue;
        }
        let from = r.earliest_ms.max(now_ms);
        let start = earliest_start(map, r, Some(i), from, now_ms);
        let r = &mut map.qos.reservations[i];
        if start < r.start_ms {
            r.start_ms = start;
        }
    }
}

/// The earliest time from `from` at which `r` fits on every one of its OSTs for its whole
/// duration, beside every reservation not done but `skip` (its own index, when placed again).
/// Candidates are `from` and the ends of the others: a load only falls at an end.
fn earliest_start(map: &ClusterMap, r: &Reservation, skip: Option<usize>, from: u64, now_ms: u64) -> u64 {
    let share = r.per_ost().value();
    let mut candidates: Vec<u64> = std::iter::once(from)
        .chain(
            map.qos
                .reservations
                .iter()
                .enumerate()
                .filter(|(i, o)| Some(*i) != skip && o.state(now_ms) != ReservationState::Done)
                .map(|(_, o)| o.end_ms())
                .filter(|&end| end > from),
        )
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    for &start in &candidates {
        let end = start.saturating_add(r.duration_ms);
        let fits = r.osts.iter().all(|&ost| {
            load(&map.qos, skip, ost, r.throughput, start, end).saturating_add(share)
                <= capacity_of(map, ost, r.throughput)
        });
        if fits {
            return start;
        }
    }
    // After every other one ends it fits (its share is within the capacity, checked first).
    candidates.last().copied().unwrap_or(from)
}

/// The most that reservations other than `skip` hold of `ost`, in `unit`'s unit, at any time
/// within `[start, end)`. The load only rises where one starts, so it is looked at there.
fn load(plan: &QosPlan, skip: Option<usize>, ost: u32, unit: Throughput, start: u64, end: u64) -> u64 {
    let same_unit = |r: &Reservation| std::mem::discriminant(&r.throughput) == std::mem::discriminant(&unit);
    let holding: Vec<&Reservation> = plan
        .reservations
        .iter()
        .enumerate()
        .filter(|(i, r)| Some(*i) != skip && same_unit(r) && r.osts.contains(&ost))
        .map(|(_, r)| r)
        .filter(|r| r.start_ms < end && r.end_ms() > start.max(r.start_ms))
        .collect();
    std::iter::once(start)
        .chain(holding.iter().map(|r| r.start_ms).filter(|&s| s > start && s < end))
        .map(|at| {
            holding.iter().filter(|r| r.start_ms <= at && at < r.end_ms()).map(|r| r.per_ost().value()).sum::<u64>()
        })
        .max()
        .unwrap_or(0)
}

/// Forgets reservations done long ago, and past the number kept the ones that ended first.
fn prune(plan: &mut QosPlan, now_ms: u64) {
    let done = |r: &Reservation| r.state(now_ms) == ReservationState::Done;
    plan.reservations.retain(|r| !done(r) || r.end_ms().saturating_add(RESERVATION_DONE_KEPT_MS) > now_ms);
    let mut ends: Vec<u64> = plan.reservations.iter().filter(|r| done(r)).map(Reservation::end_ms).collect();
    if ends.len() <= RESERVATIONS_DONE_KEPT_MAX {
        return;
    }
    ends.sort_unstable();
    let keep_from = ends[ends.len() - RESERVATIONS_DONE_KEPT_MAX];
    let mut extra = ends.iter().filter(|&&e| e < keep_from).count();
    plan.reservations.retain(|r| {
        let drop = extra > 0 && done(r) && r.end_ms() < keep_from;
        extra -= usize::from(drop);
        !drop
    });
}

/// Ids and job ids name TBF classes (`jobid={...}`): plain characters only.
fn check_name(what: &str, name: &str) -> WeftResult<()> {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"._-@:".contains(&b);
    if name.is_empty() || name.len() > RESERVATION_ID_BYTES_MAX || !name.bytes().all(plain) {
        return Err(WeftError::invalid(format!(
            "{what} '{name}': 1 to {RESERVATION_ID_BYTES_MAX} letters, digits or . _ - @ :"
        )));
    }
    Ok(())
}

fn ost_name(map: &ClusterMap, ost: u32) -> String {
    target_name(&map.fsname, TargetKind::Ost, ost)
}

#[cfg(test)]
#[path = "planner_tests.rs"]
mod tests;
