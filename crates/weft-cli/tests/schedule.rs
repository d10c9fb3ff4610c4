//! The schedule stage seen from a mount in the same process as the servers (`weft up`'s
//! shape): a policy that holds one class of requests back must not hold the mount's FUSE
//! threads, so the other classes' requests from the same mount go on meanwhile.

mod common;

use common::sh;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use weft_proto::msg::Service;
use weft_rpc::schedule::fifo::Fifo;
use weft_rpc::schedule::{Admission, Grant, Policy, RequestInfo, Run};
use weft_server::{RunningServer, ServerConfig};

/// More than any mount here has FUSE threads (two, or two per CPU queue with io_uring).
const HELD_MKDIRS: usize = 6;
const WAIT_S: u64 = 20;

/// Holds every mkdir of a process named `mkdir` until the gate opens; FIFO for the rest.
struct HoldMkdirs {
    gate: tokio::sync::watch::Receiver<bool>,
    held: AtomicUsize,
    /// (opcode, jobid) of every request seen.
    seen: Mutex<BTreeSet<(String, String)>>,
    fifo: Fifo,
}

impl Policy for HoldMkdirs {
    fn name(&self) -> &str {
        "hold-mkdirs"
    }

    fn admit(&self, r: &RequestInfo<'_>) -> Admission {
        self.seen.lock().unwrap().insert((r.opcode().to_string(), r.jobid().to_string()));
        if r.opcode() == "mds_mkdir" && r.jobid().starts_with("mkdir.") {
            self.held.fetch_add(1, Ordering::SeqCst);
            let mut gate = self.gate.clone();
            let grant = async move {
                let _ = gate.wait_for(|open| *open).await;
                Grant::new(Run::Inline)
            };
            return Admission::Later { grant: Box::pin(grant), held: true };
        }
        self.fifo.admit(r)
    }
}

/// Everything the test started, torn down even when it fails.
struct Up {
    rt: tokio::runtime::Runtime,
    server: Option<RunningServer>,
    session: Option<weft_fuse::BackgroundSession>,
    mnt: std::path::PathBuf,
    /// Opens the policy's gate: a test that failed while requests were held lets them go
    /// first, or the mount could not be unmounted.
    gate: Option<tokio::sync::watch::Sender<bool>>,
    children: Vec<Child>,
    _dir: tempfile::TempDir,
}

impl Drop for Up {
    fn drop(&mut self) {
        if let Some(gate) = &self.gate {
            gate.send_replace(true);
        }
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(session) = self.session.take() {
            // Joined, so that the mount's last closes run while the runtime still does.
            if let Err(e) = session.umount_and_join() {
                eprintln!("unmounting the test mount: {e}; detaching it");
                let path = std::ffi::CString::new(self.mnt.as_os_str().as_encoded_bytes()).unwrap();
                // SAFETY: a valid C string; umount2 only reads it.
                unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
            }
        }
        if let Some(server) = self.server.take() {
            self.rt.block_on(server.shutdown());
        }
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(WAIT_S), "not within {WAIT_S} s: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_class_held_by_a_policy_does_not_hold_the_mounts_other_requests() {
    let dir = tempfile::Builder::new().prefix("weft-schedule-").tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let config = ServerConfig::all_in_one(dir.path().join("data"), vec![0, 1]);
    let server = rt.block_on(RunningServer::start(config)).unwrap();
    let mgs = server.mgs_address();
    let network = Some(server.network().clone());
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mut up =
        Up { rt, server: Some(server), session: None, mnt: mnt.clone(), gate: None, children: Vec::new(), _dir: dir };
    // Short: a held request that timed out would fail the test, not hang it.
    let config = weft_client::ClientConfig {
        request_timeout: Duration::from_secs(WAIT_S),
        network,
        ..weft_client::ClientConfig::new(mgs)
    };
    let client = up.rt.block_on(weft_client::Client::connect(config)).unwrap();
    let session = weft_fuse::mount(client, up.rt.handle().clone(), &mnt, weft_fuse::MountOptions::default()).unwrap();
    up.session = Some(session);
    wait_until("the mount appears", || weft_harness::is_mounted(&mnt));

    // Each mkdir in a parent of its own: the kernel holds a directory locked while a mkdir
    // in it runs, which would serialize them before they ever reach the mount.
    sh(&mnt, &(0..HELD_MKDIRS).map(|i| format!("mkdir p{i}")).collect::<Vec<_>>().join(" && "));
    sh(&mnt, "mkdir other");
    let (open, gate) = tokio::sync::watch::channel(false);
    up.gate = Some(open.clone());
    let policy =
        Arc::new(HoldMkdirs { gate, held: AtomicUsize::new(0), seen: Mutex::default(), fifo: Fifo::default() });
    let server = up.server.as_ref().unwrap();
    server.schedulers().of(Service::Mdt).set_policy(policy.clone());

    for i in 0..HELD_MKDIRS {
        let child = Command::new("mkdir")
            .arg(mnt.join(format!("p{i}/held")))
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        up.children.push(child);
    }
    wait_until("every mkdir reaches the MDT and is held", || policy.held.load(Ordering::SeqCst) == HELD_MKDIRS);

    // Meanwhile another class of the same mount goes on: creates, writes, reads, stats.
    let other = mnt.join("other");
    let done = Instant::now();
    sh(&other, "for i in 1 2 3 4 5; do echo data$i > f$i; done; cat f3; ls -l > /dev/null; stat f5 > /dev/null");
    assert_eq!(std::fs::read_to_string(other.join("f4")).unwrap(), "data4\n");
    assert!(done.elapsed() < Duration::from_secs(WAIT_S));
    // (Not a look at p0/held: the kernel keeps p0 locked while the mkdir in it runs.)
    assert!(up.children.iter_mut().all(|c| c.try_wait().unwrap().is_none()), "the held mkdirs are still waiting");

    // Requests carry their process's jobid: the held class and the other one.
    let seen = policy.seen.lock().unwrap().clone();
    assert!(seen.iter().any(|(op, job)| op == "mds_mkdir" && job == "mkdir.0"), "{seen:?}");
    assert!(seen.iter().any(|(op, job)| op == "mds_create" && job == "sh.0"), "{seen:?}");

    open.send_replace(true);
    for c in up.children.drain(..) {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "mkdir: {}", String::from_utf8_lossy(&out.stderr));
    }
    for i in 0..HELD_MKDIRS {
        assert!(Path::new(&mnt.join(format!("p{i}/held"))).is_dir());
    }
}
