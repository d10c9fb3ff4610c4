//! Bandwidth reservations (the QoS planner of JGU Mainz's work, on Weft's NRS): each OST has
//! a capacity; a reservation takes a throughput on a set of OSTs for a time span, for the
//! requests of one job. The management service plans them (weft-mgs's `planner`) and keeps
//! the plan in the cluster map, so it is replicated and survives a restart with the map;
//! every OSS turns the reservations active on its OSTs into TBF rules (weft-server's
//! `reservations`). A reservation's state is a function of the time and the plan: no change
//! of the map is needed when one starts or ends.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The ids of the reservations the Slurm prolog makes (`slurm-<job id>`): root's only, so a
/// user cannot take a coming job's id first.
pub const SLURM_PREFIX: &str = "slurm-";

/// A rate: bytes per second, or requests per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Throughput {
    Bytes(u64),
    Requests(u64),
}

impl Throughput {
    pub fn value(self) -> u64 {
        match self {
            Throughput::Bytes(v) | Throughput::Requests(v) => v,
        }
    }

    /// The same unit with another value.
    pub fn with(self, value: u64) -> Throughput {
        match self {
            Throughput::Bytes(_) => Throughput::Bytes(value),
            Throughput::Requests(_) => Throughput::Requests(value),
        }
    }

    /// The unit's name, for messages: `bytes/s` or `requests/s`.
    pub fn unit(self) -> &'static str {
        match self {
            Throughput::Bytes(_) => "bytes/s",
            Throughput::Requests(_) => "requests/s",
        }
    }

    /// `100M` (bytes per second, K/M/G/T in powers of 1024) or `500rps` (requests per
    /// second).
    pub fn parse(text: &str) -> Result<Throughput, String> {
        let t = text.trim();
        let bad = || {
            format!("throughput '{text}': write bytes per second (100M, 2G: K, M, G, T in powers of 1024) or requests per second (500rps)")
        };
        if let Some(n) = t.strip_suffix("rps") {
            let v: u64 = n.trim().parse().map_err(|_| bad())?;
            return if v == 0 { Err(bad()) } else { Ok(Throughput::Requests(v)) };
        }
        let t = t.strip_suffix("/s").unwrap_or(t);
        let t = t.strip_suffix(['B', 'b']).unwrap_or(t);
        let v = crate::units::parse_size(t).map_err(|_| bad())?;
        if v == 0 {
            return Err(bad());
        }
        Ok(Throughput::Bytes(v))
    }
}

impl std::fmt::Display for Throughput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Throughput::Requests(v) => write!(f, "{v}rps"),
            Throughput::Bytes(v) => {
                const UNITS: [(u64, &str); 4] = [(1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
                match UNITS.iter().find(|(size, _)| v >= *size && v % size == 0) {
                    Some((size, unit)) => write!(f, "{}{unit}", v / size),
                    None => write!(f, "{v}"),
                }
            }
        }
    }
}

/// What an OST can give, as the admin set it or `weft qos calibrate` measured it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct OstCapacity {
    pub bytes: Option<u64>,
    pub requests: Option<u64>,
}

impl OstCapacity {
    /// The capacity in `unit`'s unit, if set.
    pub fn of(&self, unit: Throughput) -> Option<u64> {
        match unit {
            Throughput::Bytes(_) => self.bytes,
            Throughput::Requests(_) => self.requests,
        }
    }
}

/// One reservation of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// Its name, unique among the reservations not done (a Slurm job id, or a job's own
    /// name for one of its phases).
    pub id: String,
    /// The job id its requests carry (the TBF rule's `jobid={...}`).
    pub job: String,
    /// The whole throughput; each OST gives `per_ost()`.
    pub throughput: Throughput,
    /// The OSTs, sorted, each once.
    pub osts: Vec<u32>,
    /// Unix milliseconds: when it was asked for, the earliest start asked, the planned
    /// start, and how long it lasts.
    pub submitted_ms: u64,
    pub earliest_ms: u64,
    pub start_ms: u64,
    pub duration_ms: u64,
    /// Cancelled (or given back by its job) at this time.
    pub ended_ms: Option<u64>,
    /// Who made it: its owner, or root, may cancel it.
    pub uid: u32,
}

/// A reservation's state at a time (`weft qos status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReservationState {
    /// No reservation of that id is known.
    Undefined,
    Scheduled,
    Active,
    Done,
}

impl ReservationState {
    pub fn name(self) -> &'static str {
        match self {
            ReservationState::Undefined => "undefined",
            ReservationState::Scheduled => "scheduled",
            ReservationState::Active => "active",
            ReservationState::Done => "done",
        }
    }
}

impl Reservation {
    /// The throughput each of its OSTs gives (the whole divided evenly, rounded up: a file
    /// striped over them writes to each alike).
    pub fn per_ost(&self) -> Throughput {
        let n = self.osts.len().max(1) as u64;
        self.throughput.with(self.throughput.value().div_ceil(n))
    }

