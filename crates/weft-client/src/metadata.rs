//! One method per metadata request ([`MdtRequest`]), each checking that the MDT answered
//! with the reply its request calls for.

use crate::{mdt_reply_name, Client};
use weft_proto::layout::{Layout, StripeSpec};
use weft_proto::msg::{
    Attr, DirPage, FileType, Identity, InodeInfo, MdtReply, MdtRequest, Name, OpenIo, SetAttr, StatfsInfo,
};
use weft_proto::{Fid, WeftError, WeftResult};

/// What Open and Create answer.
#[derive(Debug, Clone)]
pub struct Opened {
    pub inode: InodeInfo,
    /// For [`Client::close`].
    pub handle: u64,
    /// How this open may do its I/O.
    pub io: OpenIo,
}

fn unexpected(opcode: &str, reply: &MdtReply) -> WeftError {
    WeftError::protocol(format!("unexpected {} reply to {opcode}", mdt_reply_name(reply)))
}

impl Client {
    async fn mdt_inode(&self, who: &Identity, op: MdtRequest) -> WeftResult<InodeInfo> {
        let opcode = op.opcode_name();
        match self.mdt(who, op).await? {
            MdtReply::Inode(inode) => Ok(inode),
            other => Err(unexpected(opcode, &other)),
        }
    }

    async fn mdt_empty(&self, who: &Identity, op: MdtRequest) -> WeftResult<()> {
        let opcode = op.opcode_name();
        match self.mdt(who, op).await? {
            MdtReply::Empty => Ok(()),
            other => Err(unexpected(opcode, &other)),
        }
    }

    async fn mdt_data(&self, who: &Identity, op: MdtRequest) -> WeftResult<Vec<u8>> {
        let opcode = op.opcode_name();
        match self.mdt(who, op).await? {
            MdtReply::Data(data) => Ok(data),
            other => Err(unexpected(opcode, &other)),
        }
    }

    async fn mdt_opened(&self, who: &Identity, op: MdtRequest) -> WeftResult<Opened> {
        let opcode = op.opcode_name();
        match self.mdt(who, op).await? {
            MdtReply::Opened { inode, handle, io } => Ok(Opened { inode, handle, io }),
            other => Err(unexpected(opcode, &other)),
        }
    }

    pub async fn lookup(&self, who: &Identity, parent: Fid, name: &[u8]) -> WeftResult<InodeInfo> {
        self.mdt_inode(who, MdtRequest::Lookup { parent, name: name.to_vec() }).await
    }

    /// The inode as the MDS has it; see [`Client::stat`] for the size of a file being written.
    pub async fn getattr(&self, who: &Identity, fid: Fid) -> WeftResult<InodeInfo> {
        self.mdt_inode(who, MdtRequest::Getattr { fid }).await
    }

    /// Changes attributes. A size change must go through [`Client::truncate`], which cuts
    /// the objects first. An MDS that answers a setattr with no inode is followed by a getattr.
    pub async fn setattr(&self, who: &Identity, fid: Fid, set: SetAttr) -> WeftResult<InodeInfo> {
        match self.mdt(who, MdtRequest::Setattr { fid, set }).await? {
            MdtReply::Inode(inode) => Ok(inode),
            MdtReply::Empty => self.getattr(who, fid).await,
            other => Err(unexpected("mds_setattr", &other)),
        }
    }

    /// Creates a regular file and opens it: the inode and the open handle for
    /// [`Client::close`]. `exclusive` = O_EXCL; `open_flags` are `msg::OPEN_*`.
    #[allow(clippy::too_many_arguments)]
    pub async fn create(
        &self,
        who: &Identity,
        parent: Fid,
        name: &[u8],
        mode: u32,
        exclusive: bool,
        spec: Option<StripeSpec>,
        open_flags: u32,
    ) -> WeftResult<Opened> {
        let op = MdtRequest::Create { parent, name: name.to_vec(), mode, exclusive, spec, open_flags };
        self.mdt_opened(who, op).await
    }

