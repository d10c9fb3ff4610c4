//! `weft del-ost [--dryrun] --target FS-OSTxxxx`: takes an OST out of the cluster map of a
//! live file system, as Lustre's `lctl del_ost` (2.15) takes it out of the configuration
//! logs. Refused while any MDT still has objects there, naming how many: the MDS counts
//! them (`osp.FS-OSTxxxx-osc-MDTxxxx.objects`, a pass over its inodes and its destroy queue)
//! and the OST must be drained on every MDT first (`max_create_count=0`), so that no new
//! object lands there between the count and the removal. The way to empty it:
//!
//! ```sh
//! weft set-param osp.weft-OST0003-osc-MDT*.max_create_count=0   # no new objects there
//! weft find /mnt/weft --ost 3 | weft migrate                      # files moved off it
//! weft del-ost --target weft-OST0003                              # out of the map
//! ```

use crate::param::{ask_management, caller, management, ServersArgs};
use anyhow::{anyhow, bail};
use clap::Args;
use std::time::Duration;
use weft_proto::msg::param::GetParam;
use weft_proto::msg::{mgs, target_name, TargetKind};
use weft_rpc::Peer;

#[derive(Args)]
pub struct DelOstArgs {
    /// The OST: its name (weft-OST0003) or index (3).
    #[arg(long, value_name = "FSNAME-OSTxxxx")]
    target: String,
    /// Check and say what would be done, changing nothing.
    #[arg(long)]
    dryrun: bool,
    #[command(flatten)]
    at: ServersArgs,
}

/// How long one MDS may take to count what it has on the OST (it reads every inode).
const COUNT_TIMEOUT_S: u64 = 120;

/// (files, objects, being destroyed) from `files=F objects=O destroying=D`.
fn parse_counts(text: &str) -> Option<(u64, u64, u64)> {
    let mut n = [None; 3];
    for word in text.split_whitespace() {
        let (k, v) = word.split_once('=')?;
        let slot = ["files", "objects", "destroying"].iter().position(|w| *w == k)?;
        n[slot] = v.parse().ok();
    }
    Some((n[0]?, n[1]?, n[2]?))
}

pub fn del_ost(a: DelOstArgs) -> anyhow::Result<()> {
    let (rt, mgs) = management(&a.at)?;
    let map = rt
        .block_on(weft_rpc::map::fetch_map_from(&mgs, mgs.options().request_timeout))
        .map_err(|e| anyhow!("cannot reach the management service at {}: {}", mgs.list(), e.message))?;
    let index = crate::failover::one_ost(&a.target, &map)?;
    let name = target_name(&map.fsname, TargetKind::Ost, index);
    let opts = weft_rpc::PeerOptions { request_timeout: Duration::from_secs(COUNT_TIMEOUT_S), ..mgs.options().clone() };
    for mdt in map.mdts() {
        let mdt_name = target_name(&map.fsname, TargetKind::Mdt, mdt.index);
        let osp = format!("osp.{name}-osc-{}", &mdt_name[map.fsname.len() + 1..]);
        let peer = Peer::new(mdt.address.clone(), opts.clone());
        let ask = |leaf: &str| -> anyhow::Result<String> {
            let op = GetParam { pattern: format!("{osp}.{leaf}") };
            let timeout = Duration::from_secs(COUNT_TIMEOUT_S);
            let (values, _) = rt.block_on(peer.op(caller(), 0, op, bytes::Bytes::new(), timeout)).map_err(|e| {
                anyhow!("{mdt_name} at {} cannot say what it has on {name}: {}", mdt.address, e.message)
            })?;
            values.0.into_iter().next().map(|v| v.value).ok_or_else(|| anyhow!("{mdt_name} does not know {name}"))
        };
        if ask("max_create_count")?.trim() != "0" {
            bail!(
                "{name} still takes new objects from {mdt_name}: drain it first \
                 (weft set-param {osp}.max_create_count=0), then empty it (weft find MNT --ost {index} | weft migrate)"
            );
        }
        let counted = ask("objects")?;
        let (files, objects, destroying) =
            parse_counts(&counted).ok_or_else(|| anyhow!("{mdt_name} answered '{counted}' for {osp}.objects"))?;
        if objects + destroying > 0 {
            bail!(
                "{name} still holds {objects} object(s) of {files} file(s) of {mdt_name}, and {destroying} being \
                 destroyed: empty it first (weft find MNT --ost {index} | weft migrate) and wait for the destroys"
            );
        }
    }
    if a.dryrun {
        println!("{name} holds no objects and takes no new ones: weft del-ost --target {name} would remove it");
        return Ok(());
    }
    let map = ask_management(&rt, &mgs, mgs::RemoveTarget { kind: TargetKind::Ost, index })?;
    println!("{name} removed from the cluster map (version {})", map.version);
    println!("its server still serves it until {index} leaves that server's [oss] osts and it restarts");
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_are_read_from_the_mds_answer() {
        assert_eq!(super::parse_counts("files=2 objects=3 destroying=1"), Some((2, 3, 1)));
        assert_eq!(super::parse_counts("files=2 objects=3"), None);
        assert_eq!(super::parse_counts("files=x objects=3 destroying=1"), None);
    }
}
