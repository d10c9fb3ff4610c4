//! Synchronous mirrors (Weft's own, beyond Lustre's FLR, for sites without shared storage):
//! a file created with `weft mirror create --sync` has every write, punch and sync go to each
//! mirror in sync at once, and answered once all of them took it. When a mirror's OST does
//! not answer within [`SYNC_MIRROR_LAG_MS`] of another mirror taking the bytes, the MDS marks
//! that mirror stale (`MirrorOp::Stale`, which also queues its resync for when the OST is
//! back) before the write is answered: the program sees no error while one mirror took it,
//! and no reader is ever sent to a mirror that missed a write. A write no mirror took fails
//! as a file without mirrors would.
//!
//! Locks are taken mirror after mirror, in mirror order (two writers take them in the same
//! order, so neither holds what the other waits for), each with the same bound while another
//! mirror is or may still be locked.

use crate::limits::{SYNC_MIRROR_LAG_MS, SYNC_MIRROR_PROBE_MS};
use crate::locks::ExtentGuard;
use crate::Client;
use futures::stream::{FuturesUnordered, StreamExt};
use std::future::Future;
use std::time::Duration;
use weft_proto::layout::Layout;
use weft_proto::msg::mdt::{self, MirrorOp};
use weft_proto::msg::Caller;
use weft_proto::{ErrorCode, Fid, WeftError, WeftResult};

/// What became of one operation sent to every mirror a write goes to.
#[derive(Debug, Default)]
pub(crate) struct MirrorOutcome {
    pub took: Vec<u16>,
    /// The mirrors that failed it or did not answer in time, with why.
    pub missed: Vec<(u16, WeftError)>,
}

impl MirrorOutcome {
    /// The mirrors to mark stale when at least one mirror took the operation; the first
    /// mirror's error when none did (the operation failed).
    pub fn decide(mut self) -> WeftResult<Vec<(u16, WeftError)>> {
        if self.took.is_empty() {
            self.missed.sort_by_key(|(id, _)| *id);
            let first = self.missed.into_iter().next().map(|(_, e)| e);
            return Err(first.unwrap_or_else(|| WeftError::io("no mirror to write to")));
        }
        Ok(self.missed)
    }
}

fn lagging(id: u16, lag: Duration) -> WeftError {
    WeftError::new(
        ErrorCode::TimedOut,
        format!("mirror {id} did not answer within {} ms of another mirror", lag.as_millis()),
    )
}

/// Runs every mirror's attempt at once. Until one mirror took it, all are waited for as
/// long as they take (a write without mirrors waits as long); from then on the others get
/// `lag` more, and those still running count as missed (their requests are dropped).
pub(crate) async fn gather_mirrors<Fut>(attempts: Vec<(u16, Fut)>, lag: Duration) -> MirrorOutcome
where
    Fut: Future<Output = WeftResult<()>>,
{
    let mut waiting: Vec<u16> = attempts.iter().map(|(id, _)| *id).collect();
    let mut pending: FuturesUnordered<_> =
        attempts.into_iter().map(|(id, attempt)| async move { (id, attempt.await) }).collect();
    let mut out = MirrorOutcome::default();
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        let next = match deadline {
            None => pending.next().await,
            Some(at) => match tokio::time::timeout_at(at, pending.next()).await {
                Ok(next) => next,
                Err(_) => break,
            },
        };
        let Some((id, result)) = next else { break };
        waiting.retain(|w| *w != id);
        match result {
            Ok(()) => {
                out.took.push(id);
                deadline.get_or_insert_with(|| tokio::time::Instant::now() + lag);
            }
            Err(e) => out.missed.push((id, e)),
        }
    }
    out.missed.extend(waiting.into_iter().map(|id| (id, lagging(id, lag))));
    out
}

