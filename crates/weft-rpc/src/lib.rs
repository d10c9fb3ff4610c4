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
//! * [`mgs`]: the management service's addresses ([`mgs::MgsPeers`]): one, or a replicated
//!   MGS's, the leader found and followed on `Moved` or a failure;
//! * [`map`]: the cluster map as every process but the MGS's follows it, and one Peer per
//!   server address in it;
//! * [`network`]: the servers and clients of a process, an object handed to each of them
//!   ([`Network`]): a Peer whose address a Server of the same network registered calls that
//!   server's pipeline directly (`weft up`), or through a [`wire::Wire`] a simulation drives;
//!   `WEFT_TRANSPORT=tcp` turns the direct calls off; [`clients`]: the clients it calls back;
//! * [`context`]: what every stage knows of a request ([`RequestContext`], [`Origin`], the
//!   connection's state) and the execute stage's [`Handler`], a leaf every module may name;
//! * [`held`]: whether a request polled on this thread is held back by a policy;
//! * [`server`]: the server's transport: connections, decoding, replies, the in-process
//!   way in;
//! * [`pipeline`]: the stages every request goes through between decode and reply:
//!   [`authorize`], [`schedule`] (the NRS: a policy per service, FIFO by default), execute
//!   (the [`Handler`]), [`account`] (per-opcode [`stats`] and any other account added).

pub mod account;
pub mod authorize;
pub mod budget;
pub mod callback;
pub mod clients;
pub mod context;
pub mod exports;
pub mod frame;
pub mod held;
pub mod jobstats;
pub mod limits;
pub mod map;
pub mod mgs;
pub mod network;
pub mod peer;
pub mod pipeline;
pub mod schedule;
pub mod secure;
pub mod server;
pub mod stats;
pub mod wire;

pub use callback::CallbackHandler;
pub use clients::ClientRegistration;
pub use context::{ConnectionState, Handler, Origin, RequestContext, LOCAL_PEER};
pub use exports::Exports;
pub use held::{note_held, take_held};
pub use network::Network;
pub use peer::{Peer, PeerOptions};
pub use schedule::Run;
pub use server::{Server, ServerLimits};
pub use stats::{OpStats, Stats};
pub use wire::{Endpoint, Wire};
