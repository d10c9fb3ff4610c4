//! Starts real Weft clusters for tests: every server and every mount is a separate `weft`
//! process, as on a real cluster, on its own loopback address when asked (127.0.0.2, ...).
//! Everything is torn down in `Drop`, also when a test panics: mounts are unmounted, processes
//! killed, the temporary directory removed, and the last log lines printed to help the reader.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_proto::msg::*;

pub mod limits;

pub use limits::{LOCK_TIMEOUT_MS, MGS_ANSWER_MS_MAX, START_TIMEOUT_S, STOP_TIMEOUT_S};
use limits::{MOUNT_REQUEST_TIMEOUT_S, POLL_MS, TARGETS_UP_POLL_MS};

/// One server process: its roles and its address.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    pub name: String,
    pub ip: String,
    pub mgs: bool,
    pub mdt: Option<u32>,
    pub osts: Vec<u32>,
    /// OSTs this node may take over (`[oss] failover_osts`): each is the directory of the
    /// node that serves it first, reached here through a symbolic link (shared storage on
    /// one machine).
    pub failover_osts: Vec<u32>,
}

impl NodeSpec {
    pub fn new(name: &str, ip: &str) -> Self {
        NodeSpec {
            name: name.into(),
            ip: ip.into(),
            mgs: false,
            mdt: None,
            osts: Vec::new(),
            failover_osts: Vec::new(),
        }
    }
    pub fn failover_osts(mut self, osts: &[u32]) -> Self {
        self.failover_osts = osts.to_vec();
        self
    }
    pub fn mgs(mut self) -> Self {
        self.mgs = true;
        self
    }
    pub fn mdt(mut self, index: u32) -> Self {
        self.mdt = Some(index);
        self
    }
    pub fn osts(mut self, osts: &[u32]) -> Self {
        self.osts = osts.to_vec();
        self
    }
}

pub struct Server {
    pub spec: NodeSpec,
    pub address: String,
    /// The metrics endpoint's `host:port` (`http://ADDRESS/metrics`).
    pub metrics: String,
    pub config: PathBuf,
    pub data_dir: PathBuf,
    pub log: PathBuf,
    child: Option<Child>,
}

pub struct Mount {
    pub path: PathBuf,
    pub log: PathBuf,
    child: Option<Child>,
}

pub struct Cluster {
    weft: PathBuf,
    pub dir: tempfile::TempDir,
    pub servers: Vec<Server>,
    pub mounts: Vec<Mount>,
    pub mgs_address: String,
    expected_targets: usize,
    /// The shared key file every server requires (`start_keyed`); None: no key.
    pub key: Option<PathBuf>,
}

/// A port nobody listens on now at `ip` (bound, then released), and never handed out
/// before in this process: the kernel may give a released port again at once, and a
/// server given the same port for its listener and its metrics fails to start (seen in CI).
pub fn free_port(ip: &str) -> u16 {
    static GIVEN: std::sync::Mutex<Vec<(String, u16)>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let port = TcpListener::bind((ip, 0)).and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port");
        if !given.iter().any(|(i, p)| i == ip && *p == port) {
            given.push((ip.to_string(), port));
            return port;
        }
    }
}

impl Cluster {
    /// One server process with every role and `osts` OSTs on 127.0.0.1.
    pub fn single_node(weft: &Path, osts: u32) -> Cluster {
        let ids: Vec<u32> = (0..osts).collect();
        Cluster::start(weft, vec![NodeSpec::new("all", "127.0.0.1").mgs().mdt(0).osts(&ids)])
    }

    /// The multi-node shape: management, metadata and two object servers as separate
    /// processes on separate loopback addresses.
    pub fn multi_node(weft: &Path) -> Cluster {
        Cluster::start(
            weft,
            vec![
                NodeSpec::new("mgs", "127.0.0.2").mgs(),
                NodeSpec::new("mds", "127.0.0.3").mdt(0),
                NodeSpec::new("oss1", "127.0.0.4").osts(&[0, 1]),
                NodeSpec::new("oss2", "127.0.0.5").osts(&[2, 3]),
            ],
        )
    }

    pub fn start(weft: &Path, nodes: Vec<NodeSpec>) -> Cluster {
        Cluster::start_with(weft, nodes, None)
    }

    /// As [`Cluster::start`], every server requiring a shared key of `flavor` that `weft key
    /// new` makes in the cluster's directory ([`Cluster::key`]).
    pub fn start_keyed(weft: &Path, nodes: Vec<NodeSpec>, flavor: &str) -> Cluster {
        Cluster::start_with(weft, nodes, Some(flavor))
    }

