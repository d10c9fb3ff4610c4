#!/usr/bin/env bash
# The Weft MPI-IO layer against the MPI library's own MPI-IO on the same FUSE mount, and
# POSIX file-per-process as the ceiling, on a fresh `weft up` with 4 OSTs (Debian's OpenMPI;
# MPI=mpich for MPICH). Patterns of crates/weft-mpiio/tests/mpiio_bench.c: the 2-D subarray
# collective write/read, the HPIO-like pattern (regions of 5,992 B, 256 B apart) collective,
# collective contiguous, independent contiguous, the HPIO pattern with independent calls
# (the seed talk's four access levels and HPIO's); then each part of the
# layer switched off alone (aggregator placement, stripe alignment, stepwise exchange,
# throttle 1/2/4/8), on the two non-contiguous collective patterns.
#   RANKS (4), MIB (file size, 256), STRIPES (4), STRIPE (1048576), TARGET (target/release),
#   IO (OpenMPI's MPI-IO component for the library's own runs: ompio, or romio321),
#   REPS (rounds of the each-part-alone runs, 2), PARTS=0 (only the main table),
#   MOUNTS=1 (with MNT: a mount per rank, so that the library's ranks are separate clients
#   as on separate nodes; ROMIO_HINTS, a file of ROMIO hints such as "cb_config_list *:*",
#   is passed to the ranks, so that ROMIO too makes every rank an aggregator as it would
#   with one rank per node),
#   MNT (a Weft mount of a running cluster to use instead of a fresh `weft up`: what
#   scripts/bench-tcp-cluster.sh does with BENCH=mpiio),
#   DROP (1, the default: drop the page cache between each run's write and read, as root,
#   so that reads through the mount come from the servers as the layer's always do; 0: the
#   mount's reads may come from the cache its own write left)
# Needs `make release` first (the weft binary, libweft.so and the layer).
set -euo pipefail
cd "$(dirname "$0")/.."
RANKS=${RANKS:-4}
MIB=${MIB:-256}
STRIPES=${STRIPES:-4}
STRIPE=${STRIPE:-1048576}
TARGET=$(realpath "${TARGET:-target/release}")
MPI=${MPI:-openmpi}
IO=${IO:-ompio}
W="$TARGET/weft"
lib=$TARGET/libweft_mpiio.so
[ "$MPI" = mpich ] && lib=$TARGET/libweft_mpiio_mpich.so
make -s -C crates/weft-mpiio LIBWEFT_DIR="$TARGET" all tests > /dev/null
prog=$TARGET/mpiio_bench_$MPI
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
DROP=${DROP:-1}
[ "$DROP" = 1 ] && export WEFT_BENCH_DROP_CACHES=1

d=$(mktemp -d /var/tmp/weft-mpiio-XXXXXX)
if [ -n "${MNT:-}" ]; then
  # A mount of a running cluster (scripts/bench-tcp-cluster.sh with BENCH=mpiio): the
  # servers in their own processes over TCP, no passthrough, as the layer's libweft is.
  b=$(realpath "$MNT")/mpiio-b
  cleanup() {
    rm -rf "$b"
    for m in "$d"/m*; do
      [ -d "$m" ] && { fusermount3 -uz "$m" 2> /dev/null || umount -l "$m" 2> /dev/null || true; }
    done
    rm -rf "$d"
  }
else
  b=$d/mnt/b
  cleanup() {
    "$W" down --data "$d/data" > /dev/null 2>&1 || true
    fusermount3 -uz "$d/mnt" 2> /dev/null || umount -l "$d/mnt" 2> /dev/null || true
    rm -rf "$d"
  }
fi
trap cleanup EXIT
if [ -z "${MNT:-}" ]; then
  "$W" up --data "$d/data" --mount "$d/mnt" --osts 4 --detach > /dev/null
fi
mkdir "$b"
"$W" setstripe -c "$STRIPES" -S "$STRIPE" "$b"
# MOUNTS=1 (with MNT): each rank goes through a mount of its own, as ranks on separate nodes
# are separate clients whose locks on the file conflict; the layer's ranks are separate
# clients (libweft) either way.
rb=$b
if [ -n "${MOUNTS:-}" ] && [ -n "${MNT:-}" ]; then
  mgs=$(awk -v m="$(realpath "$MNT")" '$2 == m { sub(/:\/[^:]*$/, "", $1); print $1 }' /proc/mounts)
  for r in $(seq 0 $((RANKS - 1))); do
    mkdir "$d/m$r"
    "$W" mount "$mgs" "$d/m$r" -o "log=$d/m$r.log"
  done
  rb="$d/m%d/mpiio-b"
fi

