//! The services of a server process (Lustre's ptlrpc services): named by requests, the
//! cluster map and the schedulers alike, so in a leaf that they all import.

/// The service of a server process that runs a request, as Lustre's ptlrpc services: each
/// has a scheduler of its own, so a policy shaping object I/O does not hold metadata or lock
/// requests back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Service {
    /// The management service (`mgs.MGS.mgs`).
    Mgs,
    /// Metadata (`mds.MDS.mdt`).
    Mdt,
    /// Object data: reads, writes, punches, syncs (`ost.OSS.ost_io`).
    OstIo,
    /// Other object requests: getattr, precreate, destroy, statfs (`ost.OSS.ost`).
    Ost,
    /// Lock managers (`ldlm.services.ldlm_canceld`).
    Ldlm,
    /// Parameter requests: never held behind another service's policy.
    Param,
    /// Messages between the replicas of a replicated group (weft-raft): first come, first
    /// served, run inline, never held by a policy (a held heartbeat would start an election).
    Raft,
}

impl Service {
    pub const ALL: [Service; 7] =
        [Service::Mgs, Service::Mdt, Service::OstIo, Service::Ost, Service::Ldlm, Service::Param, Service::Raft];

    /// Lustre's name of the service.
    pub fn name(self) -> &'static str {
        match self {
            Service::Mgs => "mgs",
            Service::Mdt => "mdt",
            Service::OstIo => "ost_io",
            Service::Ost => "ost",
            Service::Ldlm => "ldlm",
            Service::Param => "param",
            Service::Raft => "raft",
        }
    }

    /// Where its parameters sit in the parameter tree, as Lustre names the service
    /// (`ost.OSS.ost_io`); None for the parameter service itself and for raft, whose
    /// policy is fixed.
    pub fn param_prefix(self) -> Option<&'static str> {
        Some(match self {
            Service::Mgs => "mgs.MGS.mgs",
            Service::Mdt => "mds.MDS.mdt",
            Service::OstIo => "ost.OSS.ost_io",
            Service::Ost => "ost.OSS.ost",
            Service::Ldlm => "ldlm.services.ldlm_canceld",
            Service::Param | Service::Raft => return None,
        })
    }

    /// Its place in [`Service::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}
