//! One OST: the requests of the protocol over its object store. Here are the OST's rules
//! (which FIDs are its objects, the limits of a request, LAST_ID only growing, files only for
//! objects handed out); how objects are kept is the store's ([`crate::store`]). Every
//! function here may block (file I/O); the service calls them on tokio's blocking pool
//! unless the request is small.

use crate::commit::{Commits, Skip};
use crate::limits::{ORPHANS_DESTROY_MAX, PRECREATE_COUNT_MAX, WRITE_STALLS_MAX};
use crate::lock_unpoisoned;
use crate::store::{ObjectStore, StoreError};
use bytes::Bytes;
use std::os::unix::ffi::OsStringExt;
use std::sync::Mutex;
use weft_proto::limits::{BULK_BYTES_MAX, OBJECT_SIZE_MAX_BYTES};
use weft_proto::msg::ops::{Op, Payload};
use weft_proto::msg::{ost, OstReply, OstRequest, StatfsInfo};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

pub(crate) struct Ost {
    index: u32,
    seq: u64,
    /// The largest object: a file's largest size, or, for a data-on-MDT target, the largest
    /// MDT component (the limit the MDT enforces, as Lustre's `dom_stripesize`).
    size_max: u64,
    store: Box<dyn ObjectStore>,
    /// Serializes precreations, so each MDT's LAST_ID (the store's) only grows.
    precreating: Mutex<()>,
    /// The last orphan cleanup done: the MDS start it was for, and its answer. Held while a
    /// cleanup runs, so that a copy of the same request (a resend) waits and then answers
    /// without destroying again: by then the MDS may have handed the ids out.
    /// Per MDT (whose range of ids the cleanup is of).
    orphans_done: Mutex<std::collections::HashMap<u32, (u64, ost::Orphans)>>,
    /// Transnos, commits and the replay window after a restart (commit.rs).
    commits: Commits,
    /// Blocks per user, group and project (quota.rs).
    usage: crate::quota::Usage,
}

impl std::fmt::Debug for Ost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ost").field("index", &self.index).field("last_id", &self.last_id()).finish_non_exhaustive()
    }
}

/// Names the OST in a store's error, at the edge where it becomes an answer.
pub(crate) fn ost_error(index: u32, e: StoreError) -> WeftError {
    let mut err = WeftError::from(e);
    err.message = format!("OST {index}: {}", err.message);
    err
}

impl Ost {
    /// OST `index` over `store`, started once more: its start count is persisted before
    /// it serves (every transno it gives is above those of its earlier starts).
    pub fn new(index: u32, store: Box<dyn ObjectStore>) -> WeftResult<Ost> {
        let (record, commits) = Commits::start(store.commit_record(), store.machine_boot(), std::time::Instant::now());
        if !commits.rebooted() {
            // A restart in the same boot: everything the last start wrote is in the cache;
            // durable now, so that its writes need no replay (commit.rs).
            store.sync_all().map_err(|e| ost_error(index, e))?;
        }
        store.set_commit_record(record).map_err(|e| ost_error(index, e))?;
        let usage = crate::quota::Usage::scan(&*store).map_err(|e| ost_error(index, e))?;
        let size_max = match weft_proto::layout::dom_mdt(index) {
            Some(_) => weft_proto::limits::DOM_SIZE_MAX_BYTES,
            None => OBJECT_SIZE_MAX_BYTES,
        };
        Ok(Ost {
            index,
            seq: Fid::object_seq(index),
            size_max,
            store,
            precreating: Mutex::new(()),
            orphans_done: Mutex::new(Default::default()),
            commits,
            usage,
        })
    }

    /// The object id of `fid`, if the FID belongs to this OST.
    fn object_id(&self, fid: &Fid) -> WeftResult<u32> {
        if fid.seq != self.seq {
            return Err(WeftError::invalid(format!(
                "object {fid} is not in OST {}'s sequence {:#x}",
                self.index, self.seq
            )));
        }
        Ok(fid.oid)
    }

    fn error(&self, e: StoreError) -> WeftError {
        ost_error(self.index, e)
    }

    fn read(&self, fid: &Fid, offset: u64, len: u32) -> WeftResult<Bytes> {
        let oid = self.object_id(fid)?;
        self.store.read(oid, offset, len.min(BULK_BYTES_MAX)).map_err(|e| self.error(e))
    }

