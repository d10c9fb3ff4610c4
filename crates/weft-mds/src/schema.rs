//! The on-disk schema of one MDT: every table, its key encoding and its value encoding.
//! This file is the only place that knows how keys are laid out; everything else calls the
//! functions here.
//!
//! All tables map bytes to bytes (`&[u8] -> &[u8]`). Integers in keys are big-endian so that
//! byte order is numeric order; FIDs in keys are [`Fid::to_bytes`] (16 bytes, big-endian).
//! Values are postcard unless said otherwise.
//!
//! | table             | key                                         | value                                   |
//! |-------------------|---------------------------------------------|-----------------------------------------|
//! | `meta`            | `b"format"`                                 | format version, u32 BE                  |
//! | `inodes`          | fid (16)                                    | postcard [`InodeRecord`]                |
//! | `dentries`        | parent fid (16) ++ name hash u64 BE ++ name | child fid (16) ++ [`kind_byte`] (1)     |
//! | `links`           | child fid (16) ++ parent fid (16) ++ name   | empty (one row per hard link)           |
//! | `xattrs`          | fid (16) ++ xattr name                      | xattr value bytes                       |
//! | `reply_cache`     | client id u64 BE ++ reply slot u32 BE       | stored unix secs u64 BE ++ request id u64 BE ++ postcard `Result<MdtReply, WeftError>` |
//! | `orphans`         | fid (16)                                    | empty (nlink 0, still open when written)|
//! | `destroy_queue`   | ost u32 BE ++ object fid (16)               | empty (objects to destroy on OSTs)      |
//! | `precreate`       | ost u32 BE                                  | next oid u32 BE ++ created oid u32 BE   |
//! | `counters`        | `b"next_inode"`, `b"changelog_next"`, `b"changelog_user_next"` | the next inode number, changelog record index and changelog reader number, u64 BE |
//! | `changelog`       | record index u64 BE                         | postcard `ChangelogRecord` (weft-proto) |
//! | `changelog_users` | reader number u64 BE                        | postcard [`StoredChangelogUser`]        |
//! | `hsm_actions`     | cookie u64 BE                               | postcard `HsmActionItem` (weft-proto)   |
//! | `hsm_by_fid`      | fid (16) ++ cookie u64 BE                   | empty (the actions of each file)        |
//! | `resync_queue`    | fid (16)                                    | empty (files whose mirrors to resync)   |
//! | `clients`         | client id u64 BE                            | recorded unix secs u64 BE               |
//!
//! The name hash ([`name_hash`]) is FNV-1a 64 clamped into `[2, u64::MAX - 1]`; it is the
//! readdir cookie, so it must never change for an existing format version.
//!
//! Compatibility: [`FORMAT_VERSION`] is written when the MDT is formatted; opening refuses
//! any other version. A change to any key or value layout here bumps it.

use serde::{Deserialize, Serialize};
use weft_proto::acl::Acl;
use weft_proto::fid::{SEQ_METADATA_BASE, SEQ_PER_MDT};
use weft_proto::msg::quota::{QuotaKind, QuotaLimits, QuotaOwner, GRACE_DEFAULT_S};
use weft_proto::msg::{FileType, Timestamp};
use weft_proto::{Fid, Layout, StripeSpec, WeftError, WeftResult};

/// Version of everything described in this file.
/// 2: the reply cache keeps one row per client slot (was one per request, with a by-time index).
/// 3: the changelog tables.
/// 4: the HSM coordinator's tables.
/// 5: composite layouts (layout components carry an id, a mirror, flags and the spec asked
///    for; stripe specs carry components): inode records of 4 do not decode as 5.
/// 6: inode records carry a project id, its inheritance and POSIX ACLs, and begin with
///    [`INODE_RECORD_V6`]; a record of 5 (no marker) still decodes, as project 0 without
///    ACLs, and is written anew as 6 at its next change.
/// 7: several MDTs: inode records carry a directory's placement ([`DirPlacement`]) and
///    begin with [`INODE_RECORD_V7`] (records of 5 and 6 still decode); the tables of
///    distributed changes (`updates`, `txns`).
pub const FORMAT_VERSION: u32 = 7;
/// The versions an MDT of [`FORMAT_VERSION`] is upgraded from, by writing the new version:
/// every change since them only added tables (which opening the store makes, empty) or
/// record forms that still decode (see [`decode_inode`]).
pub const FORMAT_VERSIONS_UPGRADABLE: [u32; 2] = [5, 6];
/// Name of the redb file inside the MDT's data directory.
pub const DB_FILE_NAME: &str = "mdt.redb";

