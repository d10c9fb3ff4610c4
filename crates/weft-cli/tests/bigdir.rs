//! A big directory lists completely, each name once: 20,000 entries in `make test` (many
//! pages of a listing), 100,000 in `make soak` (`WEFT_BIGDIR_ENTRIES`).

mod common;
use common::*;
use std::collections::HashSet;

#[test]
fn every_entry_of_a_big_directory_is_listed_once() {
    let entries: usize = std::env::var("WEFT_BIGDIR_ENTRIES").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let mut c = Cluster::single_node(&weft_bin(), 1);
    let m = c.mount();
    let d = m.join("big");
    std::fs::create_dir(&d).unwrap();
    // Two threads of creates, as a small job would.
    std::thread::scope(|s| {
        for t in 0..2 {
            let d = d.clone();
            s.spawn(move || {
                for i in (t..entries).step_by(2) {
                    std::fs::File::create(d.join(format!("entry-{i:06}"))).unwrap();
                }
            });
        }
    });
    let mut seen = HashSet::with_capacity(entries);
    for e in std::fs::read_dir(&d).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        assert!(seen.insert(name.clone()), "{name} listed twice");
    }
    assert_eq!(seen.len(), entries);
    for i in (0..entries).step_by(997) {
        assert!(seen.contains(&format!("entry-{i:06}")));
    }
    let ls = sh(&d, "ls -f | wc -l");
    assert_eq!(ls.trim().parse::<usize>().unwrap(), entries + 2, "ls -f lists . and .. too");
    let find = sh(&m, "find big -type f | wc -l");
    assert_eq!(find.trim().parse::<usize>().unwrap(), entries);
}
