//! The Weft MPI-IO layer (crates/weft-mpiio): built with each MPI's mpicc against the
//! libweft.so of this build, given to the C check program (tests/mpiio_check.c) by
//! LD_PRELOAD under Debian's OpenMPI (its OMPIO and ROMIO components) and MPICH, on a
//! cluster of four OSTs with a FUSE mount. The program writes patterns collectively through
//! the layer and reads them independently through the MPI library on the mount (and the
//! reverse), checking every byte, also with POSIX reads of the mount; then this test reads
//! files through the mount itself and checks their bytes and the layouts the hints asked.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use weft_harness::Cluster;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The build's directory (target/debug): the test binary is in its deps/.
fn build_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    exe.parent().and_then(Path::parent).expect("target/<profile>").to_path_buf()
}

/// The `weft` binary of this build: `cargo test --workspace` (make test) builds it before
/// running any test; alone, build it first with `cargo build -p weft-cli`.
fn weft_bin() -> PathBuf {
    let bin = build_dir().join("weft");
    assert!(bin.exists(), "{} is not built: run `cargo build -p weft-cli` first (make test builds it)", bin.display());
    bin
}

/// Where libweft.so is (deps/ when cargo built it as this test's dependency).
fn libweft_dir() -> PathBuf {
    let deps = build_dir().join("deps");
    let dir = if deps.join("libweft.so").exists() { deps } else { build_dir() };
    assert!(dir.join("libweft.so").exists(), "libweft.so in {}", dir.display());
    dir
}

/// The layer for both MPIs, the check program for both and the HDF5 one, with the crate's
/// Makefile.
fn build_layer(out: &Path) {
    let made = Command::new("make")
        .arg("-C")
        .arg(workspace().join("crates/weft-mpiio"))
        .arg(format!("LIBWEFT_DIR={}", libweft_dir().display()))
        .arg(format!("OUT={}", out.display()))
        .args(["all", "tests", "hdf5"])
        .output()
        .expect("run make (scripts/install-test-deps.sh installs make, OpenMPI and MPICH)");
    assert!(
        made.status.success(),
        "building the layer failed:\n{}{}",
        String::from_utf8_lossy(&made.stdout),
        String::from_utf8_lossy(&made.stderr)
    );
}