    /// The length of a write of `bulk` at `offset`, checked against the bulk limit and the
    /// largest object.
    fn write_len(&self, offset: u64, bulk: &[u8]) -> WeftResult<u32> {
        let len = match u32::try_from(bulk.len()) {
            Ok(len) if len <= BULK_BYTES_MAX => len,
            _ => {
                return Err(WeftError::invalid(format!(
                    "write of {} bytes exceeds the bulk limit of {BULK_BYTES_MAX} bytes",
                    bulk.len()
                )))
            }
        };
        match offset.checked_add(u64::from(len)) {
            Some(end) if end <= self.size_max => Ok(len),
            _ => Err(WeftError::new(
                ErrorCode::FileTooBig,
                format!("write of {len} bytes at offset {offset} passes the largest object size {}", self.size_max),
            )),
        }
    }

    fn write(&self, op: &ost::Write, bulk: &[u8]) -> WeftResult<ost::WriteDone> {
        let ost::Write { ref fid, offset, sync, owner, ref extents } = *op;
        let oid = self.object_id(fid)?;
        let len = self.write_len(offset, bulk)?;
        let ranges = self.write_ranges(offset, len, extents)?;
        let admitted = self.admit_quota(oid, owner, u64::from(len))?;
        let transno = self.commits.with_window(std::time::Instant::now(), |window| {
            let mut at = 0usize;
            for &(start, end) in &ranges {
                let n = (end - start) as usize;
                self.write_all(oid, start, &bulk[at..at + n])?;
                at += n;
            }
            let transno = self.commits.issue(oid);
            if let Some(window) = window {
                // A replay of an earlier write must not come back over these bytes.
                for &(start, end) in &ranges {
                    self.commits.record(window, oid, start, end, transno);
                }
            }
            Ok::<_, WeftError>(transno)
        })?;
        self.account(oid, owner)?;
        drop(admitted);
        let committed = if sync { self.commit()? } else { self.commits.committed() };
        Ok(ost::WriteDone { len, transno, committed, quota_tight: self.usage.tight(oid) })
    }

    /// The object ranges `[start, end)` a write of `len` bulk bytes goes to: one at `offset`,
    /// or its `extents`, which must hold the bulk exactly and each end within the largest
    /// object.
    fn write_ranges(&self, offset: u64, len: u32, extents: &[ost::Extent]) -> WeftResult<Vec<(u64, u64)>> {
        if extents.is_empty() {
            return Ok(vec![(offset, offset + u64::from(len))]);
        }
        let total: u64 = extents.iter().map(|e| u64::from(e.len)).sum();
        if total != u64::from(len) {
            return Err(WeftError::invalid(format!("a write's extents hold {total} bytes, its bulk {len}")));
        }
        extents
            .iter()
            .map(|e| match e.offset.checked_add(u64::from(e.len)) {
                Some(end) if end <= self.size_max => Ok((e.offset, end)),
                _ => Err(WeftError::new(
                    ErrorCode::FileTooBig,
                    format!(
                        "write of {} bytes at offset {} passes the largest object size {}",
                        e.len, e.offset, self.size_max
                    ),
                )),
            })
            .collect()
    }

    /// A write sent again after a restart (commit.rs): the parts of its range that no later
    /// write covered since, or nothing when it was durable already.
    fn replay(&self, op: &ost::Replay, bulk: &[u8]) -> WeftResult<ost::WriteDone> {
        let oid = self.object_id(&op.fid)?;
        let len = self.write_len(op.offset, bulk)?;
        let end = op.offset + u64::from(len);
        let done = self.commits.with_window(std::time::Instant::now(), |window| {
            match self.commits.replay_check(op.transno, window.is_some()) {
                Err(Skip::Durable) => return Ok(None),
                // Not lost: the client keeps it until a commit covers it.
                Err(Skip::ThisStart) => return Ok(Some(op.transno)),
                Err(Skip::Unknown) => {
                    return Err(WeftError::new(
                        ErrorCode::Stale,
                        format!(
                            "OST {}: the write of transno {:#x} to {} at {} is of a server start before the last \
                             one that committed: whether it was made durable is not known, and it may be lost",
                            self.index, op.transno, op.fid, op.offset
                        ),
                    ))
                }
                Err(Skip::WindowOver) => {
                    return Err(WeftError::new(
                        ErrorCode::Stale,
                        format!(
                            "OST {}: the replay window after its server's restart ended: the write of transno {:#x} \
                             to {} at {} was not durable and is lost",
                            self.index, op.transno, op.fid, op.offset
                        ),
                    ))
                }
                Ok(()) => {}
            }
            let window = window.expect("replay_check allows a replay only in an open window");
            for (a, b) in crate::commit::uncovered(window.spans(oid), op.offset, end, op.transno) {
                self.write_all(oid, a, &bulk[(a - op.offset) as usize..(b - op.offset) as usize])?;
            }
            // Under its own transno, which orders it among the other replays.
            self.commits.record(window, oid, op.offset, end, op.transno);
            Ok(Some(self.commits.issue(oid)))
        })?;
        self.account(oid, op.owner)?;
        let quota_tight = self.usage.tight(oid);
        Ok(ost::WriteDone { len, transno: done.unwrap_or(0), committed: self.commits.committed(), quota_tight })
    }

