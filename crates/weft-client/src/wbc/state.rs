//! The write-back cache's bookkeeping as pure logic (no I/O): per directory held, its
//! listing as this client made it, the files it made (their attributes, served locally), the
//! FIDs it may still give, and the ops not yet sent. Tested in `state_tests.rs`.

use std::collections::HashMap;
use std::time::Instant;
use weft_proto::lock::LockGrant;
use weft_proto::msg::wbc::BatchOp;
use weft_proto::msg::{Attr, Caller, FileType, InodeInfo, SetAttr, SetTime, Timestamp};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// One directory whose write-back lock this client holds.
pub struct Dir {
    pub lock: LockGrant,
    /// The directory as granted, its times moved by the changes made here since.
    pub attr: Attr,
    /// Every name in the directory (read at the grant, then changed only here).
    pub names: HashMap<Vec<u8>, (Fid, FileType)>,
    /// The files made here through the cache, by FID: their attributes are this client's.
    pub made: HashMap<Fid, InodeInfo>,
    /// FIDs granted and not yet given: the next one and how many are left.
    pub next_fid: Fid,
    pub fids_left: u32,
    /// Ops made and not yet sent, in order, and who made them (one identity per batch).
    pub pending: Vec<BatchOp>,
    pub who: Option<Caller>,
    /// When the oldest pending op was made.
    pub since: Option<Instant>,
    /// Being sent and given back (a callback, a rename): no new op is made here, the
    /// requests go to the MDS (after the last batch).
    pub closing: bool,
}

/// What a create in a held directory needs first.
#[derive(Debug, PartialEq, Eq)]
pub enum CreateNeeds {
    /// Made: the file as it now is.
    Made(Box<InodeInfo>),
    /// More FIDs (ask the MDT, then try again).
    Fids,
    /// The pending ops are another caller's: send them first.
    Flush,
    /// The directory is being given back: create at the MDS.
    Closing,
}

impl Dir {
    pub fn new(lock: LockGrant, attr: Attr, names: HashMap<Vec<u8>, (Fid, FileType)>) -> Dir {
        Dir {
            lock,
            attr,
            names,
            made: HashMap::new(),
            next_fid: Fid::new(0, 0, 0),
            fids_left: 0,
            pending: Vec::new(),
            who: None,
            since: None,
            closing: false,
        }
    }

    /// FIDs granted: from `first`, `count` of them (replacing what was left).
    pub fn add_fids(&mut self, first: Fid, count: u32) {
        if count > 0 {
            (self.next_fid, self.fids_left) = (first, count);
        }
    }

    fn push(&mut self, who: &Caller, op: BatchOp, now: Instant) {
        self.who.get_or_insert_with(|| who.clone());
        self.since.get_or_insert(now);
        self.pending.push(op);
    }

    /// Whether `who` may add to the pending ops (none pending, or they are its own).
    fn same_caller(&self, who: &Caller) -> bool {
        self.who.as_ref().is_none_or(|w| w.identity == who.identity && w.jobid == who.jobid)
    }

    /// An empty regular file `name` with `mode` (the caller's umask applied here), made
    /// at `time`, as the MDS would make it (owner, group of a setgid directory); O_EXCL.
    pub fn create(
        &mut self,
        who: &Caller,
        name: &[u8],
        mode: u32,
        time: Timestamp,
        now: Instant,
    ) -> WeftResult<CreateNeeds> {
        weft_proto::name::validate_name(name)?;
        if self.names.contains_key(name) {
            return Err(WeftError::new(
                ErrorCode::Exists,
                format!("'{}' exists already", String::from_utf8_lossy(name)),
            ));
        }
        if self.closing {
            return Ok(CreateNeeds::Closing);
        }
        if !self.same_caller(who) {
            return Ok(CreateNeeds::Flush);
        }
        if self.fids_left == 0 {
            return Ok(CreateNeeds::Fids);
        }
        let fid = self.next_fid;
        self.next_fid = Fid::new(fid.seq, fid.oid + 1, 0);
        self.fids_left -= 1;
        let id = &who.identity;
        let setgid_dir = self.attr.mode & 0o2000 != 0;
        let gid = if setgid_dir { self.attr.gid } else { id.gid };
        let mut mode = mode & 0o7777 & !(who.umask & 0o777);
        if mode & 0o2000 != 0 && id.uid != 0 && !id.in_group(gid) {
            mode &= !0o2000;
        }
        let attr = Attr {
            fid,
            kind: FileType::Regular,
            mode,
            uid: id.uid,
            gid,
            nlink: 1,
            size: 0,
            size_known: true,
            blocks: 0,
            atime: time,
            mtime: time,
            ctime: time,
            rdev: 0,
            projid: 0,
            proj_inherit: false,
        };
        let inode = InodeInfo { attr, layout: None, lock: None, stripes: None };
        self.names.insert(name.to_vec(), (fid, FileType::Regular));
        self.made.insert(fid, inode.clone());
        self.touch(time);
        let op = BatchOp::Create { parent: self.attr.fid, name: name.to_vec(), fid, mode, uid: id.uid, gid, time };
        self.push(who, op, now);
        Ok(CreateNeeds::Made(Box::new(inode)))
    }

