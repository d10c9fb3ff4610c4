//! The metadata service's operations (an MDT's), each typed to its answer.
//!
//! [`mdt_ops!`](crate::mdt_ops) is the list: this module builds the op structs and
//! [`MdtRequest`] from it, and the MDS builds its dispatch from the same list, so an opcode
//! added here fails to compile until the MDS has its handler.

use super::types::{DirPage, InodeInfo, Name, OpenIo, StatfsInfo};
use crate::layout::{Layout, StripeSpec};

/// Every MDT operation: `read` or `write` (a mutation: the reply cache and the commit
/// batch), its fields, its answer and its opcode name. Expands `$then!` with the list.
#[macro_export]
macro_rules! mdt_ops {
    ($then:ident) => {
        $then! {
            MdtRequest / MdtReply;
            read Lookup { parent: $crate::Fid, name: $crate::msg::Name } -> $crate::msg::InodeInfo = "mds_lookup";
            read Getattr { fid: $crate::Fid } -> $crate::msg::InodeInfo = "mds_getattr";
            /// Changes attributes. A size change (truncate) is recorded once the client cut
            /// the objects. `open_handle`: the caller's open of the file, which gives it the
            /// right to change the size whatever the mode bits now say (ftruncate on a
            /// descriptor opened for writing, as POSIX has it).
            write Setattr { fid: $crate::Fid, set: $crate::msg::SetAttr, open_handle: Option<u64> }
                -> $crate::msg::InodeInfo = "mds_setattr";
            /// Create a regular file and open it. `exclusive` = O_EXCL (EEXIST if the name
            /// exists); without it an existing regular file is opened instead. `spec`
            /// overrides the directory's default layout. `open_flags` as in Open. In every
            /// create, `mode` is what the program asked for and `umask` its process's: the
            /// MDS applies the umask, unless the directory has a default ACL, which
            /// replaces it (POSIX ACLs).
            write Create {
                parent: $crate::Fid,
                name: $crate::msg::Name,
                mode: u32,
                exclusive: bool,
                spec: Option<$crate::StripeSpec>,
                open_flags: u32,
                umask: u32,
            } -> $crate::msg::mdt::Opened = "mds_create";
            write Mkdir { parent: $crate::Fid, name: $crate::msg::Name, mode: u32, umask: u32 }
                -> $crate::msg::InodeInfo = "mds_mkdir";
            /// Fifos, sockets and device nodes.
            write Mknod {
                parent: $crate::Fid,
                name: $crate::msg::Name,
                kind: $crate::msg::FileType,
                mode: u32,
                rdev: u32,
                umask: u32,
            } -> $crate::msg::InodeInfo = "mds_mknod";
            write Symlink { parent: $crate::Fid, name: $crate::msg::Name, target: Vec<u8> }
                -> $crate::msg::InodeInfo = "mds_symlink";
            write Link { fid: $crate::Fid, parent: $crate::Fid, name: $crate::msg::Name }
                -> $crate::msg::InodeInfo = "mds_link";
            write Unlink { parent: $crate::Fid, name: $crate::msg::Name } -> () = "mds_unlink";
            write Rmdir { parent: $crate::Fid, name: $crate::msg::Name } -> () = "mds_rmdir";
            /// `flags` as renameat2: RENAME_NOREPLACE, RENAME_EXCHANGE.
            write Rename {
                src_parent: $crate::Fid,
                src_name: $crate::msg::Name,
                dst_parent: $crate::Fid,
                dst_name: $crate::msg::Name,
                flags: u32,
            } -> () = "mds_rename";
            read Readlink { fid: $crate::Fid } -> Vec<u8> = "mds_readlink";
            /// Up to `max_entries` entries after `cookie` (0: from the start).
            read Readdir { fid: $crate::Fid, cookie: u64, max_entries: u32 } -> $crate::msg::DirPage = "mds_readdir";
            write Open { fid: $crate::Fid, flags: u32 } -> $crate::msg::mdt::Opened = "mds_open";
            /// Ends an open. A writer passes the size and 512-byte blocks it derived from the
            /// objects (a glimpse) so the MDS can record trusted values once no writer is left,
            /// and the data version the same glimpse gave (0: unknown), against which the MDS
            /// tells whether an archived file changed.
            /// Answered with the inode as the close left it, and an intent lock on it, so the
            /// client can serve the next stat without asking; None when the close destroyed
            /// an unlinked file.
            write Close { fid: $crate::Fid, handle: u64, size_blocks: Option<(u64, u64)>, data_version: u64, mtime_ns: u64 }
                -> Option<$crate::msg::InodeInfo> = "mds_close";
            read GetXattr { fid: $crate::Fid, name: $crate::msg::Name } -> Vec<u8> = "mds_getxattr";
            /// `flags`: XATTR_CREATE, XATTR_REPLACE.
            write SetXattr { fid: $crate::Fid, name: $crate::msg::Name, value: Vec<u8>, flags: u32 }
                -> () = "mds_setxattr";
            read ListXattr { fid: $crate::Fid } -> Vec<$crate::msg::Name> = "mds_listxattr";
            write RemoveXattr { fid: $crate::Fid, name: $crate::msg::Name } -> () = "mds_removexattr";
            /// On a directory: its default for new files. On a regular file of size 0: a new
            /// layout. Answered with the layout state the MDT now holds.
            write SetStripe { fid: $crate::Fid, spec: $crate::StripeSpec } -> $crate::msg::mdt::StripeInfo = "mds_setstripe";
            /// Removes a directory's default layout (setstripe -d).
            write DeleteStripe { fid: $crate::Fid } -> () = "mds_delstripe";
            /// The layout of a file and the default layout of a directory.
            read GetStripe { fid: $crate::Fid } -> $crate::msg::mdt::StripeInfo = "mds_getstripe";
            read Statfs {} -> $crate::msg::StatfsInfo = "mds_statfs";
            /// The path of a FID from the root (one of them, for a file with several links),
            /// without a leading slash.
            read Fid2Path { fid: $crate::Fid } -> Vec<u8> = "mds_fid2path";
            /// Registers a changelog reader (root): records are kept from now on until it
            /// clears them. `name` makes its id `clN-NAME`.
            write ChangelogRegister { name: Option<String> }
                -> $crate::msg::changelog::ChangelogUser = "mds_changelog_register";
            /// Removes a reader (root); the records only it held go.
            write ChangelogDeregister { id: String } -> () = "mds_changelog_deregister";
            /// Records from `start` to `end` (inclusive; 0: to the last), at most `max` (root).
            read ChangelogRead { start: u64, end: u64, max: u32 }
                -> Vec<$crate::msg::changelog::ChangelogRecord> = "mds_changelog_read";
            /// Reader `id` is done with the records up to `end` (0: the last) (root).
            write ChangelogClear { id: String, end: u64 } -> () = "mds_changelog_clear";
            /// The readers and the last record.
            read ChangelogUsersList {} -> $crate::msg::changelog::ChangelogUsers = "mds_changelog_users";
            /// A file's HSM state (`hsm state`).
            read HsmStateGet { fid: $crate::Fid } -> $crate::msg::hsm::HsmState = "mds_hsm_state_get";
            /// Sets and clears HSM flags (`hsm set`, `hsm clear`): root any of
            /// `HS_SETTABLE`, the owner norelease, noarchive and dirty; `archive_id` (0:
            /// unchanged) names the archive the copy is in.
            write HsmStateSet { fid: $crate::Fid, set: u32, clear: u32, archive_id: u32 }
                -> $crate::msg::hsm::HsmState = "mds_hsm_state_set";
            /// Queues `action` on every file of `fids` (`hsm archive|restore|remove|cancel`),
            /// all or none: archive and remove in `archive_id` (0: the file's archive, else
            /// the default). Answered with each file's cookie, 0 where nothing was queued (an
            /// action of the kind already queued, a cancel).
            write HsmRequest {
                action: $crate::msg::hsm::HsmAction,
                archive_id: u32,
                fids: Vec<$crate::Fid>,
                data: Vec<u8>,
            } -> Vec<u64> = "mds_hsm_request";
            /// Frees the objects of an archived, clean, closed file (`hsm release`); its size
            /// and times stay. `size` and `data_version`: what the caller glimpsed (the size
            /// for a file whose size the MDT does not know; the version must be the archive
            /// copy's).
            write HsmRelease { fid: $crate::Fid, size: u64, data_version: u64 }
                -> $crate::msg::InodeInfo = "mds_hsm_release";
            /// A copytool (`agent`, serving `archive_ids`; empty: every archive) asks for at
            /// most `max` waiting actions; also its heartbeat (`max` 0). `running`: the
            /// actions it runs now (others the coordinator thinks it has are handed out again).
            write HsmTake { agent: String, archive_ids: Vec<u32>, max: u32, running: Vec<u64> }
                -> Vec<$crate::msg::hsm::HsmActionItem> = "mds_hsm_take";
            /// A copytool's progress on the action `cookie` it took: bytes copied, and at its
            /// end `done` = Some(errno) (0: success) with a message, a restore's blocks, and
            /// the data version the copy is of (0: the file changed while it was copied).
            write HsmProgress {
                agent: String,
                cookie: u64,
                bytes: u64,
                done: Option<i32>,
                blocks: u64,
                data_version: u64,
                message: String,
            } -> () = "mds_hsm_progress";
            /// The action waiting or running on a file, else its last one if it ended lately
            /// (`hsm action`).
            read HsmActionGet { fid: $crate::Fid } -> Option<$crate::msg::hsm::HsmActionItem> = "mds_hsm_action";
            // Layouts that follow the data (after the others: their variant indices stay).
            /// Gives objects to every component of the file's layout that reaches below `end`
            /// and has none yet (a writer or a truncate about to reach it: Lustre's layout
            /// write intent). Answered with the inode and the layout as it now is.
            /// With `resync`, every mirror's components below `end` get objects instead, and
            /// no mirror goes stale (a resync about to copy into them). A write intent on a
            /// file with more than one mirror in sync marks all but one stale (FLR): writes go
            /// to that one until a resync.
            /// `open_handle`: the caller's open of the file for writing, whose right to write
            /// holds whatever the mode bits say now.
            write LayoutIntent { fid: $crate::Fid, end: u64, resync: bool, open_handle: Option<u64> }
                -> $crate::msg::InodeInfo = "mds_layout_intent";
            /// Changes a file's mirrors (FLR): see [`MirrorOp`].
            write Mirror { fid: $crate::Fid, op: $crate::msg::mdt::MirrorOp } -> $crate::msg::InodeInfo = "mds_mirror";
            /// A volatile file (Lustre's): an inode without a name, open for writing, with
            /// `spec` over the default of `like`'s directory; it goes with its last close.
            /// A migration copies `like`'s data into it and swaps their layouts.
            write CreateVolatile { like: $crate::Fid, spec: $crate::StripeSpec } -> $crate::msg::mdt::Opened = "mds_create_volatile";
            /// Exchanges the layouts of `fid` and `with` (a migration's last step), if `fid`'s
            /// layout is still of `generation` (else Busy: it changed since the copy began).
            /// Answered with `fid`'s inode as it now is.
            write SwapLayouts { fid: $crate::Fid, with: $crate::Fid, generation: u32 } -> $crate::msg::InodeInfo = "mds_swap_layouts";
            /// An unnamed regular file made in `parent` (open(2) with O_TMPFILE), with the
            /// directory's default layout, open with `open_flags`: it has no link and goes
            /// with its last close, unless a `Link` gives it a name while it is open.
            write CreateTmpfile { parent: $crate::Fid, mode: u32, open_flags: u32, umask: u32 } -> $crate::msg::mdt::Opened = "mds_create_tmpfile";
            /// Open replay: the opens this client holds from the MDT's previous server (a
            /// replicated MDT's old leader), kept under the same handles during the new
            /// server's recovery window; answers the handles kept (a refused one's close is
            /// answered "stale").
            write ReplayOpens { opens: Vec<$crate::msg::mdt::ReplayedOpen> } -> Vec<u64> = "mds_replay_opens";
            /// A quota's limits, inodes and grace (see `msg::quota`): the caller's own user
            /// and groups, any project, anything for root; `verify` (root) counts the id's
            /// inodes by a scan too. `id` DEFAULT_ID: the kind's default limits.
            read QuotaGet { kind: $crate::msg::quota::QuotaKind, id: u32, verify: bool }
                -> $crate::msg::quota::QuotaInfo = "mds_quota_get";
            /// Sets limits (root); what the change leaves `None` stays.
            write QuotaSet { kind: $crate::msg::quota::QuotaKind, id: u32, change: $crate::msg::quota::QuotaChange }
                -> $crate::msg::quota::QuotaInfo = "mds_quota_set";
            /// Removes an id's own limits and grace deadlines (root): it follows the default.
            write QuotaDelete { kind: $crate::msg::quota::QuotaKind, id: u32 } -> () = "mds_quota_delete";
            /// Sets a kind's grace times in seconds (root); `None` leaves one as it is.
            write QuotaSetGrace { kind: $crate::msg::quota::QuotaKind, block_s: Option<u64>, inode_s: Option<u64> }
                -> () = "mds_quota_grace";
            /// A client whose write OST `ost` refused with EDQUOT asks the quota master for
            /// room there for `owner`'s ids: the master moves to that OST what the others
            /// hold unused. Answered whether the OST has more room now (retry the write).
            read QuotaAcquire { owner: $crate::msg::quota::QuotaOwner, ost: u32 } -> bool = "mds_quota_acquire";
            /// The directory the caller sees as the file system's root: the root, or its
            /// nodemap's fileset (asked by a client as it connects).
            read GetRoot {} -> $crate::msg::InodeInfo = "mds_get_root";
            // Several MDTs (after the others: their variant indices stay).
            /// A directory placed on other MDTs (`weft mkdir -i -c -H`): a remote directory
            /// (count 1 on another MDT than the parent's) or a striped one; a plain one on
            /// the parent's MDT is a `Mkdir`.
            write MkdirStriped {
                parent: $crate::Fid,
                name: $crate::msg::Name,
                mode: u32,
                umask: u32,
                spec: $crate::dirstripe::DirStripeSpec,
            } -> $crate::msg::InodeInfo = "mds_mkdir_striped";
            /// A directory's placement (`getdirstripe`).
            read GetDirStripe { fid: $crate::Fid } -> $crate::msg::update::DirStripeInfo = "mds_getdirstripe";
            /// Sets (Some) or removes (None) a directory's default for new subdirectories
            /// (`setdirstripe -D`, `-D -d`).
            write SetDirStripe { fid: $crate::Fid, default: Option<$crate::dirstripe::DirStripeSpec> }
                -> () = "mds_setdirstripe";
            /// Another MDT's part of a distributed change (an MDS's request, not a
            /// client's; see `msg::update`): done at once, undone if the change aborts.
            /// A resend of a prepared step answers as the first did. `who`: the client the
            /// change is for, whose permissions and quotas the step is checked against.
            write UpdatePrepare {
                txn: $crate::msg::update::TxnId,
                step: u32,
                update: $crate::msg::update::Update,
                who: $crate::msg::types::Identity,
            }
                -> $crate::msg::update::UpdateAnswer = "mds_update_prepare";
            /// The coordinator's outcome of a change this MDT prepared steps of: kept
            /// (commit) or undone.
            write UpdateResolve { txn: $crate::msg::update::TxnId, commit: bool } -> () = "mds_update_resolve";
            /// A participant asks the coordinator how a change ended.
            read TxnOutcome { txn: $crate::msg::update::TxnId } -> $crate::msg::update::TxnState = "mds_txn_outcome";
            /// A striped directory's master changed what its stripes copy (mode, owner,
            /// ACLs, default layouts): `record` is the master's (the MDS's own encoding).
            write SyncStripe { fid: $crate::Fid, record: Vec<u8> } -> () = "mds_sync_stripe";
            /// Moves the inode that `name` in `parent` names to MDT `to` (`weft migrate -m`):
            /// it gets a new FID there and keeps its name, attributes, extended attributes
            /// and objects; a directory takes its entries with it (not their inodes, each
            /// moved by a request of its own). Root only. Answers the inode as it is now.
            write Migrate { parent: $crate::Fid, name: $crate::msg::Name, to: u32 }
                -> $crate::msg::InodeInfo = "mds_migrate";
            // The metadata write-back cache (protocol 26; see `msg::wbc`).
            /// Asks for `dir`'s lock exclusively (EX on [`WBC_LOCK_BITS`]), granted only when
            /// no other client holds a lock on it (else Busy, nobody called back), and for
            /// `fids` FIDs the client may give to the files it makes there (at most
            /// `WBC_FIDS_PER_GRANT_MAX`; 0 for none). A client holding the lock asks again
            /// for more FIDs. Refused (Invalid) for what the cache cannot make files in: a
            /// striped directory, one with a default ACL or passing its project on.
            ///
            /// [`WBC_LOCK_BITS`]: crate::lock::WBC_LOCK_BITS
            write WbcGrant { dir: $crate::Fid, fids: u32 } -> $crate::msg::wbc::WbcGranted = "mds_wbc_grant";
            /// Many changes of a client's write-back cache in one transaction, all or none
            /// (a failing op fails the batch, naming it, and nothing is applied). At most
            /// `BATCH_OPS_MAX` ops, every FID and directory on this MDT.
            write Batch { ops: Vec<$crate::msg::wbc::BatchOp> } -> () = "mds_batch";
            /// Statahead (protocol 27; Lustre's batched statahead): a page of entries as
            /// `Readdir` answers it, with the inode of each entry on this MDT that the
            /// client may cache, under an intent lock granted without waiting (an entry
            /// another client is changing now is left out). Without search permission on
            /// the directory, the entries alone.
            read ReaddirPlus { fid: $crate::Fid, cookie: u64, max_entries: u32 }
                -> $crate::msg::mdt::DirPlus = "mds_readdir_plus";
        }
    };
}

