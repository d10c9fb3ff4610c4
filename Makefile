# The two commands a newcomer needs:
#   make up    build Weft (release) and start a whole file system here, mounted at ./weft-mnt
#   make test  install what the tests need, then format check, lints and the whole test suite
CARGO ?= cargo

.PHONY: all build release up down test soak deps lint check-format unit bench-micro clean

all: build

build:
	$(CARGO) build --workspace

# The weft binary, libweft.so with include/weft.h and target/release/weft.pc (pkg-config:
# PKG_CONFIG_PATH=target/release), libweft_preload.so, and the MPI-IO layer
# libweft_mpiio.so (OpenMPI) and libweft_mpiio_mpich.so (MPICH), for the MPIs installed.
WEFT_VERSION = $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
release:
	$(CARGO) build --release -p weft-cli -p weft-lib -p weft-preload
	sed -e 's|@PREFIX@|$(CURDIR)|' -e 's|@LIBDIR@|$(CURDIR)/target/release|' \
	    -e 's|@INCLUDEDIR@|$(CURDIR)/include|' -e 's|@VERSION@|$(WEFT_VERSION)|' \
	    crates/weft-lib/weft.pc.in > target/release/weft.pc
	$(MAKE) -C crates/weft-mpiio LIBWEFT_DIR=$(CURDIR)/target/release

up: release
	./target/release/weft up

down:
	./target/release/weft down

deps:
	./scripts/install-test-deps.sh

check-format:
	$(CARGO) fmt --all -- --check

# Clippy, then no import cycle between a crate's files and no file over 700 lines before
# its tests (scripts/module-cycles.py says what counts).
lint:
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	python3 scripts/module-cycles.py

test: deps check-format lint
	$(CARGO) test --workspace

# The long forms of the tests that keep a short form in `make test`: ten kills of the MDT
# leader under real programs (two in make test), ten rounds of clock jumps on the replicas
# (one), the seeded simulations over a thousand seeds (a hundred in make test), the two
# MDTs' simulation with kills of either MDS over five hundred (thirty in make test), and the
# replicated MDT's simulation, on a real clock at some 12 s a seed, over a hundred (three in
# make test); ten thousand HSM archives through a copytool's and the MDS's deaths (two
# thousand); and `pip install ./python` into a venv, with the Python test against it.
soak: deps
	WEFT_FAILOVER_KILLS=10 $(CARGO) test -p weft-cli --test failover -- --nocapture
	WEFT_FAILOVER_KILLS=10 $(CARGO) test -p weft-cli --test ost_failover -- --nocapture
	WEFT_CLOCK_JUMP_ROUNDS=10 $(CARGO) test -p weft-cli --test clock_jump -- --nocapture
	WEFT_SIM_SEEDS=1..1001 $(CARGO) test -p weft-sim --lib --test faults --test network -- --nocapture
	WEFT_SIM_SEEDS=1..101 $(CARGO) test -p weft-sim --test replicated -- --nocapture
	WEFT_SIM_SEEDS=0..500 $(CARGO) test -p weft-sim --test dne -- --nocapture
	WEFT_IDLE_FULL=1 $(CARGO) test -p weft-server --test idle_traffic -- --nocapture
	WEFT_DNE_KILLS=20 $(CARGO) test -p weft-cli --test dne changes_over_two_mdts -- --nocapture
	WEFT_BIGDIR_ENTRIES=100000 $(CARGO) test -p weft-cli --test bigdir -- --nocapture
	WEFT_HSM_ARCHIVES=10000 $(CARGO) test -p weft-cli --test hsm thousands_of_archives -- --nocapture
	./scripts/python-install-test.sh
	$(CARGO) build -p weft-cli
	WEFT_MPIIO_MATRIX=full $(CARGO) test -p weft-mpiio --test mpiio -- --nocapture

# Micro-benchmarks of the request path, outside the test suite: RPC round trips (TCP and
# in-process), the striping math and the MDS operations alone. The IO-500 run is
# `weft bench io500` (docs/BENCHMARKS.md).
bench-micro:
	$(CARGO) run --release -q -p weft-rpc --example rpc_roundtrip
	$(CARGO) run --release -q -p weft-rpc --example nrs_admit
	$(CARGO) run --release -q -p weft-rpc --example account_stage
	$(CARGO) run --release -q -p weft-proto --example striping
	$(CARGO) run --release -q -p weft-mds --example mds_ops

# Installing on a node (scripts/install.sh; PREFIX and DESTDIR honoured):
#   make install    build release, install $(PREFIX)/bin/weft, /sbin/mount.fuse.weft and the
#                   systemd units weft-server@.service and weft-mount@.service
#   make uninstall  remove exactly what make install put
PREFIX ?= /usr/local
DESTDIR ?=
.PHONY: install uninstall

install:
	PREFIX="$(PREFIX)" DESTDIR="$(DESTDIR)" ./scripts/install.sh install

uninstall:
	PREFIX="$(PREFIX)" DESTDIR="$(DESTDIR)" ./scripts/install.sh uninstall

clean:
	$(CARGO) clean