impl Client {
    /// `attempt` on every mirror a write of `layout` goes to ([`Layout::write_mirrors`]):
    /// each mirror's own layout, at once, when the file's mirrors are written synchronously
    /// (see the module's comment; `file` names the file whose missed mirrors go stale, none:
    /// a missed mirror fails the operation); the whole layout, once, otherwise.
    pub(crate) async fn on_write_mirrors<F, Fut>(
        &self,
        who: &Caller,
        file: Option<Fid>,
        layout: &Layout,
        attempt: F,
    ) -> WeftResult<()>
    where
        F: Fn(Layout) -> Fut,
        Fut: Future<Output = WeftResult<()>>,
    {
        let ids = layout.write_mirrors();
        if !layout.sync_mirrors() || ids.len() < 2 {
            return attempt(layout.clone()).await;
        }
        let attempts = ids.iter().map(|id| (*id, attempt(layout.mirror(*id)))).collect();
        let lag = Duration::from_millis(SYNC_MIRROR_LAG_MS);
        let missed = gather_mirrors(attempts, lag).await.decide()?;
        self.mirrors_missed(who, file, layout, missed).await
    }

    /// Locks, with `lock`, every mirror a write of `layout` goes to, one after the other
    /// (see the module's comment): the guard over the mirrors locked, after the MDS marked
    /// those that could not be locked stale.
    pub(crate) async fn lock_write_mirrors<F, Fut>(
        &self,
        who: &Caller,
        file: Fid,
        layout: &Layout,
        lock: F,
    ) -> WeftResult<ExtentGuard>
    where
        F: Fn(Layout) -> Fut,
        Fut: Future<Output = WeftResult<ExtentGuard>>,
    {
        let ids = layout.write_mirrors();
        let lag = Duration::from_millis(SYNC_MIRROR_LAG_MS);
        let mut guard: Option<ExtentGuard> = None;
        let mut missed = Vec::new();
        for (k, id) in ids.iter().enumerate() {
            let attempt = lock(layout.mirror(*id));
            // The last mirror with none locked yet waits as a file without mirrors would.
            let bounded = guard.is_some() || k + 1 < ids.len();
            let result = match bounded {
                true => tokio::time::timeout(lag, attempt).await.unwrap_or_else(|_| Err(lagging(*id, lag))),
                false => attempt.await,
            };
            match (result, &mut guard) {
                (Ok(g), Some(all)) => all.absorb(g),
                (Ok(g), None) => guard = Some(g),
                (Err(e), _) => missed.push((*id, e)),
            }
        }
        let outcome = MirrorOutcome { took: if guard.is_some() { vec![0] } else { Vec::new() }, missed };
        let missed = outcome.decide()?;
        self.mirrors_missed(who, Some(file), layout, missed).await?;
        guard.ok_or_else(|| WeftError::io("no mirror locked"))
    }

    /// Resyncs `fid`'s stale mirrors if every OST they are on answers now (each asked once,
    /// within [`SYNC_MIRROR_PROBE_MS`]): the layout after the resync, or None while one
    /// does not answer (a resync then would hold the writers back until its requests gave
    /// up). What the server of an MDT runs for each file queued when a synchronous mirror
    /// went stale.
    pub async fn resync_if_reachable(&self, who: &Caller, fid: Fid) -> WeftResult<Option<Layout>> {
        let layout =
            self.getattr(who, fid).await?.layout.ok_or_else(|| WeftError::invalid(format!("{fid} has no layout")))?;
        let mut osts: Vec<(u32, Fid)> = Vec::new();
        for id in layout.mirror_ids().into_iter().filter(|m| !layout.mirror_in_sync(*m)) {
            for object in layout.mirror(id).objects() {
                if !osts.iter().any(|(ost, _)| *ost == object.ost) {
                    osts.push((object.ost, object.fid));
                }
            }
        }
        let probe = Duration::from_millis(SYNC_MIRROR_PROBE_MS);
        let answers = futures::future::join_all(osts.iter().map(|(ost, object)| async move {
            let asked = self.ost(who, *ost, weft_proto::msg::ost::Getattr { fid: *object }, bytes::Bytes::new());
            // An object never written is not there: its OST answered all the same.
            matches!(
                tokio::time::timeout(probe, asked).await,
                Ok(Ok(_)) | Ok(Err(WeftError { code: ErrorCode::NotFound, .. }))
            )
        }))
        .await;
        if answers.iter().any(|up| !up) {
            return Ok(None);
        }
        self.mirror_resync(who, fid).await.map(Some)
    }

