//! The network simulation: two real [`weft_client::Client`]s against a real
//! [`weft_server::RunningServer`] (MGS, MDS, two OSTs, the lock services), every message
//! between them through a seeded network ([`wire::SimWire`]) that delays, reorders, drops
//! and duplicates messages, loses a reply after its request ran, holds a request at the
//! server while its connection breaks (the sender resends; the held copy arrives later),
//! partitions and heals a client, and pauses one client past its lock timeout while the
//! other reads its file (the server evicts it).
//!
//! The workload, one operation at a time by either client: creates, writes and reads under
//! extent locks, renames, unlinks, chmods. What is checked:
//!
//! * a read returns exactly the bytes last acknowledged;
//! * an operation the network failed is wholly done or not at all, as a third client that
//!   no fault touches sees it (and the model follows what it saw);
//! * an error that is not the network's (a resent create answered "exists", a resent unlink
//!   "not found") is a failure: the reply cache must answer a resend as the first time;
//! * at the end, once every held copy has arrived, every name, mode and byte is what was
//!   acknowledged and no other name exists.
//!
//! Run on tokio's paused clock on a current-thread runtime: timeouts, partitions and
//! pauses cost no real time (see [`wire`] for how the clock waits for the MDS's commits).
//! The same seed plays the same workload and faults (threads outside the runtime, the MDS
//! writer's, may still move one interleaving).
//!
//! The workload and its checks (`Sim`) are played op by op by the replicated MDT's
//! simulation too (`crate::raft`), against three replicas whose leader it kills and
//! partitions.

pub mod wire;

use crate::rng::Rng;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use weft_client::{Client, ClientConfig};
use weft_proto::lock::LockMode;
use weft_proto::msg::{Caller, InodeInfo, SetAttr, OPEN_WRITE};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};
use weft_server::{RunningServer, ServerConfig};
use wire::{Counts, SimWire};

/// Operations of one seed's workload.
pub const WORKLOAD_OPS: usize = 40;
/// The directories and the file names in each.
const DIRS: [&str; 2] = ["d0", "d1"];
const NAMES_PER_DIR: usize = 4;
/// Largest write, and the range of its offsets.
const WRITE_BYTES_MAX: u64 = 48 * 1024;
const WRITE_OFFSET_MAX: u64 = 64 * 1024;
/// How long a client may take to answer a lock callback before the server evicts it.
pub const LOCK_TIMEOUT_MS: u64 = 3_000;
/// How long a client's request resends before it fails: shorter than the longest
/// partition, so that some operations fail and are looked at.
pub const REQUEST_TIMEOUT_MS: u64 = 8_000;
/// Longest partition of a client.
const PARTITION_MS_MAX: u64 = 12_000;
/// Chances per operation (percent) of a partition, and of a pause past the lock timeout.
const PARTITION_PERCENT: u64 = 3;
const PAUSE_PERCENT: u64 = 3;
/// How long the simulation waits for deliveries to finish before it looks (virtual time).
const SETTLE_MS_MAX: u64 = 60_000;
/// Where the servers' data goes when it is a directory (a tmpfs on Linux).
const SHM_DIR: &str = "/dev/shm";

/// How a simulation's workload meets the network: its clients' request timeouts and how
/// often a client is partitioned or paused (the replicated MDT's simulation, `crate::raft`,
/// plays its own faults on the servers and keeps the clients' to the wire's per message).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub request_timeout_ms: u64,
    /// The checking client's: it must outlast any fault it looks through.
    pub checker_request_timeout_ms: u64,
    pub partition_percent: u64,
    pub pause_percent: u64,
}

/// This module's simulation's settings.
const NETWORK: Settings = Settings {
    request_timeout_ms: REQUEST_TIMEOUT_MS,
    checker_request_timeout_ms: REQUEST_TIMEOUT_MS,
    partition_percent: PARTITION_PERCENT,
    pause_percent: PAUSE_PERCENT,
};

