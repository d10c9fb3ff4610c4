//! Names and attributes: lookup, getattr, setattr, the ops that make and remove names,
//! directory listings, statfs.

use crate::coherence::recheck;
use crate::convert::{file_attr, file_type};
use crate::errno::fuse_errno;
use crate::handles::{entry_offset, resume_at, OpenDir, Resume, Step, DIR_OFFSET_DOT, DIR_OFFSET_DOTDOT};
use crate::mount::{fid_of, reply_empty, Mount};
use fuser::{
    Errno, FileHandle, INodeNo, RenameFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyStatfs,
};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::time::Duration;
use weft_proto::layout::Layout;
use weft_proto::limits::{NAME_BYTES_MAX, READDIR_ENTRIES_MAX};
use weft_proto::msg::{Attr, Caller, FileType, SetAttr, RENAME_EXCHANGE, RENAME_NOREPLACE};
use weft_proto::{Fid, WeftResult};

/// renameat2 flags as the MDS's; None for RENAME_WHITEOUT, which Weft does not do (EINVAL).
pub(crate) fn rename_flags(flags: RenameFlags) -> Option<u32> {
    if flags.contains(RenameFlags::RENAME_WHITEOUT) {
        return None;
    }
    let mut weft = 0;
    if flags.contains(RenameFlags::RENAME_NOREPLACE) {
        weft |= RENAME_NOREPLACE;
    }
    if flags.contains(RenameFlags::RENAME_EXCHANGE) {
        weft |= RENAME_EXCHANGE;
    }
    Some(weft)
}

/// How long the kernel may keep the attributes a setattr answers with: no lock came with
/// the change, so with locking the next stat asks again; without, the mount's lifetime.
pub(crate) fn setattr_ttl(locking: bool, attr_ttl: Duration) -> Duration {
    if locking {
        Duration::ZERO
    } else {
        attr_ttl
    }
}

impl Mount {
    pub(crate) async fn lookup(self: Arc<Self>, who: Caller, parent: INodeNo, name: OsString, reply: ReplyEntry) {
        let result = async {
            let inode = self.client.lookup(&who, fid_of(parent), name.as_bytes()).await?;
            self.complete(&who, inode).await
        }
        .await;
        self.reply_entry(reply, "lookup", parent, &name, result);
    }

    pub(crate) async fn getattr(self: Arc<Self>, who: Caller, ino: INodeNo, reply: ReplyAttr) {
        let result = async { self.complete(&who, self.client.getattr(&who, fid_of(ino)).await?).await }.await;
        match result {
            Ok(inode) => {
                reply.attr(&self.ttl(&inode), &file_attr(&inode.attr, inode.layout.as_ref()));
                recheck(&self.client, &self.hooks, &inode);
            }
            Err(e) => match self.removed_open_dir(ino, &e) {
                Some(attr) => reply.attr(&Duration::ZERO, &file_attr(&attr, None)),
                None => reply.error(fuse_errno("getattr", &e)),
            },
        }
    }

    /// A directory open here that the MDS no longer has (a file removed while open stays
    /// on the MDS until its last close; a directory is not opened there): its attributes
    /// at the open, with no links.
    fn removed_open_dir(&self, ino: INodeNo, e: &weft_proto::WeftError) -> Option<Attr> {
        if e.code != weft_proto::ErrorCode::NotFound {
            return None;
        }
        let fid = fid_of(ino);
        let mut attr = self.dirs.find_all(|d| d.fid == fid).iter().find_map(|d| d.attr_at_open.clone())?;
        attr.nlink = 0;
        Some(attr)
    }

    pub(crate) async fn setattr(
        self: Arc<Self>,
        who: Caller,
        ino: INodeNo,
        fh: Option<FileHandle>,
        set: SetAttr,
        reply: ReplyAttr,
    ) {
        match self.set_attributes(&who, fid_of(ino), fh, set).await {
            Ok((attr, layout)) => {
                reply.attr(&setattr_ttl(self.locking(), self.opts.attr_ttl), &file_attr(&attr, layout.as_ref()))
            }
            Err(e) => reply.error(fuse_errno("setattr", &e)),
        }
    }

