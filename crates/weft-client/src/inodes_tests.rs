//! The inode cache's bookkeeping: what a change of this client forgets, and which answers
//! may be remembered around changes.

use super::*;
use weft_proto::lock::{bits, LockGrant, LockMode, LockScope};
use weft_proto::msg::{Attr, Timestamp};

fn fid(oid: u32) -> Fid {
    Fid { seq: 0x2_0000_0000, oid, ver: 0 }
}

fn inode(oid: u32, kind: FileType, size_known: bool) -> InodeInfo {
    let t = Timestamp { sec: 1, nsec: 0 };
    InodeInfo {
        attr: Attr {
            fid: fid(oid),
            kind,
            mode: 0o644,
            uid: 0,
            gid: 0,
            nlink: 1,
            size: 0,
            size_known,
            blocks: 0,
            atime: t,
            mtime: t,
            ctime: t,
            rdev: 0,
            projid: 0,
            proj_inherit: false,
        },
        layout: None,
        lock: Some(LockGrant {
            handle: u64::from(oid),
            resource: fid(oid),
            mode: LockMode::Pr,
            scope: LockScope::Bits(bits::LOOKUP | bits::UPDATE | bits::LAYOUT),
        }),
        stripes: None,
    }
}

fn file(oid: u32) -> InodeInfo {
    inode(oid, FileType::Regular, true)
}

const DIR: u32 = 1;

fn looked_up(cache: &InodeCache, name: &str, answer: &InodeInfo, since: u64) {
    cache.remember(
        Answer { name: Some((fid(DIR), name.as_bytes())), inode: answer, name_only: false, bare: false },
        since,
    );
}

#[test]
fn a_lookup_answer_is_served_by_name_and_by_fid() {
    let cache = InodeCache::default();
    looked_up(&cache, "a", &file(10), cache.since());
    assert_eq!(cache.name(fid(DIR), b"a"), Some(file(10)));
    assert_eq!(cache.inode(fid(10)), Some(file(10)));
    assert_eq!(cache.name(fid(DIR), b"b"), None);
}

#[test]
fn what_cannot_be_served_is_not_kept() {
    let cache = InodeCache::default();
    let mut no_lock = file(10);
    no_lock.lock = None;
    looked_up(&cache, "a", &no_lock, cache.since());
    looked_up(&cache, "b", &inode(11, FileType::Regular, false), cache.since());
    assert_eq!(cache.len(), (0, 0), "no lock, or a size only the objects know");
    looked_up(&cache, "d", &inode(12, FileType::Directory, false), cache.since());
    assert!(cache.name(fid(DIR), b"d").is_some(), "a directory's size is the MDS's");
}

#[test]
fn an_unlink_forgets_the_name_the_inode_and_the_directory() {
    let cache = InodeCache::default();
    looked_up(&cache, "a", &file(10), cache.since());
    cache.remember(
        Answer { name: None, inode: &inode(DIR, FileType::Directory, true), name_only: false, bare: false },
        0,
    );
    let (touches, keep) = plan(&MdtRequest::Unlink(mdt::Unlink { parent: fid(DIR), name: b"a".to_vec() })).unwrap();
    assert_eq!(keep, Keep::Nothing);
    let change = cache.begin(&touches);
    assert_eq!(cache.name(fid(DIR), b"a"), None);
    assert_eq!(cache.inode(fid(10)), None, "its link count changes");
    assert_eq!(cache.inode(fid(DIR)), None, "its entries and times change");
    cache.end(change, Ok(None), &[]);
    assert_eq!(cache.len(), (0, 0));
}

#[test]
fn an_answer_that_crossed_a_change_of_this_client_is_not_kept() {
    let cache = InodeCache::default();
    // A stat is sent, then a chmod of the same file begins.
    let since = cache.since();
    let chmod = Touches { inodes: vec![fid(10)], ..Touches::default() };
    let change = cache.begin(&chmod);
    looked_up(&cache, "a", &file(10), since);
    assert_eq!(cache.inode(fid(10)), None, "answered while the change was under way");
    cache.end(change, Ok(None), &[]);
    looked_up(&cache, "a", &file(10), since);
    assert_eq!(cache.inode(fid(10)), None, "answered after it ended: the MDS may have run the stat first");
    // A stat sent after the change ended is kept; one of another inode was never refused.
    looked_up(&cache, "a", &file(10), cache.since());
    assert!(cache.inode(fid(10)).is_some());
    looked_up(&cache, "b", &file(11), since);
    assert!(cache.inode(fid(11)).is_some(), "nothing of this client touched file 11 or its directory");
}

