//! `weft up`, `weft down`, `weft status`, `weft server`: running servers and the local
//! cluster. `weft up` runs every role and the mount in one process; its data directory keeps
//! the server config (`server.toml`), the data of each target, logs (`logs/`), and while it
//! runs a state file (`run/state.json`) that `down` and `status` read.

use crate::daemon;
use crate::limits::{STATUS_MGS_TIMEOUT_S, UNMOUNT_CHECK_INTERVAL_MS, UP_READY_TIMEOUT_S};
use crate::mount::{client_config, fuse_options, parse_options};
use anyhow::{anyhow, bail, Context};
use clap::Args;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;
use weft_server::{RunningServer, ServerConfig};

#[derive(Args)]
pub struct UpArgs {
    /// Where the file system keeps its data, config and logs.
    #[arg(long, default_value = "./weft-data", value_name = "DIR")]
    data: PathBuf,
    /// Where to mount it.
    #[arg(long, default_value = "./weft-mnt", value_name = "MNT")]
    mount: PathBuf,
    /// Number of OSTs for a new file system (an existing one keeps its own).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1000))]
    osts: u32,
    /// Replicas of the MDT, each in a server process of its own (odd: 1, 3, 5, 7; default
    /// 1). An existing file system with one MDT is made replicated, keeping its data; one
    /// with replicas keeps its own number.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=7))]
    replicas: Option<u32>,
    /// MDTs of a new file system (Lustre's DNE), MDT0 in this process and each further one
    /// in a server process of its own; directories go on them with `weft mkdir -i/-c`. An
    /// existing file system keeps its own.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=16))]
    mdts: Option<u32>,
    /// Return once the mount is usable, leaving the file system running in the background.
    #[arg(long)]
    detach: bool,
    /// Mount options, as `weft mount -o` takes them (e.g. passthrough=off).
    #[arg(short = 'o', value_name = "OPTIONS")]
    options: Option<String>,
}

#[derive(Args)]
pub struct DataArgs {
    /// The data directory given to `weft up`.
    #[arg(long, default_value = "./weft-data", value_name = "DIR")]
    data: PathBuf,
}

#[derive(Args)]
pub struct StatusArgs {
    #[arg(long, default_value = "./weft-data", value_name = "DIR")]
    data: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UpState {
    pub pid: u32,
    pub fsname: String,
    pub mgs_address: String,
    pub mount: PathBuf,
    pub data: PathBuf,
    pub log: PathBuf,
    /// The metrics endpoint (`http://ADDRESS/metrics`), if the servers serve one.
    #[serde(default)]
    pub metrics: Option<String>,
    /// The mount's `passthrough` option (auto, on, off).
    #[serde(default)]
    pub passthrough: Option<String>,
    /// The processes of the MDT's replicas (`--replicas`), started again when they die.
    #[serde(default)]
    pub replicas: Vec<crate::replicas::ReplicaProcess>,
}

fn state_path(data: &Path) -> PathBuf {
    data.join("run").join("state.json")
}

pub(crate) fn read_state(data: &Path) -> Option<UpState> {
    serde_json::from_slice(&std::fs::read(state_path(data)).ok()?).ok()
}

fn write_state(data: &Path, s: &UpState) -> anyhow::Result<()> {
    let p = state_path(data);
    std::fs::create_dir_all(p.parent().expect("state path has a parent"))?;
    let tmp = p.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(s)?)?;
    std::fs::rename(tmp, p)?;
    Ok(())
}

fn pid_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    pid != 0 && unsafe { libc::kill(pid as i32, 0) } == 0
}

fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(p).with_context(|| format!("cannot resolve {}", p.display()))
}

