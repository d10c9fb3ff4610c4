//! Every bound of the lock manager in one place, the unit last in each name.
//!
//! A client past a bound is refused with a clear error and nothing changes: no lock is
//! taken, none is dropped, nobody is evicted. Lustre bounds a client's locks by the LRU of
//! its namespace (`lru_size`); here the server refuses instead, so that one client cannot
//! grow a server's memory without limit.

/// Locks (granted and waiting) one client may hold in one namespace (one target). A client
/// caches a lock per file it works on (one per stripe object on an OST); a million is far
/// beyond any working set a client cache keeps, and about 200 MB of server memory. Past
/// it the request is answered `NoLocks` (ENOLCK at the mount).
pub const LOCKS_PER_CLIENT_MAX: usize = 1024 * 1024;

/// POSIX advisory locks (fcntl byte ranges and flock) one client may hold over every file
/// of an MDT. An fcntl lock split in two counts twice. Past it F_SETLK answers ENOLCK, as
/// POSIX says for "the number of locked regions would exceed a system-imposed limit".
pub const ADVISORY_LOCKS_PER_CLIENT_MAX: usize = 256 * 1024;

/// Requests waiting for a lock on one resource. Each waits on callbacks to the holders, so
/// thousands in line already mean a long wait; one more is answered `Again` and the client
/// resends after a pause instead of adding to the line.
pub const WAITING_REQUESTS_PER_RESOURCE_MAX: usize = 4096;
/// While grants are held for a recovery window, how often a waiting enqueue looks whether
/// the window ended sooner (`Namespace::end_recovery_in`).
pub const RECOVERY_RECHECK_MS: u64 = 50;
/// At the end of a recovery window, a client that began coming back (replayed its opens or
/// advisory locks) but whose lock replay has not arrived gets this much more, once, before
/// it is evicted: it replays its locks last, each step within its own timeout.
pub const LATE_REPLAY_GRACE_MS: u64 = 10_000;
