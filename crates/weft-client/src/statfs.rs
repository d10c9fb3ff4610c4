//! Space and inode counts: per target (for `weft df`) and summed (statfs(2) on the mount).

use crate::limits::OBJECT_REQUESTS_IN_FLIGHT_MAX;
use crate::Client;
use bytes::Bytes;
use futures::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};
use weft_proto::msg::{mdt, ost, target_name, Caller, StatfsInfo, TargetKind, TargetState};
use weft_proto::{WeftError, WeftResult};

/// One target's counts, or why there are none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetStatfs {
    /// Lustre's name: `weft-OST0001`.
    pub name: String,
    pub kind: TargetKind,
    pub index: u32,
    /// Where the target is served, as the map says.
    pub address: String,
    /// As the map says.
    pub state: TargetState,
    pub statfs: Option<StatfsInfo>,
    /// Why `statfs` is missing: the target is down or did not answer.
    pub error: Option<String>,
    /// An OST an MDS places no new objects on (`osp.*.max_create_count=0`): Lustre's `N`.
    #[serde(default)]
    pub no_create: bool,
    /// False for an OST deactivated on this mount (`osc.*.active=0`): Lustre's "inactive
    /// device".
    #[serde(default = "active_default")]
    pub active: bool,
}

fn active_default() -> bool {
    true
}

impl Client {
    /// Every target's counts, MDTs first, then OSTs, each by index. A target that is down
    /// or does not answer within `connect_timeout` is reported with its error; it does not
    /// fail the call.
    pub async fn statfs_targets(&self) -> WeftResult<Vec<TargetStatfs>> {
        self.statfs_targets_page(0, usize::MAX).await
    }

    /// As [`Client::statfs_targets`], for the `count` targets from position `from` in that
    /// order only: `weft df` reads a file system of a thousand OSTs a page at a time (an
    /// answer through an extended attribute holds 64 KiB), asking each page's targets only.
    pub async fn statfs_targets_page(&self, from: usize, count: usize) -> WeftResult<Vec<TargetStatfs>> {
        let map = self.map();
        let fsname = map.fsname.as_str();
        // Owned rows into the closure: a closure over borrowed items makes the future not
        // provably Send (rustc's higher-ranked lifetime limitation).
        let mut targets = map.targets.clone();
        targets.sort_by_key(|t| (t.kind, t.index));
        let targets: Vec<_> = targets.into_iter().skip(from).take(count).collect();
        let drained =
            if targets.iter().any(|t| t.kind == TargetKind::Ost) { self.drained_osts().await } else { Vec::new() };
        let drained = &drained;
        let results = stream::iter(targets.into_iter().map(|t| async move {
            let ost = t.kind == TargetKind::Ost;
            let mut row = TargetStatfs {
                name: target_name(fsname, t.kind, t.index),
                kind: t.kind,
                index: t.index,
                address: t.address.clone(),
                state: t.state,
                statfs: None,
                error: None,
                no_create: ost && drained.binary_search(&t.index).is_ok(),
                active: !ost || self.inactive.is_active(t.index),
            };
            if !row.active {
                row.error = Some("inactive device".to_string());
                return row;
            }
            if t.state == TargetState::Down {
                row.error = Some("down (as the management service reports)".to_string());
                return row;
            }
            match self.target_statfs(t.kind, t.index).await {
                Ok(info) => row.statfs = Some(info),
                Err(e) => row.error = Some(e.message),
            }
            row
        }))
        .buffered(OBJECT_REQUESTS_IN_FLIGHT_MAX)
        .collect()
        .await;
        Ok(results)
    }

