//! The map's rules as pure functions: each takes the map and a request and changes the map
//! in place, reporting whether anything changed. No I/O and no clock, so every rule is
//! tested directly; the service around them persists and publishes.

use weft_proto::msg::{ClusterMap, ParamRecord, TargetInfo, TargetKind, TargetState};
use weft_proto::{WeftError, WeftResult};

use crate::limits::{
    ADDRESS_BYTES_MAX, PARAMS_MAX, PARAM_NAME_BYTES_MAX, PARAM_VALUE_BYTES_MAX, POOLS_MAX, POOL_NAME_BYTES_MAX,
    TARGETS_MAX,
};

/// Adds a target, or moves a known one to a new address; either way it is Up afterwards,
/// and its instance is one more than before (1 for a new one): a registration is a start,
/// and the map always changes, so every follower learns it (imperative recovery).
pub fn register(map: &mut ClusterMap, target: &TargetInfo) -> WeftResult<bool> {
    if target.kind == TargetKind::Ost && target.index >= weft_proto::limits::DOM_TARGET_BASE {
        return Err(WeftError::invalid(format!(
            "OST index {} is reserved (data on the MDT): OST indices are below {}",
            target.index,
            weft_proto::limits::DOM_TARGET_BASE
        )));
    }
    if target.address.is_empty() || target.address.len() > ADDRESS_BYTES_MAX {
        return Err(WeftError::invalid(format!(
            "target address '{}' must be 1 to {ADDRESS_BYTES_MAX} bytes (host:port)",
            target.address
        )));
    }
    let key = (target.kind, target.index);
    match map.targets.binary_search_by_key(&key, |t| (t.kind, t.index)) {
        Ok(i) => {
            let known = &mut map.targets[i];
            known.address.clone_from(&target.address);
            known.state = TargetState::Up;
            known.instance += 1;
            Ok(true)
        }
        Err(i) => {
            if map.targets.len() >= TARGETS_MAX {
                return Err(WeftError::new(
                    weft_proto::ErrorCode::NoSpace,
                    format!("the cluster map holds {TARGETS_MAX} targets already"),
                ));
            }
            let new = TargetInfo { state: TargetState::Up, instance: 1, ..target.clone() };
            map.targets.insert(i, new);
            Ok(true)
        }
    }
}

pub fn set_target_state(map: &mut ClusterMap, kind: TargetKind, index: u32, state: TargetState) -> WeftResult<bool> {
    let Some(target) = map.targets.iter_mut().find(|t| t.kind == kind && t.index == index) else {
        return Err(WeftError::not_found(format!(
            "{} is not registered",
            weft_proto::msg::target_name(&map.fsname, kind, index)
        )));
    };
    let changed = target.state != state;
    target.state = state;
    Ok(changed)
}

/// Creates `pool` when new and adds the OSTs to it (each must be registered).
pub fn pool_add(map: &mut ClusterMap, pool: &str, osts: &[u32]) -> WeftResult<bool> {
    check_pool_name(pool)?;
    for &index in osts {
        if map.target(TargetKind::Ost, index).is_none() {
            return Err(WeftError::not_found(format!(
                "cannot add OST index {index} to pool '{pool}': {} is not registered",
                weft_proto::msg::target_name(&map.fsname, TargetKind::Ost, index)
            )));
        }
    }
    if !map.pools.contains_key(pool) && map.pools.len() >= POOLS_MAX {
        return Err(WeftError::new(
            weft_proto::ErrorCode::NoSpace,
            format!("the file system has {POOLS_MAX} pools already"),
        ));
    }
    let mut changed = false;
    let members = map.pools.entry(pool.to_string()).or_insert_with(|| {
        changed = true;
        Vec::new()
    });
    for &index in osts {
        if let Err(i) = members.binary_search(&index) {
            members.insert(i, index);
            changed = true;
        }
    }
    Ok(changed)
}

/// Creates an empty pool; one of that name must not exist yet.
pub fn pool_new(map: &mut ClusterMap, pool: &str) -> WeftResult<bool> {
    check_pool_name(pool)?;
    if map.pools.contains_key(pool) {
        return Err(WeftError::new(weft_proto::ErrorCode::Exists, format!("pool '{pool}' exists already")));
    }
    pool_add(map, pool, &[])
}

