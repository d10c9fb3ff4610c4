//! The simulation by seed of changes over two MDTs with kills -9 of either MDS (issue 35):
//! two MDSs in one process (MDT0 and MDT1, [`cluster`]), each over storage of its own with
//! a fault plan of its own, and with a lock service. A seed plays one to three rounds. A round is a workload the
//! seed chooses ([`workload`]) of changes that cross MDTs (a directory made on the other
//! MDT or striped over both, files made in directories of either, renames of files between
//! directories of different MDTs, replacing a file or not, hard links across MDTs, some
//! onto a taken name, unlinks of remote names, rmdir of remote and striped directories,
//! some not empty, migrations of files and directories to the other MDT), each request
//! sent to the MDT of its name (a striped directory's stripe that the name's hash picks, as
//! the client routes it), with up to two storage faults on each MDT; then a kill of one
//! MDS, between two changes or inside one (at one of its next storage operations: a
//! participant between its prepare and the commit, a coordinator before or after its
//! commit, a commit being told). The killed MDS starts again over its disks (a process
//! crash: what it wrote, durable or not, is there). When it finds changes to resolve, a
//! few more changes may come before they are resolved (a step waiting for its outcome may
//! refuse them), and either MDS may be killed again while they are resolved. Then the
//! namespace, walked from the root over both MDTs, must be whole ([`check`]): every name
//! leads to an inode, each file's link count is its names, no name twice, no inode without
//! a name on either MDT; and it must be the namespace after the acknowledged changes, a
//! refused one having changed nothing and the one a kill cut short either whole or absent.

mod check;
mod cluster;
mod workload;

use crate::rng::Rng;
use check::{Entry, Names};
use cluster::{Cluster, MDTS};
use std::fmt::Write as _;
use weft_proto::dirstripe::DirStripes;
use weft_proto::faults::Fault;
use weft_proto::msg::{mdt, FileType, MdtReply, MdtRequest, RequestHeader};
use weft_proto::{ErrorCode, Fid, WeftError};

/// Rounds of a seed, at most: changes, a kill, the check.
const ROUNDS_MAX: usize = 3;
/// Changes of one round, at most.
const WORKLOAD_OPS: usize = 30;
/// How often a restart that finds changes to resolve meets a second kill while it
/// resolves them, at one of the first few storage operations of one MDT.
const RESOLVING_KILL_PERCENT: u64 = 40;
const RESOLVING_OPS_MAX: usize = 4;
/// How often a restart that finds changes to resolve is followed by changes before they
/// are resolved (as clients go on while a participant waits), and how many at most.
const WINDOW_PERCENT: u64 = 60;
const WINDOW_OPS_MAX: usize = 5;
/// A kill inside a change comes at one of this many storage operations from its start.
const INSIDE_OPS_MAX: usize = 6;
/// Storage faults (an operation fails, a write is short) on each MDT before the kill, at
/// most, and the range of storage operations they come in.
const FAULTS_MAX: usize = 2;
const FAULT_OPS: usize = 80;
/// Between changes, how long the participants of the last one may take to hear its
/// outcome before they are made to ask (a storage fault kept it from them).
const QUIET_MS: u64 = 50;
/// A close is sent this many times at most while storage faults fail it.
const CLOSE_TRIES: usize = 4;
/// How long what the kill left may take to resolve once both MDSs run.
const RESOLVE_WAIT_MS_MAX: u64 = 10_000;

/// Where the kill came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kill {
    /// Between two changes.
    Between,
    /// At a storage operation of the change (or of what followed it).
    Inside,
    /// While the MDSs resolve what an earlier kill left (a second kill of a round).
    Resolving,
}

