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
    RESERVATIONS_DONE_KEPT_MAX, RESERVATIONS_MAX, RESERVATION_DONE_KEPT_MS, RESERVATION_DURATION_MS_MAX,
    RESERVATION_ID_BYTES_MAX, RESERVATION_START_AHEAD_MS_MAX,
};
use weft_proto::msg::qos::{OstCapacity, QosPlan, Reservation, ReservationState, ReserveRequest, Throughput};
use weft_proto::msg::{target_name, ClusterMap, TargetKind, TargetState};
use weft_proto::{ErrorCode, WeftError, WeftResult};

/// Sets (or with both units None, clears) the capacity of `osts`.
pub fn set_capacity(map: &mut ClusterMap, osts: &[u32], capacity: OstCapacity) -> WeftResult<bool> {
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
    Ok(changed)
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
    let live = map.qos.reservations.iter().filter(|r| r.state(now_ms) != ReservationState::Done).count();
    if live >= RESERVATIONS_MAX {
        return Err(WeftError::new(
            ErrorCode::NoSpace,
            format!("{RESERVATIONS_MAX} reservations are planned or active: wait for some to end"),
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
            return Err(WeftError::invalid(format!(
                "reservation '{}' asks {} {} of each of its {} OSTs, over {}'s capacity of {capacity} (free now: {free})",
                new.id,
                share,
                req.throughput.unit(),
                new.osts.len(),
                ost_name(map, ost)
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
            let capacity = map.qos.capacity.get(&ost).and_then(|c| c.of(r.throughput)).unwrap_or(0);
            load(&map.qos, skip, ost, r.throughput, start, end) + share <= capacity
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

/// Forgets reservations done long ago, and the oldest done ones past the number kept.
fn prune(plan: &mut QosPlan, now_ms: u64) {
    plan.reservations
        .retain(|r| r.state(now_ms) != ReservationState::Done || r.end_ms() + RESERVATION_DONE_KEPT_MS > now_ms);
    let done = plan.reservations.iter().filter(|r| r.state(now_ms) == ReservationState::Done).count();
    let mut extra = done.saturating_sub(RESERVATIONS_DONE_KEPT_MAX);
    plan.reservations.retain(|r| {
        let drop = extra > 0 && r.state(now_ms) == ReservationState::Done;
        if drop {
            extra -= 1;
        }
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