/// Takes OSTs out of a pool; each must be in it.
pub fn pool_remove(map: &mut ClusterMap, pool: &str, osts: &[u32]) -> WeftResult<bool> {
    let members = map.pools.get_mut(pool).ok_or_else(|| no_pool(pool))?;
    if let Some(missing) = osts.iter().find(|o| members.binary_search(o).is_err()) {
        return Err(WeftError::not_found(format!(
            "OST index {missing} is not in pool '{pool}' (its OSTs: {})",
            list(members)
        )));
    }
    members.retain(|o| !osts.contains(o));
    Ok(!osts.is_empty())
}

/// Records a replicated MGS's voters (their addresses, in replica order). Whether it changed.
pub fn set_mgs_replicas(map: &mut ClusterMap, replicas: Vec<String>) -> WeftResult<bool> {
    if map.mgs_replicas == replicas {
        return Ok(false);
    }
    map.mgs_replicas = replicas;
    Ok(true)
}

/// Sets a pool's settings (`weft pool set`): whether new files with a mirror in it write
/// their mirrors synchronously.
pub fn pool_set(map: &mut ClusterMap, pool: &str, sync_mirrors: bool) -> WeftResult<bool> {
    if !map.pools.contains_key(pool) {
        return Err(no_pool(pool));
    }
    Ok(match sync_mirrors {
        true => map.sync_mirror_pools.insert(pool.to_string()),
        false => map.sync_mirror_pools.remove(pool),
    })
}

/// Removes a pool, which must be empty (as `lctl pool_destroy`).
pub fn pool_destroy(map: &mut ClusterMap, pool: &str) -> WeftResult<bool> {
    let members = map.pools.get(pool).ok_or_else(|| no_pool(pool))?;
    if !members.is_empty() {
        return Err(WeftError::new(
            weft_proto::ErrorCode::Busy,
            format!("pool '{pool}' still holds OSTs {}: remove them first (weft pool remove)", list(members)),
        ));
    }
    map.pools.remove(pool);
    map.sync_mirror_pools.remove(pool);
    Ok(true)
}

/// Takes target `index` of `kind` out of the map: an OST only, in no pool (`weft pool
/// remove` first), not served under a lease (a failover OST's servers would claim it back).
pub fn remove_target(map: &mut ClusterMap, kind: TargetKind, index: u32) -> WeftResult<bool> {
    if kind != TargetKind::Ost {
        return Err(WeftError::invalid("only an OST is taken out of the map (weft del-ost); an MDT stays"));
    }
    let name = weft_proto::msg::target_name(&map.fsname, kind, index);
    let Some(i) = map.targets.iter().position(|t| t.kind == kind && t.index == index) else {
        return Err(WeftError::not_found(format!("{name} is not in the cluster map")));
    };
    let pools: Vec<&String> = map.pools.iter().filter(|(_, m)| m.contains(&index)).map(|(p, _)| p).collect();
    if !pools.is_empty() {
        let pools: Vec<&str> = pools.iter().map(|p| p.as_str()).collect();
        return Err(WeftError::new(
            weft_proto::ErrorCode::Busy,
            format!("{name} is in pool(s) {}: weft pool remove it first", pools.join(",")),
        ));
    }
    if map.targets[i].leased {
        return Err(WeftError::new(
            weft_proto::ErrorCode::Busy,
            format!("{name} is a failover OST served under a lease: take it out of its servers' failover_osts first"),
        ));
    }
    map.targets.remove(i);
    Ok(true)
}

fn no_pool(pool: &str) -> WeftError {
    WeftError::not_found(format!("no pool '{pool}': weft pool list shows the pools"))
}

fn list(osts: &[u32]) -> String {
    if osts.is_empty() {
        return "none".to_string();
    }
    osts.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

fn check_pool_name(pool: &str) -> WeftResult<()> {
    let valid = !pool.is_empty()
        && pool.len() <= POOL_NAME_BYTES_MAX
        && pool.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(WeftError::invalid(format!(
            "pool name '{pool}' is invalid: use 1 to {POOL_NAME_BYTES_MAX} characters from A-Z, a-z, 0-9, '_' and '-'"
        )))
    }
}

