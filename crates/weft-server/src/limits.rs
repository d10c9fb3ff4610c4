//! Every bound of the server process in one place, the unit last in each name (before MAX
//! or DEFAULT).

/// How long a client may take to answer a lock callback before it is evicted, unless the
/// config file's `lock_timeout_ms` says otherwise. Lustre's default lock callback timeout is
/// of this order; a client that is alive answers in milliseconds, so this bounds how long a
/// dead client can hold up the others.
pub const LOCK_TIMEOUT_MS_DEFAULT: u64 = 20_000;
/// After a restart, how long no lock is granted at most: the server registers with the
/// management service, which tells every client at once (the target's instance moves in the
/// map they watch), and they replay their locks here or drop what those guarded, within
/// this (an OST's window counts from the start). An MDT's window holds until the MDT is
/// registered, then ends once every client its store records as a lock holder replayed
/// (weft-mds `clients.rs`), this long after at most; those that did not are evicted (one
/// that began replaying gets weft-dlm's `LATE_REPLAY_GRACE_MS` more).
pub const LOCK_RECOVERY_MS: u64 = 5_000;
/// When a replicated MDT's new leader registered (the clients learn of the move from the
/// management service at once: they follow the map by long poll), how long it waits at most
/// for the clients its store records to replay their locks before it grants again and
/// evicts those that did not (one that began replaying, its opens or advisory locks, gets
/// weft-dlm's `LATE_REPLAY_GRACE_MS` more). It grants as soon as every one of them
/// replayed: with live clients, a few round trips after the registration. The bound is for
/// a live client that learns late: one whose long poll of the map is held by an MGS leader
/// cut off from the others learns when that poll times out (weft-rpc `WATCH_WAIT_MS` and
/// its margin: 30 s after it was sent, so before this bound ends). A dead client costs this
/// once: it is forgotten then.
pub const FAILOVER_RECOVERY_MS_MAX: u64 = 30_000;
/// A replicated MDT's new leader holds grants back (and takes open replays) from the moment
/// it serves until it registered with the management service, which tells the clients,
/// and until the clients replayed (`FAILOVER_RECOVERY_MS_MAX` at most) after: when the management service is failing over too
/// (its leader was in the same process), registering waits for its election. Past this
/// bound the window ends even if the registration did not succeed, evicting nobody (the
/// clients could not know where to replay).
pub const FAILOVER_REGISTER_WAIT_MS: u64 = 30_000;
/// How often an OSS commits what its OSTs wrote (weft-oss commit.rs: each object written
/// since the last commit synced, then the commit record): the writes a power loss can take
/// back, which clients keep to replay, are this interval's. Lustre's OSTs commit their
/// journal about every 5 s; one second keeps what clients hold small.
pub const OST_COMMIT_INTERVAL_MS: u64 = 1_000;
/// Longest file system name. It becomes part of target names (`weft-OST0001`): Lustre's
/// rule.
pub const FSNAME_BYTES_MAX: usize = 8;
pub use weft_rpc::limits::GLOBAL_REPORT_MS;
/// Seconds between the monitor's scrapes into the history, unless the config says otherwise.
pub const MONITOR_INTERVAL_S_DEFAULT: u64 = 10;
/// A replicated MDT's leader answers reads for this part of the shortest election timeout
/// after the group last confirmed it leads (weft-mds `replica::Lease`): no other replica can
/// be elected sooner, and the rest is the margin for clocks that run at slightly different
/// rates and for the time the confirmation took.
pub const MDT_LEASE_OF_ELECTION_TIMEOUT: f64 = 0.6;
/// How often a server process renews its lease with the management service (one message
/// per process, whatever it serves): the lease (weft-mgs `LEASE_MS`, 4 s) outlives several
/// lost or late renewals, and a standby learns within this that an OST lost its server.
pub const LEASE_RENEW_MS: u64 = 500;
/// How long one renewal may take before it counts as lost (the next one goes at its time):
/// a renewal answered later would grant little, counted from its send.
pub const LEASE_RENEW_TIMEOUT_MS: u64 = 1_000;
/// A server stops serving its failover OSTs this long before its lease ends as the
/// management service counts it (and it counts from the renewal's send, the management
/// service from its arrival): room for clocks that run at slightly different rates, and for
/// a request that passed the check just before the end and is still writing. A quarter of
/// the lease: it stops 3 s after its last granted renewal left.
pub const LEASE_MARGIN_MS: u64 = 1_000;
/// When a server takes a failover OST over, how long its lock namespace grants nothing:
/// the clients learn of the move from the map and replay their extent locks meanwhile
/// (they wait for a replay's answer 2 s, weft-client `LOCK_REPLAY_MS_MAX`).
pub const OST_TAKEOVER_LOCK_RECOVERY_MS: u64 = 2_000;
/// How long the MDS's request to an OST answered `Moved` (a failover OST not served there
/// now) waits for the map to say where before it is sent again, as a client waits.
pub const OST_MOVED_RETRY_MS: u64 = 200;
/// How often the server of an MDT looks for files whose synchronous mirrors went stale and
/// can be resynced (a read of its own store; requests go out only for files due).
pub const RESYNC_CHECK_MS: u64 = 1_000;
/// Files resynced in one round at most: each waits for its copy, and the queue is read again.
pub const RESYNC_FILES_MAX: usize = 16;
/// A replicated MGS's leader whose update of the map's `mgs_replicas` failed tries again
/// after this long (the group may have been changing leader or members).
pub const MGS_MEMBERS_RETRY_MS: u64 = 1_000;
