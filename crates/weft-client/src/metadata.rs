//! The metadata requests ([`weft_proto::msg::mdt`]): each method sends one op, whose type
//! says what the MDT answers, so none of them matches on replies.

use crate::inodes::Answer;
use crate::Client;
use weft_proto::layout::{Layout, StripeSpec};
use weft_proto::msg::mdt::{self, Opened};
use weft_proto::msg::{Attr, Caller, DirPage, FileType, InodeInfo, Name, SetAttr, StatfsInfo, OPEN_HSM_RESTORE};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

impl Client {
    /// Any metadata op as it is sent, its reply as it came: for tools and benchmarks that
    /// look at the messages themselves (the bytes of an open's answer, `tests/ost_scale.rs`).
    /// The client's bookkeeping of opens is not kept: close what such an open opened with
    /// this too.
    pub async fn mdt_op<O>(&self, who: &Caller, op: O) -> WeftResult<O::Reply>
    where
        O: weft_proto::msg::ops::Op<Request = weft_proto::msg::MdtRequest, Answer = weft_proto::msg::MdtReply>,
    {
        self.mdt(who, op).await
    }

    /// An inode the cache holds, if the lock it came with still holds; else it is dropped.
    pub(crate) fn still_cached(&self, cached: Option<InodeInfo>) -> Option<InodeInfo> {
        let inode = cached?;
        if self.locks.still_covers(&inode) {
            return Some(inode);
        }
        self.inodes.forget(inode.attr.fid);
        None
    }

    /// The inode `name` in `parent` leads to: from the inode cache while the lock it came
    /// with holds, else from the MDS.
    pub async fn lookup(&self, who: &Caller, parent: Fid, name: &[u8]) -> WeftResult<InodeInfo> {
        // Checked here too: a name this client knows is absent is answered without the MDS.
        weft_proto::name::check_length(name)?;
        match name {
            // The kernel finds an inode it no longer has by its number (a file handle,
            // open_by_handle_at, an NFS export) with a lookup of "." in it, and a
            // directory's parent with "..": neither is a name to remember.
            b"." => return self.getattr(who, parent).await,
            b".." => {
                let up = self.mdt(who, mdt::Lookup { parent, name: name.to_vec() }).await?;
                return self.resolve_remote(who, parent, up).await;
            }
            _ => {}
        }
        // In a striped directory the name is its stripe's.
        let parent = self.stripes.holder(parent, name);
        // A directory the write-back cache holds: every name there is known here.
        if let Some(answer) = self.wbc_lookup(parent, name) {
            return answer;
        }
        if let Some(inode) = self.still_cached(self.inodes.name(parent, name)) {
            if self.config.statahead {
                self.statahead.hit(parent);
            }
            return Ok(inode);
        }
        if let Some(lock) = self.inodes.absent(parent, name) {
            // A directory this client made and alone changed: every name in it is known.
            if self.locks.still_holds(parent, lock) {
                return Err(WeftError::not_found(format!("no {} in {parent}", String::from_utf8_lossy(name))));
            }
            self.inodes.unlist(parent);
        }
        if let Some(inode) = self.statahead(who, parent, name).await {
            return Ok(inode);
        }
        let since = self.inodes.since();
        let inode = self.mdt(who, mdt::Lookup { parent, name: name.to_vec() }).await?;
        if self.config.statahead {
            self.statahead.found_at_mds(parent);
        }
        if inode.attr.fid.mdt_index() != parent.mdt_index() {
            // A name of an inode on another MDT: no lock of that MDT guards the name, so
            // only the inode (under its own MDT's lock) is remembered.
            let inode = self.resolve_remote(who, parent, inode).await?;
            self.inodes.remember(Answer { name: None, inode: &inode, name_only: false, bare: false }, since);
            return Ok(inode);
        }
        self.inodes
            .remember(Answer { name: Some((parent, name)), inode: &inode, name_only: false, bare: false }, since);
        Ok(inode)
    }

    /// The attributes of `fid` this client holds under a lock that still holds (another
    /// client's change would have called it back); None when it has none. No request.
    pub fn cached_attr(&self, fid: Fid) -> Option<weft_proto::msg::Attr> {
        self.still_cached(self.inodes.inode(fid)).map(|inode| inode.attr)
    }

