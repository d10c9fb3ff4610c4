//! Every bound of the transport in one place, the unit last in each name (before MIN, MAX or
//! DEFAULT). Protocol-wide bounds (frame sizes, requests in flight on a connection) live in
//! [`weft_proto::limits`].

// ---- Connections (both sides)

/// The read buffer of each connection: small frames (every metadata request and reply)
/// come out of it several per read syscall; a bulk larger than what it holds bypasses it.
pub const SOCKET_READ_BUFFER_BYTES: usize = 64 * 1024;

// ---- Peers (the client side)

/// How long one connection attempt may take, unless [`crate::PeerOptions`] say otherwise.
pub const CONNECT_TIMEOUT_MS_DEFAULT: u64 = 5_000;
/// How long a request may wait and resend, across reconnects, before it fails, unless
/// [`crate::PeerOptions`] say otherwise: the time a server has to restart before its
/// clients' requests fail (EIO on a mount).
pub const REQUEST_TIMEOUT_S_DEFAULT: u64 = 100;
/// First pause between reconnection attempts (and resends); doubled per failure up to the
/// max.
pub const RECONNECT_BACKOFF_MS_MIN: u64 = 50;
/// Longest pause between reconnection attempts (and resends).
pub const RECONNECT_BACKOFF_MS_MAX: u64 = 1000;

// ---- Following the cluster map

/// How long one WatchMap waits at the MGS for a change (the MGS caps it at its own
/// `WATCH_WAIT_MS_MAX`).
pub const WATCH_WAIT_MS: u32 = 25_000;
/// More than the wait, for the answer to come back: a WatchMap fails after
/// `WATCH_WAIT_MS + WATCH_ANSWER_MARGIN_MS`.
pub const WATCH_ANSWER_MARGIN_MS: u64 = 5_000;
/// Pause after a failed watch (the MGS restarting), doubling up to the max.
pub const WATCH_RETRY_MS_MIN: u64 = 200;
/// Longest pause between failed watches.
pub const WATCH_RETRY_MS_MAX: u64 = 5_000;

// ---- Servers

/// Connections a server keeps open at once (Lustre bounds its exports per target). One
/// past it is answered `Busy` with this bound named, then closed: each connection holds
/// buffers, a task and a route, so an unbounded number is a way to run the server out of
/// memory or file descriptors.
pub const SERVER_CONNECTIONS_MAX: usize = 4096;
/// How long a connection refused for the bound above has to send its first request, to be
/// answered why, before it is closed anyway.
pub const REFUSED_CONNECTION_WAIT_MS: u64 = 1_000;
/// How many evicted client ids a server remembers (the most recent ones).
pub const EVICTED_REMEMBERED_MAX: usize = 65536;
/// How often a callback waiting for a route looks for an in-process client (TCP routes wake
/// it at once).
pub const ROUTE_POLL_MS: u64 = 20;
/// Pause after a failed accept (out of file descriptors and the like) instead of spinning.
pub const ACCEPT_ERROR_PAUSE_MS: u64 = 100;

// ---- Scheduling (the FIFO policy, see [`crate::schedule::fifo`])

/// Object reads and writes up to this size run inline on the runtime thread instead of
/// being offloaded to the blocking pool: they land in or come from the page cache in
/// microseconds, less than the two thread hand-offs of the blocking pool (measured: with
/// 47,008-byte writes most of the server's time went to context switches).
pub const INLINE_IO_BYTES_MAX: u64 = 256 * 1024;
/// Most OSTs the FIFO policy keeps a write turn for: far more than one process serves, and
/// a bound on what requests naming made-up OST indices can make it keep.
pub const WRITE_TURNS_OSTS_MAX: usize = 4096;

// ---- Scheduling: the token bucket filter (see [`crate::schedule::tbf`])

/// The default rule's rate, and a rule's without `rate=`, in requests per second (Lustre's
/// `tbf_rate`).
pub const TBF_RATE_DEFAULT: u64 = 10_000;
/// Rates are below this (Lustre's `LPROCFS_NRS_RATE_MAX`).
pub const TBF_RATE_MAX: u64 = 1_000_000;
/// Tokens a class may save up (Lustre's `tbf_depth`).
pub const TBF_DEPTH_DEFAULT: u32 = 3;
/// How often a server with global TBF rules reports its demand on them to the management
/// service and takes its new share: a moved demand is followed within two of these. A
/// global rule's classes may also save up one such interval of their share (a demand that
/// moves between servers faster than the division follows it loses nothing).
pub const GLOBAL_REPORT_MS: u64 = 1_000;
/// How early a request may start before its class is due: the resolution of tokio's timer.
pub const TBF_EARLY_NS: u64 = 1_000_000;
/// Longest rule name (Lustre's `MAX_TBF_NAME` less its terminator).
pub const TBF_RULE_NAME_BYTES_MAX: usize = 15;
/// Classes a TBF scheduler keeps; past it, the idle ones seen longest ago are forgotten
/// (Lustre's `tbf_jobid_cache_size`).
pub const TBF_CLASSES_MAX: usize = 8192;

// ---- Scheduling: the round robin policies (see [`crate::schedule::rr`])

/// Requests a client (CRRN) or an object (ORR) starts in one turn (Lustre's
/// `nrs_crrn_quantum` and `nrs_orr_quantum` defaults).
pub const CRRN_QUANTUM_DEFAULT: u32 = 16;
pub const ORR_QUANTUM_DEFAULT: u32 = 256;
/// Requests a round robin policy lets run at once before it queues (Lustre's bound is its
/// service threads): enough to keep a disk's queue and both cores busy.
pub const RR_RUNNING_MAX_DEFAULT: usize = 16;

// ---- Job statistics (see [`crate::jobstats`])

/// How long a job may be idle before its statistics are dropped (Lustre's
/// `job_cleanup_interval`), unless the target's parameter says otherwise.
pub const JOB_CLEANUP_INTERVAL_S_DEFAULT: u64 = 600;
/// Jobs a target keeps statistics of; past it the longest idle is dropped.
pub const JOB_STATS_JOBS_MAX: usize = 16384;

// ---- Finding the management service's leader (mgs.rs)

/// How long one address of a replicated MGS is given to answer (beyond what the op itself
/// may wait, as a long poll) before the next is tried: a stopped replica refuses at once and
/// is left after a few reconnects; a silent one costs this much.
pub const MGS_ATTEMPT_MS: u64 = 2_000;
/// The pause after a whole round of addresses without an answer (an election under way),
/// doubling up to the max: an election takes a few seconds.
pub const MGS_ROUND_PAUSE_MS_MIN: u64 = 100;
pub const MGS_ROUND_PAUSE_MS_MAX: u64 = 1_000;

/// Slices a [`crate::budget::Budget`] counts its time in: a jump of the monotonic clock
/// spends at most one, an eighth of a bound (a callback's timeout, a proposal's).
pub const BUDGET_SLICES: u32 = 8;

/// How long a connection to a server that requires the shared key may take to prove it
/// (its hello, the Noise handshake, its confirmation: one round trip and a message) before
/// the server drops it: long enough for a loaded client, short enough that idle
/// connections do not hold the server's slots for long.
pub const HANDSHAKE_TIMEOUT_MS: u64 = 5_000;

/// Connections proving the key at once (their handshake, or a keyless client's refusal):
/// past it a new one is dropped, so that connections that proved nothing hold at most this
/// many of the server's `SERVER_CONNECTIONS_MAX` slots.
pub const HANDSHAKES_MAX: usize = 256;