    pub async fn mkdir(&self, who: &Identity, parent: Fid, name: &[u8], mode: u32) -> WeftResult<InodeInfo> {
        self.mdt_inode(who, MdtRequest::Mkdir { parent, name: name.to_vec(), mode }).await
    }

    /// Fifos, sockets and device nodes.
    pub async fn mknod(
        &self,
        who: &Identity,
        parent: Fid,
        name: &[u8],
        kind: FileType,
        mode: u32,
        rdev: u32,
    ) -> WeftResult<InodeInfo> {
        self.mdt_inode(who, MdtRequest::Mknod { parent, name: name.to_vec(), kind, mode, rdev }).await
    }

    pub async fn symlink(&self, who: &Identity, parent: Fid, name: &[u8], target: &[u8]) -> WeftResult<InodeInfo> {
        self.mdt_inode(who, MdtRequest::Symlink { parent, name: name.to_vec(), target: target.to_vec() }).await
    }

    /// A new name for `fid`. An MDS that answers with no inode is followed by a getattr.
    pub async fn link(&self, who: &Identity, fid: Fid, parent: Fid, name: &[u8]) -> WeftResult<InodeInfo> {
        match self.mdt(who, MdtRequest::Link { fid, parent, name: name.to_vec() }).await? {
            MdtReply::Inode(inode) => Ok(inode),
            MdtReply::Empty => self.getattr(who, fid).await,
            other => Err(unexpected("mds_link", &other)),
        }
    }

    pub async fn unlink(&self, who: &Identity, parent: Fid, name: &[u8]) -> WeftResult<()> {
        self.mdt_empty(who, MdtRequest::Unlink { parent, name: name.to_vec() }).await
    }

    pub async fn rmdir(&self, who: &Identity, parent: Fid, name: &[u8]) -> WeftResult<()> {
        self.mdt_empty(who, MdtRequest::Rmdir { parent, name: name.to_vec() }).await
    }

    /// `flags` as renameat2: `msg::RENAME_NOREPLACE`, `msg::RENAME_EXCHANGE`.
    pub async fn rename(
        &self,
        who: &Identity,
        src_parent: Fid,
        src_name: &[u8],
        dst_parent: Fid,
        dst_name: &[u8],
        flags: u32,
    ) -> WeftResult<()> {
        let op = MdtRequest::Rename {
            src_parent,
            src_name: src_name.to_vec(),
            dst_parent,
            dst_name: dst_name.to_vec(),
            flags,
        };
        self.mdt_empty(who, op).await
    }

    pub async fn readlink(&self, who: &Identity, fid: Fid) -> WeftResult<Vec<u8>> {
        self.mdt_data(who, MdtRequest::Readlink { fid }).await
    }

    /// Up to `max_entries` entries after `cookie` (0: from the start).
    pub async fn readdir(&self, who: &Identity, fid: Fid, cookie: u64, max_entries: u32) -> WeftResult<DirPage> {
        match self.mdt(who, MdtRequest::Readdir { fid, cookie, max_entries }).await? {
            MdtReply::Dir(page) => Ok(page),
            other => Err(unexpected("mds_readdir", &other)),
        }
    }

    /// Opens a file: the inode and the handle for [`Client::close`]. `flags` are `msg::OPEN_*`.
    pub async fn open(&self, who: &Identity, fid: Fid, flags: u32) -> WeftResult<Opened> {
        self.mdt_opened(who, MdtRequest::Open { fid, flags }).await
    }

    /// Ends an open. A writer passes the size and blocks from a [`Client::glimpse`].
    pub async fn close(
        &self,
        who: &Identity,
        fid: Fid,
        handle: u64,
        size_blocks: Option<(u64, u64)>,
    ) -> WeftResult<()> {
        match self.mdt_empty(who, MdtRequest::Close { fid, handle, size_blocks }).await {
            // The MDS restarted and forgot its opens: the handle is closed already, and the
            // file's size stays derived from its objects until a writer closes again.
            Err(e) if e.code == weft_proto::ErrorCode::Stale => Ok(()),
            other => other,
        }
    }

