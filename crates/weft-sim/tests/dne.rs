//! The seeded simulation of changes over two MDTs with kills -9 of either MDS (see
//! weft_sim::dne): a few seeds in CI; any seed with WEFT_SIM_SEED=N, a range with
//! WEFT_SIM_SEEDS=FROM..TO (`make soak`).

use weft_sim::dne::{run_dne, Kill};

/// The seeds CI plays (about 10 s in a debug build): kills of both MDSs, between changes
/// and inside them and while a restart resolves, some leaving prepared steps and untold
/// commits to resolve.
const CI_SEEDS: std::ops::Range<u64> = 0..30;

#[test]
fn changes_over_two_mdts_are_whole_after_kills_of_either_mds() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let seeds = weft_sim::seeds(CI_SEEDS);
    let (mut killed, mut kinds, mut cut, mut left, mut failed) = ([0usize; 2], [0usize; 3], 0, 0, 0);
    for seed in seeds.iter().copied() {
        let report = rt.block_on(run_dne(seed)).unwrap_or_else(|failure| panic!("{failure}"));
        if std::env::var("WEFT_SIM_VERBOSE").is_ok() {
            eprintln!(
                "seed {seed}: {} rounds, kills {:?}, {} ops, {} acknowledged, {} refused, faults {:?}, cut {:?}\n{}",
                report.rounds,
                report.kills,
                report.ops,
                report.acknowledged,
                report.failed,
                report.faults,
                report.cuts,
                report.log
            );
        }
        for (mdt, kind) in &report.kills {
            killed[*mdt as usize] += 1;
            kinds[match kind {
                Kill::Between => 0,
                Kill::Inside => 1,
                Kill::Resolving => 2,
            }] += 1;
        }
        cut += report.cuts.len();
        left += report.left.iter().filter(|l| **l != (0, 0)).count();
        failed += report.failed;
    }
    eprintln!(
        "{} seeds: kills of MDT0 {}, of MDT1 {}; between changes {}, inside {}, while resolving {}; \
         changes cut short {cut}; restarts with changes to resolve {left}; changes refused (by the \
         MDTs or a storage fault) {failed}",
        seeds.len(),
        killed[0],
        killed[1],
        kinds[0],
        kinds[1],
        kinds[2]
    );
    if seeds.len() >= 10 {
        assert!(
            killed[0] > 0 && killed[1] > 0 && kinds.iter().all(|k| *k > 0),
            "the seeds kill both MDSs, between changes, inside them and while resolving"
        );
    }
}