/// The config of the local file system in `data`: made on first use, read after.
fn local_config(data: &Path, osts: u32, replicas: Option<u32>, mdts: Option<u32>) -> anyhow::Result<ServerConfig> {
    let path = data.join("server.toml");
    if path.exists() {
        let mut c = ServerConfig::load(&path)?;
        let have = c.oss.as_ref().map_or(0, |o| o.osts.len());
        if have != osts as usize {
            eprintln!("weft: {} holds a file system with {have} OSTs; --osts {osts} is ignored", data.display());
        }
        let have = crate::replicas::configs(data)?.len().max(1);
        match replicas {
            Some(n) if have == 1 && n > 1 && c.mds.is_some() => {
                crate::replicas::convert(data, &mut c, n)?;
                std::fs::write(&path, toml::to_string_pretty(&c)?)?;
                eprintln!(
                    "weft: the MDT of {} is now a group of {n} replicas, each with the file system's metadata \
                     (the single MDT is kept as mdt0000.single)",
                    data.display()
                );
            }
            Some(n) if n as usize != have => eprintln!(
                "weft: {} holds a file system with {have} MDT replicas; --replicas {n} is ignored",
                data.display()
            ),
            _ => {}
        }
        let have = crate::replicas::mdt_configs(data)?.len() + 1;
        if mdts.is_some_and(|n| n as usize != have) {
            eprintln!("weft: {} holds a file system with {have} MDTs; --mdts is ignored", data.display());
        }
        return Ok(c);
    }
    let replicas = replicas.unwrap_or(1);
    let mdts = mdts.unwrap_or(1);
    if replicas > 1 && mdts > 1 {
        bail!("--replicas with --mdts: weft up replicates a file system with one MDT only (configure several replicated MDTs with weft server)");
    }
    let mut c = ServerConfig {
        // A free port on loopback, printed at start and kept in the run state.
        metrics_listen: Some("127.0.0.1:0".into()),
        monitor_interval_s: weft_server::limits::MONITOR_INTERVAL_S_DEFAULT,
        ..ServerConfig::all_in_one(data.to_path_buf(), (0..osts).collect())
    };
    if replicas > 1 {
        crate::replicas::plan(data, &mut c, replicas)?;
    }
    if mdts > 1 {
        crate::replicas::plan_mdts(data, &mut c, mdts)?;
    }
    std::fs::write(&path, toml::to_string_pretty(&c)?)?;
    Ok(c)
}