/// What one seed played.
#[derive(Debug, Clone, Default)]
pub struct NetReport {
    pub seed: u64,
    pub ops: usize,
    pub acknowledged: usize,
    /// Operations the network failed, each looked at by the third client.
    pub failed_by_network: usize,
    pub evictions: u64,
    pub counts: Counts,
    pub log: String,
}

/// The sum of many seeds' reports, as one line.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub seeds: usize,
    pub ops: usize,
    pub acknowledged: usize,
    pub failed_by_network: usize,
    pub evictions: u64,
    pub counts: Counts,
}

impl Summary {
    pub fn add(&mut self, r: &NetReport) {
        self.seeds += 1;
        self.ops += r.ops;
        self.acknowledged += r.acknowledged;
        self.failed_by_network += r.failed_by_network;
        self.evictions += r.evictions;
        self.counts += r.counts;
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.counts;
        write!(
            f,
            "{} seeds: {} operations ({} acknowledged, {} failed by the network and looked at), {} requests \
             ({} resends), {} callbacks; faults: {} dropped, {} replies lost after execution, {} duplicated, \
             {} held at the server while their connection broke ({} of them executed late), {} partitions \
             ({} attempts refused), {} pauses ({} messages held); {} evictions",
            self.seeds,
            self.ops,
            self.acknowledged,
            self.failed_by_network,
            c.requests,
            c.resends,
            c.callbacks,
            c.dropped,
            c.replies_lost,
            c.duplicated,
            c.held,
            c.held_executed_late,
            c.partitions,
            c.refused_by_partition,
            c.pauses,
            c.held_by_pause,
            self.evictions,
        )
    }
}

/// A file as acknowledged.
#[derive(Debug, Clone)]
struct FileModel {
    fid: Fid,
    mode: u32,
    data: Vec<u8>,
}

/// Plays one seed on the current runtime (which should be a current-thread runtime with
/// its clock paused). An error says what went wrong, with the seed's log.
pub async fn run(seed: u64) -> Result<NetReport, String> {
    // In memory when the machine has a tmpfs there: the server's syncs then cost nothing.
    let shm = std::path::Path::new(SHM_DIR);
    let mut dir = tempfile::Builder::new();
    dir.prefix("weft-netsim-");
    let dir = if shm.is_dir() { dir.tempdir_in(shm).or_else(|_| dir.tempdir()) } else { dir.tempdir() }
        .map_err(|e| format!("seed {seed}: no temporary directory: {e}"))?;
    let wire = SimWire::new(seed);
    let network = weft_rpc::Network::with_wire(Arc::new(wire.clone()));
    let config = ServerConfig {
        lock_timeout_ms: LOCK_TIMEOUT_MS,
        ..ServerConfig::all_in_one(dir.path().join("data"), vec![0, 1])
    };
    let server = RunningServer::start_on(config, network.clone())
        .await
        .map_err(|e| format!("seed {seed}: the server did not start: {e:#}"))?;
    let result = Sim::start(seed, server.mgs_address(), &network, wire.clone(), NETWORK).await;
    let result = match result {
        Ok(mut sim) => {
            let played = sim.play().await;
            let report = sim.report(server.exports().evictions());
            played.map(|()| report.clone()).map_err(|e| format!("{e} ({} evictions)", report.evictions))
        }
        Err(e) => Err(e),
    };
    server.shutdown().await;
    result.map_err(|e| format!("seed {seed}: {e}\n--- log of seed {seed} ---\n{}", wire.log()))
}

/// One seed's workload and its checks (this module's, and the replicated MDT's in
/// `crate::raft`, which plays it op by op with [`Sim::step`]).
pub(crate) struct Sim {
    seed: u64,
    settings: Settings,
    rng: Rng,
    wire: SimWire,
    /// The two clients the faults play on, and the checking client.
    clients: [Arc<Client>; 2],
    checker: Arc<Client>,
    who: Caller,
    dirs: Vec<Fid>,
    files: BTreeMap<String, FileModel>,
    /// The file each client last wrote (where it holds a write lock).
    last_written: [Option<String>; 2],
    pub ops: usize,
    pub acknowledged: usize,
    pub failed: usize,
}

