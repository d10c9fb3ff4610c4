//! Deterministic fault simulation, a first piece of what high availability will need: an
//! MDS and an OST over storage in memory, a random workload chosen by a seed (directories,
//! files written and synced, renames, unlinks, chmods, checkpoints), storage faults at
//! points the seed chooses (an operation fails, a write is short), then a crash: of the
//! process (kill -9: the page cache survives) or of the machine (a power loss: only what was
//! made durable survives). The restarted services must hold what was acknowledged:
//!
//! * after a process crash, every acknowledged metadata change and every acknowledged byte;
//! * after a power loss, the namespace as it was after some acknowledged change no older
//!   than the last completed checkpoint (Weft's journal is not synced: a power loss may take
//!   back the changes since), and every acknowledged byte: the simulation keeps what a
//!   client keeps, every write above the OST's last committed transno, and replays it to
//!   the restarted OST in an order the seed picks (weft-oss `commit.rs`: a power loss takes
//!   back what the OST had not committed, and the replay brings it back);
//! * never an unacknowledged change, nor a half-made one;
//! * and a file made after the restart reads empty: no bytes of a file the crash took back
//!   (whose object id the MDS hands out again) show through.
//!
//! [`dne::run_dne`] plays a seed of another simulation: two MDSs under changes that cross
//! MDTs, with kills of either (see its module).
//!
//! [`run`] plays one seed; the same seed plays the same workload and faults (the services'
//! background work is done before the workload starts, so it does not move the faults).

pub mod dne;
mod machine;
mod model;
pub mod net;
pub mod raft;
mod requests;
mod rng;

/// The seeds a simulation test plays: `WEFT_SIM_SEED=N` (one, to replay it),
/// `WEFT_SIM_SEEDS=FROM..TO` (FROM up to TO, not included: `make soak`), else `ci`.
pub fn seeds(ci: std::ops::Range<u64>) -> Vec<u64> {
    if let Ok(one) = std::env::var("WEFT_SIM_SEED") {
        return vec![one.trim().parse().expect("WEFT_SIM_SEED is a number")];
    }
    if let Ok(range) = std::env::var("WEFT_SIM_SEEDS") {
        let (from, to) = range.split_once("..").expect("WEFT_SIM_SEEDS is FROM..TO");
        return (from.trim().parse().expect("a number")..to.trim().parse().expect("a number")).collect();
    }
    ci.collect()
}

use bytes::Bytes;
use machine::{Disks, Machine};
use model::{join, Model, Node};
use rng::Rng;
use std::fmt::Write as _;
use weft_proto::faults::Fault;
use weft_proto::layout::Layout;
use weft_proto::msg::ops::{take_reply, Op};
use weft_proto::msg::{mdt, ost, FileType, MdtReply, MdtRequest, RequestHeader, Run, SetAttr, OPEN_READ, OPEN_WRITE};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// Operations of one workload.
const WORKLOAD_OPS: usize = 80;
/// Largest write of the workload, and the range of its offsets.
const WRITE_BYTES_MAX: usize = 48 * 1024;
const WRITE_OFFSET_MAX: usize = 96 * 1024;
/// Files made after the restart, each checked to start empty.
const NEW_FILES_AFTER_RESTART: usize = 20;

/// How the machine goes down at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crash {
    /// The servers' process is killed: the page cache (unsynced object data, the journal)
    /// survives.
    Process,
    /// The machine loses power: only what was synced, committed or checkpointed survives
    /// (and the writes the OST had not committed come back from the replays).
    Power,
}

/// What a seed played.
#[derive(Debug, Clone)]
pub struct Report {
    pub seed: u64,
    pub crash: Crash,
    /// Operations attempted and acknowledged.
    pub ops: usize,
    pub acknowledged: usize,
    /// Faults injected (not counting the crash).
    pub faults: Vec<(u64, Fault)>,
    /// What happened, op by op, for a reader replaying the seed.
    pub log: String,
}

