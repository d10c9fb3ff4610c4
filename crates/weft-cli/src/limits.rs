//! Every bound of the `weft` command in one place, the unit last in each name (before MAX or
//! DEFAULT). Defaults the command shares with the libraries (request and connect timeouts,
//! attribute TTL, FUSE threads, write size) are theirs: `weft_rpc::limits` and
//! `weft_fuse::limits`.

// ---- weft mount

/// The port the management service listens on when an address gives none.
pub const MGS_PORT_DEFAULT: u16 = 9800;
/// Most FUSE threads the `threads=N` mount option accepts.
pub const MOUNT_THREADS_MAX: usize = 64;
/// Longest `weft mount` (without `-f`) waits for its background process to show the mount;
/// a shorter `timeout=` mount option shortens it.
pub const MOUNT_READY_TIMEOUT_S_MAX: u64 = 30;
/// Longest `weft mount` (and the mount helper `mount.fuse.weft`) waits for the management
/// service's first answer before it fails naming the address: a mount at boot with the
/// service down fails in seconds (mount(8)'s status 32), not after the request timeout.
pub const MOUNT_MGS_ANSWER_S_MAX: u64 = 5;
/// How often a command waiting for its background process to be ready (`weft mount`,
/// `weft up --detach`) looks again.
pub const READY_POLL_MS: u64 = 50;

// ---- weft up, down, status

/// How long `weft up --detach` waits for the background file system to be mounted.
pub const UP_READY_TIMEOUT_S: u64 = 60;
/// How often a running `weft up` checks whether its mount went away (someone ran umount),
/// between signals.
pub const UNMOUNT_CHECK_INTERVAL_MS: u64 = 500;
/// How long `weft down` waits for a clean stop before it kills.
pub const DOWN_WAIT_S: u64 = 30;
/// How often `weft down` looks whether the process it stopped has exited.
pub const DOWN_POLL_MS: u64 = 50;
/// How long `weft down` pauses after a SIGKILL before it unmounts what is left.
pub const DOWN_KILL_SETTLE_MS: u64 = 200;
/// How long `weft status` waits for the management service.
pub const STATUS_MGS_TIMEOUT_S: u64 = 5;

// ---- weft set-param, get-param, list-param

/// How long connecting to one server may take.
pub const PARAM_CONNECT_TIMEOUT_MS: u64 = 2_000;
/// How long one server's answer may take, resends included: a server that is down makes
/// the command fail within seconds, naming it.
pub const PARAM_REQUEST_TIMEOUT_S: u64 = 5;
/// `weft top`: the monitor's last intervals it takes as "now", and the rows of each kind.
pub const TOP_INTERVALS: u64 = 3;
pub const TOP_ROWS: u32 = 10;

// ---- weft hsm, weft policy

/// Files per HSM request to the MDT (`hsm archive` and the policy engine's archive runs):
/// the MDT's bound is larger, this keeps each request under a megabyte.
pub const HSM_REQUEST_FILES_MAX: usize = 8192;
/// `weft up --replicas`: how long after a replica's process exited it is started again (it
/// then catches up from its group).
pub const REPLICA_RESTART_MS: u64 = 5_000;
/// `weft up --replicas`: how long the management service may wait for the MDT's group to
/// elect a leader that registers, before the mount starts anyway.
pub const REPLICA_LEADER_WAIT_S: u64 = 30;
/// `weft failover`: how long it waits for the map to show the OST at its new server (its
/// server hands it over at its next lease renewal, every 500 ms), and how often it looks.
pub const FAILOVER_WAIT_S: u64 = 10;
pub const FAILOVER_POLL_MS: u64 = 100;

// ---- weft replica add|remove

/// How long the new replica's process may take to say which replica it is (its
/// `replica_status`), before `weft replica add` says it is not running: a running server
/// answers in milliseconds.
pub const REPLICA_PROBE_MS: u64 = 2_000;
/// How long `weft replica add` waits for the leader's answer: the leader's own bounds on
/// building the snapshot and on the new replica's catching up (weft-raft
/// `MEMBER_SNAPSHOT_MS_MAX`, `MEMBER_CATCH_UP_MS_MAX`) and a margin.
pub const REPLICA_ADD_WAIT_S: u64 = 200;
/// How long `weft replica remove` waits: two membership entries committed (weft-raft gives
/// up after four election timeouts, 6 s).
pub const REPLICA_REMOVE_WAIT_S: u64 = 15;
/// How many servers a membership change is sent to at most while looking for the leader
/// (each one that does not lead names the one that does).
pub const REPLICA_LEADER_HOPS_MAX: usize = 6;
/// `weft up --replicas` on a file system with data on its MDT: how long, after the files
/// moved to OSTs, the MDT's old data objects may take to be destroyed (the MDS destroys
/// them in the background, in batches, within seconds) before the conversion gives up.
pub const DATA_OFF_MDT_DESTROY_WAIT_S: u64 = 60;

/// `weft migrate -m`: entries asked for in one page while a directory's children are
/// listed.
pub const MIGRATE_MDT_PAGE_ENTRIES: u32 = 1024;

/// `weft migrate -m`: how often, and how many ms apart, an open file is tried again
/// before it is left (an open of a moment, as a backup's or a build's).
pub const MIGRATE_MDT_OPEN_RETRIES: u32 = 20;
pub const MIGRATE_MDT_OPEN_RETRY_MS: u64 = 100;
