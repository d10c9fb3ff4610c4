//! Identity mapping of a server process: the nodemaps the management service hands out (in
//! the cluster map) and the MDT's root squash (`mdt.*.root_squash`, `mdt.*.nosquash_nids`),
//! applied to every request for an MDT, an OST or a lock manager before it runs (by the
//! [`crate::router::Router`], the one execute stage in front of the MDS, the OSS and the lock
//! service), and to the attributes the MDT answers (file system ids back to client ids).
//!
//! A request made in-process (`weft up`'s own mount) carries `weft_rpc::LOCAL_PEER`,
//! 127.0.0.1: it is mapped as a client at 127.0.0.1 would be, so a nodemap covering
//! 127.0.0.1 decides for it (and tests can exercise it like any mount on this host).
//!
//! Requests for the management service, parameters and replication are not mapped: they are
//! administration between servers and tools (Lustre's nodemaps cover the targets too).
//!
//! With the nodemaps inactive and no root squash, a request costs two atomic loads here.

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use weft_proto::acl;
use weft_proto::msg::mdt::MdtReply;
use weft_proto::msg::quota::{QuotaKind, QuotaOwner};
use weft_proto::msg::{
    Identity, InodeInfo, MdtRequest, OstRequest, RequestBody, RequestHeader, OPEN_TRUNC, OPEN_WRITE,
};
use weft_proto::nodemap::{IdType, Nodemap, NodemapConfig, RootSquash};
use weft_proto::{ErrorCode, WeftError, WeftResult};

#[derive(Default)]
pub(crate) struct Identities {
    /// Nodemaps active or root squash on: requests are mapped.
    on: AtomicBool,
    /// The nodemaps came with the cluster map: until then (a server starting) requests that
    /// would be mapped wait (`Again`, which clients resend), not run unmapped.
    known: AtomicBool,
    state: RwLock<State>,
    /// The fileset directories looked up.
    pub filesets: crate::fileset::Filesets,
}

#[derive(Default)]
struct State {
    nodemaps: Arc<NodemapConfig>,
    root_squash: Arc<RootSquash>,
}

/// The nodemap a request came under, to map its answer back.
pub(crate) struct Policy {
    config: Arc<NodemapConfig>,
    index: usize,
}

impl Policy {
    fn nodemap(&self) -> &Nodemap {
        &self.config.maps[self.index]
    }

    /// The directory the caller sees as its root, when not the root.
    pub fn fileset(&self) -> Option<&str> {
        self.nodemap().fileset.as_deref()
    }

    /// An MDT's answer with its ids as the client knows them; `acl`: the answer is a POSIX
    /// ACL's value (a GetXattr of one).
    pub fn map_reply(&self, reply: &mut MdtReply, acl: bool) {
        let m = self.nodemap();
        if m.admin && m.trusted {
            return;
        }
        if let MdtReply::Quota(q) = reply {
            q.id = m.id_to_client(quota_type(q.kind), q.id);
            return;
        }
        if let (MdtReply::Data(value), true) = (&mut *reply, acl) {
            if let Some(mapped) = map_acl(value, |t, id| m.id_to_client(t, id)) {
                *value = mapped;
            }
            return;
        }
        let map = |i: &mut InodeInfo| {
            i.attr.uid = m.id_to_client(IdType::Uid, i.attr.uid);
            i.attr.gid = m.id_to_client(IdType::Gid, i.attr.gid);
        };
        if let MdtReply::Changed(c) = reply {
            c.dirs.iter_mut().for_each(map);
            if let Some(i) = c.answer.inode_mut() {
                map(i);
            }
        } else if let Some(i) = reply.inode_mut() {
            map(i);
        }
    }
}

/// A request as the services are to see it.
pub(crate) struct Mapped<'a> {
    pub header: Cow<'a, RequestHeader>,
    pub body: RequestBody,
    /// The caller's nodemap, when nodemaps are active.
    pub policy: Option<Policy>,
}