    /// The OSTs some MDT places no new objects on (its `osp.*.max_create_count` is 0),
    /// ascending, as their MDS servers answer; an MDS that does not answer counts none.
    async fn drained_osts(&self) -> Vec<u32> {
        let map = self.map();
        let prefix = format!("osp.{}-OST", map.fsname);
        let mut out = Vec::new();
        let mdts: std::collections::BTreeSet<u32> = map.mdts().map(|t| t.index).collect();
        for mdt in mdts {
            let Ok((peer, _)) = self.target_peer(TargetKind::Mdt, mdt).await else { continue };
            let op = weft_proto::msg::param::GetParam { pattern: "osp.*.max_create_count".into() };
            let header = self.header(&Caller::root());
            let Ok((values, _)) = peer.op(header, 0, op, Bytes::new(), self.config.connect_timeout).await else {
                continue;
            };
            for v in values.0.iter().filter(|v| v.value.trim() == "0") {
                let hex = v.name.strip_prefix(&prefix).and_then(|rest| rest.split('-').next());
                out.extend(hex.and_then(|h| u32::from_str_radix(h, 16).ok()));
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    async fn target_statfs(&self, kind: TargetKind, index: u32) -> WeftResult<StatfsInfo> {
        // Within connect_timeout, not the request timeout: a silent target is reported as
        // such instead of holding up `weft df` for the others.
        let timeout = Some(self.config.connect_timeout);
        let root = Caller::root();
        match kind {
            TargetKind::Mdt => self.call(&root, index, mdt::Statfs {}, Bytes::new(), timeout).await.map(|(s, _)| s),
            TargetKind::Ost => self.call(&root, index, ost::Statfs {}, Bytes::new(), timeout).await.map(|(s, _)| s),
        }
    }

    /// The file system's counts: blocks from the OSTs (in the first OST's block size),
    /// files from the MDTs. Targets that do not answer are left out; fails only when no
    /// target answered.
    pub async fn statfs(&self) -> WeftResult<StatfsInfo> {
        let rows = self.statfs_targets().await?;
        sum_statfs(&rows).ok_or_else(|| {
            let why = rows.iter().find_map(|r| r.error.clone()).unwrap_or_else(|| "the map names no targets".into());
            WeftError::io(format!("no target of the file system answered statfs: {why}"))
        })
    }
}

/// Sums the rows that have counts; `None` when none has.
pub(crate) fn sum_statfs(rows: &[TargetStatfs]) -> Option<StatfsInfo> {
    let osts: Vec<&StatfsInfo> =
        rows.iter().filter(|r| r.kind == TargetKind::Ost).filter_map(|r| r.statfs.as_ref()).collect();
    let mdts: Vec<&StatfsInfo> =
        rows.iter().filter(|r| r.kind == TargetKind::Mdt).filter_map(|r| r.statfs.as_ref()).collect();
    if osts.is_empty() && mdts.is_empty() {
        return None;
    }
    let bsize = osts.first().or(mdts.first()).map(|s| s.bsize).filter(|b| *b > 0).unwrap_or(4096);
    // Convert each OST's blocks into the common block size through bytes.
    let in_blocks = |blocks: u64, of: u32| -> u64 { ((blocks as u128 * of.max(1) as u128) / bsize as u128) as u64 };
    let mut sum = StatfsInfo { bsize, ..StatfsInfo::default() };
    for s in &osts {
        sum.blocks += in_blocks(s.blocks, s.bsize);
        sum.bfree += in_blocks(s.bfree, s.bsize);
        sum.bavail += in_blocks(s.bavail, s.bsize);
    }
    for s in &mdts {
        sum.files += s.files;
        sum.ffree += s.ffree;
    }
    Some(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(kind: TargetKind, index: u32, statfs: Option<StatfsInfo>) -> TargetStatfs {
        TargetStatfs {
            name: target_name("weft", kind, index),
            kind,
            index,
            address: "x:1".into(),
            state: TargetState::Up,
            error: statfs.is_none().then(|| "no answer".to_string()),
            statfs,
            no_create: false,
            active: true,
        }
    }

    #[test]
    fn sums_blocks_from_osts_in_one_block_size_and_files_from_mdts() {
        let ost_a = StatfsInfo { bsize: 4096, blocks: 100, bfree: 50, bavail: 40, files: 9, ffree: 9 };
        let ost_b = StatfsInfo { bsize: 1024, blocks: 400, bfree: 400, bavail: 400, files: 9, ffree: 9 };
        let mdt = StatfsInfo { bsize: 4096, blocks: 7, bfree: 7, bavail: 7, files: 1000, ffree: 990 };
        let rows = vec![
            row(TargetKind::Mdt, 0, Some(mdt)),
            row(TargetKind::Ost, 0, Some(ost_a)),
            row(TargetKind::Ost, 7, Some(ost_b)),
            row(TargetKind::Ost, 9, None),
        ];
        let sum = sum_statfs(&rows).unwrap();
        assert_eq!(sum, StatfsInfo { bsize: 4096, blocks: 200, bfree: 150, bavail: 140, files: 1000, ffree: 990 });
        assert_eq!(sum_statfs(&[row(TargetKind::Ost, 1, None)]), None);
        assert_eq!(rows[2].name, "weft-OST0007");
    }
}
