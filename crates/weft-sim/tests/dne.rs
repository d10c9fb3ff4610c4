//! The seeded simulation of changes over two MDTs with a kill -9 of either MDS (see
//! weft_sim::dne): a few seeds in CI; any seed with WEFT_SIM_SEED=N, a range with
//! WEFT_SIM_SEEDS=FROM..TO (`make soak`).

use weft_sim::dne::{run_dne, Kill};

/// The seeds CI plays (about 10 s in a debug build): kills of both MDSs, between changes
/// and inside them, some leaving prepared steps and untold commits to resolve.
const CI_SEEDS: std::ops::Range<u64> = 0..40;

#[test]
fn changes_over_two_mdts_are_whole_after_a_kill_of_either_mds() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let seeds = weft_sim::seeds(CI_SEEDS);
    let (mut killed, mut inside, mut cut, mut left, mut failed) = ([0usize; 2], 0, 0, 0, 0);
    for seed in seeds.iter().copied() {
        let report = rt.block_on(run_dne(seed)).unwrap_or_else(|failure| panic!("{failure}"));
        if std::env::var("WEFT_SIM_VERBOSE").is_ok() {
            eprintln!(
                "seed {seed}: kill of MDT{} {:?}, {} ops, {} acknowledged, {} refused, faults {:?}, cut {:?}\n{}",
                report.killed,
                report.kill,
                report.ops,
                report.acknowledged,
                report.failed,
                report.faults,
                report.cut,
                report.log
            );
        }
        killed[report.killed as usize] += 1;
        inside += (report.kill == Kill::Inside) as usize;
        cut += report.cut.is_some() as usize;
        left += (report.left != (0, 0)) as usize;
        failed += report.failed;
    }
    eprintln!(
        "{} seeds: kills of MDT0 {}, of MDT1 {}, inside a change {inside}, a change cut short {cut}, \
         a change left to resolve {left}, changes refused (by the MDTs or a storage fault) {failed}",
        seeds.len(),
        killed[0],
        killed[1]
    );
    if seeds.len() >= 10 {
        assert!(killed[0] > 0 && killed[1] > 0 && inside > 0, "the seeds kill both MDSs, inside changes too");
    }
}
