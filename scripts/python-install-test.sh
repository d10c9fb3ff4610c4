#!/usr/bin/env bash
# `pip install ./python` as a user does it (maturin from PyPI through pip's build isolation)
# into a fresh venv of Debian's Python, then the Python test (crates/weft-cli/tests/python.rs)
# against the installed module instead of the test build's copy. Part of `make soak`.
# The extension is built with the dev profile in the workspace's target directory, so that
# it reuses what `cargo test` built; PROFILE=release builds it as a wheel for users would be.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(mktemp -d /tmp/weft-pyvenv.XXXXXX)
trap 'rm -rf "$venv"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$venv"
start=$(date +%s)
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}" MATURIN_PEP517_ARGS="--profile ${PROFILE:-dev}" \
  "$venv/bin/pip" install --quiet ./python
echo "pip install ./python took $(( $(date +%s) - start )) s"
(cd /tmp && "$venv/bin/python" -c 'import weft, weft._weft; print("installed weft", weft.VERSION, "at", weft.__file__)')
WEFT_TEST_PYTHON="$venv/bin/python" WEFT_TEST_INSTALLED=1 \
  cargo test -p weft-cli --test python -- --nocapture