/// One seed's play: the workload against a machine, then the crash, the restart and the
/// check. An error says which seed and what a restart found wrong.
pub async fn run(seed: u64) -> Result<Report, String> {
    let mut sim = Sim::new(seed).await.map_err(|e| format!("seed {seed}: the machine did not start: {e}"))?;
    sim.plan_faults();
    sim.workload().await?;
    sim.crash_and_check().await
}

struct Sim {
    seed: u64,
    rng: Rng,
    machine: Option<Machine>,
    model: Model,
    request_id: u64,
    ops: usize,
    acknowledged: usize,
    faults: Vec<(u64, Fault)>,
    crash: Crash,
    names: usize,
    log: String,
    /// What a client keeps to replay (weft-oss commit.rs): every acknowledged write above
    /// the OST's last committed transno, by transno: (object, offset, bytes).
    uncommitted: std::collections::BTreeMap<u64, (Fid, u64, Bytes)>,
}

/// Whether an error can come from a storage fault (the op was not acknowledged and must
/// have changed nothing), rather than from a wrong expectation.
fn from_storage(e: &WeftError) -> bool {
    matches!(e.code, ErrorCode::Io | ErrorCode::Again | ErrorCode::TimedOut)
}

impl Sim {
    async fn new(seed: u64) -> WeftResult<Sim> {
        let mut rng = Rng(seed);
        let crash = if rng.chance(50) { Crash::Process } else { Crash::Power };
        let machine = Machine::start(Disks::new()).await?;
        Ok(Sim {
            seed,
            rng,
            machine: Some(machine),
            model: Model::new(),
            request_id: 0,
            ops: 0,
            acknowledged: 0,
            faults: Vec::new(),
            crash,
            names: 0,
            log: String::new(),
            uncommitted: std::collections::BTreeMap::new(),
        })
    }

    fn machine(&self) -> &Machine {
        self.machine.as_ref().expect("the machine runs")
    }

    /// Faults at storage operations to come: up to three failures or short writes, and
    /// perhaps the power loss itself in the middle of the workload.
    fn plan_faults(&mut self) {
        let plan = self.machine().plan.clone();
        let base = plan.ops();
        // A workload makes a few hundred storage operations.
        for _ in 0..self.rng.below(4) {
            let fault = if self.rng.chance(50) { Fault::Fail } else { Fault::ShortWrite };
            let at = base + self.rng.below(300) as u64;
            plan.inject(at, fault);
            self.faults.push((at - base, fault));
        }
        if self.crash == Crash::Power && self.rng.chance(50) {
            plan.inject(base + self.rng.below(300) as u64, Fault::PowerLoss);
        }
    }

    fn note(&mut self, line: impl AsRef<str>) {
        let _ = writeln!(self.log, "{:3} {}", self.ops, line.as_ref());
    }

    fn header(&mut self) -> RequestHeader {
        self.request_id += 1;
        requests::header(0x5eed, self.request_id)
    }

    async fn mdt<O>(&mut self, op: O) -> WeftResult<O::Reply>
    where
        O: Op<Request = MdtRequest, Answer = MdtReply>,
    {
        let header = self.header();
        let reply = self.machine().mds.handle(&header, op.into(), Run::Inline).await?;
        take_reply::<O>(reply)
    }

    fn name(&mut self, prefix: &str) -> String {
        self.names += 1;
        format!("{prefix}{}", self.names)
    }

    /// Handles an op's error: a storage fault's is expected (the op was not acknowledged);
    /// any other means the simulation or the services are wrong.
    fn refused(&mut self, what: &str, e: WeftError) -> Result<(), String> {
        self.note(format!("{what}: {e}"));
        if from_storage(&e) {
            Ok(())
        } else {
            Err(format!("seed {}: {what} failed with {e}, which no storage fault explains\n{}", self.seed, self.log))
        }
    }

