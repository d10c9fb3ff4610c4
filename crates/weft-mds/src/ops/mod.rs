//! One file per metadata operation, each with its tests.
//!
//! THE RULE OF EVERY MUTATION: check, then write. An op reads and validates everything it
//! needs (existence, types, permissions, names, limits) before its first write to the
//! batch or to in-memory state. Many ops share one batch (group commit),
//! so an op that returns a POSIX error must have written nothing: the ops before and after
//! it in the batch commit. Only storage errors (EIO) may come after a write, and those abort
//! the whole batch (see `writer`). Tests assert this with failing ops in mixed batches.

pub mod batch;
pub mod changelog;
pub mod close;
pub mod create;
pub mod fid2path;
pub mod hsm;
pub mod layout;
pub mod link;
pub mod lookup;
pub mod migrate;
pub mod mirror;
pub mod mkdir;
pub mod mknod;
pub mod open;
pub mod quota;
pub mod readdir;
pub mod rename;
pub mod replay;
pub mod rmdir;
pub mod setattr;
pub mod statfs;
pub mod stripe;
pub mod symlink;
pub mod unlink;
pub mod update;
pub mod xattr;

use crate::objects::Reservation;
use crate::open_files::Undo;
use crate::perm::{self, Owner, S_ISGID};
use crate::schema::InodeRecord;
use crate::store::{Tables, WriteTables};
use crate::Core;
use weft_proto::msg::changelog::{ChangelogRecord, ChangelogType};
use weft_proto::msg::ops::{Op, Payload};
use weft_proto::msg::{Attr, FileType, Identity, InodeInfo, MdtReply, MdtRequest, Timestamp};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// What a mutation sees while the writer applies it.
pub struct OpCtx<'a> {
    pub core: &'a Core,
    pub t: &'a mut WriteTables,
    pub who: &'a Identity,
    /// The caller's job, for the changelog.
    pub jobid: &'a str,
    pub client_id: u64,
    /// The server clock, one value per batch.
    pub now: Timestamp,
    pub undo: &'a mut Vec<Undo>,
    /// Objects reserved for this op before the batch.
    pub reservation: Option<&'a Reservation>,
    /// Set by the op when it put the reservation into a layout.
    pub reservation_used: bool,
}

impl OpCtx<'_> {
    /// Records a change in the changelog, when a reader is registered and the mask has its
    /// type: `target` changed, under `name` in its directory if the change is of a name.
    /// Called after the op's writes (check, then write).
    pub fn record(
        &mut self,
        kind: ChangelogType,
        flags: u32,
        target: Fid,
        name: Option<(Fid, &[u8])>,
    ) -> WeftResult<()> {
        self.record_rename(kind, flags, target, name, None)
    }

    /// As [`OpCtx::record`], with a rename's source (the file renamed, its old directory and
    /// old name).
    pub fn record_rename(
        &mut self,
        kind: ChangelogType,
        flags: u32,
        target: Fid,
        name: Option<(Fid, &[u8])>,
        source: Option<(Fid, Fid, &[u8])>,
    ) -> WeftResult<()> {
        if !self.core.changelog.records(kind) {
            return Ok(());
        }
        let rec = ChangelogRecord {
            index: 0,
            kind,
            time: self.now,
            flags,
            target,
            parent: name.map(|(p, _)| p),
            name: name.map_or_else(Vec::new, |(_, n)| n.to_vec()),
            source: source.map(|(f, p, n)| (f, p, n.to_vec())),
            uid: self.who.uid,
            gid: self.who.gid,
            jobid: self.jobid.to_string(),
        };
        self.t.append_changelog(rec).map(drop)
    }
}

/// A read's inputs: the committed state it reads, as of one snapshot.
pub struct QueryCtx<'a> {
    pub core: &'a Core,
    pub t: &'a Tables,
    pub who: &'a Identity,
}

