//! The mount's part of the parameter tree (a Lustre client's `lctl set_param jobid_var=...`):
//! `jobid_var`, `jobid_name`, `max_dirty_mb` (Lustre's client-wide bound of data written
//! and not yet on the servers: Weft's write-behind has one bound per mount, not one per OST
//! as Lustre's `osc.*.max_dirty_mb`) and `max_rpcs_in_flight` (`osc.*.max_rpcs_in_flight`:
//! weft_client::params::MAX_RPCS_IN_FLIGHT), read and set by `weft get-param`/`set-param`
//! through the virtual attributes `weft.params` and `weft.param:NAME` of the mount's root, and applied
//! from the permanent settings in the cluster map (`set-param -P`) when the mount starts and
//! whenever they change. A setting made on the mount lasts until the next permanent one of
//! the same name, as in Lustre. Read only beside them: each target's `mdc.*.import` and
//! `osc.*.import` (weft-client's recovery.rs: the state, the server it is reached at, what
//! its replays after a failover kept).

use crate::jobid::{JobidScheme, JobidVar};
use crate::limits::DIRTY_MB_MAX;
use crate::mount::Mount;
use std::sync::{Arc, Weak};
use weft_client::params::{parse_max_rpcs_in_flight, MAX_RPCS_IN_FLIGHT};
use weft_proto::msg::param::{name_matches, records_to_apply, ParamValue};
use weft_proto::msg::ParamRecord;
use weft_proto::{WeftError, WeftResult};

/// The names a mount answers.
pub const NAMES: [&str; 4] = ["jobid_var", "jobid_name", "max_dirty_mb", MAX_RPCS_IN_FLIGHT];

/// Whether `name` (or a pattern) is an OST's `osc.FS-OSTxxxx-osc-CLIENT.active`: one per OST
/// of the map, named as Lustre's (the client part is this mount's client id).
pub fn is_osc_active(name: &str) -> bool {
    name.starts_with("osc.") && name.ends_with(".active")
}

/// `active`: Lustre's `kstrtobool` words.
fn parse_active(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "y" | "yes" | "on" | "true" => Ok(true),
        "0" | "n" | "no" | "off" | "false" => Ok(false),
        _ => Err(format!("active '{value}': 1 (use the OST) or 0 (fail its I/O at once with EIO)")),
    }
}

/// `osc.*.active` rows listed in `weft.params` besides the deactivated OSTs' (the answer of
/// an extended attribute holds 64 KiB; `weft.param:PATTERN` answers any OST's).
const OSC_ACTIVE_LISTED_MAX: usize = 64;

/// Checks a value for a mount parameter: the message names what is allowed.
pub fn check(name: &str, value: &str) -> Result<(), String> {
    if is_osc_active(name) {
        return parse_active(value).map(drop);
    }
    match name {
        "jobid_var" => JobidVar::parse(value).map(|_| ()),
        "jobid_name" if value.is_empty() => Err("jobid_name: a format such as %e.%u (empty would name no job)".into()),
        "jobid_name" => Ok(()),
        "max_dirty_mb" => parse_dirty_mb(value).map(|_| ()),
        MAX_RPCS_IN_FLIGHT => parse_max_rpcs_in_flight(value).map(|_| ()),
        other => Err(format!("no mount parameter '{other}': the mount's are {}", NAMES.join(", "))),
    }
}

/// `max_dirty_mb`: MiB, within what a mount may sensibly hold back.
fn parse_dirty_mb(value: &str) -> Result<u64, String> {
    match value.trim().parse::<u64>() {
        Ok(mb) if (1..=DIRTY_MB_MAX).contains(&mb) => Ok(mb),
        _ => Err(format!("max_dirty_mb '{value}': MiB from 1 to {DIRTY_MB_MAX}")),
    }
}

impl Mount {
    /// Every mount parameter and its value.
    pub(crate) fn params(&self) -> Vec<ParamValue> {
        let scheme = self.callers.scheme();
        let mut out = vec![
            ParamValue { name: "jobid_var".into(), value: scheme.var.name().to_string() },
            ParamValue { name: "jobid_name".into(), value: scheme.name },
            ParamValue { name: "max_dirty_mb".into(), value: (self.writes.dirty_max() >> 20).to_string() },
            ParamValue { name: MAX_RPCS_IN_FLIGHT.into(), value: self.writes.rpcs_max().to_string() },
        ];
        // Read only: what each target's import went through (failovers, replays).
        out.extend(self.client.import_params().into_iter().map(|(name, value)| ParamValue { name, value }));
        let active = self.osc_active().into_iter().enumerate();
        let listed = active.filter(|(i, (_, _, on))| *i < OSC_ACTIVE_LISTED_MAX || !on);
        out.extend(listed.map(|(_, (name, _, on))| ParamValue { name, value: u8::from(on).to_string() }));
        out
    }

    /// The parameters `pattern` matches (`weft.param:PATTERN` read): every OST's
    /// `osc.*.active`, not only those `weft.params` lists.
    pub(crate) fn param_values(&self, pattern: &str) -> Vec<ParamValue> {
        let mut out: Vec<ParamValue> = self.params().into_iter().filter(|v| !is_osc_active(&v.name)).collect();
        out.extend(
            self.osc_active().into_iter().map(|(name, _, on)| ParamValue { name, value: u8::from(on).to_string() }),
        );
        out.retain(|v| name_matches(pattern, &v.name));
        out
    }