/// What a seed played.
#[derive(Debug, Clone)]
pub struct DneReport {
    pub seed: u64,
    /// Rounds of changes, each ended by a kill and checked after the restart.
    pub rounds: usize,
    /// The kills, in order: the MDT and where.
    pub kills: Vec<(u32, Kill)>,
    pub ops: usize,
    pub acknowledged: usize,
    /// The changes a kill cut short, and whether the restart found each made.
    pub cuts: Vec<(String, bool)>,
    /// What each restart found to resolve: changes with steps prepared, commits untold.
    pub left: Vec<(usize, usize)>,
    /// Storage faults planned before the kills (MDT, operation, fault), and the changes
    /// that met one or were refused (each must have changed nothing).
    pub faults: Vec<(u32, u64, Fault)>,
    pub failed: usize,
    pub log: String,
}

/// One seed's play: the workload over both MDTs, the kill and restart, the check.
pub async fn run_dne(seed: u64) -> Result<DneReport, String> {
    let cluster = Cluster::start().await.map_err(|e| format!("seed {seed}: the MDTs did not start: {e}"))?;
    let mut sim = Sim::new(seed, cluster).await?;
    let result = sim.play().await;
    let report = sim.report();
    sim.cluster.stop().await;
    result.map(|()| report)
}

/// What a change does to the model's names.
#[derive(Debug, Clone)]
enum Effect {
    Add { path: String, kind: FileType, striped: bool },
    Remove { path: String },
    Rename { from: String, to: String },
    Link { from: String, to: String },
    Migrate { path: String },
}

/// The change the kill cut short, and the names if it was made.
struct Cut {
    what: String,
    after: Names,
}

/// One change of the workload: its request, the MDT it goes to, what it does.
struct Change {
    what: String,
    mdt: u32,
    req: MdtRequest,
    effect: Effect,
    /// The error the change must meet (it changes nothing then), if it is one to refuse.
    refused: Option<ErrorCode>,
}

struct Sim {
    seed: u64,
    rng: Rng,
    cluster: Cluster,
    names: Names,
    /// Whether changes are being made after a restart before what the kill left is
    /// resolved.
    in_window: bool,
    /// The stripes of each striped directory, by its id.
    stripes: std::collections::HashMap<u64, DirStripes>,
    next_id: u64,
    request_id: u64,
    made: usize,
    ops: usize,
    acknowledged: usize,
    /// This round's kill: the MDT, where, and before which of its changes.
    victim: u32,
    kill: Kill,
    kill_at: usize,
    round_ops: usize,
    rounds: usize,
    kills: Vec<(u32, Kill)>,
    cut: Option<Cut>,
    cuts: Vec<(String, bool)>,
    left: Vec<(usize, usize)>,
    faults: Vec<(u32, u64, Fault)>,
    failed: usize,
    /// The storage operations each MDT counted when the round started.
    ops_at_start: [u64; 2],
    baseline: check::Baseline,
    log: String,
}

impl Sim {
    async fn new(seed: u64, cluster: Cluster) -> Result<Sim, String> {
        let mut baseline = [0; 2];
        for m in MDTS {
            baseline[m as usize] = check::inodes_used(&cluster, m).await?;
        }
        Ok(Sim {
            seed,
            rng: Rng(seed),
            cluster,
            names: Names::new(),
            stripes: Default::default(),
            in_window: false,
            next_id: 0,
            request_id: 0,
            made: 0,
            ops: 0,
            acknowledged: 0,
            victim: 0,
            kill: Kill::Between,
            kill_at: 0,
            round_ops: 0,
            rounds: 0,
            kills: Vec::new(),
            cut: None,
            cuts: Vec::new(),
            left: Vec::new(),
            faults: Vec::new(),
            failed: 0,
            ops_at_start: [0; 2],
            baseline,
            log: String::new(),
        })
    }

    fn report(&self) -> DneReport {
        DneReport {
            seed: self.seed,
            rounds: self.rounds,
            kills: self.kills.clone(),
            ops: self.ops,
            acknowledged: self.acknowledged,
            cuts: self.cuts.clone(),
            left: self.left.clone(),
            faults: self.faults.clone(),
            failed: self.failed,
            log: self.log.clone(),
        }
    }