    pub async fn getxattr(&self, who: &Identity, fid: Fid, name: &[u8]) -> WeftResult<Vec<u8>> {
        self.mdt_data(who, MdtRequest::GetXattr { fid, name: name.to_vec() }).await
    }

    /// `flags`: `msg::XATTR_CREATE`, `msg::XATTR_REPLACE`.
    pub async fn setxattr(&self, who: &Identity, fid: Fid, name: &[u8], value: &[u8], flags: u32) -> WeftResult<()> {
        self.mdt_empty(who, MdtRequest::SetXattr { fid, name: name.to_vec(), value: value.to_vec(), flags }).await
    }

    pub async fn listxattr(&self, who: &Identity, fid: Fid) -> WeftResult<Vec<Name>> {
        match self.mdt(who, MdtRequest::ListXattr { fid }).await? {
            MdtReply::Names(names) => Ok(names),
            other => Err(unexpected("mds_listxattr", &other)),
        }
    }

    pub async fn removexattr(&self, who: &Identity, fid: Fid, name: &[u8]) -> WeftResult<()> {
        self.mdt_empty(who, MdtRequest::RemoveXattr { fid, name: name.to_vec() }).await
    }

    /// On a directory: its default layout for new files. On an empty file: a new layout.
    pub async fn setstripe(&self, who: &Identity, fid: Fid, spec: StripeSpec) -> WeftResult<()> {
        spec.validate()?;
        // The MDS answers with the layout state it now holds.
        match self.mdt(who, MdtRequest::SetStripe { fid, spec }).await? {
            MdtReply::Stripe { .. } | MdtReply::Empty => Ok(()),
            other => Err(unexpected("mds_setstripe", &other)),
        }
    }

    /// Removes a directory's default layout.
    pub async fn deletestripe(&self, who: &Identity, fid: Fid) -> WeftResult<()> {
        self.mdt_empty(who, MdtRequest::DeleteStripe { fid }).await
    }

    /// The layout of a file and the default layout of a directory.
    pub async fn getstripe(&self, who: &Identity, fid: Fid) -> WeftResult<(Option<Layout>, Option<StripeSpec>)> {
        match self.mdt(who, MdtRequest::GetStripe { fid }).await? {
            MdtReply::Stripe { layout, default } => Ok((layout, default)),
            other => Err(unexpected("mds_getstripe", &other)),
        }
    }

    /// Space and inodes of the MDT.
    pub async fn mdt_statfs(&self, who: &Identity) -> WeftResult<StatfsInfo> {
        match self.mdt(who, MdtRequest::Statfs).await? {
            MdtReply::Statfs(info) => Ok(info),
            other => Err(unexpected("mds_statfs", &other)),
        }
    }

    /// One path of `fid` from the root, without a leading slash (`dir/file`).
    pub async fn fid2path(&self, who: &Identity, fid: Fid) -> WeftResult<Vec<u8>> {
        self.mdt_data(who, MdtRequest::Fid2Path { fid }).await
    }

    /// [`Client::getattr`], with the real size and blocks of a regular file whose size the
    /// MDS does not know (a writer has it open): a glimpse of its objects.
    pub async fn stat(&self, who: &Identity, fid: Fid) -> WeftResult<Attr> {
        let mut inode = self.getattr(who, fid).await?;
        self.complete_size(&mut inode).await?;
        Ok(inode.attr)
    }

    /// Fills in the size and blocks of a regular file from its objects when the MDS does
    /// not know them; leaves everything else alone. For lookups and opens, whose inode the
    /// kernel trusts as much as a getattr's.
    pub async fn complete_size(&self, inode: &mut InodeInfo) -> WeftResult<()> {
        if inode.attr.kind != FileType::Regular || inode.attr.size_known {
            return Ok(());
        }
        if let Some(layout) = &inode.layout {
            let (size, blocks) = self.glimpse(layout).await?;
            inode.attr.size = size;
            inode.attr.blocks = blocks;
            inode.attr.size_known = true;
        }
        Ok(())
    }
}
