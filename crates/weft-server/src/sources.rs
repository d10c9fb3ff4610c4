//! What a server process's metrics endpoint and dashboard read from: its own parts, shared.
//! Apart from metrics.rs and dashboard.rs so that each of them imports this and not the other.

use crate::router::Router;
use std::sync::Arc;
use weft_proto::msg::Service;
use weft_rpc::jobstats::JobStats;
use weft_rpc::schedule::Schedulers;
use weft_rpc::stats::Stats;
use weft_rpc::Exports;

/// What the endpoint (and the dashboard) reads from.
pub(crate) struct Sources {
    pub fsname: String,
    pub services: Vec<Service>,
    pub stats: Arc<Stats>,
    /// By job and by user (and group).
    pub jobs: Arc<JobStats>,
    pub schedulers: Arc<Schedulers>,
    pub exports: Arc<Exports>,
    pub router: Arc<Router>,
    /// To reach the other server processes (the dashboard's views of them).
    pub peers: Arc<weft_rpc::map::PeerSet>,
    /// The management service (its leader, when replicated): the dashboard's history, map
    /// and decay warnings.
    pub mgs: Arc<weft_rpc::mgs::MgsPeers>,
}
