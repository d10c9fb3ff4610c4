//! Micro-benchmark of the schedule stage: what admitting one request and releasing its
//! grant costs under FIFO and under TBF with a rule that never binds (requests of a few
//! jobs in turn, as mounts send them), in nanoseconds per request on one thread. Run with
//! `make bench-micro` (release build); not part of the test suite.

use std::sync::Arc;
use std::time::Instant;
use weft_proto::msg::*;
use weft_proto::Fid;
use weft_rpc::schedule::fifo::Fifo;
use weft_rpc::schedule::tbf::{core::Options, rule::TbfType, TbfPolicy};
use weft_rpc::schedule::{Admission, Policy, RequestInfo};
use weft_rpc::{Origin, RequestContext};

const REQUESTS: u32 = 500_000;

fn run(policy: &dyn Policy, body: &RequestBody, service: Service) -> f64 {
    let ctxs: Vec<RequestContext> = (0..64)
        .map(|j| RequestContext {
            header: RequestHeader { jobid: format!("job{j}.0"), ..RequestHeader::default() },
            peer: "10.0.0.7:1234".parse().unwrap(),
            opcode: body.opcode_name(),
            origin: Origin::Remote,
            connection: None,
        })
        .collect();
    let start = Instant::now();
    for i in 0..REQUESTS {
        let ctx = &ctxs[i as usize % ctxs.len()];
        let info = RequestInfo { service, ctx, body, bulk_bytes: 4096 };
        match policy.admit(&info) {
            Admission::Now(grant) => drop(grant),
            Admission::Later { .. } => panic!("a rule that never binds held a request"),
        }
    }
    start.elapsed().as_nanos() as f64 / f64::from(REQUESTS)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let _guard = rt.enter();
    let create = RequestBody::Mdt {
        mdt: 0,
        op: mdt::Mkdir { parent: Fid::ROOT, name: b"d".to_vec(), mode: 0o755, umask: 0 }.into(),
    };
    let read =
        RequestBody::Ost { ost: 0, op: ost::Read { fid: Fid::new(0x100000000, 1, 0), offset: 0, len: 4096 }.into() };
    for (what, body, service) in [("mkdir", &create, Service::Mdt), ("ost_read", &read, Service::OstIo)] {
        let fifo = Fifo::default();
        let tbf = Arc::new(TbfPolicy::start(TbfType::parse("jobid").unwrap(), Options::default()));
        tbf.command("start never jobid={nobody} rate=1").unwrap();
        // The default rule's 10,000/s would bind this loop: raise it out of the way.
        tbf.command("change default rate=999999").unwrap();
        // Warm up, then measure each twice, alternating.
        run(&fifo, body, service);
        run(&*tbf, body, service);
        let (mut f, mut t) = (Vec::new(), Vec::new());
        for _ in 0..2 {
            f.push(run(&fifo, body, service));
            t.push(run(&*tbf, body, service));
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        println!(
            "nrs admit {what:9}: fifo {:6.0} ns, tbf (rule never binds) {:6.0} ns per request: {:+.0} ns",
            mean(&f),
            mean(&t),
            mean(&t) - mean(&f)
        );
    }
}
