//! The monitor: in the process that runs the management service, every `monitor_interval_s`
//! (config; 10 s by default, 0 for none) it asks every server process of the map for its
//! usage counters (the Param service's `Usage`: each job's, user's and group's requests and
//! bytes per target, counted since the server started), turns them into what happened in the
//! interval, and records that in the MGS's history: per job, user, group, and per target (the
//! sum of its users). `weft stats` and `weft top` read the history.
//!
//! A counter that went down was reset (the server restarted, or forgot an idle job and saw
//! it again): its whole value is the interval's. A server that does not answer is skipped
//! for the interval and its counters are asked again at the next. The first round of a
//! monitor only reads the counters: what they hold happened before it started (and a
//! replicated MGS's other replicas recorded it), so it is not one interval's. After each
//! interval the decay policies act (see [`crate::decay`]), where the MGS serves (a replica
//! of a replicated MGS runs the monitor, into its own history, while it follows too).
//!
//! Requests of a job or user count as metadata operations only on an MDT (what decay
//! budgets count); bytes come from the OSTs. A target's series counts all its requests.

use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use weft_mgs::history::{Kind, Totals};
use weft_mgs::Mgs;
use weft_proto::msg::param::{Usage, UsageCounters};
use weft_proto::msg::RequestHeader;
use weft_rpc::map::PeerSet;

/// (server, target, kind, job or uid) -> counters at the last scrape
type Seen = HashMap<(String, String, Kind, String), Totals>;

pub(crate) async fn run(mgs: Arc<Mgs>, peers: Arc<PeerSet>, interval: Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seen: Seen = HashMap::new();
    let mut first = true;
    loop {
        tick.tick().await;
        let map = mgs.map();
        let servers = map.servers(None);
        let mut interval_rows: BTreeMap<(Kind, String), Totals> = BTreeMap::new();
        let mut now_seen: Seen = HashMap::new();
        for server in servers {
            let peer = peers.get(&server);
            let header = RequestHeader::default();
            let answer = peer.op(header, 0, Usage {}, Bytes::new(), interval).await;
            let counters: UsageCounters = match answer {
                Ok((counters, _)) => counters,
                Err(e) => {
                    tracing::debug!("monitor: {server} did not answer: {e}");
                    // Keep its last counters, so the next answer is not all counted again.
                    now_seen.extend(seen.iter().filter(|(k, _)| k.0 == server).map(|(k, v)| (k.clone(), *v)));
                    continue;
                }
            };
            for (kind, rows) in
                [(Kind::Job, &counters.jobs), (Kind::User, &counters.users), (Kind::Group, &counters.groups)]
            {
                for row in rows {
                    let now = Totals { ops: row.ops, read_bytes: row.read_bytes, write_bytes: row.write_bytes };
                    let key = (server.clone(), row.target.clone(), kind, row.key.clone());
                    let delta = delta(seen.get(&key).copied(), now);
                    now_seen.insert(key, now);
                    if delta == Totals::default() {
                        continue;
                    }
                    if kind == Kind::User {
                        add(interval_rows.entry((Kind::Target, row.target.clone())).or_default(), delta);
                    }
                    // A job's or user's operations are its metadata operations.
                    let ops = if row.target.contains("-MDT") { delta.ops } else { 0 };
                    add(interval_rows.entry((kind, row.key.clone())).or_default(), Totals { ops, ..delta });
                }
            }
        }
        seen = now_seen;
        if std::mem::take(&mut first) {
            continue;
        }
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let rows: Vec<(Kind, String, Totals)> = interval_rows.into_iter().map(|((k, n), t)| (k, n, t)).collect();
        if let Err(e) = mgs.record_usage(t, interval.as_secs().max(1), rows).await {
            tracing::warn!("monitor: {e}");
        }
        // The decay policies act on what was just recorded.
        if mgs.serves() && (!mgs.map().decay.is_empty() || !mgs.decay().limits.is_empty()) {
            crate::decay::enforce(&mgs, &peers).await;
        }
    }
}

/// What happened between two readings of a counter.
fn delta(before: Option<Totals>, now: Totals) -> Totals {
    match before {
        Some(b) if now.ops >= b.ops && now.read_bytes >= b.read_bytes && now.write_bytes >= b.write_bytes => Totals {
            ops: now.ops - b.ops,
            read_bytes: now.read_bytes - b.read_bytes,
            write_bytes: now.write_bytes - b.write_bytes,
        },
        // New, or reset since.
        _ => now,
    }
}

fn add(sum: &mut Totals, d: Totals) {
    sum.ops += d.ops;
    sum.read_bytes += d.read_bytes;
    sum.write_bytes += d.write_bytes;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_between_readings_and_after_a_reset() {
        let t = |ops, r, w| Totals { ops, read_bytes: r, write_bytes: w };
        assert_eq!(delta(None, t(5, 10, 20)), t(5, 10, 20), "new: all of it");
        assert_eq!(delta(Some(t(5, 10, 20)), t(7, 10, 50)), t(2, 0, 30));
        assert_eq!(delta(Some(t(5, 10, 20)), t(1, 0, 4)), t(1, 0, 4), "reset: the new value");
    }
}