    async fn workload(&mut self) -> Result<(), String> {
        while self.ops < WORKLOAD_OPS && !self.machine().plan.powered_off() {
            self.ops += 1;
            let files = self.model.files();
            let dirs = self.model.dirs();
            let pick = self.rng.below(100);
            let done = match pick {
                0..=14 => {
                    let (parent, name) = (dirs[self.rng.below(dirs.len())].clone(), self.name("d"));
                    self.mkdir(parent, name).await
                }
                15..=34 => {
                    let (parent, name) = (dirs[self.rng.below(dirs.len())].clone(), self.name("f"));
                    self.create(parent, name).await
                }
                _ if files.is_empty() => continue,
                35..=59 => {
                    let node = files[self.rng.below(files.len())].1;
                    self.write(node).await
                }
                60..=71 => {
                    let node = files[self.rng.below(files.len())].1;
                    self.sync(node).await
                }
                72..=79 => {
                    let (path, _) = files[self.rng.below(files.len())].clone();
                    self.unlink(path).await
                }
                80..=87 => {
                    let (path, _) = files[self.rng.below(files.len())].clone();
                    let to = join(&dirs[self.rng.below(dirs.len())], &self.name("r"));
                    self.rename(path, to).await
                }
                88..=94 => {
                    let (path, _) = files[self.rng.below(files.len())].clone();
                    let mode = 0o600 | self.rng.below(0o100) as u32;
                    self.chmod(path, mode).await
                }
                _ => self.checkpoint().await,
            };
            done?;
        }
        Ok(())
    }

    fn lookup(&self, path: &str) -> Node {
        self.model.now()[path]
    }

    fn parent_fid(&self, dir: &str) -> Fid {
        if dir.is_empty() {
            Fid::ROOT
        } else {
            self.lookup(dir).fid
        }
    }

    async fn mkdir(&mut self, parent: String, name: String) -> Result<(), String> {
        let op =
            mdt::Mkdir { parent: self.parent_fid(&parent), name: name.clone().into_bytes(), mode: 0o755, umask: 0 };
        let path = join(&parent, &name);
        match self.mdt(op).await {
            Ok(inode) => {
                self.note(format!("mkdir {path}"));
                let node = Node { fid: inode.attr.fid, kind: FileType::Directory, mode: inode.attr.mode };
                self.model.acknowledge(|ns| {
                    ns.insert(path, node);
                });
                self.acknowledged += 1;
                Ok(())
            }
            Err(e) => self.refused(&format!("mkdir {path}"), e),
        }
    }

    /// Create, then close (two acknowledged changes).
    async fn create(&mut self, parent: String, name: String) -> Result<(), String> {
        let path = join(&parent, &name);
        let op = requests::create_file(self.parent_fid(&parent), name);
        let opened = match self.mdt(op).await {
            Ok(opened) => opened,
            Err(e) => return self.refused(&format!("create {path}"), e),
        };
        let fid = opened.inode.attr.fid;
        self.note(format!("create {path} {fid}"));
        let node = Node { fid, kind: FileType::Regular, mode: opened.inode.attr.mode };
        self.model.acknowledge(|ns| {
            ns.insert(path.clone(), node);
        });
        self.model.objects.entry(object_of(&opened.inode.layout)?.fid).or_default();
        self.acknowledged += 1;
        match self
            .mdt(mdt::Close { fid, handle: opened.handle, size_blocks: Some((0, 0)), data_version: 0, mtime_ns: 0 })
            .await
        {
            Ok(_) => {
                self.acknowledged += 1;
                Ok(())
            }
            Err(e) => self.refused(&format!("close {path}"), e),
        }
    }

    async fn object(&mut self, node: Node) -> Result<Fid, String> {
        let inode =
            self.mdt(mdt::Getattr { fid: node.fid }).await.map_err(|e| format!("seed {}: getattr: {e}", self.seed))?;
        Ok(object_of(&inode.layout)?.fid)
    }