/// `meta`: `b"format"` -> format version u32 BE; `b"journal_seq"` -> u64 BE.
pub const TABLE_META: u8 = 0;
pub const META_FORMAT_KEY: &[u8] = b"format";
/// `b"journal_seq"` -> u64 BE: the last journal record that a durable checkpoint holds.
pub const META_JOURNAL_SEQ_KEY: &[u8] = b"journal_seq";
/// A replicated MDT: the group's record of the last log entry whose changes the store (with
/// the journal) holds (opaque to the MDS: weft-raft's; see replica.rs).
pub const META_RAFT_STATE_KEY: &[u8] = b"raft_state";

/// Whether a journaled change may name this `meta` row: those that travel with the changes
/// (a format or upgrade proposed to a replicated MDT's group, the group's state), not the
/// journal's own bookkeeping.
pub fn is_journaled_meta(key: &[u8]) -> bool {
    key == META_FORMAT_KEY || key == META_RAFT_STATE_KEY
}
/// Inode records by FID.
pub const TABLE_INODES: u8 = 1;
/// Directory entries, ordered by (parent, name hash) so readdir resumes by cookie.
pub const TABLE_DENTRIES: u8 = 2;
/// Reverse entries (child -> parent, name): hard-link bookkeeping and fid2path.
pub const TABLE_LINKS: u8 = 3;
/// Extended attributes.
pub const TABLE_XATTRS: u8 = 4;
/// The last mutation's reply in each (client, reply slot), so a resend has no second effect.
pub const TABLE_REPLY_CACHE: u8 = 5;
/// Inodes with no name left that were open; destroyed on last close or at the next start.
pub const TABLE_ORPHANS: u8 = 6;
/// OST objects to destroy; an entry leaves only after the OST confirmed.
pub const TABLE_DESTROY_QUEUE: u8 = 7;
/// Per OST: the next precreated oid to hand out and the last oid the OST created.
pub const TABLE_PRECREATE: u8 = 8;
/// Allocation counters.
pub const TABLE_COUNTERS: u8 = 9;
pub const COUNTER_NEXT_INODE_KEY: &[u8] = b"next_inode";
/// The next changelog record's index (from 1).
pub const COUNTER_CHANGELOG_NEXT_KEY: &[u8] = b"changelog_next";
/// Present (1) once any file of the MDT had an HSM state: until then a write needs not look
/// for one to mark dirty.
pub const COUNTER_HSM_USED_KEY: &[u8] = b"hsm_used";
/// The next changelog reader's number (`cl1`, `cl2`, ...).
pub const COUNTER_CHANGELOG_USER_NEXT_KEY: &[u8] = b"changelog_user_next";
/// The next HSM action's cookie (from 1).
pub const COUNTER_HSM_COOKIE_NEXT_KEY: &[u8] = b"hsm_cookie_next";
/// Present (1) once `clients` names every client that holds this MDT's locks: written when
/// the MDT is formatted, and for an MDT from before the table after its first recovery
/// window that ran its whole length (every client holding locks replayed them in it, which
/// records it). Until then a window cannot trust the table and waits its whole length.
pub const COUNTER_CLIENTS_COMPLETE_KEY: &[u8] = b"clients_complete";
/// Changelog records, by index: kept until every registered reader cleared them.
pub const TABLE_CHANGELOG: u8 = 10;
/// Registered changelog readers, by number.
pub const TABLE_CHANGELOG_USERS: u8 = 11;
/// The HSM coordinator's actions, by cookie: waiting, running, and ended ones for a while.
pub const TABLE_HSM_ACTIONS: u8 = 12;
/// The cookies of each file's actions.
pub const TABLE_HSM_BY_FID: u8 = 13;
/// Files whose synchronous mirror went stale because a write missed it (its OST did not
/// answer), by FID: the MDS's server resyncs them once their OSTs are up again. Written in
/// the batch that marks the mirror stale; an entry leaves with the change that leaves the
/// file without a stale mirror (a resync's end) or removes the file.
pub const TABLE_RESYNC_QUEUE: u8 = 14;
/// The clients that hold (or held) this MDT's locks, by client id: written before a
/// client's first lock is granted, removed when it disconnects or is evicted. A recovery
/// window after the MDT's server died waits for these clients to replay (Lustre keeps its
/// clients in `last_rcvd`).
pub const TABLE_CLIENTS: u8 = 15;
/// Inodes per quota id: key `[kind][id u32 BE]` ([`quota_key`]) -> u64 BE. Changed in the
/// batch that makes, removes or re-owns an inode, so it is as durable as the inode.
pub const TABLE_QUOTA_USAGE: u8 = 16;
/// The quota master's (MDT0's) limits: `[kind][id u32 BE]` -> [`QuotaRecord`] (id
/// `DEFAULT_ID`: the kind's default), and `[kind]` + `b"grace"` -> the kind's grace times.
pub const TABLE_QUOTA_LIMITS: u8 = 17;
/// A participant's prepared steps of distributed changes: txn ([`txn_key`]) ++ step u32 BE
/// -> postcard [`PreparedStep`]. Written in the batch that does the step, removed by the
/// batch that keeps or undoes it.
pub const TABLE_UPDATES: u8 = 18;
/// A coordinator's committed distributed changes whose participants have not all heard:
/// txn ([`txn_key`]) -> postcard `Vec<u32>` (the MDTs still to tell). Written in the batch
/// that commits the change's own part (the record a participant's question is answered
/// from), removed once every participant kept its steps.
pub const TABLE_TXNS: u8 = 19;
/// The last table: tables are `TABLE_INODES..=TABLE_LAST` (and `meta`).
pub const TABLE_LAST: u8 = TABLE_TXNS;

