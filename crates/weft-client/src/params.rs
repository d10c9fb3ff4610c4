//! Server parameters (Lustre's `lctl set_param`, `get_param`, `list_param`) as a client
//! asks for them: every server process in the cluster map (and each replica of the
//! management service), or one of them, is sent the request at once; each one's answer or
//! error comes back by address. The `weft` command's `set-param`/`get-param`/`list-param`
//! and libweft (`weft::Fs::get_param`, the Python module) both ask through this.

use std::collections::BTreeSet;
use std::time::Duration;
use weft_proto::msg::param::{GetParam, ListParam, ParamValue, SetParam};
use weft_proto::msg::RequestHeader;
use weft_proto::WeftResult;
use weft_rpc::mgs::MgsPeers;
use weft_rpc::{Peer, PeerOptions};

/// Each server's address and what it answered (or why it failed), in address order.
pub type Answers<T> = Vec<(String, WeftResult<T>)>;

fn options(connect: Duration, timeout: Duration) -> PeerOptions {
    PeerOptions { connect_timeout: connect, request_timeout: timeout, ..PeerOptions::default() }
}

/// The server processes a parameter request goes to, and their management service.
pub struct ParamServers {
    peers: Vec<Peer>,
    mgs: Option<MgsPeers>,
    timeout: Duration,
}

impl ParamServers {
    /// Every server process of the cluster map of the management service at `mgs` (one
    /// address or a replicated service's, comma-separated), each replica of that service
    /// too; `connect` bounds each connection attempt, `timeout` each request.
    pub async fn of_cluster(mgs: &str, connect: Duration, timeout: Duration) -> WeftResult<ParamServers> {
        let opts = options(connect, timeout);
        let peer = MgsPeers::new(mgs, opts.clone());
        let map = weft_rpc::map::fetch_map_from(&peer, timeout).await.map_err(|e| {
            weft_proto::WeftError::new(e.code, format!("cannot reach the management service at {mgs}: {}", e.message))
        })?;
        let mut addresses: BTreeSet<String> = map.servers(None).into_iter().collect();
        addresses.extend(peer.addresses().into_iter().map(str::to_string));
        let peers = addresses.into_iter().map(|a| Peer::new(a, opts.clone())).collect();
        Ok(ParamServers { peers, mgs: Some(peer), timeout })
    }

    /// The one server process at `server`; `mgs`, if given, keeps permanent settings.
    pub fn one(server: &str, mgs: Option<&str>, connect: Duration, timeout: Duration) -> ParamServers {
        let opts = options(connect, timeout);
        let mgs = mgs.map(|m| MgsPeers::new(m, opts.clone()));
        ParamServers { peers: vec![Peer::new(server.to_string(), opts)], mgs, timeout }
    }

    /// The addresses asked, in order.
    pub fn addresses(&self) -> Vec<&str> {
        self.peers.iter().map(|p| p.address()).collect()
    }

    /// The management service's replicas, when known.
    pub fn mgs(&self) -> Option<&MgsPeers> {
        self.mgs.as_ref()
    }

    /// The values of the parameters `pattern` matches (glob wildcards in any dot-separated
    /// part), per server; a server with none answers NotFound.
    pub async fn get(&self, header: &RequestHeader, pattern: &str) -> Answers<Vec<ParamValue>> {
        self.ask(header, GetParam { pattern: pattern.to_string() }, |v| v.0).await
    }

    /// Sets the parameters `pattern` matches to `value` now; per server, what it set.
    pub async fn set(&self, header: &RequestHeader, pattern: &str, value: &str) -> Answers<Vec<ParamValue>> {
        self.ask(header, SetParam { pattern: pattern.to_string(), value: value.to_string() }, |v| v.0).await
    }

    /// The names of the parameters `pattern` or its leading parts match, per server.
    pub async fn list(&self, header: &RequestHeader, pattern: &str) -> Answers<Vec<String>> {
        self.ask(header, ListParam { pattern: pattern.to_string() }, |n| n.0).await
    }

    /// Records a permanent setting in the management service (or, `delete`, removes those
    /// `name` matches), which every server applies when it starts.
    pub async fn record(&self, header: &RequestHeader, name: &str, value: &str, delete: bool) -> WeftResult<()> {
        let Some(mgs) = &self.mgs else {
            return Err(weft_proto::WeftError::invalid("a permanent setting needs the management service's address"));
        };
        let op = weft_proto::msg::mgs::SetParamRecord { name: name.to_string(), value: value.to_string(), delete };
        mgs.op(header.clone(), op, self.timeout).await.map(drop).map_err(|e| {
            weft_proto::WeftError::new(e.code, format!("management service at {}: {}", mgs.list(), e.message))
        })
    }

