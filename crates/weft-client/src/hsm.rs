//! HSM from a client: requests to the coordinator, release, the wait for a restore that an
//! open or a truncate of a released file makes (Lustre's implicit restore), and what a
//! copytool asks and reports.

use crate::limits::{RESTORE_POLL_MS_MAX, RESTORE_POLL_MS_MIN};
use crate::Client;
use std::time::{Duration, Instant};
use weft_proto::msg::hsm::{hsm_cookie_mdt, ActionStatus, HsmAction, HsmActionItem, HsmState, HS_RELEASED};
use weft_proto::msg::{mdt, Caller, InodeInfo};
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

impl Client {
    /// Queues `action` on `fids` (one request; see `mdt::HsmRequest`); each file's cookie,
    /// 0 where nothing was queued.
    pub async fn hsm_request(
        &self,
        who: &Caller,
        action: HsmAction,
        archive_id: u32,
        fids: Vec<Fid>,
        data: Vec<u8>,
    ) -> WeftResult<Vec<u64>> {
        // Each file's actions are its MDT's: one request per MDT, the cookies in order.
        let by_mdt = Fid::by_mdt(&fids);
        if by_mdt.len() <= 1 {
            return self.mdt(who, mdt::HsmRequest { action, archive_id, fids, data }).await;
        }
        let mut cookies = vec![0; fids.len()];
        for (mdt, at) in by_mdt {
            let some: Vec<Fid> = at.iter().map(|i| fids[*i]).collect();
            let op = mdt::HsmRequest { action, archive_id, fids: some, data: data.clone() };
            for (i, cookie) in at.into_iter().zip(self.mdt_on(who, mdt, op).await?) {
                cookies[i] = cookie;
            }
        }
        Ok(cookies)
    }

    /// Frees an archived, clean, closed file's objects. A glimpse gives the data version
    /// the MDT checks against the archive copy's, and the size when the MDT does not know it.
    pub async fn hsm_release(&self, who: &Caller, fid: Fid) -> WeftResult<InodeInfo> {
        let inode = self.getattr(who, fid).await?;
        let (size, data_version) = match &inode.layout {
            // Released already: the MDT says so.
            Some(layout) if !layout.is_released() => {
                let objects = self.glimpse_versioned(who, layout).await?;
                (if inode.attr.size_known { inode.attr.size } else { objects.size }, objects.data_version)
            }
            _ => (inode.attr.size, 0),
        };
        self.mdt(who, mdt::HsmRelease { fid, size, data_version }).await
    }

    /// The action waiting, running or last ended on a file.
    pub async fn hsm_action(&self, who: &Caller, fid: Fid) -> WeftResult<Option<HsmActionItem>> {
        self.mdt(who, mdt::HsmActionGet { fid }).await
    }

    /// Restores a released file and waits until it is restored, at most the configured
    /// `restore_timeout`: asks for the restore (again, if it failed or went), then watches
    /// the file's state. Ok at once for a file that is not released.
    pub async fn restore(&self, who: &Caller, fid: Fid) -> WeftResult<()> {
        let limit = self.config.restore_timeout;
        let deadline = Instant::now() + limit;
        let mut wait = Duration::from_millis(RESTORE_POLL_MS_MIN);
        let mut asked = false;
        loop {
            let state: HsmState = self.hsm_state(who, fid).await?;
            if state.states & HS_RELEASED == 0 {
                return Ok(());
            }
            let action = self.hsm_action(who, fid).await?.filter(|a| a.action == HsmAction::Restore);
            match action.as_ref().map(|a| a.status) {
                Some(ActionStatus::Waiting | ActionStatus::Started) => {}
                Some(ActionStatus::Failed) if asked => {
                    let a = action.expect("matched above");
                    return Err(WeftError::io(format!(
                        "the restore of {fid} from archive {} failed: errno {}: {}",
                        a.archive_id, a.errno, a.message
                    )));
                }
                Some(ActionStatus::Canceled) if asked => {
                    return Err(WeftError::io(format!("the restore of {fid} was canceled")));
                }
                // None yet, or an old one ended: ask (the coordinator queues one at most).
                _ => {
                    self.hsm_request(who, HsmAction::Restore, 0, vec![fid], Vec::new()).await?;
                    asked = true;
                }
            }
            let now = Instant::now();
            if now >= deadline {
                let archive = action.map_or(state.archive_id, |a| a.archive_id);
                return Err(WeftError::new(
                    ErrorCode::TimedOut,
                    format!(
                        "{fid} is released and its restore did not finish within {} s: is a copytool serving \
                         archive {archive} running? (weft hsm action shows the request)",
                        limit.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(wait.min(deadline - now)).await;
            wait = (wait * 2).min(Duration::from_millis(RESTORE_POLL_MS_MAX));
        }
    }

    /// A copytool's poll: at most `max` actions of its archives, and the actions it runs
    /// now (see `mdt::HsmTake`).
    pub async fn hsm_take(
        &self,
        who: &Caller,
        agent: &str,
        archive_ids: &[u32],
        max: u32,
        running: Vec<u64>,
    ) -> WeftResult<Vec<HsmActionItem>> {
        // Every MDT queues its files' actions: each is asked, with the actions of it this
        // agent runs (its cookies name it), until `max` are taken.
        let mdts: Vec<u32> = self.map.current().map.mdts().map(|t| t.index).collect();
        let mut taken = Vec::new();
        let mut first_error = None;
        for mdt in mdts {
            let left = max.saturating_sub(taken.len() as u32);
            let running: Vec<u64> = running.iter().copied().filter(|c| hsm_cookie_mdt(*c) == mdt).collect();
            if left == 0 && running.is_empty() {
                continue;
            }
            let op = mdt::HsmTake { agent: agent.to_string(), archive_ids: archive_ids.to_vec(), max: left, running };
            match self.mdt_on(who, mdt, op).await {
                Ok(items) => taken.extend(items),
                // One MDT down: the others' actions still run; it is asked again next poll.
                Err(e) => first_error = first_error.or(Some(e)),
            }
        }
        match first_error {
            Some(e) if taken.is_empty() => Err(e),
            _ => Ok(taken),
        }
    }

    /// A copytool's progress (`done` None) or end (Some(errno), 0: success) of an action;
    /// at the end a restore's blocks and the data version the copy is of.
    #[allow(clippy::too_many_arguments)]
    pub async fn hsm_progress(
        &self,
        who: &Caller,
        agent: &str,
        cookie: u64,
        bytes: u64,
        done: Option<(i32, String)>,
        blocks: u64,
        data_version: u64,
    ) -> WeftResult<()> {
        let (done, message) = match done {
            Some((errno, message)) => (Some(errno), message),
            None => (None, String::new()),
        };
        let op = mdt::HsmProgress { agent: agent.to_string(), cookie, bytes, done, blocks, data_version, message };
        self.mdt(who, op).await
    }
}