/// The tables' names (redb's table names), by id. Ids are fixed within a format version:
/// journal records name tables by id.
pub const TABLE_NAMES: [&str; 20] = [
    "meta",
    "inodes",
    "dentries",
    "links",
    "xattrs",
    "reply_cache",
    "orphans",
    "destroy_queue",
    "precreate",
    "counters",
    "changelog",
    "changelog_users",
    "hsm_actions",
    "hsm_by_fid",
    "resync_queue",
    "clients",
    "quota_usage",
    "quota_limits",
    "updates",
    "txns",
];

/// The key of a distributed change in [`TABLE_TXNS`], and the prefix of its steps in
/// [`TABLE_UPDATES`].
pub fn txn_key(txn: &weft_proto::msg::update::TxnId) -> [u8; 20] {
    let mut k = [0u8; 20];
    k[..4].copy_from_slice(&txn.coordinator.to_be_bytes());
    k[4..12].copy_from_slice(&txn.start.to_be_bytes());
    k[12..].copy_from_slice(&txn.seq.to_be_bytes());
    k
}

/// A step this MDT prepared: what it did, what it answered, and what it needs to undo it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreparedStep {
    pub txn: weft_proto::msg::update::TxnId,
    pub update: weft_proto::msg::update::Update,
    pub answer: weft_proto::msg::update::UpdateAnswer,
    /// The inode the step changed, as it was before (None: the step made it).
    pub before: Option<InodeRecord>,
    /// Unix seconds when prepared: a step whose outcome was not heard for a while is asked for.
    pub prepared_secs: u64,
}

/// A directory's place among several MDTs (Lustre's LMV): none for a plain directory
/// without a default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct DirPlacement {
    /// A striped directory's master: its stripes (`fids[0]` is itself).
    pub stripes: Option<weft_proto::dirstripe::DirStripes>,
    /// A stripe of a striped directory (not the master): the master.
    pub master: Option<Fid>,
    /// The default for new subdirectories (`setdirstripe -D`).
    pub default: Option<weft_proto::dirstripe::DirStripeSpec>,
}