/// Waits until the MDTs are in the cluster map (a replicated MDT's leader registered it,
/// each further MDT's process did).
async fn wait_for_mdt(mgs: &str, data: &Path, mdts: usize) -> anyhow::Result<()> {
    let peers = weft_rpc::mgs::MgsPeers::new(mgs, weft_rpc::PeerOptions::default());
    let start = std::time::Instant::now();
    loop {
        let map = weft_rpc::map::fetch_map_from(&peers, Duration::from_secs(STATUS_MGS_TIMEOUT_S)).await;
        if map.is_ok_and(|m| m.mdts().count() >= mdts) {
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(crate::limits::REPLICA_LEADER_WAIT_S) {
            bail!(
                "not all {mdts} MDTs were up within {} s (the logs: {}/replicas/r*.log, {}/mdts/mdt*.log)",
                crate::limits::REPLICA_LEADER_WAIT_S,
                data.display(),
                data.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(crate::limits::READY_POLL_MS)).await;
    }
}

pub fn up(a: UpArgs) -> anyhow::Result<()> {
    let data = absolute(&a.data)?;
    let mnt = absolute(&a.mount)?;
    std::fs::create_dir_all(&data).with_context(|| format!("cannot create {}", data.display()))?;
    if let Some(s) = read_state(&data) {
        if pid_alive(s.pid) && s.pid != std::process::id() {
            bail!(
                "the file system in {} is already up (pid {}), mounted at {}; stop it with: weft down --data {}",
                data.display(),
                s.pid,
                s.mount.display(),
                a.data.display()
            );
        }
        // A previous run died: clear what it left.
        crate::replicas::stop_pids(&s.replicas.iter().map(|r| r.pid).collect::<Vec<_>>());
        if daemon::is_mounted(&s.mount) {
            let _ = daemon::unmount(&s.mount, true);
        }
        let _ = std::fs::remove_file(state_path(&data));
    }
    let opts = parse_options(a.options.as_deref())?;
    let config =
        crate::key::record_in_config(&data.join("server.toml"), local_config(&data, a.osts, a.replicas, a.mdts)?)?;
    let log = data.join("logs").join("weft.log");

    if a.detach && !daemon::is_detached_child() {
        let mut args = vec![
            "up".to_string(),
            "--data".into(),
            data.to_string_lossy().into_owned(),
            "--mount".into(),
            mnt.to_string_lossy().into_owned(),
            "--osts".into(),
            a.osts.to_string(),
        ];
        if let Some(n) = a.replicas {
            args.extend(["--replicas".to_string(), n.to_string()]);
        }
        if let Some(n) = a.mdts {
            args.extend(["--mdts".to_string(), n.to_string()]);
        }
        if let Some(o) = &a.options {
            args.extend(["-o".to_string(), o.clone()]);
        }
        let mut child = daemon::spawn_self(&args, &log)?;
        let pid = child.id();
        let d = data.clone();
        daemon::wait_ready(&mut child, &log, Duration::from_secs(UP_READY_TIMEOUT_S), || {
            read_state(&d).is_some_and(|s| s.pid == pid)
        })?;
        let s = read_state(&data).ok_or_else(|| anyhow!("the background file system vanished"))?;
        print_summary(&s, &config, opts.uring, true);
        return Ok(());
    }

    crate::logging::to_file(&log)?;
    std::fs::create_dir_all(&mnt).with_context(|| format!("cannot create mount point {}", mnt.display()))?;
    if daemon::is_mounted(&mnt) {
        bail!("{} is already a mount point: unmount it first (weft umount {})", mnt.display(), mnt.display());
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    // The replicas of the MGS and the MDT, each in a process of its own, first: this
    // process registers its OSTs with their management service.
    // And the further MDTs, each in a process of its own, watched the same way.
    let mut replica_configs = crate::replicas::configs(&data)?;
    let extra_mdts = crate::replicas::mdt_configs(&data)?;
    let mdt_count = extra_mdts.len() + 1;
    replica_configs.extend(extra_mdts);
    let state_slot: std::sync::Arc<std::sync::Mutex<Option<UpState>>> = Default::default();
    let supervisor = if replica_configs.is_empty() {
        None
    } else {
        let slot = state_slot.clone();
        let on_change = Box::new(move |procs: &[crate::replicas::ReplicaProcess]| {
            let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(state) = slot.as_mut() {
                state.replicas = procs.to_vec();
                let _ = write_state(&state.data.clone(), state);
            }
        });
        Some(crate::replicas::Supervisor::start(&replica_configs, on_change)?)
    };
    let server = match rt.block_on(RunningServer::start(config.clone())) {
        Ok(s) => s,
        Err(e) => {
            if let Some(s) = supervisor {
                s.stop();
            }
            return Err(e);
        }
    };
    let mgs_address = server.mgs_address();
    if supervisor.is_some() {
        if let Err(e) = rt.block_on(wait_for_mdt(&mgs_address, &data, mdt_count)) {
            if let Some(s) = supervisor {
                s.stop();
            }
            rt.block_on(server.shutdown());
            return Err(e);
        }
    }
    // The mount reaches the servers of this process without TCP.
    let client_config =
        weft_client::ClientConfig { network: Some(server.network().clone()), ..client_config(&mgs_address, &opts) };
    let mounted = rt
        .block_on(weft_client::Client::connect(client_config))
        .map_err(|e| anyhow!("{}", e.message))
        .and_then(|client| {
            weft_fuse::mount(
                client,
                rt.handle().clone(),
                &mnt,
                fuse_options(&opts, &crate::mount::mount_source(&mgs_address, &config.fsname)),
            )
            .map_err(|e| anyhow!("cannot mount at {}: {e}", mnt.display()))
        });
    let session = match mounted {
        Ok(s) => s,
        Err(e) => {
            if let Some(s) = supervisor {
                s.stop();
            }
            rt.block_on(server.shutdown());
            return Err(e);
        }
    };
    let state = UpState {
        pid: std::process::id(),
        fsname: config.fsname.clone(),
        mgs_address: mgs_address.clone(),
        mount: mnt.clone(),
        data: data.clone(),
        log: log.clone(),
        metrics: server.metrics_address.clone(),
        passthrough: Some(opts.passthrough.name().to_string()),
        replicas: supervisor.as_ref().map(|s| s.processes()).unwrap_or_default(),
    };
    write_state(&data, &state)?;
    *state_slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(state.clone());
    tracing::info!("up: mgs {mgs_address}, mounted at {}", mnt.display());
    if !daemon::is_detached_child() {
        print_summary(&state, &config, opts.uring, false);
    }
    let why = rt.block_on(wait_for_stop(Some(&mnt)));
    tracing::info!("stopping: {why}");
    // Joined: the mount closes what is still open and gives its locks back while the servers
    // still answer.
    if let Err(e) = session.umount_and_join() {
        tracing::info!("unmounting {}: {e}", mnt.display());
    }
    if daemon::is_mounted(&mnt) {
        let _ = daemon::unmount(&mnt, true);
    }
    state_slot.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(s) = supervisor {
        s.stop();
    }
    rt.block_on(server.shutdown());
    let _ = std::fs::remove_file(state_path(&data));
    if !daemon::is_detached_child() {
        eprintln!("weft: stopped ({why}); data kept in {}", data.display());
    }
    Ok(())
}

/// Ctrl-C, SIGTERM, or (with a mount) the mount going away because someone ran umount.
async fn wait_for_stop(mnt: Option<&Path>) -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    loop {
        tokio::select! {
            _ = term.recv() => return "SIGTERM",
            _ = int.recv() => return "interrupted",
            _ = tokio::time::sleep(Duration::from_millis(UNMOUNT_CHECK_INTERVAL_MS)) => {
                if mnt.is_some_and(|m| !daemon::is_mounted(m)) {
                    return "unmounted";
                }
            }
        }
    }
}

fn print_summary(s: &UpState, c: &ServerConfig, uring: bool, detached: bool) {
    let osts = c.oss.as_ref().map_or(0, |o| o.osts.len());
    let mdt = crate::replicas::mdts_text(&s.data, &s.replicas);
    println!("Weft file system '{}' is up: {mdt}, {osts} OSTs, mounted at {}", s.fsname, s.mount.display());
    println!("  data: {}   logs: {}", s.data.display(), s.log.display());
    match (uring, weft_fuse::uring_offered()) {
        (true, Some(true)) => println!("  FUSE requests come through io_uring, a queue per CPU"),
        (true, Some(false)) => println!(
            "  FUSE requests come through /dev/fuse; for io_uring (more metadata operations per second): \
             echo 1 > {} as root, then weft down and up again",
            weft_fuse::URING_SWITCH
        ),
        _ => {}
    }
    if let Some(p) = &s.passthrough {
        println!("  passthrough: {}", passthrough_text(p));
    }
    println!("  management service: {} (mount elsewhere: weft mount {} MNT)", s.mgs_address, s.mgs_address);
    if let Some(m) = &s.metrics {
        println!("  metrics: {}", metrics_url(m));
        // With replicas, this process serves it too: it asks the management service's leader.
        println!("  dashboard: {}", dashboard_url(m));
    }
    if detached {
        println!("  running in the background (pid {}); stop it with: weft down --data {}", s.pid, s.data.display());
    } else {
        println!("  Ctrl-C stops it (the data stays; run weft up again to bring it back)");
    }
}

pub fn down(a: DataArgs) -> anyhow::Result<()> {
    let data = absolute(&a.data)?;
    let Some(s) = read_state(&data) else {
        bail!("no file system from {} is up (no {})", data.display(), state_path(&data).display());
    };
    crate::replicas::stop_pids(&[s.pid]);
    // Replica processes outlive a `weft up` that was killed: stop them too.
    crate::replicas::stop_pids(&s.replicas.iter().map(|r| r.pid).collect::<Vec<_>>());
    if daemon::is_mounted(&s.mount) {
        daemon::unmount(&s.mount, true)?;
    }
    let _ = std::fs::remove_file(state_path(&data));
    println!("Weft file system '{}' is down; data kept in {}", s.fsname, data.display());
    Ok(())
}

#[derive(Serialize)]
struct StatusReport {
    fsname: String,
    running: bool,
    pid: Option<u32>,
    data: PathBuf,
    mgs_address: Option<String>,
    mount: Option<PathBuf>,
    mounted: bool,
    /// The metrics endpoint and the dashboard (the MGS's process serves it on the same port).
    metrics_url: Option<String>,
    dashboard_url: Option<String>,
    /// The mount's `passthrough` option: `on` means bytes of files on the OSTs of this
    /// process are counted nowhere.
    passthrough: Option<String>,
    roles: Vec<String>,
    targets: Vec<TargetRow>,
    /// Every process of the file system: `weft up`'s own, and each MDT replica's.
    processes: Vec<ProcessRow>,
    /// The replicated groups (the MDT's, the MGS's) as their leaders see them: every member,
    /// replicas added by `weft replica add` too, and how much of the log each holds.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    groups: Vec<crate::group_status::GroupRow>,
}

#[derive(Serialize)]
struct ProcessRow {
    pid: u32,
    alive: bool,
    /// `mgs, oss (4 OSTs), mount`, or `MDT0000 replica 2`.
    role: String,
    address: String,
    /// A replica's place in its MDT's group, as it answers `mdt.*.replica_status` (none when
    /// it does not answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    replica: Option<ReplicaRow>,
    /// Its place in the management service's group (`mgs.*.replica_status`).
    #[serde(skip_serializing_if = "Option::is_none")]
    mgs_replica: Option<ReplicaRow>,
}

#[derive(Serialize)]
struct ReplicaRow {
    role: String,
    term: u64,
    leader: String,
    last_log_index: String,
    committed: String,
    applied: String,
}

/// What a replica process says of itself (`mdt.*.replica_status`), within a second or two.
fn replica_row(rt: &tokio::runtime::Runtime, address: &str, pattern: &str) -> Option<ReplicaRow> {
    use weft_proto::msg::param::GetParam;
    let opts = weft_rpc::PeerOptions {
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(2),
        ..weft_rpc::PeerOptions::default()
    };
    let peer = weft_rpc::Peer::new(address, opts);
    let op = GetParam { pattern: pattern.into() };
    let header = weft_proto::msg::RequestHeader::default();
    let (values, _) = rt.block_on(peer.op(header, 0, op, bytes::Bytes::new(), Duration::from_secs(2))).ok()?;
    let text = &values.0.first()?.value;
    let field = |key: &str| {
        text.lines().find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix(": "))).unwrap_or("-").to_string()
    };
    Some(ReplicaRow {
        role: field("role"),
        term: field("term").parse().unwrap_or(0),
        leader: field("leader"),
        last_log_index: field("last_log_index"),
        committed: field("committed"),
        applied: field("applied"),
    })
}