    async fn set_attributes(
        &self,
        who: &Caller,
        fid: Fid,
        fh: Option<FileHandle>,
        set: SetAttr,
    ) -> WeftResult<(Attr, Option<Layout>)> {
        let mut last: Option<(Attr, Option<Layout>)> = None;
        if let Some(size) = set.size {
            // A truncate must not be overtaken by writes queued before it.
            self.writes.wait_idle(fid).await;
            // Through a descriptor (ftruncate), the open's right to write the file is what
            // counts, not the mode bits now.
            let open = fh.and_then(|fh| self.files.get(fh.0));
            let layout = match &open {
                Some(file) => self.client.current_layout(who, file).await?.map(|l| (*l).clone()),
                None => self.client.getattr(who, fid).await?.layout,
            };
            let handle = open.map(|file| file.mds_handle);
            let owned = self.pcc.owned_path(fid);
            let attr = match (&layout, owned) {
                (_, Some(path)) => self.pcc_truncate(who, fid, &path, size).await?.attr,
                (Some(layout), None) => self.client.truncate(who, fid, layout, size, handle).await?,
                (None, None) => {
                    self.client.setattr(who, fid, SetAttr { size: Some(size), ..SetAttr::default() }).await?.attr
                }
            };
            self.set_open_size(fid, size);
            // A truncate may have given components objects: the opens here learn it.
            self.share_fresh_layout(who, fid).await?;
            last = Some((attr, layout));
        }
        let rest = SetAttr { size: None, ..set };
        if rest.mtime.is_some() {
            // A modification time set on purpose (`cp -p`, `touch -d`) comes after the
            // writes before it: they must not land later and move it again.
            self.writes.wait_idle(fid).await;
        }
        if rest != SetAttr::default() {
            let inode = self.complete(who, self.client.setattr(who, fid, rest).await?).await?;
            last = Some((inode.attr, inode.layout));
        }
        match last {
            Some(done) => Ok(done),
            None => {
                let inode = self.complete(who, self.client.getattr(who, fid).await?).await?;
                Ok((inode.attr, inode.layout))
            }
        }
    }

