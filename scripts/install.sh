#!/usr/bin/env bash
# Installs Weft as a site does (`make install`, `make uninstall`):
#   $PREFIX/bin/weft                               the one binary
#   /sbin/mount.fuse.weft -> $PREFIX/bin/weft      the helper mount(8) runs for -t fuse.weft
#                                                  and fstab lines (mount(8) looks in /sbin)
#   $PREFIX/lib/systemd/system/weft-server@.service, weft-mount@.service
#   $PREFIX/share/weft/installed                   what was installed, for uninstall
#
# usage: scripts/install.sh install|uninstall
# Settings (environment or make variables):
#   PREFIX   (/usr/local)   where the binary and the units go
#   DESTDIR  (empty)        a staging root prepended to every path written (packaging);
#                           links and the units' paths name the final place, without it
#   SBINDIR  (/sbin)        where the mount helper goes
#   UNITDIR  ($PREFIX/lib/systemd/system; systemd reads /usr/local/lib/systemd/system too)
#   WEFT_BIN (empty)        a built `weft` to install; empty: build the release one here
#
# Uninstall removes exactly what the install listed in $PREFIX/share/weft/installed, the
# directories it created included when they are empty.
set -euo pipefail

action=${1:-install}
PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
BINDIR=${BINDIR:-$PREFIX/bin}
SBINDIR=${SBINDIR:-/sbin}
UNITDIR=${UNITDIR:-$PREFIX/lib/systemd/system}
MANIFEST_DIR=$PREFIX/share/weft
MANIFEST=$MANIFEST_DIR/installed
repo=$(cd "$(dirname "$0")/.." && pwd)
units=(weft-server@.service weft-mount@.service)

# Directories this install creates, then files, in order: uninstall undoes them backwards.
installed=()

# mkdir -p that notes each directory it creates (under DESTDIR).
make_dir() {
  local dir=$1 missing=() d
  d=$dir
  while [ "$d" != / ] && [ ! -d "$DESTDIR$d" ]; do
    missing=("$d" "${missing[@]}")
    d=$(dirname "$d")
  done
  # The staging root is the packager's, not the install's: made, never listed.
  if [ -n "$DESTDIR" ]; then
    mkdir -p "$DESTDIR"
  fi
  for d in "${missing[@]}"; do
    mkdir -m 0755 "$DESTDIR$d"
    installed+=("dir $d")
  done
}

do_install() {
  local bin=${WEFT_BIN:-}
  if [ -z "$bin" ]; then
    (cd "$repo" && cargo build --release -p weft-cli)
    bin=${CARGO_TARGET_DIR:-$repo/target}/release/weft
  fi
  if [ ! -x "$bin" ]; then
    echo "install.sh: no executable weft at $bin" >&2
    exit 1
  fi
  if [ -e "$DESTDIR$MANIFEST" ]; then
    echo "install.sh: Weft is installed already ($DESTDIR$MANIFEST); reinstalling over it"
    do_uninstall
  fi

  make_dir "$BINDIR"
  install -m 0755 "$bin" "$DESTDIR$BINDIR/weft"
  installed+=("file $BINDIR/weft")

  make_dir "$SBINDIR"
  ln -sfn "$BINDIR/weft" "$DESTDIR$SBINDIR/mount.fuse.weft"
  installed+=("file $SBINDIR/mount.fuse.weft")

  make_dir "$UNITDIR"
  for u in "${units[@]}"; do
    # The units in the repository name /usr/local/bin/weft: point them at this install's.
    sed "s#/usr/local/bin/weft#$BINDIR/weft#g" "$repo/dist/systemd/$u" >"$DESTDIR$UNITDIR/$u"
    chmod 0644 "$DESTDIR$UNITDIR/$u"
    installed+=("file $UNITDIR/$u")
  done

  make_dir "$MANIFEST_DIR"
  printf '%s\n' "${installed[@]}" >"$DESTDIR$MANIFEST"
  echo "installed Weft under ${DESTDIR:-}$PREFIX (mount helper ${DESTDIR:-}$SBINDIR/mount.fuse.weft, units in ${DESTDIR:-}$UNITDIR)"
  if [ -z "$DESTDIR" ] && [ -d /run/systemd/system ]; then
    echo "run 'systemctl daemon-reload' for systemd to see the units"
  fi
}

do_uninstall() {
  if [ ! -e "$DESTDIR$MANIFEST" ]; then
    echo "install.sh: nothing to uninstall: $DESTDIR$MANIFEST is missing (not installed with this PREFIX and DESTDIR?)" >&2
    exit 1
  fi
  local lines=() i kind path
  mapfile -t lines <"$DESTDIR$MANIFEST"
  rm -f "$DESTDIR$MANIFEST"
  for ((i = ${#lines[@]} - 1; i >= 0; i--)); do
    kind=${lines[i]%% *}
    path=${lines[i]#* }
    case $kind in
      file) rm -f "$DESTDIR$path" ;;
      # Only when empty: something else may have put files there since.
      dir) rmdir "$DESTDIR$path" 2>/dev/null || true ;;
    esac
  done
  echo "uninstalled Weft from ${DESTDIR:-}$PREFIX"
}

case $action in
  install) do_install ;;
  uninstall) do_uninstall ;;
  *)
    echo "usage: $0 install|uninstall" >&2
    exit 1
    ;;
esac
