//! The resync of synchronous mirrors that went stale (`weft mirror create --sync`): a write
//! that missed a mirror whose OST failed queued the file on the MDT (in the batch that marked
//! the mirror stale); this task, in the process that serves the MDT (a replicated MDT's
//! leader only: the slot holds an MDS only while this replica leads), resyncs each queued
//! file once the map shows its stale mirror's OSTs up and they answer, through a client of
//! its own, as `weft mirror resync` would. The resync's end takes the file off the queue.

use crate::limits::{RESYNC_CHECK_MS, RESYNC_FILES_MAX};
use crate::replicated::MdsSlot;
use std::sync::Arc;
use std::time::Duration;
use weft_client::{Client, ClientConfig};
use weft_proto::msg::Caller;
use weft_proto::ErrorCode;

/// Runs for the life of the server: every RESYNC_CHECK_MS, the files due (none: no request
/// goes out, and no client is made until the first is due).
pub(crate) async fn run(slot: Arc<MdsSlot>, mgs_address: String) {
    let who = Caller::new(weft_proto::msg::Identity::root(), "weft_resync".to_string());
    let mut client: Option<Arc<Client>> = None;
    loop {
        tokio::time::sleep(Duration::from_millis(RESYNC_CHECK_MS)).await;
        let Some(mds) = slot.get() else { continue };
        let due = match mds.resyncs_due(RESYNC_FILES_MAX) {
            Ok(due) => due,
            Err(e) => {
                tracing::error!("cannot read the resync queue: {e}");
                continue;
            }
        };
        drop(mds);
        if due.is_empty() {
            continue;
        }
        let c = match &client {
            Some(c) => c.clone(),
            None => match Client::connect(ClientConfig::new(mgs_address.clone())).await {
                Ok(c) => client.insert(c).clone(),
                Err(e) => {
                    tracing::warn!("the resync of synchronous mirrors cannot reach the file system: {e}");
                    continue;
                }
            },
        };
        for fid in due {
            match c.resync_if_reachable(&who, fid).await {
                Ok(Some(_)) => tracing::info!("resynced the synchronous mirrors of {fid}"),
                Ok(None) => tracing::debug!("{fid}: a stale mirror's OST does not answer yet"),
                Err(e) if e.code == ErrorCode::NotFound => tracing::debug!("{fid} is gone: {e}"),
                Err(e) => tracing::warn!("resync of {fid}: {e} (tried again later)"),
            }
        }
        // Its locks go back and the MDT forgets it until the next resync: a recovery window
        // after this process dies (a leader's) does not wait for it.
        c.release_locks().await;
    }
}
