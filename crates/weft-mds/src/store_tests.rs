use super::*;
use std::collections::BTreeMap;

use crate::storage::mem::MemKv;
use crate::storage::redb_kv::RedbKv;

fn checkpoint(kv: &dyn KvStore, view: &Tables) -> Tables {
    kv.commit(&mut overlay_rows(view)).unwrap();
    Tables::at_checkpoint(kv).unwrap()
}

#[test]
fn tables_are_in_id_order() {
    let names = schema::TABLE_NAMES;
    assert_eq!(names[usize::from(schema::TABLE_META)], "meta");
    assert_eq!(names[usize::from(schema::TABLE_INODES)], "inodes");
    assert_eq!(names[usize::from(schema::TABLE_REPLY_CACHE)], "reply_cache");
    assert_eq!(names[usize::from(schema::TABLE_COUNTERS)], "counters");
    assert_eq!(names[usize::from(schema::TABLE_CHANGELOG_USERS)], "changelog_users");
    assert_eq!(names[usize::from(schema::TABLE_HSM_BY_FID)], "hsm_by_fid");
    assert_eq!(slot(schema::TABLE_HSM_BY_FID), TABLE_SLOTS - 7);
    assert_eq!(names[usize::from(schema::TABLE_QUOTA_USAGE)], "quota_usage");
    assert_eq!(names[usize::from(schema::TABLE_RESYNC_QUEUE)], "resync_queue");
    assert_eq!(names[usize::from(schema::TABLE_QUOTA_LIMITS)], "quota_limits");
    assert_eq!(names[usize::from(schema::TABLE_UPDATES)], "updates");
    assert_eq!(names[usize::from(schema::TABLE_LAST)], "txns");
    assert_eq!(slot(schema::TABLE_LAST), TABLE_SLOTS - 1);
}

/// Every key-value store (redb, memory) under the same test.
fn stores() -> Vec<(Box<dyn KvStore>, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    let redb: Box<dyn KvStore> = Box::new(RedbKv::open(&dir.path().join("mdt.redb")).unwrap());
    vec![(redb, Some(dir)), (Box::new(MemKv::default()), None)]
}

/// Random puts and removes, with checkpoints now and then, read back through every kind of
/// lookup and compared with a plain map: the overlay and the store together must read as
/// one table whatever part of each key's history is where. Run over every store.
#[test]
fn the_overlay_over_the_store_reads_as_one_table() {
    for (kv, _dir) in stores() {
        overlay_over_store_reads_as_one_table(&*kv);
    }
}

fn overlay_over_store_reads_as_one_table(kv: &dyn KvStore) {
    crate::startup::format_or_check(kv, 1).unwrap();
    let table = schema::TABLE_DESTROY_QUEUE;
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut view = Tables::at_checkpoint(kv).unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for round in 0..40 {
        let mut t = WriteTables::over(view.clone());
        for _ in 0..50 {
            let key = vec![rand(4) as u8, rand(16) as u8];
            if rand(3) == 0 {
                assert_eq!(t.del(table, &key).unwrap(), model.remove(&key).is_some(), "{key:?}");
            } else {
                let value = vec![round as u8, rand(256) as u8];
                t.put(table, &key, &value).unwrap();
                model.insert(key, value);
            }
        }
        view = t.into_view();
        if rand(4) == 0 {
            view = checkpoint(kv, &view);
            assert_eq!(view.overlay().rows(), 0);
        }
        for lo in [vec![], vec![1], vec![2, 7]] {
            for hi in [None, Some(vec![2]), Some(vec![3, 3])] {
                let mut got = Vec::new();
                view.scan(table, &lo, hi.as_deref(), |k, v| {
                    got.push((k.to_vec(), v.to_vec()));
                    Ok(true)
                })
                .unwrap();
                let want: Vec<_> = model
                    .range(lo.clone()..)
                    .filter(|(k, _)| hi.as_ref().is_none_or(|h| k < &h))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want, "round {round} from {lo:?} to {hi:?}");
            }
        }
        assert_eq!(view.keys(table, &[], None, 3).unwrap(), model.keys().take(3).cloned().collect::<Vec<_>>());
        for (k, v) in &model {
            assert_eq!(view.with_row(table, k, |r| Ok(r.to_vec())).unwrap().as_ref(), Some(v));
        }
    }
}

#[test]
fn the_inode_count_follows_the_overlay() {
    for (kv, _dir) in stores() {
        inode_count_follows_the_overlay(&*kv);
    }
}

fn inode_count_follows_the_overlay(kv: &dyn KvStore) {
    crate::startup::format_or_check(kv, 0).unwrap();
    let view = Tables::at_checkpoint(kv).unwrap();
    assert_eq!(view.inode_count().unwrap(), 1, "the root");
    let mut t = WriteTables::over(view);
    let rec = InodeRecord::new(FileType::Regular, 0o644, 0, 0, crate::now());
    let (a, b) = (t.next_inode_fid(0).unwrap(), t.next_inode_fid(0).unwrap());
    t.put_inode(a, &rec).unwrap();
    t.put_inode(b, &rec).unwrap();
    t.put_inode(a, &rec).unwrap();
    assert_eq!(t.inode_count().unwrap(), 3, "a second put of the same inode adds none");
    let view = checkpoint(kv, &t.into_view());
    assert_eq!(view.inode_count().unwrap(), 3);
    let mut t = WriteTables::over(view);
    t.destroy_inode(a, &rec).unwrap();
    assert_eq!(t.inode_count().unwrap(), 2);
    assert!(!t.del(schema::TABLE_INODES, &a.to_bytes()).unwrap(), "removed already");
    assert_eq!(t.inode_count().unwrap(), 2);
    assert_eq!(checkpoint(kv, &t.into_view()).inode_count().unwrap(), 2);
}

/// An MDT of an earlier format version (4 and before: inode records without composite
/// layouts) is refused with both versions named, and left as it was.
#[test]
fn older_mdts_are_refused_and_left_as_they_are() {
    for ((kv, _dir), old) in stores().into_iter().chain(stores()).zip([2u32, 4, 3, 4]) {
        let old = old.to_be_bytes();
        let rows = [(schema::TABLE_META, schema::META_FORMAT_KEY, Some(old.as_slice()))];
        kv.commit(&mut rows.iter().map(|(t, k, v)| (*t, *k, *v))).unwrap();
        let e = crate::startup::format_or_check(&*kv, 0).unwrap_err();
        assert_eq!(e.code, weft_proto::ErrorCode::NotSupported);
        let (theirs, ours) = (u32::from_be_bytes(old), schema::FORMAT_VERSION);
        assert!(e.message.contains(&format!("version {theirs}")) && e.message.contains(&format!("{ours}")), "{e}");
        let mut version = Vec::new();
        kv.snapshot().unwrap().get(schema::TABLE_META, schema::META_FORMAT_KEY, &mut |v| version = v.to_vec()).unwrap();
        assert_eq!(version, old);
    }
}