    /// Mirrors of `file` missed an operation others took: the MDS marks each stale before
    /// the operation is answered, and this client's opens of the file fetch its layout again
    /// (its own change calls back none of its locks). An error when that fails: the
    /// operation must not be answered while a mirror in sync lacks it.
    async fn mirrors_missed(
        &self,
        who: &Caller,
        file: Option<Fid>,
        layout: &Layout,
        missed: Vec<(u16, WeftError)>,
    ) -> WeftResult<()> {
        let Some((_, first)) = missed.first() else { return Ok(()) };
        let Some(fid) = file else { return Err(first.clone()) };
        for (id, why) in &missed {
            tracing::warn!("mirror {id} of {fid} missed a write ({why}): marking it stale");
            self.note_failing(&layout.mirror(*id));
            self.mdt(who, mdt::Mirror { fid, op: MirrorOp::Stale { mirror_id: *id } }).await.map_err(|e| {
                WeftError::new(e.code, format!("mirror {id} of {fid} missed a write ({why}) and stays in sync: {e}"))
            })?;
        }
        self.locks.forget_layout(fid);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;

    type Attempt = Pin<Box<dyn Future<Output = WeftResult<()>> + Send>>;

    fn after(ms: u64, result: WeftResult<()>) -> Attempt {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            result
        })
    }

    fn never() -> Attempt {
        Box::pin(std::future::pending())
    }

    fn ids(missed: &[(u16, WeftError)]) -> Vec<(u16, ErrorCode)> {
        missed.iter().map(|(id, e)| (*id, e.code)).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_mirror_that_does_not_answer_is_missed_after_the_lag_behind_another() {
        let lag = Duration::from_millis(SYNC_MIRROR_LAG_MS);
        let started = tokio::time::Instant::now();
        let out = gather_mirrors(vec![(1, never()), (2, after(50, Ok(())))], lag).await;
        // Answered the lag after mirror 2 took it, not when mirror 1's requests give up.
        assert_eq!(started.elapsed(), Duration::from_millis(50) + lag);
        assert_eq!(out.took, [2]);
        assert_eq!(ids(&out.decide().unwrap()), [(1, ErrorCode::TimedOut)]);
    }

    #[tokio::test(start_paused = true)]
    async fn slow_mirrors_are_all_waited_for_until_one_took_it_and_within_the_lag_after() {
        let lag = Duration::from_millis(SYNC_MIRROR_LAG_MS);
        let slow = SYNC_MIRROR_LAG_MS * 5;
        let out = gather_mirrors(vec![(1, after(slow, Ok(()))), (2, after(slow + 10, Ok(())))], lag).await;
        assert_eq!(out.took, [1, 2]);
        assert!(out.decide().unwrap().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_mirror_that_fails_is_missed_and_none_taking_it_is_the_first_mirrors_error() {
        let lag = Duration::from_millis(SYNC_MIRROR_LAG_MS);
        let refused = || Err(WeftError::new(ErrorCode::Io, "down"));
        let out = gather_mirrors(vec![(1, after(5, refused())), (2, after(500, Ok(())))], lag).await;
        assert_eq!(ids(&out.decide().unwrap()), [(1, ErrorCode::Io)]);
        let out = gather_mirrors(vec![(1, after(5, refused())), (2, after(1, Err(WeftError::io("x"))))], lag).await;
        assert_eq!(out.decide().unwrap_err().code, ErrorCode::Io);
    }
}
