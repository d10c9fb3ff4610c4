use super::*;
use crate::limits::RESERVATIONS_PER_USER_MAX;
use weft_proto::msg::TargetInfo;

const M: u64 = 1 << 20;

/// A file system of `osts` OSTs of 100 MiB/s each.
fn map(osts: u32) -> ClusterMap {
    let mut map = ClusterMap { version: 1, fsname: "fs".into(), ..Default::default() };
    for i in 0..osts {
        let t = TargetInfo::new(TargetKind::Ost, i, "127.0.0.1:1");
        crate::rules::register(&mut map, &t).unwrap();
    }
    let all: Vec<u32> = (0..osts).collect();
    set_capacity(&mut map, &all, OstCapacity { bytes: Some(100 * M), requests: None }, 0).unwrap();
    map
}

fn ask(id: &str, mib: u64, osts: &[u32], secs: u64) -> ReserveRequest {
    ReserveRequest {
        id: id.into(),
        job: String::new(),
        throughput: Throughput::Bytes(mib * M),
        osts: osts.to_vec(),
        earliest_ms: 0,
        duration_ms: secs * 1000,
    }
}

fn start(map: &ClusterMap, id: &str) -> u64 {
    map.qos.get(id).unwrap().start_ms
}

#[test]
fn a_reservation_that_fits_starts_at_once_and_one_that_does_not_waits_for_the_first_to_end() {
    let mut m = map(2);
    reserve(&mut m, &ask("a", 120, &[0, 1], 10), 0, 1000).unwrap();
    assert_eq!(start(&m, "a"), 1000);
    assert_eq!(m.qos.get("a").unwrap().per_ost(), Throughput::Bytes(60 * M));
    // 60 + 60 MiB/s of each OST's 100: the second waits until the first ends.
    reserve(&mut m, &ask("b", 120, &[0, 1], 10), 0, 2000).unwrap();
    assert_eq!(start(&m, "b"), 11_000);
    assert_eq!(m.qos.state("b", 5000), ReservationState::Scheduled);
    assert_eq!(m.qos.state("a", 5000), ReservationState::Active);
    assert_eq!(m.qos.state("b", 11_000), ReservationState::Active);
    assert_eq!(m.qos.state("a", 11_000), ReservationState::Done);
    assert_eq!(m.qos.state("nosuch", 11_000), ReservationState::Undefined);
    // One that fits beside the first on another OST's free part starts at once.
    reserve(&mut m, &ask("c", 40, &[0], 5), 0, 3000).unwrap();
    assert_eq!(start(&m, "c"), 3000);
}

#[test]
fn a_short_one_fills_a_gap_before_a_later_one_without_delaying_it() {
    let mut m = map(1);
    reserve(&mut m, &ask("long", 80, &[0], 10), 0, 0).unwrap();
    reserve(&mut m, &ask("big", 90, &[0], 10), 0, 0).unwrap();
    assert_eq!(start(&m, "big"), 10_000);
    // 20 MiB/s for 5 s fits beside "long" now (80 + 20 = 100).
    reserve(&mut m, &ask("small", 20, &[0], 5), 0, 0).unwrap();
    assert_eq!(start(&m, "small"), 0);
    // 20 MiB/s for 15 s would overlap "big" (90 + 20 > 100): after it.
    reserve(&mut m, &ask("tail", 20, &[0], 15), 0, 0).unwrap();
    assert_eq!(start(&m, "tail"), 20_000);
    assert_eq!(start(&m, "big"), 10_000, "never delayed by a later one");
}

#[test]
fn a_cancel_gives_the_bandwidth_back_and_the_waiting_move_earlier() {
    let mut m = map(1);
    reserve(&mut m, &ask("a", 60, &[0], 100), 7, 0).unwrap();
    reserve(&mut m, &ask("b", 60, &[0], 10), 8, 0).unwrap();
    assert_eq!(start(&m, "b"), 100_000);
    let e = cancel(&mut m, "a", 8, 5000).unwrap_err();
    assert_eq!(e.code, ErrorCode::Perm, "{}", e.message);
    assert!(cancel(&mut m, "a", 7, 5000).unwrap());
    assert_eq!(m.qos.state("a", 5000), ReservationState::Done);
    assert_eq!(start(&m, "b"), 5000, "moved to the cancel");
    assert!(!cancel(&mut m, "a", 0, 6000).unwrap(), "a second cancel changes nothing");
    // Cancelled while still scheduled: done at once, and never held anything.
    reserve(&mut m, &ask("c", 60, &[0], 10), 0, 6000).unwrap();
    assert_eq!(start(&m, "c"), 15_000);
    assert!(cancel(&mut m, "c", 0, 7000).unwrap());
    assert_eq!(m.qos.state("c", 7000), ReservationState::Done);
    reserve(&mut m, &ask("d", 40, &[0], 10), 0, 8000).unwrap();
    assert_eq!(start(&m, "d"), 8000);
    // The id may be used again once done (b and d fill the OST until b ends).
    reserve(&mut m, &ask("c", 10, &[0], 1), 0, 9000).unwrap();
    assert_eq!(m.qos.state("c", 9000), ReservationState::Scheduled);
    assert_eq!(start(&m, "c"), 15_000);
}