/// The key of a quota id's row in [`TABLE_QUOTA_USAGE`] and [`TABLE_QUOTA_LIMITS`].
pub fn quota_key(kind: QuotaKind, id: u32) -> [u8; 5] {
    let mut k = [0u8; 5];
    k[0] = kind.index();
    k[1..].copy_from_slice(&id.to_be_bytes());
    k
}

/// The key of a kind's grace times in [`TABLE_QUOTA_LIMITS`].
pub fn quota_grace_key(kind: QuotaKind) -> [u8; 6] {
    let mut k = *b"?grace";
    k[0] = kind.index();
    k
}

/// An id's limits and, while it is over a soft limit, when the grace ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct QuotaRecord {
    pub limits: QuotaLimits,
    /// Unix seconds; None while the id is not over the soft limit.
    pub block_grace_end: Option<u64>,
    pub inode_grace_end: Option<u64>,
}

/// A kind's grace times, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaGrace {
    pub block_s: u64,
    pub inode_s: u64,
}

impl Default for QuotaGrace {
    fn default() -> QuotaGrace {
        QuotaGrace { block_s: GRACE_DEFAULT_S, inode_s: GRACE_DEFAULT_S }
    }
}

/// Whether `id` is a table a mutation writes (every table but `meta`).
pub fn is_table_id(id: u8) -> bool {
    (TABLE_INODES..=TABLE_LAST).contains(&id)
}

/// An inode as stored. Attributes, plus what each kind needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InodeRecord {
    pub kind: FileType,
    /// 07777 bits.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub size: u64,
    /// Whether `size`/`blocks` were recorded by a closing writer (see the size rule in lib.rs).
    pub size_known: bool,
    pub blocks: u64,
    pub atime: Timestamp,
    pub mtime: Timestamp,
    pub ctime: Timestamp,
    pub rdev: u32,
    /// Regular files only.
    pub layout: Option<Layout>,
    /// Symlinks only.
    pub symlink_target: Option<Vec<u8>>,
    /// Directories only: the default layout for new files.
    pub dir_default: Option<StripeSpec>,
    /// Directories only: the parent (the root is its own parent).
    pub parent: Option<Fid>,
    /// The project (quotas by project, `weft project`); 0 is none.
    pub projid: u32,
    /// Directories only: new files and subdirectories take `projid`, and subdirectories
    /// this flag (ext4's and Lustre's PROJINHERIT).
    pub proj_inherit: bool,
    /// The access ACL, when it names users or groups; the mode bits say the rest (the
    /// group bits are its mask).
    pub acl: Option<Acl>,
    /// Directories only: the default ACL that new entries take.
    pub default_acl: Option<Acl>,
    /// Directories only: striping over MDTs (format 7).
    pub placement: Option<Box<DirPlacement>>,
}

impl InodeRecord {
    /// The ids the inode counts against.
    pub fn quota_owner(&self) -> QuotaOwner {
        QuotaOwner { uid: self.uid, gid: self.gid, projid: self.projid }
    }

    /// A new inode as `kind` starts: empty, one link (two for a directory), times `now`.
    pub fn new(kind: FileType, mode: u32, uid: u32, gid: u32, now: Timestamp) -> InodeRecord {
        InodeRecord {
            kind,
            mode,
            uid,
            gid,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            size: 0,
            size_known: true,
            blocks: 0,
            atime: now,
            mtime: now,
            ctime: now,
            rdev: 0,
            layout: None,
            symlink_target: None,
            dir_default: None,
            parent: None,
            projid: 0,
            proj_inherit: false,
            acl: None,
            default_acl: None,
            placement: None,
        }
    }

    /// The stripes of a striped directory's master.
    pub fn stripes(&self) -> Option<&weft_proto::dirstripe::DirStripes> {
        self.placement.as_ref().and_then(|p| p.stripes.as_ref())
    }

    /// The master of a stripe of a striped directory.
    pub fn master(&self) -> Option<Fid> {
        self.placement.as_ref().and_then(|p| p.master)
    }
}