#[test]
fn a_create_keeps_its_name_and_the_close_its_attributes() {
    let cache = InodeCache::default();
    let create = MdtRequest::Create(mdt::Create {
        parent: fid(DIR),
        name: b"new".to_vec(),
        mode: 0o644,
        exclusive: true,
        spec: None,
        open_flags: OPEN_WRITE,
        umask: 0,
    });
    let (touches, keep) = plan(&create).unwrap();
    let change = cache.begin(&touches);
    let Keep::Name { parent, name, name_only, bare } = keep else { panic!("{keep:?}") };
    assert!(name_only, "opened for writing: its size may change until the close");
    assert!(bare, "made new (O_EXCL): no extended attributes");
    cache.end(change, Ok(Some(Answer { name: Some((parent, &name)), inode: &file(20), name_only, bare })), &[]);
    assert_eq!(cache.name(fid(DIR), b"new"), None, "no attributes yet");
    assert_eq!(cache.bare(fid(20)), Some(20), "known bare under its create's lock");
    let close = MdtRequest::Close(mdt::Close {
        fid: fid(20),
        handle: 1,
        size_blocks: Some((3901, 8)),
        data_version: 0,
        mtime_ns: 0,
    });
    let (touches, keep) = plan(&close).unwrap();
    assert_eq!(keep, Keep::Inode);
    let change = cache.begin(&touches);
    assert_eq!(cache.bare(fid(20)), None, "touched by this client since: ask");
    let mut closed = file(20);
    closed.attr.size = 3901;
    cache.end(change, Ok(Some(Answer { name: None, inode: &closed, name_only: false, bare: false })), &[]);
    assert_eq!(cache.name(fid(DIR), b"new").map(|i| i.attr.size), Some(3901));
}

#[test]
fn a_change_answered_while_another_touched_the_same_keeps_nothing() {
    let cache = InodeCache::default();
    let first = cache.begin(&Touches { inodes: vec![fid(20)], ..Touches::default() });
    let second = cache.begin(&Touches { inodes: vec![fid(20)], ..Touches::default() });
    cache.end(second, Ok(None), &[]);
    cache.end(first, Ok(Some(Answer { name: None, inode: &file(20), name_only: false, bare: false })), &[]);
    assert_eq!(cache.inode(fid(20)), None, "the other change may have come after it at the MDS");
}

#[test]
fn removing_a_name_the_cache_cannot_follow_forgets_every_inode() {
    let cache = InodeCache::default();
    let since = cache.since();
    looked_up(&cache, "a", &file(10), since);
    cache.remember(Answer { name: None, inode: &file(11), name_only: false, bare: false }, since);
    let rename = MdtRequest::Rename(mdt::Rename {
        src_parent: fid(DIR),
        src_name: b"unknown".to_vec(),
        dst_parent: fid(DIR),
        dst_name: b"other".to_vec(),
        flags: 0,
    });
    let change = cache.begin(&plan(&rename).unwrap().0);
    assert_eq!(cache.inode(fid(11)), None, "file 11 may be the one that lost a link");
    assert_eq!(cache.name(fid(DIR), b"a"), None, "and so may file 10");
    cache.end(change, Ok(None), &[]);
    looked_up(&cache, "b", &file(12), since);
    assert_eq!(cache.inode(fid(12)), None, "an answer from before that is refused too");
    looked_up(&cache, "b", &file(12), cache.since());
    assert!(cache.inode(fid(12)).is_some(), "one from after it is kept");
}

fn mkdir(cache: &InodeCache, parent: u32, name: &str, made: u32) {
    let req =
        MdtRequest::Mkdir(mdt::Mkdir { parent: fid(parent), name: name.as_bytes().to_vec(), mode: 0o755, umask: 0 });
    let (touches, _) = plan(&req).unwrap();
    let change = cache.begin(&touches);
    let dir = inode(made, FileType::Directory, true);
    cache.end(
        change,
        Ok(Some(Answer { name: Some((fid(parent), name.as_bytes())), inode: &dir, name_only: false, bare: false })),
        &[],
    );
}

fn create(name: &str) -> MdtRequest {
    MdtRequest::Create(mdt::Create {
        parent: fid(2),
        name: name.as_bytes().to_vec(),
        mode: 0o644,
        exclusive: true,
        spec: None,
        open_flags: OPEN_WRITE,
        umask: 0,
    })
}

