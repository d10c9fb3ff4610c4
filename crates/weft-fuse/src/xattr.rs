//! Extended attributes: the ordinary ones, stored on the MDT, and the virtual `weft.*` ones,
//! the interface between the `weft` CLI and the mount (as lfs talks to llite through ioctls).
//! Virtual values are JSON; the mount answers them (nothing is stored) and never lists them.
//! Why a virtual request was refused is kept for its thread to read back (`weft.error`,
//! `refusals.rs`): the kernel carries only the errno.

use crate::errno::fuse_errno;
use crate::mount::{fid_of, reply_empty, Mount};
use fuser::{Errno, INodeNo, ReplyEmpty, ReplyXattr};
use serde::Serialize;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::time::Instant;
use weft_client::quota::QuotaRequest;
use weft_client::virtual_xattr::{CreateWithLayout, HsmChange, LayoutAnswer, PathAnswer, ProjectChange, ProjectState};
use weft_proto::layout::StripeSpec;
use weft_proto::msg::quota::QuotaKind;
use weft_proto::msg::{Caller, SetAttr, OPEN_READ, XATTR_CREATE, XATTR_REPLACE};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// The prefix of every virtual attribute.
pub const VIRTUAL_PREFIX: &[u8] = b"weft.";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Virtual {
    /// get: `{"layout", "default", "fid"}`; set: a JSON StripeSpec (SetStripe).
    Layout,
    /// set (any value) or remove: DeleteStripe.
    LayoutDelete,
    /// get: the FID string.
    Fid,
    /// get: the file's HSM state, a JSON `HsmState`; set: a JSON `HsmChange`.
    Hsm,
    /// set (any value): release the file's data to its archive copy (`weft hsm release`).
    HsmRelease,
    /// get: `{"path": "dir/file"}` of the FID after the colon.
    Fid2Path(Fid),
    /// get: per-target statfs, `[TargetStatfs]`.
    Df,
    /// get: `weft.df:FROM`, the per-target statfs of the `DF_PAGE_ROWS` targets from
    /// position FROM (fewer at the end): a file system of many OSTs, a page at a time.
    DfPage(usize),
    /// get: the cluster map, its first `MAP_OSTS_LISTED_MAX` OSTs only.
    Map,
    /// The management service's address, plain text (for tools that connect their own client).
    Mgs,
    /// get: this mount's opens of the file by I/O mode, `{"cached", "passthrough", "uncached"}`.
    Io,
    /// set on a directory: create the named file with the layout in the value (a JSON
    /// `CreateWithLayout`), as lfs setstripe creates a new file with its layout in one step.
    Create(Vec<u8>),
    /// set on a directory: make the named directory placed over MDTs (a JSON
    /// `MkdirPlaced`), as `lfs mkdir -i -c`.
    Mkdir(Vec<u8>),
    /// get: a directory's placement over MDTs; set: its default for new subdirectories.
    DirStripe,
    /// get (on the mount's root): the mount's parameters, `[{"name", "value"}]`.
    Params,
    /// set (on the mount's root, root only): the mount parameters the pattern after the
    /// colon matches take the value.
    Param(String),
    /// set on the mount's root (root only): add a persistent client cache, a JSON
    /// `pcc::AddRequest`.
    PccAdd,
    /// set on the mount's root (root only): delete a cache, a JSON `pcc::DelRequest`.
    PccDel,
    /// get on the mount's root: the caches, `[pcc::CacheInfo]`.
    PccList,
    /// set on a file: attach it to a cache, a JSON `pcc::AttachRequest`.
    PccAttach,
    /// set on a file: detach it, a JSON `pcc::DetachRequest`.
    PccDetach,
    /// get on a file: its cache state, a JSON `pcc::FileState`.
    PccState,
    /// get: why this thread's last `weft.*` request on this file was refused, a JSON
    /// `ErrorAnswer`, once (ENODATA when no reason is kept).
    Error,
    /// get: the file's project, a JSON `ProjectState`; set: a JSON `ProjectChange` (root).
    Project,
    /// get: `weft.quota:KIND:ID[:verify]`, a JSON `QuotaReport`.
    Quota(QuotaKind, u32, bool),
    /// set: a JSON `QuotaRequest` (root).
    QuotaSet,
    /// A `weft.` name this version does not know.
    Unknown,
}