# run LAYER(0/1) PATTERN [ENV=VALUE...]: "write_MBps read_MBps"
run() {
  local layer=$1 pattern=$2
  shift 2
  local args=()
  if [ "$MPI" = mpich ]; then
    [ "$layer" = 1 ] && args+=(-genv LD_PRELOAD "$lib")
    [ -n "${WEFT_BENCH_DROP_CACHES:-}" ] && args+=(-genv WEFT_BENCH_DROP_CACHES 1)
    [ -n "${ROMIO_HINTS:-}" ] && args+=(-genv ROMIO_HINTS "$ROMIO_HINTS")
    for e in "$@"; do args+=(-genv "${e%%=*}" "${e#*=}"); done
    out=$(mpirun.mpich -n "$RANKS" "${args[@]}" "$prog" "$pattern" "$rb" "$MIB" "$STRIPES" "$STRIPE")
  else
    [ "$layer" = 1 ] && args+=(-x "LD_PRELOAD=$lib")
    [ -n "${WEFT_BENCH_DROP_CACHES:-}" ] && args+=(-x WEFT_BENCH_DROP_CACHES=1)
    [ -n "${ROMIO_HINTS:-}" ] && args+=(-x "ROMIO_HINTS=$ROMIO_HINTS")
    for e in "$@"; do args+=(-x "$e"); done
    out=$(mpirun.openmpi --oversubscribe --allow-run-as-root --mca mpi_yield_when_idle 1 --mca io "$IO" \
      -n "$RANKS" "${args[@]}" \
      "$prog" "$pattern" "$rb" "$MIB" "$STRIPES" "$STRIPE")
  fi
  rm -f "$b/bench-$pattern"*
  echo "$out" | awk '{print $3, $6}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

label=$MPI
[ "$MPI" = openmpi ] && label="openmpi, io=$IO"
echo "MPI-IO on Weft: $RANKS ranks ($label), a file of ~$MIB MiB, $STRIPES stripes of $STRIPE; MB/s$([ "$DROP" = 1 ] && echo "; page cache dropped before each read")"
read -r fw fr < <(run 0 fpp)
echo "POSIX file-per-process: write $fw read $fr"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-10s %12s %12s %12s %12s %10s %10s %10s %10s\n' pattern mpi-write weft-write mpi-read weft-read \
  w:weft/mpi r:weft/mpi w:weft/fpp r:weft/fpp
for p in subarray hpio contig icontig indep; do
  read -r mw mr < <(run 0 "$p")
  read -r ww wr < <(run 1 "$p")
  printf '%-10s %12s %12s %12s %12s %10s %10s %10s %10s\n' "$p" "$mw" "$ww" "$mr" "$wr" "$(ratio "$ww" "$mw")" \
    "$(ratio "$wr" "$mr")" "$(ratio "$ww" "$fw")" "$(ratio "$wr" "$fr")"
done
# Each part of the layer alone, against the whole layer (K computer placement, stripe-aligned
# domains, stepwise exchange, throttle 8), on the two non-contiguous collective patterns;
# REPS rounds (2), the configurations alternated within a round, the load with each line:
#   placement   weft_placement=rank: ROMIO's generic one (first ranks, contiguous domains of
#               whole stripes: every aggregator to every OST) against one aggregator per OST
#   alignment   weft_placement=rank with weft_align=disable (even byte ranges) against it
#               with whole stripes (the domains' edges alone)
#   exchange    weft_exchange=alltoallv (one MPI_Alltoallv per window) against stepwise
#   throttle    weft_throttle=1/2/4/8
# and two that are not parts of the design: weft_wait=spin (MPI_Waitall, where the layer
# polls with sleeps on an oversubscribed node) and weft_io=mount (the aggregators' I/O by
# pwrite/pread on the mount instead of libweft).
REPS=${REPS:-2}
[ "${PARTS:-1}" = 0 ] && exit 0
load() { cut -d' ' -f1 /proc/loadavg; }
echo "each part alone (the layer; write/read MB/s; load = 1-min load average before the run)"
confs=("full:" "placement=rank:WEFT_MPIIO_PLACEMENT=rank" "rank+unaligned:WEFT_MPIIO_PLACEMENT=rank WEFT_MPIIO_ALIGN=0"
  "exchange=alltoallv:WEFT_MPIIO_EXCHANGE=alltoallv" "throttle=1:WEFT_MPIIO_THROTTLE=1" "throttle=2:WEFT_MPIIO_THROTTLE=2"
  "throttle=4:WEFT_MPIIO_THROTTLE=4" "wait=spin:WEFT_MPIIO_WAIT=spin" "io=mount:WEFT_MPIIO_IO=mount")
# Each round starts one configuration further (no configuration always first after a
# pattern change, or always after the same one).
for rep in $(seq "$REPS"); do
  for p in subarray hpio; do
    line="round $rep $p"
    n=${#confs[@]}
    for k in $(seq 0 $((n - 1))); do
      c=${confs[$(((k + rep - 1) % n))]}
      l=$(load)
      # shellcheck disable=SC2086 # the settings are words
      read -r ww wr < <(run 1 "$p" ${c#*:})
      line="$line | ${c%%:*} $ww/$wr (load $l)"
    done
    echo "$line"
  done
done
