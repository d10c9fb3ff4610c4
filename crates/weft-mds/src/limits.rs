//! Every bound of the MDS in one place, the unit last in each name.

/// Most mutations applied in one batch (one journal record).
pub const COMMIT_BATCH_OPS_MAX: usize = 128;
/// Most ops of write-back batches (`Batch`, each counted by its ops; any other mutation
/// counts one) in one commit batch, which is one entry of a replicated MDT's log and must
/// fit in one replication message. A single larger batch is committed alone.
pub const COMMIT_BATCH_WEIGHT_MAX: usize = 1024;
/// Batches an inline committer commits at most before it leaves the rest to the writer
/// thread (it has its own request to answer).
pub const INLINE_BATCHES_MAX: usize = 2;
/// Largest journal record replay accepts: a batch of [`COMMIT_BATCH_OPS_MAX`] mutations
/// stays far below.
pub const RECORD_BYTES_MAX: u32 = 256 << 20;
/// How often a change starts over because a name moved under it before giving up the race
/// and running with the locks it has (the writer then decides on what it finds).
pub const RELOOKUP_ROUNDS_MAX: usize = 8;
/// Replies older than this are pruned from the reply cache (clients resend well before).
pub const REPLY_CACHE_AGE_SECS_MAX: u64 = 10 * 60;
/// Most reply-cache entries removed by one pruning pass (bounded work per commit).
pub const REPLY_CACHE_PRUNE_ENTRIES_MAX: usize = 4096;
/// Time between reply-cache pruning passes.
pub const REPLY_CACHE_PRUNE_INTERVAL_MS: u64 = 30_000;
/// How long a create waits for a precreate refill when a chosen OST has no objects left.
pub const PRECREATE_WAIT_MS_MAX: u64 = 5_000;
/// Time between checks of the precreate pools when nothing wakes the refill task.
pub const PRECREATE_CHECK_INTERVAL_MS: u64 = 1_000;
/// Precreate and orphan-cleanup calls in flight at once: a file system of a thousand OSTs
/// fills its pools at start a few dozen OSTs at a time, so that what the MDS holds for them
/// (calls, replies, journal records) does not grow with the number of OSTs.
pub const REFILL_CALLS_IN_FLIGHT_MAX: usize = 32;
/// OSTs whose space the MDS asks per round, in turn, to place objects by free space
/// (`qos.rs`): the work is the same however many OSTs there are (50 a second at most);
/// with more OSTs than this, each one's figure is older (20 s at 1,000 OSTs).
pub const QOS_STATFS_PER_ROUND_MAX: usize = 250;
/// Time between two rounds of those statfs calls: Lustre's OSP keeps an OST's statfs 5 s
/// (`osp.*.maxage`).
pub const QOS_STATFS_INTERVAL_MS: u64 = 5_000;
/// First delay after a failed precreate or destroy; doubled per failure up to the max.
pub const RETRY_BACKOFF_MS_MIN: u64 = 100;
/// Longest delay between retries of a failing precreate or destroy.
pub const RETRY_BACKOFF_MS_MAX: u64 = 10_000;
/// Most destroy-queue entries handled per pass of the destroy task.
pub const DESTROY_BATCH_OBJECTS_MAX: usize = 256;
/// Most inodes that one pass of the startup orphan cleanup destroys per transaction.
pub const ORPHAN_CLEANUP_BATCH_INODES_MAX: usize = 1024;
/// Longest path Fid2Path builds, in components (guards against a corrupted parent cycle).
pub const FID2PATH_DEPTH_MAX: usize = 4096;
/// Most hard links of one inode (as ext4's EXT4_LINK_MAX).
pub const LINKS_PER_INODE_MAX: u32 = 65_000;

/// The names (plus 24 bytes each) a directory's migration to another MDT carries in one
/// step (`Update::Import`): below the largest message, with room for the rest of it;
/// about 100,000 entries of 8-byte names.
pub const MIGRATE_ENTRY_BYTES_MAX: usize = 3 << 20;