/// Which virtual attribute `name` is; `None` for an ordinary attribute (stored on the MDT).
pub fn parse(name: &[u8]) -> Option<Virtual> {
    let rest = name.strip_prefix(VIRTUAL_PREFIX)?;
    Some(match rest {
        b"layout" => Virtual::Layout,
        b"layout.delete" => Virtual::LayoutDelete,
        b"fid" => Virtual::Fid,
        b"hsm" => Virtual::Hsm,
        b"project" => Virtual::Project,
        b"quota.set" => Virtual::QuotaSet,
        b"hsm.release" => Virtual::HsmRelease,
        b"df" => Virtual::Df,
        b"map" => Virtual::Map,
        b"mgs" => Virtual::Mgs,
        b"io" => Virtual::Io,
        b"params" => Virtual::Params,
        b"dirstripe" => Virtual::DirStripe,
        b"pcc.add" => Virtual::PccAdd,
        b"pcc.del" => Virtual::PccDel,
        b"pcc.list" => Virtual::PccList,
        b"pcc.attach" => Virtual::PccAttach,
        b"pcc.detach" => Virtual::PccDetach,
        b"pcc.state" => Virtual::PccState,
        b"error" => Virtual::Error,
        _ if rest.len() > b"param:".len() && rest.starts_with(b"param:") => {
            Virtual::Param(String::from_utf8_lossy(&rest[b"param:".len()..]).into_owned())
        }
        _ if rest.starts_with(b"df:") => std::str::from_utf8(&rest[b"df:".len()..])
            .ok()
            .and_then(|n| n.parse().ok())
            .map_or(Virtual::Unknown, Virtual::DfPage),
        _ if rest.starts_with(b"quota:") => parse_quota(&rest[b"quota:".len()..]).unwrap_or(Virtual::Unknown),
        _ if rest.len() > b"create:".len() && rest.starts_with(b"create:") => {
            Virtual::Create(rest[b"create:".len()..].to_vec())
        }
        _ if rest.len() > b"mkdir:".len() && rest.starts_with(b"mkdir:") => {
            Virtual::Mkdir(rest[b"mkdir:".len()..].to_vec())
        }
        _ => match rest.strip_prefix(b"fid2path:") {
            Some(fid) => match std::str::from_utf8(fid).ok().and_then(|s| s.parse::<Fid>().ok()) {
                Some(fid) => Virtual::Fid2Path(fid),
                None => Virtual::Unknown,
            },
            None => Virtual::Unknown,
        },
    })
}

/// `KIND:ID[:verify]` of `weft.quota:`.
fn parse_quota(rest: &[u8]) -> Option<Virtual> {
    let text = std::str::from_utf8(rest).ok()?;
    let mut parts = text.split(':');
    let kind = match parts.next()? {
        "u" => QuotaKind::User,
        "g" => QuotaKind::Group,
        "p" => QuotaKind::Project,
        _ => return None,
    };
    let id = parts.next()?.parse().ok()?;
    let verify = match parts.next() {
        None => false,
        Some("verify") => true,
        Some(_) => return None,
    };
    parts.next().is_none().then_some(Virtual::Quota(kind, id, verify))
}

/// How to answer a getxattr or listxattr of a `value` with the caller's buffer `size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The caller asked for the size only (size 0).
    Size(u32),
    /// The value fits: send it.
    Data,
    /// The buffer is too small (or the value larger than any buffer): ERANGE.
    Range,
}

pub fn answer(value_len: usize, size: u32) -> Answer {
    match u32::try_from(value_len) {
        Ok(len) if size == 0 => Answer::Size(len),
        Ok(len) if len <= size => Answer::Data,
        _ => Answer::Range,
    }
}

/// The listxattr value for `names`: each name NUL-terminated, virtual names left out.
pub fn list_value(names: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for name in names.iter().filter(|n| !n.starts_with(VIRTUAL_PREFIX)) {
        out.extend_from_slice(name);
        out.push(0);
    }
    out
}

fn from_json<T: serde::de::DeserializeOwned>(value: &[u8], name: &str, shape: &str) -> WeftResult<T> {
    serde_json::from_slice(value).map_err(|e| WeftError::invalid(format!("{name} takes a JSON {shape} object: {e}")))
}

fn json(value: &impl Serialize) -> WeftResult<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| WeftError::io(format!("cannot encode an attribute value as JSON: {e}")))
}

