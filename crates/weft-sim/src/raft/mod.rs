//! The replicated MDT's simulation: three server "processes" of one test process, each a
//! [`weft_server::RunningServer`] holding a replica of MDT 0 (`[mds] replicas`), a fourth
//! with an OST and, by the seed, either a single MGS or none (the MGS is then replicated
//! too, `[mgs] replicas`, a replica beside each of the MDT's, so that a kill or a partition
//! may take both leaders at once), and the network simulation's clients and workload
//! ([`crate::net`]: creates, writes under extent locks, reads, renames, unlinks, chmods, by
//! two clients whose every message goes through the seeded [`SimWire`], which drops, loses
//! replies of, duplicates, delays and holds them). The seed also chooses, on the servers:
//!
//! * a **kill of the leader**, some milliseconds into an operation (a request may be at the
//!   leader then): the wire cuts every Raft message from and to it at once, and
//!   its RunningServer is shut down (what it wrote is on disk, as after a kill -9, whose
//!   page cache survives); some operations later it is started again from its data
//!   directory, and catches up;
//! * a **partition** of the leader or of a follower from the other replicas, some
//!   milliseconds into an operation (Raft messages cut both ways; the clients and the MGS
//!   still reach it), healed some operations later;
//! * on a third of the seeds, a **second kill** of the leader the operation after the heal
//!   (while the healed replica catches up, or, an old leader, drops what it logged alone),
//!   restarted a few operations later.
//!
//! What is checked, besides every check of [`crate::net`] (every read is the bytes last
//! acknowledged; an operation that failed is wholly done or not at all, as a client no fault
//! touches sees it; no error a fault does not explain; at the end every name, mode and byte
//! is what was acknowledged and no other name exists):
//!
//! * **no stale read**: while a partitioned old leader is alive, after each operation, every
//!   name the workload uses is looked up at that old leader directly; an answer is either a
//!   refusal or exactly what was acknowledged (the name with its FID and mode, or none);
//! * **the replicas agree**: at the end, once every replica applied what the group
//!   committed, the three are stopped and each one's whole store (`Replica::snapshot`, one
//!   canonical dump of every row) must be the same.
//!
//! # Why a real clock
//!
//! The network simulation runs on tokio's paused clock; this one cannot. A replicated MDT's
//! leader answers reads under a lease measured with `std::time::Instant` (weft-mds
//! `replica::Lease`), while openraft's election timers run on tokio's clock: on a paused
//! clock, which jumps seconds whenever the runtime waits for a thread (the log's syncs, the
//! MDS's writer, `spawn_blocking`), a partitioned old leader's lease would still be running
//! in real time long after the others elected a new leader in virtual time, and the check
//! would find stale reads no real cluster can make. So the runtime's clock is real (a
//! multi-thread runtime; the wire does not hold the clock still, [`SimWire::on_real_clock`]),
//! and the group's timings are its defaults: a failover costs a few real seconds, which is
//! why the CI form plays a handful of seeds. The seed then fixes the workload and the
//! faults, not every interleaving: a failing seed may need a few runs to show again.

mod cluster;

use crate::net::wire::{Counts, SimWire};
use crate::net::{Settings, Sim};
use crate::rng::Rng;
use bytes::Bytes;
use cluster::{Cluster, Watch, REPLICAS, WATCH_MS};
use std::sync::Arc;
use std::time::Duration;
use weft_proto::msg::{mdt, RequestHeader};
use weft_proto::ErrorCode;
use weft_rpc::{Network, Peer, PeerOptions};