/// The children whose reverse links one step of a directory's migration moves.
pub const MIGRATE_LINKS_PER_STEP: usize = 8192;
/// Size a directory reports (as ext4's smallest directory).
pub const DIRECTORY_SIZE_BYTES: u64 = 4096;
/// Estimated metadata bytes per inode, to turn free space into a free-inode count for statfs.
pub const INODE_ESTIMATE_BYTES: u64 = 4096;
/// Time between durable checkpoints of the MDT journal: the most metadata a power loss can
/// take back (a process crash takes back nothing acknowledged).
pub const CHECKPOINT_INTERVAL_MS: u64 = 1_000;
/// Changelog records one read answers at most: weft-proto's `CHANGELOG_READ_RECORDS_MAX`,
/// which readers ask for too.
pub use weft_proto::limits::CHANGELOG_READ_RECORDS_MAX;
/// Changelog records one purge batch removes at most (cleared records go in the
/// background, a batch at a time, so a clear of millions does not make one huge commit).
pub const CHANGELOG_PURGE_BATCH_RECORDS: usize = 8192;
/// How often the background task looks for cleared changelog records to remove.
pub const CHANGELOG_PURGE_INTERVAL_MS: u64 = 1_000;
/// Registered changelog readers per MDT at most (Lustre allows a handful; each holds
/// records back).
pub const CHANGELOG_USERS_MAX: usize = 64;
/// Longest changelog reader name (`cl1-NAME`), as Lustre's `CHANGELOG_USER_NAMELEN`.
pub const CHANGELOG_USER_NAME_BYTES_MAX: usize = 16;
/// Records a reader may leave uncleared before the MDS warns in its log once per
/// [`CHANGELOG_IDLE_WARN_INTERVAL_S`]: a reader that stopped holds every record since.
pub const CHANGELOG_IDLE_RECORDS_WARN: u64 = 1_000_000;
pub const CHANGELOG_IDLE_WARN_INTERVAL_S: u64 = 600;
/// Files one HSM request names at most (a longer list is several requests).
pub const HSM_REQUEST_FILES_MAX: usize = 16_384;
/// Actions one copytool poll takes at most.
pub const HSM_TAKE_ACTIONS_MAX: u32 = 256;
/// Longest copytool (agent) name.
pub const HSM_AGENT_NAME_BYTES_MAX: usize = 128;
/// A copytool not heard from (a poll or a progress report) for this long is taken for dead:
/// the actions it had are handed out again. Copytools poll every second or so.
pub const HSM_AGENT_TIMEOUT_MS: u64 = 10_000;
/// How often the coordinator looks for dead copytools, timed-out and ended actions.
pub const HSM_SWEEP_INTERVAL_MS: u64 = 1_000;
/// Default of `mdt.*.hsm.grace_delay`: how long an ended action stays to be seen (`hsm
/// action`, `mdt.*.hsm.actions`), as Lustre's.
pub const HSM_ENDED_KEEP_S: u64 = 60;
/// Default of `mdt.*.hsm.active_request_timeout`: a running action without progress for
/// this long is handed out again (Lustre's default).
pub const HSM_ACTIVE_REQUEST_TIMEOUT_S: u64 = 3600;
/// Ended actions one sweep removes at most.
pub const HSM_PURGE_BATCH_ACTIONS: usize = 4096;
/// Running actions and archives one copytool poll names at most.
pub const HSM_TAKE_RUNNING_MAX: usize = 4096;
/// The largest `mdt.*.hsm.active_request_timeout` (a year).
pub const HSM_ACTIVE_REQUEST_TIMEOUT_S_MAX: u64 = 365 * 86_400;

/// Several MDTs (dne.rs): how often the participants of committed changes are told again
/// and prepared steps without an outcome are looked at.
pub const DNE_RETRY_MS: u64 = 2_000;
/// A prepared step waits this long for its outcome before its coordinator is asked.
pub const DNE_ASK_AFTER_S: u64 = 3;
/// Changes looked at per round of either.
pub const DNE_BATCH_MAX: usize = 64;
/// Most I/O zone rules of an MDT (`lod.*.zone_rule`): each create tries them in order.
pub const ZONE_RULES_MAX: usize = 64;
/// Longest zone rule name, as Lustre's TBF rule names (`MAX_TBF_NAME` 16 with its NUL).
pub const ZONE_RULE_NAME_BYTES_MAX: usize = 15;