    fn note(&mut self, line: impl AsRef<str>) {
        let _ = writeln!(self.log, "{:3} {}", self.ops, line.as_ref());
    }

    fn failed(&self, what: impl AsRef<str>) -> String {
        format!(
            "seed {} (round {}, kill of MDT{} {:?} at its op {}): {}\n{}",
            self.seed,
            self.rounds,
            self.victim,
            self.kill,
            self.kill_at,
            what.as_ref(),
            self.log
        )
    }

    fn header(&mut self) -> RequestHeader {
        self.request_id += 1;
        crate::requests::header(0xd5e, self.request_id)
    }

    async fn play(&mut self) -> Result<(), String> {
        for _ in 0..1 + self.rng.below(ROUNDS_MAX) {
            self.rounds += 1;
            self.victim = MDTS[self.rng.below(MDTS.len())];
            self.kill = if self.rng.chance(30) { Kill::Between } else { Kill::Inside };
            self.kill_at = 1 + self.rng.below(WORKLOAD_OPS);
            self.workload().await?;
            self.restart_and_check().await?;
        }
        Ok(())
    }

    /// Restarts the killed MDS (and perhaps kills one again while what the first kill
    /// left is resolved), then checks the namespace and takes it as the model's.
    async fn restart_and_check(&mut self) -> Result<(), String> {
        let victim = self.victim;
        self.kills.push((victim, self.kill));
        let counted = MDTS.map(|m| self.cluster.plan(m).ops() - self.ops_at_start[m as usize]);
        self.note(format!("kill -9 of MDT{victim} (storage operations {counted:?}), restart"));
        self.cluster.restart(victim).await.map_err(|e| self.failed(format!("the restart: {e}")))?;
        let left = self.cluster.unresolved().map_err(|e| self.failed(e.to_string()))?;
        self.note(format!("left to resolve: {} prepared, {} untold", left.0, left.1));
        self.left.push(left);
        if left != (0, 0) && self.rng.chance(WINDOW_PERCENT) {
            self.in_window = true;
            for _ in 0..1 + self.rng.below(WINDOW_OPS_MAX) {
                self.ops += 1;
                if let Some(change) = self.pick() {
                    self.note("(before the outcomes)");
                    self.apply(change).await?;
                }
            }
            self.in_window = false;
        }
        if left != (0, 0) && self.rng.chance(RESOLVING_KILL_PERCENT) {
            let again = MDTS[self.rng.below(MDTS.len())];
            let plan = self.cluster.plan(again).clone();
            plan.inject(plan.ops() + self.rng.below(RESOLVING_OPS_MAX) as u64, Fault::PowerLoss);
            self.resolve(true).await?;
            self.kills.push((again, Kill::Resolving));
            self.note(format!("kill -9 of MDT{again} while resolving, restart"));
            self.cluster.restart(again).await.map_err(|e| self.failed(format!("the restart: {e}")))?;
        }
        self.resolve(false).await?;
        let found = check::walk_whole(&self.cluster, &self.baseline).await.map_err(|e| self.failed(e))?;
        let cut = self.cut.take();
        match (check::differs(&found, &self.names), cut) {
            (None, cut) => self.cuts.extend(cut.map(|c| (c.what, false))),
            (Some(diff), None) => return Err(self.failed(format!("after the restart: {diff}"))),
            (Some(diff), Some(cut)) => match check::differs(&found, &cut.after) {
                None => {
                    self.names = cut.after;
                    self.cuts.push((cut.what, true));
                }
                Some(made) => {
                    let what = format!("after the restart, {} is half made: unmade, {diff}; made, {made}", cut.what);
                    return Err(self.failed(what));
                }
            },
        }
        // The FIDs of what a cut change made are known now, and a striped directory's stripes.
        for (path, e) in self.names.iter_mut() {
            e.fid = Some(found[path].fid);
        }
        let unknown: Vec<(u64, Fid)> = self
            .names
            .values()
            .filter(|e| e.striped && !self.stripes.contains_key(&e.id))
            .map(|e| (e.id, found_fid(e)))
            .collect();
        for (id, fid) in unknown {
            let info = check::read(&self.cluster, fid.mdt_index(), mdt::Getattr { fid }).await;
            let info = info.map_err(|e| self.failed(format!("getattr of {fid}: {e}")))?;
            self.stripes.insert(id, *info.stripes.ok_or_else(|| self.failed(format!("{fid} has no stripes")))?);
        }
        Ok(())
    }