    /// The attributes of `fid` as last answered to this client, whether or not the lock
    /// they came with still holds (no request is sent): what is left to show of a
    /// directory removed while open here.
    pub fn last_known(&self, fid: Fid) -> Option<weft_proto::msg::Attr> {
        self.inodes.inode(fid).map(|inode| inode.attr)
    }

    /// The inode as the MDS has it (from the inode cache while the lock it came with holds);
    /// see [`Client::stat`] for the size of a file being written.
    pub async fn getattr(&self, who: &Caller, fid: Fid) -> WeftResult<InodeInfo> {
        if let Some(inode) = self.wbc_getattr(fid) {
            return Ok(inode); // made by the write-back cache, perhaps not yet sent
        }
        if let Some(inode) = self.still_cached(self.inodes.inode(fid)) {
            return Ok(inode);
        }
        let since = self.inodes.since();
        let inode = self.mdt(who, mdt::Getattr { fid }).await?;
        self.inodes.remember(Answer { name: None, inode: &inode, name_only: false, bare: false }, since);
        Ok(inode)
    }

    /// Changes attributes. A size change must go through [`Client::truncate`], which cuts
    /// the objects first.
    pub async fn setattr(&self, who: &Caller, fid: Fid, set: SetAttr) -> WeftResult<InodeInfo> {
        if let Some(inode) = self.wbc_setattr(who, fid, &set).await {
            return Ok(inode);
        }
        self.wbc_before_use_of(fid).await?;
        let owner_change = set.uid.is_some() || set.gid.is_some() || set.projid.is_some();
        let inode = self.mdt(who, mdt::Setattr { fid, set, open_handle: None }).await?;
        if owner_change {
            // A chown or a new project: the writes that follow count against the new owner,
            // and so do the blocks the objects hold now.
            self.note_owner(&inode.attr);
            self.move_object_owners(&inode).await;
        }
        Ok(inode)
    }

    /// Creates a regular file and opens it: the inode and the open handle for
    /// [`Client::close`]. `exclusive` = O_EXCL; `open_flags` are `msg::OPEN_*`.
    #[allow(clippy::too_many_arguments)]
    pub async fn create(
        &self,
        who: &Caller,
        parent: Fid,
        name: &[u8],
        mode: u32,
        exclusive: bool,
        spec: Option<StripeSpec>,
        open_flags: u32,
    ) -> WeftResult<Opened> {
        self.wbc_flush_held(parent).await?;
        let mut restores = 0;
        loop {
            let create = mdt::Create {
                parent,
                name: name.to_vec(),
                mode,
                exclusive,
                spec: spec.clone(),
                open_flags,
                umask: who.umask,
            };
            match self.mdt(who, create).await.inspect(|o| self.note_open(o, open_flags)) {
                // The name is a released file, which the create opens: restore it first.
                Err(e) if e.code == ErrorCode::NoData && !exclusive && restores < 3 => {
                    restores += 1;
                    let fid = self.lookup(who, parent, name).await?.attr.fid;
                    self.restore(who, fid).await?;
                }
                other => {
                    if let Ok(o) = &other {
                        self.wbc_note_name(parent, name, Some((o.inode.attr.fid, o.inode.attr.kind)));
                    }
                    return other;
                }
            }
        }
    }

    /// An unnamed file in `parent`, open with `open_flags` (O_TMPFILE): it goes with its
    /// last close unless [`Client::link`] names it first.
    pub async fn create_tmpfile(&self, who: &Caller, parent: Fid, mode: u32, open_flags: u32) -> WeftResult<Opened> {
        self.mdt(who, mdt::CreateTmpfile { parent, mode, open_flags, umask: who.umask })
            .await
            .inspect(|o| self.note_open(o, open_flags))
    }

    pub async fn mkdir(&self, who: &Caller, parent: Fid, name: &[u8], mode: u32) -> WeftResult<InodeInfo> {
        self.wbc_flush_held(parent).await?;
        let made = self.mdt(who, mdt::Mkdir { parent, name: name.to_vec(), mode, umask: who.umask }).await?;
        self.wbc_note_name(parent, name, Some((made.attr.fid, made.attr.kind)));
        Ok(made)
    }