    /// Commits every change answered so far (commit.rs): the objects written since the
    /// last commit are synced, then the commit record. The last transno committed.
    pub fn commit(&self) -> WeftResult<u64> {
        if self.commits.broken() {
            return Err(WeftError::io(format!(
                "OST {}: a sync of its objects failed earlier, so what it holds is not known to be what was \
                 written: it commits nothing more (its server's log says which sync; restart it once the \
                 storage is checked)",
                self.index
            )));
        }
        self.commits
            .commit(|oids| self.store.sync_many(oids), |record| self.store.set_commit_record(record))
            .map_err(|e| self.error(e))
    }

    /// Whether changes wait for a commit.
    pub fn commit_pending(&self) -> bool {
        self.commits.pending()
    }

    /// Stores all of `data`, writing again after a short write, as write_all does. Called
    /// once even for no data: a write of nothing still makes the object.
    fn write_all(&self, oid: u32, offset: u64, data: &[u8]) -> WeftResult<()> {
        let mut written = 0usize;
        let mut stalls = 0u32;
        loop {
            let rest = &data[written..];
            let n = self.store.write(oid, offset + written as u64, rest).map_err(|e| self.error(e))?;
            if n > rest.len() {
                return Err(WeftError::io(format!(
                    "OST {}: object {oid}: write: the store says it stored {n} of {} bytes",
                    self.index,
                    rest.len()
                )));
            }
            written += n;
            if written == data.len() {
                return Ok(());
            }
            stalls = if n == 0 { stalls + 1 } else { 0 };
            if stalls >= WRITE_STALLS_MAX {
                return Err(WeftError::io(format!(
                    "OST {}: object {oid}: write: the store stored nothing {stalls} times in a row, \
                     {written} of {} bytes written",
                    self.index,
                    data.len()
                )));
            }
        }
    }

    fn punch(&self, fid: &Fid, size: u64) -> WeftResult<()> {
        let oid = self.object_id(fid)?;
        if size > self.size_max {
            return Err(WeftError::new(
                ErrorCode::FileTooBig,
                format!("size {size} passes the largest object size {}", self.size_max),
            ));
        }
        // In the replay window, a span from the new size on: no replay of an earlier write
        // may write past it again. Committed before it is answered: a replay after a
        // later restart must not bring back the bytes it cut either.
        self.commits.with_window(std::time::Instant::now(), |window| {
            self.store.set_len(oid, size).map_err(|e| self.error(e))?;
            let transno = self.commits.issue(oid);
            if let Some(window) = window {
                self.commits.record(window, oid, size, u64::MAX, transno);
            }
            Ok::<_, WeftError>(())
        })?;
        self.account(oid, None)?;
        self.commit().map(drop)
    }

