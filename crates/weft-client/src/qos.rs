//! Bandwidth reservations from a program (libweft's `weft_qos_*`, the Python module): the
//! same requests as `weft qos reserve|status|cancel`, to the management service this client
//! follows, for the OSTs of paths the caller resolved ([`osts_of`]).

use crate::Client;
use weft_proto::msg::mgs::{QosCancel, QosReserve};
use weft_proto::msg::qos::{now_ms, ReservationState, ReserveRequest};
use weft_proto::msg::{ClusterMap, RequestHeader};
use weft_proto::{WeftError, WeftResult};

/// The OSTs a reservation for a path holds: a file's (every component's stripes, not the
/// MDT's data); for a directory, those its default layout puts new files on when that is
/// fixed (an OST list, a start OST), else every OST its files may go to (its pool's, or every
/// OST that is up).
pub fn osts_of(
    map: &ClusterMap,
    layout: Option<&weft_proto::layout::Layout>,
    default: Option<&weft_proto::layout::StripeSpec>,
) -> Vec<u32> {
    let up = || -> Vec<u32> {
        map.osts().filter(|t| t.state == weft_proto::msg::TargetState::Up).map(|t| t.index).collect()
    };
    let mut osts: Vec<u32> = match (layout, default) {
        (Some(l), _) if l.components.iter().any(|c| !c.objects.is_empty()) => l
            .components
            .iter()
            .flat_map(|c| c.objects.iter().map(|o| o.ost))
            .filter(|&o| o < weft_proto::limits::DOM_TARGET_BASE)
            .collect(),
        (_, Some(d)) => {
            let available = match d.pool.as_ref().and_then(|p| map.pools.get(p)) {
                Some(members) => members.clone(),
                None => up(),
            };
            let fixed = !d.ost_list.is_empty() || d.start_ost >= 0;
            match fixed.then(|| weft_proto::layout::select_osts(d, &available, 0).ok()).flatten() {
                Some(chosen) => chosen,
                None => available,
            }
        }
        _ => up(),
    };
    osts.sort_unstable();
    osts.dedup();
    osts
}

impl Client {
    fn said(&self, e: WeftError) -> WeftError {
        WeftError::new(e.code, format!("management service at {}: {}", self.mgs_address(), e.message))
    }

    /// Plans `request` (see weft-mgs's planner); its state right after.
    pub async fn qos_reserve(&self, header: RequestHeader, request: ReserveRequest) -> WeftResult<ReservationState> {
        let id = request.id.clone();
        let timeout = self.config.request_timeout;
        let map = self.map.mgs().op(header, QosReserve { request, uid: 0 }, timeout).await.map_err(|e| self.said(e))?;
        Ok(map.qos.state(&id, now_ms()))
    }

    /// The state of reservation `id` now, from the management service's current plan.
    pub async fn qos_state(&self, id: &str) -> WeftResult<ReservationState> {
        Ok(self.fresh_map().await?.qos.state(id, now_ms()))
    }

    /// Ends reservation `id` now (one already done: nothing to do).
    pub async fn qos_cancel(&self, header: RequestHeader, id: &str) -> WeftResult<()> {
        let op = QosCancel { id: id.to_string(), uid: 0 };
        self.map.mgs().op(header, op, self.config.request_timeout).await.map(drop).map_err(|e| self.said(e))
    }

    /// The map as the management service has it now (not as followed).
    pub async fn fresh_map(&self) -> WeftResult<ClusterMap> {
        weft_rpc::map::fetch_map_from(self.map.mgs(), self.config.request_timeout).await.map_err(|e| self.said(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::layout::{Layout, StripeObject, StripeSpec};
    use weft_proto::msg::{TargetInfo, TargetKind, TargetState};
    use weft_proto::Fid;

    #[test]
    fn a_paths_osts_are_its_stripes_or_where_its_directory_puts_files() {
        let mut map = ClusterMap { version: 1, fsname: "fs".into(), ..Default::default() };
        for i in 0..4 {
            map.targets.push(TargetInfo::new(TargetKind::Ost, i, "a:1"));
        }
        map.targets[3].state = TargetState::Down;
        map.pools.insert("fast".into(), vec![1, 2]);
        let object = |ost| StripeObject { ost, fid: Fid { seq: 1, oid: ost, ver: 0 } };
        let file = Layout::raid0(1 << 20, None, vec![object(2), object(0)]);
        assert_eq!(osts_of(&map, Some(&file), None), [0, 2]);
        let spec = |count, start, pool: Option<&str>| StripeSpec {
            stripe_count: count,
            start_ost: start,
            pool: pool.map(String::from),
            ..StripeSpec::unset()
        };
        assert_eq!(osts_of(&map, None, Some(&spec(2, 1, None))), [1, 2], "from its start OST");
        assert_eq!(osts_of(&map, None, Some(&spec(1, -1, Some("fast")))), [1, 2], "anywhere in its pool");
        assert_eq!(osts_of(&map, None, Some(&spec(1, -1, None))), [0, 1, 2], "anywhere that is up");
        assert_eq!(osts_of(&map, None, None), [0, 1, 2]);
    }
}