    async fn write(&mut self, node: Node) -> Result<(), String> {
        let object = self.object(node).await?;
        let offset = self.rng.below(WRITE_OFFSET_MAX);
        let len = 1 + self.rng.below(WRITE_BYTES_MAX);
        let data = self.rng.bytes(len);
        let op = ost::Write { fid: object, offset: offset as u64, sync: false, owner: None, extents: Vec::new() };
        let bulk = Bytes::from(data.clone());
        match self.machine().ost(op, bulk.clone()).await {
            Ok((done, _)) if done.len as usize == len => {
                self.note(format!("write {object} {offset}+{len} transno {:#x}", done.transno));
                if done.transno > done.committed {
                    self.uncommitted.insert(done.transno, (object, offset as u64, bulk));
                }
                self.committed(done.committed);
                self.model.objects.entry(object).or_default().write(offset, &data);
                self.acknowledged += 1;
                Ok(())
            }
            Ok((done, _)) => {
                Err(format!("seed {}: a write of {len} bytes answered {}\n{}", self.seed, done.len, self.log))
            }
            Err(e) => {
                self.model.objects.entry(object).or_default().tainted = true;
                self.refused(&format!("write {object} {offset}+{len}"), e)
            }
        }
    }

    async fn sync(&mut self, node: Node) -> Result<(), String> {
        let object = self.object(node).await?;
        match self.machine().ost(ost::Sync { fid: object }, Bytes::new()).await {
            Ok((done, _)) => {
                self.note(format!("sync {object}, committed {:#x}", done.committed));
                self.committed(done.committed);
                self.acknowledged += 1;
                Ok(())
            }
            Err(e) => self.refused(&format!("sync {object}"), e),
        }
    }

    /// What a client does with an answer's last committed transno: forgets the writes it
    /// covers.
    fn committed(&mut self, committed: u64) {
        self.uncommitted = self.uncommitted.split_off(&(committed + 1));
    }

    /// What a client does when the OST's server restarted: sends every write it keeps
    /// again, in an order the seed picks (the OST orders them by transno). A replay the
    /// restarted OST refuses leaves its object unknown to the check.
    async fn replay_writes(&mut self) -> Result<(), String> {
        let mut writes: Vec<(u64, (Fid, u64, Bytes))> = std::mem::take(&mut self.uncommitted).into_iter().collect();
        for i in (1..writes.len()).rev() {
            writes.swap(i, self.rng.below(i + 1));
        }
        for (transno, (object, offset, bulk)) in writes {
            let op = ost::Replay { fid: object, offset, transno, owner: None };
            match self.machine().ost(op, bulk.clone()).await {
                Ok((done, _)) => {
                    self.note(format!("replay {object} {offset}+{} transno {transno:#x}", bulk.len()));
                    if done.transno > done.committed {
                        self.uncommitted.insert(done.transno, (object, offset, bulk));
                    }
                }
                Err(e) => {
                    self.note(format!("replay {object} {offset}+{} transno {transno:#x}: {e}", bulk.len()));
                    self.model.objects.entry(object).or_default().tainted = true;
                }
            }
        }
        Ok(())
    }

    async fn unlink(&mut self, path: String) -> Result<(), String> {
        let (dir, name) = split(&path);
        let op = mdt::Unlink { parent: self.parent_fid(dir), name: name.as_bytes().to_vec() };
        match self.mdt(op).await {
            Ok(()) => {
                self.note(format!("unlink {path}"));
                self.model.acknowledge(|ns| {
                    ns.remove(&path);
                });
                self.acknowledged += 1;
                Ok(())
            }
            Err(e) => self.refused(&format!("unlink {path}"), e),
        }
    }

