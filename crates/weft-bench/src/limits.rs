//! Every bound of the benchmarks in one place, the unit last in each name. The sizes the
//! IO-500 rules fix (transfer and file sizes) are not bounds and stay in [`crate::phase`].

/// How long connecting to the management service may take (the native API).
pub const CONNECT_TIMEOUT_S: u64 = 10;
/// How often the progress line is redrawn.
pub const PROGRESS_REDRAW_MS: u64 = 500;
/// How often the parent looks at its workers.
pub const POLL_MS: u64 = 20;
/// How often a worker rewrites its progress file.
pub const PROGRESS_INTERVAL_MS: u64 = 250;
/// How long a rank waits for the others' stonewall counts before it gives up.
pub const WEAR_OUT_WAIT_S: u64 = 3600;
/// How often a rank looks again for a stonewall count not yet written.
pub const WEAR_OUT_POLL_MS: u64 = 2;
/// How long [`crate::fsapi::drop_system_caches`] lets the machine settle after dropping. On
/// a virtual machine with free page reporting (virtio-balloon), freed memory goes back to
/// the host within about two seconds, and the first writer to touch it again pays for the
/// host's page faults inside its copies; a phase started before that is done would be
/// measured on memory half warm, half cold. Waiting puts every phase on the same footing.
pub const DROP_CACHES_SETTLE_S: u64 = 3;