    fn touch(&mut self, time: Timestamp) {
        let t = time.max(self.attr.mtime);
        (self.attr.mtime, self.attr.ctime) = (t, t);
    }

    /// Removes `name` (Ok(true)): a file this client made here, or one that was there
    /// before when the caller may remove any name here without the MDS looking at the file
    /// (see [`Dir::may_remove_any`]). Ok(false): the MDS must decide (sent on its own).
    /// NotFound when there is no such name, IsDir for a directory.
    pub fn unlink(&mut self, who: &Caller, name: &[u8], time: Timestamp, now: Instant) -> WeftResult<bool> {
        let show = || String::from_utf8_lossy(name).into_owned();
        let Some(&(fid, kind)) = self.names.get(name) else {
            return Err(WeftError::not_found(format!("no entry '{}'", show())));
        };
        if kind == FileType::Directory {
            return Err(WeftError::new(ErrorCode::IsDir, format!("'{}' is a directory: use rmdir", show())));
        }
        let mine = self.made.contains_key(&fid);
        if self.closing || !self.same_caller(who) || !(mine || self.may_remove_any(who)) {
            return Ok(false);
        }
        self.names.remove(name);
        self.made.remove(&fid);
        self.touch(time);
        self.push(who, BatchOp::Unlink { parent: self.attr.fid, name: name.to_vec() }, now);
        Ok(true)
    }

    /// Whether `who` may remove any name of this directory whatever the file's owner, so
    /// that an unlink of a name that was there before cannot fail at the MDT and take its
    /// batch with it: root, or the directory's owner with write and search by the mode
    /// (an owner's rights are the mode's owner bits with or without an access ACL, and the
    /// sticky bit does not hold an owner back). Anyone else's unlinks of such names go to
    /// the MDS on their own: a group's rights may be narrowed by an ACL this cache does not
    /// see, and a sticky directory makes the answer the file's owner's.
    fn may_remove_any(&self, who: &Caller) -> bool {
        let id = &who.identity;
        id.uid == 0 || (id.uid == self.attr.uid && self.attr.mode & 0o300 == 0o300)
    }

    /// Changes the attributes of a file made here, if the cache can (mode and times by
    /// its owner): the file as it now is; None when the MDS must (sent on its own).
    pub fn setattr(
        &mut self,
        who: &Caller,
        fid: Fid,
        set: &SetAttr,
        time: Timestamp,
        now: Instant,
    ) -> Option<InodeInfo> {
        let simple = set.uid.is_none()
            && set.gid.is_none()
            && set.size.is_none()
            && set.projid.is_none()
            && set.proj_inherit.is_none();
        let inode = self.made.get(&fid)?;
        let owner = who.identity.uid == 0 || who.identity.uid == inode.attr.uid;
        if self.closing || !simple || !owner || !self.same_caller(who) {
            return None;
        }
        let at = |t: &Option<SetTime>| match t {
            Some(SetTime::At(t)) => Some(*t),
            Some(SetTime::Now) => Some(time),
            None => None,
        };
        let mut sent = SetAttr { mode: set.mode.map(|m| m & 0o7777), ..Default::default() };
        let inode = self.made.get_mut(&fid)?;
        if let Some(m) = sent.mode {
            if m & 0o2000 != 0 && who.identity.uid != 0 && !who.identity.in_group(inode.attr.gid) {
                return None; // the MDS clears S_ISGID then: let it say so
            }
            inode.attr.mode = m;
        }
        if let Some(t) = at(&set.atime) {
            inode.attr.atime = t;
            sent.atime = Some(SetTime::At(t));
        }
        if let Some(t) = at(&set.mtime) {
            inode.attr.mtime = t;
            sent.mtime = Some(SetTime::At(t));
        }
        let ctime = set.ctime.unwrap_or(time);
        inode.attr.ctime = ctime;
        sent.ctime = Some(ctime);
        let answer = inode.clone();
        self.push(who, BatchOp::Setattr { fid, set: sent }, now);
        Some(answer)
    }

    /// Up to `max` pending ops to send, in order, with who made them.
    pub fn take(&mut self, max: usize) -> Option<(Vec<BatchOp>, Caller)> {
        if self.pending.is_empty() {
            return None;
        }
        let n = self.pending.len().min(max);
        let ops: Vec<BatchOp> = self.pending.drain(..n).collect();
        let who = if self.pending.is_empty() {
            self.since = None;
            self.who.take()
        } else {
            self.since = Some(Instant::now());
            self.who.clone()
        };
        Some((ops, who.unwrap_or_default()))
    }

    /// A batch the MDT applied: the files it made are the MDT's to answer for now (only
    /// their names stay here, so the memory held is the listing's).
    pub fn sent(&mut self, ops: &[BatchOp]) {
        for op in ops {
            if let BatchOp::Create { fid, .. } = op {
                self.made.remove(fid);
            }
        }
    }

    /// A batch that failed: what it made is not there (the names and files go, so that
    /// the client shows what the MDS has).
    pub fn lost(&mut self, ops: &[BatchOp]) {
        for op in ops {
            if let BatchOp::Create { name, fid, .. } = op {
                if self.names.get(name).is_some_and(|(f, _)| f == fid) {
                    self.names.remove(name);
                }
                self.made.remove(fid);
            }
        }
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