/// The first byte of an inode record of format 6. A record of format 5 begins with its
/// kind's variant index (below 16), so the two are told apart by this byte; a later
/// record form takes the next marker and keeps decoding these.
pub const INODE_RECORD_V6: u8 = 0xF6;
/// The first byte of an inode record of format 7 (a placement at its end).
pub const INODE_RECORD_V7: u8 = 0xF7;

pub fn encode_inode(rec: &InodeRecord) -> Vec<u8> {
    postcard::to_extend(rec, vec![INODE_RECORD_V7]).expect("encoding an inode record into memory cannot fail")
}

pub fn decode_inode(fid: Fid, bytes: &[u8]) -> WeftResult<InodeRecord> {
    let corrupt = |e: postcard::Error| WeftError::io(format!("inode {fid} has a corrupt record on the MDT: {e}"));
    match bytes.split_first() {
        Some((&INODE_RECORD_V7, rest)) => postcard::from_bytes(rest).map_err(corrupt),
        Some((&INODE_RECORD_V6, rest)) => {
            postcard::from_bytes::<v6::InodeRecord>(rest).map(InodeRecord::from).map_err(corrupt)
        }
        _ => postcard::from_bytes::<v5::InodeRecord>(bytes).map(InodeRecord::from).map_err(corrupt),
    }
}

/// Records of format 6, which an MDT upgraded to 7 still holds until each is rewritten:
/// format 7 added the placement at the end.
mod v6 {
    use super::*;

    #[derive(Serialize, Deserialize)]
    pub struct InodeRecord {
        kind: FileType,
        mode: u32,
        uid: u32,
        gid: u32,
        nlink: u32,
        size: u64,
        size_known: bool,
        blocks: u64,
        atime: Timestamp,
        mtime: Timestamp,
        ctime: Timestamp,
        rdev: u32,
        layout: Option<Layout>,
        symlink_target: Option<Vec<u8>>,
        dir_default: Option<StripeSpec>,
        parent: Option<Fid>,
        projid: u32,
        proj_inherit: bool,
        acl: Option<Acl>,
        default_acl: Option<Acl>,
    }

    #[cfg(test)]
    impl InodeRecord {
        pub fn from_current(r: &super::InodeRecord) -> InodeRecord {
            let r = r.clone();
            InodeRecord {
                kind: r.kind,
                mode: r.mode,
                uid: r.uid,
                gid: r.gid,
                nlink: r.nlink,
                size: r.size,
                size_known: r.size_known,
                blocks: r.blocks,
                atime: r.atime,
                mtime: r.mtime,
                ctime: r.ctime,
                rdev: r.rdev,
                layout: r.layout,
                symlink_target: r.symlink_target,
                dir_default: r.dir_default,
                parent: r.parent,
                projid: r.projid,
                proj_inherit: r.proj_inherit,
                acl: r.acl,
                default_acl: r.default_acl,
            }
        }
    }

    impl From<InodeRecord> for super::InodeRecord {
        fn from(r: InodeRecord) -> super::InodeRecord {
            super::InodeRecord {
                kind: r.kind,
                mode: r.mode,
                uid: r.uid,
                gid: r.gid,
                nlink: r.nlink,
                size: r.size,
                size_known: r.size_known,
                blocks: r.blocks,
                atime: r.atime,
                mtime: r.mtime,
                ctime: r.ctime,
                rdev: r.rdev,
                layout: r.layout,
                symlink_target: r.symlink_target,
                dir_default: r.dir_default,
                parent: r.parent,
                projid: r.projid,
                proj_inherit: r.proj_inherit,
                acl: r.acl,
                default_acl: r.default_acl,
                placement: None,
            }
        }
    }
}

/// Records of format 5, which an MDT upgraded to 6 still holds until each is rewritten.
mod v5 {
    use super::*;

    #[derive(Serialize, Deserialize)]
    pub struct InodeRecord {
        kind: FileType,
        mode: u32,
        uid: u32,
        gid: u32,
        nlink: u32,
        size: u64,
        size_known: bool,
        blocks: u64,
        atime: Timestamp,
        mtime: Timestamp,
        ctime: Timestamp,
        rdev: u32,
        layout: Option<Layout>,
        symlink_target: Option<Vec<u8>>,
        dir_default: Option<StripeSpec>,
        parent: Option<Fid>,
    }