#[derive(Serialize)]
struct TargetRow {
    name: String,
    kind: String,
    index: u32,
    state: String,
    /// The server serving it.
    address: String,
    /// Every server that may serve it (its failover servers); empty: only `address`.
    servers: Vec<String>,
}

pub fn status(a: StatusArgs) -> anyhow::Result<()> {
    let data = absolute(&a.data)?;
    let config = ServerConfig::load(&data.join("server.toml")).map_err(|_| {
        anyhow!("{} holds no Weft file system (no server.toml); start one with weft up", data.display())
    })?;
    crate::key::adopt_from_config(&data);
    let state = read_state(&data).filter(|s| pid_alive(s.pid));
    let mut report = StatusReport {
        fsname: config.fsname.clone(),
        running: state.is_some(),
        pid: state.as_ref().map(|s| s.pid),
        data: data.clone(),
        mgs_address: state.as_ref().map(|s| s.mgs_address.clone()),
        mount: state.as_ref().map(|s| s.mount.clone()),
        mounted: state.as_ref().is_some_and(|s| daemon::is_mounted(&s.mount)),
        metrics_url: state.as_ref().and_then(|s| s.metrics.as_deref()).map(metrics_url),
        dashboard_url: state.as_ref().and_then(|s| s.metrics.as_deref()).map(dashboard_url),
        passthrough: state.as_ref().and_then(|s| s.passthrough.clone()),
        roles: config.roles_text().split(", ").map(String::from).collect(),
        targets: Vec::new(),
        processes: Vec::new(),
        groups: Vec::new(),
    };
    if let Some(s) = &state {
        report.processes.push(ProcessRow {
            pid: s.pid,
            alive: true,
            role: format!("{}, mount", config.roles_text()),
            address: if s.replicas.is_empty() { s.mgs_address.clone() } else { config.listen.clone() },
            replica: None,
            mgs_replica: None,
        });
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        for r in &s.replicas {
            let alive = pid_alive(r.pid);
            if let Some(index) = crate::replicas::extra_mdt(&data, &r.config) {
                // A further MDT's process (weft up --mdts): no group to ask about.
                let (role, address) = (format!("MDT{index:04x}"), r.address.clone());
                report.processes.push(ProcessRow {
                    pid: r.pid,
                    alive,
                    role,
                    address,
                    replica: None,
                    mgs_replica: None,
                });
                continue;
            }
            report.processes.push(ProcessRow {
                pid: r.pid,
                alive,
                role: format!("MDT0000 replica {}", r.replica),
                address: r.address.clone(),
                replica: if alive { replica_row(&rt, &r.address, "mdt.*.replica_status") } else { None },
                mgs_replica: if alive { replica_row(&rt, &r.address, "mgs.*.replica_status") } else { None },
            });
        }
        let replicas: Vec<_> =
            s.replicas.iter().filter(|r| crate::replicas::extra_mdt(&data, &r.config).is_none()).collect();
        if !replicas.is_empty() {
            let addresses: Vec<String> = replicas.iter().map(|r| r.address.clone()).collect();
            let mdt = format!("{}-MDT0000", config.fsname);
            for (name, param) in [(mdt.as_str(), "mdt.*.replica_status"), ("MGS", "mgs.*.replica_status")] {
                report.groups.extend(crate::group_status::group_row(&rt, name, param, &addresses));
            }
        }
    }
    if let Some(s) = &state {
        let map = fetch_map(&s.mgs_address)?;
        report.targets = map
            .targets
            .iter()
            .map(|t| TargetRow {
                name: t.name(&map.fsname),
                kind: format!("{:?}", t.kind).to_uppercase(),
                index: t.index,
                state: format!("{:?}", t.state).to_lowercase(),
                address: t.address.clone(),
                servers: t.servers.clone(),
            })
            .collect();
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("file system: {}   data: {}", report.fsname, data.display());
    match &state {
        None => println!("state:       not running (start it with: weft up --data {})", a.data.display()),
        Some(s) => {
            println!("state:       running (pid {})", s.pid);
            println!("roles:       {}", report.roles.join(", "));
            println!("management:  {}", s.mgs_address);
            println!("mount:       {} ({})", s.mount.display(), if report.mounted { "mounted" } else { "NOT mounted" });
            if let Some(m) = &report.metrics_url {
                println!("metrics:     {m}");
            }
            if let Some(d) = &report.dashboard_url {
                println!("dashboard:   {d}");
            }
            if let Some(p) = &report.passthrough {
                println!("passthrough: {}", passthrough_text(p));
            }
            println!("{:<16} {:<6} {:<22} FAILOVER", "TARGET", "STATE", "SERVED BY");
            for t in &report.targets {
                let others: Vec<&str> =
                    t.servers.iter().map(String::as_str).filter(|s| *s != t.address.as_str()).collect();
                let others = if others.is_empty() { "-".to_string() } else { others.join(",") };
                println!("{:<16} {:<6} {:<22} {others}", t.name, t.state, t.address);
            }
            if report.processes.len() > 1 {
                print_processes(&report.processes);
            }
            if !report.groups.is_empty() {
                crate::group_status::print_groups(&report.groups);
            }
        }
    }
    Ok(())
}

/// `weft status`'s table of processes: each replica's role in the MGS's group and the
/// MDT's, and the MDT group's term and log positions.
fn print_processes(processes: &[ProcessRow]) {
    let row = |a: &str, b: &str, c: &str, d: &str, e: &str, f: &str, g: &str, h: &str, i: &str| {
        println!("{a:<8} {b:<20} {c:<22} {d:<9} {e:<9} {f:>5} {g:>9} {h:>9} {i:>9}");
    };
    row("PID", "PROCESS", "ADDRESS", "MGS", "MDT", "TERM", "LOG", "COMMITTED", "APPLIED");
    for p in processes {
        let replica = p.role.starts_with("MDT0000 replica");
        let name = if p.role.starts_with("MDT") { p.role.clone() } else { "weft up".into() };
        let quiet = match (p.alive, replica) {
            (false, _) => "dead",
            (true, true) => "silent",
            (true, false) => "-",
        };
        let mgs = p.mgs_replica.as_ref().map_or(if replica { quiet } else { "-" }, |r| r.role.as_str());
        let pid = p.pid.to_string();
        match &p.replica {
            Some(r) => row(
                &pid,
                &name,
                &p.address,
                mgs,
                &r.role,
                &r.term.to_string(),
                &r.last_log_index,
                &r.committed,
                &r.applied,
            ),
            None => row(&pid, &name, &p.address, mgs, quiet, "-", "-", "-", "-"),
        }
    }
}

/// What the mount's passthrough option means for what an admin sees.
fn passthrough_text(option: &str) -> String {
    match option {
        "on" => "on (files on this process's OSTs are read and written by the kernel itself: \
                 their bytes are counted nowhere, not in stats, job_stats, metrics or the dashboard)"
            .to_string(),
        "auto" => "auto (persistent client caches only: every byte on the OSTs is counted; \
                   -o passthrough=on trades that for local-disk speed)"
            .to_string(),
        other => other.to_string(),
    }
}

fn metrics_url(address: &str) -> String {
    format!("http://{address}/metrics")
}

/// `weft up` runs the management service, so its metrics port serves the dashboard too.
fn dashboard_url(address: &str) -> String {
    format!("http://{address}/")
}

pub(crate) fn fetch_map(mgs: &str) -> anyhow::Result<weft_proto::msg::ClusterMap> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let peers = weft_rpc::mgs::MgsPeers::new(mgs, weft_rpc::PeerOptions::default());
    let timeout = Duration::from_secs(STATUS_MGS_TIMEOUT_S);
    rt.block_on(weft_rpc::map::fetch_map_from(&peers, timeout)).map_err(|e| anyhow!("{}", e.message))
}

pub fn server(config: PathBuf) -> anyhow::Result<()> {
    let config = ServerConfig::load(&config)?;
    let log = config.data_dir.join("logs").join("weft-server.log");
    crate::logging::to_file(&log)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let server = rt.block_on(RunningServer::start(config.clone()))?;
    println!("weft server: {} on {} (logs: {})", config.roles_text(), server.address, log.display());
    if let Some(m) = &server.metrics_address {
        println!("  metrics: http://{m}/metrics");
    }
    let why = rt.block_on(wait_for_stop(None));
    tracing::info!("stopping: {why}");
    rt.block_on(server.shutdown());
    Ok(())
}
