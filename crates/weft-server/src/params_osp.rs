//! The MDS's parameters of the OSTs it places objects on and of its placement, in Lustre's
//! names (the MDT's `osp` devices, one per OST, and its `lod`):
//!
//! | name | get | set |
//! |---|---|---|
//! | `osp.FS-OSTxxxx-osc-MDTxxxx.max_create_count` | objects a precreate asks at most (20000, Lustre's `OST_MAX_PRECREATE`) | 0 drains the OST: no new objects there, destroys go on; up to 20000 |
//! | `osp.FS-OSTxxxx-osc-MDTxxxx.objects` | `files=F objects=O destroying=D`: what this MDT still has there; read only, answered only when named in full (it reads every inode) | — |
//! | `lod.FS-MDTxxxx-mdtlov.qos_threshold_rr` | percent of free space between the OSTs below which objects go round robin (17) | 0 to 100 |
//! | `lod.FS-MDTxxxx-mdtlov.qos_prio_free` | percent of a weight that free space decides (91) | 0 to 100 |
//! | `lod.FS-MDTxxxx-mdtlov.zone_rule` | the I/O zone rules in order, `NAME EXPR pool=POOL` a line | `start NAME EXPR pool=POOL`, `EXPR pool=POOL`, `stop NAME` (weft-mds's zone.rs) |

use std::sync::Arc;
use weft_mds::qos::QosSettings;
use weft_mds::zone::ZoneCommand;
use weft_mds::Mds;
use weft_proto::msg::{target_name, TargetKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OspKey {
    MaxCreateCount(u32),
    Objects(u32),
    QosThresholdRr,
    QosPrioFree,
    ZoneRule,
}

impl OspKey {
    /// Answered only when asked by its full name: reading it costs a pass over the MDT.
    pub fn named_only(self) -> bool {
        matches!(self, OspKey::Objects(_))
    }
}

/// The leaves of the MDS `mds` of MDT `mdt` in file system `fsname`.
pub(crate) fn leaves(mds: &Mds, mdt: u32, fsname: &str) -> Vec<(String, OspKey)> {
    let mdt_name = target_name(fsname, TargetKind::Mdt, mdt);
    let mdt_short = &mdt_name[fsname.len() + 1..];
    let mut out = Vec::new();
    for ost in mds.known_osts() {
        let name = target_name(fsname, TargetKind::Ost, ost);
        out.push((format!("osp.{name}-osc-{mdt_short}.max_create_count"), OspKey::MaxCreateCount(ost)));
        out.push((format!("osp.{name}-osc-{mdt_short}.objects"), OspKey::Objects(ost)));
    }
    out.push((format!("lod.{mdt_name}-mdtlov.qos_threshold_rr"), OspKey::QosThresholdRr));
    out.push((format!("lod.{mdt_name}-mdtlov.qos_prio_free"), OspKey::QosPrioFree));
    out.push((format!("lod.{mdt_name}-mdtlov.zone_rule"), OspKey::ZoneRule));
    out
}

/// Applies the permanent settings (`set-param -P`) of `records` that name the `osp.*`
/// parameters of OSTs the MDS did not know before (`seen`): at its start it learns its
/// OSTs from the map after the settings were applied, and an OST may join later.
pub(crate) fn apply_to_new_osts(
    mds: &Arc<Mds>,
    mdt: u32,
    fsname: &str,
    records: &[weft_proto::msg::ParamRecord],
    seen: &mut std::collections::BTreeSet<u32>,
) {
    let known = mds.known_osts();
    if known.iter().all(|o| seen.contains(o)) {
        return;
    }
    let new: Vec<(String, OspKey)> = leaves(mds, mdt, fsname)
        .into_iter()
        .filter(|(_, k)| matches!(k, OspKey::MaxCreateCount(o) if !seen.contains(o)))
        .collect();
    for record in records {
        for (name, key) in new.iter().filter(|(n, _)| weft_proto::msg::param::name_matches(&record.name, n)) {
            match set(mds, *key, &record.value) {
                Ok(()) => tracing::info!("permanent parameter {name}={}", record.value),
                Err(e) => tracing::warn!("permanent parameter {name}={}: {e}", record.value),
            }
        }
    }
    seen.extend(known);
}

pub(crate) fn get(mds: &Arc<Mds>, key: OspKey) -> Result<String, String> {
    let objects = mds.objects();
    Ok(match key {
        OspKey::MaxCreateCount(ost) => objects.lock().max_create_count(ost).to_string(),
        OspKey::Objects(ost) => {
            let (files, objects, destroying) = mds.objects_on_ost(ost).map_err(|e| e.message)?;
            format!("files={files} objects={objects} destroying={destroying}")
        }
        OspKey::QosThresholdRr => format!("{}%", objects.lock().qos.threshold_rr),
        OspKey::QosPrioFree => format!("{}%", objects.lock().qos.prio_free),
        OspKey::ZoneRule => {
            let st = objects.lock();
            st.zones.listing(|pool| st.zone_note(pool))
        }
    })
}

pub(crate) fn set(mds: &Arc<Mds>, key: OspKey, value: &str) -> Result<(), String> {
    let objects = mds.objects();
    match key {
        OspKey::MaxCreateCount(ost) => {
            let max = weft_mds::objects::OST_MAX_PRECREATE;
            let count = value
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|n| *n <= max)
                .ok_or_else(|| format!("max_create_count '{value}': 0 (no new objects) to {max} (the default)"))?;
            objects.set_max_create_count(ost, count).map_err(|e| e.message)?;
            tracing::info!(ost, count, "max_create_count set");
        }
        OspKey::Objects(_) => return Err("objects is read only: what this MDT still has on the OST".into()),
        OspKey::QosThresholdRr => {
            let p = QosSettings::parse_percent("qos_threshold_rr", value)?;
            objects.lock().qos.threshold_rr = p;
        }
        OspKey::QosPrioFree => {
            let p = QosSettings::parse_percent("qos_prio_free", value)?;
            objects.lock().qos.prio_free = p;
        }
        OspKey::ZoneRule => {
            let cmd = ZoneCommand::parse(value).map_err(|e| format!("'{}': {e}", value.trim()))?;
            let mut st = objects.lock();
            // Before its first map (a permanent rule replayed at the start) the MDS knows no
            // pool; afterwards a rule naming one that does not exist is refused.
            if let ZoneCommand::Start(rule) = &cmd {
                if st.map_version > 0 && !st.pools_by_name.contains_key(&rule.pool) {
                    let pools: Vec<&str> = st.pools_by_name.keys().map(String::as_str).collect();
                    return Err(format!(
                        "'{}': pool '{}' does not exist (the pools: {}; weft pool new and weft pool add make one)",
                        value.trim(),
                        rule.pool,
                        if pools.is_empty() { "none".to_string() } else { pools.join(", ") }
                    ));
                }
            }
            st.zones.apply(cmd.clone())?;
            drop(st);
            tracing::info!(command = value.trim(), "zone rule");
        }
    }
    Ok(())
}