#[test]
fn a_directory_this_client_made_knows_which_names_it_lacks() {
    let cache = InodeCache::default();
    mkdir(&cache, DIR, "d", 2);
    assert_eq!(cache.absent(fid(2), b"x"), Some(2), "empty, under the mkdir's lock");
    assert_eq!(cache.absent(fid(DIR), b"x"), None, "a directory it did not make");
    let change = cache.begin(&plan(&create("x")).unwrap().0);
    assert_eq!(cache.absent(fid(2), b"x"), None, "being made: ask");
    assert_eq!(cache.absent(fid(2), b"y"), Some(2), "other names are still known absent");
    cache.end(change, Ok(None), &[]);
    assert_eq!(cache.absent(fid(2), b"x"), None, "made");
    let unlink = MdtRequest::Unlink(mdt::Unlink { parent: fid(2), name: b"x".to_vec() });
    let change = cache.begin(&plan(&unlink).unwrap().0);
    cache.end(change, Ok(None), &[]);
    assert_eq!(cache.absent(fid(2), b"x"), Some(2), "removed again");
}

#[test]
fn a_listing_ends_where_it_cannot_follow() {
    let cache = InodeCache::default();
    mkdir(&cache, DIR, "d", 2);
    let change = cache.begin(&plan(&create("x")).unwrap().0);
    cache.end(change, Err(()), &[]);
    assert_eq!(cache.absent(fid(2), b"y"), None, "a create that failed may have made the name");
    mkdir(&cache, DIR, "e", 3);
    // Two changes of one name overlap: which came last at the MDS is not known.
    let twice = |name: &str| {
        MdtRequest::Rename(mdt::Rename {
            src_parent: fid(3),
            src_name: b"a".to_vec(),
            dst_parent: fid(3),
            dst_name: name.as_bytes().to_vec(),
            flags: 0,
        })
    };
    let first = cache.begin(&plan(&twice("b")).unwrap().0);
    let second = cache.begin(&plan(&twice("c")).unwrap().0);
    cache.end(first, Ok(None), &[]);
    cache.end(second, Ok(None), &[]);
    assert_eq!(cache.absent(fid(3), b"z"), None);
    mkdir(&cache, DIR, "f", 4);
    cache.clear();
    assert_eq!(cache.absent(fid(4), b"z"), None, "an eviction ends every listing");
}

#[test]
fn reads_change_nothing() {
    assert!(plan(&MdtRequest::Getattr(mdt::Getattr { fid: fid(1) })).is_none());
    assert!(plan(&MdtRequest::Lookup(mdt::Lookup { parent: fid(1), name: b"x".to_vec() })).is_none());
    let (touches, keep) = plan(&MdtRequest::Open(mdt::Open { fid: fid(1), flags: 0 })).unwrap();
    assert!(touches.inodes.is_empty() && keep == Keep::Nothing, "a read-only open changes nothing cached");
}

#[test]
fn a_change_keeps_the_directories_it_came_with_unless_another_crossed_it() {
    let cache = InodeCache::default();
    let dir = inode(2, FileType::Directory, true);
    let first = cache.begin(&plan(&create("a")).unwrap().0);
    cache.end(first, Ok(None), std::slice::from_ref(&dir));
    assert_eq!(cache.inode(fid(2)), Some(dir.clone()), "the directory as the create left it");
    // Two creates in the directory at once: which read of it is the later is not known.
    let first = cache.begin(&plan(&create("b")).unwrap().0);
    let second = cache.begin(&plan(&create("c")).unwrap().0);
    cache.end(first, Ok(None), std::slice::from_ref(&dir));
    cache.end(second, Ok(None), std::slice::from_ref(&dir));
    assert_eq!(cache.inode(fid(2)), None);
}

#[test]
fn names_learned_under_an_older_lock_go_when_the_inode_comes_with_a_new_one() {
    let cache = InodeCache::default();
    looked_up(&cache, "a", &file(10), cache.since());
    // Another client renamed "a" to "b": the lock "a" was learned under was called back, and
    // this client learns "b" with a new lock on the same inode.
    let mut relocked = file(10);
    if let Some(l) = relocked.lock.as_mut() {
        l.handle = 99;
    }
    looked_up(&cache, "b", &relocked, cache.since());
    assert_eq!(cache.name(fid(DIR), b"b"), Some(relocked.clone()));
    assert_eq!(cache.name(fid(DIR), b"a"), None, "the old name is not vouched for by the new lock");
    // The same lock again keeps every name learned under it.
    looked_up(&cache, "c", &relocked, cache.since());
    assert!(cache.name(fid(DIR), b"b").is_some() && cache.name(fid(DIR), b"c").is_some());
}
