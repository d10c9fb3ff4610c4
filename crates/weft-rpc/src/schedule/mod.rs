//! The schedule stage of the server pipeline (Lustre's NRS): when each request starts and
//! where it runs.
//!
//! Each service of a server process ([`Service`]: MGS, MDT, OST I/O, other OST requests,
//! locks) has a [`Scheduler`] holding one [`Policy`]. The pipeline asks it about every
//! request ([`RequestInfo`]); the policy answers with an [`Admission`]: start now, or wait
//! for a [`Grant`] it hands out later. A grant also says how the request runs ([`Run`]:
//! inline on whoever polls it, or handed to a thread that may block) and holds whatever
//! the policy gave out (a per-target turn) until the request has executed.
//!
//! [`fifo::Fifo`] is the default and the fallback, as in Lustre. The token bucket filter
//! ([`tbf`]), the round robins over clients or objects ([`rr`]), or a test policy is one more
//! module beside it that implements [`Policy`]; [`Scheduler::set_policy`] switches a service's policy at run time,
//! and requests the old one admitted or holds go on under it.
//!
//! A policy that holds a request back says so ([`Admission::Later`] with `held`): a request
//! made in-process is then let go by its caller's thread (see [`crate::held::take_held`]),
//! so that a throttled class never occupies a mount's few FUSE threads while other classes'
//! requests wait behind it.

pub mod fifo;
mod policy;
pub mod rr;
pub mod tbf;

pub use policy::{Admission, Grant, Policy, RequestInfo};
use std::sync::{Arc, RwLock};
pub use weft_proto::msg::Run;
use weft_proto::msg::Service;

/// One service's scheduler: its policy, switchable at run time.
pub struct Scheduler {
    service: Service,
    policy: RwLock<Installed>,
}

/// The policy in force, and the same policy as its own type when it is one whose rules and
/// listings the schedulers show. The [`Policy`] trait names no policy, so that the policies'
/// modules and the trait they implement do not name each other.
#[derive(Clone)]
struct Installed {
    policy: Arc<dyn Policy>,
    known: Known,
}

#[derive(Clone)]
enum Known {
    Other,
    Tbf(Arc<tbf::TbfPolicy>),
    Rr(Arc<rr::RrPolicy>),
}

impl Scheduler {
    pub fn new(service: Service, policy: Arc<dyn Policy>) -> Scheduler {
        Scheduler { service, policy: RwLock::new(Installed { policy, known: Known::Other }) }
    }

    fn installed(&self) -> Installed {
        self.policy.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn service(&self) -> Service {
        self.service
    }

    /// Whether FIFO is the policy in force (nothing is held back on purpose).
    pub fn is_fifo(&self) -> bool {
        self.policy.read().unwrap_or_else(|p| p.into_inner()).policy.name() == fifo::NAME
    }

    pub fn policy(&self) -> Arc<dyn Policy> {
        self.installed().policy
    }

    /// From now on `policy` admits this service's requests; those admitted or held by the
    /// old one go on as it decided.
    pub fn set_policy(&self, policy: Arc<dyn Policy>) {
        self.install(Installed { policy, known: Known::Other });
    }

    fn install(&self, new: Installed) {
        tracing::info!(service = self.service.name(), from = %self.policy().name(), to = %new.policy.name(), "NRS policy switched");
        *self.policy.write().unwrap_or_else(|p| p.into_inner()) = new;
    }

    pub fn admit(&self, request: &RequestInfo<'_>) -> Admission {
        self.policy.read().unwrap_or_else(|p| p.into_inner()).policy.admit(request)
    }
}

/// The schedulers of a server process, one per service, each starting with FIFO.
pub struct Schedulers {
    by_service: Vec<Scheduler>,
    /// Told when a TBF policy's global rule should have its demand reported at once.
    global_report: Arc<tokio::sync::Notify>,
}

impl Default for Schedulers {
    fn default() -> Self {
        let fifo: Arc<dyn Policy> = Arc::new(fifo::Fifo::default());
        Schedulers {
            by_service: Service::ALL.iter().map(|s| Scheduler::new(*s, fifo.clone())).collect(),
            global_report: Arc::default(),
        }
    }
}

/// The policies `nrs_policies` takes, for messages.
pub const POLICY_NAMES: &str =
    "fifo, crrn, orr, tbf, tbf TYPE (TYPE: nid, jobid, opcode, uid, gid, or several joined by +)";

impl Schedulers {
    pub fn of(&self, service: Service) -> &Scheduler {
        &self.by_service[service.index()]
    }

