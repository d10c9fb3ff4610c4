//! `weft up --replicas N`: a replicated MGS and MDT on one machine to try it. Each server
//! process `weft server --config DATA/replicas/rK.toml` holds a replica of the management
//! service and one of the MDT (so that one can be killed), started and watched by the `weft
//! up` process, which runs the OSTs and the mount. A replica process that dies is started
//! again after a pause (it catches up from its group), so a test or a curious admin can
//! kill the leader again and again; `weft down` stops them all.
//!
//! The group's members are addresses, so every process of a replicated file system listens
//! on a port chosen free when the file system was made and kept in its config.

use crate::daemon;
use crate::limits::{DATA_OFF_MDT_DESTROY_WAIT_S, DOWN_KILL_SETTLE_MS, DOWN_POLL_MS, DOWN_WAIT_S, REPLICA_RESTART_MS};
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use weft_server::config::{MdsRole, MgsRole};
use weft_server::ServerConfig;

/// One replica's process, as the run state records it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReplicaProcess {
    pub pid: u32,
    /// Its id in the MDT's group (1-based).
    pub replica: u64,
    pub address: String,
    pub config: PathBuf,
    pub log: PathBuf,
}

/// The replicas' configs of the file system in `data`, by replica id; empty for a file
/// system with a single MDT.
pub fn configs(data: &Path) -> anyhow::Result<Vec<(PathBuf, ServerConfig)>> {
    let dir = data.join("replicas");
    let mut out = Vec::new();
    for k in 1.. {
        let path = dir.join(format!("r{k}.toml"));
        if !path.exists() {
            break;
        }
        out.push((path.clone(), ServerConfig::load(&path)?));
    }
    Ok(out)
}

/// The configs of the further MDTs of a file system made with `weft up --mdts N`, in index
/// order (`DATA/mdts/mdtNNNN.toml`, MDT1 on).
pub fn mdt_configs(data: &Path) -> anyhow::Result<Vec<(PathBuf, ServerConfig)>> {
    let dir = data.join("mdts");
    let mut out = Vec::new();
    for n in 1..weft_proto::fid::MDT_COUNT_MAX {
        let path = dir.join(format!("mdt{n:04x}.toml"));
        if !path.exists() {
            break;
        }
        out.push((path.clone(), ServerConfig::load(&path)?));
    }
    Ok(out)
}

/// What `weft up` says of its MDTs: one, one replicated, or several.
pub fn mdts_text(data: &Path, processes: &[ReplicaProcess]) -> String {
    let replicas = processes.iter().filter(|p| extra_mdt(data, &p.config).is_none()).count();
    match (replicas, processes.len() - replicas + 1) {
        (0, 1) => "1 MDT".to_string(),
        (0, n) => format!("{n} MDTs (each past MDT0 in a process of its own)"),
        (n, _) => format!("1 MDT ({n} replicas, a process each)"),
    }
}

/// The MDT a process of `weft up --mdts` serves, from its config's name (`DATA/mdts/mdtNNNN.toml`).
pub fn extra_mdt(data: &Path, config: &Path) -> Option<u32> {
    let name = config.strip_prefix(data.join("mdts")).ok()?.file_stem()?.to_str()?;
    u32::from_str_radix(name.strip_prefix("mdt")?, 16).ok()
}

/// Makes the configs of a new file system with `n` MDTs: `main` (the `weft up` process:
/// the management service, MDT0 and the OSTs) listens on a fixed port now, and MDT1..n-1
/// each get a server process of their own (a directory and a config under `data/mdts`),
/// which reach the management service at `main`'s address.
pub fn plan_mdts(data: &Path, main: &mut ServerConfig, n: u32) -> anyhow::Result<()> {
    let addresses = free_addresses(n as usize)?;
    main.listen = addresses[0].clone();
    main.mgs_address = main.listen.clone();
    let dir = data.join("mdts");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (k, address) in addresses.iter().enumerate().skip(1) {
        let mut c = ServerConfig::all_in_one(dir.join(format!("mdt{k:04x}")), Vec::new());
        c.fsname.clone_from(&main.fsname);
        c.listen = address.clone();
        c.mgs_address = main.mgs_address.clone();
        c.mgs = None;
        c.oss = None;
        c.mds = Some(MdsRole { index: k as u32, replicas: Vec::new(), join: false });
        c.lock_timeout_ms = main.lock_timeout_ms;
        std::fs::write(dir.join(format!("mdt{k:04x}.toml")), toml::to_string_pretty(&c)?)?;
    }
    Ok(())
}

/// Addresses on loopback that nothing listens on now.
pub fn free_addresses(n: usize) -> anyhow::Result<Vec<String>> {
    let listeners = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()
        .context("cannot find free ports on 127.0.0.1")?;
    listeners.iter().map(|l| Ok(l.local_addr()?.to_string())).collect()
}

