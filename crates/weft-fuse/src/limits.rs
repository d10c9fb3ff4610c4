//! Every bound of the mount in one place, the unit last in each name.

// ---- The kernel connection

/// Largest write the kernel sends in one request, unless the mount options say otherwise.
pub const WRITE_BYTES_MAX: u32 = 1024 * 1024;
/// Readahead the kernel may do per file (FUSE's `max_readahead`).
pub const READAHEAD_BYTES_MAX: u32 = 1024 * 1024;
/// Read-ahead of the mount's backing device, in KiB. The kernel sizes FUSE reads by it (128
/// KiB by default), whatever `max_readahead` says: measured here, reads came in 128-256 KiB
/// pieces until it was raised. 4 MiB lets the kernel keep several 1 MiB reads in flight,
/// which the client spreads over the stripes.
pub const READ_AHEAD_KB: u32 = 4096;
/// Background requests (readahead, async reads) the kernel may keep queued.
pub const KERNEL_BACKGROUND_REQUESTS_MAX: u16 = 64;
/// FUSE worker threads, unless the mount options say otherwise; each serves one kernel
/// request at a time.
pub const THREADS_DEFAULT: usize = 2;
/// How long a mount waits for the kernel to show the mount before tuning it.
pub const MOUNT_APPEAR_WAIT_MS: u64 = 10_000;
/// How often a mount looks for the mount while it waits for it to appear.
pub const MOUNT_APPEAR_POLL_MS: u64 = 20;
/// How long unmount waits to close the handles still open.
pub const UNMOUNT_CLOSE_TIMEOUT_MS: u64 = 5_000;

// ---- Requests in the background

/// MDS closes sent in the background at once; a release waits for a slot beyond it.
pub const CLOSES_IN_FLIGHT_MAX: u32 = 256;
/// Kernel requests a server's scheduler holds that this mount finishes off its FUSE threads
/// at once; past it, a held request keeps its thread until it runs (see `serve.rs`).
pub const HELD_REQUESTS_MAX: usize = 1024;
/// F_SETLKW asks again after this pause, doubling up to the max.
pub const FLOCK_RETRY_MS_MIN: u64 = 5;
/// Longest pause between two tries of an F_SETLKW.
pub const FLOCK_RETRY_MS_MAX: u64 = 200;
/// Interrupts the kernel sent for requests not yet waiting (another FUSE thread may read
/// the interrupt before the request it names is registered) that are kept for them.
pub const EARLY_INTERRUPTS_MAX: usize = 64;

// ---- Caches

/// How long the kernel trusts attributes and directory entries, unless the mount options say
/// otherwise. Without the lock manager this is how stale another client's changes may look.
pub const ATTR_TTL_MS_DEFAULT: u64 = 1_000;
/// Bytes written to the kernel but not yet acknowledged by the OSTs, for the whole mount,
/// unless `max_dirty_mb` says otherwise.
pub const DIRTY_BYTES_MAX: u32 = 64 << 20;
/// The most `max_dirty_mb` takes: memory held back from the servers for one mount.
pub const DIRTY_MB_MAX: u64 = 16 * 1024;
/// Queued writes smaller than this (the kernel's largest) are gathered with the ones that
/// continue them into one request.
pub const WRITE_GATHER_BELOW_BYTES: u64 = WRITE_BYTES_MAX as u64;
/// Queued writes a request looks through, oldest first, for small ones of the same caller
/// that do not continue it (they go as further extents): bounds the look when many are of
/// other callers.
pub const WRITE_GATHER_SCAN_MAX: usize = 512;
/// Most bytes of one gathered request (the protocol's RPC_BULK_BYTES_MAX).
pub const WRITE_GATHER_BYTES_MAX: u64 = weft_proto::limits::RPC_BULK_BYTES_MAX as u64;
/// Writer processes remembered per file; past this every flush of the file waits.
pub const WRITER_PIDS_MAX: usize = 16;
/// How long the kernel may keep what a held lock guards. The lock's callback ends it
/// sooner; this only bounds how long a name stays cached if a callback were ever lost.
pub const LOCKED_TTL_S: u64 = 3600;
/// Invalidations queued for the kernel (the mount's invalidation thread). A callback that
/// finds the queue full waits for room in a task of its own, never dropped: a dropped
/// invalidation would leave the kernel showing what another client changed. The bound keeps
/// a burst of lock callbacks (an LRU flush, an eviction) from growing memory while the
/// kernel is slow, e.g. an invalidation waiting for pages a read holds locked.
pub const INVALIDATIONS_QUEUED_MAX: usize = 4096;
/// Names remembered per inode for invalidation; past this the inode's later names are
/// handed out uncached (TTL 0).
pub const ALIASES_PER_INODE_MAX: usize = 8;
/// Open serialization stripes: opens of different files rarely share one.
pub const OPEN_STRIPES: usize = 64;

// ---- Callers

/// How long what was read for one process (groups, jobid) is used. A process that calls
/// setgroups(2) without changing its uid or gid is seen with its old groups by the MDS's
/// checks for at most this long (the kernel's own checks, `default_permissions`, see the new
/// ones at once), and one that execs keeps its old jobid as long.
pub const CALLER_CACHE_TTL_MS: u64 = 1_000;
/// How long the jobid of a process that lacks the `jobid_var` environment variable is used
/// (it may be a fork about to exec the program that has it).
pub const JOBID_UNSET_TTL_MS: u64 = 50;
/// Processes remembered at once; the cache starts over when it is full.
pub const CALLER_CACHE_ENTRIES_MAX: usize = 4096;
/// Most supplementary groups taken from a process (as Linux's NGROUPS_MAX).
pub const GROUPS_MAX: usize = 65_536;
/// Longest jobid kept (Lustre's LUSTRE_JOBID_SIZE less its NUL).
pub const JOBID_BYTES_MAX: usize = 31;

// ---- The persistent client cache (pcc/)

/// How often a restore of a read-write file looks whether this mount's writers of it closed
/// (it reports progress meanwhile, so the coordinator keeps the action this copytool's).
pub const PCC_WRITERS_POLL_MS: u64 = 100;
/// Restores a read-write cache's copytool runs at once: each copies one file back to the
/// servers; two keep a restore from waiting behind a long one.
pub const PCC_RESTORES_MAX: u32 = 2;
/// Changelog records a prefetching cache reads in one request (and clears at once).
pub const PCC_PREFETCH_RECORDS_MAX: u32 = 1024;
/// A prefetching cache's pause when the changelog has no new record.
pub const PCC_PREFETCH_IDLE_MS: u64 = 500;

// ---- Refusals kept for the CLI

/// Threads whose last refused `weft.*` request the mount keeps the reason of (`weft.error`);
/// past it the oldest goes. A CLI reads the reason back at once, so few are ever waiting.
pub const REFUSAL_THREADS_MAX: usize = 1024;
/// How long a refusal's reason is kept for its thread to read back: a CLI asks within
/// milliseconds, and a reason kept longer could be taken for a later, unrelated failure.
pub const REFUSAL_KEPT_MS: u64 = 10_000;
/// Longest reason kept (a server's messages are a sentence; longer ones are cut).
pub const REFUSAL_MESSAGE_BYTES_MAX: usize = 4096;
