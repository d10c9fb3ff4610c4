//! What every HSM copytool does the same way, whatever holds the copies: poll the MDT's
//! coordinator for actions of its archives and run some at once, report each action's bytes
//! every second and its end (retried until taken), and write a restored file's new objects
//! from a stream. `weft copytool` (archives on a directory or a program) and a mount's
//! read-write client cache (its archive is the cache directory) are both built on it.

use crate::limits::{COPYTOOL_END_REPORT_S, COPYTOOL_POLL_MS, COPYTOOL_PROGRESS_MS, COPYTOOL_STOP_WAIT_S};
use crate::Client;
use bytes::Bytes;
use futures::future::BoxFuture;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt};
use weft_proto::limits::RPC_BULK_BYTES_MAX;
use weft_proto::lock::LockMode;
use weft_proto::msg::hsm::HsmActionItem;
use weft_proto::msg::{Caller, OPEN_HSM_RESTORE, OPEN_WRITE};
use weft_proto::{ErrorCode, WeftError};

/// A failed action: the errno the coordinator records, and the words.
#[derive(Debug)]
pub struct Failure {
    pub errno: i32,
    pub message: String,
    /// The coordinator took the action back (canceled, or handed to another copytool):
    /// nothing to report.
    pub gone: bool,
}

impl Failure {
    pub fn new(errno: i32, message: impl Into<String>) -> Failure {
        Failure { errno, message: message.into(), gone: false }
    }
}

impl From<WeftError> for Failure {
    fn from(e: WeftError) -> Failure {
        Failure::new(e.code.errno(), e.message)
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        Failure::new(e.raw_os_error().unwrap_or(libc::EIO), e.to_string())
    }
}

/// What one action's end reports: the bytes moved, a restore's blocks, and the data
/// version the copy is of.
pub type Moved = (u64, u64, u64);

/// A copytool as the coordinator knows it: its client, its identity (root) and its name.
pub struct Agent {
    pub client: Arc<Client>,
    pub who: Caller,
    pub name: String,
}

/// Reports an action's bytes to the coordinator at most every COPYTOOL_PROGRESS_MS; learns
/// from its answer whether the action is still this copytool's.
pub struct Progress<'a> {
    agent: &'a Agent,
    cookie: u64,
    last: Instant,
}

impl Progress<'_> {
    pub async fn moved(&mut self, bytes: u64) -> Result<(), Failure> {
        if self.last.elapsed() < Duration::from_millis(COPYTOOL_PROGRESS_MS) {
            return Ok(());
        }
        self.last = Instant::now();
        let a = self.agent;
        match a.client.hsm_progress(&a.who, &a.name, self.cookie, bytes, None, 0, 0).await {
            Err(e) if e.code == ErrorCode::Stale => {
                Err(Failure { errno: libc::ECANCELED, message: e.message, gone: true })
            }
            // A missed report is no reason to stop copying (the MDS may be restarting).
            _ => Ok(()),
        }
    }
}

