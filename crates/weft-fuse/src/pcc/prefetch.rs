//! Prefetch (`prefetch=1`, Weft's): a cache follows the MDT's changelog as a reader of its
//! own and makes a read-only copy of each file the rule matches once a writer closed it.

use super::attach::facts;
use super::state::{io_error, root, Kind};
use crate::limits::{PCC_PREFETCH_IDLE_MS, PCC_PREFETCH_RECORDS_MAX};
use crate::mount::Mount;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use weft_proto::msg::FileType;
use weft_proto::{Fid, WeftResult};

/// The file in a cache directory that names its changelog reader (prefetch).
pub(super) const READER_FILE: &str = ".prefetch-reader";

/// Follows the changelog for a prefetching cache until stopped or the mount goes: the
/// files of each batch of creates and writers' closes are looked at once, then the batch is
/// cleared.
async fn prefetch(
    mount: std::sync::Weak<Mount>,
    dir: PathBuf,
    reader: String,
    mut last: u64,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    use weft_proto::msg::changelog::ChangelogType;
    loop {
        let Some(m) = mount.upgrade() else { return };
        let records = match m.client.changelog_read(&root(), last + 1, PCC_PREFETCH_RECORDS_MAX).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("prefetch into {}: reading the changelog: {e}", dir.display());
                Vec::new()
            }
        };
        let Some(end) = records.last().map(|r| r.index) else {
            drop(m);
            tokio::select! {
                _ = &mut stop => return,
                _ = tokio::time::sleep(Duration::from_millis(PCC_PREFETCH_IDLE_MS)) => continue,
            }
        };
        let mut fids: Vec<Fid> = records
            .iter()
            .filter(|r| r.kind == ChangelogType::Close && r.target != Fid::default())
            .map(|r| r.target)
            .collect();
        fids.sort_unstable_by_key(|f| (f.seq, f.oid, f.ver));
        fids.dedup();
        for fid in fids {
            if !matches!(stop.try_recv(), Err(tokio::sync::oneshot::error::TryRecvError::Empty)) {
                return;
            }
            m.prefetch_one(&dir, fid).await;
        }
        if let Err(e) = m.client.changelog_clear(&root(), &reader, end).await {
            tracing::warn!("prefetch into {}: clearing the changelog to {end}: {e}", dir.display());
        }
        last = end;
    }
}

impl Mount {
    /// The changelog reader of a prefetching cache (the one it had, if still registered)
    /// and the task following it; the sender stops the task.
    pub(super) async fn start_prefetch(
        self: &Arc<Self>,
        dir: &Path,
    ) -> WeftResult<(tokio::sync::oneshot::Sender<()>, String)> {
        let file = dir.join(READER_FILE);
        let users = self.client.changelog_users(&root()).await?;
        let kept = std::fs::read_to_string(&file).ok().and_then(|id| {
            let id = id.trim().to_string();
            users.users.iter().find(|u| u.id == id).map(|u| (u.id.clone(), u.cleared))
        });
        let (reader, cleared) = match kept {
            Some(kept) => kept,
            None => {
                let u = self.client.changelog_register(&root(), Some("pcc".into())).await?;
                std::fs::write(&file, &u.id).map_err(|e| io_error("cannot write", &file, e))?;
                (u.id, u.cleared)
            }
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let task = prefetch(Arc::downgrade(self), dir.to_path_buf(), reader.clone(), cleared, rx);
        self.runtime.spawn(task);
        tracing::info!("cache {}: prefetch follows the changelog as reader {reader}", dir.display());
        Ok((tx, reader))
    }

    /// A file the changelog named: a read-only copy if the cache's rule takes it and it is
    /// neither cached nor open here.
    async fn prefetch_one(&self, dir: &Path, fid: Fid) {
        if self.pcc.held(fid).is_some() || self.io.counts(fid) != crate::iomode::IoCounts::default() {
            return;
        }
        let Some(backend) = self.pcc.backend_of(dir) else { return };
        let Ok(inode) = self.client.getattr(&root(), fid).await else { return };
        if inode.attr.kind != FileType::Regular || inode.layout.as_ref().is_none_or(|l| l.is_released()) {
            return;
        }
        let Ok(path) = self.client.fid2path(&root(), fid).await else { return };
        let name = path.rsplit(|b| *b == b'/').next().unwrap_or(&path).to_vec();
        if !backend.rule.matches(&facts(&inode, &name)) {
            return;
        }
        let _changing = self.pcc.changing.lock().await;
        if let Err(e) = self.attach(&root(), fid, Kind::Readonly, dir, &backend, false).await {
            tracing::info!("prefetch of {fid} into {}: {e}", dir.display());
        }
    }
}
