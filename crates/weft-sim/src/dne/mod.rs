//! The simulation by seed of changes over two MDTs with a kill -9 of either MDS (issue 35):
//! two MDSs in one process (MDT0 and MDT1, [`cluster`]), a workload the seed chooses of
//! changes that cross MDTs (a directory made on the other MDT or striped over both, files
//! made in directories of either, renames of files between directories of different MDTs,
//! replacing a file or not, hard links across MDTs, unlinks of remote names, rmdir of
//! remote and striped directories, migrations of files and directories to the other MDT),
//! each request sent to the MDT of its name; then a kill of one MDS, at a point the seed
//! picks: between two changes, or inside one (at its Nth storage operation from a moment:
//! a participant between its prepare and the commit, a coordinator before or after its
//! commit, or a commit being told). The killed MDS starts again over its disks (a process
//! crash: what it wrote, durable or not, is there), both resolve what was left prepared,
//! and the namespace, walked from the root over both MDTs, must be whole ([`check`]): every
//! name leads to an inode, each file's link count is its names, no name twice, no inode
//! without a name on either MDT, and it is the namespace after the acknowledged changes,
//! with the one change the kill cut short either whole or not at all.
//!
//! Names in striped directories are left out (they would need the client's routing by
//! hash); striped directories are made and removed empty.

mod check;
mod cluster;

use crate::model::join;
use crate::rng::Rng;
use check::{Entry, Names};
use cluster::{Cluster, MDTS};
use std::fmt::Write as _;
use weft_proto::dirstripe::{DirHash, DirStripeSpec};
use weft_proto::faults::Fault;
use weft_proto::msg::{mdt, FileType, Identity, MdtReply, MdtRequest, RequestHeader, OPEN_READ, OPEN_WRITE};
use weft_proto::{ErrorCode, Fid, WeftError};

/// Changes of one workload, at most.
const WORKLOAD_OPS: usize = 40;
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
}

