//! Where new objects go once the OSTs are out of balance: Lustre's allocator
//! (`lod_qos.c`). While the free space of the OSTs differs by less than `qos_threshold_rr`
//! percent of the largest, objects go round robin; past it, each stripe goes to an OST
//! drawn at random with a weight that grows with its free space (and, in the part
//! `qos_prio_free` leaves, evenly, which stands for Lustre's weighting by load: Weft's OSTs
//! share their servers' load evenly on one machine).

/// `lod.*.qos_threshold_rr` and `lod.*.qos_prio_free`, percent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QosSettings {
    pub threshold_rr: u8,
    pub prio_free: u8,
}

/// Lustre's defaults: `qos_threshold_rr=17`, `qos_prio_free=91`.
impl Default for QosSettings {
    fn default() -> Self {
        QosSettings { threshold_rr: 17, prio_free: 91 }
    }
}

impl QosSettings {
    /// A percentage parameter's value, or an error naming the parameter and what it takes.
    pub fn parse_percent(name: &str, value: &str) -> Result<u8, String> {
        match value.trim().trim_end_matches('%').parse::<u8>() {
            Ok(p) if p <= 100 => Ok(p),
            _ => Err(format!("{name} '{value}': a percentage, 0 to 100")),
        }
    }
}
