#!/usr/bin/env bash
# The Weft MPI-IO layer against the MPI library's own MPI-IO on the same FUSE mount, and
# POSIX file-per-process as the ceiling, on a fresh `weft up` with 4 OSTs (Debian's OpenMPI;
# MPI=mpich for MPICH). Patterns of crates/weft-mpiio/tests/mpiio_bench.c: the 2-D subarray
# collective write/read, the HPIO-like pattern (regions of 5,992 B, 256 B apart) collective,
# collective contiguous, the HPIO pattern with independent calls; then the layer's throttle
# 1/2/4/8 and with domains not aligned to stripes, on the two non-contiguous collective
# patterns.
#   RANKS (4), MIB (file size, 256), STRIPES (4), STRIPE (1048576), TARGET (target/release),
#   IO (OpenMPI's MPI-IO component for the library's own runs: ompio, or romio321)
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

d=$(mktemp -d /var/tmp/weft-mpiio-XXXXXX)
cleanup() {
  "$W" down --data "$d/data" > /dev/null 2>&1 || true
  fusermount3 -uz "$d/mnt" 2> /dev/null || umount -l "$d/mnt" 2> /dev/null || true
  rm -rf "$d"
}
trap cleanup EXIT
"$W" up --data "$d/data" --mount "$d/mnt" --osts 4 --detach > /dev/null
mkdir "$d/mnt/b"
"$W" setstripe -c "$STRIPES" -S "$STRIPE" "$d/mnt/b"

# run LAYER(0/1) PATTERN [ENV=VALUE...]: "write_MBps read_MBps"
run() {
  local layer=$1 pattern=$2
  shift 2
  local args=()
  if [ "$MPI" = mpich ]; then
    [ "$layer" = 1 ] && args+=(-genv LD_PRELOAD "$lib")
    for e in "$@"; do args+=(-genv "${e%%=*}" "${e#*=}"); done
    out=$(mpirun.mpich -n "$RANKS" "${args[@]}" "$prog" "$pattern" "$d/mnt/b" "$MIB" "$STRIPES" "$STRIPE")
  else
    [ "$layer" = 1 ] && args+=(-x "LD_PRELOAD=$lib")
    for e in "$@"; do args+=(-x "$e"); done
    out=$(mpirun.openmpi --oversubscribe --allow-run-as-root --mca mpi_yield_when_idle 1 --mca io "$IO" \
      -n "$RANKS" "${args[@]}" \
      "$prog" "$pattern" "$d/mnt/b" "$MIB" "$STRIPES" "$STRIPE")
  fi
  rm -f "$d/mnt/b/bench-$pattern"*
  echo "$out" | awk '{print $3, $6}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

label=$MPI
[ "$MPI" = openmpi ] && label="openmpi, io=$IO"
echo "MPI-IO on Weft: $RANKS ranks ($label), a file of ~$MIB MiB, $STRIPES stripes of $STRIPE; MB/s"
read -r fw fr < <(run 0 fpp)
echo "POSIX file-per-process: write $fw read $fr"
printf '%-10s %12s %12s %12s %12s %10s %10s %10s %10s\n' pattern mpi-write weft-write mpi-read weft-read \
  w:weft/mpi r:weft/mpi w:weft/fpp r:weft/fpp
for p in subarray hpio contig indep; do
  read -r mw mr < <(run 0 "$p")
  read -r ww wr < <(run 1 "$p")
  printf '%-10s %12s %12s %12s %12s %10s %10s %10s %10s\n' "$p" "$mw" "$ww" "$mr" "$wr" "$(ratio "$ww" "$mw")" \
    "$(ratio "$wr" "$mr")" "$(ratio "$ww" "$fw")" "$(ratio "$wr" "$fr")"
done
echo "the layer with domains of even byte ranges, not whole stripes (weft_align=disable): write/read MB/s"
for p in subarray hpio; do
  read -r aw ar < <(run 1 "$p" "WEFT_MPIIO_ALIGN=0")
  read -r ww wr < <(run 1 "$p")
  echo "$p  unaligned: $aw/$ar  aligned: $ww/$wr"
done
echo "the layer's throttle (requests in flight per OST at an aggregator): write/read MB/s"
for p in subarray hpio; do
  line="$p"
  for t in 1 2 4 8; do
    read -r ww wr < <(run 1 "$p" "WEFT_MPIIO_THROTTLE=$t")
    line="$line  t$t: $ww/$wr"
  done
  echo "$line"
done
