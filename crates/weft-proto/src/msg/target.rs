//! The kinds of target (MDT, OST): named by the MGS's cluster map and by the lock manager's
//! targets alike, so in a leaf that both import.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TargetKind {
    Mdt,
    Ost,
}