    #[cfg(test)]
    impl InodeRecord {
        pub fn from_current(r: &super::InodeRecord) -> InodeRecord {
            let r = r.clone();
            InodeRecord {
                kind: r.kind,
                mode: r.mode,
                uid: r.uid,
                gid: r.gid,
                nlink: r.nlink,
                size: r.size,
                size_known: r.size_known,
                blocks: r.blocks,
                atime: r.atime,
                mtime: r.mtime,
                ctime: r.ctime,
                rdev: r.rdev,
                layout: r.layout,
                symlink_target: r.symlink_target,
                dir_default: r.dir_default,
                parent: r.parent,
            }
        }
    }

    impl From<InodeRecord> for super::InodeRecord {
        fn from(r: InodeRecord) -> super::InodeRecord {
            super::InodeRecord {
                kind: r.kind,
                mode: r.mode,
                uid: r.uid,
                gid: r.gid,
                nlink: r.nlink,
                size: r.size,
                size_known: r.size_known,
                blocks: r.blocks,
                atime: r.atime,
                mtime: r.mtime,
                ctime: r.ctime,
                rdev: r.rdev,
                layout: r.layout,
                symlink_target: r.symlink_target,
                dir_default: r.dir_default,
                parent: r.parent,
                projid: 0,
                proj_inherit: false,
                acl: None,
                default_acl: None,
                placement: None,
            }
        }
    }
}

pub fn fid_key(fid: Fid) -> [u8; 16] {
    fid.to_bytes()
}

pub fn decode_fid(bytes: &[u8], what: &str) -> WeftResult<Fid> {
    Fid::from_bytes(bytes).ok_or_else(|| WeftError::io(format!("corrupt FID in {what}: {} bytes", bytes.len())))
}

/// FNV-1a 64 of the name, clamped into `[2, u64::MAX - 1]`: 0 starts a listing, 1 is left
/// for a future ".", and `u64::MAX` can never be "after the last entry".
pub fn name_hash(name: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h.clamp(2, u64::MAX - 1)
}

pub fn dentry_key(parent: Fid, name: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(24 + name.len());
    k.extend_from_slice(&parent.to_bytes());
    k.extend_from_slice(&name_hash(name).to_be_bytes());
    k.extend_from_slice(name);
    k
}

/// Key range start of all entries of `parent` with hash >= `hash`.
pub fn dentry_key_from_hash(parent: Fid, hash: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(24);
    k.extend_from_slice(&parent.to_bytes());
    k.extend_from_slice(&hash.to_be_bytes());
    k
}

/// Exclusive end of all entries of `parent`.
pub fn dentry_key_end(parent: Fid) -> Vec<u8> {
    prefix_end(&parent.to_bytes())
}

/// (name hash, name) of a dentry key.
pub fn split_dentry_key(key: &[u8]) -> WeftResult<(u64, &[u8])> {
    if key.len() < 24 {
        return Err(WeftError::io(format!("corrupt directory entry key of {} bytes", key.len())));
    }
    let hash = u64::from_be_bytes(key[16..24].try_into().expect("8 bytes"));
    Ok((hash, &key[24..]))
}

pub fn encode_dentry(child: Fid, kind: FileType) -> [u8; 17] {
    let mut v = [0u8; 17];
    v[..16].copy_from_slice(&child.to_bytes());
    v[16] = kind_byte(kind);
    v
}

pub fn decode_dentry(value: &[u8]) -> WeftResult<(Fid, FileType)> {
    if value.len() != 17 {
        return Err(WeftError::io(format!("corrupt directory entry value of {} bytes", value.len())));
    }
    let fid = decode_fid(&value[..16], "a directory entry")?;
    Ok((fid, kind_from_byte(value[16])?))
}

