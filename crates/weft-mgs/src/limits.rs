//! Every bound of the management service in one place, the unit last in each name (before
//! MIN or MAX). Format constants (the map file's name and format version) stay in
//! [`crate::store`].

/// Longest a WatchMap waits for a change before it answers Unchanged: the follower asks
/// again at once, so this bounds only how long a request stays in flight.
pub const WATCH_WAIT_MS_MAX: u64 = 30_000;
/// Most evicted clients the MGS remembers for their map watches (the most recent ones; 8
/// bytes each, twice).
pub const EVICTIONS_NOTICED_MAX: usize = 65_536;
/// Most client ids one `ClientsEvicted` may name.
pub const EVICTIONS_PER_REPORT_MAX: usize = 4096;
/// Largest map file read at open (a full map of [`TARGETS_MAX`] targets is a few MiB).
pub const MAP_FILE_BYTES_MAX: u64 = 64 * 1024 * 1024;
/// Most targets (MDTs and OSTs together) in one map. Bounds the map's size on the wire: at
/// about 40 bytes a target, the map stays far below the message limit.
pub const TARGETS_MAX: usize = 65_536;
/// Longest target address (`host:port`).
pub const ADDRESS_BYTES_MAX: usize = 255;
/// Longest pool name, as Lustre's LOV_MAXPOOLNAME.
pub const POOL_NAME_BYTES_MAX: usize = 15;
/// Most pools in one file system.
pub const POOLS_MAX: usize = 1024;
/// Most permanent parameter settings (`set-param -P`) the map holds.
pub const PARAMS_MAX: usize = 1024;
/// Longest parameter name, and longest value, of a permanent setting.
pub const PARAM_NAME_BYTES_MAX: usize = 255;
pub const PARAM_VALUE_BYTES_MAX: usize = 4095;
/// Most global TBF rules (over all services) the MGS divides, and most servers reporting
/// one rule: the division's table is in memory, fed by any server.
pub const GLOBAL_RULES_MAX: usize = 1024;
pub const GLOBAL_SERVERS_MAX: usize = 4096;
/// The monitor's history: raw intervals are kept a day, then in 5-minute buckets; each
/// table holds at most so many rows (a row is about 50 bytes: a few hundred MB at most).
pub const HISTORY_RAW_KEEP_S: u64 = 86_400;
pub const HISTORY_BUCKET_S: u64 = 300;
pub const HISTORY_RAW_ROWS_MAX: u64 = 2_000_000;
pub const HISTORY_DOWN_ROWS_MAX: u64 = 2_000_000;
/// Decay policies: most policies, most limits in force at once, most actions remembered.
pub const DECAY_POLICIES_MAX: usize = 16;
pub const DECAY_LIMITS_MAX: usize = 4096;
pub const DECAY_ACTIONS_MAX: usize = 1000;

// ---- Global QoS (qos.rs)

/// A server's demand report older than this is a server that no longer takes part: its
/// share goes to the others (servers report once a second, so three missed reports).
pub const QOS_REPORT_STALE_MS: u64 = 3_000;
/// The reports of a server that make its demand (one a second): enough to smooth a bursty
/// second, few enough that shares follow a moved load within a few seconds.
pub const QOS_REPORTS_REMEMBERED_MAX: usize = 3;
/// The reserve of all idle servers together, in percent of the rate: what lets an idle
/// server start at once while the busy ones use the rest.
pub const QOS_RESERVE_PERCENT: u64 = 5;

// ---- Leases and failover targets (lease.rs)

/// How long a server's lease holds after its renewal arrived: after this without a renewal,
/// its failover OSTs may go to another server. Servers renew every 500 ms (weft-server
/// `LEASE_RENEW_MS`), so a lease survives seven lost renewals or a stall of a few seconds;
/// a dead server's OSTs move within this plus one renewal of the standby (the aim:
/// a failover answered within 5 s).
pub const LEASE_MS: u64 = 4_000;
/// Most servers whose leases the MGS keeps (its table is in memory).
pub const LEASE_SERVERS_MAX: usize = 4096;
/// Most servers that may serve one target (Lustre's failover NIDs of one target are a
/// handful; shared storage reaches few nodes).
pub const TARGET_SERVERS_MAX: usize = 8;

/// Most reservations planned or active at once (each is about 100 bytes of the map, which
/// every server and client follows).
pub const RESERVATIONS_MAX: usize = 1024;
/// Most reservations one user (not root) may have planned or active.
pub const RESERVATIONS_PER_USER_MAX: usize = 64;
/// Reservations done are kept this long for `weft qos status`, and at most this many.
pub const RESERVATION_DONE_KEPT_MS: u64 = 3_600_000;
pub const RESERVATIONS_DONE_KEPT_MAX: usize = 256;
/// Longest reservation, and furthest ahead one may start.
pub const RESERVATION_DURATION_MS_MAX: u64 = 30 * 86_400_000;
pub const RESERVATION_START_AHEAD_MS_MAX: u64 = 365 * 86_400_000;
/// Longest reservation id or job id.
pub const RESERVATION_ID_BYTES_MAX: usize = 64;
