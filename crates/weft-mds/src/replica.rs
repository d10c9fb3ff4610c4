//! One replica of a replicated MDT, and where a committed batch goes before it is answered.
//!
//! A replicated MDT is a group of replicas (weft-raft, driven by weft-server) that agree on a
//! log of entries; each entry is one batch of the writer's key-value changes (journal.rs's
//! [`Change`]s). The leader's replica serves: its [`Mds`] runs as a single MDT's does, except
//! that the writer hands each batch to the group ([`Proposer::propose`]) and answers only
//! once a majority has it. Every replica, the leader included, keeps the entries it applied
//! in its own journal and folds them into its own store every checkpoint, exactly as a single
//! MDT keeps its batches: so a replica's directory is always a whole MDT as of the last entry
//! it applied, a replica that restarts replays its journal as a single MDT does, and a
//! follower that becomes leader opens its [`Mds`] over what it has.
//!
//! # Who writes the replica's journal
//!
//! One owner, [`Replica`], under one lock: the group's [`Replica::apply`] for entries it did
//! not propose (on a follower, every entry), the writer for its own (after the group
//! committed them: [`Log::append`]). Each record also carries the group's opaque state of the
//! entry (`meta.raft_state`), so the store and journal always say which entry they hold up
//! to, and the group re-applies only what comes after.
//!
//! # Leaving the lead
//!
//! A batch the group did not commit (this replica lost the lead meanwhile) may still be
//! committed by the next leader, and an entry the next leader commits may reach this replica
//! while its [`Mds`] still runs: either way its state in memory is no longer the group's, so
//! the replica is *fenced*: its writer refuses every later batch and its checkpoints write
//! nothing (the journal holds all it committed), until weft-server shuts the [`Mds`] down and
//! calls [`Replica::follow`]. A client that resends to the new leader is answered from the
//! reply cache, which travels in the entries.

use crate::journal::{self, Change, Journal};
use crate::schema;
use crate::startup;
use crate::storage::{KvStore, MdtStorage};
use crate::store::{self, Tables};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use weft_proto::{ErrorCode, WeftError, WeftResult};

/// The group, as the MDS sees it (weft-server implements it over weft-raft).
pub trait Proposer: Send + Sync + 'static {
    /// Proposes `payload` as the group's next entry and blocks until a majority has it and
    /// this replica applied it ([`Replica::apply`]). Fails when this replica does not lead.
    fn propose(&self, payload: Vec<u8>) -> WeftResult<u64>;
    /// Makes the group's log durable (fsync), on the checkpoint's schedule.
    fn sync(&self) -> WeftResult<()>;
}

/// How long the serving replica may still answer reads from what it has: its group renews
/// it while a majority confirms it leads (weft-server asks the group for a read index every
/// heartbeat and renews the lease from the moment it asked, for less than the shortest
/// election timeout). A replica cut off from the majority stops answering reads when the
/// lease runs out, before another can be elected, so no read sees a stale state.
pub struct Lease {
    created: std::time::Instant,
    /// Nanoseconds after `created` until which reads may be answered (0: not yet).
    valid_until_ns: AtomicU64,
}

impl Default for Lease {
    fn default() -> Lease {
        Lease { created: std::time::Instant::now(), valid_until_ns: AtomicU64::new(0) }
    }
}

impl Lease {
    /// The group confirmed the lead after `asked`: reads may be answered until `asked +
    /// length`.
    pub fn renew(&self, asked: std::time::Instant, length: std::time::Duration) {
        let until = (asked.saturating_duration_since(self.created) + length).as_nanos().min(u128::from(u64::MAX));
        self.valid_until_ns.fetch_max(until as u64, Ordering::Relaxed);
    }

    /// Reads may be answered now, or the error that sends the client to the map.
    pub fn check(&self) -> WeftResult<()> {
        let until = self.valid_until_ns.load(Ordering::Relaxed);
        if (self.created.elapsed().as_nanos() as u64) < until {
            Ok(())
        } else {
            Err(not_leader("this MDT replica cannot confirm that it still leads its group"))
        }
    }
}

/// An entry's payload: a batch of changes, and who proposed it.
#[derive(Serialize, Deserialize)]
struct Entry {
    /// The [`Mds`] that proposed it ([`Serving::origin`]; 0: none, as for a format).
    origin: u64,
    /// Its number among that Mds's proposals.
    seq: u64,
    changes: Vec<Change>,
}