/// The handler of a mutation: runs inside its batch, checks everything, then writes (see
/// the module documentation). Each op's file implements it for its op.
pub trait Mutation: Op<Answer = MdtReply> {
    fn execute(&self, ctx: &mut OpCtx<'_>) -> WeftResult<Self::Reply>;
}

/// The handler of a read: answers from a snapshot of the committed state.
pub trait Query: Op<Answer = MdtReply> {
    fn query(&self, q: &QueryCtx<'_>) -> WeftResult<Self::Reply>;
}

/// `execute` and `read`, dispatching every op of `weft_proto::mdt_ops!` to its handler: an
/// op added to the list does not compile until its file implements [`Mutation`] (a `write`)
/// or [`Query`] (a `read`).
macro_rules! dispatch {
    (@mutation write $op:ident $ctx:ident $req:ident) => {
        Mutation::execute($op, $ctx).map(Payload::into_reply)
    };
    (@mutation read $op:ident $ctx:ident $req:ident) => {{
        let _ = ($op, $ctx);
        Err(WeftError::protocol(format!("{} is a read, not a mutation", $req.opcode_name())))
    }};
    (@query read $op:ident $q:ident $req:ident) => {
        Query::query($op, $q).map(Payload::into_reply)
    };
    (@query write $op:ident $q:ident $req:ident) => {{
        let _ = ($op, $q);
        Err(WeftError::protocol(format!("{} is a mutation, not a read", $req.opcode_name())))
    }};
    (
        $Request:ident / $Answer:ident;
        $( $(#[$meta:meta])* $kind:ident $Op:ident { $($fields:tt)* } -> $Reply:ty = $name:literal; )*
    ) => {
        /// Executes one mutation inside its batch.
        pub fn execute(ctx: &mut OpCtx<'_>, req: &MdtRequest) -> WeftResult<MdtReply> {
            match req {
                $( MdtRequest::$Op(op) => dispatch!(@mutation $kind op ctx req), )*
            }
        }

        /// Executes one read on a snapshot of the committed state.
        pub fn read(q: &QueryCtx<'_>, req: &MdtRequest) -> WeftResult<MdtReply> {
            match req {
                $( MdtRequest::$Op(op) => dispatch!(@query $kind op q req), )*
            }
        }
    };
}

weft_proto::mdt_ops!(dispatch);

pub use weft_proto::name::validate_name;

pub fn owner(rec: &InodeRecord) -> Owner<'_> {
    Owner { uid: rec.uid, gid: rec.gid, mode: rec.mode, acl: rec.acl.as_ref() }
}

pub fn err(code: ErrorCode, msg: impl Into<String>) -> WeftError {
    WeftError::new(code, msg)
}

pub fn show(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

/// The attributes a client sees. `writers` = open writers now (regular files).
pub fn inode_info_with(fid: Fid, rec: &InodeRecord, writers: u32) -> InodeInfo {
    let (size, size_known) = match rec.kind {
        FileType::Regular => (rec.size, rec.size_known && writers == 0),
        FileType::Directory => (crate::limits::DIRECTORY_SIZE_BYTES, true),
        FileType::Symlink => (rec.symlink_target.as_ref().map_or(0, |t| t.len() as u64), true),
        _ => (0, true),
    };
    InodeInfo {
        attr: Attr {
            fid,
            kind: rec.kind,
            mode: rec.mode,
            uid: rec.uid,
            gid: rec.gid,
            nlink: rec.nlink,
            size,
            size_known,
            blocks: rec.blocks,
            atime: rec.atime,
            mtime: rec.mtime,
            ctime: rec.ctime,
            rdev: rec.rdev,
            projid: rec.projid,
            proj_inherit: rec.proj_inherit,
        },
        layout: rec.layout.clone(),
        lock: None,
        stripes: rec.stripes().cloned().map(Box::new),
    }
}

/// A new inode's record: owner from the caller, group from a setgid parent, S_ISGID
/// inherited by new subdirectories of a setgid parent. `mode` is what the program asked
/// for and `umask` its process's: a parent's default ACL replaces the umask (the new inode
/// takes the ACL under `mode`, and a new directory the default ACL too), as Linux's
/// `posix_acl_create`; symlinks take neither. A parent that passes its project on
/// (PROJINHERIT) gives it to the new inode, and to a new directory the flag too.
pub fn new_record(
    kind: FileType,
    mode: u32,
    umask: u32,
    who: &Identity,
    parent: &InodeRecord,
    now: Timestamp,
) -> InodeRecord {
    let (mut mode, acl) = match (&parent.default_acl, kind) {
        (_, FileType::Symlink) => (mode & 0o7777, None),
        (Some(default), _) => {
            let (acl, bits) = default.inherit(mode & 0o777);
            (mode & 0o7000 | bits, acl)
        }
        (None, _) => (mode & 0o7777 & !(umask & 0o777), None),
    };
    let setgid_parent = parent.mode & S_ISGID != 0;
    let gid = if setgid_parent { parent.gid } else { who.gid };
    if kind == FileType::Directory && setgid_parent {
        mode |= S_ISGID;
    }
    if kind != FileType::Directory && mode & S_ISGID != 0 && !perm::is_root(who) && !who.in_group(gid) {
        // Linux drops S_ISGID on a new file whose group the creator is not in.
        mode &= !S_ISGID;
    }
    let mut rec = InodeRecord::new(kind, mode, who.uid, gid, now);
    rec.acl = acl;
    if kind == FileType::Directory {
        rec.default_acl = parent.default_acl.clone();
    }
    if parent.proj_inherit {
        rec.projid = parent.projid;
        rec.proj_inherit = kind == FileType::Directory;
    }
    rec
}

/// A file may move (rename) or gain a name (link) into a directory that passes its project
/// on only if it is of that project (as ext4 and Lustre: EXDEV, and mv copies instead, so
/// that the copy is counted in the directory's project).
pub fn check_project(dir: &InodeRecord, rec: &InodeRecord) -> WeftResult<()> {
    if dir.proj_inherit && dir.projid != rec.projid {
        return Err(err(
            ErrorCode::CrossDevice,
            format!("the file is of project {}, the directory passes on project {}", rec.projid, dir.projid),
        ));
    }
    Ok(())
}

/// Marks a directory's entries changed.
pub fn touch_dir(rec: &mut InodeRecord, now: Timestamp) {
    rec.mtime = now;
    rec.ctime = now;
}

/// Checks common to every op that adds a name: the parent is a directory the caller may
/// write, the name is valid and free. Returns the parent's record.
pub fn check_new_entry(ctx: &OpCtx<'_>, parent: Fid, name: &[u8]) -> WeftResult<InodeRecord> {
    check_new_name(ctx.t, ctx.who, parent, name)
}

/// [`check_new_entry`] on any state (a coordinator's look before a distributed change).
pub fn check_new_name(t: &Tables, who: &Identity, parent: Fid, name: &[u8]) -> WeftResult<InodeRecord> {
    let dir = t.must_dir(parent)?;
    validate_name(name)?;
    perm::check_dir_write(who, owner(&dir))?;
    if dir.nlink == 0 {
        return Err(err(ErrorCode::NotFound, format!("directory {parent} was removed")));
    }
    if t.dentry(parent, name)?.is_some() {
        return Err(err(ErrorCode::Exists, format!("'{}' exists already", show(name))));
    }
    Ok(dir)
}

/// Removes one link of a non-directory inode whose name the caller removed already:
/// the inode goes when no link is left, unless it is open (then it becomes an orphan).
pub fn drop_link(ctx: &mut OpCtx<'_>, fid: Fid, mut rec: InodeRecord) -> WeftResult<()> {
    assert!(rec.kind != FileType::Directory, "drop_link on directory {fid}");
    assert!(rec.nlink > 0, "inode {fid} with a name has nlink 0");
    rec.nlink -= 1;
    rec.ctime = ctx.now;
    if rec.nlink > 0 {
        return ctx.t.put_inode(fid, &rec);
    }
    if ctx.core.open_files().counts(fid).opens > 0 {
        ctx.t.put_inode(fid, &rec)?;
        ctx.t.add_orphan(fid)
    } else {
        ctx.t.destroy_inode(fid, &rec)
    }
}

/// Test harness shared by the op tests.
#[cfg(test)]
pub(crate) use crate::testutil as t;
