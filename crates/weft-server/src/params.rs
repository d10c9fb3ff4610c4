//! The parameter tree of a server process (Lustre's `lctl get_param/set_param`): for each
//! service the process runs, its NRS policy and, under TBF, its rules, settings and classes.
//!
//! | name | get | set |
//! |---|---|---|
//! | `SERVICE.nrs_policies` | the policies, Lustre's YAML | `fifo`, `crrn`, `orr`, `tbf`, `tbf jobid`, ... |
//! | `SERVICE.nrs_tbf_rule` | the rules, Lustre's shape | `start ...`, `change ...`, `stop ...` |
//! | `SERVICE.nrs_tbf_running_max` | requests running at once under TBF (0: no bound) | a number |
//! | `SERVICE.nrs_tbf_share_spare` | 1 when idle capacity is shared by rate | 0 or 1 |
//! | `SERVICE.nrs_tbf_depth` | tokens a class may save up | 1 or more |
//! | `SERVICE.nrs_tbf_classes` | each class: its rule, requests held and waits | read only |
//! | `SERVICE.nrs_crrn_quantum`, `SERVICE.nrs_orr_quantum` | requests per turn (`reg_quantum:16`) | a number |
//! | `SERVICE.nrs_crrn_running_max`, `SERVICE.nrs_orr_running_max` | requests running before they queue | a number |
//! | `SERVICE.nrs_orr_supported` | what ORR orders (`reg_supported:reads`) | `reads`, `writes`, `reads_and_writes` |
//!
//! | `obdfilter.OST.job_stats`, `mdt.MDT.job_stats` | each job's counters, Lustre's YAML | `clear`, or a jobid to forget |
//! | `obdfilter.OST.job_cleanup_interval`, `mdt.MDT.job_cleanup_interval` | seconds an idle job (and an idle user's or group's counters: the metrics and the monitor take a counter that went back as a reset) is kept | seconds, 0 for ever |
//! | `mdd.MDT.changelog_mask` | the changelog types recorded (`MARK CREAT MKDIR ...`) | names, or `+NAME` / `-NAME` |
//! | `mdd.MDT.changelog_users` | the changelog's readers, Lustre's listing | read only |
//! | `mdt.MDT.hsm_control` | whether the HSM coordinator hands out actions | `enabled`, `disabled` (queue only), `shutdown` (take none), `purge` (cancel every action) |
//! | `mdt.MDT.hsm.actions`, `mdt.MDT.hsm.active_requests` | the coordinator's actions (all; running), Lustre's lines | read only |
//! | `mdt.MDT.hsm.agents` | the copytools heard from, Lustre's lines | read only |
//! | `mdt.MDT.hsm.active_request_timeout` | seconds a running action may go without progress before it is handed out again (3600) | seconds |
//! | `mdt.MDT.hsm.grace_delay` | seconds an ended action stays listed (60) | seconds |
//! | `mdt.MDT.hsm.default_archive_id` | the archive of a request that names none, for a file not archived yet (1) | an id |
//!
//! SERVICE is `ost.OSS.ost_io`, `ost.OSS.ost`, `mds.MDS.mdt`, `mgs.MGS.mgs` or
//! `ldlm.services.ldlm_canceld`, as the process serves them; OST and MDT the names of its
//! targets (`weft-OST0001`). The `nrs_tbf_*`, `nrs_crrn_*` and `nrs_orr_*` names answer
//! while the service's policy is that one.

use std::fmt::Write;
use std::sync::Arc;
use weft_proto::msg::param::{
    name_matches, name_or_parent_matches, records_to_apply, ParamNames, ParamValue, ParamValues, UsageCounters,
    UsageRow,
};
use weft_proto::msg::{target_name, ParamRecord, ParamReply, ParamRequest, RequestHeader, Service, TargetKind};
use weft_proto::{ErrorCode, WeftError, WeftResult};
use weft_rpc::jobstats::{By, JobStats};
use weft_rpc::schedule::rr::{Kind, RrPolicy, Supported};
use weft_rpc::schedule::tbf::TbfPolicy;
use weft_rpc::schedule::Schedulers;

