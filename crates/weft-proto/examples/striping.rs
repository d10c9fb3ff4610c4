//! Micro-benchmark of the striping math on the data path: splitting a request into object
//! extents and chunks, and the glimpse computation. Run with `make bench-micro`.

use std::hint::black_box;
use std::time::Instant;
use weft_proto::layout::{Layout, StripeObject};
use weft_proto::Fid;

const ITERATIONS: u64 = 1_000_000;

fn main() {
    for (count, stripe_size, io) in
        [(1usize, 1u64 << 20, 1u64 << 20), (4, 1 << 20, 4 << 20), (64, 1 << 20, 16 << 20), (4, 64 << 10, 47_008)]
    {
        let objects = (0..count).map(|i| StripeObject { ost: i as u32, fid: Fid::new(1, i as u32, 0) }).collect();
        let layout = Layout::raid0(stripe_size, None, objects);
        let c = layout.plain().expect("plain layout");
        let start = Instant::now();
        let mut sum = 0u64;
        for i in 0..ITERATIONS {
            let off = (i * 7919 * io) % (1 << 40);
            for e in c.object_extents(black_box(off), black_box(io)) {
                sum = sum.wrapping_add(e.object_offset + e.len);
            }
        }
        let extents_ns = start.elapsed().as_nanos() as f64 / ITERATIONS as f64;
        let sizes: Vec<u64> = (0..count as u64).map(|k| (k + 1) << 30).collect();
        let start = Instant::now();
        for _ in 0..ITERATIONS / 10 {
            sum = sum.wrapping_add(c.file_size_from_objects(black_box(&sizes)));
        }
        let glimpse_ns = start.elapsed().as_nanos() as f64 / (ITERATIONS / 10) as f64;
        println!(
            "stripes {count:>3} x {:>5} KiB, I/O {:>6} KiB: object_extents {extents_ns:>7.1} ns, glimpse size {glimpse_ns:>6.1} ns",
            stripe_size >> 10,
            io >> 10
        );
        black_box(sum);
    }
}