    /// Fifos, sockets and device nodes.
    pub async fn mknod(
        &self,
        who: &Caller,
        parent: Fid,
        name: &[u8],
        kind: FileType,
        mode: u32,
        rdev: u32,
    ) -> WeftResult<InodeInfo> {
        self.wbc_flush_held(parent).await?;
        let made =
            self.mdt(who, mdt::Mknod { parent, name: name.to_vec(), kind, mode, rdev, umask: who.umask }).await?;
        self.wbc_note_name(parent, name, Some((made.attr.fid, made.attr.kind)));
        Ok(made)
    }

    pub async fn symlink(&self, who: &Caller, parent: Fid, name: &[u8], target: &[u8]) -> WeftResult<InodeInfo> {
        self.wbc_flush_held(parent).await?;
        let made = self.mdt(who, mdt::Symlink { parent, name: name.to_vec(), target: target.to_vec() }).await?;
        self.wbc_note_name(parent, name, Some((made.attr.fid, made.attr.kind)));
        Ok(made)
    }

    /// A new name for `fid`.
    pub async fn link(&self, who: &Caller, fid: Fid, parent: Fid, name: &[u8]) -> WeftResult<InodeInfo> {
        self.wbc_flush_held(parent).await?;
        self.wbc_before_use_of(fid).await?;
        let linked = self.mdt(who, mdt::Link { fid, parent, name: name.to_vec() }).await?;
        self.wbc_note_name(parent, name, Some((linked.attr.fid, linked.attr.kind)));
        Ok(linked)
    }

    pub async fn unlink(&self, who: &Caller, parent: Fid, name: &[u8]) -> WeftResult<()> {
        if let Some(done) = self.wbc_unlink(who, parent, name).await {
            return done;
        }
        self.wbc_flush_held(parent).await?;
        self.mdt(who, mdt::Unlink { parent, name: name.to_vec() }).await?;
        self.wbc_note_name(parent, name, None);
        Ok(())
    }

    pub async fn rmdir(&self, who: &Caller, parent: Fid, name: &[u8]) -> WeftResult<()> {
        self.wbc_flush_held(parent).await?;
        self.mdt(who, mdt::Rmdir { parent, name: name.to_vec() }).await?;
        self.wbc_note_name(parent, name, None);
        Ok(())
    }

    /// `flags` as renameat2: `msg::RENAME_NOREPLACE`, `msg::RENAME_EXCHANGE`.
    pub async fn rename(
        &self,
        who: &Caller,
        src_parent: Fid,
        src_name: &[u8],
        dst_parent: Fid,
        dst_name: &[u8],
        flags: u32,
    ) -> WeftResult<()> {
        // The write-back cache does not follow renames: it sends and gives back both.
        self.wbc_leave(src_parent).await?;
        self.wbc_leave(dst_parent).await?;
        let op =
            mdt::Rename { src_parent, src_name: src_name.to_vec(), dst_parent, dst_name: dst_name.to_vec(), flags };
        self.mdt(who, op).await
    }

    pub async fn readlink(&self, who: &Caller, fid: Fid) -> WeftResult<Vec<u8>> {
        self.mdt(who, mdt::Readlink { fid }).await
    }

    /// Up to `max_entries` entries after `cookie` (0: from the start).
    pub async fn readdir(&self, who: &Caller, fid: Fid, cookie: u64, max_entries: u32) -> WeftResult<DirPage> {
        self.wbc_flush_held(fid).await?;
        if self.config.statahead {
            self.statahead.listed(fid);
        }
        let mut stripes = self.stripes.of(fid);
        if stripes.is_none() && cookie == 0 && self.map.current().map.mdts().nth(1).is_some() {
            // With several MDTs a directory may be striped: its attributes say (from the
            // cache when a lock vouches for them).
            let dir = self.getattr(who, fid).await?;
            self.stripes.note(&dir);
            stripes = dir.stripes.map(|s| *s);
        }
        if let Some(stripes) = stripes {
            return self.readdir_striped(who, stripes, cookie, max_entries).await;
        }
        self.mdt(who, mdt::Readdir { fid, cookie, max_entries }).await
    }

