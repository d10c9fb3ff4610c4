//! Weft's request transport, behind which RDMA can come later.
//!
//! * [`callback`]: the client's end of server-to-client callbacks, [`CallbackHandler`];
//! * [`exports`]: the server's view of its clients, [`Exports`]: calling a client back
//!   (over the connection its requests came on, or in-process) and evicting it;
//! * [`limits`]: every bound of the transport (timeouts, backoffs, sizes);
//! * [`jobstats`]: job statistics per target (Lustre's job_stats), an account of the
//!   pipeline;
//! * [`frame`]: reading and writing one frame (header, message, bulk) with checksums;
//! * [`peer`]: the client side, [`Peer`]: one connection to one server with many requests
//!   in flight, reconnecting and resending the same request until a deadline;
//! * [`map`]: the cluster map as every process but the MGS's follows it, and one Peer per
//!   server address in it;
//! * [`local`]: the in-process transport: a Peer whose address a Server of the same process
//!   registered calls that server's pipeline directly (`weft up`); `WEFT_TRANSPORT=tcp`
//!   turns it off;
//! * [`server`]: the server's transport: connections, decoding, replies, the in-process
//!   way in;
//! * [`pipeline`]: the stages every request goes through between decode and reply:
//!   [`authorize`], [`schedule`] (the NRS: a policy per service, FIFO by default), execute
//!   (the [`Handler`]), [`account`] (per-opcode [`stats`] and any other account added).

pub mod account;
pub mod authorize;
pub mod callback;
pub mod exports;
pub mod frame;
pub mod jobstats;
pub mod limits;
pub mod local;
pub mod map;
pub mod peer;
pub mod pipeline;
pub mod schedule;
pub mod server;
pub mod stats;

pub use callback::CallbackHandler;
pub use exports::Exports;
pub use local::{register_client, ClientRegistration};
pub use peer::{Peer, PeerOptions};
pub use schedule::Run;
pub use server::{Handler, Origin, RequestContext, Server, ServerLimits};
pub use stats::{OpStats, Stats};
