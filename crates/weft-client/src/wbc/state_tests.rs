use super::*;
use weft_proto::lock::{LockMode, LockScope, WBC_LOCK_BITS};
use weft_proto::msg::Identity;

fn dir(names: &[(&str, u32)]) -> Dir {
    let fid = Fid::new(0x200000400, 7, 0);
    let lock = LockGrant { handle: 9, resource: fid, mode: LockMode::Ex, scope: LockScope::Bits(WBC_LOCK_BITS) };
    let attr = Attr {
        fid,
        kind: FileType::Directory,
        mode: 0o2775,
        uid: 1000,
        gid: 77,
        nlink: 2,
        size: 4096,
        size_known: true,
        blocks: 0,
        atime: Timestamp::default(),
        mtime: Timestamp::default(),
        ctime: Timestamp::default(),
        rdev: 0,
        projid: 0,
        proj_inherit: false,
    };
    let names = names
        .iter()
        .map(|(n, oid)| (n.as_bytes().to_vec(), (Fid::new(0x200000400, *oid, 0), FileType::Regular)))
        .collect();
    Dir::new(lock, attr, names)
}

fn alice() -> Caller {
    Caller { identity: Identity { uid: 1000, gid: 1000, groups: vec![] }, jobid: "j".into(), umask: 0o022 }
}

fn made(needs: CreateNeeds) -> InodeInfo {
    match needs {
        CreateNeeds::Made(i) => *i,
        other => panic!("{other:?}"),
    }
}

const T: Timestamp = Timestamp { sec: 100, nsec: 0 };

#[test]
fn creates_use_the_granted_fids_in_order_and_then_ask_for_more() {
    let mut d = dir(&[]);
    let now = Instant::now();
    assert_eq!(d.create(&alice(), b"a", 0o666, T, now).unwrap(), CreateNeeds::Fids);
    d.add_fids(Fid::new(0x200000400, 100, 0), 2);
    let a = made(d.create(&alice(), b"a", 0o666, T, now).unwrap());
    let b = made(d.create(&alice(), b"b", 0o666, T, now).unwrap());
    assert_eq!((a.attr.fid.oid, b.attr.fid.oid), (100, 101));
    // umask applied, the group of the setgid directory, no S_ISGID for a file.
    assert_eq!((a.attr.mode, a.attr.uid, a.attr.gid), (0o644, 1000, 77));
    assert_eq!(d.create(&alice(), b"c", 0o666, T, now).unwrap(), CreateNeeds::Fids);
    assert_eq!(d.create(&alice(), b"a", 0o666, T, now).unwrap_err().code, ErrorCode::Exists);
    assert_eq!(d.create(&alice(), b"x/y", 0o666, T, now).unwrap_err().code, ErrorCode::Invalid);
    assert_eq!(d.pending.len(), 2);
    assert_eq!(d.attr.mtime, T);
}

#[test]
fn names_there_before_are_known_and_left_to_the_mds() {
    let mut d = dir(&[("old", 5)]);
    d.add_fids(Fid::new(0x200000400, 100, 0), 10);
    let now = Instant::now();
    assert_eq!(d.create(&alice(), b"old", 0o644, T, now).unwrap_err().code, ErrorCode::Exists);
    // A member of the directory's group, with write by the mode: an ACL could say
    // otherwise, so the MDS decides.
    let bob = Caller { identity: Identity { uid: 2000, gid: 77, groups: vec![] }, ..alice() };
    assert!(!d.unlink(&bob, b"old", T, now).unwrap(), "sent on its own: the MDS checks it");
    assert_eq!(d.unlink(&alice(), b"none", T, now).unwrap_err().code, ErrorCode::NotFound);
    made(d.create(&alice(), b"new", 0o644, T, now).unwrap());
    assert!(d.unlink(&alice(), b"new", T, now).unwrap());
    assert!(!d.names.contains_key(b"new".as_slice()));
    let (ops, who) = d.take(100).unwrap();
    assert_eq!(ops.iter().map(|o| o.kind()).collect::<Vec<_>>(), ["create", "unlink"]);
    assert_eq!(who.identity.uid, 1000);
    assert!(d.take(100).is_none() && d.since.is_none());
}