#[test]
fn bad_reservations_are_refused_with_the_reason() {
    let mut m = map(2);
    reserve(&mut m, &ask("a", 60, &[0], 100), 0, 0).unwrap();
    let e = reserve(&mut m, &ask("x", 150, &[0], 10), 0, 0).unwrap_err();
    assert!(
        e.message.contains("asks 150M of each of its 1 OSTs (157286400 bytes/s), over fs-OST0000's capacity of 100M (free now: 40M): at most 100M in all"),
        "{}",
        e.message
    );
    let e = reserve(&mut m, &ask("a", 1, &[1], 10), 0, 0).unwrap_err();
    assert!(e.message.contains("'a' is active already"), "{}", e.message);
    let e = reserve(&mut m, &ask("bad id", 1, &[1], 10), 0, 0).unwrap_err();
    assert!(e.message.contains("letters, digits"), "{}", e.message);
    let e = reserve(&mut m, &ask("y", 1, &[], 10), 0, 0).unwrap_err();
    assert!(e.message.contains("needs OSTs"), "{}", e.message);
    let e = reserve(&mut m, &ask("y", 1, &[5], 10), 0, 0).unwrap_err();
    assert!(e.message.contains("fs-OST0005 is not in the file system"), "{}", e.message);
    let e = reserve(&mut m, &ask("y", 1, &[0], 0), 0, 0).unwrap_err();
    assert!(e.message.contains("lasts"), "{}", e.message);
    let rps = ReserveRequest { throughput: Throughput::Requests(10), ..ask("y", 1, &[0], 1) };
    let e = reserve(&mut m, &rps, 0, 0).unwrap_err();
    assert!(e.message.contains("no capacity in requests/s"), "{}", e.message);
    set_target_state(&mut m, 1);
    let e = reserve(&mut m, &ask("y", 1, &[1], 10), 0, 0).unwrap_err();
    assert!(e.message.contains("fs-OST0001 is down"), "{}", e.message);
    assert_eq!(m.qos.reservations.len(), 1, "nothing refused was kept");
    let e = cancel(&mut m, "nosuch", 0, 0).unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
}

fn set_target_state(m: &mut ClusterMap, ost: u32) {
    crate::rules::set_target_state(m, TargetKind::Ost, ost, TargetState::Down).unwrap();
}

#[test]
fn units_do_not_share_capacity_and_requests_have_their_own() {
    let mut m = map(1);
    set_capacity(&mut m, &[0], OstCapacity { bytes: Some(100 * M), requests: Some(1000) }, 0).unwrap();
    reserve(&mut m, &ask("bytes", 100, &[0], 10), 0, 0).unwrap();
    let rps = ReserveRequest { throughput: Throughput::Requests(600), ..ask("ops", 1, &[0], 10) };
    reserve(&mut m, &rps, 0, 0).unwrap();
    assert_eq!(start(&m, "ops"), 0, "requests and bytes are separate capacities");
    let rps2 = ReserveRequest { throughput: Throughput::Requests(600), ..ask("ops2", 1, &[0], 10) };
    reserve(&mut m, &rps2, 0, 0).unwrap();
    assert_eq!(start(&m, "ops2"), 10_000);
}

#[test]
fn done_reservations_are_forgotten_after_an_hour() {
    let mut m = map(1);
    reserve(&mut m, &ask("old", 10, &[0], 1), 0, 0).unwrap();
    reserve(&mut m, &ask("new", 10, &[0], 1), 0, RESERVATION_DONE_KEPT_MS).unwrap();
    assert_eq!(m.qos.state("old", RESERVATION_DONE_KEPT_MS), ReservationState::Done, "kept an hour");
    reserve(&mut m, &ask("newer", 10, &[0], 1), 0, RESERVATION_DONE_KEPT_MS + 2000).unwrap();
    assert_eq!(m.qos.state("old", RESERVATION_DONE_KEPT_MS + 2000), ReservationState::Undefined);
    assert_eq!(m.qos.state("new", RESERVATION_DONE_KEPT_MS + 2000), ReservationState::Done);
}