/// Errors the network causes: the operation may or may not have been done.
fn by_network(e: &WeftError) -> bool {
    matches!(e.code, ErrorCode::Io | ErrorCode::TimedOut | ErrorCode::Evicted)
}

/// Every path the workload may use.
pub(crate) fn all_paths() -> Vec<String> {
    DIRS.iter().flat_map(|d| (0..NAMES_PER_DIR).map(move |n| format!("{d}/f{n}"))).collect()
}

fn split(path: &str) -> (usize, &str) {
    let (dir, name) = path.split_once('/').unwrap_or(("d0", path));
    (DIRS.iter().position(|d| *d == dir).unwrap_or(0), name)
}

impl Sim {
    pub(crate) async fn start(
        seed: u64,
        mgs_address: String,
        network: &Arc<weft_rpc::Network>,
        wire: SimWire,
        settings: Settings,
    ) -> Result<Sim, String> {
        let config = ClientConfig {
            request_timeout: Duration::from_millis(settings.request_timeout_ms),
            network: Some(network.clone()),
            ..ClientConfig::new(mgs_address)
        };
        let connect = |config: ClientConfig| async move {
            Client::connect(config).await.map_err(|e| format!("a client did not connect: {e}"))
        };
        let checker = connect(ClientConfig {
            request_timeout: Duration::from_millis(settings.checker_request_timeout_ms),
            ..config.clone()
        })
        .await?;
        wire.quiet(checker.client_id());
        wire.name(checker.client_id(), "C");
        let clients = [connect(config.clone()).await?, connect(config).await?];
        let who = Caller::root();
        let mut dirs = Vec::new();
        for d in DIRS {
            let inode =
                checker.mkdir(&who, Fid::ROOT, d.as_bytes(), 0o755).await.map_err(|e| format!("mkdir {d}: {e}"))?;
            dirs.push(inode.attr.fid);
        }
        let sim = Sim {
            seed,
            settings,
            rng: Rng(seed),
            wire,
            clients,
            checker,
            who,
            dirs,
            files: BTreeMap::new(),
            last_written: [None, None],
            ops: 0,
            acknowledged: 0,
            failed: 0,
        };
        sim.name_clients();
        Ok(sim)
    }

    fn name_clients(&self) {
        for (i, c) in self.clients.iter().enumerate() {
            self.wire.name(c.client_id(), if i == 0 { "A" } else { "B" });
        }
    }

    fn report(&self, evictions: u64) -> NetReport {
        NetReport {
            seed: self.seed,
            ops: self.ops,
            acknowledged: self.acknowledged,
            failed_by_network: self.failed,
            evictions,
            counts: self.wire.counts(),
            log: self.wire.log(),
        }
    }

    pub(crate) fn note(&self, line: String) {
        self.wire.note(line);
    }

    async fn play(&mut self) -> Result<(), String> {
        for _ in 0..WORKLOAD_OPS {
            self.step().await?;
        }
        self.finish().await
    }

    /// Waits for every delivery and held copy, then checks every name, mode and byte.
    pub(crate) async fn finish(&mut self) -> Result<(), String> {
        self.settle().await;
        self.check_everything().await
    }

