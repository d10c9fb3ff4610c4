//! Benchmarks behind `weft bench`:
//!
//! * `io500`: the IO-500 phases in IO-500's order, run by N worker processes
//!   ([`io500`] is the parent, [`worker`] the worker), on a Weft mount, any local directory
//!   (the baseline) or the client library without FUSE ([`native`]); every byte read is
//!   checked against what was written ([`pattern`]);
//! * `stream`: one writer then one reader ([`stream`]).
//!
//! Bandwidth phases also report the machine's busy CPU seconds per GB moved ([`cpu`]), which
//! counts the servers and the FUSE daemon when they run on the same machine.

pub mod cpu;
pub mod fsapi;
pub mod io500;
pub mod limits;
pub mod native;
pub mod pattern;
pub mod phase;
pub mod report;
pub mod size;
pub mod stream;
pub mod worker;