    /// Opens a file: the inode and the handle for [`Client::close`]. `flags` are `msg::OPEN_*`.
    /// A released file is restored first (the call waits for it, see [`Client::restore`]).
    pub async fn open(&self, who: &Caller, fid: Fid, flags: u32) -> WeftResult<Opened> {
        self.wbc_before_use_of(fid).await?;
        let mut restores = 0;
        loop {
            match self.mdt(who, mdt::Open { fid, flags }).await.inspect(|o| self.note_open(o, flags)) {
                // Released (again, if someone released it right after the restore).
                Err(e) if e.code == ErrorCode::NoData && flags & OPEN_HSM_RESTORE == 0 && restores < 3 => {
                    restores += 1;
                    self.restore(who, fid).await?;
                }
                other => return other,
            }
        }
    }

    /// Ends an open. A writer passes the size, blocks and data version from a
    /// [`Client::glimpse_versioned`] (data version 0: unknown).
    pub async fn close(&self, who: &Caller, fid: Fid, handle: u64, written: Option<crate::Glimpse>) -> WeftResult<()> {
        let size_blocks = written.map(|w| (w.size, w.blocks));
        let (data_version, mtime_ns) = written.map_or((0, 0), |w| (w.data_version, w.mtime_ns));
        self.note_closed(handle);
        match self.mdt(who, mdt::Close { fid, handle, size_blocks, data_version, mtime_ns }).await {
            // The MDS restarted and forgot its opens: the handle is closed already, and the
            // file's size stays derived from its objects until a writer closes again.
            Err(e) if e.code == weft_proto::ErrorCode::Stale => Ok(()),
            // The inode it answers went to the inode cache (see `Client::mdt`).
            other => other.map(drop),
        }
    }

    pub async fn getxattr(&self, who: &Caller, fid: Fid, name: &[u8]) -> WeftResult<Vec<u8>> {
        self.wbc_before_use_of(fid).await?;
        // Asked by the kernel before every write (does the write drop a capability?).
        if name == b"security.capability" {
            if let Some(lock) = self.inodes.bare(fid) {
                if self.locks.still_holds(fid, lock) {
                    return Err(WeftError::new(ErrorCode::NoData, "no extended attribute 'security.capability'"));
                }
                self.inodes.forget(fid);
            }
        }
        self.mdt(who, mdt::GetXattr { fid, name: name.to_vec() }).await
    }

    /// `flags`: `msg::XATTR_CREATE`, `msg::XATTR_REPLACE`.
    pub async fn setxattr(&self, who: &Caller, fid: Fid, name: &[u8], value: &[u8], flags: u32) -> WeftResult<()> {
        self.wbc_before_use_of(fid).await?;
        self.mdt(who, mdt::SetXattr { fid, name: name.to_vec(), value: value.to_vec(), flags }).await
    }

    pub async fn listxattr(&self, who: &Caller, fid: Fid) -> WeftResult<Vec<Name>> {
        self.mdt(who, mdt::ListXattr { fid }).await
    }

    pub async fn removexattr(&self, who: &Caller, fid: Fid, name: &[u8]) -> WeftResult<()> {
        self.mdt(who, mdt::RemoveXattr { fid, name: name.to_vec() }).await
    }

    /// On a directory: its default layout for new files. On an empty file: a new layout.
    pub async fn setstripe(&self, who: &Caller, fid: Fid, spec: StripeSpec) -> WeftResult<()> {
        self.wbc_before_use_of(fid).await?;
        spec.validate()?;
        self.mdt(who, mdt::SetStripe { fid, spec }).await.map(drop)
    }

    /// Removes a directory's default layout.
    pub async fn deletestripe(&self, who: &Caller, fid: Fid) -> WeftResult<()> {
        self.mdt(who, mdt::DeleteStripe { fid }).await
    }

    /// The layout of a file and the default layout of a directory.
    pub async fn getstripe(&self, who: &Caller, fid: Fid) -> WeftResult<(Option<Layout>, Option<StripeSpec>)> {
        self.wbc_before_use_of(fid).await?;
        let stripe = self.mdt(who, mdt::GetStripe { fid }).await?;
        Ok((stripe.layout, stripe.default))
    }

    /// A file's HSM state.
    pub async fn hsm_state(&self, who: &Caller, fid: Fid) -> WeftResult<weft_proto::msg::hsm::HsmState> {
        self.mdt(who, mdt::HsmStateGet { fid }).await
    }