    /// One operation of the workload by either client (with, by the seed, a partition or a
    /// pause of that client first), checked as it ends.
    pub(crate) async fn step(&mut self) -> Result<(), String> {
        self.name_clients();
        let x = self.rng.below(2);
        if self.rng.chance(self.settings.partition_percent) {
            let period = Duration::from_millis(self.rng.between(200, PARTITION_MS_MAX));
            self.wire.partition(self.clients[x].client_id(), period);
        }
        if self.rng.chance(self.settings.pause_percent) {
            if let Some(path) = self.last_written[x].clone().filter(|p| self.files.contains_key(p)) {
                // Paused past its lock timeout while the other client reads its file.
                let period = Duration::from_millis(LOCK_TIMEOUT_MS + self.rng.between(1_000, 3_000));
                self.wire.pause(self.clients[x].client_id(), period);
                self.ops += 1;
                let reader = 1 - x;
                self.note(format!("{} reads {path} while {} is paused", name_of(reader), name_of(x)));
                self.read(reader, &path).await?;
                self.name_clients();
                return Ok(());
            }
        }
        self.ops += 1;
        let roll = self.rng.below(100);
        let paths: Vec<String> = self.files.keys().cloned().collect();
        let existing = (!paths.is_empty()).then(|| paths[self.rng.below(paths.len())].clone());
        let free = self.free_path();
        match (roll, existing, free) {
            (0..=24, _, Some(path)) | (_, None, Some(path)) => self.create(x, &path).await?,
            (25..=54, Some(path), _) => self.write(x, &path).await?,
            (55..=74, Some(path), _) => self.read(x, &path).await?,
            (75..=84, Some(path), Some(to)) => self.rename(x, &path, &to).await?,
            (85..=91, Some(path), _) => self.unlink(x, &path).await?,
            (_, Some(path), _) => self.chmod(x, &path).await?,
            (_, None, None) => {}
        }
        Ok(())
    }

    /// The names and modes acknowledged now, by path (what a stale read would contradict).
    pub(crate) fn acknowledged_names(&self) -> BTreeMap<String, (Fid, u32)> {
        self.files.iter().map(|(p, f)| (p.clone(), (f.fid, f.mode))).collect()
    }

    /// The directory FID and the name of `path`.
    pub(crate) fn place(&self, path: &str) -> (Fid, String) {
        let (d, name) = split(path);
        (self.dirs[d], name.to_string())
    }

    /// A name the model does not hold, if any.
    fn free_path(&mut self) -> Option<String> {
        let free: Vec<String> = DIRS
            .iter()
            .flat_map(|d| (0..NAMES_PER_DIR).map(move |n| format!("{d}/f{n}")))
            .filter(|p| !self.files.contains_key(p))
            .collect();
        (!free.is_empty()).then(|| free[self.rng.below(free.len())].clone())
    }

