//! Runs the server roles a config file names (MGS, MDS, OSS) in one process.
