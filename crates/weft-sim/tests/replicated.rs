//! The replicated MDT's simulation (see `weft_sim::raft`): seeds 4-6 in CI (a partition of
//! the leader with long and with short client timeouts, a replicated MGS, one partition of
//! a follower followed by a second kill);
//! WEFT_SIM_SEED=N replays one seed (WEFT_SIM_SEEDS=FROM..TO a range, TO not included:
//! `make soak`), WEFT_SIM_VERBOSE=1 prints each seed's log.

use weft_sim::raft::{run, RaftSummary};

const CI_SEEDS: std::ops::Range<u64> = 4..7;

#[test]
fn what_the_replicated_mdt_acknowledged_survives_kills_and_partitions_of_its_leader() {
    let verbose = std::env::var("WEFT_SIM_VERBOSE").is_ok();
    if let Ok(filter) = std::env::var("WEFT_LOG") {
        let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
    }
    let mut summary = RaftSummary::default();
    for seed in weft_sim::seeds(CI_SEEDS) {
        // A runtime per seed, on a real clock (the module docs say why).
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let report = rt.block_on(run(seed)).unwrap_or_else(|failure| {
            panic!(
                "{failure}\nreplay it: WEFT_SIM_SEED={seed} WEFT_SIM_VERBOSE=1 cargo test -p weft-sim --test replicated"
            )
        });
        rt.shutdown_timeout(std::time::Duration::from_secs(5));
        if verbose {
            eprintln!("seed {seed}:\n{}", report.log);
        }
        assert!(report.acknowledged > 0, "seed {seed} acknowledged nothing:\n{}", report.log);
        assert!(report.kills >= 1, "seed {seed} killed its leader:\n{}", report.log);
        assert!(report.failovers >= 1, "seed {seed}: the kill of the leader moved the MDT:\n{}", report.log);
        summary.add(&report);
    }
    eprintln!("{summary}");
}