    async fn rename(&mut self, from: String, to: String) -> Result<(), String> {
        let ((src_dir, src_name), (dst_dir, dst_name)) = (split(&from), split(&to));
        let op = mdt::Rename {
            src_parent: self.parent_fid(src_dir),
            src_name: src_name.as_bytes().to_vec(),
            dst_parent: self.parent_fid(dst_dir),
            dst_name: dst_name.as_bytes().to_vec(),
            flags: 0,
        };
        match self.mdt(op).await {
            Ok(()) => {
                self.note(format!("rename {from} {to}"));
                self.model.acknowledge(|ns| {
                    let node = ns.remove(&from).expect("renamed from a file of the model");
                    ns.insert(to, node);
                });
                self.acknowledged += 1;
                Ok(())
            }
            Err(e) => self.refused(&format!("rename {from} {to}"), e),
        }
    }

    async fn chmod(&mut self, path: String, mode: u32) -> Result<(), String> {
        let node = self.lookup(&path);
        let set = SetAttr { mode: Some(mode), ..SetAttr::default() };
        match self.mdt(mdt::Setattr { fid: node.fid, set, open_handle: None }).await {
            Ok(inode) => {
                self.note(format!("chmod {path} {mode:o}"));
                self.model.acknowledge(|ns| {
                    ns.insert(path, Node { mode: inode.attr.mode, ..node });
                });
                self.acknowledged += 1;
                Ok(())
            }
            Err(e) => self.refused(&format!("chmod {path}"), e),
        }
    }

    async fn checkpoint(&mut self) -> Result<(), String> {
        match self.machine().mds.checkpoint().await {
            Ok(()) => {
                self.note("checkpoint");
                self.model.checkpointed = self.model.history.len() - 1;
                Ok(())
            }
            Err(e) => self.refused("checkpoint", e),
        }
    }

    /// The crash, the restart over what it left, and the check.
    async fn crash_and_check(mut self) -> Result<Report, String> {
        let machine = self.machine.take().expect("the machine runs");
        let disks = machine.stop().await;
        let disks = match self.crash {
            Crash::Process => disks,
            Crash::Power => disks.after_power_loss(),
        };
        self.note(format!("{:?} crash", self.crash));
        let machine = Machine::start(disks).await.map_err(|e| self.failed(format!("the restart failed: {e}")))?;
        self.machine = Some(machine);
        // As a client that learns of the restart: what the OST had not committed comes
        // back from the writes it keeps, so every acknowledged write is there after either
        // crash.
        self.replay_writes().await?;
        let found = self.read_namespace().await?;
        let history = &self.model.history;
        let allowed = match self.crash {
            Crash::Process => history.len() - 1..history.len(),
            Crash::Power => self.model.checkpointed..history.len(),
        };
        let Some(at) = allowed.clone().rev().find(|i| history[*i] == found) else {
            return Err(self.failed(format!(
                "after the {:?} crash the namespace is none of the acknowledged states {allowed:?}:\nfound {found:#?}\nlast acknowledged {:#?}",
                self.crash,
                history.last()
            )));
        };
        self.note(format!("found the namespace after acknowledged change {at} of {}", history.len() - 1));
        self.check_objects(&found).await?;
        self.check_new_files_are_empty().await?;
        self.machine.take().expect("the machine runs").stop().await;
        Ok(Report {
            seed: self.seed,
            crash: self.crash,
            ops: self.ops,
            acknowledged: self.acknowledged,
            faults: self.faults,
            log: self.log,
        })
    }

    fn failed(&self, what: String) -> String {
        format!("seed {}: {what}\n--- what the seed played:\n{}", self.seed, self.log)
    }

