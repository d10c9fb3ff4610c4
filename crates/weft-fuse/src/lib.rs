//! The FUSE adapter: a thin mapping from the kernel's requests to the client library.