/// The whole state, as a snapshot carries it: every row of every table.
#[derive(Serialize, Deserialize)]
struct Dump {
    rows: Vec<Change>,
}

/// Where the writer puts a committed batch before anyone is answered.
pub enum Log {
    /// A single MDT: its journal.
    Local(Journal),
    /// A replica of a replicated MDT that leads: the group, then the replica's journal.
    Replicated(Arc<Replica>),
}

impl Log {
    /// Makes `changes` survive: journaled, or committed by the group and journaled. An error
    /// means the batch is not committed here, and must not be answered as done.
    pub fn append(&mut self, changes: &[Change]) -> WeftResult<()> {
        match self {
            Log::Local(j) => j.append(changes),
            Log::Replicated(r) => r.commit_own(changes),
        }
    }

    /// Whether the journal holds records that a checkpoint would fold into the store.
    pub fn pending(&self) -> bool {
        match self {
            Log::Local(j) => j.len_bytes() > 0,
            Log::Replicated(r) => r.lock().journal.len_bytes() > 0,
        }
    }

    /// Writes `view`'s changes since the last checkpoint into the store in one durable commit
    /// with what the journal's bookkeeping needs, calls `publish` (the store's new state
    /// becomes the read view) and empties the journal. False when there was nothing to write
    /// (or, fenced, nothing may be).
    pub fn checkpoint(
        &mut self,
        kv: &dyn KvStore,
        view: &Tables,
        publish: impl FnOnce() -> WeftResult<()>,
    ) -> WeftResult<bool> {
        match self {
            Log::Local(j) => {
                if view.overlay().rows() == 0 && j.len_bytes() == 0 {
                    return Ok(false);
                }
                let seq = j.last_seq().to_be_bytes();
                let meta = (schema::TABLE_META, schema::META_JOURNAL_SEQ_KEY, Some(seq.as_slice()));
                kv.commit(&mut store::overlay_rows(view).chain(std::iter::once(meta)))?;
                publish()?;
                reset_journal(j);
                Ok(true)
            }
            Log::Replicated(r) => r.checkpoint_serving(kv, view, publish),
        }
    }
}

fn reset_journal(j: &mut Journal) {
    if let Err(e) = j.reset() {
        tracing::warn!(error = %e, "cannot empty the MDT journal after a checkpoint; it will be replayed harmlessly");
    }
}

/// What a serving replica knows of its [`Mds`].
struct Serving {
    /// Names this Mds's proposals in their entries.
    origin: u64,
    proposer: Arc<dyn Proposer>,
    /// Set once its state in memory may differ from the group's (module doc).
    fenced: bool,
    /// The proposal of this Mds the group is committing now, by number.
    in_flight: Option<u64>,
    /// The group's state of that proposal's entry, once applied.
    in_flight_state: Option<Vec<u8>>,
}

struct Inner {
    journal: Journal,
    /// The group's state of the last entry applied.
    state: Option<Vec<u8>>,
    /// The group's state of the last entry the journal (or the store) holds.
    kept_state: Option<Vec<u8>>,
    serving: Option<Serving>,
    /// The journal could not take an entry the group committed: this replica's store is no
    /// longer the group's, and it must not serve or apply again (the error says why).
    broken: Option<String>,
}

/// One replica of a replicated MDT: its store and journal, and the entries applied to them.
pub struct Replica {
    pub mdt_index: u32,
    pub data_dir: PathBuf,
    storage: MdtStorage,
    inner: Mutex<Inner>,
    next_seq: AtomicU64,
    /// Renewed by the group while this replica serves (see [`Lease`]).
    pub lease: Arc<Lease>,
}

impl Replica {
    /// The replica in `data_dir` (an MDT's directory, made if missing): its journal replayed
    /// into its store, as a single MDT's at start.
    pub fn open(data_dir: PathBuf, mdt_index: u32) -> WeftResult<Arc<Replica>> {
        // Every page checked: a replica whose store is damaged refuses to start (and so to
        // join its group), naming the file, rather than serve or vote with it.
        let storage = MdtStorage::open_dir_checked(&data_dir)?;
        Replica::open_with(data_dir, mdt_index, storage)
    }