    /// When it stops holding its OSTs' capacity: its planned end, or when it was cancelled.
    pub fn end_ms(&self) -> u64 {
        let planned = self.start_ms.saturating_add(self.duration_ms);
        self.ended_ms.map_or(planned, |e| e.min(planned))
    }

    pub fn state(&self, now_ms: u64) -> ReservationState {
        if now_ms >= self.end_ms() || self.ended_ms.is_some_and(|e| e <= self.start_ms) {
            ReservationState::Done
        } else if now_ms >= self.start_ms {
            ReservationState::Active
        } else {
            ReservationState::Scheduled
        }
    }
}

/// The planner's state, in the cluster map.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct QosPlan {
    /// Each OST's capacity (an OST not named has none: nothing can be reserved on it).
    pub capacity: BTreeMap<u32, OstCapacity>,
    /// Every reservation not done, and those done recently (for `weft qos status`), in the
    /// order they were asked for.
    pub reservations: Vec<Reservation>,
}

impl QosPlan {
    pub fn get(&self, id: &str) -> Option<&Reservation> {
        // The newest of that id: an id may be used again once its reservation is done.
        self.reservations.iter().rev().find(|r| r.id == id)
    }

    pub fn state(&self, id: &str, now_ms: u64) -> ReservationState {
        self.get(id).map_or(ReservationState::Undefined, |r| r.state(now_ms))
    }

    /// The reservations planned or active at `now_ms`.
    pub fn live(&self, now_ms: u64) -> impl Iterator<Item = &Reservation> {
        self.reservations.iter().filter(move |r| r.state(now_ms) != ReservationState::Done)
    }

    /// The reservations active at `now_ms`.
    pub fn active(&self, now_ms: u64) -> impl Iterator<Item = &Reservation> {
        self.reservations.iter().filter(move |r| r.state(now_ms) == ReservationState::Active)
    }
}

/// What a program asks for (`weft qos reserve`, libweft's `weft_qos_reserve_*`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReserveRequest {
    pub id: String,
    /// Empty: the id.
    pub job: String,
    pub throughput: Throughput,
    pub osts: Vec<u32>,
    /// Unix milliseconds; 0: as soon as the OSTs have room.
    pub earliest_ms: u64,
    pub duration_ms: u64,
}

/// The wall clock in Unix milliseconds, as the plan counts time.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// `YYYY-MM-DD HH:MM:SS UTC` of Unix milliseconds.
pub fn utc(ms: u64) -> String {
    let sec = (ms / 1000) as i64;
    let (y, m, d) = crate::msg::changelog::civil_from_days(sec.div_euclid(86_400));
    let s = sec.rem_euclid(86_400);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC", s / 3600, s / 60 % 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughputs_parse_and_print() {
        assert_eq!(Throughput::parse("100M").unwrap(), Throughput::Bytes(100 << 20));
        assert_eq!(Throughput::parse("100MB/s").unwrap(), Throughput::Bytes(100 << 20));
        assert_eq!(Throughput::parse("500rps").unwrap(), Throughput::Requests(500));
        assert_eq!(Throughput::parse("4096").unwrap(), Throughput::Bytes(4096));
        for bad in ["", "0", "fast", "0rps", "-3M", "12 rpz"] {
            let e = Throughput::parse(bad).unwrap_err();
            assert!(e.contains("500rps"), "{bad}: {e}");
        }
        assert_eq!(Throughput::Bytes(100 << 20).to_string(), "100M");
        assert_eq!(Throughput::Bytes(1000).to_string(), "1000");
        assert_eq!(Throughput::Requests(7).to_string(), "7rps");
        assert_eq!(utc(1_795_000_000_123), "2026-11-18 11:06:40 UTC");
    }

    #[test]
    fn a_reservation_is_scheduled_then_active_then_done() {
        let r = Reservation {
            id: "7".into(),
            job: "7".into(),
            throughput: Throughput::Bytes(300),
            osts: vec![0, 1],
            submitted_ms: 0,
            earliest_ms: 0,
            start_ms: 1000,
            duration_ms: 500,
            ended_ms: None,
            uid: 0,
        };
        assert_eq!(r.per_ost(), Throughput::Bytes(150));
        assert_eq!(r.state(999), ReservationState::Scheduled);
        assert_eq!(r.state(1000), ReservationState::Active);
        assert_eq!(r.state(1500), ReservationState::Done);
        let cancelled = Reservation { ended_ms: Some(1200), ..r.clone() };
        assert_eq!(cancelled.state(1100), ReservationState::Active);
        assert_eq!(cancelled.state(1200), ReservationState::Done);
        let before = Reservation { ended_ms: Some(10), ..r };
        assert_eq!(before.state(20), ReservationState::Done, "cancelled while scheduled");
    }
}