impl Identities {
    pub fn set_nodemaps(&self, config: &NodemapConfig) {
        let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
        if *state.nodemaps != *config {
            state.nodemaps = Arc::new(config.clone());
            self.filesets.forget();
        }
        self.on.store(state.nodemaps.active || state.root_squash.ids != (0, 0), Ordering::Release);
        self.known.store(true, Ordering::Release);
    }

    pub fn nodemaps(&self) -> Arc<NodemapConfig> {
        self.state.read().unwrap_or_else(|p| p.into_inner()).nodemaps.clone()
    }

    pub fn root_squash(&self) -> Arc<RootSquash> {
        self.state.read().unwrap_or_else(|p| p.into_inner()).root_squash.clone()
    }

    /// `mdt.*.root_squash` (`ids`) and `mdt.*.nosquash_nids` (`nids`), each when given.
    pub fn set_root_squash(&self, ids: Option<&str>, nids: Option<&str>) -> WeftResult<()> {
        let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
        let mut next = (*state.root_squash).clone();
        if let Some(ids) = ids {
            next.ids = RootSquash::parse_ids(ids)?;
        }
        if let Some(nids) = nids {
            next.nosquash = RootSquash::parse_nids(nids)?;
            next.nosquash_text = nids.trim().trim_matches(|c| c == '"' || c == '\'').to_string();
            if matches!(next.nosquash_text.as_str(), "NONE" | "clear") {
                next.nosquash_text.clear();
            }
        }
        state.root_squash = Arc::new(next);
        self.on.store(state.nodemaps.active || state.root_squash.ids != (0, 0), Ordering::Release);
        Ok(())
    }

    /// `body` from `peer` under the caller's nodemap and the root squash: the header as the
    /// services are to see it (borrowed when nothing maps, the common case), the body with
    /// the ids it names mapped; the error answers a request the nodemap refuses.
    pub fn map<'a>(&self, peer: IpAddr, header: &'a RequestHeader, body: RequestBody) -> WeftResult<Mapped<'a>> {
        let unmapped = |body| Mapped { header: Cow::Borrowed(header), body, policy: None };
        let on = self.on.load(Ordering::Acquire);
        if !on && self.known.load(Ordering::Acquire) {
            return Ok(unmapped(body));
        }
        let is_mdt = matches!(body, RequestBody::Mdt { .. });
        if !is_mdt && !matches!(body, RequestBody::Ost { .. } | RequestBody::Ldlm { .. }) {
            return Ok(unmapped(body));
        }
        if !self.known.load(Ordering::Acquire) {
            return Err(WeftError::new(ErrorCode::Again, "this server does not know the nodemaps yet; retry"));
        }
        if !on {
            return Ok(unmapped(body));
        }
        let (config, squash) = {
            let state = self.state.read().unwrap_or_else(|p| p.into_inner());
            (state.nodemaps.clone(), state.root_squash.clone())
        };
        let who = &header.identity;
        let mut ids = (who.uid, who.gid, who.groups.clone());
        let mut policy = None;
        let mut body = body;
        if config.active {
            let nodemap = config.classify(peer);
            if nodemap.readonly_mount && modifies(&body) {
                let e = WeftError::new(
                    ErrorCode::ReadOnly,
                    format!("nodemap '{}' mounts read-only (readonly_mount=1)", nodemap.name),
                );
                return Err(e);
            }
            if !nodemap.is_identity() {
                ids = nodemap.to_fs(&ids)?;
                map_body_ids(nodemap, &mut body)?;
                let index = config.maps.iter().position(|m| m.name == nodemap.name).unwrap_or(0);
                policy = Some(Policy { config: config.clone(), index });
            }
        }
        if matches!(body, RequestBody::Ost { .. }) {
            // The OSS reads no caller: refused or not is all that mattered.
            return Ok(Mapped { header: Cow::Borrowed(header), body, policy: None });
        }
        if is_mdt {
            squash.apply(peer, &mut ids);
        }
        if (ids.0, ids.1, &ids.2) == (who.uid, who.gid, &who.groups) {
            return Ok(Mapped { header: Cow::Borrowed(header), body, policy });
        }
        let identity = Identity { uid: ids.0, gid: ids.1, groups: ids.2 };
        let mapped = RequestHeader { identity, ..header.clone() };
        Ok(Mapped { header: Cow::Owned(mapped), body, policy })
    }
}

