//! The object storage service: several OSTs per process, each a directory of object files addressed by FID.