#[test]
fn another_caller_waits_for_the_pending_ops_to_go() {
    let mut d = dir(&[]);
    d.add_fids(Fid::new(0x200000400, 100, 0), 10);
    let now = Instant::now();
    made(d.create(&alice(), b"a", 0o644, T, now).unwrap());
    let bob = Caller { identity: Identity { uid: 2000, gid: 2000, groups: vec![77] }, ..alice() };
    assert_eq!(d.create(&bob, b"b", 0o644, T, now).unwrap(), CreateNeeds::Flush);
    d.take(10).unwrap();
    made(d.create(&bob, b"b", 0o644, T, now).unwrap());
}

#[test]
fn setattr_of_a_file_made_here_by_its_owner_and_a_lost_batch() {
    let mut d = dir(&[]);
    d.add_fids(Fid::new(0x200000400, 100, 0), 10);
    let now = Instant::now();
    let a = made(d.create(&alice(), b"a", 0o644, T, now).unwrap());
    let set =
        SetAttr { mode: Some(0o600), mtime: Some(SetTime::At(Timestamp { sec: 5, nsec: 0 })), ..Default::default() };
    let after = d.setattr(&alice(), a.attr.fid, &set, T, now).unwrap();
    assert_eq!((after.attr.mode, after.attr.mtime.sec, after.attr.ctime), (0o600, 5, T));
    let chown = SetAttr { uid: Some(3), ..Default::default() };
    assert!(d.setattr(&alice(), a.attr.fid, &chown, T, now).is_none(), "the MDS does owners");
    let (ops, _) = d.take(10).unwrap();
    d.lost(&ops);
    assert!(d.names.is_empty() && d.made.is_empty());
}

#[test]
fn a_directory_being_given_back_makes_nothing_more() {
    let mut d = dir(&[]);
    d.add_fids(Fid::new(0x200000400, 100, 0), 10);
    let now = Instant::now();
    let a = made(d.create(&alice(), b"a", 0o644, T, now).unwrap());
    d.closing = true;
    assert_eq!(d.create(&alice(), b"b", 0o644, T, now).unwrap(), CreateNeeds::Closing);
    assert!(!d.unlink(&alice(), b"a", T, now).unwrap(), "the MDS does it, after the last batch");
    let set = SetAttr { mode: Some(0o600), ..Default::default() };
    assert!(d.setattr(&alice(), a.attr.fid, &set, T, now).is_none());
    assert_eq!(d.pending.len(), 1);
}

#[test]
fn the_owner_and_root_remove_names_that_were_there_in_the_batch() {
    let now = Instant::now();
    let mut d = dir(&[("old", 5), ("older", 6), ("sub", 7)]);
    d.names.insert(b"sub".to_vec(), (Fid::new(0x200000400, 7, 0), FileType::Directory));
    assert!(d.unlink(&alice(), b"old", T, now).unwrap(), "the directory's owner");
    assert!(!d.names.contains_key(b"old".as_slice()));
    assert_eq!(d.unlink(&alice(), b"old", T, now).unwrap_err().code, ErrorCode::NotFound, "gone here at once");
    assert_eq!(d.unlink(&alice(), b"sub", T, now).unwrap_err().code, ErrorCode::IsDir);
    // Another caller's ops wait for the pending ones to go (one identity per batch).
    let root = Caller { identity: Identity { uid: 0, gid: 0, groups: vec![] }, ..alice() };
    assert!(!d.unlink(&root, b"older", T, now).unwrap());
    let (ops, _) = d.take(100).unwrap();
    assert_eq!(ops, [BatchOp::Unlink { parent: d.attr.fid, name: b"old".to_vec() }]);
    assert!(d.unlink(&root, b"older", T, now).unwrap(), "root, once the batch went");
    // An owner without write by the mode (chmod a-w): the MDS refuses it, alone.
    let mut ro = dir(&[("f", 8)]);
    ro.attr.mode = 0o555;
    assert!(!ro.unlink(&alice(), b"f", T, now).unwrap());
}
