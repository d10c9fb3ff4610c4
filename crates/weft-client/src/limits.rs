//! Every bound of the client library in one place, the unit last in each name.

/// How long a request waits for a silent target before the client asks the MGS whether the
/// target moved (and again after each such period).
pub const TARGET_SILENCE_MS_MAX: u64 = 3_000;
/// How long a request answered "moved" (the target is not served there now: a replica that
/// lost the lead of its group) waits for the map to say where before it is sent again.
pub const MOVED_RETRY_MS: u64 = 200;
/// Most object requests one call (read, write, punch, glimpse, sync, statfs) keeps in
/// flight; the rest wait their turn. Bounds memory and sockets for very wide files.
pub const OBJECT_REQUESTS_IN_FLIGHT_MAX: usize = 64;
/// Locks a client caches before it gives back the least recently used (Lustre's lru_size).
/// About 200 bytes each with the mount's name tracking, and as much again in the server's
/// namespace: 512 Ki locks are some 100 MiB on each side. With 128 Ki, an IO-500 run on
/// one node (100k files created) gave back the locks of the first files it made, and the
/// stat phase that followed went to the MDS for every one of them.
pub const LOCKS_CACHED_MAX: usize = 524_288;
/// Inodes and names the inode cache (inodes.rs) keeps, together; past it the oldest go.
/// An entry is some 300 bytes (attributes, layout, name): 512 Ki of them about 150 MiB,
/// matched to LOCKS_CACHED_MAX since an entry serves only under a lock.
pub const INODES_CACHED_MAX: usize = 524_288;
/// Names the inode cache keeps in listings of directories this client made (see
/// inodes.rs), together: some 40 bytes each. A listing that would pass it ends.
pub const LISTED_NAMES_MAX: usize = 1_048_576;
/// Inodes whose latest change the inode cache remembers to refuse answers older than it;
/// past it the history is dropped and answers to requests sent before are not cached.
pub const INODE_CHANGES_TRACKED_MAX: usize = 65_536;
/// After a connection to a server that holds this client's locks broke: first pause before
/// connecting again (so a server's callbacks can reach the client), doubled per failure up
/// to the max. No pinger: nothing is sent while connections are healthy.
pub const RECONNECT_PAUSE_MS_MIN: u64 = 50;
pub const RECONNECT_PAUSE_MS_MAX: u64 = 2_000;

/// MDT mutations one client has in flight at most, each in its own reply-cache slot (see
/// reply_slots.rs); more wait for a slot. Above what a mount's FUSE threads and its
/// background closes (CLOSES_IN_FLIGHT_MAX in weft-fuse) keep in flight together.
pub const MUTATIONS_IN_FLIGHT_MAX: usize = 1024;

// ---- Lock callbacks and cancels (locks/mod.rs)

/// Most lock handles in one Cancel request.
pub const CANCEL_BATCH_MAX: usize = 1024;
/// How long a callback waits for the kernel to drop the pages or names of a lock before it answers
/// anyway (see `revoke` in locks/mod.rs).
pub const DROP_BEFORE_ANSWER_MS: u64 = 200;
/// How long a callback for a lock this client does not know waits for replies in flight
/// (a blocking callback can overtake the reply that grants the lock it is about).
pub const UNKNOWN_LOCK_WAIT_MS: u64 = 1_000;
/// How long an open of a released file waits for its restore by default (the mount's
/// `restore_timeout`): a copytool copying from tape may take minutes.
pub const RESTORE_TIMEOUT_S_DEFAULT: u64 = 600;
/// The restore wait looks at the file's state first after this long, then twice as long
/// each time, up to RESTORE_POLL_MS_MAX.
pub const RESTORE_POLL_MS_MIN: u64 = 20;
pub const RESTORE_POLL_MS_MAX: u64 = 500;

/// A copytool with nothing to do (or every slot busy) asks the coordinator again after
/// this long; it is also its heartbeat (the MDS's HSM_AGENT_TIMEOUT_MS is far above).
pub const COPYTOOL_POLL_MS: u64 = 250;
/// A copytool reports each action's bytes at most this often.
pub const COPYTOOL_PROGRESS_MS: u64 = 1_000;
/// On SIGTERM a copytool lets its running copies end for at most this long.
pub const COPYTOOL_STOP_WAIT_S: u64 = 30;
/// A copytool retries the report of an action's end for this long.
pub const COPYTOOL_END_REPORT_S: u64 = 600;