/// Answers a getxattr or listxattr with `value`, as the caller's buffer `size` allows.
fn reply_value(reply: ReplyXattr, value: &[u8], size: u32) {
    match answer(value.len(), size) {
        Answer::Size(len) => reply.size(len),
        Answer::Data => reply.data(value),
        Answer::Range => reply.error(Errno::ERANGE),
    }
}

impl Mount {
    /// A refused virtual request's reason, kept for `thread` to read back (not a refused
    /// read of `weft.error` itself: that would hide nothing worth keeping).
    fn keep_refusal<T>(&self, thread: u32, fid: Fid, reading_error: bool, result: &WeftResult<T>) {
        if let (Err(e), false) = (result, reading_error) {
            self.refusals.keep(thread, fid, e, Instant::now());
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn setxattr(
        self: Arc<Self>,
        who: Caller,
        thread: u32,
        ino: INodeNo,
        name: OsString,
        value: Vec<u8>,
        flags: i32,
        reply: ReplyEmpty,
    ) {
        let (fid, name) = (fid_of(ino), name.as_bytes());
        let result = match parse(name) {
            Some(which) => {
                let result = self.virtual_set(&who, fid, which, &value).await;
                self.keep_refusal(thread, fid, false, &result);
                result
            }
            None => {
                let flags = flags as u32 & (XATTR_CREATE | XATTR_REPLACE);
                self.client.setxattr(&who, fid, name, &value, flags).await
            }
        };
        reply_empty(reply, "setxattr", result);
    }

    pub(crate) async fn getxattr(
        self: Arc<Self>,
        who: Caller,
        thread: u32,
        ino: INodeNo,
        name: OsString,
        size: u32,
        reply: ReplyXattr,
    ) {
        let (fid, name) = (fid_of(ino), name.as_bytes());
        let result = match parse(name) {
            Some(which) => {
                let reading_error = which == Virtual::Error;
                let result = self.virtual_get(&who, thread, fid, which).await;
                self.keep_refusal(thread, fid, reading_error, &result);
                result
            }
            None => self.client.getxattr(&who, fid, name).await,
        };
        match result {
            Ok(value) => reply_value(reply, &value, size),
            Err(e) => reply.error(fuse_errno("getxattr", &e)),
        }
    }

    pub(crate) async fn listxattr(self: Arc<Self>, who: Caller, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.client.listxattr(&who, fid_of(ino)).await {
            Ok(names) => reply_value(reply, &list_value(&names), size),
            Err(e) => reply.error(fuse_errno("listxattr", &e)),
        }
    }

    pub(crate) async fn removexattr(
        self: Arc<Self>,
        who: Caller,
        thread: u32,
        ino: INodeNo,
        name: OsString,
        reply: ReplyEmpty,
    ) {
        let (fid, name) = (fid_of(ino), name.as_bytes());
        let result = match parse(name) {
            Some(which) => {
                let result = match which {
                    Virtual::Layout | Virtual::LayoutDelete => self.client.deletestripe(&who, fid).await,
                    _ => Err(WeftError::new(ErrorCode::NoData, "this virtual attribute cannot be removed")),
                };
                self.keep_refusal(thread, fid, false, &result);
                result
            }
            None => self.client.removexattr(&who, fid, name).await,
        };
        reply_empty(reply, "removexattr", result);
    }

    async fn virtual_get(&self, who: &Caller, thread: u32, fid: Fid, which: Virtual) -> WeftResult<Vec<u8>> {
        match which {
            Virtual::Layout => {
                let (layout, default) = self.client.getstripe(who, fid).await?;
                json(&LayoutAnswer { layout, default, fid: fid.to_string() })
            }
            Virtual::Fid => Ok(fid.to_string().into_bytes()),
            Virtual::DirStripe => json(&self.client.dir_stripe(who, fid).await?),
            Virtual::Hsm => json(&self.client.hsm_state(who, fid).await?),
            Virtual::Quota(kind, id, verify) => json(&self.client.quota(who, kind, id, verify).await?),
            Virtual::Project => {
                let attr = self.client.getattr(who, fid).await?.attr;
                json(&ProjectState { projid: attr.projid, inherit: attr.proj_inherit })
            }
            Virtual::Fid2Path(target) => {
                let path = self.client.fid2path(who, target).await?;
                json(&PathAnswer { path: String::from_utf8_lossy(&path).into_owned() })
            }
            Virtual::Df => json(&self.client.statfs_targets().await?),
            Virtual::DfPage(from) => {
                json(&self.client.statfs_targets_page(from, weft_client::virtual_xattr::DF_PAGE_ROWS).await?)
            }
            Virtual::Map => {
                // Within the 64 KiB an attribute's value holds: the tools that read it want the
                // MDTs; `weft df` lists every OST.
                let mut map = self.client.map();
                let mut osts = 0;
                map.targets.retain(|t| {
                    t.kind != weft_proto::msg::TargetKind::Ost || {
                        osts += 1;
                        osts <= weft_client::virtual_xattr::MAP_OSTS_LISTED_MAX
                    }
                });
                json(&map)
            }
            Virtual::Mgs => Ok(self.client.mgs_address().as_bytes().to_vec()),
            Virtual::Io => json(&self.io.counts(fid)),
            Virtual::Params => json(&self.params()),
            Virtual::Param(pattern) => json(&self.param_values(&pattern)),
            Virtual::PccList => json(&self.pcc_list()),
            Virtual::PccState => json(&self.pcc_state(fid)),
            Virtual::Error => match self.refusals.take(thread, fid, Instant::now()) {
                Some(answer) => json(&answer),
                None => Err(WeftError::new(ErrorCode::NoData, "no refusal of this thread's on this file is kept")),
            },
            Virtual::LayoutDelete
            | Virtual::QuotaSet
            | Virtual::HsmRelease
            | Virtual::Create(_)
            | Virtual::Mkdir(_)
            | Virtual::PccAdd
            | Virtual::PccDel
            | Virtual::PccAttach
            | Virtual::PccDetach
            | Virtual::Unknown => Err(WeftError::new(ErrorCode::NoData, "no such virtual attribute to read")),
        }
    }

    async fn virtual_set(self: &Arc<Self>, who: &Caller, fid: Fid, which: Virtual, value: &[u8]) -> WeftResult<()> {
        match which {
            Virtual::Layout => {
                let spec: StripeSpec = serde_json::from_slice(value)
                    .map_err(|e| WeftError::invalid(format!("weft.layout takes a JSON stripe specification: {e}")))?;
                self.client.setstripe(who, fid, spec).await
            }
            Virtual::LayoutDelete => self.client.deletestripe(who, fid).await,
            Virtual::QuotaSet => {
                let request: QuotaRequest = from_json(value, "weft.quota.set", "{Set|Delete|Grace}")?;
                self.client.set_quota(who, request).await
            }
            Virtual::Project => {
                let change: ProjectChange = from_json(value, "weft.project", "{projid, inherit}")?;
                let set = SetAttr { projid: change.projid, proj_inherit: change.inherit, ..SetAttr::default() };
                self.client.setattr(who, fid, set).await.map(drop)
            }
            Virtual::Hsm => {
                let change: HsmChange = serde_json::from_slice(value).map_err(|e| {
                    WeftError::invalid(format!("weft.hsm takes a JSON {{set, clear, archive_id}}: {e}"))
                })?;
                self.client.hsm_set(who, fid, change).await.map(drop)
            }
            Virtual::HsmRelease => {
                self.client.hsm_release(who, fid).await?;
                // This mount's own change calls back none of its locks: the kernel's
                // attributes (the blocks) are dropped here.
                drop(weft_client::locks::LockHooks::drop_inode(&*self.hooks, fid, weft_proto::lock::bits::UPDATE));
                Ok(())
            }
            Virtual::Create(name) => {
                let req: CreateWithLayout = serde_json::from_slice(value)
                    .map_err(|e| WeftError::invalid(format!("weft.create takes a JSON {{spec, mode}} object: {e}")))?;
                let opened =
                    self.client.create(who, fid, &name, req.mode & 0o7777, true, Some(req.spec), OPEN_READ).await?;
                self.client.close(who, opened.inode.attr.fid, opened.handle, None).await
            }
            Virtual::Mkdir(name) => {
                let req: weft_client::virtual_xattr::MkdirPlaced = from_json(value, "weft.mkdir", "{spec, mode}")?;
                self.client.mkdir_striped(who, fid, &name, req.mode & 0o7777, req.spec).await.map(drop)
            }
            Virtual::DirStripe => {
                let req: weft_client::virtual_xattr::DirDefault = from_json(value, "weft.dirstripe", "{default}")?;
                self.client.set_dir_default(who, fid, req.default).await
            }
            Virtual::Param(pattern) => {
                if who.identity.uid != 0 {
                    return Err(WeftError::new(ErrorCode::Perm, "only root sets mount parameters"));
                }
                let value = std::str::from_utf8(value).map_err(|_| WeftError::invalid("a parameter value is text"))?;
                self.set_params(&pattern, value).map(drop)
            }
            Virtual::PccAdd => self.pcc_add(who, from_json(value, "weft.pcc.add", "{dir, param}")?).await,
            Virtual::PccDel => self.pcc_del(who, from_json(value, "weft.pcc.del", "{dir, keep}")?).await,
            Virtual::PccAttach => self.pcc_attach(who, fid, from_json(value, "weft.pcc.attach", "{kind, id}")?).await,
            Virtual::PccDetach => self.pcc_detach(who, fid, from_json(value, "weft.pcc.detach", "{keep}")?).await,
            _ => Err(WeftError::new(ErrorCode::NotSupported, "this virtual attribute cannot be set")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_to_virtual_attributes_or_none() {
        assert_eq!(parse(b"weft.layout"), Some(Virtual::Layout));
        assert_eq!(parse(b"weft.create:new file"), Some(Virtual::Create(b"new file".to_vec())));
        assert_eq!(parse(b"weft.create:"), Some(Virtual::Unknown));
        assert_eq!(parse(b"weft.mkdir:d"), Some(Virtual::Mkdir(b"d".to_vec())));
        assert_eq!(parse(b"weft.dirstripe"), Some(Virtual::DirStripe));
        assert_eq!(parse(b"weft.layout.delete"), Some(Virtual::LayoutDelete));
        assert_eq!(parse(b"weft.fid"), Some(Virtual::Fid));
        assert_eq!(parse(b"weft.hsm"), Some(Virtual::Hsm));
        assert_eq!(parse(b"weft.df"), Some(Virtual::Df));
        assert_eq!(parse(b"weft.df:256"), Some(Virtual::DfPage(256)));
        assert_eq!(parse(b"weft.df:x"), Some(Virtual::Unknown));
        assert_eq!(parse(b"weft.map"), Some(Virtual::Map));
        let fid = Fid::new(0x200000400, 0x1f, 0);
        assert_eq!(parse(format!("weft.fid2path:{fid}").as_bytes()), Some(Virtual::Fid2Path(fid)));
        assert_eq!(parse(b"weft.fid2path:0x200000400:0x1f:0x0"), Some(Virtual::Fid2Path(fid)));
        assert_eq!(parse(b"weft.fid2path:junk"), Some(Virtual::Unknown));
        assert_eq!(parse(b"weft.other"), Some(Virtual::Unknown));
        assert_eq!(parse(b"weft.params"), Some(Virtual::Params));
        assert_eq!(parse(b"weft.param:jobid_var"), Some(Virtual::Param("jobid_var".into())));
        assert_eq!(parse(b"weft.pcc.add"), Some(Virtual::PccAdd));
        assert_eq!(parse(b"weft.pcc.state"), Some(Virtual::PccState));
        assert_eq!(parse(b"weft.pcc.other"), Some(Virtual::Unknown));
        assert_eq!(parse(b"weft.error"), Some(Virtual::Error));
        assert_eq!(parse(b"user.weft.layout"), None);
        assert_eq!(parse(b"user.x"), None);
    }

    #[test]
    fn size_protocol_answers_size_data_or_range() {
        assert_eq!(answer(10, 0), Answer::Size(10));
        assert_eq!(answer(0, 0), Answer::Size(0));
        assert_eq!(answer(10, 10), Answer::Data);
        assert_eq!(answer(10, 64), Answer::Data);
        assert_eq!(answer(10, 9), Answer::Range);
    }

    #[test]
    fn list_leaves_out_virtual_names() {
        let names = vec![b"user.a".to_vec(), b"weft.layout".to_vec(), b"trusted.b".to_vec()];
        assert_eq!(list_value(&names), b"user.a\0trusted.b\0".to_vec());
        assert!(list_value(&[]).is_empty());
    }
}