impl Agent {
    pub fn progress(&self, cookie: u64) -> Progress<'_> {
        Progress { agent: self, cookie, last: Instant::now() }
    }

    /// Reports an action's end, retried (the client library itself resends while the MDS
    /// restarts) until it is taken, the action went elsewhere, or COPYTOOL_END_REPORT_S
    /// passed (then the coordinator hands it out again). Whether it succeeded and was taken.
    pub async fn report_end(&self, item: &HsmActionItem, result: Result<Moved, Failure>, started: Instant) -> bool {
        let ok = result.is_ok();
        let (bytes, done, blocks, version) = match result {
            Ok((bytes, blocks, version)) => {
                let ms = started.elapsed().as_millis() as u64;
                tracing::info!(action = item.action.name(), fid = %item.fid, bytes, ms, "done");
                (bytes, (0, String::new()), blocks, version)
            }
            Err(f) if f.gone => {
                tracing::info!(action = item.action.name(), fid = %item.fid, "stopped: {}", f.message);
                return false;
            }
            Err(f) => {
                tracing::warn!(action = item.action.name(), fid = %item.fid, errno = f.errno, "failed: {}", f.message);
                (0, (f.errno, f.message), 0, 0)
            }
        };
        let deadline = Instant::now() + Duration::from_secs(COPYTOOL_END_REPORT_S);
        for attempt in 0.. {
            if attempt > 0 {
                if Instant::now() >= deadline {
                    tracing::warn!(fid = %item.fid, "gave up reporting the end of {:#x}", item.cookie);
                    return false;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            let end = Some(done.clone());
            match self.client.hsm_progress(&self.who, &self.name, item.cookie, bytes, end, blocks, version).await {
                Ok(()) => return ok,
                Err(e) if e.code == ErrorCode::Stale => {
                    tracing::info!(fid = %item.fid, "the end of {:#x} was not taken: {}", item.cookie, e.message);
                    return false;
                }
                Err(e) => {
                    tracing::warn!(fid = %item.fid, attempt, "reporting the end of {:#x} failed: {}", item.cookie, e.message)
                }
            }
        }
        false
    }

    /// A restore: the file's new objects written from `source`, made durable; the bytes,
    /// the blocks they take and their data version. `size`: the bytes the source must give
    /// (None: all it has, which becomes the file's size).
    pub async fn restore_from(
        &self,
        item: &HsmActionItem,
        source: &mut (dyn AsyncRead + Unpin + Send),
        size: Option<u64>,
    ) -> Result<Moved, Failure> {
        let layout = self.restore_open(item).await?;
        self.restore_write(item, &layout, source, size).await
    }

    /// A restore's open: the file's new objects (its layout). It leaves no handle to close
    /// (see OPEN_HSM_RESTORE).
    pub async fn restore_open(&self, item: &HsmActionItem) -> Result<weft_proto::Layout, Failure> {
        let fid = item.fid;
        let opened = self.client.open(&self.who, fid, OPEN_WRITE | OPEN_HSM_RESTORE).await?;
        opened.inode.layout.ok_or_else(|| Failure::new(libc::EIO, format!("{fid} has no layout to restore into")))
    }

    /// The rest of [`Agent::restore_from`], after [`Agent::restore_open`].
    pub async fn restore_write(
        &self,
        item: &HsmActionItem,
        layout: &weft_proto::Layout,
        source: &mut (dyn AsyncRead + Unpin + Send),
        size: Option<u64>,
    ) -> Result<Moved, Failure> {
        let (c, who, fid) = (&self.client, &self.who, item.fid);
        let mut progress = self.progress(item.cookie);
        let mut offset = 0u64;
        let mut buf = vec![0u8; RPC_BULK_BYTES_MAX as usize];
        loop {
            // Fill a whole chunk (a pipe gives less at a time) so writes stay large.
            let mut filled = 0;
            while filled < buf.len() {
                let n = source.read(&mut buf[filled..]).await?;
                if n == 0 {
                    break;
                }
                filled += n;
            }
            if filled == 0 {
                break;
            }
            if let Some(size) = size.filter(|s| offset + filled as u64 > *s) {
                return Err(Failure::new(
                    libc::EIO,
                    format!("the archive's copy of {fid} is longer than the file ({size} bytes)"),
                ));
            }
            let locks = c.extent_lock(who, fid, layout, offset, filled as u64, LockMode::Pw).await?;
            c.write(who, layout, offset, Bytes::copy_from_slice(&buf[..filled]), &locks).await?;
            drop(locks);
            offset += filled as u64;
            progress.moved(offset).await?;
        }
        if let Some(size) = size.filter(|s| *s != offset) {
            return Err(Failure::new(
                libc::EIO,
                format!("the archive's copy of {fid} has {offset} bytes, the file {size}"),
            ));
        }
        c.fsync(who, layout).await?;
        let objects = c.glimpse_versioned(who, layout).await?;
        Ok((offset, objects.blocks, objects.data_version))
    }
}

/// Runs one action to its end (its report included).
pub type Runner = Arc<dyn Fn(HsmActionItem) -> BoxFuture<'static, ()> + Send + Sync>;

/// Serves `archives` (none: every archive) until `stop` ends: polls the coordinator, runs at
/// most `parallel` actions at once with `run`, then lets the running ones end (at most
/// COPYTOOL_STOP_WAIT_S).
pub async fn serve(agent: Arc<Agent>, archives: Vec<u32>, parallel: u32, run: Runner, stop: BoxFuture<'static, ()>) {
    let mut running = tokio::task::JoinSet::new();
    // The actions this copytool runs, told with every poll (the coordinator hands out again
    // what it thinks this copytool has but is not here: a lost answer, a restart).
    let cookies: Arc<Mutex<BTreeSet<u64>>> = Arc::default();
    let mut stop = stop;
    loop {
        while running.try_join_next().is_some() {}
        let free = parallel.saturating_sub(running.len() as u32);
        let now_running: Vec<u64> = cookies.lock().unwrap_or_else(|p| p.into_inner()).iter().copied().collect();
        let taken = match agent.client.hsm_take(&agent.who, &agent.name, &archives, free, now_running).await {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!("asking the coordinator for work failed: {}", e.message);
                Vec::new()
            }
        };
        let idle = taken.is_empty();
        for item in taken {
            let (run, cookies) = (run.clone(), cookies.clone());
            cookies.lock().unwrap_or_else(|p| p.into_inner()).insert(item.cookie);
            running.spawn(async move {
                let cookie = item.cookie;
                run(item).await;
                cookies.lock().unwrap_or_else(|p| p.into_inner()).remove(&cookie);
            });
        }
        let pause = if idle || running.len() as u32 >= parallel { COPYTOOL_POLL_MS } else { 0 };
        tokio::select! {
            _ = &mut stop => break,
            // A slot freed: ask for more at once.
            Some(_) = running.join_next(), if running.len() as u32 >= parallel => {}
            _ = tokio::time::sleep(Duration::from_millis(pause)) => {}
        }
    }
    tracing::info!(name = %agent.name, running = running.len(), "copytool stopping: letting running copies end");
    let wait = tokio::time::timeout(Duration::from_secs(COPYTOOL_STOP_WAIT_S), async {
        while running.join_next().await.is_some() {}
    });
    if wait.await.is_err() {
        tracing::warn!("copies still running after {COPYTOOL_STOP_WAIT_S} s: the coordinator hands them out again");
    }
}