/// Operations of one seed's workload.
pub const WORKLOAD_OPS: usize = 36;
/// The clients' request timeout, one of these two by the seed: the longest is longer
/// than a failover (the lease, an election, the new leader's registration: 3 to 6 s with
/// the default timings), so that operations carry through it; the shortest is shorter, so
/// that some fail and the checking client looks at what they left.
pub const REQUEST_TIMEOUT_MS_MIN: u64 = 4_000;
pub const REQUEST_TIMEOUT_MS_MAX: u64 = 20_000;
/// The checking client's: it looks through every fault.
const CHECKER_REQUEST_TIMEOUT_MS: u64 = 60_000;
/// How long a kill or a partition lasts, in operations of the workload.
const FAULT_OPS_MIN: u64 = 4;
const FAULT_OPS_MAX: u64 = 9;
/// Longest a kill or a partition comes into its operation (most operations take tens of
/// milliseconds).
const FAULT_DELAY_MS_MAX: u64 = 40;
/// Shortest partition: a follower's operations go on without it, so a partition of a few
/// operations may last only milliseconds; this is two of the longest election timeouts, so
/// that a partitioned follower stands for election alone (raising its term) before it
/// comes back.
const PARTITION_MS_MIN: u64 = 2 * weft_raft::limits::ELECTION_TIMEOUT_MS_MAX_DEFAULT;
/// How long one stale-read probe of an old leader may take.
const PROBE_TIMEOUT_MS: u64 = 2_000;
/// Where the servers' data goes when it is a directory (a tmpfs on Linux).
const SHM_DIR: &str = "/dev/shm";

/// What one seed played.
#[derive(Debug, Clone, Default)]
pub struct RaftReport {
    pub seed: u64,
    /// The MGS was replicated beside the MDT (killed and partitioned with it).
    pub mgs_replicated: bool,
    pub ops: usize,
    pub acknowledged: usize,
    pub failed_by_network: usize,
    pub kills: usize,
    pub partitions: usize,
    /// Times the serving leader changed to another replica.
    pub failovers: usize,
    /// The longest time no replica the others reach served the MDT.
    pub longest_without_leader: Duration,
    /// Lookups at a partitioned old leader: answered (each as acknowledged), refused.
    pub probes_answered: usize,
    pub probes_refused: usize,
    pub counts: Counts,
    pub log: String,
}

/// The sum of many seeds' reports, as one line.
#[derive(Debug, Clone, Default)]
pub struct RaftSummary {
    pub seeds: usize,
    pub mgs_replicated: usize,
    pub ops: usize,
    pub acknowledged: usize,
    pub failed_by_network: usize,
    pub kills: usize,
    pub partitions: usize,
    pub failovers: usize,
    pub longest_without_leader: Duration,
    /// The seed of the longest time without a leader.
    pub longest_seed: u64,
    pub probes_answered: usize,
    pub probes_refused: usize,
    pub counts: Counts,
}

impl RaftSummary {
    pub fn add(&mut self, r: &RaftReport) {
        self.seeds += 1;
        self.mgs_replicated += usize::from(r.mgs_replicated);
        self.ops += r.ops;
        self.acknowledged += r.acknowledged;
        self.failed_by_network += r.failed_by_network;
        self.kills += r.kills;
        self.partitions += r.partitions;
        self.failovers += r.failovers;
        if r.longest_without_leader >= self.longest_without_leader {
            self.longest_without_leader = r.longest_without_leader;
            self.longest_seed = r.seed;
        }
        self.probes_answered += r.probes_answered;
        self.probes_refused += r.probes_refused;
        self.counts += r.counts;
    }
}

impl std::fmt::Display for RaftSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.counts;
        write!(
            f,
            "replicated MDT, {} seeds ({} with a replicated MGS beside it): {} kills of the leader, {} partitions, {} failovers, longest without a \
             leader {} ms (seed {}); {} operations ({} acknowledged, {} failed by the network and looked at); stale-read \
             probes of partitioned old leaders: {} answered as acknowledged, {} refused; {} raft messages cut; \
             client links: {} requests, {} dropped, {} replies lost, {} duplicated, {} held",
            self.seeds,
            self.mgs_replicated,
            self.kills,
            self.partitions,
            self.failovers,
            self.longest_without_leader.as_millis(),
            self.longest_seed,
            self.ops,
            self.acknowledged,
            self.failed_by_network,
            self.probes_answered,
            self.probes_refused,
            c.raft_cut,
            c.requests,
            c.dropped,
            c.replies_lost,
            c.duplicated,
            c.held,
        )
    }
}

