//! The network simulation (see `weft_sim::net`): seeds 1-100 in CI; WEFT_SIM_SEED=N replays
//! one seed (WEFT_SIM_SEEDS=FROM..TO a range, TO not included: `make soak`), WEFT_SIM_VERBOSE=1 prints each
//! seed's log.

use weft_sim::net::{run, Summary};

const CI_SEEDS: std::ops::Range<u64> = 1..101;

fn seeds() -> Vec<u64> {
    weft_sim::seeds(CI_SEEDS)
}

#[test]
fn what_the_network_did_not_fail_is_what_everyone_sees() {
    let verbose = std::env::var("WEFT_SIM_VERBOSE").is_ok();
    if let Ok(filter) = std::env::var("WEFT_LOG") {
        // The servers' and clients' own logs, interleaved with the simulation's.
        let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
    }
    let mut summary = Summary::default();
    for seed in seeds() {
        // A runtime per seed: nothing of one seed's servers outlives it.
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
        let report = rt.block_on(run(seed)).unwrap_or_else(|failure| {
            panic!(
                "{failure}\nreplay it: WEFT_SIM_SEED={seed} WEFT_SIM_VERBOSE=1 cargo test -p weft-sim --test network"
            )
        });
        if verbose {
            eprintln!("seed {seed}:\n{}", report.log);
        }
        assert!(report.acknowledged > 0, "seed {seed} acknowledged nothing:\n{}", report.log);
        summary.add(&report);
    }
    eprintln!("{summary}");
    if summary.seeds >= 50 {
        let c = &summary.counts;
        // Every kind of fault was played, and the eviction.
        assert!(c.dropped > 0 && c.replies_lost > 0 && c.duplicated > 0 && c.held > 0, "{summary}");
        assert!(c.partitions > 0 && c.pauses > 0 && summary.evictions > 0, "{summary}");
        assert!(c.resends > 0 && c.callbacks > 0 && summary.failed_by_network > 0, "{summary}");
        assert_eq!(c.held_executed_late, 0, "held copies of closed connections ran: {summary}");
    }
}