    fn start_with(weft: &Path, nodes: Vec<NodeSpec>, flavor: Option<&str>) -> Cluster {
        let dir = tempfile::Builder::new().prefix("weft-test-").tempdir().expect("temp dir");
        let key = flavor.map(|flavor| {
            let path = dir.path().join("weft.key");
            run(Command::new(weft).args(["key", "new", "--flavor", flavor]).arg(&path).env_remove("WEFT_KEY_FILE"));
            path
        });
        // Tests run commands as other users on the mount inside: let them through.
        std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod temp dir");
        let mgs_node = nodes.iter().find(|n| n.mgs).expect("one node runs the MGS");
        let mut servers: Vec<Server> = nodes
            .iter()
            .map(|spec| {
                let address = format!("{}:{}", spec.ip, free_port(&spec.ip));
                let data_dir = dir.path().join(&spec.name);
                Server {
                    spec: spec.clone(),
                    address,
                    metrics: format!("{}:{}", spec.ip, free_port(&spec.ip)),
                    config: dir.path().join(format!("{}.toml", spec.name)),
                    log: data_dir.join("logs").join("weft-server.log"),
                    data_dir,
                    child: None,
                }
            })
            .collect();
        let mgs_address = servers.iter().find(|s| s.spec.name == mgs_node.name).expect("mgs").address.clone();
        let expected_targets = nodes.iter().map(|n| n.osts.len() + n.mdt.is_some() as usize).sum();
        for s in &servers {
            let toml = server_config(s, &mgs_address, key.as_deref());
            std::fs::write(&s.config, toml).expect("write config");
        }
        // Shared storage: a failover OST's directory is its first server's.
        for s in &servers {
            for &i in &s.spec.failover_osts {
                let owner = servers.iter().find(|o| o.spec.osts.contains(&i)).expect("a node serves the OST first");
                let dir = format!("ost{i:04x}");
                std::fs::create_dir_all(owner.data_dir.join(&dir)).expect("OST dir");
                std::fs::create_dir_all(&s.data_dir).expect("data dir");
                std::os::unix::fs::symlink(owner.data_dir.join(&dir), s.data_dir.join(&dir)).expect("symlink");
            }
        }
        let mut cluster = Cluster {
            weft: weft.to_path_buf(),
            dir,
            servers: Vec::new(),
            mounts: Vec::new(),
            mgs_address,
            expected_targets,
            key,
        };
        // The MGS first, then the OSSs (the MDS precreates on them), then the rest.
        servers.sort_by_key(|s| (!s.spec.mgs, s.spec.osts.is_empty()));
        for mut s in servers {
            s.child = Some(spawn_server(&cluster.weft, &s, &[]));
            cluster.servers.push(s);
        }
        cluster.wait_targets_up();
        cluster
    }

    fn wait_targets_up(&mut self) {
        let start = Instant::now();
        loop {
            if let Ok(map) = self.map() {
                let up = map.targets.iter().filter(|t| t.state == TargetState::Up).count();
                if up >= self.expected_targets {
                    return;
                }
            }
            for s in &mut self.servers {
                check_alive(s);
            }
            if start.elapsed() > Duration::from_secs(START_TIMEOUT_S) {
                panic!("cluster did not come up:\n{}", self.log_tails());
            }
            std::thread::sleep(Duration::from_millis(TARGETS_UP_POLL_MS));
        }
    }

    /// Starts one more server process, `spec`, in the running file system (an OSS joining
    /// it live), and waits until its targets are up in the map. `prepare` runs first with
    /// the node's data directory (to place an OST's directory elsewhere, as a symlink named
    /// `ostXXXX`, XXXX its index in hex).
    pub fn add_node(&mut self, spec: NodeSpec, prepare: impl FnOnce(&Path)) {
        let address = format!("{}:{}", spec.ip, free_port(&spec.ip));
        let data_dir = self.dir.path().join(&spec.name);
        let mut s = Server {
            metrics: format!("{}:{}", spec.ip, free_port(&spec.ip)),
            config: self.dir.path().join(format!("{}.toml", spec.name)),
            log: data_dir.join("logs").join("weft-server.log"),
            data_dir,
            address,
            spec,
            child: None,
        };
        std::fs::write(&s.config, server_config(&s, &self.mgs_address, self.key.as_deref())).expect("write config");
        std::fs::create_dir_all(&s.data_dir).expect("data dir");
        prepare(&s.data_dir);
        self.expected_targets += s.spec.osts.len() + s.spec.mdt.is_some() as usize;
        s.child = Some(spawn_server(&self.weft, &s, &[]));
        self.servers.push(s);
        self.wait_targets_up();
    }