/// The servers' faults of one seed, by operation number (pure: from the seed alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plan {
    kill_at: usize,
    restart_at: usize,
    partition_at: usize,
    heal_at: usize,
    /// The leader is partitioned (else a follower).
    partition_leader: bool,
    /// The clients' request timeout.
    request_timeout_ms: u64,
    /// The MGS is replicated too, a replica beside each of the MDT's (else a single MGS
    /// beside the OST).
    mgs_replicated: bool,
    /// How far into its operation the kill, and the partition, come (an operation that
    /// ends sooner has them at its end): a request may be at the leader when it goes.
    kill_delay_ms: u64,
    partition_delay_ms: u64,
    /// A second kill of the leader, the operation after the heal (while the healed replica
    /// catches up, or, an old leader, drops what it logged alone), and its restart.
    second_kill: Option<(usize, usize)>,
}

/// One fault of a [`Plan`] on the servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    Kill,
    Restart,
    Partition,
    Heal,
}

impl Plan {
    /// The faults of operation `op`, each with how far into it it comes, soonest first.
    fn events_at(&self, op: usize) -> Vec<(Duration, Event)> {
        let mut events = Vec::new();
        let ms = Duration::from_millis;
        if op == self.kill_at {
            events.push((ms(self.kill_delay_ms), Event::Kill));
        }
        if op == self.restart_at {
            events.push((Duration::ZERO, Event::Restart));
        }
        if op == self.partition_at {
            events.push((ms(self.partition_delay_ms), Event::Partition));
        }
        if op == self.heal_at {
            events.push((Duration::ZERO, Event::Heal));
        }
        if let Some((kill_at, restart_at)) = self.second_kill {
            if op == kill_at {
                events.push((ms(self.kill_delay_ms), Event::Kill));
            }
            if op == restart_at {
                events.push((Duration::ZERO, Event::Restart));
            }
        }
        events.sort_by_key(|(at, _)| *at);
        events
    }
}

impl Plan {
    fn of(seed: u64) -> Plan {
        let mut rng = Rng(seed ^ 0x7af7_0c1d);
        let mut after = |from: usize, min: u64, max: u64| from + rng.between(min, max) as usize;
        let kill_at = after(0, 2, 6);
        let restart_at = after(kill_at, FAULT_OPS_MIN, FAULT_OPS_MAX);
        let partition_at = after(restart_at, 2, 5);
        let heal_at = after(partition_at, FAULT_OPS_MIN, FAULT_OPS_MAX);
        let partition_leader = rng.below(3) != 0;
        let request_timeout_ms = [REQUEST_TIMEOUT_MS_MIN, REQUEST_TIMEOUT_MS_MAX][rng.below(2)];
        let mgs_replicated = rng.below(2) == 0;
        let kill_delay_ms = rng.between(0, FAULT_DELAY_MS_MAX);
        let partition_delay_ms = rng.between(0, FAULT_DELAY_MS_MAX);
        let second_kill = (rng.below(3) == 0).then(|| {
            let kill_at = heal_at + 1;
            (kill_at, kill_at + rng.between(2, 4) as usize)
        });
        let plan = Plan {
            kill_at,
            restart_at,
            partition_at,
            heal_at,
            partition_leader,
            request_timeout_ms,
            mgs_replicated,
            kill_delay_ms,
            partition_delay_ms,
            second_kill,
        };
        let last = second_kill.map_or(heal_at, |(_, restart_at)| restart_at);
        assert!(last < WORKLOAD_OPS, "the faults fit in the workload: {plan:?}");
        plan
    }
}

/// Plays one seed on the current runtime (a multi-thread runtime on a real clock: see the
/// module docs). An error says what went wrong, with the seed's log.
pub async fn run(seed: u64) -> Result<RaftReport, String> {
    let shm = std::path::Path::new(SHM_DIR);
    let mut dir = tempfile::Builder::new();
    dir.prefix("weft-raftsim-");
    let root = if shm.is_dir() { dir.tempdir_in(shm).or_else(|_| dir.tempdir()) } else { dir.tempdir() }
        .map_err(|e| format!("seed {seed}: no temporary directory: {e}"))?;
    let wire = SimWire::on_real_clock(seed);
    let network = Network::with_wire(Arc::new(wire.clone()));
    let plan = Plan::of(seed);
    wire.note(format!("plan: {plan:?}"));
    let mut cluster = match Cluster::start(root.path(), &network, wire.clone(), plan.mgs_replicated).await {
        Ok(c) => c,
        Err(e) => return Err(format!("seed {seed}: {e}")),
    };
    let result = play(seed, plan, &mut cluster, &network, &wire).await;
    cluster.shutdown().await;
    let result = match result {
        Ok(report) => cluster.replicas_agree(root.path()).map(|()| {
            wire.note("the replicas' stores are the same".into());
            report
        }),
        Err(e) => Err(e),
    };
    result
        .map(|mut r| {
            r.log = wire.log();
            r
        })
        .map_err(|e| format!("seed {seed}: {e}\n--- log of seed {seed} ---\n{}", wire.log()))
}

