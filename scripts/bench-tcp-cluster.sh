#!/usr/bin/env bash
# The TCP path, measured: a Weft cluster whose servers run as separate processes on separate
# loopback addresses (MGS 127.0.0.2, MDS 127.0.0.3, two OSSs with 2 OSTs each on 127.0.0.4
# and 127.0.0.5), mounted by a separate `weft mount` process, then
#   weft bench io500 --dir MNT/io500 --baseline BASELINE "$@"
# Everything is stopped and removed on exit. BASELINE defaults to a fresh directory under
# /var/tmp (the same disk as the servers' data), BASELINE=none runs without one; WEFT to
# target/release/weft. NRS="tbf jobid" (or crrn, orr, fifo) first switches the OSS I/O and
# MDS services to that policy, a TBF with a rule that no request reaches and the default
# rule's rate out of reach: what the policy costs when it holds nothing back.
# BENCH=pcc runs scripts/pcc-reread.sh on the mount instead of IO-500 (scripts/bench-pcc.sh),
# BENCH=dom scripts/dom-smallfiles.sh (scripts/bench-dom.sh), BENCH=mpiio
# scripts/bench-mpiio.sh on the mount (its environment: MPI, IO, PARTS, REPS...).
# PRELOAD=1 runs IO-500 a second time in the same cluster, through the interception library
# (LD_PRELOAD=libweft_preload.so beside WEFT) on MNT/io500-preload, after the FUSE run;
# with WEFT_WBC=1 its creates go through the metadata write-back cache (README).
# PORT=N listens on N instead of 9850 (another cluster of this script on the machine).
# KEEP=1 keeps the cluster's directory (its logs) after the run.
# MDT_REPLICAS=3 makes the MDT a replicated group of three server processes (127.0.0.3,
# 127.0.0.6, 127.0.0.7): what replication costs.
# KEY=skpi (or skn) makes every server require a shared key of that flavor (`weft key new`),
# which the mount and the commands here give: what authentication and sealing cost.
# QUOTA=1 puts the io500 directory in project 500 with a 1 TiB block and 100M inode limit:
# what enforcing a quota costs.
# MDTS=2 (up to 4) adds MDT1.. each in an MDS process of its own (127.0.0.10, .11, .12) and
# makes every directory under io500 striped over all the MDTs (setdirstripe -D): how
# mdtest-hard's shared directory moves with the MDT count.
# NATIVE=1 runs the benchmark through the client library instead of the mount
# (`--api native --mgs MGS --dir /io500`); add --wbc for its metadata write-back cache.
set -euo pipefail
W=${WEFT:-target/release/weft}
W=$(realpath "$W")
dir=$(mktemp -d /var/tmp/weft-bench-XXXXXX)
baseline=${BASELINE:-$dir/baseline}
pids=()
cleanup() {
  fusermount3 -uz "$dir/mnt" 2>/dev/null || umount -l "$dir/mnt" 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then echo "kept $dir (servers' and the mount's logs)"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
mkdir -p "$dir/mnt"
[ "$baseline" = none ] || mkdir -p "$baseline"
port=${PORT:-9850}
mgs="127.0.0.2:$port"
keyline=""
if [ -n "${KEY:-}" ]; then
  "$W" key new --flavor "$KEY" "$dir/weft.key" > /dev/null
  keyline="key = \"$dir/weft.key\""
  export WEFT_KEY_FILE="$dir/weft.key"
fi
node() { # name ip roles-toml
  cat > "$dir/$1.toml" <<CONF
fsname = "weft"
data_dir = "$dir/$1"
listen = "$2:$port"
mgs_address = "$mgs"
$keyline
$3
CONF
  "$W" server --config "$dir/$1.toml" > "$dir/$1.out" 2>&1 &
  pids+=($!)
}
node mgs 127.0.0.2 "[mgs]"
sleep 0.3
node oss1 127.0.0.4 $'[oss]\nosts = [0, 1]'
node oss2 127.0.0.5 $'[oss]\nosts = [2, 3]'
sleep 0.3
replicas=${MDT_REPLICAS:-1}
mdts=${MDTS:-1}
if [ "$replicas" = 1 ]; then
  node mds 127.0.0.3 $'[mds]\nindex = 0'
  for ((i = 1; i < mdts; i++)); do
    node "mds$i" "127.0.0.$((9 + i))" "[mds]"$'\n'"index = $i"
  done
  sleep 1
else
  ips=(127.0.0.3 127.0.0.6 127.0.0.7 127.0.0.8 127.0.0.9)
  list=""
  for ((i = 0; i < replicas; i++)); do list+="\"${ips[$i]}:$port\", "; done
  for ((i = 0; i < replicas; i++)); do
    node "mds$i" "${ips[$i]}" "[mds]"$'\n'"index = 0"$'\n'"replicas = [${list%, }]"
  done
  # The MDT is in the map once the group's leader serves it.
  for _ in $(seq 100); do
    "$W" get-param --mgs "$mgs" 'mdt.*.replica_status' > /dev/null 2>&1 && break
    sleep 0.2
  done
fi
"$W" mount "$mgs" "$dir/mnt" -o "log=$dir/mount.log"
# Every MDT is in the map before the directories are made.
for _ in $(seq 100); do
  [ "$("$W" mdts "$dir/mnt" | grep -c ACTIVE)" -ge "$mdts" ] && break
  sleep 0.2
done
mkdir -p "$dir/mnt/io500"
if [ "$mdts" -gt 1 ]; then
  "$W" setdirstripe -D -c "$mdts" "$dir/mnt/io500"
fi
if [ -n "${QUOTA:-}" ]; then
  "$W" project -p 500 -s "$dir/mnt/io500"
  "$W" setquota -p 500 -B 1T -I 100M "$dir/mnt"
fi
if [ -n "${NRS:-}" ]; then
  for svc in ost.OSS.ost_io mds.MDS.mdt; do
    "$W" set-param --mgs "$mgs" "$svc.nrs_policies=$NRS"
    case "$NRS" in
      tbf*)
        "$W" set-param --mgs "$mgs" "$svc.nrs_tbf_rule=start never jobid={nobody.0} rate=100"
        "$W" set-param --mgs "$mgs" "$svc.nrs_tbf_rule=change default rate=999999"
        ;;
    esac
  done
fi
with_baseline=(--baseline "$baseline")
[ "$baseline" = none ] && with_baseline=()
if [ "${BENCH:-io500}" = pcc ]; then
  W="$W" "$(dirname "$0")/pcc-reread.sh" "$dir/mnt" "$dir/pcc" "$@"
  exit
fi
if [ "${BENCH:-io500}" = dom ]; then
  W="$W" "$(dirname "$0")/dom-smallfiles.sh" "$dir/mnt" "$@"
  exit
fi
if [ "${BENCH:-io500}" = mpiio ]; then
  MNT="$dir/mnt" TARGET="$(dirname "$W")" "$(dirname "$0")/bench-mpiio.sh" "$@"
  exit
fi
if [ -n "${NATIVE:-}" ]; then
  "$W" bench io500 --api native --mgs "$mgs" --dir /io500 "${with_baseline[@]}" "$@"
  exit
fi
"$W" bench io500 --dir "$dir/mnt/io500" "${with_baseline[@]}" "$@"
if [ -n "${PRELOAD:-}" ]; then
  echo "== through libweft_preload.so"
  mkdir -p "$dir/mnt/io500-preload"
  LD_PRELOAD="$(cd "$(dirname "$W")" && pwd)/libweft_preload.so" "$W" bench io500 --dir "$dir/mnt/io500-preload" "$@"
fi