    /// (`osc.FS-OSTxxxx-osc-CLIENT.active`, the OST, whether it is active) for every OST of
    /// the map, by index.
    fn osc_active(&self) -> Vec<(String, u32, bool)> {
        let map = self.client.map();
        let client = self.client.client_id();
        let mut osts: Vec<u32> = map.osts().map(|t| t.index).collect();
        osts.sort_unstable();
        osts.into_iter()
            .map(|ost| {
                let target = weft_proto::msg::target_name(&map.fsname, weft_proto::msg::TargetKind::Ost, ost);
                (format!("osc.{target}-osc-{client:x}.active"), ost, self.client.inactive.is_active(ost))
            })
            .collect()
    }

    /// Sets the parameters `pattern` matches to `value`; the names set.
    pub(crate) fn set_params(&self, pattern: &str, value: &str) -> WeftResult<Vec<String>> {
        if is_osc_active(pattern) {
            let osts: Vec<(String, u32, bool)> =
                self.osc_active().into_iter().filter(|(n, _, _)| name_matches(pattern, n)).collect();
            if osts.is_empty() {
                return Err(WeftError::not_found(format!("no OST of this mount matches '{pattern}'")));
            }
            let active = parse_active(value).map_err(WeftError::invalid)?;
            for (_, ost, _) in &osts {
                self.client.inactive.set_active(*ost, active);
            }
            tracing::info!(
                "{} OST(s) {} on this mount ({pattern})",
                osts.len(),
                if active { "activated" } else { "deactivated" }
            );
            return Ok(osts.into_iter().map(|(n, _, _)| n).collect());
        }
        let names: Vec<&str> = NAMES.into_iter().filter(|n| name_matches(pattern, n)).collect();
        if names.is_empty() {
            return Err(WeftError::not_found(format!("no mount parameter matches '{pattern}'")));
        }
        // Every value is checked before any is set.
        for name in &names {
            check(name, value).map_err(WeftError::invalid)?;
        }
        let mut scheme: JobidScheme = self.callers.scheme();
        let jobid_changes = names.iter().any(|n| n.starts_with("jobid_"));
        for name in &names {
            match *name {
                "jobid_var" => scheme.var = JobidVar::parse(value).map_err(WeftError::invalid)?,
                "jobid_name" => scheme.name = value.to_string(),
                MAX_RPCS_IN_FLIGHT => {
                    self.writes.set_rpcs_max(parse_max_rpcs_in_flight(value).map_err(WeftError::invalid)?)
                }
                _ => {
                    let mb = parse_dirty_mb(value).map_err(WeftError::invalid)?;
                    self.writes.set_dirty_max(mb << 20, &self.runtime);
                }
            }
            tracing::info!("mount parameter {name}={value}");
        }
        if jobid_changes {
            self.callers.set_scheme(scheme);
        }
        Ok(names.into_iter().map(String::from).collect())
    }

    /// Applies the permanent settings not applied before that name mount parameters.
    fn apply_records(&self, records: &[ParamRecord], applied: &mut Vec<ParamRecord>) {
        for record in records_to_apply(records, applied) {
            if NAMES.iter().any(|n| name_matches(&record.name, n)) {
                if let Err(e) = self.set_params(&record.name, &record.value) {
                    tracing::warn!("permanent parameter {}={}: {}", record.name, record.value, e.message);
                }
            }
        }
    }
}

/// Follows the cluster map's permanent parameters for the mount while it lives.
pub(crate) fn follow(mount: &Arc<Mount>) {
    let mut changes = mount.client.map_changes();
    let weak: Weak<Mount> = Arc::downgrade(mount);
    let mut applied = Vec::new();
    mount.apply_records(&changes.borrow_and_update().map.params, &mut applied);
    mount.runtime.spawn(async move {
        while changes.changed().await.is_ok() {
            let Some(mount) = weak.upgrade() else { return };
            let params = changes.borrow_and_update().map.params.clone();
            mount.apply_records(&params, &mut applied);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_with_what_is_allowed() {
        assert!(check("jobid_var", "SLURM_JOB_ID").is_ok());
        assert!(check("jobid_var", "procname_uid").is_ok());
        assert!(check("jobid_var", "bad value").unwrap_err().contains("allowed are disable, procname_uid"));
        assert!(check("jobid_name", "").is_err());
        assert!(check("max_dirty_mb", "5").is_ok());
        assert!(check("max_dirty_mb", "0").unwrap_err().contains("MiB from 1 to"));
        assert!(check("max_dirty_kb", "5")
            .unwrap_err()
            .contains("jobid_var, jobid_name, max_dirty_mb, max_rpcs_in_flight"));
        assert!(check("max_rpcs_in_flight", "32").is_ok());
        assert!(check("max_rpcs_in_flight", "0").unwrap_err().contains("requests from 1 to 256"));
        assert!(check("osc.weft-OST0003-osc-1f.active", "0").is_ok());
        assert!(check("osc.weft-OST0003*.active", "yes").is_ok());
        assert!(check("osc.weft-OST0003*.active", "2").unwrap_err().contains("1 (use the OST) or 0"));
    }
}