    /// EDQUOT when `len` more bytes would take one of the object's ids past this OST's
    /// share of its quota (the client then asks the master for more, and tries again).
    fn admit_quota(
        &self,
        oid: u32,
        owner: Option<weft_proto::msg::quota::QuotaOwner>,
        len: u64,
    ) -> WeftResult<crate::quota::Admitted<'_>> {
        self.usage
            .admit(oid, owner, len)
            .map_err(|why| WeftError::new(ErrorCode::QuotaExceeded, format!("OST {}: {why}", self.index)))
    }

    /// Moves object `oid`'s blocks in the quota usage after a change to it, to `owner` when
    /// the request named one; a new owner is recorded with the object. The data change is
    /// done by then: a failure to record the owner is logged, not the request's (the next
    /// start's scan counts the object as it finds it).
    fn account(&self, oid: u32, owner: Option<weft_proto::msg::quota::QuotaOwner>) -> WeftResult<()> {
        let recorded = self.usage.changed(oid, owner, || self.store.allocated(oid)).map_err(|e| self.error(e))?;
        if let Some(new) = recorded {
            if let Err(e) = self.store.set_owner(oid, new) {
                tracing::warn!(ost = self.index, oid, error = %self.error(e), "the object's owner was not recorded");
            }
        }
        Ok(())
    }

    fn quota_usage(&self, op: &ost::QuotaUsage) -> WeftResult<weft_proto::msg::quota::QuotaUse> {
        let scanned_kib = match op.verify {
            true => Some(crate::quota::Usage::scan(&*self.store).map_err(|e| self.error(e))?.used_kib(op.kind, op.id)),
            false => None,
        };
        Ok(weft_proto::msg::quota::QuotaUse { used_kib: self.usage.used_kib(op.kind, op.id), scanned_kib })
    }

    fn fallocate(&self, op: &ost::Fallocate) -> WeftResult<()> {
        let oid = self.object_id(&op.fid)?;
        let end = op.offset.checked_add(op.len);
        // A punch past the largest object is a hole already; anything else would make
        // blocks or size there.
        if op.mode != ost::FallocMode::Punch && end.is_none_or(|end| end > self.size_max) {
            return Err(WeftError::new(
                ErrorCode::FileTooBig,
                format!(
                    "fallocate of {} bytes at offset {} passes the largest object size {}",
                    op.len, op.offset, self.size_max
                ),
            ));
        }
        if !op.mode.clears() {
            let admitted = self.admit_quota(oid, op.owner, op.len)?;
            self.store.fallocate(oid, op.offset, op.len, op.mode, op.keep_size).map_err(|e| self.error(e))?;
            self.account(oid, op.owner)?;
            drop(admitted);
            return Ok(());
        }
        // As a truncate: no replay of an earlier write may bring the cleared bytes back.
        self.commits.with_window(std::time::Instant::now(), |window| {
            self.store.fallocate(oid, op.offset, op.len, op.mode, op.keep_size).map_err(|e| self.error(e))?;
            let transno = self.commits.issue(oid);
            if let Some(window) = window {
                self.commits.record(window, oid, op.offset, op.offset.saturating_add(op.len), transno);
            }
            Ok::<_, WeftError>(())
        })?;
        self.account(oid, op.owner)?;
        self.commit().map(drop)
    }

    fn getattr(&self, fid: &Fid) -> WeftResult<ost::ObjectAttr> {
        let oid = self.object_id(fid)?;
        self.store.stat(oid).map_err(|e| self.error(e))
    }

    /// The object's file, made if missing (as a first write would): a client of this
    /// process then reads and writes it itself (passthrough).
    fn local_path(&self, fid: &Fid) -> WeftResult<ost::ObjectPath> {
        let oid = self.object_id(fid)?;
        // Only objects this OST handed out: no request makes files past them.
        if oid > self.last_id_of(weft_proto::fid::object_oid_mdt(oid)) {
            return Err(WeftError::not_found(format!("object {fid} was never created on OST {}", self.index)));
        }
        match self.store.local_path(oid).map_err(|e| self.error(e))? {
            Some(path) => Ok(ost::ObjectPath { path: path.into_os_string().into_vec() }),
            None => Err(WeftError::new(
                ErrorCode::NotSupported,
                format!("OST {} keeps its objects without files: no local path for object {fid}", self.index),
            )),
        }
    }

    /// An fsync: the object, and every write answered before, durable (a commit, so that
    /// no replay of an earlier write can come back over what was synced).
    fn sync(&self, fid: &Fid) -> WeftResult<ost::Committed> {
        let oid = self.object_id(fid)?;
        self.store.sync(oid).map_err(|e| self.error(e))?;
        Ok(ost::Committed { committed: self.commit()? })
    }

    fn destroy(&self, fid: &Fid) -> WeftResult<()> {
        let oid = self.object_id(fid)?;
        self.store.remove(oid).map_err(|e| self.error(e))?;
        self.usage.removed(oid);
        self.commits.destroyed(oid);
        Ok(())
    }

    fn precreate(&self, start_oid: u32, count: u32) -> WeftResult<ost::Precreated> {
        if count == 0 || count > PRECREATE_COUNT_MAX {
            return Err(WeftError::invalid(format!("precreate count {count} is outside 1..={PRECREATE_COUNT_MAX}")));
        }
        let Some(last_oid) = start_oid.checked_add(count - 1) else {
            return Err(WeftError::invalid(format!(
                "precreate of {count} objects from {start_oid} passes the largest object id {}",
                u32::MAX
            )));
        };
        let mdt = weft_proto::fid::object_oid_mdt(start_oid);
        if weft_proto::fid::object_oid_mdt(last_oid) != mdt {
            return Err(WeftError::invalid(format!(
                "precreate of {count} objects from {start_oid} passes the end of MDT {mdt}'s object ids"
            )));
        }
        // Only the ids are handed out: an object's file is made by its first write (or
        // punch), and until then it reads as empty, as a destroyed one does. An empty file
        // created here would cost an inode allocation and a directory entry per file
        // created on the MDS, most of them never written (mdtest, tar of small files...).
        let _one_at_a_time = lock_unpoisoned(&self.precreating);
        if last_oid > self.last_id_of(mdt) {
            // Durable before the answer: an MDS that hands these ids to files must never
            // see them handed out again after a power loss.
            self.store.set_last_id(last_oid).map_err(|e| self.error(e))?;
        }
        Ok(ost::Precreated { last_oid })
    }

    /// Destroys every object past `above_oid` up to LAST_ID, unless the MDS has no record
    /// or the gap is wider than [`ORPHANS_DESTROY_MAX`] (see `DestroyOrphans`). The MDS
    /// neither precreates nor hands out ids of this OST until it has the answer, so the
    /// removals run without the LAST_ID lock (reads and passthrough opens check LAST_ID).
    fn destroy_orphans(&self, mdt: u32, above_oid: Option<u32>, mds_start: u64) -> WeftResult<ost::Orphans> {
        let mut done = lock_unpoisoned(&self.orphans_done);
        if let Some((start, answer)) = done.get(&mdt) {
            if *start == mds_start {
                return Ok(*answer); // A resend of a cleanup already done.
            }
        }
        let last_oid = self.last_id_of(mdt);
        let answer = match above_oid {
            None => {
                // A new OST meeting a new MDS is the ordinary start of every file system;
                // only an OST that already holds objects the MDS never recorded is news.
                if last_oid > 0 {
                    tracing::warn!(
                        ost = self.index,
                        last_oid,
                        "an MDS without a record of this OST: its ids start past LAST_ID"
                    );
                }
                ost::Orphans { last_oid, destroyed: false }
            }
            Some(above) if last_oid.saturating_sub(above) > ORPHANS_DESTROY_MAX => {
                tracing::error!(
                    ost = self.index,
                    above,
                    last_oid,
                    "refusing an orphan cleanup of {} objects (at most {ORPHANS_DESTROY_MAX}): the MDS's records \
                     are not this OST's; nothing destroyed, its ids start past LAST_ID",
                    last_oid - above
                );
                ost::Orphans { last_oid, destroyed: false }
            }
            Some(above) => {
                let orphans = above.saturating_add(1)..=last_oid;
                if !orphans.is_empty() {
                    tracing::info!(
                        ost = self.index,
                        from = orphans.start(),
                        to = orphans.end(),
                        "destroying orphan objects"
                    );
                }
                for oid in orphans {
                    self.store.remove(oid).map_err(|e| self.error(e))?;
                    self.usage.removed(oid);
                    // Its id goes to a new file: a replay of a write to the lost one must
                    // not land in it.
                    self.commits.destroyed(oid);
                }
                ost::Orphans { last_oid, destroyed: true }
            }
        };
        done.insert(mdt, (mds_start, answer));
        Ok(answer)
    }

    fn statfs(&self) -> WeftResult<StatfsInfo> {
        self.store.statfs().map_err(|e| self.error(e))
    }

    /// MDT 0's LAST_ID (a file system's only MDT).
    pub fn last_id(&self) -> u32 {
        self.last_id_of(0)
    }

    /// The last object id MDT `mdt` had precreated here.
    pub fn last_id_of(&self, mdt: u32) -> u32 {
        self.store.last_id(mdt)
    }
}