/// Records a permanent parameter setting: a rule command (`...nrs_tbf_rule`,
/// `lod.*.zone_rule`) adds to those before it, as Lustre's compound records; any other
/// replaces an earlier setting of the same name, which moves to the end (the order servers
/// apply them in).
pub fn set_param(map: &mut ClusterMap, name: &str, value: &str) -> WeftResult<bool> {
    if name.is_empty() || name.len() > PARAM_NAME_BYTES_MAX || value.len() > PARAM_VALUE_BYTES_MAX {
        return Err(WeftError::invalid(format!(
            "a permanent parameter has a name of 1 to {PARAM_NAME_BYTES_MAX} bytes and a value of at most {PARAM_VALUE_BYTES_MAX}"
        )));
    }
    let record = ParamRecord { name: name.to_string(), value: value.to_string() };
    let accumulates = name.ends_with(".nrs_tbf_rule") || name.ends_with(".zone_rule");
    if !accumulates {
        if map.params.last() == Some(&record) {
            return Ok(false);
        }
        map.params.retain(|r| r.name != name);
    }
    if map.params.len() >= PARAMS_MAX {
        return Err(WeftError::new(
            weft_proto::ErrorCode::NoSpace,
            format!("the map holds {PARAMS_MAX} permanent parameters already: delete some with set-param -P -d"),
        ));
    }
    map.params.push(record);
    Ok(true)
}

/// Removes the permanent settings whose names `pattern` matches (per dot-separated part,
/// glob wildcards); at least one must.
pub fn delete_param(map: &mut ClusterMap, pattern: &str) -> WeftResult<bool> {
    let before = map.params.len();
    map.params.retain(|r| !weft_proto::msg::param::name_matches(pattern, &r.name) && r.name != pattern);
    if map.params.len() == before {
        let names: Vec<&str> = map.params.iter().map(|r| r.name.as_str()).collect();
        return Err(WeftError::not_found(format!(
            "no permanent parameter matches '{pattern}' (the permanent ones: {})",
            if names.is_empty() { "none".to_string() } else { names.join(", ") }
        )));
    }
    Ok(true)
}

/// Adds decay policy `policy`, or replaces the one of its name.
pub fn decay_set(map: &mut ClusterMap, policy: weft_proto::msg::DecayPolicy) -> WeftResult<bool> {
    use crate::limits::DECAY_POLICIES_MAX;
    let name_ok = !policy.name.is_empty()
        && policy.name.len() <= 32
        && policy.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !name_ok {
        return Err(WeftError::invalid(format!(
            "decay policy name '{}': 1 to 32 letters, digits, '_' or '-'",
            policy.name
        )));
    }
    if !["user", "job", "group"].contains(&policy.by.as_str()) {
        return Err(WeftError::invalid(format!("decay policy by '{}': user, job or group", policy.by)));
    }
    if policy.period_s == 0 {
        return Err(WeftError::invalid("a decay policy's period is at least one second"));
    }
    if policy.budget_bytes.is_none() && policy.budget_ops.is_none() {
        return Err(WeftError::invalid("a decay policy needs a budget of bytes, of metadata operations, or both"));
    }
    if policy.rate == 0 || policy.mds_rate == 0 {
        return Err(WeftError::invalid("the fallback rates are at least one request per second"));
    }
    if let Some(old) = map.decay.iter_mut().find(|p| p.name == policy.name) {
        if *old == policy {
            return Ok(false);
        }
        *old = policy;
        return Ok(true);
    }
    if map.decay.len() >= DECAY_POLICIES_MAX {
        return Err(WeftError::new(
            weft_proto::ErrorCode::NoSpace,
            format!("{DECAY_POLICIES_MAX} decay policies exist already: remove one first"),
        ));
    }
    map.decay.push(policy);
    Ok(true)
}

