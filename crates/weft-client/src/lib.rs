//! The client library: cluster map, metadata and object clients, striped parallel I/O.