#[test]
fn a_capacity_is_not_lowered_under_what_is_planned_and_a_raised_one_lets_the_waiting_start() {
    let mut m = map(1);
    reserve(&mut m, &ask("a", 60, &[0], 100), 0, 0).unwrap();
    reserve(&mut m, &ask("b", 60, &[0], 10), 0, 0).unwrap();
    assert_eq!(start(&m, "b"), 100_000);
    let e = set_capacity(&mut m, &[0], OstCapacity { bytes: Some(50 * M), requests: None }, 1000).unwrap_err();
    assert!(e.message.contains("reservation 'a' holds 60M of fs-OST0000"), "{}", e.message);
    assert!(set_capacity(&mut m, &[0], OstCapacity { bytes: Some(120 * M), requests: None }, 1000).unwrap());
    assert_eq!(start(&m, "b"), 1000, "room for both now");
}

#[test]
fn a_user_has_a_bounded_number_and_slurm_ids_are_roots() {
    let mut m = map(1);
    for i in 0..RESERVATIONS_PER_USER_MAX {
        reserve(&mut m, &ask(&format!("u{i}"), 1, &[0], 10), 1000, 0).unwrap();
    }
    let e = reserve(&mut m, &ask("one-more", 1, &[0], 10), 1000, 0).unwrap_err();
    assert_eq!(e.code, ErrorCode::NoSpace, "{}", e.message);
    reserve(&mut m, &ask("other-user", 1, &[0], 10), 1001, 0).unwrap();
    let e = reserve(&mut m, &ask("slurm-42", 1, &[0], 10), 1001, 0).unwrap_err();
    assert_eq!(e.code, ErrorCode::Perm, "{}", e.message);
    reserve(&mut m, &ask("slurm-42", 1, &[0], 10), 0, 0).unwrap();
}

#[test]
fn a_clock_that_went_back_does_not_reorder_the_plan() {
    let mut m = map(1);
    reserve(&mut m, &ask("a", 60, &[0], 10), 0, 50_000).unwrap();
    // The leader's clock is now 40 s behind: the request is taken at the plan's latest time.
    reserve(&mut m, &ask("b", 60, &[0], 10), 0, 10_000).unwrap();
    assert_eq!(m.qos.get("b").unwrap().submitted_ms, 50_000);
    assert_eq!(start(&m, "b"), 60_000);
}

/// Random reserves and cancels (a seeded generator): the plan always fits every OST's
/// capacity, and a cancel never moves a waiting reservation later.
#[test]
fn random_plans_always_fit_and_cancels_never_delay() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for round in 0..20 {
        let mut m = map(3);
        let mut now = 0;
        for step in 0..60 {
            now += next(5000);
            if next(4) == 0 && !m.qos.reservations.is_empty() {
                let i = next(m.qos.reservations.len() as u64) as usize;
                let id = m.qos.reservations[i].id.clone();
                let before: Vec<(String, u64)> = m.qos.live(now).map(|r| (r.id.clone(), r.start_ms)).collect();
                cancel(&mut m, &id, 0, now).unwrap();
                for (other, was) in before.iter().filter(|(o, _)| *o != id) {
                    assert!(start(&m, other) <= *was, "round {round} step {step}: {other} moved later");
                }
            } else {
                let osts: Vec<u32> = (0..3).filter(|_| next(2) == 0).collect();
                let osts = if osts.is_empty() { vec![next(3) as u32] } else { osts };
                let mib = 1 + next(90) * osts.len() as u64;
                let _ = reserve(&mut m, &ask(&format!("r{round}-{step}"), mib, &osts, 1 + next(30)), 0, now);
            }
            // Every OST's load, at every start, within its capacity.
            for ost in 0..3 {
                for r in m.qos.live(now) {
                    let at = r.start_ms.max(now);
                    let held = load(&m.qos, None, ost, r.throughput, at, at + 1);
                    assert!(held <= 100 * M, "round {round} step {step}: OST {ost} holds {held} at {at}");
                }
            }
        }
    }
}
