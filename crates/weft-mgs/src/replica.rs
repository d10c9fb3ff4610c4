//! A replica of a replicated MGS: what it keeps besides the map, and what it asks of its
//! group.
//!
//! A replicated MGS is a group of replicas (weft-raft, driven by weft-server) agreeing on a
//! log whose entries are whole maps: the leader's [`crate::Mgs`] computes the next map as a
//! single MGS does, hands it to the group ([`Proposer::propose`]) and answers once a majority
//! has it and this replica applied it. Every replica, the leader included, applies each
//! committed map by saving it with the group's opaque state of its entry in the one map file
//! (`store::save_with_state`, one atomic rename) and publishing it, so the map, its file and
//! the entry it came from never disagree, and `WatchMap` followers of the leader wake on it.
//! The map is small (a few KiB to a few MiB at [`crate::limits::TARGETS_MAX`]), so an entry
//! and a snapshot are simply the whole map.
//!
//! Only the leader serves: requests to a replica that does not lead, or whose read lease ran
//! out (it cannot confirm that it still leads), are refused with `ErrorCode::Moved`, and the
//! clients (weft-rpc's `MgsPeers`) try the next address. The monitor's history
//! (`history.redb`), the decay engine's state (`decay.json`) and the global QoS table are not
//! replicated: they are statistics of the leader's own, and a new leader starts its own.

use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use weft_proto::msg::ClusterMap;
use weft_proto::{ErrorCode, WeftError, WeftResult};

/// The group, as the MGS sees it (weft-server implements it over weft-raft).
pub trait Proposer: Send + Sync + 'static {
    /// Proposes `payload` as the group's next entry and blocks until a majority has it and
    /// this replica applied it ([`crate::Mgs::apply`]). Fails when this replica does not lead
    /// (`ErrorCode::Moved`) or the group could not commit in time.
    fn propose(&self, payload: Vec<u8>) -> WeftResult<u64>;
}

/// An entry's payload: the whole next map (JSON, as the map file: the map's serde attributes
/// are written for JSON).
#[derive(Serialize, Deserialize)]
struct Entry {
    map: ClusterMap,
}

pub(crate) fn encode_entry(map: &ClusterMap) -> WeftResult<Vec<u8>> {
    serde_json::to_vec(&Entry { map: map.clone() }).map_err(|e| WeftError::io(format!("cannot encode the map: {e}")))
}

pub(crate) fn decode_entry(bytes: &[u8]) -> WeftResult<ClusterMap> {
    serde_json::from_slice::<Entry>(bytes)
        .map(|e| e.map)
        .map_err(|e| WeftError::io(format!("a corrupt MGS log entry: {e}")))
}

/// The error of a request made to a replica that does not serve.
pub fn not_leader(why: &str) -> WeftError {
    WeftError::new(ErrorCode::Moved, why.to_string())
}

/// The group's states this replica holds.
#[derive(Default)]
pub(crate) struct Applied {
    /// Of the last entry applied (kept in memory for entries without a map).
    pub state: Option<Vec<u8>>,
    /// Of the last entry whose map is in the map file.
    pub kept: Option<Vec<u8>>,
}

/// What a replica of a replicated MGS keeps beside the map.
pub(crate) struct ReplicaState {
    /// Held while an entry or a snapshot is applied, and while a snapshot is taken, so the
    /// map and its state are of one moment.
    applied: Mutex<Applied>,
    /// The group, while this replica leads and serves.
    serving: RwLock<Option<Arc<dyn Proposer>>>,
    /// Whether it serves: a `WatchMap` waiting on a replica that stops is answered at once.
    pub leading: watch::Sender<bool>,
    /// Until when reads may be answered: renewed while a majority confirms the lead, for
    /// less than the shortest election timeout, so a leader cut off from the majority stops
    /// answering before another is elected (no stale map is served).
    lease_until: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for ReplicaState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaState").field("leading", &*self.leading.borrow()).finish()
    }
}

impl ReplicaState {
    pub fn new(kept: Option<Vec<u8>>) -> ReplicaState {
        ReplicaState {
            applied: Mutex::new(Applied { state: kept.clone(), kept }),
            serving: RwLock::new(None),
            leading: watch::Sender::new(false),
            lease_until: Mutex::new(None),
        }
    }

    pub fn applied(&self) -> MutexGuard<'_, Applied> {
        self.applied.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn proposer(&self) -> WeftResult<Arc<dyn Proposer>> {
        self.serving
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| not_leader("this MGS replica does not lead its group"))
    }

    pub fn serve(&self, proposer: Option<Arc<dyn Proposer>>) {
        let leads = proposer.is_some();
        *self.serving.write().unwrap_or_else(|p| p.into_inner()) = proposer;
        if !leads {
            *self.lease_until.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
        self.leading.send_replace(leads);
    }

    pub fn renew(&self, asked: Instant, length: Duration) {
        let mut until = self.lease_until.lock().unwrap_or_else(|p| p.into_inner());
        let new = asked + length;
        if until.is_none_or(|u| u < new) {
            *until = Some(new);
        }
    }

    /// Requests may be answered now, or the error that sends the client elsewhere.
    pub fn check(&self) -> WeftResult<()> {
        if !*self.leading.borrow() {
            return Err(not_leader("this MGS replica does not lead its group"));
        }
        let until = *self.lease_until.lock().unwrap_or_else(|p| p.into_inner());
        match until {
            Some(u) if Instant::now() < u => Ok(()),
            _ => Err(not_leader("this MGS replica cannot confirm that it still leads its group")),
        }
    }
}
