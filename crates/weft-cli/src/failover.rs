//! `weft failover OST --to ADDR`: moves a failover OST to another of the servers that may
//! serve it, on a live file system (Lustre's admin unmounts the target on one node and
//! mounts it on its failover node; here one command asks the management service). The
//! server serving it stops at its next lease renewal and hands it over; the other opens it
//! and the clients follow the map (weft-server `failover.rs`).

use crate::limits::{FAILOVER_POLL_MS, FAILOVER_WAIT_S};
use crate::param::{ask_management, management, ServersArgs};
use anyhow::{anyhow, bail};
use clap::Args;
use std::time::{Duration, Instant};
use weft_proto::msg::{mgs, ClusterMap, TargetKind};

#[derive(Args)]
pub struct FailoverArgs {
    /// The OST: its name (weft-OST0002) or index (2).
    target: String,
    /// The server to serve it from now on (host:port): one of the servers `weft status`
    /// lists for it.
    #[arg(long, value_name = "ADDR")]
    to: String,
    #[command(flatten)]
    at: ServersArgs,
}

/// The one OST `word` names, checked against the map.
pub(crate) fn one_ost(word: &str, map: &ClusterMap) -> anyhow::Result<u32> {
    let registered = || map.osts().map(|t| t.name(&map.fsname)).collect::<Vec<_>>().join(", ");
    if word.contains("-MDT") {
        bail!("{word}: only OSTs move between servers (a replicated MDT moves with its group's leader)");
    }
    let indices = crate::pool::ost_indices(&[word.to_string()], &map.fsname)?;
    let [index] = indices[..] else {
        bail!("'{word}' names {} OSTs; name one (weft-OST0002 or 2)", indices.len());
    };
    if map.target(TargetKind::Ost, index).is_none() {
        bail!(
            "{} is not registered; the OSTs are: {}",
            weft_proto::msg::target_name(&map.fsname, TargetKind::Ost, index),
            registered()
        );
    }
    Ok(index)
}

pub fn failover(a: FailoverArgs) -> anyhow::Result<()> {
    let (rt, mgs) = management(&a.at)?;
    let fetch = || {
        rt.block_on(weft_rpc::map::fetch_map_from(&mgs, mgs.options().request_timeout))
            .map_err(|e| anyhow!("cannot reach the management service at {}: {}", mgs.list(), e.message))
    };
    let map = fetch()?;
    let index = one_ost(&a.target, &map)?;
    let name = weft_proto::msg::target_name(&map.fsname, TargetKind::Ost, index);
    let from = map.target(TargetKind::Ost, index).map(|t| t.address.clone()).unwrap_or_default();
    ask_management(&rt, &mgs, mgs::MoveTarget { kind: TargetKind::Ost, index, to: a.to.clone() })?;
    // The holder hands it over at its next renewal (every 500 ms): wait for the map to say so.
    let deadline = Instant::now() + Duration::from_secs(FAILOVER_WAIT_S);
    loop {
        let map = fetch()?;
        if map.target(TargetKind::Ost, index).is_some_and(|t| t.address == a.to) {
            println!("{name}: served by {} (was {from})", a.to);
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "{name} did not move to {} within {FAILOVER_WAIT_S} s: its server {from} did not hand it over (cut off from the management service? then it stops serving when its lease runs out, and {} can take it over)",
                a.to,
                a.to
            );
        }
        std::thread::sleep(Duration::from_millis(FAILOVER_POLL_MS));
    }
}
