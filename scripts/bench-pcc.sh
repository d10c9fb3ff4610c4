#!/usr/bin/env bash
# The persistent client cache's read-only copies against the servers over TCP: a 1 GiB
# file re-read through the mount from the servers (scripts/bench-tcp-cluster.sh's cluster),
# then attached read-only and re-read through the mount from the cache, then the cache file
# read directly; page caches dropped before each read, and each read warm too. Prints
# GB/s and the ratios. SIZE_MB (default 1024) and RUNS (default 3) change the file and the
# repetitions.
exec env BENCH=pcc "$(dirname "$0")/bench-tcp-cluster.sh" "$@"