    /// The cluster map, straight from the MGS.
    pub fn map(&self) -> anyhow::Result<ClusterMap> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let key = match &self.key {
            Some(path) => {
                Some(Arc::new(weft_rpc::secure::SharedKey::load(path).map_err(|e| anyhow::anyhow!("{}", e.message))?))
            }
            None => None,
        };
        let options = weft_rpc::PeerOptions { key, ..weft_rpc::PeerOptions::default() };
        let peer = weft_rpc::Peer::new(self.mgs_address.clone(), options);
        let map = rt.block_on(weft_rpc::map::fetch_map(&peer, Duration::from_millis(MGS_ANSWER_MS_MAX)));
        map.map_err(|e| anyhow::anyhow!("{}", e.message))
    }

    /// Mounts the file system in a separate `weft mount` process; returns the mount point.
    /// With the cluster's key, if it has one.
    pub fn mount(&mut self) -> PathBuf {
        let key = self.key.as_ref().map(|k| format!(",skpath={}", k.display())).unwrap_or_default();
        self.mount_with(&format!("timeout={MOUNT_REQUEST_TIMEOUT_S}{key}"))
    }

    pub fn mount_with(&mut self, options: &str) -> PathBuf {
        let n = self.mounts.len();
        let path = self.dir.path().join(format!("mnt{n}"));
        std::fs::create_dir_all(&path).expect("mount point");
        let log = self.dir.path().join(format!("mnt{n}.log"));
        let out = std::fs::File::create(&log).expect("mount log");
        let child = Command::new(&self.weft)
            .args(["mount", &self.mgs_address])
            .arg(&path)
            .args(["-f", "-o", options])
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("spawn weft mount");
        self.mounts.push(Mount { path: path.clone(), log, child: Some(child) });
        let start = Instant::now();
        while !is_mounted(&path) {
            let m = self.mounts.last_mut().expect("just pushed");
            if let Some(st) = m.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("weft mount exited ({st}):\n{}", tail(&m.log, 30));
            }
            assert!(
                start.elapsed() < Duration::from_secs(START_TIMEOUT_S),
                "mount did not appear:\n{}",
                tail(&m.log, 30)
            );
            std::thread::sleep(Duration::from_millis(POLL_MS));
        }
        path
    }

    /// kill -9 of the client process of mount `path` (a client that dies holding locks),
    /// then a lazy unmount of what it leaves behind.
    pub fn kill9_mount(&mut self, path: &Path) {
        let m =
            self.mounts.iter_mut().find(|m| m.path == path).unwrap_or_else(|| panic!("no mount {}", path.display()));
        if let Some(mut c) = m.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("fusermount3").arg("-uz").arg(&m.path).status();
    }

    /// Waits up to `timeout` for the client process of mount `path` to end; its exit status,
    /// or None if it still runs.
    pub fn wait_mount_exit(&mut self, path: &Path, timeout: Duration) -> Option<std::process::ExitStatus> {
        let m =
            self.mounts.iter_mut().find(|m| m.path == path).unwrap_or_else(|| panic!("no mount {}", path.display()));
        let child = m.child.as_mut()?;
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(status) = child.try_wait().ok().flatten() {
                m.child = None;
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(POLL_MS));
        }
        None
    }

    /// The process id of the client process of mount `path` (to stop and continue it).
    pub fn mount_pid(&self, path: &Path) -> u32 {
        let m = self.mounts.iter().find(|m| m.path == path).unwrap_or_else(|| panic!("no mount {}", path.display()));
        m.child.as_ref().expect("mount process running").id()
    }

    pub fn server(&mut self, name: &str) -> &mut Server {
        self.servers.iter_mut().find(|s| s.spec.name == name).unwrap_or_else(|| panic!("no server {name}"))
    }

    /// kill -9 of one server process.
    pub fn kill9(&mut self, name: &str) {
        let s = self.server(name);
        if let Some(mut c) = s.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts a killed server again with the same config and address.
    pub fn restart(&mut self, name: &str) {
        self.restart_wrapped(name, &[]);
    }

    /// Starts a killed server again with the same config and address, its command line
    /// after `wrapper` (`unshare -m sh -c SCRIPT sh`: the server in a mount namespace of its
    /// own; the wrapper must exec the server, so that killing the child kills the server).
    pub fn restart_wrapped(&mut self, name: &str, wrapper: &[&str]) {
        let weft = self.weft.clone();
        let s = self.server(name);
        assert!(s.child.is_none(), "{name} is still running");
        let started = Instant::now();
        // The old address may linger in TIME_WAIT for a moment; the server binds with
        // SO_REUSEADDR (tokio's default on Linux), so one try normally suffices.
        s.child = Some(spawn_server(&weft, s, wrapper));
        while started.elapsed() < Duration::from_secs(START_TIMEOUT_S) {
            if std::net::TcpStream::connect(&s.address).is_ok() {
                return;
            }
            check_alive(s);
            std::thread::sleep(Duration::from_millis(POLL_MS));
        }
        panic!("{name} did not listen on {} within {START_TIMEOUT_S} s:\n{}", s.address, tail(&s.log, 30));
    }

    pub fn log_tails(&self) -> String {
        let mut out = String::new();
        for s in &self.servers {
            out.push_str(&format!("--- {} ({}) {}\n{}\n", s.spec.name, s.address, s.log.display(), tail(&s.log, 20)));
        }
        for m in &self.mounts {
            out.push_str(&format!("--- mount {}\n{}\n", m.path.display(), tail(&m.log, 20)));
        }
        out
    }
}