/// The ids a request's body names, as the client knows them, to the file system's: a
/// chown's, and the owner an OST's blocks count against (for quotas; the client knows it
/// from the attributes it was answered, in client ids).
fn map_body_ids(nodemap: &Nodemap, body: &mut RequestBody) -> WeftResult<()> {
    let owner = |o: &mut QuotaOwner| {
        o.uid = nodemap.id_to_fs(IdType::Uid, o.uid).0;
        o.gid = nodemap.id_to_fs(IdType::Gid, o.gid).0;
        o.projid = nodemap.id_to_fs(IdType::Projid, o.projid).0;
    };
    match body {
        RequestBody::Mdt { op: MdtRequest::SetXattr(x), .. } if is_acl(&x.name) => {
            // An entry for an id the nodemap does not map would grant the squash id (or, two
            // of them, be kept unmapped): refused.
            let mut unmapped = None;
            let mapped = map_acl(&x.value, |t, id| {
                let (fs, squashed) = nodemap.id_to_fs(t, id);
                if squashed {
                    unmapped.get_or_insert(id);
                }
                fs
            });
            if let Some(id) = unmapped {
                return Err(WeftError::invalid(format!(
                    "the ACL names id {id}, which nodemap '{}' does not map to the file system's",
                    nodemap.name
                )));
            }
            if let Some(mapped) = mapped {
                x.value = mapped;
            }
        }
        RequestBody::Mdt { op: MdtRequest::QuotaGet(q), .. } => q.id = nodemap.id_to_fs(quota_type(q.kind), q.id).0,
        RequestBody::Mdt { op: MdtRequest::QuotaSet(q), .. } => q.id = nodemap.id_to_fs(quota_type(q.kind), q.id).0,
        RequestBody::Mdt { op: MdtRequest::QuotaDelete(q), .. } => q.id = nodemap.id_to_fs(quota_type(q.kind), q.id).0,
        RequestBody::Mdt { op: MdtRequest::Setattr(s), .. } => {
            s.set.uid = s.set.uid.map(|u| nodemap.id_to_fs(IdType::Uid, u).0);
            s.set.gid = s.set.gid.map(|g| nodemap.id_to_fs(IdType::Gid, g).0);
            s.set.projid = s.set.projid.map(|p| nodemap.id_to_fs(IdType::Projid, p).0);
        }
        RequestBody::Ost { op, .. } => match op {
            OstRequest::Write(w) => w.owner.iter_mut().for_each(owner),
            OstRequest::Fallocate(f) => f.owner.iter_mut().for_each(owner),
            OstRequest::Replay(r) => r.owner.iter_mut().for_each(owner),
            OstRequest::SetOwner(s) => owner(&mut s.owner),
            OstRequest::QuotaUsage(q) => q.id = nodemap.id_to_fs(quota_type(q.kind), q.id).0,
            _ => {}
        },
        _ => {}
    }
    Ok(())
}

fn quota_type(kind: QuotaKind) -> IdType {
    match kind {
        QuotaKind::User => IdType::Uid,
        QuotaKind::Group => IdType::Gid,
        QuotaKind::Project => IdType::Projid,
    }
}

pub(crate) fn is_acl(name: &[u8]) -> bool {
    name == acl::ACCESS_XATTR || name == acl::DEFAULT_XATTR
}

