//! Every bound of libweft in one place, the unit last in each name.

/// How long the first contact with the management service may take before the mount fails.
pub(crate) const CONNECT_TIMEOUT_S: u64 = 5;
/// Threads of the client's runtime (besides the callers' own, which run their calls): one
/// answers the servers' callbacks while the program computes; the callers drive their I/O.
pub(crate) const RUNTIME_THREADS: usize = 1;
/// Symbolic links followed while resolving one path before ELOOP (Linux's MAXSYMLINKS).
pub(crate) const SYMLINKS_FOLLOWED_MAX: u32 = 40;
/// Most bytes one read or write call moves (as Linux's MAX_RW_COUNT, a page short of 2 GiB).
pub(crate) const RW_BYTES_MAX: usize = 0x7fff_f000;
/// Closes on their way to the MDS at once; the next close waits for one of them.
pub(crate) const CLOSES_IN_FLIGHT_MAX: usize = 512;
/// How long unmount waits for the closes still on their way to the MDS.
pub(crate) const CLOSES_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
/// How long a parameter request may take to connect to a server, and to be answered.
pub(crate) const PARAM_CONNECT_TIMEOUT_MS: u64 = 2_000;
pub(crate) const PARAM_REQUEST_TIMEOUT_S: u64 = 5;