/// Makes the configs of a new replicated file system: `main` (the `weft up` process: the
/// management service and the OSTs, no MDT) listens on a fixed port now, and each of the
/// `n` replicas gets a directory and a config under `data/replicas`.
pub fn plan(data: &Path, main: &mut ServerConfig, n: u32) -> anyhow::Result<()> {
    if n.is_multiple_of(2) {
        bail!("--replicas {n}: a group needs an odd number of replicas (1, 3, 5, 7) so that a majority outlives a minority");
    }
    let addresses = free_addresses(n as usize + 1)?;
    let replicas: Vec<String> = addresses[1..].to_vec();
    // The management service is replicated with the MDT, a replica of each per process;
    // every process finds its leader through the list.
    main.listen = addresses[0].clone();
    main.mgs_address = replicas.join(",");
    main.mgs = None;
    main.mds = None;
    let dir = data.join("replicas");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (k, address) in replicas.iter().enumerate() {
        let mut c = ServerConfig::all_in_one(dir.join(format!("r{}", k + 1)), Vec::new());
        c.fsname.clone_from(&main.fsname);
        c.listen = address.clone();
        c.mgs_address = main.mgs_address.clone();
        c.mgs = Some(MgsRole { replicas: replicas.clone(), join: false });
        c.oss = None;
        c.mds = Some(MdsRole { index: 0, replicas: replicas.clone(), join: false });
        c.lock_timeout_ms = main.lock_timeout_ms;
        // Each replica keeps its own history of the monitor: the dashboard (served by the
        // main process) shows the leader's, which holds what happened before it led.
        c.monitor_interval_s = main.monitor_interval_s;
        std::fs::write(dir.join(format!("r{}.toml", k + 1)), toml::to_string_pretty(&c)?)?;
    }
    Ok(())
}

/// Told the replica processes after one was started again (the run state follows them).
pub type OnChange = Box<dyn Fn(&[ReplicaProcess]) + Send>;

/// Turns the single MDT of the file system in `data` into `n` replicas (`weft up
/// --replicas N` on a file system made without): its journal is folded into its store, the
/// store copied into each replica's directory (every replica starts from the same state,
/// with an empty group log), the configs written as [`plan`] makes them, and the single
/// MDT's directory kept beside them as `mdtNNNN.single`. Files that keep data on the MDT
/// (`-L mdt` layouts) have it moved to OSTs first ([`move_data_off_mdt`]): a replicated MDT
/// keeps no file data.
pub fn convert(data: &Path, main: &mut ServerConfig, n: u32) -> anyhow::Result<()> {
    let index = main.mds.as_ref().map_or(0, |m| m.index);
    if index != 0 {
        bail!("--replicas: only MDT0000 can be replicated by weft up");
    }
    let dir = data.join("mdt0000");
    let fold = || -> anyhow::Result<()> {
        // The journal folded into the store: what a restart would replay.
        drop(weft_mds::replica::Replica::open(dir.clone(), index).map_err(|e| anyhow::anyhow!("{}", e.message))?);
        Ok(())
    };
    fold()?;
    if files_under(&dir.join("dom").join("O"))? > 0 {
        move_data_off_mdt(&dir, main)?;
        fold()?;
    }
    let had_mgs = main.mgs.is_some();
    plan(data, main, n)?;
    for k in 1..=n {
        let replica = data.join("replicas").join(format!("r{k}"));
        let to = replica.join("mdt0000");
        copy_dir(&dir, &to).with_context(|| format!("cannot copy the MDT into {}", to.display()))?;
        if had_mgs {
            // The cluster map (and the monitor's history) go with the management service.
            let to = replica.join("mgs");
            copy_dir(&data.join("mgs"), &to).with_context(|| format!("cannot copy the MGS into {}", to.display()))?;
        }
    }
    if had_mgs {
        let kept = data.join("mgs.single");
        std::fs::rename(data.join("mgs"), &kept)
            .with_context(|| format!("cannot keep the MGS as {}", kept.display()))?;
    }
    let kept = data.join("mdt0000.single");
    std::fs::rename(&dir, &kept).with_context(|| format!("cannot keep the single MDT as {}", kept.display()))?;
    Ok(())
}