    pub(crate) async fn readlink(self: Arc<Self>, who: Caller, ino: INodeNo, reply: ReplyData) {
        match self.client.readlink(&who, fid_of(ino)).await {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(fuse_errno("readlink", &e)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn mknod(
        self: Arc<Self>,
        who: Caller,
        parent: INodeNo,
        name: OsString,
        kind: FileType,
        perm: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let (dir, bytes) = (fid_of(parent), name.as_bytes());
        let result = async {
            if kind == FileType::Regular {
                // A regular file is a create (it gets a layout), closed at once.
                let opened = self.client.create(&who, dir, bytes, perm, true, None, 0).await?;
                self.client.close(&who, opened.inode.attr.fid, opened.handle, None).await?;
                Ok(opened.inode)
            } else {
                self.client.mknod(&who, dir, bytes, kind, perm, rdev).await
            }
        }
        .await;
        self.reply_entry(reply, "mknod", parent, &name, result);
    }

    pub(crate) async fn mkdir(
        self: Arc<Self>,
        who: Caller,
        parent: INodeNo,
        name: OsString,
        perm: u32,
        reply: ReplyEntry,
    ) {
        let result = self.client.mkdir(&who, fid_of(parent), name.as_bytes(), perm).await;
        self.reply_entry(reply, "mkdir", parent, &name, result);
    }

    pub(crate) async fn unlink(self: Arc<Self>, who: Caller, parent: INodeNo, name: OsString, reply: ReplyEmpty) {
        reply_empty(reply, "unlink", self.client.unlink(&who, fid_of(parent), name.as_bytes()).await);
    }

    pub(crate) async fn rmdir(self: Arc<Self>, who: Caller, parent: INodeNo, name: OsString, reply: ReplyEmpty) {
        reply_empty(reply, "rmdir", self.client.rmdir(&who, fid_of(parent), name.as_bytes()).await);
    }

    pub(crate) async fn symlink(
        self: Arc<Self>,
        who: Caller,
        parent: INodeNo,
        name: OsString,
        target: OsString,
        reply: ReplyEntry,
    ) {
        let result = self.client.symlink(&who, fid_of(parent), name.as_bytes(), target.as_bytes()).await;
        self.reply_entry(reply, "symlink", parent, &name, result);
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn rename(
        self: Arc<Self>,
        who: Caller,
        parent: INodeNo,
        name: OsString,
        new_parent: INodeNo,
        new_name: OsString,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        let (from, to) = (fid_of(parent), fid_of(new_parent));
        let result = self.client.rename(&who, from, name.as_bytes(), to, new_name.as_bytes(), flags).await;
        reply_empty(reply, "rename", result);
    }

    pub(crate) async fn link(
        self: Arc<Self>,
        who: Caller,
        ino: INodeNo,
        new_parent: INodeNo,
        new_name: OsString,
        reply: ReplyEntry,
    ) {
        let result = async {
            let inode = self.client.link(&who, fid_of(ino), fid_of(new_parent), new_name.as_bytes()).await?;
            self.complete(&who, inode).await
        }
        .await;
        self.reply_entry(reply, "link", new_parent, &new_name, result);
    }

    pub(crate) fn opendir(&self, ino: INodeNo) -> FileHandle {
        let fid = fid_of(ino);
        FileHandle(self.dirs.insert(OpenDir::new(fid, self.client.last_known(fid))))
    }

    pub(crate) async fn readdir(
        self: Arc<Self>,
        who: Caller,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(dir) = self.dirs.get(fh.0) else {
            return reply.error(Errno::EBADF);
        };
        let mut at = resume_at(offset);
        if at == Resume::Dot {
            if reply.add(ino, DIR_OFFSET_DOT, fuser::FileType::Directory, ".") {
                return reply.ok();
            }
            at = Resume::DotDot;
        }
        if at == Resume::DotDot {
            // The parent is not known without a lookup; the kernel does not use this number.
            if reply.add(ino, DIR_OFFSET_DOTDOT, fuser::FileType::Directory, "..") {
                return reply.ok();
            }
            at = Resume::Entry(0);
        }
        let Resume::Entry(mut index) = at else { unreachable!("dot entries are handled above") };
        loop {
            match dir.step(index) {
                Step::End => break,
                Step::Fetch { after_cookie, first_index } => {
                    match self.client.readdir(&who, dir.fid, after_cookie, READDIR_ENTRIES_MAX).await {
                        Ok(page) => dir.store(first_index, after_cookie, page.entries, page.eof),
                        Err(e) => return reply.error(fuse_errno("readdir", &e)),
                    }
                }
                Step::Entries { first_index, entries } => {
                    for (i, entry) in entries.iter().enumerate() {
                        let name = OsStr::from_bytes(&entry.name);
                        let offset = entry_offset(first_index + i as u64);
                        if reply.add(INodeNo(crate::root::ino_of(entry.fid)), offset, file_type(entry.kind), name) {
                            return reply.ok();
                        }
                    }
                    index = first_index + entries.len() as u64;
                }
            }
        }
        reply.ok();
    }

    pub(crate) fn releasedir(&self, fh: FileHandle) {
        self.dirs.remove(fh.0);
    }

    pub(crate) async fn statfs(self: Arc<Self>, reply: ReplyStatfs) {
        match self.client.statfs().await {
            Ok(s) => {
                reply.statfs(s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, NAME_BYTES_MAX as u32, s.bsize)
            }
            Err(e) => reply.error(fuse_errno("statfs", &e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_flags_map_and_whiteout_is_refused() {
        assert_eq!(rename_flags(RenameFlags::empty()), Some(0));
        assert_eq!(rename_flags(RenameFlags::RENAME_NOREPLACE), Some(RENAME_NOREPLACE));
        assert_eq!(rename_flags(RenameFlags::RENAME_EXCHANGE), Some(RENAME_EXCHANGE));
        assert_eq!(rename_flags(RenameFlags::RENAME_WHITEOUT), None);
        assert_eq!(rename_flags(RenameFlags::RENAME_WHITEOUT | RenameFlags::RENAME_NOREPLACE), None);
    }

    #[test]
    fn a_setattr_answer_is_cached_only_without_locks() {
        assert_eq!(setattr_ttl(true, Duration::from_secs(1)), Duration::ZERO);
        assert_eq!(setattr_ttl(false, Duration::from_secs(1)), Duration::from_secs(1));
    }
}
