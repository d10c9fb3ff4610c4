//! Every bound of the test clusters in one place, the unit last in each name (before MAX).

/// The lock callback timeout of test clusters: short, so that a test of a dead client's
/// eviction runs in seconds, yet far above what a live client takes to answer.
pub const LOCK_TIMEOUT_MS: u64 = 4_000;
/// How long a server or mount may take to come up before the test fails.
pub const START_TIMEOUT_S: u64 = 30;
/// How long a stopped process may take to exit before it is killed.
pub const STOP_TIMEOUT_S: u64 = 10;
/// How long one question to the management service may take (the cluster map).
pub const MGS_ANSWER_MS_MAX: u64 = 2_000;
/// The request timeout (`timeout=` mount option) of mounts made by [`crate::Cluster::mount`].
pub const MOUNT_REQUEST_TIMEOUT_S: u64 = 60;
/// How often a starting cluster asks the management service whether every target is up.
pub const TARGETS_UP_POLL_MS: u64 = 50;
/// How often the harness looks again while it waits for a mount to appear, a server to
/// listen or a process to exit.
pub const POLL_MS: u64 = 20;