/// A POSIX ACL xattr with its named users' and groups' ids mapped by `map`; None when it is
/// no valid ACL (the MDS says why) or the mapped one is not (two ids mapped to one: the
/// value is kept as it was).
fn map_acl(value: &[u8], mut map: impl FnMut(IdType, u32) -> u32) -> Option<Vec<u8>> {
    let parsed = acl::Acl::from_xattr(value).ok()??;
    let mut entries: Vec<acl::AclEntry> = parsed
        .entries()
        .iter()
        .map(|e| match e.tag {
            acl::USER => acl::AclEntry { id: map(IdType::Uid, e.id), ..*e },
            acl::GROUP => acl::AclEntry { id: map(IdType::Gid, e.id), ..*e },
            _ => *e,
        })
        .collect();
    // Two ids mapped to one (answers: fs ids the client knows only as the squash id): one
    // entry, the first, so that no unmapped id is shown.
    entries.sort_by_key(|e| (e.tag, e.id));
    entries.dedup_by_key(|e| (e.tag, e.id));
    acl::Acl::new(entries).ok().map(|a| a.to_xattr())
}

/// Whether a request changes the file system (refused under `readonly_mount`): an MDT's
/// changes but opens for reading and closes, and writes to objects.
fn modifies(body: &RequestBody) -> bool {
    match body {
        RequestBody::Mdt { op, .. } => match op {
            MdtRequest::Open(o) => o.flags & (OPEN_WRITE | OPEN_TRUNC) != 0,
            MdtRequest::Close(_) | MdtRequest::ReplayOpens(_) => false,
            op => op.is_mutation(),
        },
        // Every change to objects (writes, destroys, replays, owners), not the commits.
        RequestBody::Ost { op, .. } => op.is_mutation() && !matches!(op, OstRequest::Sync(_) | OstRequest::Commit(_)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::msg::mdt;
    use weft_proto::nodemap::NodemapCommand;
    use weft_proto::Fid;

    fn header(uid: u32) -> RequestHeader {
        RequestHeader { identity: Identity { uid, gid: uid, groups: vec![] }, ..RequestHeader::default() }
    }

    /// Nodemaps active, `m` over 10.0.0.0/8 mapping client uid 2001 to 1001.
    fn mapped_10_8() -> (Identities, NodemapConfig) {
        let ids = Identities::default();
        let mut config = NodemapConfig::default();
        for cmd in [
            NodemapCommand::Add { name: "m".into() },
            NodemapCommand::AddRange { name: "m".into(), range: "10.0.0.0/8".into() },
            NodemapCommand::AddIdmap { name: "m".into(), idtype: IdType::Uid, idmap: "2001:1001".into() },
            NodemapCommand::Activate(true),
        ] {
            config.apply(&cmd).unwrap();
        }
        ids.set_nodemaps(&config);
        (ids, config)
    }

    #[test]
    fn requests_are_mapped_by_address_and_refused_read_only() {
        let (ids, mut config) = mapped_10_8();
        let getattr = || RequestBody::Mdt { mdt: 0, op: MdtRequest::Getattr(mdt::Getattr { fid: Fid::ROOT }) };
        let h = header(2001);
        let m = ids.map("10.1.2.3".parse().unwrap(), &h, getattr()).unwrap();
        assert_eq!(m.header.identity.uid, 1001);
        let owner = Some(QuotaOwner { uid: 2001, gid: 5, projid: 0 });
        let write = RequestBody::Ost {
            ost: 0,
            op: OstRequest::Write(weft_proto::msg::ost::Write {
                fid: Fid::ROOT,
                offset: 0,
                sync: false,
                owner,
                extents: Vec::new(),
            }),
        };
        match ids.map("10.1.2.3".parse().unwrap(), &h, write).unwrap().body {
            RequestBody::Ost { op: OstRequest::Write(w), .. } => {
                assert_eq!(w.owner, Some(QuotaOwner { uid: 1001, gid: 65534, projid: 0 }), "blocks count for fs ids")
            }
            other => panic!("{other:?}"),
        }
        let m = ids.map("192.168.0.1".parse().unwrap(), &h, getattr()).unwrap();
        assert_eq!(m.header.identity.uid, 65534, "default: not trusted, no idmap");
        config
            .apply(&NodemapCommand::Modify { name: "m".into(), property: "readonly_mount".into(), value: "1".into() })
            .unwrap();
        ids.set_nodemaps(&config);
        let unlink =
            RequestBody::Mdt { mdt: 0, op: MdtRequest::Unlink(mdt::Unlink { parent: Fid::ROOT, name: b"x".to_vec() }) };
        let e = ids.map("10.1.2.3".parse().unwrap(), &h, unlink).err().unwrap();
        assert_eq!(e.code, ErrorCode::ReadOnly);
        let read_open = RequestBody::Mdt { mdt: 0, op: MdtRequest::Open(mdt::Open { fid: Fid::ROOT, flags: 1 }) };
        assert!(ids.map("10.1.2.3".parse().unwrap(), &h, read_open).is_ok());
        // Every change to objects, not only writes.
        let destroy =
            RequestBody::Ost { ost: 0, op: OstRequest::Destroy(weft_proto::msg::ost::Destroy { fid: Fid::ROOT }) };
        let e = ids.map("10.1.2.3".parse().unwrap(), &h, destroy).err().unwrap();
        assert_eq!(e.code, ErrorCode::ReadOnly);
    }

    #[test]
    fn an_acl_naming_an_id_the_nodemap_does_not_map_is_refused() {
        let (ids, _) = mapped_10_8();
        let acl = |text: &str| {
            let entries: Vec<weft_proto::acl::AclEntry> = text
                .split(',')
                .map(|e| {
                    let f: Vec<&str> = e.split(':').collect();
                    let tag = match f[0] {
                        "u" if f[1].is_empty() => weft_proto::acl::USER_OBJ,
                        "u" => weft_proto::acl::USER,
                        "g" => weft_proto::acl::GROUP_OBJ,
                        "m" => weft_proto::acl::MASK,
                        _ => weft_proto::acl::OTHER,
                    };
                    weft_proto::acl::AclEntry { tag, id: f[1].parse().unwrap_or(u32::MAX), perm: f[2].parse().unwrap() }
                })
                .collect();
            weft_proto::acl::Acl::new(entries).unwrap().to_xattr()
        };
        let set = |value: Vec<u8>| RequestBody::Mdt {
            mdt: 0,
            op: MdtRequest::SetXattr(mdt::SetXattr {
                fid: Fid::ROOT,
                name: b"system.posix_acl_access".to_vec(),
                value,
                flags: 0,
            }),
        };
        let h = header(2001);
        let mapped = ids.map("10.1.2.3".parse().unwrap(), &h, set(acl("u::6,u:2001:6,g::4,m:x:6,o::4"))).unwrap();
        match mapped.body {
            RequestBody::Mdt { op: MdtRequest::SetXattr(x), .. } => {
                assert_eq!(x.value, acl("u::6,u:1001:6,g::4,m:x:6,o::4"), "the named user mapped")
            }
            other => panic!("{other:?}"),
        }
        let e = ids.map("10.1.2.3".parse().unwrap(), &h, set(acl("u::6,u:5000:7,u:5001:7,g::4,m:x:7,o::4"))).err();
        assert_eq!(e.map(|e| e.code), Some(ErrorCode::Invalid), "ids the nodemap does not map");
    }

    #[test]
    fn root_squash_alone_maps_mdt_requests_only() {
        let ids = Identities::default();
        let h = header(0);
        let getattr = RequestBody::Mdt { mdt: 0, op: MdtRequest::Getattr(mdt::Getattr { fid: Fid::ROOT }) };
        let early = ids.map("10.0.0.2".parse().unwrap(), &h, getattr.clone()).err().unwrap();
        assert_eq!(early.code, ErrorCode::Again, "no request runs unmapped before the map came");
        ids.set_nodemaps(&NodemapConfig::default());
        ids.set_root_squash(Some("500:501"), Some("10.0.0.1")).unwrap();
        assert_eq!(ids.map("10.0.0.2".parse().unwrap(), &h, getattr.clone()).unwrap().header.identity.uid, 500);
        assert_eq!(ids.map("10.0.0.1".parse().unwrap(), &h, getattr).unwrap().header.identity.uid, 0);
        assert!(ids.set_root_squash(Some("500"), None).is_err());
        let e = ids.set_root_squash(Some("0:100"), None).unwrap_err();
        assert!(e.message.contains("root would stay uid 0"), "{}", e.message);
    }
}