    /// Sets and clears a file's HSM flags (see `mdt::HsmStateSet`).
    pub async fn hsm_set(
        &self,
        who: &Caller,
        fid: Fid,
        change: crate::virtual_xattr::HsmChange,
    ) -> WeftResult<weft_proto::msg::hsm::HsmState> {
        let op = mdt::HsmStateSet { fid, set: change.set, clear: change.clear, archive_id: change.archive_id };
        self.mdt(who, op).await
    }

    /// Registers a changelog reader (root): records are kept from now until it clears them.
    pub async fn changelog_register(
        &self,
        who: &Caller,
        name: Option<String>,
    ) -> WeftResult<weft_proto::msg::changelog::ChangelogUser> {
        self.mdt(who, mdt::ChangelogRegister { name }).await
    }

    pub async fn changelog_deregister(&self, who: &Caller, id: &str) -> WeftResult<()> {
        self.mdt(who, mdt::ChangelogDeregister { id: id.to_string() }).await
    }

    /// At most `max` records from `start` on.
    pub async fn changelog_read(
        &self,
        who: &Caller,
        start: u64,
        max: u32,
    ) -> WeftResult<Vec<weft_proto::msg::changelog::ChangelogRecord>> {
        self.mdt(who, mdt::ChangelogRead { start, end: 0, max }).await
    }

    /// Reader `id` is done with the records up to `end`.
    pub async fn changelog_clear(&self, who: &Caller, id: &str, end: u64) -> WeftResult<()> {
        self.mdt(who, mdt::ChangelogClear { id: id.to_string(), end }).await
    }

    pub async fn changelog_users(&self, who: &Caller) -> WeftResult<weft_proto::msg::changelog::ChangelogUsers> {
        self.mdt(who, mdt::ChangelogUsersList {}).await
    }

    /// Space and inodes of the MDT.
    /// The directory this client sees as the file system's root: its nodemap's fileset
    /// (see `weft nodemap fileset-add`), else the root.
    pub async fn get_root(&self, who: &Caller) -> WeftResult<Fid> {
        Ok(self.mdt(who, mdt::GetRoot {}).await?.attr.fid)
    }

    pub async fn mdt_statfs(&self, who: &Caller) -> WeftResult<StatfsInfo> {
        self.mdt(who, mdt::Statfs {}).await
    }

    /// One path of `fid` from the root, without a leading slash (`dir/file`).
    pub async fn fid2path(&self, who: &Caller, fid: Fid) -> WeftResult<Vec<u8>> {
        self.mdt(who, mdt::Fid2Path { fid }).await
    }

    /// [`Client::getattr`], with the real size and blocks of a regular file whose size the
    /// MDS does not know (a writer has it open): a glimpse of its objects.
    pub async fn stat(&self, who: &Caller, fid: Fid) -> WeftResult<Attr> {
        let mut inode = self.getattr(who, fid).await?;
        self.complete_size(who, &mut inode).await?;
        Ok(inode.attr)
    }

    /// Fills in the size and blocks of a regular file from its objects when the MDS does
    /// not know them; leaves everything else alone. For lookups and opens, whose inode the
    /// kernel trusts as much as a getattr's.
    pub async fn complete_size(&self, who: &Caller, inode: &mut InodeInfo) -> WeftResult<()> {
        if inode.attr.kind != FileType::Regular || inode.attr.size_known {
            return Ok(());
        }
        if inode.layout.as_ref().is_some_and(|l| l.is_released()) {
            // Released, its size not known to the MDS: a client's read-write cache is
            // writing it. The size is the cache's: the data comes back first (a restore,
            // which the caching client serves).
            let fid = inode.attr.fid;
            self.restore(who, fid).await?;
            *inode = self.getattr(who, fid).await?;
            if inode.attr.size_known {
                return Ok(());
            }
        }
        if let Some(layout) = &inode.layout {
            let objects = self.glimpse_versioned(who, layout).await?;
            inode.attr.size = objects.size;
            inode.attr.blocks = objects.blocks;
            inode.attr.size_known = true;
            // Writes change the objects, not the MDS's inode (until the writer's close): the
            // file was modified when its objects last were, if that is after the inode's last
            // change (a time set on purpose since, `cp -p`, stays).
            let written = weft_proto::msg::Timestamp::from_nanos(objects.mtime_ns);
            if written > inode.attr.ctime {
                (inode.attr.mtime, inode.attr.ctime) = (written, written);
            }
        }
        Ok(())
    }
}