crate::mdt_ops!(define_ops);

/// One open a client replays to a new MDT server: its handle, the file and how it was
/// opened (OPEN_READ, OPEN_WRITE), and whether it was granted passthrough.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReplayedOpen {
    pub fid: crate::Fid,
    pub handle: u64,
    pub flags: u32,
    pub passthrough: bool,
}

/// What Create and Open answer: the inode, the open handle to pass to Close, and how the
/// client may do this open's I/O.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Opened {
    pub inode: InodeInfo,
    pub handle: u64,
    pub io: OpenIo,
}

/// A change's answer with the directories whose entries it changed, read after it with an
/// intent lock each: their times, size and links changed, and the client that made the
/// change may keep them instead of asking again (its own change calls back none of its
/// locks).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Changed {
    pub answer: MdtReply,
    pub dirs: Vec<InodeInfo>,
}

/// [`ReaddirPlus`]'s answer: the page, and the inodes of its entries that came with a lock
/// (in the page's order; not every entry has one).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DirPlus {
    pub page: DirPage,
    pub inodes: Vec<InodeInfo>,
}

/// What a [`Mirror`] request does.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum MirrorOp {
    /// Adds a mirror of this spec (plain or progressive), stale until a resync copies the
    /// data into it. A file without mirrors becomes mirror 1.
    Extend { spec: crate::StripeSpec },
    /// Removes a mirror and destroys its objects; the last mirror in sync stays.
    Split { mirror_id: u16 },
    /// A resync copied the data into every stale mirror while the layout was of
    /// `generation`: they are in sync again (Busy if the layout changed meanwhile).
    Resynced { generation: u32 },
    /// Writes go to every mirror in sync at once (`on`), or to one as FLR's (Weft's own:
    /// `weft mirror create --sync`); see `comp_flags::SYNC_MIRRORS`.
    Sync { on: bool },
    /// A write to a file with synchronous mirrors did not reach mirror `mirror_id` (its OST
    /// did not answer): it goes stale, and the MDS resyncs it once its OSTs answer again.
    /// Refused (Busy) for the last mirror in sync; nothing changes for one already stale.
    Stale { mirror_id: u16 },
}