/// `value` as a number in `range`, or an error naming what it should be.
fn number_in(value: &str, range: std::ops::RangeInclusive<u64>, what: &str) -> Result<u64, String> {
    value
        .trim()
        .parse()
        .ok()
        .filter(|n| range.contains(n))
        .ok_or_else(|| format!("'{value}': {what}, {} to {}", range.start(), range.end()))
}

/// Lines `mdt.*.hsm.actions` lists at most (an answer fits in one message).
const HSM_ACTIONS_LISTED_MAX: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leaf {
    Policies,
    TbfRule,
    TbfRunningMax,
    TbfShareSpare,
    TbfDepth,
    TbfClasses,
    Quantum(Kind),
    RrRunningMax(Kind),
    OrrSupported,
}

impl Leaf {
    const ALL: [Leaf; 11] = [
        Leaf::Policies,
        Leaf::TbfRule,
        Leaf::TbfRunningMax,
        Leaf::TbfShareSpare,
        Leaf::TbfDepth,
        Leaf::TbfClasses,
        Leaf::Quantum(Kind::Crrn),
        Leaf::RrRunningMax(Kind::Crrn),
        Leaf::Quantum(Kind::Orr),
        Leaf::RrRunningMax(Kind::Orr),
        Leaf::OrrSupported,
    ];

