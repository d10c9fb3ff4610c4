//! A directory of 100,000 entries lists completely, each name once.

mod common;
use common::*;
use std::collections::HashSet;

#[test]
fn hundred_thousand_entries_in_one_directory() {
    const ENTRIES: usize = 100_000;
    let mut c = Cluster::single_node(&weft_bin(), 1);
    let m = c.mount();
    let d = m.join("big");
    std::fs::create_dir(&d).unwrap();
    // Two threads of creates, as a small job would.
    std::thread::scope(|s| {
        for t in 0..2 {
            let d = d.clone();
            s.spawn(move || {
                for i in (t..ENTRIES).step_by(2) {
                    std::fs::File::create(d.join(format!("entry-{i:06}"))).unwrap();
                }
            });
        }
    });
    let mut seen = HashSet::with_capacity(ENTRIES);
    for e in std::fs::read_dir(&d).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        assert!(seen.insert(name.clone()), "{name} listed twice");
    }
    assert_eq!(seen.len(), ENTRIES);
    for i in (0..ENTRIES).step_by(997) {
        assert!(seen.contains(&format!("entry-{i:06}")));
    }
    let ls = sh(&d, "ls -f | wc -l");
    assert_eq!(ls.trim().parse::<usize>().unwrap(), ENTRIES + 2, "ls -f lists . and .. too");
    let find = sh(&m, "find big -type f | wc -l");
    assert_eq!(find.trim().parse::<usize>().unwrap(), ENTRIES);
}
