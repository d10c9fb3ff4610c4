#!/usr/bin/env bash
# What the lock manager costs one client streaming a file it alone uses: one `weft up`
# file system, and two more client processes mounted on it, one with locks on (the
# default) and one with `-o locks=off` (no extent locks, no page cache kept across opens,
# 1 s attribute caching). Each runs `weft bench stream` ROUNDS times, alternating, and the
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
  fusermount3 -uz "$dir/on" 2>/dev/null || true
  fusermount3 -uz "$dir/off" 2>/dev/null || true
  "$W" down --data "$dir/data" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/on" "$dir/off"
"$W" up --data "$dir/data" --mount "$dir/up" --detach >/dev/null
mgs=$("$W" status --data "$dir/data" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["mgs_address"])')
"$W" mount "$mgs" "$dir/on" -o "log=$dir/on.log"
"$W" mount "$mgs" "$dir/off" -o "locks=off,log=$dir/off.log"
mkdir "$dir/on/s" "$dir/off/s"
for r in $(seq 1 "$rounds"); do
  for mode in on off; do
    "$W" bench stream --dir "$dir/$mode/s" --size "$size" --json "$dir/$mode-$r.json" >/dev/null
    rm -f "$dir/$mode/s"/*
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
PY