    /// Until both MDSs hold no step prepared and no commit untold (or, `until_kill`, one
    /// is killed), their tasks woken now and their clocks moved on (rather than waiting
    /// their periods).
    async fn resolve(&mut self, until_kill: bool) -> Result<(), String> {
        let start = std::time::Instant::now();
        loop {
            let left = self.cluster.unresolved().map_err(|e| self.failed(e.to_string()))?;
            if left == (0, 0) || (until_kill && self.cluster.killed().is_some()) {
                return Ok(());
            }
            if start.elapsed() > std::time::Duration::from_millis(RESOLVE_WAIT_MS_MAX) {
                return Err(self.failed(format!("after the restart, {left:?} changes stay prepared or untold")));
            }
            self.cluster.resolve_now();
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// Between changes: until the last one's participants were told (so that the storage
    /// operations of the next start from the same count, seed after seed), or a kill.
    async fn quiesce(&mut self) -> Result<(), String> {
        let start = std::time::Instant::now();
        while self.cluster.killed().is_none() {
            let left = self.cluster.unresolved().map_err(|e| self.failed(e.to_string()))?;
            if left == (0, 0) {
                return Ok(());
            }
            if start.elapsed() > std::time::Duration::from_millis(RESOLVE_WAIT_MS_MAX) {
                return Err(self.failed(format!("with both MDSs up, {left:?} changes stay prepared or untold")));
            }
            // What a storage fault left (an abort or a commit not told) is resolved now.
            if start.elapsed() > std::time::Duration::from_millis(QUIET_MS) {
                self.cluster.resolve_now();
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        Ok(())
    }

    /// Storage faults to come on either MDT, at operations the seed picks.
    fn plan_faults(&mut self) {
        for m in MDTS {
            let plan = self.cluster.plan(m).clone();
            self.ops_at_start[m as usize] = plan.ops();
            for _ in 0..self.rng.below(FAULTS_MAX + 1) {
                let fault = if self.rng.chance(50) { Fault::Fail } else { Fault::ShortWrite };
                let at = self.rng.below(FAULT_OPS) as u64;
                plan.inject(plan.ops() + at, fault);
                self.faults.push((m, at, fault));
            }
        }
    }

    async fn workload(&mut self) -> Result<(), String> {
        self.plan_faults();
        self.round_ops = 0;
        while self.round_ops < WORKLOAD_OPS && self.cluster.killed().is_none() {
            self.round_ops += 1;
            self.ops += 1;
            let plan = self.cluster.plan(self.victim).clone();
            if self.round_ops == self.kill_at {
                match self.kill {
                    Kill::Inside => plan.inject(plan.ops() + self.rng.below(INSIDE_OPS_MAX) as u64, Fault::PowerLoss),
                    _ => {
                        plan.power_off();
                        break;
                    }
                }
            }
            let Some(change) = self.pick() else { continue };
            self.apply(change).await?;
            self.quiesce().await?;
        }
        // A kill planned past the round's end comes at its end.
        self.cluster.plan(self.victim).power_off();
        Ok(())
    }

    /// Sends a change and keeps what it did: acknowledged, in the names; cut short by the
    /// kill, as the names it may have made.
    async fn apply(&mut self, change: Change) -> Result<(), String> {
        let header = self.header();
        let answer = self.cluster.send_request(change.mdt, header, change.req.clone()).await;
        let answer = match answer {
            Ok(_) if change.refused.is_some() => {
                return Err(self.failed(format!("{} was not refused", change.what)));
            }
            Ok(reply) => reply.into_parts().0,
            Err(e) if self.cluster.killed().is_some() => {
                self.note(format!("{}: {e}", change.what));
                let after = match change.refused {
                    Some(_) => self.names.clone(),
                    None => self.applied(&change.effect, None),
                };
                self.cut = Some(Cut { what: change.what, after });
                return Ok(());
            }
            // Refused (by the MDTs, or a storage fault): it changed nothing.
            Err(e) if Some(e.code) == change.refused || from_storage(&e) => {
                self.note(format!("{}: {e}", change.what));
                self.failed += 1;
                return Ok(());
            }
            // In the window before what a kill left is resolved, a step waiting for its
            // outcome may refuse a change (a name or an inode it holds): changed nothing.
            Err(e) if self.in_window => {
                self.note(format!("{}: {e}", change.what));
                self.failed += 1;
                return Ok(());
            }
            Err(e) => return Err(self.failed(format!("{} failed with both MDSs up: {e}", change.what))),
        };
        let fid = answer.inode().map(|i| i.attr.fid);
        self.note(format!("{}{}", change.what, fid.map(|f| format!(" -> {f}")).unwrap_or_default()));
        self.names = self.applied(&change.effect, fid);
        self.acknowledged += 1;
        if let (Some(stripes), Effect::Add { path, .. }) =
            (answer.inode().and_then(|i| i.stripes.clone()), &change.effect)
        {
            self.stripes.insert(self.names[path].id, *stripes);
        }
        if let (MdtReply::Opened(opened), Some(fid)) = (&answer, fid) {
            let close =
                mdt::Close { fid, handle: opened.handle, size_blocks: Some((0, 0)), data_version: 0, mtime_ns: 0 };
            // Sent again (as a client resends) while a storage fault fails it: a file left
            // open could not migrate.
            let header = self.header();
            for _ in 0..CLOSE_TRIES {
                match self.cluster.send(fid.mdt_index(), header.clone(), close.clone()).await {
                    Ok(_) => {
                        self.acknowledged += 1;
                        break;
                    }
                    Err(e) if self.cluster.killed().is_none() && from_storage(&e) => {
                        self.note(format!("close {fid}: {e}, sent again"))
                    }
                    Err(e) if self.cluster.killed().is_some() => {
                        self.note(format!("close {fid}: {e}"));
                        break;
                    }
                    Err(e) => return Err(self.failed(format!("close of {fid} failed with both MDSs up: {e}"))),
                }
            }
        }
        Ok(())
    }

    /// The names after `effect`, a new inode's FID being `fid`.
    fn applied(&mut self, effect: &Effect, fid: Option<Fid>) -> Names {
        let mut names = self.names.clone();
        match effect.clone() {
            Effect::Add { path, kind, striped } => {
                self.next_id += 1;
                names.insert(path, Entry { id: self.next_id, kind, fid, striped });
            }
            Effect::Remove { path } => {
                names.remove(&path);
            }
            Effect::Rename { from, to } => {
                let e = names.remove(&from).expect("the workload renames a name it knows");
                names.insert(to, e);
            }
            Effect::Link { from, to } => {
                let e = names[&from];
                names.insert(to, e);
            }
            Effect::Migrate { path } => {
                let id = names[&path].id;
                for e in names.values_mut().filter(|e| e.id == id) {
                    e.fid = fid;
                }
            }
        }
        names
    }
}

fn found_fid(e: &Entry) -> Fid {
    e.fid.expect("the FIDs were taken from the walk")
}

/// Whether an error can come from a storage fault (the change was not acknowledged and
/// must have changed nothing).
fn from_storage(e: &WeftError) -> bool {
    matches!(e.code, ErrorCode::Io | ErrorCode::Again | ErrorCode::TimedOut)
}
