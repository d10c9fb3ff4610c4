//! Every bound and default of a replicated group in one place, the unit last in each name
//! (before MIN, MAX or DEFAULT).

// ---- Timings (GroupConfig's defaults)

/// How often a leader tells its followers it is alive (and sends them what they lack).
pub const HEARTBEAT_MS_DEFAULT: u64 = 150;
/// A follower that heard nothing from a leader for a random time between these two starts
/// an election. Five heartbeats at least, so that a heartbeat or two lost on a busy network
/// does not depose a healthy leader; the spread keeps two followers from standing at once.
/// openraft's followers also refuse to vote for the longest election timeout after they
/// last heard a leader (its lease), so a dead leader is replaced after the lease and one
/// election timeout: 2.25 to 3 s with these (the aim: an answer again within 5 s).
pub const ELECTION_TIMEOUT_MS_MIN_DEFAULT: u64 = 750;
pub const ELECTION_TIMEOUT_MS_MAX_DEFAULT: u64 = 1_500;
/// A snapshot is built after this many entries since the last one.
pub const SNAPSHOT_AFTER_ENTRIES_DEFAULT: u64 = 50_000;
/// Entries kept in the log behind a snapshot (so that a follower a little behind catches up
/// from the log rather than by a whole snapshot): at most this many, and at most half of
/// `snapshot_after_entries`.
pub const LOG_KEPT_AFTER_SNAPSHOT_ENTRIES_MAX: u64 = 1_000;

/// A proposal or a read index fails after this many of the longest election timeouts
/// without a majority's answer (a minority never hangs its callers): long enough for an
/// election and a catching up of the new leader, short against a mount's request timeout.
pub const PROPOSE_TIMEOUT_ELECTIONS: u64 = 4;

// ---- Membership changes (members.rs)

/// How long a replica being added may take to catch up (a snapshot of the whole state, then
/// the log) before the add fails and the learner is taken out again: a snapshot chunk may
/// take `SNAPSHOT_CHUNK_TIMEOUT_MS`, and an MDT of some GiB is thousands of chunks, so
/// this is the size of what one add can move, not a guess at a slow network.
pub const MEMBER_CATCH_UP_MS_MAX: u64 = 120_000;
/// How long the leader may take to build the snapshot a new replica starts from, and to
/// purge its log behind it.
pub const MEMBER_SNAPSHOT_MS_MAX: u64 = 60_000;

// ---- Messages between replicas

/// How long one append (a heartbeat) or one vote request may take, resends included:
/// openraft backs off from a replica that does not answer and tries again, so this must be
/// short (a mount's 100 s request timeout would stall replication to a dead replica).
pub const MESSAGE_TIMEOUT_MS: u64 = 1_000;
/// How long one snapshot chunk may take to be sent and installed.
pub const SNAPSHOT_CHUNK_TIMEOUT_MS: u64 = 10_000;
/// The size of one snapshot chunk: well inside a frame's message
/// (`weft_proto::limits::MESSAGE_BYTES_MAX`), with room for the request around it.
pub const SNAPSHOT_CHUNK_BYTES: u64 = 1024 * 1024;
/// Entries in one append at most (openraft's `max_payload_entries`); an append whose
/// encoding is over [`APPEND_MESSAGE_BYTES_MAX`] is split further.
pub const APPEND_ENTRIES_MAX: u64 = 256;
/// The largest encoded append sent: past it openraft is told to send fewer entries.
pub const APPEND_MESSAGE_BYTES_MAX: usize = 3 * 1024 * 1024;

// ---- The log on disk

/// The largest entry a log record holds: a longer length in a record header is corruption,
/// not an allocation to attempt.
pub const LOG_RECORD_BYTES_MAX: u32 = 64 * 1024 * 1024;
/// After a purge, the log file is rewritten without the purged prefix once that prefix is
/// this large (and more than half the file): smaller prefixes stay until the next purge.
pub const LOG_REWRITE_PREFIX_BYTES_MIN: u64 = 64 * 1024 * 1024;
/// The largest snapshot kept (one record of `DIR/snapshot`, held in memory whole): a larger
/// machine needs streamed snapshots, not built yet.
pub const SNAPSHOT_RECORD_BYTES_MAX: u32 = u32::MAX;