/// A file's layout and a directory's default layout (GetStripe, SetStripe).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, Default)]
pub struct StripeInfo {
    pub layout: Option<Layout>,
    pub default: Option<StripeSpec>,
}

crate::define_replies! {
    /// An MDT's answers (the reply cache stores them as they are encoded here).
    MdtReply {
        Inode(InodeInfo),
        /// Create and Open.
        Opened(Opened),
        /// Close: the inode, unless the close destroyed it.
        Closed(Option<InodeInfo>),
        /// A change of names, with its directories (see [`Changed`]).
        Changed(Box<Changed>),
        Empty = (),
        Data(Vec<u8>),
        Names(Vec<Name>),
        Dir(DirPage),
        Stripe(StripeInfo),
        Statfs(StatfsInfo),
        ChangelogUser(crate::msg::changelog::ChangelogUser),
        ChangelogRecords(Vec<crate::msg::changelog::ChangelogRecord>),
        ChangelogUsers(crate::msg::changelog::ChangelogUsers),
        Hsm(crate::msg::hsm::HsmState),
        Cookies(Vec<u64>),
        HsmActions(Vec<crate::msg::hsm::HsmActionItem>),
        HsmAction(Option<crate::msg::hsm::HsmActionItem>),
        Quota(crate::msg::quota::QuotaInfo),
        Granted(bool),
        DirStripe(crate::msg::update::DirStripeInfo),
        Update(crate::msg::update::UpdateAnswer),
        Txn(crate::msg::update::TxnState),
        WbcGranted(crate::msg::wbc::WbcGranted),
        DirPlus(DirPlus),
    }
}