/// Removes decay policy `name`.
pub fn decay_remove(map: &mut ClusterMap, name: &str) -> WeftResult<bool> {
    let before = map.decay.len();
    map.decay.retain(|p| p.name != name);
    if map.decay.len() == before {
        let names: Vec<&str> = map.decay.iter().map(|p| p.name.as_str()).collect();
        return Err(WeftError::not_found(format!(
            "no decay policy '{name}' (the policies: {})",
            if names.is_empty() { "none".to_string() } else { names.join(", ") }
        )));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ost(index: u32, address: &str) -> TargetInfo {
        TargetInfo { state: TargetState::Down, ..TargetInfo::new(TargetKind::Ost, index, address) }
    }

    fn empty_map() -> ClusterMap {
        ClusterMap { version: 1, fsname: "fs".into(), ..Default::default() }
    }

    #[test]
    fn register_keeps_targets_sorted_and_reports_changes() {
        let mut map = empty_map();
        let mdt = TargetInfo::new(TargetKind::Mdt, 0, "m:1");
        assert_eq!(register(&mut map, &ost(1000, "a:1")), Ok(true));
        assert_eq!(register(&mut map, &ost(7, "a:1")), Ok(true));
        assert_eq!(register(&mut map, &mdt), Ok(true));
        assert_eq!(register(&mut map, &ost(0, "a:1")), Ok(true));
        let order: Vec<_> = map.targets.iter().map(|t| (t.kind, t.index)).collect();
        assert_eq!(order, [(TargetKind::Mdt, 0), (TargetKind::Ost, 0), (TargetKind::Ost, 7), (TargetKind::Ost, 1000)]);
        assert!(map.targets.iter().all(|t| t.state == TargetState::Up), "registering makes a target Up");

        let instance = |map: &ClusterMap| map.target(TargetKind::Ost, 7).unwrap().instance;
        assert_eq!(instance(&map), 1, "a new target's first instance");
        // The same server registering again restarted: the map changes, so clients learn it.
        assert_eq!(register(&mut map, &ost(7, "a:1")), Ok(true));
        assert_eq!(instance(&map), 2);
        assert_eq!(register(&mut map, &ost(7, "b:2")), Ok(true));
        assert_eq!(map.target(TargetKind::Ost, 7).unwrap().address, "b:2");
        assert_eq!(instance(&map), 3, "a move is a new instance too");
        assert_eq!(set_target_state(&mut map, TargetKind::Ost, 7, TargetState::Down), Ok(true));
        assert_eq!(register(&mut map, &ost(7, "b:2")), Ok(true), "a Down target comes back Up");
        assert_eq!(register(&mut map, &ost(8, "")).unwrap_err().code, weft_proto::ErrorCode::Invalid);
    }

    #[test]
    fn set_state_of_unknown_target_is_not_found() {
        let mut map = empty_map();
        let err = set_target_state(&mut map, TargetKind::Ost, 3, TargetState::Down).unwrap_err();
        assert_eq!(err.code, weft_proto::ErrorCode::NotFound);
        assert!(err.message.contains("fs-OST0003"), "{}", err.message);
    }

    #[test]
    fn pools_validate_names_and_members() {
        let mut map = empty_map();
        register(&mut map, &ost(1, "a:1")).unwrap();
        register(&mut map, &ost(9, "a:1")).unwrap();
        for bad in ["", "sixteen_chars_xx", "has space", "dot.ted", "ünï"] {
            let err = pool_add(&mut map, bad, &[1]).unwrap_err();
            assert_eq!(err.code, weft_proto::ErrorCode::Invalid, "{bad:?}");
            assert!(err.message.contains("A-Z"), "the message must name the rule: {}", err.message);
        }
        let err = pool_add(&mut map, "fast", &[1, 2]).unwrap_err();
        assert_eq!(err.code, weft_proto::ErrorCode::NotFound);
        assert!(err.message.contains("index 2"), "{}", err.message);
        assert!(map.pools.is_empty(), "a refused request changes nothing");

        assert_eq!(pool_add(&mut map, "fast_1-A", &[9, 1, 9]), Ok(true));
        assert_eq!(map.pools["fast_1-A"], [1, 9]);
        assert_eq!(pool_add(&mut map, "fast_1-A", &[1]), Ok(false));
        assert_eq!(pool_add(&mut map, "empty", &[]), Ok(true));
        assert_eq!(map.pools["empty"], Vec::<u32>::new());
    }

    #[test]
    fn a_pool_setting_needs_the_pool_and_goes_with_it() {
        let mut map = empty_map();
        assert_eq!(pool_set(&mut map, "fast", true).unwrap_err().code, weft_proto::ErrorCode::NotFound);
        pool_new(&mut map, "fast").unwrap();
        assert_eq!(pool_set(&mut map, "fast", true), Ok(true));
        assert_eq!(pool_set(&mut map, "fast", true), Ok(false), "no change, no new map");
        assert!(map.sync_mirror_pools.contains("fast"));
        assert_eq!(pool_set(&mut map, "fast", false), Ok(true));
        assert!(map.sync_mirror_pools.is_empty());
        pool_set(&mut map, "fast", true).unwrap();
        pool_destroy(&mut map, "fast").unwrap();
        assert!(map.sync_mirror_pools.is_empty(), "a destroyed pool's setting goes with it");
    }
}
