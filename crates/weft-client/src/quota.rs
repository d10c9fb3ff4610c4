//! Quotas from a client: what `weft quota` shows (the master's limits and the MDT's inode
//! count, and each OST's blocks for the id) and what `weft setquota` changes.

use crate::limits::OBJECT_REQUESTS_IN_FLIGHT_MAX;
use crate::Client;
use bytes::Bytes;
use futures::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};
use weft_proto::msg::quota::{QuotaChange, QuotaInfo, QuotaKind};
use weft_proto::msg::{mdt, ost, target_name, Caller, TargetKind, TargetState};
use weft_proto::WeftResult;

/// One OST's blocks for an id, or why there are none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetQuota {
    /// Lustre's name: `weft-OST0001`.
    pub name: String,
    pub used_kib: Option<u64>,
    pub scanned_kib: Option<u64>,
    pub error: Option<String>,
}

/// An id's quota over the whole file system.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaReport {
    /// The MDT's name (`weft-MDT0000`).
    pub mdt: String,
    pub info: QuotaInfo,
    pub osts: Vec<TargetQuota>,
}

impl QuotaReport {
    /// The blocks of every OST that answered, in KiB.
    pub fn used_kib(&self) -> u64 {
        self.osts.iter().filter_map(|t| t.used_kib).sum()
    }

    /// Whether an OST did not answer (its blocks are missing from the sum).
    pub fn incomplete(&self) -> bool {
        self.osts.iter().any(|t| t.used_kib.is_none())
    }
}

/// What `weft setquota` asks: limits, the default again, or grace times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum QuotaRequest {
    Set { kind: QuotaKind, id: u32, change: QuotaChange },
    Delete { kind: QuotaKind, id: u32 },
    Grace { kind: QuotaKind, block_s: Option<u64>, inode_s: Option<u64> },
}

impl Client {
    /// `kind` `id`'s limits and usage; `verify` (root) has each target count by a scan too.
    pub async fn quota(&self, who: &Caller, kind: QuotaKind, id: u32, verify: bool) -> WeftResult<QuotaReport> {
        let mut info = self.mdt(who, mdt::QuotaGet { kind, id, verify }).await?;
        let map = self.map();
        // MDT0 is the quota master; each other MDT counts the inodes it holds.
        for mdt in map.mdts().map(|t| t.index).filter(|i| *i != 0) {
            let theirs = self.mdt_on(who, mdt, mdt::QuotaGet { kind, id, verify }).await?;
            info.inodes += theirs.inodes;
            if let (Some(ours), Some(scanned)) = (info.inodes_scanned.as_mut(), theirs.inodes_scanned) {
                *ours += scanned;
            }
        }
        let fsname = map.fsname.clone();
        let mut osts: Vec<_> = map.targets.iter().filter(|t| t.kind == TargetKind::Ost).cloned().collect();
        osts.sort_by_key(|t| t.index);
        let timeout = Some(self.config.connect_timeout);
        let rows = stream::iter(osts.into_iter().map(|t| {
            let fsname = fsname.clone();
            async move {
                let mut row = TargetQuota {
                    name: target_name(&fsname, TargetKind::Ost, t.index),
                    used_kib: None,
                    scanned_kib: None,
                    error: None,
                };
                if t.state == TargetState::Down {
                    row.error = Some("down (as the management service reports)".to_string());
                    return row;
                }
                let op = ost::QuotaUsage { kind, id, verify };
                match self.call(who, t.index, op, Bytes::new(), if verify { None } else { timeout }).await {
                    Ok((used, _)) => {
                        row.used_kib = Some(used.used_kib);
                        row.scanned_kib = used.scanned_kib;
                    }
                    Err(e) => row.error = Some(e.message),
                }
                row
            }
        }))
        .buffered(OBJECT_REQUESTS_IN_FLIGHT_MAX)
        .collect()
        .await;
        Ok(QuotaReport { mdt: target_name(&fsname, TargetKind::Mdt, 0), info, osts: rows })
    }

    /// Tells the OSTs of a file's objects its owner, group and project (after a chown or
    /// `weft project`), so that the blocks they hold count against them. A failure is
    /// logged: the OST's count is then wrong for those objects until one is written or the
    /// OST restarts (its scan), which `weft quota --verify` shows.
    pub(crate) async fn move_object_owners(&self, inode: &weft_proto::msg::InodeInfo) {
        let Some(layout) = &inode.layout else { return };
        let a = &inode.attr;
        let owner = weft_proto::msg::quota::QuotaOwner { uid: a.uid, gid: a.gid, projid: a.projid };
        let root = Caller::root();
        let objects: Vec<_> =
            layout.components.iter().filter(|c| c.is_instantiated()).flat_map(|c| c.objects.iter().copied()).collect();
        let results = stream::iter(objects.into_iter().map(|o| {
            let root = &root;
            async move { (o, self.call(root, o.ost, ost::SetOwner { fid: o.fid, owner }, Bytes::new(), None).await) }
        }))
        .buffered(OBJECT_REQUESTS_IN_FLIGHT_MAX)
        .collect::<Vec<_>>()
        .await;
        for (o, r) in results {
            if let Err(e) = r {
                tracing::warn!(object = %o.fid, ost = o.ost, error = %e, "the OST was not told the file's new owner");
            }
        }
    }

    pub async fn set_quota(&self, who: &Caller, request: QuotaRequest) -> WeftResult<()> {
        match request {
            QuotaRequest::Set { kind, id, change } => self.mdt(who, mdt::QuotaSet { kind, id, change }).await.map(drop),
            QuotaRequest::Delete { kind, id } => self.mdt(who, mdt::QuotaDelete { kind, id }).await,
            QuotaRequest::Grace { kind, block_s, inode_s } => {
                self.mdt(who, mdt::QuotaSetGrace { kind, block_s, inode_s }).await
            }
        }
    }
}