/// The directory and name of a request that names one name (not a rename), as `$dir`.
macro_rules! one_name {
    ($req:expr, $dir:ident, $name:ident => $then:expr) => {
        match $req {
            MdtRequest::Lookup(Lookup { parent: $dir, name: $name })
            | MdtRequest::Create(Create { parent: $dir, name: $name, .. })
            | MdtRequest::Mkdir(Mkdir { parent: $dir, name: $name, .. })
            | MdtRequest::MkdirStriped(MkdirStriped { parent: $dir, name: $name, .. })
            | MdtRequest::Mknod(Mknod { parent: $dir, name: $name, .. })
            | MdtRequest::Symlink(Symlink { parent: $dir, name: $name, .. })
            | MdtRequest::Link(Link { parent: $dir, name: $name, .. })
            | MdtRequest::Unlink(Unlink { parent: $dir, name: $name })
            | MdtRequest::Rmdir(Rmdir { parent: $dir, name: $name })
            | MdtRequest::Migrate(Migrate { parent: $dir, name: $name, .. }) => Some($then),
            _ => None,
        }
    };
}

impl MdtRequest {
    /// The directory and the name a request of one name names (a rename names two).
    pub fn one_name(&self) -> Option<(crate::Fid, &[u8])> {
        one_name!(self, dir, name => (*dir, name.as_slice()))
    }

