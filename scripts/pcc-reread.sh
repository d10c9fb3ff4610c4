#!/usr/bin/env bash
# Called by scripts/bench-pcc.sh with a mounted cluster: MNT CACHEDIR.
set -euo pipefail
mnt=$1 cache=$2
W=${W:-target/release/weft}
size_mb=${SIZE_MB:-1024}
runs=${RUNS:-3}
mkdir -p "$mnt/pcc"
f="$mnt/pcc/big.dat"
"$W" setstripe -c 1 "$mnt/pcc"
dd if=/dev/urandom of="$f" bs=4M count=$((size_mb / 4)) status=none
sync
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
# GB/s of one sequential read of $1 in 4 MiB requests.
rate() {
  local t0 t1
  t0=$(date +%s.%N)
  dd if="$1" of=/dev/null bs=4M status=none
  t1=$(date +%s.%N)
  echo "$size_mb $t0 $t1" | awk '{ printf "%.3f", $1 / 1024 / ($3 - $2) }'
}
# The median of $runs reads of $1, caches dropped first when $2 is cold.
median() {
  local r=()
  for _ in $(seq "$runs"); do
    [ "$2" = cold ] && drop
    r+=("$(rate "$1")")
  done
  printf '%s\n' "${r[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p"
}
servers_cold=$(median "$f" cold)
servers_warm=$(median "$f" warm)
"$W" pcc add "$mnt" "$cache" --param "fname={*.none} roid=1 pccro=1"
"$W" pcc attach -r "$f"
"$W" pcc state "$f"
copy=$(find "$cache/ro" -type f | head -1)
pcc_cold=$(median "$f" cold)
pcc_warm=$(median "$f" warm)
direct_cold=$(median "$copy" cold)
direct_warm=$(median "$copy" warm)
"$W" pcc state "$f"
"$W" pcc del "$mnt" "$cache"
printf '%-44s %8s %8s\n' "1 GiB sequential read, GB/s (median of $runs)" cold warm
printf '%-44s %8s %8s\n' "through the mount, from the servers (TCP)" "$servers_cold" "$servers_warm"
printf '%-44s %8s %8s\n' "through the mount, read-only cache copy" "$pcc_cold" "$pcc_warm"
printf '%-44s %8s %8s\n' "the cache file read directly" "$direct_cold" "$direct_warm"
awk -v a="$pcc_cold" -v b="$direct_cold" -v c="$pcc_warm" -v d="$direct_warm" -v e="$servers_cold" -v g="$servers_warm" \
  'BEGIN { printf "cache/direct: cold %.2f warm %.2f; cache/servers: cold %.2f warm %.2f\n", a/b, c/d, a/e, c/g }'