impl Mount {
    fn stop(&mut self) {
        if is_mounted(&self.path) {
            let _ = Command::new("fusermount3").arg("-uz").arg(&self.path).status();
        }
        if let Some(mut c) = self.child.take() {
            let start = Instant::now();
            while c.try_wait().ok().flatten().is_none() && start.elapsed() < Duration::from_secs(STOP_TIMEOUT_S) {
                std::thread::sleep(Duration::from_millis(POLL_MS));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("=== weft cluster logs (test failed) ===\n{}", self.log_tails());
        }
        for m in &mut self.mounts {
            m.stop();
        }
        for s in &mut self.servers {
            if let Some(mut c) = s.child.take() {
                // SAFETY: plain kill(2) on our own child.
                unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
                let start = Instant::now();
                while c.try_wait().ok().flatten().is_none() && start.elapsed() < Duration::from_secs(STOP_TIMEOUT_S) {
                    std::thread::sleep(Duration::from_millis(POLL_MS));
                }
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// The config file of server `s` of a cluster whose MGS is at `mgs_address`.
fn server_config(s: &Server, mgs_address: &str, key: Option<&Path>) -> String {
    let mut toml = format!(
        "fsname = \"weft\"\ndata_dir = \"{}\"\nlisten = \"{}\"\nmgs_address = \"{}\"\nlock_timeout_ms = {}\nmetrics_listen = \"{}\"\nmonitor_interval_s = 1\n",
        s.data_dir.display(),
        s.address,
        mgs_address,
        LOCK_TIMEOUT_MS,
        s.metrics
    );
    if let Some(key) = key {
        toml.push_str(&format!("key = \"{}\"\n", key.display()));
    }
    if s.spec.mgs {
        toml.push_str("[mgs]\n");
    }
    if let Some(i) = s.spec.mdt {
        toml.push_str(&format!("[mds]\nindex = {i}\n"));
    }
    if !s.spec.osts.is_empty() || !s.spec.failover_osts.is_empty() {
        toml.push_str(&format!("[oss]\nosts = {:?}\n", s.spec.osts));
    }
    if !s.spec.failover_osts.is_empty() {
        toml.push_str(&format!("failover_osts = {:?}\n", s.spec.failover_osts));
    }
    toml
}

fn spawn_server(weft: &Path, s: &Server, wrapper: &[&str]) -> Child {
    std::fs::create_dir_all(&s.data_dir).expect("data dir");
    let out_path = s.data_dir.join("stdout.log");
    let out = std::fs::OpenOptions::new().create(true).append(true).open(out_path).expect("stdout log");
    let mut cmd = match wrapper.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(weft);
            c
        }
        None => Command::new(weft),
    };
    cmd.arg("server")
        .arg("--config")
        .arg(&s.config)
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .spawn()
        .expect("spawn weft server")
}

impl Server {
    /// The server's process id while it runs (to read its memory, its connections).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

/// Fails the test at once, with the server's log, when a server that should run has exited.
fn check_alive(s: &mut Server) {
    if let Some(status) = s.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
        let out = tail(&s.data_dir.join("stdout.log"), 20);
        panic!("server {} exited ({status}):\n{}\n{out}", s.spec.name, tail(&s.log, 30));
    }
}

pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

pub fn is_mounted(path: &Path) -> bool {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let want = path.to_string_lossy().replace(' ', "\\040");
    text.lines().any(|l| l.split(' ').nth(4) == Some(want.as_str()))
}

/// Runs a command, asserting success; returns stdout.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
