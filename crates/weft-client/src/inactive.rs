//! OSTs deactivated on this client (Lustre's `osc.FS-OSTxxxx-osc-*.active=0`, set on a
//! mount with `weft set-param`): every request to one fails at once with EIO instead of
//! waiting for an OST that is gone or being emptied, until it is activated again. Kept in
//! memory, as Lustre's (lost with the mount). New files are placed by the MDS: an OST
//! the MDS should stop placing objects on is drained there (`osp.*.max_create_count=0`).

use std::collections::BTreeSet;
use std::sync::Mutex;
use weft_proto::{WeftError, WeftResult};

/// The deactivated OSTs: only those, so nothing here grows with the number of OSTs.
#[derive(Debug, Default)]
pub struct InactiveOsts(Mutex<BTreeSet<u32>>);

impl InactiveOsts {
    fn set(&self) -> std::sync::MutexGuard<'_, BTreeSet<u32>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Deactivates OST `ost` (`active` false) or activates it again.
    pub fn set_active(&self, ost: u32, active: bool) {
        if active {
            self.set().remove(&ost);
        } else {
            self.set().insert(ost);
        }
    }

    pub fn is_active(&self, ost: u32) -> bool {
        !self.set().contains(&ost)
    }

    /// EIO for a deactivated OST, naming it and how to activate it again.
    pub fn check(&self, ost: u32) -> WeftResult<()> {
        if self.is_active(ost) {
            return Ok(());
        }
        Err(WeftError::io(format!(
            "OST{ost:04x} is deactivated on this mount (osc.*-OST{ost:04x}-osc-*.active=0; set it to 1 to use it again)"
        )))
    }
}
