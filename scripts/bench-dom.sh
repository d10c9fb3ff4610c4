#!/usr/bin/env bash
# Data on the MDT against a plain layout, in one run (scripts/dom-smallfiles.sh): on the TCP
# cluster of scripts/bench-tcp-cluster.sh by default, or SHAPE=up on a fresh `weft up`.
# FILES (4000), PROCS (2), IO500=0 (skip the IO-500 pair), STONEWALL (15) change the work.
set -euo pipefail
here=$(dirname "$0")
if [ "${SHAPE:-tcp}" = tcp ]; then
  exec env BENCH=dom "$here/bench-tcp-cluster.sh"
fi
W=$(realpath "${WEFT:-target/release/weft}")
d=$(mktemp -d /var/tmp/weft-up-XXXXXX)
cleanup() {
  "$W" down --data "$d/data" > /dev/null 2>&1 || true
  fusermount3 -uz "$d/mnt" 2> /dev/null || true
  rm -rf "$d"
}
trap cleanup EXIT
"$W" up --data "$d/data" --mount "$d/mnt" --detach > /dev/null
W="$W" "$here/dom-smallfiles.sh" "$d/mnt"
