//! Bandwidth reservations from a program (the QoS planner's run-time API: its
//! `addReservationAsync`, `testReservation` and `removeReservation`): reserve a throughput on
//! the OSTs of some files or directories for a while, see when it is active, give it back.
//! The job id the reservation's TBF rule matches is this handle's (`Fs::set_jobid`) unless
//! another is named.

use crate::error::{Error, Result};
use crate::fs::Fs;
use std::time::{Duration, Instant};
use weft_client::qos::osts_of;
use weft_proto::msg::qos::{ReservationState, ReserveRequest, Throughput};
use weft_proto::msg::RequestHeader;

/// How often a synchronous reservation asks whether it is active yet.
const POLL: Duration = Duration::from_millis(100);

impl Fs {
    fn qos_header(&self) -> RequestHeader {
        let who = self.who();
        RequestHeader { identity: who.identity, jobid: who.jobid, ..RequestHeader::default() }
    }

    /// Plans reservation `id` of `throughput` (`100M` bytes/s, `500rps`) on the OSTs of
    /// `paths` for `duration`, for job `job` (None: this handle's job id); its state at once
    /// (scheduled or active). Refused (EINVAL, EEXIST, EBUSY...) with the planner's reason.
    pub fn qos_reserve(
        &self,
        id: &str,
        job: Option<&str>,
        paths: &[&[u8]],
        throughput: &str,
        duration: Duration,
    ) -> Result<ReservationState> {
        let throughput = Throughput::parse(throughput).map_err(|e| Error::new(libc::EINVAL, e))?;
        if paths.is_empty() {
            return Err(Error::new(libc::EINVAL, "a reservation needs the paths whose OSTs it holds"));
        }
        let who = self.who();
        let map = self.client.map();
        let mut osts = Vec::new();
        for path in paths {
            let inode = self.resolve(&who, path, true)?;
            let (layout, spec) = self.run(self.client.getstripe(&who, inode.attr.fid))?;
            osts.extend(osts_of(&map, layout.as_ref(), spec.as_ref()));
        }
        let job = job.map_or_else(|| self.jobid().to_string(), str::to_string);
        let request = ReserveRequest {
            id: id.to_string(),
            job,
            throughput,
            osts,
            earliest_ms: 0,
            duration_ms: duration.as_millis() as u64,
        };
        self.run(self.client.qos_reserve(self.qos_header(), request))
    }

    /// As [`Fs::qos_reserve`], then waits until the reservation is active, at most
    /// `timeout` (ETIMEDOUT; the reservation stays planned); ECANCELED if it ended first.
    pub fn qos_reserve_wait(
        &self,
        id: &str,
        job: Option<&str>,
        paths: &[&[u8]],
        throughput: &str,
        duration: Duration,
        timeout: Duration,
    ) -> Result<ReservationState> {
        let mut state = self.qos_reserve(id, job, paths, throughput, duration)?;
        let start = Instant::now();
        while state == ReservationState::Scheduled {
            if start.elapsed() >= timeout {
                return Err(Error::new(libc::ETIMEDOUT, format!("reservation {id} is not active after {timeout:?}")));
            }
            std::thread::sleep(POLL.min(timeout.saturating_sub(start.elapsed())));
            state = self.qos_state(id)?;
        }
        if state != ReservationState::Active {
            return Err(Error::new(
                libc::ECANCELED,
                format!("reservation {id} ended before it became active (cancelled)"),
            ));
        }
        Ok(state)
    }

    /// The state of reservation `id` now: undefined, scheduled, active or done.
    pub fn qos_state(&self, id: &str) -> Result<ReservationState> {
        self.run(self.client.qos_state(id))
    }

    /// Ends reservation `id` now (its maker or root); what it held is given back.
    pub fn qos_cancel(&self, id: &str) -> Result<()> {
        self.run(self.client.qos_cancel(self.qos_header(), id))
    }
}