    /// Switches `service` to the policy `text` names, as `nrs_policies` is written: `fifo`,
    /// `tbf`, `tbf jobid`, `tbf uid+gid`. Requests the old policy admitted or holds go on
    /// (a TBF switched away from lets its queue go). Switching to the TBF of the type in
    /// force keeps its rules. Needs a tokio runtime (TBF's dispatcher runs on it).
    pub fn set_policy(&self, service: Service, text: &str) -> Result<(), String> {
        let text = text.trim();
        let mut words = text.splitn(2, char::is_whitespace);
        let name = words.next().unwrap_or_default();
        let arg = words.next().unwrap_or_default().trim();
        if service == Service::Param {
            return Err("parameter requests are always served first come, first served".into());
        }
        if service == Service::Raft {
            // A heartbeat held back by a rate limit would start an election.
            return Err("raft requests are always served first come, first served".into());
        }
        match name {
            "fifo" if arg.is_empty() => {
                self.of(service).set_policy(Arc::new(fifo::Fifo::default()));
                Ok(())
            }
            "crrn" | "orr" if arg.is_empty() => {
                let kind = if name == "crrn" { rr::Kind::Crrn } else { rr::Kind::Orr };
                if self.rr(service).is_some_and(|p| p.kind() == kind) {
                    return Ok(());
                }
                let policy = Arc::new(rr::RrPolicy::new(kind));
                self.of(service).install(Installed { policy: policy.clone(), known: Known::Rr(policy) });
                Ok(())
            }
            "tbf" => {
                let ty = tbf::rule::TbfType::parse(arg)?;
                if self.tbf(service).is_some_and(|t| t.ty() == ty) {
                    return Ok(());
                }
                let report = self.global_report.clone();
                let policy = tbf::TbfPolicy::start_reporting(ty, tbf::core::Options::default(), report);
                let policy = Arc::new(policy);
                self.of(service).install(Installed { policy: policy.clone(), known: Known::Tbf(policy) });
                Ok(())
            }
            _ => Err(format!("unknown NRS policy '{text}': the policies are {POLICY_NAMES}")),
        }
    }

    /// Told when a TBF policy's global rule should have its demand reported now, not at the
    /// next interval (a job's requests came to wait on a server that reported it idle).
    pub fn global_report_wanted(&self) -> &tokio::sync::Notify {
        &self.global_report
    }

    /// The TBF policy in force on `service`, if that is the policy.
    pub fn tbf(&self, service: Service) -> Option<Arc<tbf::TbfPolicy>> {
        match self.of(service).installed().known {
            Known::Tbf(tbf) => Some(tbf),
            _ => None,
        }
    }

    /// The round robin policy in force on `service`, if that is the policy.
    pub fn rr(&self, service: Service) -> Option<Arc<rr::RrPolicy>> {
        match self.of(service).installed().known {
            Known::Rr(rr) => Some(rr),
            _ => None,
        }
    }

    /// `nrs_policies` as Lustre shows it: each policy, its state, and (for the one in
    /// force) its queued and running requests.
    pub fn policies_listing(&self, service: Service) -> String {
        let tbf = self.tbf(service);
        let mut out = String::from("regular_requests:\n");
        let mut entry = |name: &str, started: bool, fallback: bool, queued: usize, active: usize| {
            out.push_str(&format!(
                "  - name: {name}\n    state: {}\n    fallback: {}\n    queued: {queued}\n    active: {active}\n",
                if started { "started" } else { "stopped" },
                if fallback { "yes" } else { "no" },
            ));
        };
        // FIFO is always started, as Lustre's fallback.
        entry("fifo", true, true, 0, 0);
        let rr = self.rr(service);
        for kind in [rr::Kind::Crrn, rr::Kind::Orr] {
            match rr.as_ref().filter(|p| p.kind() == kind) {
                Some(p) => entry(kind.name(), true, false, p.queued(), p.running()),
                None => entry(kind.name(), false, false, 0, 0),
            }
        }
        match &tbf {
            Some(t) => entry(t.name(), true, false, t.queued(), t.running()),
            None => entry("tbf", false, false, 0, 0),
        }
        out
    }
}