    /// [`MdtRequest::one_name`], its directory to change (a name sent to its stripe).
    pub fn one_name_mut(&mut self) -> Option<(&mut crate::Fid, &[u8])> {
        one_name!(self, dir, name => (dir, name.as_slice()))
    }

    /// The inode a request is about: a name's directory, a rename's source directory, or
    /// the FID it names (the first of several); None for what names no inode (statfs,
    /// quotas, changelogs). Its MDT is the one the request goes to.
    pub fn subject(&self) -> Option<crate::Fid> {
        if let Some((parent, _)) = self.one_name() {
            return Some(parent);
        }
        Some(match self {
            MdtRequest::CreateTmpfile(CreateTmpfile { parent, .. })
            | MdtRequest::Rename(Rename { src_parent: parent, .. }) => *parent,
            MdtRequest::Getattr(Getattr { fid })
            | MdtRequest::Setattr(Setattr { fid, .. })
            | MdtRequest::Readlink(Readlink { fid })
            | MdtRequest::Readdir(Readdir { fid, .. })
            | MdtRequest::ReaddirPlus(ReaddirPlus { fid, .. })
            | MdtRequest::Open(Open { fid, .. })
            | MdtRequest::Close(Close { fid, .. })
            | MdtRequest::GetXattr(GetXattr { fid, .. })
            | MdtRequest::SetXattr(SetXattr { fid, .. })
            | MdtRequest::ListXattr(ListXattr { fid })
            | MdtRequest::RemoveXattr(RemoveXattr { fid, .. })
            | MdtRequest::SetStripe(SetStripe { fid, .. })
            | MdtRequest::DeleteStripe(DeleteStripe { fid })
            | MdtRequest::GetStripe(GetStripe { fid })
            | MdtRequest::Fid2Path(Fid2Path { fid })
            | MdtRequest::HsmStateGet(HsmStateGet { fid })
            | MdtRequest::HsmStateSet(HsmStateSet { fid, .. })
            | MdtRequest::HsmRelease(HsmRelease { fid, .. })
            | MdtRequest::HsmActionGet(HsmActionGet { fid })
            | MdtRequest::LayoutIntent(LayoutIntent { fid, .. })
            | MdtRequest::Mirror(Mirror { fid, .. })
            | MdtRequest::CreateVolatile(CreateVolatile { like: fid, .. })
            | MdtRequest::SwapLayouts(SwapLayouts { fid, .. })
            | MdtRequest::GetDirStripe(GetDirStripe { fid })
            | MdtRequest::SetDirStripe(SetDirStripe { fid, .. })
            | MdtRequest::SyncStripe(SyncStripe { fid, .. })
            | MdtRequest::WbcGrant(WbcGrant { dir: fid, .. }) => *fid,
            MdtRequest::Batch(Batch { ops }) => return ops.first().map(|op| op.subject()),
            MdtRequest::HsmRequest(HsmRequest { fids, .. }) => return fids.first().copied(),
            MdtRequest::ReplayOpens(ReplayOpens { opens }) => return opens.first().map(|o| o.fid),
            _ => return None,
        })
    }

