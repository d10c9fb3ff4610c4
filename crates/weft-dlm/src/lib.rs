//! The distributed lock manager's server side.
//!
//! * [`state`]: the lock table as pure logic, no I/O, no clock: compatibility, grant and
//!   wait queues, conversions, extent growth. Exhaustively tested on its own.
//! * [`namespace`]: one target's locks in a running server: enqueue waits while the holders
//!   of conflicting locks are called back; a holder that does not answer in time is evicted.
//! * [`advisory`]: POSIX advisory locks (fcntl byte ranges and flock), per file.
//! * [`limits`]: how many locks a client may hold and how many requests may wait.

pub mod advisory;
pub mod limits;
pub mod namespace;
pub mod recovery;
pub mod state;