    fn name(self) -> &'static str {
        match self {
            Leaf::Policies => "nrs_policies",
            Leaf::TbfRule => "nrs_tbf_rule",
            Leaf::TbfRunningMax => "nrs_tbf_running_max",
            Leaf::TbfShareSpare => "nrs_tbf_share_spare",
            Leaf::TbfDepth => "nrs_tbf_depth",
            Leaf::TbfClasses => "nrs_tbf_classes",
            Leaf::Quantum(Kind::Crrn) => "nrs_crrn_quantum",
            Leaf::RrRunningMax(Kind::Crrn) => "nrs_crrn_running_max",
            Leaf::Quantum(Kind::Orr) => "nrs_orr_quantum",
            Leaf::RrRunningMax(Kind::Orr) => "nrs_orr_running_max",
            Leaf::OrrSupported => "nrs_orr_supported",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TargetLeaf {
    JobStats,
    JobCleanupInterval,
    /// An MDT's changelog: the types it records, and its readers (read only).
    ChangelogMask,
    ChangelogUsers,
    /// An MDT's HSM coordinator: its switch, its actions and copytools (read only), its
    /// settings.
    HsmControl,
    HsmActions,
    HsmActiveRequests,
    HsmAgents,
    HsmActiveRequestTimeout,
    HsmGraceDelay,
    HsmDefaultArchiveId,
    /// `root_squash` (`UID:GID`) and `nosquash_nids` of the MDT (see `nodemap.rs`).
    RootSquash,
    NosquashNids,
    /// A replicated MDT: this replica's place in its group (read only; Weft's own).
    ReplicaStatus,
    /// The target's last recovery window (read only; Lustre's shape).
    RecoveryStatus,
    /// A failover OST: whether this server serves it now, and the lease it does it under
    /// (read only; Weft's own).
    FailoverStatus,
}

/// What a parameter name stands for.
#[derive(Debug, Clone, Copy)]
enum Key {
    Service(Service, Leaf),
    Target((TargetKind, u32), TargetLeaf),
    /// `mgs.MGS.replica_status`: this process's replica of a replicated MGS.
    MgsReplicaStatus,
    /// The MDS's `osp.*` and `lod.*` (see `params_osp.rs`).
    Osp(crate::params_osp::OspKey),
}

/// The replicated groups this process's replicas take part in (their `replica_status`).
pub(crate) struct ReplicaGroups {
    pub mdt: Option<weft_raft::Group>,
    pub mgs: Option<weft_raft::Group>,
}

/// What the tree reads of the services of the process: the MDS running now, the replicated
/// groups, the targets' lock managers (their recovery windows).
pub(crate) struct Served {
    pub mds: Arc<crate::replicated::MdsSlot>,
    pub groups: ReplicaGroups,
    pub locks: Arc<crate::locks::LockService>,
    /// A failover node's OSTs and lease.
    pub failover: Option<Arc<crate::failover::Failover>>,
    /// Root squash, and the nodemaps `nodemap.*` shows (where the MGS runs).
    pub identities: Arc<crate::nodemap::Identities>,
}

pub(crate) struct Params {
    schedulers: Arc<Schedulers>,
    services: Vec<Service>,
    /// By job, uid and gid.
    jobstats: Arc<JobStats>,
    /// The MDS of this process, if any (its changelog's parameters).
    mds: Arc<crate::replicated::MdsSlot>,
    /// The replicated MDT's group this process's replica takes part in.
    mdt_group: Option<weft_raft::Group>,
    /// The replicated MGS's group this process's replica takes part in.
    mgs_group: Option<weft_raft::Group>,
    /// The targets' lock managers (their recovery windows).
    locks: Arc<crate::locks::LockService>,
    failover: Option<Arc<crate::failover::Failover>>,
    fsname: String,
    targets: Vec<(TargetKind, u32)>,
    identities: Arc<crate::nodemap::Identities>,
}

impl Params {
    /// The tree of a process running `services` and serving `targets` of file system
    /// `fsname`.
    pub fn new(
        schedulers: Arc<Schedulers>,
        services: Vec<Service>,
        jobstats: Arc<JobStats>,
        served: Served,
        fsname: &str,
        targets: Vec<(TargetKind, u32)>,
    ) -> Params {
        let Served { mds, groups: ReplicaGroups { mdt: mdt_group, mgs: mgs_group }, locks, failover, identities } =
            served;
        let fsname = fsname.to_string();
        Params {
            schedulers,
            services,
            jobstats,
            mds,
            mdt_group,
            mgs_group,
            locks,
            failover,
            fsname,
            targets,
            identities,
        }
    }

    fn mds(&self) -> Result<Arc<weft_mds::Mds>, String> {
        self.mds.get().ok_or_else(|| "this server process runs no MDS (now)".to_string())
    }

    fn leaves(&self) -> Vec<(String, Key)> {
        let mut out = Vec::new();
        for service in &self.services {
            let Some(prefix) = service.param_prefix() else { continue };
            for leaf in Leaf::ALL {
                out.push((format!("{prefix}.{}", leaf.name()), Key::Service(*service, leaf)));
            }
        }
        if self.mgs_group.is_some() {
            out.push(("mgs.MGS.replica_status".to_string(), Key::MgsReplicaStatus));
        }
        if let Some(mds) = self.mds.get() {
            let mdt = self.targets.iter().find(|t| t.0 == TargetKind::Mdt).map_or(0, |t| t.1);
            let leaves = crate::params_osp::leaves(&mds, mdt, &self.fsname);
            out.extend(leaves.into_iter().map(|(name, key)| (name, Key::Osp(key))));
        }
        for &(kind, index) in &self.targets {
            let kind_prefix = match kind {
                TargetKind::Ost => "obdfilter",
                TargetKind::Mdt => "mdt",
            };
            let name = target_name(&self.fsname, kind, index);
            out.push((format!("{kind_prefix}.{name}.job_stats"), Key::Target((kind, index), TargetLeaf::JobStats)));
            out.push((
                format!("{kind_prefix}.{name}.job_cleanup_interval"),
                Key::Target((kind, index), TargetLeaf::JobCleanupInterval),
            ));
            // A replicated MDT is served (and recovers) where its leader is: only there.
            if kind == TargetKind::Ost || self.mds.get().is_some() {
                out.push((
                    format!("{kind_prefix}.{name}.recovery_status"),
                    Key::Target((kind, index), TargetLeaf::RecoveryStatus),
                ));
            }
            if kind == TargetKind::Ost && self.failover.as_ref().is_some_and(|f| f.covers(index)) {
                out.push((
                    format!("{kind_prefix}.{name}.failover_status"),
                    Key::Target((kind, index), TargetLeaf::FailoverStatus),
                ));
            }
            if kind == TargetKind::Mdt && self.mdt_group.is_some() {
                out.push((format!("mdt.{name}.replica_status"), Key::Target((kind, index), TargetLeaf::ReplicaStatus)));
            }
            if kind == TargetKind::Mdt && self.mds.get().is_some() {
                for (leaf, what) in
                    [(TargetLeaf::ChangelogMask, "changelog_mask"), (TargetLeaf::ChangelogUsers, "changelog_users")]
                {
                    out.push((format!("mdd.{name}.{what}"), Key::Target((kind, index), leaf)));
                }
                for (leaf, what) in [
                    (TargetLeaf::HsmControl, "hsm_control"),
                    (TargetLeaf::HsmActions, "hsm.actions"),
                    (TargetLeaf::HsmActiveRequests, "hsm.active_requests"),
                    (TargetLeaf::HsmAgents, "hsm.agents"),
                    (TargetLeaf::HsmActiveRequestTimeout, "hsm.active_request_timeout"),
                    (TargetLeaf::HsmGraceDelay, "hsm.grace_delay"),
                    (TargetLeaf::HsmDefaultArchiveId, "hsm.default_archive_id"),
                    (TargetLeaf::RootSquash, "root_squash"),
                    (TargetLeaf::NosquashNids, "nosquash_nids"),
                ] {
                    out.push((format!("mdt.{name}.{what}"), Key::Target((kind, index), leaf)));
                }
            }
        }
        out
    }

    /// Every job's, user's and group's counters on this process's targets.
    fn usage(&self) -> UsageCounters {
        let rows = |by: By| {
            let mut out = Vec::new();
            for &t in &self.targets {
                let target = target_name(&self.fsname, t.0, t.1);
                for (key, ops, read_bytes, write_bytes) in self.jobstats.usage(by, t, std::time::Instant::now()) {
                    out.push(UsageRow { target: target.clone(), key, ops, read_bytes, write_bytes });
                }
            }
            out
        };
        UsageCounters { jobs: rows(By::Job), users: rows(By::User), groups: rows(By::Group) }
    }

    pub fn handle(&self, header: &RequestHeader, op: ParamRequest) -> WeftResult<ParamReply> {
        match op {
            ParamRequest::GetParam(g) => {
                let mut values = Vec::new();
                let wildcard = g.pattern.contains(['*', '?']);
                for (name, key) in self.leaves().into_iter().filter(|(n, _)| name_matches(&g.pattern, n)) {
                    if matches!(key, Key::Osp(k) if k.named_only()) && wildcard {
                        continue;
                    }
                    match self.get(key) {
                        Ok(value) => values.push(ParamValue { name, value }),
                        // A TBF name while the policy is FIFO: not there, unless asked by name.
                        Err(e) if g.pattern.contains(['*', '?']) => drop(e),
                        Err(e) => return Err(WeftError::invalid(e)),
                    }
                }
                values.extend(
                    self.nodemap_values()
                        .into_iter()
                        .filter(|(n, _)| name_matches(&g.pattern, n))
                        .map(|(name, value)| ParamValue { name, value }),
                );
                self.found(&g.pattern, values.is_empty())?;
                Ok(ParamReply::Values(ParamValues(values)))
            }
            ParamRequest::SetParam(s) => {
                if header.identity.uid != 0 {
                    return Err(WeftError::new(ErrorCode::Perm, "only root sets parameters"));
                }
                if s.pattern.starts_with("nodemap.") {
                    return Err(WeftError::invalid("nodemaps are changed with weft nodemap (modify, add-range, ...)"));
                }
                let matched: Vec<_> = self.leaves().into_iter().filter(|(n, _)| name_matches(&s.pattern, n)).collect();
                self.found(&s.pattern, matched.is_empty())?;
                let mut values = Vec::new();
                for (name, key) in matched {
                    self.set(key, &s.value).map_err(|e| WeftError::invalid(format!("{name}: {e}")))?;
                    values.push(ParamValue { name, value: s.value.clone() });
                }
                Ok(ParamReply::Values(ParamValues(values)))
            }
            ParamRequest::Usage(_) => Ok(ParamReply::Usage(self.usage())),
            ParamRequest::ListParam(l) => {
                let names: Vec<String> = self
                    .leaves()
                    .into_iter()
                    .map(|(n, _)| n)
                    .chain(self.nodemap_values().into_iter().map(|(n, _)| n))
                    .filter(|n| name_or_parent_matches(&l.pattern, n))
                    .collect();
                Ok(ParamReply::Names(ParamNames(names)))
            }
        }
    }

    /// Applies the permanent settings of the map that were not applied before (see
    /// `records_to_apply`), and remembers them in `applied`. A setting this process has no parameter for is skipped; one it refuses is
    /// logged.
    pub fn apply_records(&self, records: &[ParamRecord], applied: &mut Vec<ParamRecord>) {
        let leaves = self.leaves();
        for record in records_to_apply(records, applied) {
            for (name, key) in leaves.iter().filter(|(n, _)| name_matches(&record.name, n)) {
                if matches!(key, Key::Target(_, TargetLeaf::HsmControl)) && record.value.trim() == "purge" {
                    // A one-time act, not a setting: never done again at a start.
                    tracing::warn!("permanent parameter {name}=purge ignored: purge cancels every action once, now");
                    continue;
                }
                match self.set(*key, &record.value) {
                    Ok(()) => tracing::info!("permanent parameter {name}={}", record.value),
                    Err(e) => tracing::warn!("permanent parameter {name}={}: {e}", record.value),
                }
            }
        }
    }

    /// The permanent `osp.*` settings of OSTs the MDS learnt of since the last call (see
    /// `params_osp::apply_to_new_osts`).
    pub fn apply_to_new_osts(&self, records: &[ParamRecord], seen: &mut std::collections::BTreeSet<u32>) {
        if let Some(mds) = self.mds.get() {
            let mdt = self.targets.iter().find(|t| t.0 == TargetKind::Mdt).map_or(0, |t| t.1);
            crate::params_osp::apply_to_new_osts(&mds, mdt, &self.fsname, records, seen);
        }
    }

    /// `nodemap.*`, answered by the process that runs the management service (which keeps
    /// them), as Lustre's MGS answers them.
    fn nodemap_values(&self) -> Vec<(String, String)> {
        if !self.services.contains(&Service::Mgs) {
            return Vec::new();
        }
        self.identities.nodemaps().param_values()
    }

    fn found(&self, pattern: &str, none: bool) -> WeftResult<()> {
        if none {
            return Err(WeftError::not_found(format!(
                "no parameter of this server matches '{pattern}' (weft list-param shows them)"
            )));
        }
        Ok(())
    }

    fn tbf(&self, service: Service) -> Result<Arc<TbfPolicy>, String> {
        self.schedulers.tbf(service).ok_or_else(|| {
            let prefix = service.param_prefix().unwrap_or_default();
            format!("the policy of {prefix} is {}: set {prefix}.nrs_policies=tbf first", self.policy_name(service))
        })
    }

    fn rr(&self, service: Service, kind: Kind) -> Result<Arc<RrPolicy>, String> {
        self.schedulers.rr(service).filter(|p| p.kind() == kind).ok_or_else(|| {
            let prefix = service.param_prefix().unwrap_or_default();
            format!(
                "the policy of {prefix} is {}: set {prefix}.nrs_policies={} first",
                self.policy_name(service),
                kind.name()
            )
        })
    }

    fn policy_name(&self, service: Service) -> String {
        self.schedulers.of(service).policy().name().to_string()
    }

    fn get(&self, key: Key) -> Result<String, String> {
        let (service, leaf) = match key {
            Key::Service(service, leaf) => (service, leaf),
            Key::Osp(key) => return crate::params_osp::get(&self.mds()?, key),
            Key::MgsReplicaStatus => {
                let group = self.mgs_group.as_ref().ok_or("this server process holds no MGS replica")?;
                return Ok(crate::replicated::status_text(&group.status()));
            }
            Key::Target(target, TargetLeaf::JobStats) => {
                return Ok(self.jobstats.render(target, std::time::Instant::now(), std::time::SystemTime::now()))
            }
            Key::Target(target, TargetLeaf::JobCleanupInterval) => {
                return Ok(self.jobstats.cleanup_interval(target).as_secs().to_string())
            }
            Key::Target(_, TargetLeaf::RootSquash) => {
                let (uid, gid) = self.identities.root_squash().ids;
                return Ok(format!("{uid}:{gid}"));
            }
            Key::Target(_, TargetLeaf::NosquashNids) => {
                let squash = self.identities.root_squash();
                return Ok(if squash.nosquash_text.is_empty() { "NONE".into() } else { squash.nosquash_text.clone() });
            }
            Key::Target(_, TargetLeaf::ChangelogMask) => {
                return Ok(weft_proto::msg::changelog::mask_names(self.mds()?.changelog_mask()))
            }
            Key::Target(_, TargetLeaf::ChangelogUsers) => {
                let users = self.mds()?.changelog_users().map_err(|e| e.message)?;
                return Ok(users.listing(weft_mds::now().sec));
            }
            Key::Target(_, TargetLeaf::HsmControl) => return Ok(self.mds()?.coordinator().control().name().into()),
            Key::Target((_, index), TargetLeaf::FailoverStatus) => {
                let f = self.failover.as_ref().ok_or("this server process serves no failover OST")?;
                return Ok(f.status_text(index));
            }
            Key::Target((kind, index), TargetLeaf::RecoveryStatus) => {
                let ns = self.locks.namespace(weft_proto::lock::LockTarget::of(kind, index));
                return Ok(ns.map_or_else(|| "status: INACTIVE\n".to_string(), |ns| ns.recovery_status()));
            }
            Key::Target(_, TargetLeaf::ReplicaStatus) => {
                let group = self.mdt_group.as_ref().ok_or("this server process holds no MDT replica")?;
                return Ok(crate::replicated::status_text(&group.status()));
            }
            Key::Target(_, leaf @ (TargetLeaf::HsmActions | TargetLeaf::HsmActiveRequests)) => {
                let actions = self.mds()?.hsm_actions().map_err(|e| e.message)?;
                let mut out = String::new();
                let running = |a: &&weft_proto::msg::hsm::HsmActionItem| {
                    leaf == TargetLeaf::HsmActions || a.status == weft_proto::msg::hsm::ActionStatus::Started
                };
                let shown: Vec<_> = actions.iter().filter(running).collect();
                for a in shown.iter().take(HSM_ACTIONS_LISTED_MAX) {
                    let _ = writeln!(out, "{}", a.actions_line());
                }
                if shown.len() > HSM_ACTIONS_LISTED_MAX {
                    let _ = writeln!(
                        out,
                        "... {} more (the metrics' weft_hsm_actions counts every action by status)",
                        shown.len() - HSM_ACTIONS_LISTED_MAX
                    );
                }
                return Ok(out);
            }
            Key::Target(_, TargetLeaf::HsmAgents) => return self.mds()?.hsm_agents().map_err(|e| e.message),
            Key::Target(_, TargetLeaf::HsmActiveRequestTimeout) => {
                return Ok(self.mds()?.coordinator().active_request_timeout().as_secs().to_string())
            }
            Key::Target(_, TargetLeaf::HsmGraceDelay) => {
                return Ok(self.mds()?.coordinator().grace_delay().as_secs().to_string())
            }
            Key::Target(_, TargetLeaf::HsmDefaultArchiveId) => {
                return Ok(self.mds()?.coordinator().default_archive_id().to_string())
            }
        };
        Ok(match leaf {
            Leaf::Policies => self.schedulers.policies_listing(service),
            Leaf::TbfRule => self.tbf(service)?.listing(),
            Leaf::TbfRunningMax => self.tbf(service)?.options().running_max.unwrap_or(0).to_string(),
            Leaf::TbfShareSpare => u8::from(self.tbf(service)?.options().share_spare).to_string(),
            Leaf::TbfDepth => self.tbf(service)?.options().depth.to_string(),
            Leaf::TbfClasses => classes_listing(&*self.tbf(service)?),
            // Lustre's shape; Weft's services have one queue, the regular one.
            Leaf::Quantum(kind) => format!("reg_quantum:{}", self.rr(service, kind)?.quantum()),
            Leaf::RrRunningMax(kind) => self.rr(service, kind)?.running_max().to_string(),
            Leaf::OrrSupported => format!("reg_supported:{}", self.rr(service, Kind::Orr)?.supported().name()),
        })
    }

    fn set(&self, key: Key, value: &str) -> Result<(), String> {
        let (service, leaf) = match key {
            Key::Service(service, leaf) => (service, leaf),
            Key::Osp(key) => return crate::params_osp::set(&self.mds()?, key, value),
            Key::MgsReplicaStatus => {
                return Err("replica_status is read only: it shows where this replica stands in its group".into())
            }
            Key::Target(target, TargetLeaf::JobStats) => {
                // Lustre's: `clear` forgets every job, a jobid that one.
                let value = value.trim();
                self.jobstats.clear(target, (value != "clear").then_some(value));
                return Ok(());
            }
            Key::Target(_, TargetLeaf::RootSquash) => {
                return self.identities.set_root_squash(Some(value), None).map_err(|e| e.message)
            }
            Key::Target(_, TargetLeaf::NosquashNids) => {
                return self.identities.set_root_squash(None, Some(value)).map_err(|e| e.message)
            }
            Key::Target(target, TargetLeaf::JobCleanupInterval) => {
                let secs: u64 = value.trim().parse().map_err(|_| format!("'{value}': seconds (0: keep for ever)"))?;
                self.jobstats.set_cleanup_interval(target, std::time::Duration::from_secs(secs));
                return Ok(());
            }
            Key::Target(_, TargetLeaf::ChangelogMask) => {
                let mds = self.mds()?;
                let mask = weft_proto::msg::changelog::parse_mask(value, mds.changelog_mask())?;
                mds.set_changelog_mask(mask);
                return Ok(());
            }
            Key::Target(_, TargetLeaf::ChangelogUsers) => {
                return Err("changelog_users is read only: use weft changelog-register or changelog-deregister".into())
            }
            Key::Target(_, TargetLeaf::RecoveryStatus) => {
                return Err("recovery_status is read only: it shows the target's last recovery".into())
            }
            Key::Target(_, TargetLeaf::FailoverStatus) => {
                return Err("failover_status is read only: move an OST with weft failover OST --to ADDR".into())
            }
            Key::Target(_, TargetLeaf::ReplicaStatus) => {
                return Err("replica_status is read only: it shows where this replica stands in its group".into())
            }
            Key::Target(_, TargetLeaf::HsmControl) => {
                use weft_proto::msg::hsm::HsmControl;
                let mds = self.mds()?;
                match value.trim() {
                    "enabled" => mds.coordinator().set_control(HsmControl::Enabled),
                    "disabled" => mds.coordinator().set_control(HsmControl::Disabled),
                    "shutdown" => mds.coordinator().set_control(HsmControl::Shutdown),
                    // Lustre's: every request dropped; the coordinator stays as it was.
                    "purge" => {
                        tokio::spawn(async move {
                            match mds.hsm_cancel_all().await {
                                Ok(n) => tracing::info!(canceled = n, "HSM: every waiting and running action canceled"),
                                Err(e) => tracing::warn!(error = %e, "HSM: canceling every action failed"),
                            }
                        });
                    }
                    v => return Err(format!("'{v}': enabled, disabled, shutdown or purge")),
                }
                return Ok(());
            }
            Key::Target(_, TargetLeaf::HsmActions | TargetLeaf::HsmActiveRequests | TargetLeaf::HsmAgents) => {
                return Err("read only: weft hsm archive|restore|remove|cancel queue actions".into())
            }
            Key::Target(_, TargetLeaf::HsmActiveRequestTimeout) => {
                let secs = number_in(value, 1..=weft_mds::limits::HSM_ACTIVE_REQUEST_TIMEOUT_S_MAX, "seconds")?;
                self.mds()?.coordinator().set_active_request_timeout(std::time::Duration::from_secs(secs));
                return Ok(());
            }
            Key::Target(_, TargetLeaf::HsmGraceDelay) => {
                let secs = number_in(value, 0..=weft_mds::limits::HSM_ACTIVE_REQUEST_TIMEOUT_S_MAX, "seconds")?;
                self.mds()?.coordinator().set_grace_delay(std::time::Duration::from_secs(secs));
                return Ok(());
            }
            Key::Target(_, TargetLeaf::HsmDefaultArchiveId) => {
                let id = number_in(value, 1..=u64::from(u32::MAX), "an archive id")? as u32;
                self.mds()?.coordinator().set_default_archive_id(id);
                return Ok(());
            }
        };
        match leaf {
            Leaf::Policies => self.schedulers.set_policy(service, value),
            Leaf::TbfRule => self.tbf(service)?.command(value),
            Leaf::TbfRunningMax => {
                let tbf = self.tbf(service)?;
                let n: usize = value.trim().parse().map_err(|_| format!("'{value}': a number (0: no bound)"))?;
                tbf.update_options(|o| o.running_max = (n > 0).then_some(n));
                Ok(())
            }
            Leaf::TbfShareSpare => {
                let tbf = self.tbf(service)?;
                let on = match value.trim() {
                    "0" => false,
                    "1" => true,
                    _ => return Err(format!("'{value}': 0 or 1")),
                };
                tbf.update_options(|o| o.share_spare = on);
                Ok(())
            }
            Leaf::TbfDepth => {
                let tbf = self.tbf(service)?;
                let depth: u32 = match value.trim().parse() {
                    Ok(d) if d >= 1 => d,
                    _ => return Err(format!("'{value}': a number of tokens, 1 or more")),
                };
                tbf.update_options(|o| o.depth = depth);
                Ok(())
            }
            Leaf::TbfClasses => Err("read only: it lists the classes TBF has seen".into()),
            Leaf::Quantum(kind) => {
                let policy = self.rr(service, kind)?;
                let text = value.trim();
                let text = text.strip_prefix("reg_quantum:").unwrap_or(text);
                match text.trim().parse::<u32>() {
                    Ok(n) if n >= 1 => policy.set_quantum(n),
                    _ => return Err(format!("'{value}': requests per turn, 1 or more (or reg_quantum:N)")),
                }
                Ok(())
            }
            Leaf::RrRunningMax(kind) => {
                let policy = self.rr(service, kind)?;
                match value.trim().parse::<usize>() {
                    Ok(n) if n >= 1 => policy.set_running_max(n),
                    _ => return Err(format!("'{value}': requests running at once, 1 or more")),
                }
                Ok(())
            }
            Leaf::OrrSupported => {
                let policy = self.rr(service, Kind::Orr)?;
                let text = value.trim();
                policy.set_supported(Supported::parse(text.strip_prefix("reg_supported:").unwrap_or(text))?);
                Ok(())
            }
        }
    }
}

/// Each class TBF keeps: its key, rule, and what its limit did to it (who hit a limit).
fn classes_listing(tbf: &TbfPolicy) -> String {
    let mut out = String::from("classes:\n");
    let mut classes = tbf.classes();
    classes.sort_by(|a, b| b.stats.held.cmp(&a.stats.held).then(b.stats.started.cmp(&a.stats.started)));
    let ty = tbf.ty();
    for c in classes {
        let s = c.stats;
        let _ = write!(
            out,
            "- class: {}\n  rule: {}\n  queued: {}\n  started: {}\n  held: {}\n  extra: {}\n  bytes: {}\n  waited_usecs: {}\n  waited_max_usecs: {}\n",
            c.key.label(&ty),
            c.rule,
            c.queued,
            s.started,
            s.held,
            s.extra,
            s.bytes,
            s.waited_ns / 1000,
            s.waited_max_ns / 1000,
        );
    }
    out
}