async fn play(
    seed: u64,
    plan: Plan,
    cluster: &mut Cluster,
    network: &Arc<Network>,
    wire: &SimWire,
) -> Result<RaftReport, String> {
    let settings = Settings {
        request_timeout_ms: plan.request_timeout_ms,
        checker_request_timeout_ms: CHECKER_REQUEST_TIMEOUT_MS,
        partition_percent: 0,
        pause_percent: 0,
    };
    let mut sim = Sim::start(seed, cluster.mgs_address.clone(), network, wire.clone(), settings).await?;
    let mut report = RaftReport { seed, mgs_replicated: plan.mgs_replicated, ..RaftReport::default() };
    let mut watch = Watch::new(cluster.serving());
    let mut faults = Faults::default();
    for op in 0..WORKLOAD_OPS {
        let mut due = plan.events_at(op);
        watch.observe(cluster);
        let started = tokio::time::Instant::now();
        {
            let step = sim.step();
            tokio::pin!(step);
            loop {
                let next = due.first().map(|(at, _)| started + *at);
                tokio::select! {
                    done = &mut step => { done?; break }
                    _ = tokio::time::sleep(Duration::from_millis(WATCH_MS)) => watch.observe(cluster),
                    _ = tokio::time::sleep_until(next.unwrap_or(started)), if next.is_some() => {
                        let (_, event) = due.remove(0);
                        faults.apply(event, plan, cluster, &mut watch, &mut report).await?;
                    }
                }
            }
        }
        for (_, event) in due {
            faults.apply(event, plan, cluster, &mut watch, &mut report).await?;
        }
        if let Some((old, true)) = faults.partitioned {
            probe_old_leader(&sim, cluster, network, old, &mut report).await?;
        }
    }
    // Everything back, one leader serving, every replica caught up.
    for event in [Event::Restart, Event::Heal] {
        faults.apply(event, plan, cluster, &mut watch, &mut report).await?;
    }
    sim.finish().await?;
    cluster.wait_caught_up(&mut watch).await?;
    watch.observe(cluster);
    report.ops = sim.ops;
    report.acknowledged = sim.acknowledged;
    report.failed_by_network = sim.failed;
    report.failovers = watch.failovers;
    report.longest_without_leader = watch.longest;
    report.counts = wire.counts();
    sim.note(format!("{} failovers; longest without a leader {} ms", watch.failovers, watch.longest.as_millis()));
    Ok(report)
}

/// The servers' faults in force.
#[derive(Default)]
struct Faults {
    killed: Option<usize>,
    /// The replica partitioned, and whether it led.
    partitioned: Option<(usize, bool)>,
    /// When the partition began.
    partitioned_at: Option<tokio::time::Instant>,
}