/// Moves the data of every file that keeps some on the MDT `dir` to an OST, the file
/// system started meanwhile as it is (one MDT, in this process): each such file is migrated
/// to the same shape with its MDT component on one OST (`Layout::shape`,
/// `StripeSpec::off_mdt`), and the MDT's data objects are destroyed once no layout names
/// them. Fails, changing nothing more, when a file cannot be moved (the conversion stops
/// there; the file system is as it was, with the files moved so far on OSTs).
fn move_data_off_mdt(dir: &Path, config: &ServerConfig) -> anyhow::Result<()> {
    let fids = weft_mds::files_with_data_on_mdt(dir).map_err(|e| anyhow::anyhow!("{}", e.message))?;
    eprintln!("weft: moving the data of {} files from the MDT to OSTs (a replicated MDT keeps none)", fids.len());
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async {
        let server = weft_server::RunningServer::start(config.clone()).await?;
        let moved = async {
            let client_config = weft_client::ClientConfig {
                network: Some(server.network().clone()),
                ..weft_client::ClientConfig::new(server.mgs_address())
            };
            let client = weft_client::Client::connect(client_config).await.map_err(|e| anyhow::anyhow!("{}", e.message))?;
            let root = weft_proto::msg::Caller::root();
            for fid in fids {
                let (layout, _) = client.getstripe(&root, fid).await.map_err(|e| anyhow::anyhow!("{fid}: {}", e.message))?;
                let Some(spec) = layout.and_then(|l| l.shape().off_mdt()) else { continue };
                client.migrate(&root, fid, &spec).await.map_err(|e| anyhow::anyhow!("moving {fid} to an OST: {}", e.message))?;
            }
            client.release_locks().await;
            // The old objects go as the MDS works through its destroy queue.
            let deadline = Instant::now() + Duration::from_secs(DATA_OFF_MDT_DESTROY_WAIT_S);
            while files_under(&dir.join("dom").join("O"))? > 0 {
                if Instant::now() > deadline {
                    bail!("the MDT's data objects were not destroyed within {DATA_OFF_MDT_DESTROY_WAIT_S} s after their files moved");
                }
                tokio::time::sleep(Duration::from_millis(DOWN_POLL_MS)).await;
            }
            anyhow::Ok(())
        }
        .await;
        server.shutdown().await;
        moved
    })
}

/// Object files below `dir`, an object target's `O` (none when it does not exist): every
/// regular file but the target's own records (LAST_ID, COMMITTED): an object's file is made
/// by its first write, so a file here is data.
fn files_under(dir: &Path) -> anyhow::Result<usize> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(0) };
    let mut n = 0;
    for e in entries {
        let e = e?;
        let record = weft_oss::store::is_record_file(&e.file_name());
        n += if e.file_type()?.is_dir() { files_under(&e.path())? } else { usize::from(!record) };
    }
    Ok(n)
}

/// Copies the MDT's directory `from` into `to` (made), but not its data-on-MDT objects.
fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_type()?.is_dir() {
            if e.file_name() != "dom" {
                copy_dir(&src, &dst)?;
            }
        } else {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// The replica processes of a running `weft up`, kept running until [`Supervisor::stop`].
pub struct Supervisor {
    inner: Arc<Mutex<Inner>>,
    watcher: Option<std::thread::JoinHandle<()>>,
}

struct Inner {
    children: Vec<(ReplicaProcess, Child)>,
    stopping: bool,
    on_change: OnChange,
}

fn start(replica: u64, config: &Path, address: &str) -> anyhow::Result<(ReplicaProcess, Child)> {
    let log = config.with_extension("log");
    let args = vec!["server".to_string(), "--config".into(), config.to_string_lossy().into_owned()];
    let env = extra_env(&config.with_extension("env"))?;
    let child = daemon::spawn_self_with_env(&args, &log, &env)?;
    let p =
        ReplicaProcess { pid: child.id(), replica, address: address.to_string(), config: config.to_path_buf(), log };
    Ok((p, child))
}

/// The environment one replica's process gets besides `weft up`'s: `KEY=VALUE` lines of
/// `DATA/replicas/rK.env` if there is one (blank lines and `#` comments skipped), read at
/// each start. It runs one replica differently from the others, e.g. with its own `WEFT_LOG`,
/// or under libfaketime (`weft-cli/tests/clock_jump.rs`).
fn extra_env(path: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut env = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => env.push((key.trim().to_string(), value.to_string())),
            _ => bail!("{} line {}: not KEY=VALUE: {line}", path.display(), n + 1),
        }
    }
    Ok(env)
}

impl Supervisor {
    /// Starts a process per replica config and watches them.
    pub fn start(configs: &[(PathBuf, ServerConfig)], on_change: OnChange) -> anyhow::Result<Supervisor> {
        let mut children = Vec::new();
        for (k, (path, c)) in configs.iter().enumerate() {
            children.push(start(k as u64 + 1, path, &c.listen)?);
        }
        let inner = Arc::new(Mutex::new(Inner { children, stopping: false, on_change }));
        let watched = inner.clone();
        let watcher = std::thread::Builder::new()
            .name("replica-watch".into())
            .spawn(move || watch(watched))
            .context("cannot start the replicas' watcher")?;
        Ok(Supervisor { inner, watcher: Some(watcher) })
    }

