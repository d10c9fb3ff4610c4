//! Read-write files going back to the servers: the copytool a read-write cache runs for its
//! archive id (`rwid`), whose restores write the cache copy into the file's new objects once
//! this mount's writers closed, and a detach, which asks for that restore.

use super::state::{busy, copy_name, lock, root, Pcc, Phase, RW_DIR};
use crate::coherence::MountHooks;
use crate::limits::{PCC_RESTORES_MAX, PCC_WRITERS_POLL_MS};
use crate::mount::Mount;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_client::copytool::{self, Failure};
use weft_proto::msg::hsm::{HsmAction, HsmActionItem};
use weft_proto::{ErrorCode, Fid, WeftResult};

/// What a restore by this mount's copytool needs (no mount: the copytool outlives none of
/// it, and the mount's requests do not wait on it).
struct Restorer {
    agent: Arc<copytool::Agent>,
    pcc: Arc<Pcc>,
    hooks: Arc<MountHooks>,
    dir: PathBuf,
}

impl Restorer {
    async fn run(&self, item: HsmActionItem) {
        let started = Instant::now();
        let result = match item.action {
            HsmAction::Restore => self.restore(&item).await,
            other => Err(Failure::new(
                libc::EINVAL,
                format!("archive {} is a client cache: it serves restores, not {}", item.archive_id, other.name()),
            )),
        };
        let restored = self.agent.report_end(&item, result, started).await;
        let fid = item.fid;
        if restored {
            self.pcc.forget(fid);
            // This mount's attributes of it were the copy's.
            drop(weft_client::locks::LockHooks::drop_inode(&*self.hooks, fid, weft_proto::lock::bits::UPDATE));
        } else if let Some(h) = lock(&self.pcc.state).files.get_mut(&fid) {
            h.phase = Phase::Attached;
        }
    }

    /// The cache copy written into the file's new objects, once this mount's writers closed.
    async fn restore(&self, item: &HsmActionItem) -> Result<copytool::Moved, Failure> {
        let fid = item.fid;
        let path = self.dir.join(RW_DIR).join(copy_name(fid));
        if !path.exists() {
            return Err(Failure::new(
                libc::ENOENT,
                format!("{fid} is not in this mount's cache {} (was it attached elsewhere?)", self.dir.display()),
            ));
        }
        let mut progress = self.agent.progress(item.cookie);
        loop {
            {
                let mut state = lock(&self.pcc.state);
                match state.files.get_mut(&fid) {
                    Some(h) if h.writers > 0 => {}
                    Some(h) => {
                        h.phase = Phase::Restoring;
                        break;
                    }
                    None => break,
                }
            }
            // Keeps the action this copytool's while it waits.
            progress.moved(0).await?;
            tokio::time::sleep(Duration::from_millis(PCC_WRITERS_POLL_MS)).await;
        }
        let mut source = tokio::fs::File::open(&path).await?;
        self.agent.restore_from(item, &mut source, None).await
    }
}

impl Mount {
    /// The copytool serving restores of the cache's read-write files; the sender stops it.
    pub(super) fn start_copytool(&self, dir: &Path, rwid: u32) -> tokio::sync::oneshot::Sender<()> {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let name = format!("pcc-{}-{}-{rwid}", host.trim(), std::process::id());
        let agent = Arc::new(copytool::Agent { client: self.client.clone(), who: root(), name });
        let (pcc, hooks) = (self.pcc.clone(), self.hooks.clone());
        let restorer = Arc::new(Restorer { agent: agent.clone(), pcc, hooks, dir: dir.to_path_buf() });
        let run: copytool::Runner = Arc::new(move |item| {
            let r = restorer.clone();
            Box::pin(async move { r.run(item).await })
        });
        let stop = Box::pin(async move {
            let _ = rx.await;
        });
        self.runtime.spawn(copytool::serve(agent, vec![rwid], PCC_RESTORES_MAX, run, stop));
        tx
    }

    /// A read-write file back to the servers: a restore, which this mount's copytool
    /// serves from the copy (and then deletes it).
    pub(super) async fn detach_rw(&self, fid: Fid) -> WeftResult<()> {
        if let Some(h) = self.pcc.held(fid) {
            if h.opens > 0 {
                return Err(busy(format!("{fid} is open on this mount ({} opens): detach it when closed", h.opens)));
            }
        }
        match self.client.restore(&root(), fid).await {
            Ok(()) => {}
            // Removed meanwhile: nothing to bring back.
            Err(e) if e.code == ErrorCode::NotFound => {}
            Err(e) => return Err(e),
        }
        self.pcc.forget(fid);
        drop(weft_client::locks::LockHooks::drop_inode(&*self.hooks, fid, weft_proto::lock::bits::UPDATE));
        Ok(())
    }
}