/// The handler of an OST op: blocking I/O on one OST, answered with the op's reply and
/// the reply's bulk (a read's data, else empty).
pub(crate) trait Handle: Op<Answer = OstReply> {
    fn run(&self, ost: &Ost, bulk: &Bytes) -> WeftResult<(Self::Reply, Bytes)>;
}

impl Handle for ost::Read {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<(ost::ReadDone, Bytes)> {
        let data = ost.read(&self.fid, self.offset, self.len)?;
        let len = u32::try_from(data.len()).map_err(|_| WeftError::io("read returned more than 4 GiB"))?;
        Ok((ost::ReadDone { len }, data))
    }
}

impl Handle for ost::Write {
    fn run(&self, ost: &Ost, bulk: &Bytes) -> WeftResult<(ost::WriteDone, Bytes)> {
        Ok((ost.write(self, bulk)?, Bytes::new()))
    }
}

impl Handle for ost::Punch {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<((), Bytes)> {
        Ok((ost.punch(&self.fid, self.size)?, Bytes::new()))
    }
}

impl Handle for ost::Fallocate {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<((), Bytes)> {
        Ok((ost.fallocate(self)?, Bytes::new()))
    }
}

impl Handle for ost::Getattr {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<(ost::ObjectAttr, Bytes)> {
        Ok((ost.getattr(&self.fid)?, Bytes::new()))
    }
}