pub fn kind_byte(kind: FileType) -> u8 {
    match kind {
        FileType::Regular => 1,
        FileType::Directory => 2,
        FileType::Symlink => 3,
        FileType::Fifo => 4,
        FileType::CharDevice => 5,
        FileType::BlockDevice => 6,
        FileType::Socket => 7,
    }
}

pub fn kind_from_byte(b: u8) -> WeftResult<FileType> {
    Ok(match b {
        1 => FileType::Regular,
        2 => FileType::Directory,
        3 => FileType::Symlink,
        4 => FileType::Fifo,
        5 => FileType::CharDevice,
        6 => FileType::BlockDevice,
        7 => FileType::Socket,
        _ => return Err(WeftError::io(format!("corrupt file type byte {b} in a directory entry"))),
    })
}

pub fn link_key(child: Fid, parent: Fid, name: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(32 + name.len());
    k.extend_from_slice(&child.to_bytes());
    k.extend_from_slice(&parent.to_bytes());
    k.extend_from_slice(name);
    k
}

/// (parent, name) of a link key.
pub fn split_link_key(key: &[u8]) -> WeftResult<(Fid, &[u8])> {
    if key.len() < 32 {
        return Err(WeftError::io(format!("corrupt link key of {} bytes", key.len())));
    }
    Ok((decode_fid(&key[16..32], "a link key")?, &key[32..]))
}

pub fn xattr_key(fid: Fid, name: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(16 + name.len());
    k.extend_from_slice(&fid.to_bytes());
    k.extend_from_slice(name);
    k
}

pub fn hsm_by_fid_key(fid: Fid, cookie: u64) -> [u8; 24] {
    let mut k = [0u8; 24];
    k[..16].copy_from_slice(&fid.to_bytes());
    k[16..].copy_from_slice(&cookie.to_be_bytes());
    k
}

pub fn reply_key(client_id: u64, slot: u32) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..8].copy_from_slice(&client_id.to_be_bytes());
    k[8..].copy_from_slice(&slot.to_be_bytes());
    k
}

pub fn destroy_key(ost: u32, object: Fid) -> [u8; 20] {
    let mut k = [0u8; 20];
    k[..4].copy_from_slice(&ost.to_be_bytes());
    k[4..].copy_from_slice(&object.to_bytes());
    k
}

pub fn split_destroy_key(key: &[u8]) -> WeftResult<(u32, Fid)> {
    if key.len() != 20 {
        return Err(WeftError::io(format!("corrupt destroy-queue key of {} bytes", key.len())));
    }
    let ost = u32::from_be_bytes(key[..4].try_into().expect("4 bytes"));
    Ok((ost, decode_fid(&key[4..], "the destroy queue")?))
}

pub fn encode_precreate(next_oid: u32, created_oid: u32) -> [u8; 8] {
    let mut v = [0u8; 8];
    v[..4].copy_from_slice(&next_oid.to_be_bytes());
    v[4..].copy_from_slice(&created_oid.to_be_bytes());
    v
}

pub fn decode_precreate(ost: u32, v: &[u8]) -> WeftResult<(u32, u32)> {
    if v.len() != 8 {
        return Err(WeftError::io(format!("corrupt precreate record of OST {ost}: {} bytes", v.len())));
    }
    Ok((u32::from_be_bytes(v[..4].try_into().expect("4")), u32::from_be_bytes(v[4..].try_into().expect("4"))))
}

pub fn decode_u64(v: &[u8], what: &str) -> WeftResult<u64> {
    let b: [u8; 8] = v.try_into().map_err(|_| WeftError::io(format!("corrupt {what}: {} bytes", v.len())))?;
    Ok(u64::from_be_bytes(b))
}

/// The FID of inode number `n` of MDT `mdt_index`; each MDT owns its own sequences.
pub fn inode_fid(mdt_index: u32, n: u64) -> Fid {
    let seq = SEQ_METADATA_BASE + mdt_index as u64 * SEQ_PER_MDT + (n >> 32);
    Fid::new(seq, n as u32, 0)
}

