//! Every bound of the object storage service in one place, the unit last in each name.
//! Protocol-wide bounds (bulk size, file size) live in [`weft_proto::limits`].

/// Open object files kept per OST. Bounds file descriptors: a process serving many OSTs
/// holds at most `OPEN_FILES_MAX` descriptors for each, however many objects clients touch.
pub const OPEN_FILES_MAX: usize = 1024;
/// Open object files kept by all the OSTs of a process together (each OST has two caches:
/// page-cache and direct I/O): a process of 250 OSTs holds this many, not 250 times
/// 2,048. Past it, a new handle takes the place of one of its OST's, or is not kept.
pub const OPEN_FILES_PROCESS_MAX: usize = 16_384;
/// Object reads and writes of at least this many bytes, at offsets and of lengths that are
/// multiples of BULK_ALIGN_BYTES (weft-proto), bypass the page cache (O_DIRECT), as
/// Lustre's OSS writes bulk to disk: a copy into page-cache pages and their later writeback
/// and reclaim cost more CPU per byte than the rest of a large write's way over TCP
/// (measured: the OSS's page-cache copy alone was half of all CPU in a TCP stream). Smaller
/// or unaligned I/O (small files, IO-500's 47,008-byte records) goes through the page
/// cache, which gathers it for the disk.
pub const DIRECT_IO_BYTES_MIN: usize = 256 * 1024;
/// Shards of each OST's open-file cache, so that concurrent requests to different objects
/// rarely contend on one mutex.
pub const OPEN_FILES_SHARDS: usize = 16;
/// Most objects one Precreate request creates: bounds the time one request holds the
/// precreation lock and the blocking thread it runs on.
pub const PRECREATE_COUNT_MAX: u32 = 10_000;
/// Most objects an orphan cleanup destroys: an MDS precreates at most two batches ahead of
/// what it hands out, so a wider gap between its last id and LAST_ID means its records are
/// not this OST's (another MDT's, an old backup, an empty data directory), and the cleanup
/// is refused instead of destroying files (Lustre's OST_MAX_PRECREATE, the same 20,000).
pub const ORPHANS_DESTROY_MAX: u32 = 2 * PRECREATE_COUNT_MAX;
/// Hashed object directories per sequence (`d0` .. `d31`), as Lustre's OSTs have them, so
/// that no single directory grows to millions of entries.
pub const OBJECT_DIRS_COUNT: u32 = 32;
/// Largest `target` format file read at open; anything bigger is not ours.
pub const TARGET_FILE_BYTES_MAX: u64 = 64 * 1024;
/// Largest LAST_ID file read at open.
pub const LAST_ID_FILE_BYTES_MAX: u64 = 64;
/// Space a [`crate::store::MemStore`] offers unless told otherwise: what its statfs reports,
/// and where its writes start failing with NoSpace. Bytes live in memory, so this also
/// bounds what a runaway test can take.
pub const MEM_STORE_CAPACITY_DEFAULT_BYTES: u64 = 4 << 30;
/// Writes in a row that store nothing before an OST gives up on a request's write: a store
/// may write short, but one that never makes progress must fail the request, not spin.
pub const WRITE_STALLS_MAX: u32 = 3;
/// How long an OST whose server restarted takes replays of the writes it had not
/// committed (commit.rs): clients learn of the restart from the cluster map within a round
/// trip or two and replay at once, so this is a bound for slow clients; a replay after it
/// is refused and its write lost (the client says so in its log and its import counters).
/// New I/O is not held meanwhile: a replay writes only what no later write covered.
pub const REPLAY_WINDOW_MS: u64 = 30_000;
/// A commit of at least this many objects syncs the OST's whole file system at once
/// (syncfs) rather than each object (fdatasync, and a journal commit, each).
pub const SYNCFS_OBJECTS_MIN: usize = 32;
/// Most ranges a replay window remembers (about 40 bytes each): past it the window ends
/// early, so a busy OST's memory does not grow with the writes of the window.
pub const REPLAY_SPANS_MAX: usize = 1_000_000;