impl Handle for ost::Sync {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<(ost::Committed, Bytes)> {
        Ok((ost.sync(&self.fid)?, Bytes::new()))
    }
}

impl Handle for ost::Replay {
    fn run(&self, ost: &Ost, bulk: &Bytes) -> WeftResult<(ost::WriteDone, Bytes)> {
        Ok((ost.replay(self, bulk)?, Bytes::new()))
    }
}

impl Handle for ost::Commit {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<(ost::Committed, Bytes)> {
        let committed = if self.commit { ost.commit()? } else { ost.commits.committed() };
        Ok((ost::Committed { committed }, Bytes::new()))
    }
}

impl Handle for ost::Destroy {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<((), Bytes)> {
        Ok((ost.destroy(&self.fid)?, Bytes::new()))
    }
}

impl Handle for ost::Precreate {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<(ost::Precreated, Bytes)> {
        Ok((ost.precreate(self.start_oid, self.count)?, Bytes::new()))
    }
}

impl Handle for ost::Statfs {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<(StatfsInfo, Bytes)> {
        Ok((ost.statfs()?, Bytes::new()))
    }
}

impl Handle for ost::DestroyOrphans {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<(ost::Orphans, Bytes)> {
        Ok((ost.destroy_orphans(self.mdt, self.above_oid, self.mds_start)?, Bytes::new()))
    }
}

impl Handle for ost::QuotaUsage {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<(weft_proto::msg::quota::QuotaUse, Bytes)> {
        Ok((ost.quota_usage(self)?, Bytes::new()))
    }
}

impl Handle for ost::SetOwner {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<((), Bytes)> {
        let oid = ost.object_id(&self.fid)?;
        Ok((ost.account(oid, Some(self.owner))?, Bytes::new()))
    }
}

impl Handle for ost::QuotaUsageAll {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<(Vec<weft_proto::msg::quota::QuotaUseEntry>, Bytes)> {
        Ok((ost.usage.all_used(), Bytes::new()))
    }
}

impl Handle for ost::QuotaGrants {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<(Vec<weft_proto::msg::quota::QuotaUseEntry>, Bytes)> {
        Ok((ost.usage.set_grants(&self.grants), Bytes::new()))
    }
}

impl Handle for ost::LocalPath {
    fn run(&self, ost: &Ost, _: &Bytes) -> WeftResult<(ost::ObjectPath, Bytes)> {
        Ok((ost.local_path(&self.fid)?, Bytes::new()))
    }
}

/// [`Ost::execute`], dispatching every op of `weft_proto::ost_ops!` to its [`Handle`].
macro_rules! dispatch {
    (
        $Request:ident / $Answer:ident;
        $( $(#[$meta:meta])* $kind:ident $Op:ident { $($fields:tt)* } -> $Reply:ty = $name:literal; )*
    ) => {
        impl Ost {
            /// Executes one request: the reply and its bulk. May block (file I/O).
            pub fn execute(&self, req: &OstRequest, bulk: &Bytes) -> (WeftResult<OstReply>, Bytes) {
                let result = match req {
                    $( OstRequest::$Op(op) => Handle::run(op, self, bulk).map(|(r, b)| (r.into_reply(), b)), )*
                };
                match result {
                    Ok((reply, bulk)) => (Ok(reply), bulk),
                    Err(e) => (Err(e), Bytes::new()),
                }
            }
        }
    };
}

weft_proto::ost_ops!(dispatch);