#[derive(Clone, Copy, Debug)]
enum Mpi {
    /// OpenMPI with the named io component ("ompio" or "romio321").
    OpenMpi(&'static str),
    Mpich,
}

/// `mpirun -n ranks prog args`, the layer preloaded when `layer` is given, at most 5 min.
fn mpirun(mpi: Mpi, ranks: u32, out: &Path, layer: bool, env: &[(&str, &str)], prog: &str, args: &[&str]) -> Output {
    let mut c = Command::new("timeout");
    c.arg("300");
    let n = ranks.to_string();
    match mpi {
        Mpi::OpenMpi(io) => {
            c.args(["mpirun.openmpi", "--oversubscribe", "--allow-run-as-root", "-n", &n, "--mca", "io", io]);
            c.args(["--mca", "mpi_yield_when_idle", "1"]);
            if layer {
                c.arg("-x").arg(format!("LD_PRELOAD={}", out.join("libweft_mpiio.so").display()));
            }
            for (k, v) in env {
                c.arg("-x").arg(format!("{k}={v}"));
            }
            c.arg(out.join(format!("{prog}_openmpi")));
            c.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        }
        Mpi::Mpich => {
            c.args(["mpirun.mpich", "-n", &n]);
            if layer {
                c.arg("-genv").arg("LD_PRELOAD").arg(out.join("libweft_mpiio_mpich.so"));
            }
            for (k, v) in env {
                c.args(["-genv", k, v]);
            }
            c.arg(out.join(format!("{prog}_mpich")));
        }
    }
    c.args(args);
    c.output().expect("run mpirun (scripts/install-test-deps.sh installs openmpi-bin and mpich)")
}

fn ok(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("all checks held"),
        "{what} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The check program's byte at file offset `o` in pattern round `round`.
fn pat(o: i64, round: i64) -> u8 {
    (o.wrapping_mul(131) + (o >> 8) * 7 + (o >> 16) * 3 + 1 + round * 17) as u8
}

/// (stripe count, stripe size, OSTs) of a file, from `weft getstripe --json`.
fn layout_of(weft: &Path, f: &Path) -> (u64, u64, Vec<u64>) {
    let out = Command::new(weft).args(["getstripe", "--json"]).arg(f).output().expect("weft getstripe");
    assert!(out.status.success(), "weft getstripe {}: {}", f.display(), String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("getstripe's JSON");
    let c = &v[0]["layout"]["components"][0];
    let osts: Vec<u64> = c["objects"].as_array().expect("objects").iter().map(|o| o["ost"].as_u64().unwrap()).collect();
    (c["stripe_count"].as_u64().unwrap_or(osts.len() as u64), c["stripe_size"].as_u64().unwrap_or(0), osts)
}

/// The files the check program left, read through the mount: the contiguous one (round 0)
/// is the pattern from its first byte; the 2-D one (round 3) after a header of 4,120 zeros.
fn check_through_mount(weft: &Path, dir: &Path, count: u32, size: u32, ranks: u32, scale: i64) {
    let name = |p: &str| dir.join(format!("{p}-cw-c{count}-s{size}-n{ranks}"));
    let contiguous = std::fs::read(name("contiguous")).expect("the contiguous file");
    let want: i64 = (0..ranks as i64).map(|r| scale * 300_007 + r * 4099).sum();
    assert_eq!(contiguous.len() as i64, want);
    if let Some(o) = (0..contiguous.len()).find(|&o| contiguous[o] != pat(o as i64, 0)) {
        panic!("contiguous file: byte {o} is {} through the mount, not {}", contiguous[o], pat(o as i64, 0));
    }
    let sub = std::fs::read(name("subarray")).expect("the 2-D file");
    assert_eq!(sub.len() as i64, 4120 + (scale * 97 + 13) * (scale * 131 + 7) * 8);
    assert!(sub[..4120].iter().all(|b| *b == 0), "the 2-D file's header is a hole");
    if let Some(o) = (4120..sub.len()).find(|&o| sub[o] != pat(o as i64, 3)) {
        panic!("2-D file: byte {o} is {} through the mount, not {}", sub[o], pat(o as i64, 3));
    }
    for p in ["contiguous", "vector", "indexed", "subarray"] {
        let (c, s, osts) = layout_of(weft, &name(p));
        assert_eq!((c, osts.len()), (count as u64, count as usize), "{p}: the stripe count the hint asked");
        if s != 0 {
            assert_eq!(s, size as u64, "{p}: the stripe size the hint asked");
        }
    }
}

#[test]
fn collective_io_through_the_layer_reads_back_every_byte_under_openmpi_and_mpich() {
    let tmp = tempfile::tempdir().unwrap();
    build_layer(tmp.path());
    let weft = weft_bin();
    let mut cluster = Cluster::single_node(&weft, 4);
    let mnt = cluster.mount();
    const SCALE: i64 = 3;
    // (MPI, ranks, stripe count, stripe size): every rank count and stripe count, the
    // stripe sizes from 64 KiB to 4 MiB; `make soak` runs the whole product.
    let matrix: Vec<(Mpi, u32, u32, u32)> = match std::env::var("WEFT_MPIIO_MATRIX").as_deref() {
        Ok("full") => {
            let mut m = Vec::new();
            for mpi in [Mpi::OpenMpi("ompio"), Mpi::OpenMpi("romio321"), Mpi::Mpich] {
                for ranks in 1..=4 {
                    for count in 1..=4 {
                        for size in [64 << 10, 256 << 10, 1 << 20, 4 << 20] {
                            m.push((mpi, ranks, count, size));
                        }
                    }
                }
            }
            m
        }
        _ => vec![
            (Mpi::OpenMpi("ompio"), 1, 1, 64 << 10),
            (Mpi::OpenMpi("ompio"), 4, 4, 64 << 10),
            (Mpi::OpenMpi("romio321"), 3, 2, 1 << 20),
            (Mpi::OpenMpi("ompio"), 2, 3, 4 << 20),
            (Mpi::Mpich, 4, 3, 256 << 10),
            (Mpi::Mpich, 2, 1, 4 << 20),
            (Mpi::Mpich, 3, 4, 64 << 10),
        ],
    };
    for (i, (mpi, ranks, count, size)) in matrix.into_iter().enumerate() {
        let dir = mnt.join(format!("run{i}"));
        std::fs::create_dir(&dir).unwrap();
        let what = format!("{mpi:?}, {ranks} ranks, {count} stripes of {size}");
        eprintln!("{what}");
        // The layer's choices on stderr, in the runs of 4 ranks over 4 stripes of 64 KiB.
        let debug = if (ranks, count, size) == (4, 4, 64 << 10) { "1" } else { "0" };
        // Every other run with the smallest collective buffer (one row of stripes a step:
        // many steps) and throttles 1 to 4.
        let cb = if i % 2 == 0 { "65536" } else { "16777216" };
        let throttle = (1 + i % 4).to_string();
        // Every third run with the domains not aligned to stripes (weft_align=disable).
        let align = if i % 3 == 2 && debug == "0" { "0" } else { "1" };
        // Every third of the others with ROMIO's placement (contiguous domains of whole
        // stripes, weft_placement=rank), every other run with the exchange by MPI_Alltoallv
        // (and run 2: OpenMPI with a rank that is no aggregator).
        let placement = if i % 3 == 0 { "rank" } else { "ost" };
        let exchange = if i % 2 == 1 || i == 2 { "alltoallv" } else { "stepwise" };
        // One run with the aggregators' I/O through the mount (weft_io=mount).
        let io = if i == 4 { "mount" } else { "libweft" };
        // Every fourth run with the two phases even where the ranks do not interleave (the
        // contiguous file: each rank's own I/O otherwise, weft_direct=automatic).
        let direct = if i % 4 == 3 { "disable" } else { "automatic" };
        let out = mpirun(
            mpi,
            ranks,
            tmp.path(),
            true,
            &[
                ("WEFT_EXPECT_LAYER", "1"),
                ("WEFT_MPIIO_DEBUG", debug),
                ("WEFT_MPIIO_CB_BUFFER_SIZE", cb),
                ("WEFT_MPIIO_THROTTLE", &throttle),
                ("WEFT_MPIIO_ALIGN", align),
                ("WEFT_MPIIO_PLACEMENT", placement),
                ("WEFT_MPIIO_EXCHANGE", exchange),
                ("WEFT_MPIIO_IO", io),
                ("WEFT_MPIIO_DIRECT", direct),
            ],
            "mpiio_check",
            &[dir.to_str().unwrap(), &count.to_string(), &size.to_string(), &SCALE.to_string()],
        );
        ok(&out, &what);
        if debug == "1" {
            // What the layer chose, on stderr, as this run asked: the aggregators, their
            // placement and the exchange.
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("aggregators (ranks) 0,1,2,3"), "{err}");
            assert!(err.contains(&format!("placement {placement};")), "{err}");
            if placement == "ost" {
                assert!(err.contains("placement ost; domains stripe-aligned;"), "{err}");
            }
            assert!(err.contains(&format!("exchange {exchange};")), "{err}");
            assert!(err.contains("write_all:") && err.contains("read_all:"), "{err}");
            // The interleaved views went through the exchange; the contiguous file's ranks
            // each did their own I/O, unless this run kept the two phases.
            assert!(err.contains(&format!("steps, {exchange} exchange")), "{err}");
            let direct_seen = err.contains("direct: no two ranks' ranges interleave");
            assert_eq!(direct_seen, direct == "automatic", "weft_direct={direct}:\n{err}");
        }
        check_through_mount(&weft, &dir, count, size, ranks, SCALE);
    }
}

/// A file that is not on Weft goes to the MPI library as is, the layer preloaded.
#[test]
fn files_off_weft_are_left_to_the_mpi_library() {
    let tmp = tempfile::tempdir().unwrap();
    build_layer(tmp.path());
    let local = tmp.path().join("local");
    std::fs::create_dir(&local).unwrap();
    for mpi in [Mpi::OpenMpi("ompio"), Mpi::Mpich] {
        let out = mpirun(
            mpi,
            2,
            tmp.path(),
            true,
            &[("WEFT_MPIIO_DEBUG", "1")],
            "mpiio_check",
            &[local.to_str().unwrap(), "2", "65536", "2"],
        );
        ok(&out, &format!("{mpi:?} off Weft"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("weft-mpiio:"), "the layer took a file off Weft:\n{err}");
    }
}

/// HDF5 (Debian's libhdf5-openmpi-dev) writes two datasets collectively through its MPI-IO
/// driver, the layer preloaded: the layer takes the collective calls (its debug lines say
/// so) with the throttle the client's permanent max_rpcs_in_flight gives, the program reads
/// them back equal, and h5dump reads every value back too.
#[test]
fn hdf5_writes_a_dataset_collectively_through_the_layer_and_h5dump_reads_it_back() {
    let tmp = tempfile::tempdir().unwrap();
    build_layer(tmp.path());
    let weft = weft_bin();
    let mut cluster = Cluster::single_node(&weft, 4);
    let mnt = cluster.mount();
    let dir = mnt.join("h5");
    std::fs::create_dir(&dir).unwrap();
    let set = Command::new(&weft).args(["setstripe", "-c", "4", "-S", "65536"]).arg(&dir).output().unwrap();
    assert!(set.status.success(), "setstripe: {}", String::from_utf8_lossy(&set.stderr));
    // The client's max_rpcs_in_flight, set for every client, bounds the aggregators' requests
    // per OST (the layer's throttle) when no hint names one.
    let set = Command::new(&weft)
        .args(["set-param", "-P", "max_rpcs_in_flight=3", "--mgs", &cluster.mgs_address])
        .output()
        .unwrap();
    assert!(set.status.success(), "set-param: {}", String::from_utf8_lossy(&set.stderr));
    let file = dir.join("data.h5");
    let (rows, cols) = (1001i64, 777i64);
    let out = mpirun(
        Mpi::OpenMpi("ompio"),
        4,
        tmp.path(),
        true,
        &[("WEFT_MPIIO_DEBUG", "1")],
        "hdf5_check",
        &[file.to_str().unwrap(), &rows.to_string(), &cols.to_string()],
    );
    ok(&out, "the HDF5 program");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("aggregators (ranks) 0,1,2,3"), "{err}");
    assert!(err.contains("; throttle 3;"), "the client's max_rpcs_in_flight as the throttle:\n{err}");
    assert!(
        err.contains("write_all:") && err.contains("read_all:"),
        "HDF5's collective calls went to the layer:\n{err}"
    );
    for dset in ["rows", "columns"] {
        let bin = tmp.path().join(format!("{dset}.bin"));
        let dumped = Command::new("h5dump")
            .args(["-d", &format!("/{dset}"), "-b", "LE", "-o"])
            .arg(&bin)
            .arg(&file)
            .output()
            .expect("run h5dump (hdf5-tools)");
        assert!(dumped.status.success(), "h5dump: {}", String::from_utf8_lossy(&dumped.stderr));
        let raw = std::fs::read(&bin).unwrap();
        assert_eq!(raw.len() as i64, rows * cols * 4, "{dset}: every value dumped");
        for (k, v) in raw.chunks_exact(4).enumerate() {
            let (i, j) = (k as i64 / cols, k as i64 % cols);
            let got = i32::from_le_bytes(v.try_into().unwrap()) as i64;
            assert_eq!(got, i * 100_003 + j, "{dset}[{i}][{j}] as h5dump reads it");
        }
    }
}