    /// Files made after the restart start empty: no object is handed out again that a file
    /// before the crash wrote to.
    async fn check_new_files_are_empty(&mut self) -> Result<(), String> {
        for i in 0..NEW_FILES_AFTER_RESTART {
            let op = mdt::Create {
                parent: Fid::ROOT,
                name: format!("after-restart-{i}").into_bytes(),
                mode: 0o644,
                exclusive: true,
                spec: None,
                open_flags: OPEN_READ | OPEN_WRITE,
                umask: 0,
            };
            let opened = self.mdt(op).await.map_err(|e| self.failed(format!("a create after the restart: {e}")))?;
            let object = object_of(&opened.inode.layout)?.fid;
            let bytes = self.read_object(object).await?;
            if !bytes.is_empty() {
                return Err(self.failed(format!(
                    "a file made after the {:?} crash got object {object}, which holds {} bytes from before it",
                    self.crash,
                    bytes.len()
                )));
            }
        }
        Ok(())
    }

    /// Every name under the root, as the restarted MDS lists them.
    async fn read_namespace(&mut self) -> Result<model::Namespace, String> {
        let mut found = model::Namespace::new();
        let mut dirs = vec![(String::new(), Fid::ROOT)];
        while let Some((path, fid)) = dirs.pop() {
            let mut cookie = 0;
            loop {
                let page = self.mdt(mdt::Readdir { fid, cookie, max_entries: 1024 }).await;
                let page = page.map_err(|e| self.failed(format!("readdir of {path:?} after the restart: {e}")))?;
                for entry in &page.entries {
                    let name = join(&path, &String::from_utf8_lossy(&entry.name));
                    let inode = self.mdt(mdt::Getattr { fid: entry.fid }).await;
                    let inode = inode.map_err(|e| self.failed(format!("getattr of {name} after the restart: {e}")))?;
                    if entry.kind == FileType::Directory {
                        dirs.push((name.clone(), entry.fid));
                    }
                    found.insert(name, Node { fid: entry.fid, kind: entry.kind, mode: inode.attr.mode });
                    cookie = entry.cookie;
                }
                if page.eof || page.entries.is_empty() {
                    break;
                }
            }
        }
        Ok(found)
    }

    /// Every file's object holds what the crash must have kept of it.
    async fn check_objects(&mut self, found: &model::Namespace) -> Result<(), String> {
        for (path, node) in found.iter().filter(|(_, n)| n.kind == FileType::Regular) {
            let object = self.object(*node).await?;
            let Some(expected) = self.model.objects.get(&object) else { continue };
            if expected.tainted {
                continue;
            }
            let want = expected.current.clone();
            let got = self.read_object(object).await?;
            if got != want {
                return Err(self.failed(format!(
                    "after the {:?} crash {path} ({object}) holds {} bytes, {} differing from the {} acknowledged",
                    self.crash,
                    got.len(),
                    got.iter().zip(&want).filter(|(a, b)| a != b).count(),
                    want.len()
                )));
            }
        }
        Ok(())
    }

    async fn read_object(&mut self, object: Fid) -> Result<Vec<u8>, String> {
        let attr = self.machine().ost(ost::Getattr { fid: object }, Bytes::new()).await;
        let size = attr.map_err(|e| self.failed(format!("getattr of {object}: {e}")))?.0.size;
        let mut out = Vec::new();
        while (out.len() as u64) < size {
            let op =
                ost::Read { fid: object, offset: out.len() as u64, len: (size - out.len() as u64).min(1 << 20) as u32 };
            let read = self.machine().ost(op, Bytes::new()).await;
            let (_, data) = read.map_err(|e| self.failed(format!("read of {object}: {e}")))?;
            if data.is_empty() {
                break;
            }
            out.extend_from_slice(&data);
        }
        Ok(out)
    }
}

fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

/// The one object of a file of the default layout (one stripe).
fn object_of(layout: &Option<Layout>) -> Result<weft_proto::layout::StripeObject, String> {
    let comp = layout.as_ref().ok_or("a file without a layout")?.plain().map_err(|e| e.to_string())?;
    match comp.objects.as_slice() {
        [object] => Ok(*object),
        more => Err(format!("a file of {} objects; the simulation writes files of one", more.len())),
    }
}