    /// Whether only another MDS sends this request (the steps of a distributed change):
    /// refused from clients.
    pub fn is_between_mdts(&self) -> bool {
        matches!(
            self,
            MdtRequest::UpdatePrepare(_)
                | MdtRequest::UpdateResolve(_)
                | MdtRequest::TxnOutcome(_)
                | MdtRequest::SyncStripe(_)
        )
    }
}

impl MdtReply {
    /// The op's own answer and the directories a change of names came with.
    pub fn into_parts(self) -> (MdtReply, Vec<InodeInfo>) {
        match self {
            MdtReply::Changed(c) => (c.answer, c.dirs),
            other => (other, Vec::new()),
        }
    }

    /// The inodes an answer brings besides [`MdtReply::inode`], each with its lock
    /// (statahead's).
    pub fn more_inodes(&self) -> &[InodeInfo] {
        match self {
            MdtReply::DirPlus(plus) => &plus.inodes,
            _ => &[],
        }
    }

    /// The inode an answer names (lookups, creates, opens, ...), if any.
    pub fn inode(&self) -> Option<&InodeInfo> {
        match self {
            MdtReply::Inode(i) | MdtReply::Opened(Opened { inode: i, .. }) | MdtReply::Closed(Some(i)) => Some(i),
            _ => None,
        }
    }