    /// Sends `op` to every server at once; each one's answer or error, in address order.
    async fn ask<O, T>(&self, header: &RequestHeader, op: O, take: impl Fn(O::Reply) -> T) -> Answers<T>
    where
        O: weft_proto::msg::ops::Op + Clone,
        O::Request: weft_proto::msg::ServiceRequest,
        O::Answer: weft_proto::msg::ops::Payload<weft_proto::msg::ReplyBody> + weft_proto::msg::ops::Variant,
    {
        let take = &take;
        let asks = self.peers.iter().map(|p| {
            let (op, header) = (op.clone(), header.clone());
            async move {
                let answer = p.op(header, 0, op, bytes::Bytes::new(), self.timeout).await.map(|(r, _)| take(r));
                (p.address().to_string(), answer)
            }
        });
        futures::future::join_all(asks).await
    }
}

/// Lustre's `osc.*.max_rpcs_in_flight`, a client parameter: the requests a client keeps on
/// their way to the OSTs at once. Lustre counts them per OST; a Weft mount's write-behind
/// sends at most this many writes of one file at once, and the MPI-IO layer's aggregators
/// (libweft) at most this many to one OST unless the `weft_throttle` hint says otherwise.
/// Set on a mount (`weft set-param max_rpcs_in_flight=16`), or for every client,
/// libweft's included, as a permanent setting (`set-param -P`).
pub const MAX_RPCS_IN_FLIGHT: &str = "max_rpcs_in_flight";
/// Its value when nothing sets it (Lustre's default).
pub const MAX_RPCS_IN_FLIGHT_DEFAULT: usize = 8;
/// The most it takes (Lustre's bound).
pub const MAX_RPCS_IN_FLIGHT_MAX: usize = 256;

/// A `max_rpcs_in_flight` value; the message says what is allowed.
pub fn parse_max_rpcs_in_flight(value: &str) -> Result<usize, String> {
    match value.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_RPCS_IN_FLIGHT_MAX).contains(&n) => Ok(n),
        _ => Err(format!("max_rpcs_in_flight '{value}': requests from 1 to {MAX_RPCS_IN_FLIGHT_MAX}")),
    }
}

/// The value the cluster map's permanent settings (`set-param -P`) give the client parameter
/// `name`: that of the last one whose name or pattern matches it.
pub fn permanent_value(map: &weft_proto::msg::ClusterMap, name: &str) -> Option<String> {
    map.params.iter().rev().find(|r| weft_proto::msg::param::name_matches(&r.name, name)).map(|r| r.value.clone())
}

/// `max_rpcs_in_flight` as the permanent settings of `map` give it, else the default; a
/// setting that does not parse (the command checks before it records one) counts as none.
pub fn permanent_max_rpcs_in_flight(map: &weft_proto::msg::ClusterMap) -> usize {
    permanent_value(map, MAX_RPCS_IN_FLIGHT)
        .and_then(|v| parse_max_rpcs_in_flight(&v).ok())
        .unwrap_or(MAX_RPCS_IN_FLIGHT_DEFAULT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::msg::{ClusterMap, ParamRecord};

    #[test]
    fn max_rpcs_in_flight_is_checked_and_the_last_permanent_setting_wins() {
        assert_eq!(parse_max_rpcs_in_flight("16"), Ok(16));
        assert!(parse_max_rpcs_in_flight("0").unwrap_err().contains("from 1 to 256"));
        assert!(parse_max_rpcs_in_flight("257").is_err());
        assert!(parse_max_rpcs_in_flight("many").is_err());
        let mut map = ClusterMap::default();
        assert_eq!(permanent_max_rpcs_in_flight(&map), MAX_RPCS_IN_FLIGHT_DEFAULT);
        map.params.push(ParamRecord { name: "max_rpcs_in_flight".into(), value: "4".into() });
        map.params.push(ParamRecord { name: "jobid_var".into(), value: "disable".into() });
        assert_eq!(permanent_max_rpcs_in_flight(&map), 4);
        map.params.push(ParamRecord { name: "max_rpcs_*".into(), value: "32".into() });
        assert_eq!(permanent_max_rpcs_in_flight(&map), 32);
    }
}
