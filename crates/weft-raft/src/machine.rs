//! The replicated state, as the service supplies it ([`Machine`]), and openraft's state
//! machine over it ([`StateMachine`]).
//!
//! The machine keeps, with the effects of the entries it applied, an opaque `state` that
//! this module makes: postcard of the last applied log id and the membership in force then
//! ([`AppliedState`]). So a restart finds where the machine's durable state stands without
//! a file of ours that could disagree with it, and re-applies the log from there.
//!
//! Snapshots: the machine's whole state, kept in `DIR/snapshot` (one record, fsync'd before
//! the log is purged behind it, so a machine whose durable state is older than the purge
//! point is brought up to the snapshot at start). Snapshot data is a
//! `std::io::Cursor<Vec<u8>>`, which openraft sends in chunks; a streamed snapshot
//! (openraft's generic-snapshot-data) is the next step for MDTs too large to hold twice in
//! memory.

use crate::limits::SNAPSHOT_RECORD_BYTES_MAX;
use crate::record::{self, corrupt, file_error};
use crate::{NodeId, TypeConfig};
use openraft::storage::RaftStateMachine;
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, LogId, RaftSnapshotBuilder, Snapshot, SnapshotMeta, StorageError,
    StorageIOError, StoredMembership,
};
use serde::{Deserialize, Serialize};
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use weft_proto::WeftResult;

/// The replicated state, supplied by the service (the MDT, the MGS).
pub trait Machine: Send + Sync + 'static {
    /// Applies one committed entry; called in log order on every replica, the leader
    /// included, exactly once per entry since the state the machine last reported
    /// (`applied_state`) or installed. `payload` is None for entries without data (a new
    /// leader's blank entry, a membership change). `state` is opaque: the machine keeps the
    /// last one it was given with the same durability as the effects of the entries it
    /// applied (the MDT writes it in its checkpoint) and hands it back from
    /// `applied_state` after a restart.
    fn apply(&self, index: u64, payload: Option<&[u8]>, state: &[u8]) -> Result<(), String>;
    /// The `state` given with the last entry whose effects the machine has kept (None: none).
    fn applied_state(&self) -> Option<Vec<u8>>;
    /// The whole state as of the last entry applied, with that entry's `state`:
    /// `(state, data)`. openraft builds snapshots in a task of their own, so this may be
    /// called while entries are applied: the pair must be of one moment.
    fn snapshot(&self) -> Result<(Vec<u8>, Vec<u8>), String>;
    /// Replaces the whole state with `data` (another replica's `snapshot`), whose last
    /// entry's `state` is `state`.
    fn install(&self, state: &[u8], data: &[u8]) -> Result<(), String>;
}

/// What the opaque `state` a machine keeps says: the last log id applied and the membership
/// in force after it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct AppliedState {
    pub last: Option<LogId<NodeId>>,
    pub membership: StoredMembership<NodeId, BasicNode>,
}

impl AppliedState {
    pub fn encode(&self) -> Vec<u8> {
        // A struct of plain fields: encoding cannot fail.
        postcard::to_allocvec(self).unwrap_or_default()
    }

    pub fn decode(bytes: &[u8]) -> Result<AppliedState, String> {
        postcard::from_bytes(bytes).map_err(|e| format!("a machine's state that does not decode: {e}"))
    }
}

/// A snapshot as kept in `DIR/snapshot`.
#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<NodeId, BasicNode>,
    data: Vec<u8>,
}

fn sm_error(e: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::write_state_machine(AnyError::error(e.to_string())).into()
}

fn snapshot_error(e: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::write_snapshot(None, AnyError::error(e.to_string())).into()
}

/// `DIR/snapshot`, shared by the state machine and the builders openraft runs beside it
/// (a build runs in a task of its own, so it can end after a newer snapshot was installed).
#[derive(Clone)]
struct SnapshotFile {
    path: PathBuf,
    /// The last log id of the snapshot in the file; the lock orders writers.
    kept: Arc<Mutex<Option<LogId<NodeId>>>>,
}

impl SnapshotFile {
    /// Keeps `meta`'s snapshot unless the file holds a newer one; false: it did not.
    fn keep(&self, meta: &SnapshotMeta<NodeId, BasicNode>, data: &[u8]) -> Result<bool, String> {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.is_some() && meta.last_log_id < *kept {
            return Ok(false);
        }
        write_snapshot(&self.path, meta, data)?;
        *kept = meta.last_log_id;
        Ok(true)
    }
}

/// openraft's state machine over a [`Machine`].
pub struct StateMachine {
    machine: Arc<dyn Machine>,
    applied: AppliedState,
    file: SnapshotFile,
    /// Makes snapshot ids unique within this process's life.
    built: u64,
}

