#!/usr/bin/env bash
# What grows with the number of OSTs (issue 35 item 2): with 10 and with 1,000 OSTs (indices
# sparse up to 9,990, four OSS processes, the MGS and the MDS each in a process of its own,
# all on loopback addresses), the mount's and the MDS's resident memory after the same work
# (200 files of one and four stripes written, read and listed), and the bytes of an open's
# and a close's answer for a file of one and of four stripes. Prints a Markdown table
# (docs/BENCHMARKS.md, "A thousand OSTs"); fails if an answer grew with the OST count.
# A release build of the test (crates/weft-cli/tests/ost_scale.rs, `ost_count_bench`).
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo test --release -q -p weft-cli --test ost_scale -- --ignored --exact ost_count_bench --nocapture