    pub fn inode_mut(&mut self) -> Option<&mut InodeInfo> {
        match self {
            MdtReply::Inode(i) | MdtReply::Opened(Opened { inode: i, .. }) | MdtReply::Closed(Some(i)) => Some(i),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::ops::{take_reply, Op, OpKind, Payload};
    use crate::msg::SetAttr;
    use crate::Fid;

    /// The encodings before ops were structs: a struct variant and a newtype variant of a
    /// struct with the same fields must be the same bytes (the wire and the reply cache on
    /// disk depend on it).
    #[derive(serde::Serialize)]
    enum Before {
        #[allow(dead_code)]
        Lookup {
            parent: Fid,
            name: Vec<u8>,
        },
        #[allow(dead_code)]
        Getattr {
            fid: Fid,
        },
        Setattr {
            fid: Fid,
            set: SetAttr,
            open_handle: Option<u64>,
        },
    }

    #[test]
    fn struct_ops_encode_as_the_struct_variants_did() {
        let fid = Fid::new(0x200000400, 9, 0);
        let set = SetAttr { mode: Some(0o600), ..Default::default() };
        let old = postcard::to_stdvec(&Before::Setattr { fid, set: set.clone(), open_handle: Some(3) }).unwrap();
        let new = postcard::to_stdvec(&MdtRequest::Setattr(Setattr { fid, set, open_handle: Some(3) })).unwrap();
        assert_eq!(old, new);
        let statfs = postcard::to_stdvec(&MdtRequest::Statfs(Statfs {})).unwrap();
        assert_eq!(statfs, vec![22], "a field-less op is its variant index alone");
    }

    #[test]
    fn ops_know_their_answers_and_kinds() {
        assert_eq!(Lookup::OPCODE, "mds_lookup");
        assert_eq!(Lookup::KIND, OpKind::Read);
        assert_eq!(Unlink::KIND, OpKind::Mutation);
        let req: MdtRequest = Unlink { parent: Fid::ROOT, name: b"x".to_vec() }.into();
        assert!(req.is_mutation());
        assert_eq!(req.opcode_name(), "mds_unlink");
        assert_eq!(take_reply::<Unlink>(MdtReply::Empty), Ok(()));
        let err = take_reply::<Readlink>(MdtReply::Empty).unwrap_err();
        assert_eq!(err.message, "unexpected Empty reply to mds_readlink");
        assert_eq!(<Vec<u8> as Payload<MdtReply>>::into_reply(b"t".to_vec()), MdtReply::Data(b"t".to_vec()));
    }
}