    /// Waits until no delivery is at a server and every held copy has arrived.
    async fn settle(&self) {
        let until = tokio::time::Instant::now() + Duration::from_millis(SETTLE_MS_MAX);
        while (self.wire.in_flight() > 0 || self.wire.held_in_flight() > 0) && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until no delivery is at a server (held copies may still come).
    async fn settle_deliveries(&self) {
        let until = tokio::time::Instant::now() + Duration::from_millis(SETTLE_MS_MAX);
        while self.wire.in_flight() > 0 && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The outcome of one operation: acknowledged (Ok(true)), failed by the network
    /// (Ok(false): to be looked at), or an error that is a finding.
    fn outcome(&mut self, what: &str, result: WeftResult<()>) -> Result<bool, String> {
        match result {
            Ok(()) => {
                self.acknowledged += 1;
                self.note(format!("{what}: acknowledged"));
                Ok(true)
            }
            Err(e) if by_network(&e) => {
                self.failed += 1;
                self.note(format!("{what}: failed by the network ({:?}: {})", e.code, e.message));
                Ok(false)
            }
            Err(e) => Err(format!("{what}: answered {:?} ({}), which no fault explains", e.code, e.message)),
        }
    }

    async fn create(&mut self, x: usize, path: &str) -> Result<(), String> {
        let (d, name) = split(path);
        let (client, who, parent) = (self.clients[x].clone(), self.who.clone(), self.dirs[d]);
        let mut fid = None;
        let result = async {
            let opened = client.create(&who, parent, name.as_bytes(), 0o644, true, None, OPEN_WRITE).await?;
            fid = Some(opened.inode.attr.fid);
            // The close is not the create's: a failed one only leaves an open handle.
            let _ = client.close(&who, opened.inode.attr.fid, opened.handle, None).await;
            Ok(())
        }
        .await;
        let what = format!("{} create {path}", name_of(x));
        if self.outcome(&what, result)? {
            let fid = fid.ok_or("a create acknowledged without a FID")?;
            self.files.insert(path.to_string(), FileModel { fid, mode: 0o644, data: Vec::new() });
            return Ok(());
        }
        self.settle_deliveries().await;
        match self.look(path).await? {
            None => self.note(format!("  C: {path} absent (not done)")),
            Some(inode) => {
                let data = self.read_as_checker(path, &inode).await?;
                if !data.is_empty() || inode.attr.mode & 0o7777 != 0o644 {
                    return Err(format!(
                        "{what} failed, and left {path} with {} bytes, mode {:o}",
                        data.len(),
                        inode.attr.mode
                    ));
                }
                self.note(format!("  C: {path} present (done)"));
                self.files.insert(path.to_string(), FileModel { fid: inode.attr.fid, mode: 0o644, data });
            }
        }
        Ok(())
    }

    async fn write(&mut self, x: usize, path: &str) -> Result<(), String> {
        let (d, name) = split(path);
        let offset = self.rng.between(0, WRITE_OFFSET_MAX);
        let len = self.rng.between(1, WRITE_BYTES_MAX) as usize;
        let data = Bytes::from(self.rng.bytes(len));
        let (client, who, parent) = (self.clients[x].clone(), self.who.clone(), self.dirs[d]);
        let sent = data.clone();
        let result = async {
            let inode = client.lookup(&who, parent, name.as_bytes()).await?;
            let fid = inode.attr.fid;
            let opened = client.open(&who, fid, OPEN_WRITE).await?;
            let mut layout = opened.inode.layout.clone().ok_or_else(|| WeftError::io("no layout"))?;
            if let Some(inode) = client.instantiate(&who, fid, &layout, offset, len as u64, Some(opened.handle)).await?
            {
                layout = inode.layout.ok_or_else(|| WeftError::io("no layout"))?;
            }
            let written = async {
                let locks = client.extent_lock(&who, fid, &layout, offset, len as u64, LockMode::Pw).await?;
                client.write(&who, &layout, offset, sent, &locks).await
            }
            .await;
            let glimpse = match &written {
                Ok(()) => client.glimpse_versioned(&who, &layout).await.ok(),
                Err(_) => None,
            };
            let closed = client.close(&who, fid, opened.handle, glimpse).await;
            written.and(closed)
        }
        .await;
        let what = format!("{} write {path} [{offset}, +{len})", name_of(x));
        let old = self.files.get(path).map(|f| f.data.clone()).unwrap_or_default();
        let mut new = old.clone();
        let end = offset as usize + len;
        if new.len() < end {
            new.resize(end, 0);
        }
        new[offset as usize..end].copy_from_slice(&data);
        self.last_written[x] = Some(path.to_string());
        if self.outcome(&what, result)? {
            if let Some(f) = self.files.get_mut(path) {
                f.data = new;
            }
            return Ok(());
        }
        self.settle_deliveries().await;
        let Some(inode) = self.look(path).await? else {
            return Err(format!("{what} failed, and {path} is gone"));
        };
        let seen = self.read_as_checker(path, &inode).await?;
        if seen == new {
            self.note(format!("  C: {path} has the write (done)"));
            if let Some(f) = self.files.get_mut(path) {
                f.data = new;
            }
        } else if seen == old {
            self.note(format!("  C: {path} has not the write (not done)"));
        } else {
            return Err(format!("{what} failed, and left {path} {}", difference(&seen, &old)));
        }
        Ok(())
    }

    async fn read(&mut self, x: usize, path: &str) -> Result<(), String> {
        let (d, name) = split(path);
        let (client, who, parent) = (self.clients[x].clone(), self.who.clone(), self.dirs[d]);
        let result = async {
            let inode = client.lookup(&who, parent, name.as_bytes()).await?;
            read_file(&client, &who, &inode).await
        }
        .await;
        let what = format!("{} read {path}", name_of(x));
        match result {
            Ok(seen) => {
                let expected = &self.files[path].data;
                if &seen != expected {
                    return Err(format!("{what}: {}", difference(&seen, expected)));
                }
                self.acknowledged += 1;
                self.note(format!("{what}: {} bytes, as acknowledged", seen.len()));
                Ok(())
            }
            Err(e) => self.outcome(&what, Err(e)).map(|_| ()),
        }
    }

    async fn rename(&mut self, x: usize, from: &str, to: &str) -> Result<(), String> {
        let ((fd, fname), (td, tname)) = (split(from), split(to));
        let (client, who) = (self.clients[x].clone(), self.who.clone());
        let result = client.rename(&who, self.dirs[fd], fname.as_bytes(), self.dirs[td], tname.as_bytes(), 0).await;
        let what = format!("{} rename {from} -> {to}", name_of(x));
        let done = if self.outcome(&what, result)? {
            true
        } else {
            self.settle_deliveries().await;
            let fid = self.files[from].fid;
            match (self.look(from).await?, self.look(to).await?) {
                (Some(f), None) if f.attr.fid == fid => false,
                (None, Some(t)) if t.attr.fid == fid => true,
                (f, t) => {
                    return Err(format!("{what} failed, and left {from} {} and {to} {}", present(&f), present(&t)))
                }
            }
        };
        if done {
            if let Some(f) = self.files.remove(from) {
                self.files.insert(to.to_string(), f);
            }
            for w in self.last_written.iter_mut().filter(|w| w.as_deref() == Some(from)) {
                *w = Some(to.to_string());
            }
        }
        Ok(())
    }

    async fn unlink(&mut self, x: usize, path: &str) -> Result<(), String> {
        let (d, name) = split(path);
        let (client, who) = (self.clients[x].clone(), self.who.clone());
        let result = client.unlink(&who, self.dirs[d], name.as_bytes()).await;
        let what = format!("{} unlink {path}", name_of(x));
        let done = if self.outcome(&what, result)? {
            true
        } else {
            self.settle_deliveries().await;
            self.look(path).await?.is_none()
        };
        if done {
            self.files.remove(path);
        }
        Ok(())
    }

    async fn chmod(&mut self, x: usize, path: &str) -> Result<(), String> {
        let (d, name) = split(path);
        let mode = [0o600, 0o640, 0o644, 0o664, 0o700, 0o755][self.rng.below(6)];
        let (client, who, parent) = (self.clients[x].clone(), self.who.clone(), self.dirs[d]);
        let result = async {
            let fid = client.lookup(&who, parent, name.as_bytes()).await?.attr.fid;
            client.setattr(&who, fid, SetAttr { mode: Some(mode), ..SetAttr::default() }).await.map(|_| ())
        }
        .await;
        let what = format!("{} chmod {mode:o} {path}", name_of(x));
        let old = self.files[path].mode;
        if self.outcome(&what, result)? {
            if let Some(f) = self.files.get_mut(path) {
                f.mode = mode;
            }
            return Ok(());
        }
        self.settle_deliveries().await;
        let seen = self.look(path).await?.map(|i| i.attr.mode & 0o7777);
        match seen {
            Some(m) if m == mode => {
                if let Some(f) = self.files.get_mut(path) {
                    f.mode = mode;
                }
            }
            Some(m) if m == old => {}
            other => return Err(format!("{what} failed, and left {path} with mode {other:?} (was {old:o})")),
        }
        Ok(())
    }

    /// The checking client's lookup: None when the name does not exist.
    async fn look(&self, path: &str) -> Result<Option<InodeInfo>, String> {
        let (d, name) = split(path);
        match self.checker.lookup(&self.who, self.dirs[d], name.as_bytes()).await {
            Ok(inode) => Ok(Some(inode)),
            Err(e) if e.code == ErrorCode::NotFound => Ok(None),
            Err(e) => Err(format!("the checking client could not look up {path}: {e}")),
        }
    }

    async fn read_as_checker(&self, path: &str, inode: &InodeInfo) -> Result<Vec<u8>, String> {
        read_file(&self.checker, &self.who, inode)
            .await
            .map_err(|e| format!("the checking client could not read {path}: {e}"))
    }

    /// Every name, mode and byte against the model; no other name.
    async fn check_everything(&mut self) -> Result<(), String> {
        for (d, dir) in DIRS.iter().enumerate() {
            let mut names = Vec::new();
            let mut cookie = 0;
            loop {
                let page = self
                    .checker
                    .readdir(&self.who, self.dirs[d], cookie, 256)
                    .await
                    .map_err(|e| format!("the checking client could not list {dir}: {e}"))?;
                for e in &page.entries {
                    let n = String::from_utf8_lossy(&e.name).into_owned();
                    if n != "." && n != ".." {
                        names.push(format!("{dir}/{n}"));
                    }
                    cookie = e.cookie;
                }
                if page.eof || page.entries.is_empty() {
                    break;
                }
            }
            names.sort();
            let expected: Vec<String> =
                self.files.keys().filter(|p| p.starts_with(&format!("{dir}/"))).cloned().collect();
            if names != expected {
                return Err(format!("{dir} holds {names:?}, not the acknowledged {expected:?}"));
            }
        }
        for (path, file) in &self.files {
            let inode = self.look(path).await?.ok_or_else(|| format!("{path} is gone"))?;
            if inode.attr.fid != file.fid || inode.attr.mode & 0o7777 != file.mode {
                return Err(format!(
                    "{path} is {} mode {:o}, not {} mode {:o} as acknowledged",
                    inode.attr.fid, inode.attr.mode, file.fid, file.mode
                ));
            }
            let seen = self.read_as_checker(path, &inode).await?;
            if seen != file.data {
                return Err(format!("at the end, {path}: {}", difference(&seen, &file.data)));
            }
        }
        self.note(format!("checked: {} files, every name, mode and byte as acknowledged", self.files.len()));
        Ok(())
    }
}

/// A file's bytes under a read lock over all of it, its size from its objects.
async fn read_file(client: &Client, who: &Caller, inode: &InodeInfo) -> WeftResult<Vec<u8>> {
    let layout = inode.layout.clone().ok_or_else(|| WeftError::io("no layout"))?;
    let fid = inode.attr.fid;
    let _locks = client.extent_lock(who, fid, &layout, 0, u64::MAX / 2, LockMode::Pr).await?;
    let (size, _) = client.glimpse(who, &layout).await?;
    let len = u32::try_from(size).map_err(|_| WeftError::io("a file too large for the simulation"))?;
    Ok(client.read(who, &layout, 0, len, size).await?.to_vec())
}

fn name_of(x: usize) -> &'static str {
    if x == 0 {
        "A"
    } else {
        "B"
    }
}

fn present(i: &Option<InodeInfo>) -> String {
    match i {
        Some(i) => format!("present ({})", i.attr.fid),
        None => "absent".into(),
    }
}

/// How `seen` differs from `expected`, as a person reads it.
fn difference(seen: &[u8], expected: &[u8]) -> String {
    let first = seen.iter().zip(expected).position(|(a, b)| a != b).unwrap_or(seen.len().min(expected.len()));
    format!("{} bytes, not the {} acknowledged (first difference at byte {first})", seen.len(), expected.len())
}