impl Faults {
    async fn apply(
        &mut self,
        event: Event,
        plan: Plan,
        cluster: &mut Cluster,
        watch: &mut Watch,
        report: &mut RaftReport,
    ) -> Result<(), String> {
        let wire = cluster.wire.clone();
        match event {
            Event::Kill => {
                if let Some(i) = cluster.serving() {
                    let role = cluster.mgs_role(i);
                    wire.note(format!("KILL replica {i} (the MDT's leader, {}){role}", cluster.addresses[i]));
                    // The MDT has no leader from the kill on, while the server shuts down too.
                    watch.lost();
                    cluster.kill(i).await;
                    self.killed = Some(i);
                    report.kills += 1;
                }
            }
            Event::Restart => {
                if let Some(i) = self.killed.take() {
                    wire.note(format!("RESTART replica {i} from its data directory"));
                    cluster.restart(i).await?;
                }
            }
            Event::Partition => {
                let leader = cluster.serving();
                let target = match (plan.partition_leader, leader) {
                    (true, Some(i)) => Some(i),
                    (_, Some(i)) => Some((i + 1 + plan.partition_at % 2) % REPLICAS),
                    (_, None) => None,
                };
                if let Some(i) = target {
                    let was_leader = Some(i) == leader;
                    wire.note(format!(
                        "PARTITION replica {i} ({}{}) from the others",
                        if was_leader { "the MDT's leader" } else { "an MDT follower" },
                        cluster.mgs_role(i)
                    ));
                    wire.isolate(&cluster.addresses[i]);
                    cluster.isolated = Some(i);
                    self.partitioned = Some((i, was_leader));
                    self.partitioned_at = Some(tokio::time::Instant::now());
                    report.partitions += 1;
                }
            }
            Event::Heal => {
                if let Some((i, _)) = self.partitioned.take() {
                    // Long enough for a partitioned follower to stand for election alone.
                    if let Some(at) = self.partitioned_at.take() {
                        tokio::time::sleep_until(at + Duration::from_millis(PARTITION_MS_MIN)).await;
                    }
                    wire.note(format!("HEAL the partition of replica {i}"));
                    wire.rejoin(&cluster.addresses[i]);
                    cluster.isolated = None;
                }
            }
        }
        Ok(())
    }
}

/// Looks up every name of the workload at the partitioned old leader directly: each answer
/// must be what was acknowledged (a refusal is fine).
async fn probe_old_leader(
    sim: &Sim,
    cluster: &Cluster,
    network: &Arc<Network>,
    old: usize,
    report: &mut RaftReport,
) -> Result<(), String> {
    if cluster.replicas[old].is_none() {
        return Ok(());
    }
    let options = PeerOptions {
        network: Some(network.clone()),
        request_timeout: Duration::from_millis(PROBE_TIMEOUT_MS),
        ..PeerOptions::default()
    };
    let peer = Peer::new(cluster.addresses[old].clone(), options);
    let acknowledged = sim.acknowledged_names();
    for path in crate::net::all_paths() {
        let (parent, name) = sim.place(&path);
        let op = mdt::Lookup { parent, name: name.into_bytes() };
        let timeout = Duration::from_millis(PROBE_TIMEOUT_MS);
        let answer = peer.op(RequestHeader::default(), 0, op, Bytes::new(), timeout).await;
        let expected = acknowledged.get(&path);
        let stale = match (&answer, expected) {
            (Ok((inode, _)), Some((fid, mode))) => inode.attr.fid != *fid || inode.attr.mode & 0o7777 != *mode,
            (Ok(_), None) => true,
            (Err(e), Some(_)) if e.code == ErrorCode::NotFound => true,
            (Err(e), None) if e.code == ErrorCode::NotFound => false,
            (Err(_), _) => {
                report.probes_refused += 1;
                continue;
            }
        };
        if stale {
            let seen = match &answer {
                Ok((inode, _)) => format!("{} mode {:o}", inode.attr.fid, inode.attr.mode & 0o7777),
                Err(e) => format!("{:?} ({})", e.code, e.message),
            };
            return Err(format!(
                "a stale read: the partitioned old leader (replica {old}) answered a lookup of {path} with {seen}, \
                 but what was acknowledged is {}",
                match expected {
                    Some((fid, mode)) => format!("{fid} mode {mode:o}"),
                    None => "no such name".into(),
                }
            ));
        }
        report.probes_answered += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_plans_a_kill_then_a_partition_each_undone_within_the_workload() {
        let mut leader_partitions = 0;
        for seed in 0..10_000 {
            let p = Plan::of(seed);
            assert!(p.kill_at < p.restart_at && p.restart_at < p.partition_at, "{p:?}");
            assert!(p.partition_at < p.heal_at && p.heal_at < WORKLOAD_OPS, "{p:?}");
            if let Some((kill_at, restart_at)) = p.second_kill {
                assert!(p.heal_at < kill_at && kill_at < restart_at && restart_at < WORKLOAD_OPS, "{p:?}");
            }
            assert_eq!(p, Plan::of(seed), "a seed plans the same faults every time");
            leader_partitions += usize::from(p.partition_leader);
        }
        // Both kinds of partition are played, the leader's more often.
        assert!((5_000..8_000).contains(&leader_partitions), "{leader_partitions} of 10000");
    }
}