    pub fn processes(&self) -> Vec<ReplicaProcess> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).children.iter().map(|(p, _)| p.clone()).collect()
    }

    /// Stops every replica (SIGTERM, then SIGKILL after DOWN_WAIT_S) and the watcher.
    pub fn stop(mut self) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.stopping = true;
        for (p, child) in &mut inner.children {
            if let Ok(None) = child.try_wait() {
                // SAFETY: plain kill(2) on a child of ours that has not been reaped.
                unsafe { libc::kill(p.pid as i32, libc::SIGTERM) };
            }
        }
        let start = Instant::now();
        // Our own children: reaped as they exit (a zombie would look alive to kill(2)).
        while inner.children.iter_mut().any(|(_, c)| matches!(c.try_wait(), Ok(None)))
            && start.elapsed() < Duration::from_secs(DOWN_WAIT_S)
        {
            std::thread::sleep(Duration::from_millis(DOWN_POLL_MS));
        }
        for (p, child) in &mut inner.children {
            if let Ok(None) = child.try_wait() {
                tracing::warn!(
                    replica = p.replica,
                    pid = p.pid,
                    "an MDT replica did not stop within {DOWN_WAIT_S} s; killing it"
                );
                let _ = child.kill();
            }
            let _ = child.wait();
        }
        drop(inner);
        if let Some(w) = self.watcher.take() {
            let _ = w.join();
        }
    }
}

/// Starts again, after a pause, every replica process that exited.
fn watch(inner: Arc<Mutex<Inner>>) {
    let mut died_at: Vec<Option<Instant>> = Vec::new();
    loop {
        std::thread::sleep(Duration::from_millis(DOWN_POLL_MS));
        let mut guard = inner.lock().unwrap_or_else(|p| p.into_inner());
        if guard.stopping {
            return;
        }
        died_at.resize(guard.children.len(), None);
        let mut changed = false;
        for (i, (p, child)) in guard.children.iter_mut().enumerate() {
            match (child.try_wait(), died_at[i]) {
                (Ok(Some(status)), None) => {
                    tracing::warn!(replica = p.replica, pid = p.pid, %status, "an MDT replica's process exited; starting it again shortly");
                    died_at[i] = Some(Instant::now());
                }
                (Ok(Some(_)), Some(at)) if at.elapsed() >= Duration::from_millis(REPLICA_RESTART_MS) => {
                    match start(p.replica, &p.config.clone(), &p.address.clone()) {
                        Ok((np, nc)) => {
                            tracing::info!(
                                replica = np.replica,
                                pid = np.pid,
                                "started an MDT replica's process again"
                            );
                            *p = np;
                            *child = nc;
                            died_at[i] = None;
                            changed = true;
                        }
                        Err(e) => tracing::warn!(error = %e, "cannot start an MDT replica's process again"),
                    }
                }
                _ => {}
            }
        }
        if changed {
            let procs: Vec<ReplicaProcess> = guard.children.iter().map(|(p, _)| p.clone()).collect();
            (guard.on_change)(&procs);
        }
    }
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    pid != 0 && unsafe { libc::kill(pid as i32, 0) } == 0
}

/// SIGTERM to each (not children of this process: `weft down`'s), then SIGKILL to those
/// still there after DOWN_WAIT_S.
pub fn stop_pids(pids: &[u32]) {
    for &pid in pids.iter().filter(|&&p| alive(p)) {
        // SAFETY: plain kill(2) on a pid this program started.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    }
    let start = Instant::now();
    while pids.iter().any(|&p| alive(p)) && start.elapsed() < Duration::from_secs(DOWN_WAIT_S) {
        std::thread::sleep(Duration::from_millis(DOWN_POLL_MS));
    }
    for &pid in pids.iter().filter(|&&p| alive(p)) {
        eprintln!("weft: pid {pid} did not stop within {DOWN_WAIT_S} s; killing it");
        // SAFETY: as above.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        std::thread::sleep(Duration::from_millis(DOWN_KILL_SETTLE_MS));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replicas_env_file_holds_key_value_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r2.env");
        assert!(extra_env(&path).unwrap().is_empty(), "no file: nothing added");
        std::fs::write(&path, "# one replica under libfaketime\n\nLD_PRELOAD=/lib/x.so\nFAKETIME= +1h \n").unwrap();
        let want = [("LD_PRELOAD", "/lib/x.so"), ("FAKETIME", " +1h")];
        let got = extra_env(&path).unwrap();
        assert_eq!(got, want.map(|(k, v)| (k.to_string(), v.to_string())));
        std::fs::write(&path, "LD_PRELOAD=/lib/x.so\nnot a setting\n").unwrap();
        let e = extra_env(&path).unwrap_err().to_string();
        assert!(e.contains("r2.env line 2: not KEY=VALUE"), "{e}");
    }
}
