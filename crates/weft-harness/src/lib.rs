//! Test harness: starts whole clusters as real processes, mounts them, and cleans up even when a test fails.