/// What a seed played.
#[derive(Debug, Clone)]
pub struct DneReport {
    pub seed: u64,
    pub killed: u32,
    pub kill: Kill,
    pub ops: usize,
    pub acknowledged: usize,
    /// The change the kill cut short, and whether the restart found it made.
    pub cut: Option<(String, bool)>,
    /// What the restart found to resolve: changes with steps prepared, commits untold.
    pub left: (usize, usize),
    /// Storage faults planned before the kill (MDT, operation, fault), and the changes
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

/// The change the kill cut short: the names if it was made, and whether it was.
struct Cut {
    what: String,
    after: Names,
    made: bool,
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
    next_id: u64,
    request_id: u64,
    made: usize,
    ops: usize,
    acknowledged: usize,
    killed: u32,
    kill: Kill,
    kill_at: usize,
    cut: Option<Cut>,
    left: (usize, usize),
    faults: Vec<(u32, u64, Fault)>,
    failed: usize,
    /// The storage operations each MDT counted when the workload started.
    ops_at_start: [u64; 2],
    baseline: check::Baseline,
    log: String,
}

impl Sim {
    async fn new(seed: u64, cluster: Cluster) -> Result<Sim, String> {
        let mut rng = Rng(seed);
        let killed = MDTS[rng.below(MDTS.len())];
        let kill = if rng.chance(30) { Kill::Between } else { Kill::Inside };
        let kill_at = 1 + rng.below(WORKLOAD_OPS);
        let mut baseline = [0; 2];
        for m in MDTS {
            baseline[m as usize] = check::inodes_used(&cluster, m).await?;
        }
        Ok(Sim {
            seed,
            rng,
            cluster,
            names: Names::new(),
            next_id: 0,
            request_id: 0,
            made: 0,
            ops: 0,
            acknowledged: 0,
            killed,
            kill,
            kill_at,
            cut: None,
            left: (0, 0),
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
            killed: self.killed,
            kill: self.kill,
            ops: self.ops,
            acknowledged: self.acknowledged,
            cut: self.cut.as_ref().map(|c| (c.what.clone(), c.made)),
            left: self.left,
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
            "seed {} (kill of MDT{} {:?} at op {}): {}\n{}",
            self.seed,
            self.killed,
            self.kill,
            self.kill_at,
            what.as_ref(),
            self.log
        )
    }

    fn header(&mut self) -> RequestHeader {
        self.request_id += 1;
        RequestHeader {
            client_id: 0xd5e,
            request_id: self.request_id,
            reply_slot: 1,
            identity: Identity::root(),
            jobid: "sim".into(),
        }
    }

    async fn play(&mut self) -> Result<(), String> {
        self.workload().await?;
        let victim = self.killed;
        let counted = MDTS.map(|m| self.cluster.plan(m).ops() - self.ops_at_start[m as usize]);
        self.note(format!("kill -9 of MDT{victim} (storage operations {counted:?}), restart"));
        self.cluster.restart(victim).await.map_err(|e| self.failed(format!("the restart: {e}")))?;
        self.left = self.cluster.unresolved().map_err(|e| self.failed(e.to_string()))?;
        self.note(format!("left to resolve: {} prepared, {} untold", self.left.0, self.left.1));
        self.resolve().await?;
        let found = check::walk_whole(&self.cluster, &self.baseline).await.map_err(|e| self.failed(e))?;
        let Some(diff) = check::differs(&found, &self.names) else { return Ok(()) };
        let Some(cut) = &mut self.cut else {
            return Err(self.failed(format!("after the restart: {diff}")));
        };
        match check::differs(&found, &cut.after) {
            None => {
                cut.made = true;
                Ok(())
            }
            Some(made) => {
                let what = cut.what.clone();
                Err(self.failed(format!("after the restart, {what} is half made: unmade, {diff}; made, {made}")))
            }
        }
    }

    /// Until both MDSs hold no step prepared and no commit untold, their tasks woken now
    /// and their clocks moved on (rather than waiting their periods).
    async fn resolve(&mut self) -> Result<(), String> {
        let start = std::time::Instant::now();
        loop {
            let left = self.cluster.unresolved().map_err(|e| self.failed(e.to_string()))?;
            if left == (0, 0) {
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
        while self.ops < WORKLOAD_OPS && self.cluster.killed().is_none() {
            self.ops += 1;
            let plan = self.cluster.plan(self.killed).clone();
            if self.ops == self.kill_at {
                match self.kill {
                    Kill::Between => {
                        plan.power_off();
                        break;
                    }
                    Kill::Inside => plan.inject(plan.ops() + self.rng.below(INSIDE_OPS_MAX) as u64, Fault::PowerLoss),
                }
            }
            let Some(change) = self.pick() else { continue };
            self.apply(change).await?;
            self.quiesce().await?;
        }
        // A kill planned past the workload's end comes at its end.
        self.cluster.plan(self.killed).power_off();
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
                self.cut = Some(Cut { what: change.what, after, made: false });
                return Ok(());
            }
            // Refused (by the MDTs, or a storage fault): it changed nothing.
            Err(e) if Some(e.code) == change.refused || from_storage(&e) => {
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

    fn fid(&self, path: &str) -> Fid {
        if path.is_empty() {
            Fid::ROOT
        } else {
            self.names[path].fid.expect("an acknowledged name's FID is known")
        }
    }

    fn new_name(&mut self, prefix: &str) -> String {
        self.made += 1;
        format!("{prefix}{}", self.made)
    }

    /// Directories whose names the workload changes (the root and every plain one).
    fn plain_dirs(&self) -> Vec<String> {
        let dirs = self.names.iter().filter(|(_, e)| e.kind == FileType::Directory && !e.striped);
        std::iter::once(String::new()).chain(dirs.map(|(p, _)| p.clone())).collect()
    }

    fn files(&self) -> Vec<String> {
        self.names.iter().filter(|(_, e)| e.kind == FileType::Regular).map(|(p, _)| p.clone()).collect()
    }

    fn one<T: Clone>(&mut self, of: &[T]) -> Option<T> {
        (!of.is_empty()).then(|| of[self.rng.below(of.len())].clone())
    }

    /// A directory on another MDT than `mdt`, if any (else any).
    fn dir_elsewhere(&mut self, mdt: u32) -> String {
        let dirs = self.plain_dirs();
        let away: Vec<String> = dirs.iter().filter(|d| self.fid(d).mdt_index() != mdt).cloned().collect();
        match self.rng.chance(80) && !away.is_empty() {
            true => self.one(&away),
            false => self.one(&dirs),
        }
        .expect("the root is a directory")
    }

    fn children(&self, dir: &str) -> usize {
        let prefix = format!("{dir}/");
        self.names.keys().filter(|p| p.starts_with(&prefix)).count()
    }

    fn links(&self, path: &str) -> usize {
        let id = self.names[path].id;
        self.names.values().filter(|e| e.id == id).count()
    }

    /// The next change, as the seed picks it among those the names allow.
    fn pick(&mut self) -> Option<Change> {
        let dirs = self.plain_dirs();
        let files = self.files();
        let change = match self.rng.below(100) {
            0..=17 => {
                let parent = self.one(&dirs)?;
                let (name, pmdt) = (self.new_name("d"), self.fid(&parent).mdt_index());
                let path = join(&parent, &name);
                let (count, index) = match self.rng.below(4) {
                    0 => (1, None),
                    1 => (2, Some(MDTS[self.rng.below(2)])),
                    _ => (1, Some(1 - pmdt)),
                };
                let spec = DirStripeSpec { count, index, hash: DirHash::Fnv1a64 };
                let req = mdt::MkdirStriped {
                    parent: self.fid(&parent),
                    name: name.into_bytes(),
                    mode: 0o755,
                    umask: 0,
                    spec,
                };
                let what = format!("mkdir -c {count} -i {index:?} /{path}");
                Change {
                    what,
                    mdt: pmdt,
                    req: req.into(),
                    effect: Effect::Add { path, kind: FileType::Directory, striped: count > 1 },
                    refused: None,
                }
            }
            18..=37 => {
                let parent = self.one(&dirs)?;
                let name = self.new_name("f");
                let path = join(&parent, &name);
                let req = mdt::Create {
                    parent: self.fid(&parent),
                    name: name.into_bytes(),
                    mode: 0o644,
                    exclusive: true,
                    spec: None,
                    open_flags: OPEN_READ | OPEN_WRITE,
                    umask: 0,
                };
                let pmdt = self.fid(&parent).mdt_index();
                Change {
                    what: format!("create /{path}"),
                    mdt: pmdt,
                    req: req.into(),
                    effect: Effect::Add { path, kind: FileType::Regular, striped: false },
                    refused: None,
                }
            }
            38..=57 => {
                let from = self.one(&files)?;
                let (sdir, sname) = split(&from);
                let smdt = self.fid(sdir).mdt_index();
                let dir = self.dir_elsewhere(smdt);
                let id = self.names[&from].id;
                let targets: Vec<String> =
                    files.iter().filter(|f| split(f).0 == dir && self.names[*f].id != id).cloned().collect();
                let to = match self.rng.chance(40) {
                    true => self.one(&targets).unwrap_or_else(|| join(&dir, &format!("r{}", self.made + 1))),
                    false => join(&dir, &format!("r{}", self.made + 1)),
                };
                self.made += 1;
                let req = mdt::Rename {
                    src_parent: self.fid(sdir),
                    src_name: sname.as_bytes().to_vec(),
                    dst_parent: self.fid(&dir),
                    dst_name: split(&to).1.as_bytes().to_vec(),
                    flags: 0,
                };
                Change {
                    what: format!("mv /{from} /{to}"),
                    mdt: smdt,
                    req: req.into(),
                    effect: Effect::Rename { from, to },
                    refused: None,
                }
            }
            58..=67 => {
                let from = self.one(&files)?;
                let fid = self.fid(&from);
                let dir = self.dir_elsewhere(fid.mdt_index());
                // Now and then onto a name taken (refused, after the inode's MDT prepared).
                let taken: Vec<String> = self.names.keys().filter(|p| split(p).0 == dir).cloned().collect();
                let (name, refused) = match self.rng.chance(25) {
                    true if !taken.is_empty() => {
                        let name = self.one(&taken).expect("a name is taken");
                        (split(&name).1.to_string(), Some(ErrorCode::Exists))
                    }
                    _ => (self.new_name("l"), None),
                };
                let to = join(&dir, &name);
                let req = mdt::Link { fid, parent: self.fid(&dir), name: name.into_bytes() };
                let pmdt = self.fid(&dir).mdt_index();
                Change {
                    what: format!("ln /{from} /{to}"),
                    mdt: pmdt,
                    req: req.into(),
                    effect: Effect::Link { from, to },
                    refused,
                }
            }
            68..=77 => {
                let path = self.one(&files)?;
                let (dir, name) = split(&path);
                let req = mdt::Unlink { parent: self.fid(dir), name: name.as_bytes().to_vec() };
                let pmdt = self.fid(dir).mdt_index();
                Change {
                    what: format!("rm /{path} ({})", self.fid(&path)),
                    mdt: pmdt,
                    req: req.into(),
                    effect: Effect::Remove { path },
                    refused: None,
                }
            }
            78..=85 => {
                // An empty directory; now and then one that is not (refused).
                let refused = self.rng.chance(20).then_some(ErrorCode::NotEmpty);
                let dirs: Vec<String> = self
                    .names
                    .iter()
                    .filter(|(p, e)| e.kind == FileType::Directory && (self.children(p) == 0) == refused.is_none())
                    .map(|(p, _)| p.clone())
                    .collect();
                let path = self.one(&dirs)?;
                let (dir, name) = split(&path);
                let req = mdt::Rmdir { parent: self.fid(dir), name: name.as_bytes().to_vec() };
                let pmdt = self.fid(dir).mdt_index();
                Change {
                    what: format!("rmdir /{path} ({})", self.fid(&path)),
                    mdt: pmdt,
                    req: req.into(),
                    effect: Effect::Remove { path },
                    refused,
                }
            }
            _ => {
                // A file of one name, or a plain directory (with what it holds).
                let movable: Vec<String> = self
                    .names
                    .iter()
                    .filter(|(p, e)| match e.kind {
                        FileType::Directory => !e.striped,
                        _ => self.links(p) == 1,
                    })
                    .map(|(p, _)| p.clone())
                    .collect();
                let path = self.one(&movable)?;
                let (dir, name) = split(&path);
                let to = 1 - self.fid(&path).mdt_index();
                let req = mdt::Migrate { parent: self.fid(dir), name: name.as_bytes().to_vec(), to };
                let pmdt = self.fid(dir).mdt_index();
                Change {
                    what: format!("migrate -m {to} /{path} ({})", self.fid(&path)),
                    mdt: pmdt,
                    req: req.into(),
                    effect: Effect::Migrate { path },
                    refused: None,
                }
            }
        };
        Some(change)
    }
}

/// Whether an error can come from a storage fault (the change was not acknowledged and
/// must have changed nothing).
fn from_storage(e: &WeftError) -> bool {
    matches!(e.code, ErrorCode::Io | ErrorCode::Again | ErrorCode::TimedOut)
}

fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}
