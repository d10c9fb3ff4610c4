#!/usr/bin/env bash
# What the lock manager costs one client streaming a file it alone uses: one `weft up`
# file system, and two more client processes mounted on it, one with locks on (the
# default) and one with `-o locks=off` (no extent locks, no page cache kept across opens,
# 1 s attribute caching). Each runs one warm-up stream, then `weft bench stream` ROUNDS
# times, the two mounts taking turns to go first, and the
# script prints every figure and the mean ratio locks-on / locks-off.
#   scripts/bench-locking.sh [SIZE] [ROUNDS]      (defaults: 2G, 3)
# Everything is stopped and removed on exit. WEFT defaults to target/release/weft.
set -euo pipefail
W=${WEFT:-target/release/weft}
W=$(realpath "$W")
size=${1:-2G}
rounds=${2:-3}
dir=$(mktemp -d /var/tmp/weft-locking-XXXXXX)
cleanup() {
  fusermount3 -uz "$dir/on" 2>/dev/null || umount -l "$dir/on" 2>/dev/null || true
  fusermount3 -uz "$dir/off" 2>/dev/null || umount -l "$dir/off" 2>/dev/null || true
  "$W" down --data "$dir/data" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/on" "$dir/off"
"$W" up --data "$dir/data" --mount "$dir/up" --detach >/dev/null
mgs=$("$W" status --data "$dir/data" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["mgs_address"])')
"$W" mount "$mgs" "$dir/on" -o "log=$dir/on.log"
"$W" mount "$mgs" "$dir/off" -o "locks=off,log=$dir/off.log"
mkdir "$dir/on/s-on" "$dir/off/s-off"
stream() { # mode json
  "$W" bench stream --dir "$dir/$1/s-$1" --size "$size" --json "$2" >/dev/null
  rm -f "$dir/$1/s-$1"/*
}
# One unrecorded warm-up stream on each mount, then rounds in alternating order so that
# neither mount always runs first.
stream on "$dir/warm-on.json"
stream off "$dir/warm-off.json"
for r in $(seq 1 "$rounds"); do
  if (( r % 2 )); then order="on off"; else order="off on"; fi
  for mode in $order; do
    stream "$mode" "$dir/$mode-$r.json"
  done
done
python3 - "$dir" "$rounds" <<'PY'
import json, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def load(mode):
    return [json.load(open(f"{d}/{mode}-{r}.json")) for r in range(1, rounds + 1)]
on, off = load("on"), load("off")
for phase in ("write", "read"):
    a = [x[phase]["mb_s"] for x in on]
    b = [x[phase]["mb_s"] for x in off]
    print(f"{phase:5}  locks on  MB/s: " + " ".join(f"{v:7.0f}" for v in a))
    print(f"{phase:5}  locks off MB/s: " + " ".join(f"{v:7.0f}" for v in b))
    print(f"{phase:5}  ratio on/off (mean): {sum(a)/len(a) / (sum(b)/len(b)):.3f}")
    ca = [x[phase]["cpu_s_per_gb"] for x in on if x[phase].get("cpu_s_per_gb") is not None]
    cb = [x[phase]["cpu_s_per_gb"] for x in off if x[phase].get("cpu_s_per_gb") is not None]
    if ca and cb:
        print(f"{phase:5}  cpu s/GB (mean) locks on {sum(ca)/len(ca):.3f}, locks off {sum(cb)/len(cb):.3f}")
PY
