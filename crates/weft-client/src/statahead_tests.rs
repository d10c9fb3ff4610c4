use super::*;

const DIR: Fid = Fid::new(0x200000400, 9, 0);

/// Statahead after the trigger's lookups, a first page read.
fn started(len: usize, had_name: bool, listed: bool) -> Statahead {
    let s = Statahead::default();
    if listed {
        s.listed(DIR);
    }
    for _ in 0..STATAHEAD_TRIGGER_LOOKUPS {
        s.found_at_mds(DIR);
    }
    assert_eq!(s.due(DIR), Some(0), "due after the trigger");
    assert_eq!(s.due(DIR), None, "one page at a time");
    s.read(DIR, Some(1024), true, len, had_name);
    s
}

#[test]
fn a_walk_of_the_listing_that_looks_at_most_names_reads_page_after_page() {
    let s = started(1024, true, true);
    for _ in 0..1000 {
        s.hit(DIR);
    }
    assert_eq!(s.due(DIR), Some(1024));
}

#[test]
fn a_sparse_walk_of_the_listing_pauses_it() {
    let s = started(1024, true, true);
    for _ in 0..1024 / STATAHEAD_SPARSE_RATIO - 1 {
        s.hit(DIR);
    }
    assert_eq!(s.due(DIR), None, "a page costs more than the lookups it saves");
    for _ in 0..STATAHEAD_TRIGGER_LOOKUPS {
        s.found_at_mds(DIR);
    }
    assert_eq!(s.due(DIR), None, "paused");
}

#[test]
fn lookups_in_another_order_than_the_listing_go_on_reading_pages() {
    // mdtest's stat of file.0, file.1, ... against a listing in hash order: the name a
    // page was read for is rarely in it, and the directory is read whole in the end.
    let s = started(1024, false, true);
    s.hit(DIR);
    assert_eq!(s.due(DIR), Some(1024));
    // ... and the page held the name by chance, but the program never listed the directory.
    let s = started(1024, true, false);
    s.hit(DIR);
    assert_eq!(s.due(DIR), Some(1024));
}