/// Attempts of one migration whose copy the file's layout changed under (a writer gave a
/// component its objects) before it gives up with Busy.
pub const MIGRATE_ATTEMPTS_MAX: u32 = 5;
/// Pause before a migration starts over.
pub const MIGRATE_RETRY_MS: u64 = 100;
/// Bytes a migration reads and writes at a time.
pub const MIGRATE_CHUNK_BYTES: u64 = 4 << 20;
/// How long a read of a file with mirrors waits on one mirror while another in sync
/// remains, before it reads that one instead.
pub const MIRROR_TRY_MS: u64 = 3000;
/// How long a write (a lock, a punch, a sync) to a file whose mirrors are written
/// synchronously waits for a mirror once another mirror took it (or, for locks taken one
/// mirror after the other, while another remains): past it the mirror counts as failed,
/// goes stale, and the write is answered from the mirrors that took it. Short, since the
/// program waits this long once when an OST dies; long enough that a mirror behind a busy
/// OST or a lock callback is not dropped for it (a false alarm costs a resync, not data).
pub const SYNC_MIRROR_LAG_MS: u64 = 2000;
/// How long the resync of a synchronous mirror that went stale waits for each of its OSTs
/// to answer one request before it is tried: until they all do, the resync waits (it would
/// hold the file's writers back while its requests to a dead OST waited).
pub const SYNC_MIRROR_PROBE_MS: u64 = 1000;
/// How long targets of a mirror that failed a read go last in mirror reads.
pub const MIRROR_FAILING_MS: u64 = 30_000;
/// Times a truncate takes its locks again when the file's layout changed under it.
pub const LAYOUT_ROUNDS_MAX: u32 = 3;
/// How long a client waits for its lock replay to a target's new server before it forgets
/// those locks instead (the server takes replays only during its recovery window, 1 s).
pub const LOCK_REPLAY_MS_MAX: u64 = 2_000;
/// Rounds of an advisory lock replay: the first sends every lock this client holds, each
/// later one what changed at this client while the one before was on its way (a close that
/// released locks, a set answered by the old server just before it died); one more than
/// that is a storm of changes, and what the last round sent stands.
pub const ADVISORY_REPLAY_ROUNDS_MAX: u32 = 4;
/// Most bytes of written data a client keeps for replay (writes an OST answered but had
/// not committed yet, uncommitted.rs): past it a writer asks the OST holding the most to
/// commit now (Lustre's soft sync), so the kept bytes stay near this. About what an OST's
/// one-second commit interval lets a fast client write.
pub const UNCOMMITTED_BYTES_MAX: u64 = 1 << 30;
/// How often a client that keeps uncommitted writes asks their OSTs what they committed
/// (one message per such OST, only while it keeps some: an idle client with nothing kept
/// sends nothing). Twice the servers' commit interval.
pub const UNCOMMITTED_POLL_MS: u64 = 2_000;
/// Writes replayed to one OST at once after its server restarted.
pub const REPLAYS_IN_FLIGHT_MAX: usize = 16;

/// Times a write refused by an OST for quota asks the quota master for room there before
/// its EDQUOT goes to the program (a write larger than the room left is refused again).
pub const QUOTA_ACQUIRES_MAX: u32 = 2;

/// How long a file's writes go through after an OST said its owner is close to a quota
/// limit there (renewed by every such answer).
pub const QUOTA_TIGHT_HOLD_MS: u64 = 5_000;
/// Times a read or write fetches its open's layout again when the MDT lock that came with
/// it went while it took its extent locks (a migration, another client's change); after
/// that it goes on with the last one fetched.
pub const LAYOUT_REFETCHES_MAX: u32 = 3;

/// The metadata write-back cache (wbc/): a batch goes once it has this many ops...
pub const WBC_BATCH_OPS_DEFAULT: usize = 1024;
/// ... or once its oldest op is this old.
pub const WBC_BATCH_MS_DEFAULT: u64 = 50;
/// FIDs asked for at a time (one counter write on the MDT per grant).
pub const WBC_FIDS_PER_GRANT: u32 = 65_536;
/// Most names of a directory the cache keeps (the whole listing, about 100 bytes a name):
/// a directory that has more when it is granted, or grows past it, is given back.
pub const WBC_LISTING_MAX: usize = 1_000_000;
/// Unlinks of names in one directory done through the MDS before the write-back cache asks
/// for the directory (it then removes names there itself, many to a batch). A few, so that
/// one `rm` costs no listing and `rm -r` of a large directory pays one.
pub const WBC_UNLINKS_BEFORE_GRANT: u32 = 8;
/// Directories whose unlinks are counted at once (the counts are forgotten past it).
pub const WBC_UNLINK_DIRS_MAX: usize = 4096;
/// After a callback of a directory's write-back lock (another client works there), the
/// cache does not ask for it again for this long, doubled at each further callback...
pub const WBC_CALLBACK_BACKOFF: std::time::Duration = std::time::Duration::from_secs(1);
/// ... up to this.
pub const WBC_CALLBACK_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(60);
/// Statahead (statahead.rs) starts in a directory after this many lookups there went to
/// the MDS and found their name.
pub const STATAHEAD_TRIGGER_LOOKUPS: u32 = 8;
/// Statahead pauses in a directory whose lookups follow the listing and look at fewer
/// than one name in this many (a page of inodes costs the MDS about a hundred lookups).
pub const STATAHEAD_SPARSE_RATIO: usize = 16;
/// Directories statahead keeps count of (forgotten all at once past it).
pub const STATAHEAD_DIRS_MAX: usize = 4096;
/// Write-back locks remembered as called back during their grant (forgotten all at once
/// past it: each is looked at once, by its own grant).
pub const WBC_GRANTS_CALLED_BACK_MAX: usize = 1024;
/// Statahead rests this long in a directory whose last page brought little to cache.
pub const STATAHEAD_PAUSE: std::time::Duration = std::time::Duration::from_secs(30);