/// The smallest key greater than every key starting with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // An all-0xff prefix has no end below the key space's top: callers never build one
    // (FIDs and OST numbers in this schema are never all ones).
    panic!("prefix_end of an all-0xff prefix");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An MDT upgraded from format 5 holds records without the marker until each changes:
    /// they read as project 0 without ACLs, and are written back in the new form.
    #[test]
    fn inode_records_of_formats_5_and_6_still_decode_and_are_rewritten_as_7() {
        let now = Timestamp { sec: 1_700_000_000, nsec: 5 };
        let mut rec = InodeRecord::new(FileType::Directory, 0o2750, 1000, 50, now);
        rec.parent = Some(Fid::ROOT);
        rec.dir_default = Some(StripeSpec::default());
        let old = v5::InodeRecord::from_current(&rec);
        let bytes = postcard::to_stdvec(&old).unwrap();
        assert_ne!(bytes[0], INODE_RECORD_V6);
        assert_eq!(decode_inode(Fid::ROOT, &bytes).unwrap(), rec);
        rec.projid = 7;
        rec.proj_inherit = true;
        rec.default_acl = Some(weft_proto::acl::Acl::from_mode(0o750));
        // Format 6: the marker and no placement.
        let mut six = vec![INODE_RECORD_V6];
        six.extend(postcard::to_stdvec(&v6::InodeRecord::from_current(&rec)).unwrap());
        assert_eq!(decode_inode(Fid::ROOT, &six).unwrap(), rec);
        rec.placement = Some(Box::new(DirPlacement {
            stripes: None,
            master: Some(Fid::ROOT),
            default: Some(weft_proto::dirstripe::DirStripeSpec::PLAIN),
        }));
        let new = encode_inode(&rec);
        assert_eq!(new[0], INODE_RECORD_V7);
        assert_eq!(decode_inode(Fid::ROOT, &new).unwrap(), rec);
        assert!(decode_inode(Fid::ROOT, &[INODE_RECORD_V6, 200]).is_err());
        assert!(decode_inode(Fid::ROOT, &[INODE_RECORD_V7, 200]).is_err());
    }

    #[test]
    fn name_hash_is_stable_and_clamped() {
        // Pinned: the readdir cookie is on disk and in clients' hands.
        assert_eq!(name_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(name_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        for n in 0..1000u32 {
            let h = name_hash(n.to_string().as_bytes());
            assert!((2..u64::MAX).contains(&h));
        }
    }

    #[test]
    fn keys_split_back() {
        let p = Fid::new(SEQ_METADATA_BASE, 9, 0);
        let k = dentry_key(p, b"name");
        assert_eq!(split_dentry_key(&k).unwrap(), (name_hash(b"name"), &b"name"[..]));
        assert!(k.as_slice() < dentry_key_end(p).as_slice());
        let c = Fid::new(SEQ_METADATA_BASE, 10, 0);
        assert_eq!(split_link_key(&link_key(c, p, b"x")).unwrap(), (p, &b"x"[..]));
        assert_eq!(split_destroy_key(&destroy_key(1000, c)).unwrap(), (1000, c));
        assert_eq!(decode_dentry(&encode_dentry(c, FileType::Socket)).unwrap(), (c, FileType::Socket));
        assert_eq!(inode_fid(0, 1), Fid::ROOT);
        assert_eq!(prefix_end(&[1, 0xff]), vec![2]);
    }
}

/// A registered changelog reader as stored (its number is the key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredChangelogUser {
    /// The name given at registration (`cl2-NAME`).
    pub name: Option<String>,
    /// The last record it cleared.
    pub cleared: u64,
    /// When it last cleared, or registered.
    pub since: Timestamp,
}

impl StoredChangelogUser {
    /// Its id as readers write it: `cl1`, or `cl2-NAME`.
    pub fn id(&self, number: u64) -> String {
        match &self.name {
            Some(name) => format!("cl{number}-{name}"),
            None => format!("cl{number}"),
        }
    }
}

/// The number in a reader's id (`cl3` or `cl3-NAME`: 3).
pub fn changelog_user_number(id: &str) -> Option<u64> {
    let rest = id.strip_prefix("cl")?;
    let digits = rest.split('-').next()?;
    digits.parse().ok().filter(|&n| n > 0)
}