    /// As [`Replica::open`], over `storage`.
    pub fn open_with(data_dir: PathBuf, mdt_index: u32, storage: MdtStorage) -> WeftResult<Arc<Replica>> {
        let last_seq = startup::replay_journal(&*storage.kv, &storage.journal)?;
        let state = startup::meta(&*storage.kv, schema::META_RAFT_STATE_KEY)?;
        let journal = Journal::open(storage.journal.clone(), last_seq)?;
        Ok(Arc::new(Replica {
            mdt_index,
            data_dir,
            storage,
            inner: Mutex::new(Inner { journal, kept_state: state.clone(), state, serving: None, broken: None }),
            next_seq: AtomicU64::new(1),
            lease: Arc::new(Lease::default()),
        }))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The group's state of the last entry this replica keeps (None: none yet).
    pub fn applied_state(&self) -> Option<Vec<u8>> {
        self.lock().kept_state.clone()
    }

    /// Applies one committed entry (in log order; `payload` None for entries without
    /// changes). `state` is the group's, kept with the changes.
    pub fn apply(&self, payload: Option<&[u8]>, state: &[u8]) -> WeftResult<()> {
        let entry = payload
            .map(|p| {
                postcard::from_bytes::<Entry>(p).map_err(|e| WeftError::io(format!("a corrupt MDT log entry: {e}")))
            })
            .transpose()?;
        let mut inner = self.lock();
        if let Some(why) = &inner.broken {
            return Err(WeftError::io(why.clone()));
        }
        inner.state = Some(state.to_vec());
        if let Some(s) = inner.serving.as_mut() {
            match &entry {
                Some(e) if e.origin == s.origin && Some(e.seq) == s.in_flight => {
                    // The writer proposing it journals it once the group answers.
                    s.in_flight_state = Some(state.to_vec());
                    return Ok(());
                }
                // Nothing to keep; the next record or checkpoint carries the state.
                None => return Ok(()),
                Some(_) => {
                    tracing::warn!(
                        mdt = self.mdt_index,
                        "an entry of another leader reached a serving MDT replica: fenced"
                    );
                    s.fenced = true;
                }
            }
        }
        let changes = entry.map(|e| e.changes).unwrap_or_default();
        keep(&mut inner, changes, state.to_vec())
    }

    /// The writer's batch, proposed to the group and journaled once committed.
    fn commit_own(&self, changes: &[Change]) -> WeftResult<()> {
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let proposer = {
            let mut inner = self.lock();
            let s = serving_mut(&mut inner)?;
            s.in_flight = Some(seq);
            s.in_flight_state = None;
            let entry = Entry { origin: s.origin, seq, changes: changes.to_vec() };
            (s.proposer.clone(), postcard::to_stdvec(&entry).expect("encoding into memory cannot fail"))
        };
        let (proposer, payload) = proposer;
        let proposed = proposer.propose(payload);
        let mut inner = self.lock();
        let Some(s) = inner.serving.as_mut() else {
            return Err(not_leader("this MDT replica stopped serving"));
        };
        s.in_flight = None;
        let state = s.in_flight_state.take();
        match (proposed, state) {
            (Ok(_), Some(state)) => keep(&mut inner, changes.to_vec(), state),
            (Ok(index), None) => {
                let why = format!("the group committed entry {index} but this replica did not apply it");
                s.fenced = true;
                Err(WeftError::io(why))
            }
            (Err(e), _) => {
                // It may still be committed by the next leader: this state is not the group's.
                s.fenced = true;
                Err(e)
            }
        }
    }

    /// A serving replica's checkpoint (see [`Log::checkpoint`]); then the group's log is
    /// made durable too.
    fn checkpoint_serving(
        &self,
        kv: &dyn KvStore,
        view: &Tables,
        publish: impl FnOnce() -> WeftResult<()>,
    ) -> WeftResult<bool> {
        let proposer = {
            let mut inner = self.lock();
            let Ok(s) = serving_mut(&mut inner) else { return Ok(false) };
            let proposer = s.proposer.clone();
            let state_moved = inner.state != inner.kept_state;
            if view.overlay().rows() == 0 && inner.journal.len_bytes() == 0 && !state_moved {
                return Ok(false);
            }
            let seq = inner.journal.last_seq().to_be_bytes();
            let mut meta = vec![(schema::TABLE_META, schema::META_JOURNAL_SEQ_KEY, Some(seq.as_slice()))];
            if let Some(state) = &inner.state {
                meta.push((schema::TABLE_META, schema::META_RAFT_STATE_KEY, Some(state.as_slice())));
            }
            kv.commit(&mut store::overlay_rows(view).chain(meta))?;
            inner.kept_state = inner.state.clone();
            publish()?;
            reset_journal(&mut inner.journal);
            proposer
        };
        proposer.sync()?;
        Ok(true)
    }

    /// A following replica's checkpoint: its journal folded into its store durably (as a
    /// restart replays it). weft-server calls it on the checkpoint's schedule.
    pub fn checkpoint(&self) -> WeftResult<()> {
        let mut inner = self.lock();
        if inner.serving.is_some() || inner.journal.len_bytes() == 0 {
            return Ok(());
        }
        fold(&self.storage, &mut inner)
    }

    /// Makes this replica's store the group's state from now on (it leads, and has applied
    /// everything the group committed before it led): formats it through the group when
    /// new, then opens its [`Mds`], which takes the clients' open replays for
    /// `cfg.open_replay_window` and then destroys the orphan inodes none of them holds open.
    /// Must be called inside a tokio runtime, from a thread that may block.
    pub fn serve(
        self: &Arc<Self>,
        cfg: crate::MdsConfig,
        proposer: Arc<dyn Proposer>,
        targets: Arc<dyn crate::ObjectTargets>,
    ) -> WeftResult<Arc<crate::Mds>> {
        {
            let mut inner = self.lock();
            if let Some(why) = &inner.broken {
                return Err(WeftError::io(why.clone()));
            }
            if inner.serving.is_some() {
                return Err(WeftError::new(ErrorCode::Busy, "this MDT replica serves already"));
            }
            fold(&self.storage, &mut inner)?;
        }
        // Applied back through `apply` as any entry, on every replica. The orphans wait
        // for the clients' open replay (the Mds's `open_replay_window`).
        if let Some(changes) = startup::format_changes(&*self.storage.kv, self.mdt_index)? {
            self.propose_startup(&*proposer, changes)?;
        }
        {
            // The store holds every entry kept when serving begins (an entry applied since
            // the fold above is folded now): the Mds opens over it, and from here on only its
            // own proposals are kept without fencing it.
            let mut inner = self.lock();
            fold(&self.storage, &mut inner)?;
            let origin = crate::start_id().max(1);
            inner.serving = Some(Serving { origin, proposer, fenced: false, in_flight: None, in_flight_state: None });
        }
        crate::Mds::open_replicated(cfg, self.clone(), self.storage.clone(), targets)
    }

    fn propose_startup(&self, proposer: &dyn Proposer, changes: Vec<Change>) -> WeftResult<()> {
        let entry = Entry { origin: 0, seq: 0, changes };
        proposer.propose(postcard::to_stdvec(&entry).expect("encoding into memory cannot fail"))?;
        let mut inner = self.lock();
        fold(&self.storage, &mut inner)
    }

    /// Whether the serving [`Mds`] may no longer commit (module doc): weft-server then shuts
    /// it down and calls [`Replica::follow`].
    pub fn fenced(&self) -> bool {
        self.lock().serving.as_ref().is_some_and(|s| s.fenced)
    }

    /// After this replica's [`Mds`] was shut down: it applies the group's entries again.
    pub fn follow(&self) -> WeftResult<()> {
        let mut inner = self.lock();
        inner.serving = None;
        if let Some(why) = &inner.broken {
            return Err(WeftError::io(why.clone()));
        }
        fold(&self.storage, &mut inner)
    }

    /// The whole state as of the last entry kept, with that entry's group state: what a
    /// replica far behind installs instead of the entries it missed.
    pub fn snapshot(&self) -> WeftResult<(Vec<u8>, Vec<u8>)> {
        // One state under the lock: the store as of its last checkpoint (a read snapshot,
        // which later checkpoints do not change) and the journal since. The copy is made
        // after, while entries go on being applied.
        let (snap, records, state) = {
            let inner = self.lock();
            let snap = self.storage.kv.snapshot()?;
            (snap, journal::read_records(&*self.storage.journal)?, inner.kept_state.clone().unwrap_or_default())
        };
        let mut rows: BTreeMap<(u8, Vec<u8>), Vec<u8>> = BTreeMap::new();
        for table in std::iter::once(schema::TABLE_META).chain(schema::TABLE_INODES..=schema::TABLE_LAST) {
            snap.scan(table, &[], None, &mut |k, v| {
                if table != schema::TABLE_META || schema::is_journaled_meta(k) {
                    rows.insert((table, k.to_vec()), v.to_vec());
                }
                true
            })?;
        }
        for (_, changes) in records {
            for c in changes {
                match c.value {
                    Some(v) => rows.insert((c.table, c.key), v),
                    None => rows.remove(&(c.table, c.key)),
                };
            }
        }
        rows.remove(&(schema::TABLE_META, schema::META_RAFT_STATE_KEY.to_vec()));
        let dump =
            Dump { rows: rows.into_iter().map(|((table, key), v)| Change { table, key, value: Some(v) }).collect() };
        Ok((state, postcard::to_stdvec(&dump).expect("encoding into memory cannot fail")))
    }

    /// Replaces the whole state with another replica's [`Replica::snapshot`], durably.
    pub fn install(&self, state: &[u8], data: &[u8]) -> WeftResult<()> {
        let dump: Dump =
            postcard::from_bytes(data).map_err(|e| WeftError::io(format!("a corrupt MDT snapshot: {e}")))?;
        let mut inner = self.lock();
        if inner.serving.is_some() {
            return Err(WeftError::new(ErrorCode::Busy, "a serving MDT replica cannot install a snapshot"));
        }
        fold(&self.storage, &mut inner)?;
        let kv = &*self.storage.kv;
        let mut gone = Vec::new();
        let snap = kv.snapshot()?;
        let wanted: std::collections::BTreeSet<(u8, &[u8])> =
            dump.rows.iter().map(|c| (c.table, c.key.as_slice())).collect();
        for table in schema::TABLE_INODES..=schema::TABLE_LAST {
            snap.scan(table, &[], None, &mut |k, _| {
                if !wanted.contains(&(table, k)) {
                    gone.push((table, k.to_vec()));
                }
                true
            })?;
        }
        let mut changes = dump.rows;
        changes.extend(gone.into_iter().map(|(table, key)| Change { table, key, value: None }));
        changes.push(raft_state_change(state.to_vec()));
        kv.commit(&mut store::change_rows(&changes)?)?;
        inner.state = Some(state.to_vec());
        inner.kept_state = inner.state.clone();
        tracing::info!(mdt = self.mdt_index, rows = changes.len(), "installed an MDT snapshot from the group");
        Ok(())
    }
}

fn serving_mut(inner: &mut Inner) -> WeftResult<&mut Serving> {
    match inner.serving.as_mut() {
        Some(s) if !s.fenced => Ok(s),
        _ => Err(not_leader("this MDT replica no longer leads its group")),
    }
}

/// The error of a request made to a replica that does not lead.
pub fn not_leader(why: &str) -> WeftError {
    WeftError::new(ErrorCode::Moved, why.to_string())
}

fn raft_state_change(state: Vec<u8>) -> Change {
    Change { table: schema::TABLE_META, key: schema::META_RAFT_STATE_KEY.to_vec(), value: Some(state) }
}

/// Journals `changes` with the group's `state` of their entry.
fn keep(inner: &mut Inner, mut changes: Vec<Change>, state: Vec<u8>) -> WeftResult<()> {
    changes.push(raft_state_change(state.clone()));
    if let Err(e) = inner.journal.append(&changes) {
        let why = format!("this MDT replica cannot journal an entry its group committed ({e}); it stops");
        tracing::error!("{why}");
        inner.broken = Some(why.clone());
        if let Some(s) = inner.serving.as_mut() {
            s.fenced = true;
        }
        return Err(WeftError::io(why));
    }
    inner.kept_state = Some(state);
    Ok(())
}

/// The journal replayed into the store durably and emptied, as at a start.
fn fold(storage: &MdtStorage, inner: &mut Inner) -> WeftResult<()> {
    let last = startup::replay_journal(&*storage.kv, &storage.journal)?;
    inner.journal = Journal::open(storage.journal.clone(), last)?;
    Ok(())
}

#[cfg(test)]
#[path = "replica_tests.rs"]
mod tests;
