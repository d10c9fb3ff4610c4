//! The client's view of the cluster map: the map as the MGS sent it, indexed by target so
//! that finding a target's address is one hash lookup however many targets there are.

use std::collections::{HashMap, HashSet};
use weft_proto::msg::{ClusterMap, TargetInfo, TargetKind};

#[derive(Debug, Default)]
pub(crate) struct MapState {
    pub map: ClusterMap,
    index: HashMap<(TargetKind, u32), usize>,
}

impl MapState {
    pub fn new(map: ClusterMap) -> MapState {
        let index = map.targets.iter().enumerate().map(|(i, t)| ((t.kind, t.index), i)).collect();
        MapState { map, index }
    }

    pub fn target(&self, kind: TargetKind, index: u32) -> Option<&TargetInfo> {
        self.index.get(&(kind, index)).map(|i| &self.map.targets[*i])
    }

    pub fn address(&self, kind: TargetKind, index: u32) -> Option<&str> {
        self.target(kind, index).map(|t| t.address.as_str())
    }

    /// Every server address the map names (to drop connections to servers that left).
    pub fn addresses(&self) -> HashSet<&str> {
        self.map.targets.iter().map(|t| t.address.as_str()).collect()
    }

    /// One target (the first in the map) of each server address that is up.
    pub fn one_target_per_address(&self) -> Vec<(TargetKind, u32)> {
        let mut seen = HashSet::new();
        self.map
            .targets
            .iter()
            .filter(|t| t.state == weft_proto::msg::TargetState::Up && seen.insert(t.address.as_str()))
            .map(|t| (t.kind, t.index))
            .collect()
    }
}

/// How a target is named in messages: `OST 7`, `MDT 0`.
pub(crate) fn target_label(kind: TargetKind, index: u32) -> String {
    match kind {
        TargetKind::Mdt => format!("MDT {index}"),
        TargetKind::Ost => format!("OST {index}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::msg::TargetState;

    #[test]
    fn index_finds_sparse_targets_by_kind() {
        let t =
            |kind, index, address: &str| TargetInfo { kind, index, address: address.into(), state: TargetState::Up };
        let map = ClusterMap {
            version: 3,
            fsname: "weft".into(),
            targets: vec![
                t(TargetKind::Mdt, 0, "a:1"),
                t(TargetKind::Ost, 0, "b:1"),
                t(TargetKind::Ost, 1000, "b:1"),
                t(TargetKind::Ost, 7, "c:1"),
            ],
            pools: Default::default(),
        };
        let s = MapState::new(map);
        assert_eq!(s.address(TargetKind::Ost, 1000), Some("b:1"));
        assert_eq!(s.address(TargetKind::Mdt, 0), Some("a:1"));
        assert_eq!(s.address(TargetKind::Mdt, 7), None);
        assert_eq!(s.address(TargetKind::Ost, 8), None);
        assert_eq!(s.addresses().len(), 3);
        assert_eq!(target_label(TargetKind::Ost, 7), "OST 7");
    }
}
