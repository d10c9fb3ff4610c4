//! Micro-benchmark of the account stage: what recording one answered request costs with
//! the per-opcode statistics alone (always there) and with everything a server process
//! keeps (those, plus the job statistics and the per-user and per-group counters of the
//! metrics and the decay budgets), in nanoseconds per request: on one thread, and on two
//! threads at once (the lock shared by a process's requests). Requests of 64 jobs, 16
//! users and 4 groups over 4 OSTs in turn, as mounts send them. Run with
//! `make bench-micro` (release build); not part of the test suite.

use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_proto::msg::*;
use weft_rpc::account::{Account, Outcome};
use weft_rpc::jobstats::JobStats;
use weft_rpc::{Origin, RequestContext, Stats};

const REQUESTS: u32 = 400_000;

struct Request {
    ctx: RequestContext,
    outcome: Outcome,
}

fn requests(opcode: &'static str, kind: TargetKind, service: Service, bytes_in: u64) -> Vec<Request> {
    (0..256u32)
        .map(|i| {
            let identity = Identity { uid: 1000 + i % 16, gid: 100 + i % 4, ..Identity::default() };
            let header =
                RequestHeader { jobid: format!("job{}.{}", i % 64, 1000 + i % 16), identity, ..Default::default() };
            let ctx = RequestContext {
                header,
                peer: "10.0.0.7:1234".parse().unwrap(),
                opcode,
                origin: Origin::Remote,
                connection: None,
            };
            let outcome = Outcome {
                service: Some(service),
                took: Duration::from_micros(40 + u64::from(i % 7)),
                waited: Duration::ZERO,
                ok: true,
                bytes: bytes_in,
                bytes_in,
                bytes_out: 0,
                target: Some((kind, i % 4)),
                at: std::time::Instant::now(),
            };
            Request { ctx, outcome }
        })
        .collect()
}

/// Nanoseconds per request, each of `threads` recording `REQUESTS / threads` requests.
fn run(accounts: &[Arc<dyn Account>], requests: &Arc<Vec<Request>>, threads: u32) -> f64 {
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let requests = requests.clone();
            s.spawn(move || {
                for i in 0..REQUESTS / threads {
                    let r = &requests[((i * threads + t) as usize) % requests.len()];
                    for account in accounts {
                        account.record(&r.ctx, &r.outcome);
                    }
                }
            });
        }
    });
    start.elapsed().as_nanos() as f64 / f64::from(REQUESTS)
}

fn main() {
    let cases =
        [("ost_write", TargetKind::Ost, Service::OstIo, 1 << 20), ("mds_create", TargetKind::Mdt, Service::Mdt, 0)];
    for (opcode, kind, service, bytes) in cases {
        let requests = Arc::new(requests(opcode, kind, service, bytes));
        for threads in [1, 2] {
            let stats: Arc<dyn Account> = Arc::new(Stats::default());
            let baseline = vec![stats.clone()];
            let full: Vec<Arc<dyn Account>> = vec![stats, Arc::new(JobStats::default())];
            // Warm up (every key seen once), then each twice, alternating.
            run(&baseline, &requests, threads);
            run(&full, &requests, threads);
            let (mut b, mut f) = (Vec::new(), Vec::new());
            for _ in 0..2 {
                b.push(run(&baseline, &requests, threads));
                f.push(run(&full, &requests, threads));
            }
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
            println!(
                "account {opcode:10} {threads} thread(s): opcode stats alone {:5.0} ns, all accounts {:5.0} ns per request: {:+.0} ns",
                mean(&b),
                mean(&f),
                mean(&f) - mean(&b)
            );
        }
    }
}
