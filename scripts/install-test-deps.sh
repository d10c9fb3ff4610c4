#!/usr/bin/env bash
# Installs what the test suite runs against: FUSE (fusermount3), the real programs the
# tests drive on a mount, a headless browser, a Prometheus text parser and promtool, and
# libfaketime.
# Debian/Ubuntu packages; needs root (CI runs as root).
set -euo pipefail

need=()
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
command -v fio >/dev/null 2>&1 || need+=(fio)
command -v git >/dev/null 2>&1 || need+=(git)
command -v sqlite3 >/dev/null 2>&1 || need+=(sqlite3)
command -v rsync >/dev/null 2>&1 || need+=(rsync)
command -v tar >/dev/null 2>&1 || need+=(tar)
command -v python3 >/dev/null 2>&1 || need+=(python3)
# A C compiler: tests/libweft.rs builds a C program against libweft, tests/preload.rs a project.
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v curl >/dev/null 2>&1 || need+=(curl)
# The dashboard is tested in a real headless browser.
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# The metrics text is checked with Prometheus's own promtool.
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
# The clock-jump test runs replicas under libfaketime (the package brings the library).
command -v faketime >/dev/null 2>&1 || need+=(faketime)
# POSIX ACLs are set and shown with setfacl and getfacl, on the mount and a local directory.
command -v setfacl >/dev/null 2>&1 || need+=(acl)
# The thousand-OST test counts a mount's connections with ss.
command -v ss >/dev/null 2>&1 || need+=(iproute2)
# tests/python.rs runs the weft Python module's test in Debian's Python with numpy (and
# scripts/python-install-test.sh, in make soak, pip-installs it into a venv).
/usr/bin/python3 -c "import numpy" >/dev/null 2>&1 || need+=(python3-numpy)
/usr/bin/python3 -c "import venv, ensurepip" >/dev/null 2>&1 || need+=(python3-venv)
# tests/slurm.rs runs a real Slurm (slurmctld, slurmd, munge) set up by scripts/slurm-setup.sh.
command -v slurmctld >/dev/null 2>&1 || need+=(slurm-wlm)
command -v munged >/dev/null 2>&1 || need+=(munge)
# crates/weft-mpiio's test builds the MPI-IO layer with make and both MPIs' mpicc, and runs
# it under OpenMPI and MPICH; scripts/bench-mpiio.sh also writes HDF5 through it.
command -v make >/dev/null 2>&1 || need+=(make)
command -v mpicc.openmpi >/dev/null 2>&1 || need+=(libopenmpi-dev openmpi-bin)
command -v mpicc.mpich >/dev/null 2>&1 || need+=(libmpich-dev mpich)
command -v h5pcc >/dev/null 2>&1 || need+=(libhdf5-openmpi-dev)
command -v h5dump >/dev/null 2>&1 || need+=(hdf5-tools)

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing test dependencies: ${need[*]}; install them with: sudo apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  echo "installing test dependencies: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi

# The metrics test parses the endpoint's text with the Prometheus project's Python parser.
if ! python3 -c "import prometheus_client" >/dev/null 2>&1; then
  echo "installing the prometheus-client Python package"
  python3 -m pip install --quiet prometheus-client || apt-get install -y -qq python3-prometheus-client >/dev/null
fi

if [ ! -e /dev/fuse ]; then
  echo "/dev/fuse is missing: the tests mount FUSE file systems and need it" >&2
  exit 1
fi
# FUSE over io_uring (Linux 6.14+) is off unless switched on; switch it on so that mounts
# take their requests through it, as they do on a machine set up for speed. The tests run
# mounts of both kinds (uring=off keeps /dev/fuse).
uring=/sys/module/fuse/parameters/enable_uring
if [ -w "$uring" ] && [ "$(cat "$uring")" != "Y" ]; then
  echo 1 > "$uring" || echo "cannot switch on FUSE over io_uring; the mounts use /dev/fuse" >&2
fi
# Stale mounts from an interrupted earlier run break the next one: clear Weft's test mounts.
# (A mount's type is `fuse.weft`; plain `fuse` for a root mount of builds before that.)
stale=$(awk '$0 ~ / - fuse(\.weft)? / && $5 ~ /\/weft-test-/ {print $5}' /proc/self/mountinfo 2>/dev/null || true)
for m in $stale; do
  fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
done
exit 0