impl StateMachine {
    /// Opens the state machine of the replica in `dir`: if its snapshot is newer than what
    /// the machine kept, the machine is brought up to it first.
    pub fn open(dir: &Path, machine: Arc<dyn Machine>) -> WeftResult<StateMachine> {
        let path = dir.join("snapshot");
        let mut applied = match machine.applied_state() {
            Some(bytes) => AppliedState::decode(&bytes).map_err(|e| file_error(dir, e))?,
            None => AppliedState::default(),
        };
        let stored = read_snapshot(&path)?;
        let kept = stored.as_ref().and_then(|s| s.meta.last_log_id);
        if let Some(stored) = stored {
            if stored.meta.last_log_id > applied.last {
                tracing::info!(
                    "{}: the machine kept up to {:?}, the snapshot is at {:?}: installing it",
                    path.display(),
                    applied.last,
                    stored.meta.last_log_id
                );
                let state =
                    AppliedState { last: stored.meta.last_log_id, membership: stored.meta.last_membership.clone() };
                machine.install(&state.encode(), &stored.data).map_err(|e| file_error(&path, e))?;
                applied = state;
            }
        }
        let file = SnapshotFile { path, kept: Arc::new(Mutex::new(kept)) };
        Ok(StateMachine { machine, applied, file, built: 0 })
    }
}

fn read_snapshot(path: &Path) -> WeftResult<Option<StoredSnapshot>> {
    match record::read_small(path, SNAPSHOT_RECORD_BYTES_MAX)? {
        None => Ok(None),
        Some(bytes) => postcard::from_bytes(&bytes)
            .map(Some)
            .map_err(|e| corrupt(path, record::HEADER_BYTES, format!("a snapshot that does not decode: {e}"))),
    }
}

/// Keeps a snapshot (errors as text: openraft's StorageError is large to carry around).
fn write_snapshot(path: &Path, meta: &SnapshotMeta<NodeId, BasicNode>, data: &[u8]) -> Result<(), String> {
    let stored = StoredSnapshot { meta: meta.clone(), data: data.to_vec() };
    let bytes = postcard::to_allocvec(&stored).map_err(|e| e.to_string())?;
    if bytes.len() > SNAPSHOT_RECORD_BYTES_MAX as usize {
        return Err(format!(
            "a snapshot of {} bytes: more than one record holds (streamed snapshots are not built yet)",
            bytes.len()
        ));
    }
    // Durable before openraft purges the log behind it.
    record::write_small(path, &bytes, true).map_err(|e| format!("{}: {e}", path.display()))
}

/// Builds a snapshot of the machine as it is.
pub struct Builder {
    machine: Arc<dyn Machine>,
    file: SnapshotFile,
    id: u64,
}

impl RaftSnapshotBuilder<TypeConfig> for Builder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let (state, data) = self.machine.snapshot().map_err(snapshot_error)?;
        let applied = AppliedState::decode(&state).map_err(snapshot_error)?;
        let snapshot_id = match applied.last {
            Some(l) => format!("{}-{}-{}", l.leader_id.term, l.index, self.id),
            None => format!("none-{}", self.id),
        };
        let meta = SnapshotMeta { last_log_id: applied.last, last_membership: applied.membership, snapshot_id };
        if !self.file.keep(&meta, &data).map_err(snapshot_error)? {
            tracing::info!("snapshot {} not kept: a newer one was installed meanwhile", meta.snapshot_id);
        }
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(data)) })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = Builder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StorageError<NodeId>> {
        Ok((self.applied.last, self.applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<()>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut answers = Vec::new();
        for entry in entries {
            let mut next = self.applied.clone();
            next.last = Some(entry.log_id);
            let payload = match &entry.payload {
                EntryPayload::Blank => None,
                EntryPayload::Normal(data) => Some(data.as_slice()),
                EntryPayload::Membership(m) => {
                    next.membership = StoredMembership::new(Some(entry.log_id), m.clone());
                    None
                }
            };
            self.machine
                .apply(entry.log_id.index, payload, &next.encode())
                .map_err(|e| sm_error(format!("applying entry {}: {e}", entry.log_id.index)))?;
            self.applied = next;
            answers.push(());
        }
        Ok(answers)
    }

    async fn get_snapshot_builder(&mut self) -> Builder {
        self.built += 1;
        Builder { machine: self.machine.clone(), file: self.file.clone(), id: self.built }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let data = snapshot.into_inner();
        let state = AppliedState { last: meta.last_log_id, membership: meta.last_membership.clone() };
        // Kept first: should the machine's install be lost in a crash, the start installs
        // it again.
        self.file.keep(meta, &data).map_err(snapshot_error)?;
        self.machine.install(&state.encode(), &data).map_err(sm_error)?;
        self.applied = state;
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let stored = read_snapshot(&self.file.path)
            .map_err(|e| StorageError::from(StorageIOError::read_snapshot(None, AnyError::error(e.to_string()))))?;
        Ok(stored.map(|s| Snapshot { meta: s.meta, snapshot: Box::new(Cursor::new(s.data)) }))
    }
}
