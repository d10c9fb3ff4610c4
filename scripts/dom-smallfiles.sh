#!/usr/bin/env bash
# Called by scripts/bench-dom.sh with a mounted file system: MNT. Under a plain default
# (one stripe) and under data on the MDT (-E 64K -L mdt -E -1 -c 1), alternated plain, dom,
# dom, plain: the small-file loop (scripts/dom-smallfiles.py), then, unless IO500=0, one
# `weft bench io500` each (mdtest-hard's 3,901-byte creates and reads among its phases).
set -euo pipefail
mnt=$1
W=${W:-target/release/weft}
files=${FILES:-4000}
procs=${PROCS:-2}
here=$(dirname "$0")
layout() { # dir plain|dom
  mkdir -p "$1"
  case $2 in
    plain) "$W" setstripe -c 1 "$1" ;;
    dom) "$W" setstripe -E 64K -L mdt -E -1 -c 1 "$1" ;;
  esac
}
out=$(mktemp -d /var/tmp/weft-dom-XXXXXX)
trap 'rm -rf "$out"' EXIT
round=0
for which in plain dom dom plain; do
  round=$((round + 1))
  d="$mnt/loop-$round-$which"
  layout "$d" "$which"
  python3 "$here/dom-smallfiles.py" "$d" "$files" "$procs" 3901 > "$out/loop-$round-$which.json"
  echo "loop $round $which: $(cat "$out/loop-$round-$which.json")"
done
if [ "${IO500:-1}" != 0 ]; then
  for which in plain dom; do
    d="$mnt/io500-$which"
    layout "$d" "$which"
    "$W" bench io500 --dir "$d" --procs "$procs" --stonewall "${STONEWALL:-15}" --ior-max 2G \
      --json "$out/io500-$which.json" > "$out/io500-$which.txt" 2>&1
    echo "io500 $which: done"
  done
fi
python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
loops = {"plain": [], "dom": []}
for f in sorted(glob.glob(f"{out}/loop-*.json")):
    loops[f.split("-")[-1][:-5]].append(json.load(open(f)))
print("\n| small files (3,901 B) | plain | data on MDT | DoM / plain |\n|---|---:|---:|---:|")
for key, name in [("creates_per_s", "create+write+close /s"), ("reads_per_s", "open+read+close /s (cold)")]:
    p = statistics.mean(x[key] for x in loops["plain"])
    d = statistics.mean(x[key] for x in loops["dom"])
    print(f"| {name} | {p:.0f} | {d:.0f} | {d / p:.2f} |")
io = {w: f"{out}/io500-{w}.json" for w in ("plain", "dom")}
if all(os.path.exists(f) for f in io.values()):
    figs = {w: json.load(open(f)) for w, f in io.items()}
    def phases(j):
        return {p["name"]: p for p in j["weft"]["phases"]}
    pp, dp = phases(figs["plain"]), phases(figs["dom"])
    print("\n| io500 phase | plain | data on MDT | DoM / plain |\n|---|---:|---:|---:|")
    for name in pp:
        if name in dp and pp[name].get("value"):
            a, b = pp[name]["value"], dp[name]["value"]
            print(f"| {name} ({pp[name].get('unit', '')}) | {a:.2f} | {b:.2f} | {b / a:.2f} |")
    a, b = figs["plain"]["weft"]["score"]["score"], figs["dom"]["weft"]["score"]["score"]
    print(f"| score | {a:.2f} | {b:.2f} | {b / a:.2f} |")
PY
