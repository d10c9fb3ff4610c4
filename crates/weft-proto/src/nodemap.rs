//! Nodemaps (Lustre's `lctl nodemap_*`) and the MDT's root squash: which client addresses
//! get which identity policy, and the mapping itself. The management service keeps a
//! [`NodemapConfig`] in its cluster map; every server follows the map and maps each request's
//! caller with [`NodemapConfig::classify`] and [`Nodemap::to_fs`] before running it.
//!
//! A request from an address in a nodemap's ranges gets that nodemap's policy, any other the
//! `default` nodemap's, which always exists. With the nodemaps inactive (the default) ids
//! are used as given. Only IPv4 client addresses fall in ranges; others are `default`'s.
//!
//! Mapping, as Lustre's `nodemap_map_id()`, both ways (client to file system for the
//! request, file system to client for the attributes answered):
//! - id 0: kept when `admin`, else squashed (`squash_uid`, `squash_gid`, `squash_projid`),
//!   except project 0, which is no project and stays 0;
//! - other ids, `trusted`: as given;
//! - other ids, not `trusted`: through the nodemap's idmap, and squashed when not in it
//!   (refused instead with `deny_unknown`).

use crate::{ErrorCode, WeftError, WeftResult};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr};

/// The nodemap of clients that match no range; it cannot be removed.
pub const DEFAULT_NODEMAP: &str = "default";
/// `squash_uid`, `squash_gid`, `squash_projid` of a new nodemap (Lustre's since 2.15.61).
pub const SQUASH_ID_DEFAULT: u32 = 65534;
/// Longest nodemap name (Lustre's `LUSTRE_NODEMAP_NAME_LENGTH`).
pub const NODEMAP_NAME_MAX: usize = 16;
/// Nodemaps at most, ranges and idmap entries per nodemap at most: a map stays small.
pub const NODEMAPS_MAX: usize = 256;
pub const NODEMAP_ENTRIES_MAX: usize = 4096;
/// The properties `nodemap modify` sets.
pub const PROPERTIES: &[&str] =
    &["admin", "trusted", "squash_uid", "squash_gid", "squash_projid", "deny_unknown", "readonly_mount"];

/// A caller's uid, gid and supplementary groups (a `msg::Identity`'s, apart, so that this
/// module stays a leaf).
pub type Ids = (u32, u32, Vec<u32>);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum IdType {
    Uid,
    Gid,
    Projid,
}

impl IdType {
    pub fn parse(text: &str) -> WeftResult<IdType> {
        match text {
            "uid" => Ok(IdType::Uid),
            "gid" => Ok(IdType::Gid),
            "projid" => Ok(IdType::Projid),
            _ => Err(WeftError::invalid(format!("idtype '{text}': allowed are uid, gid, projid"))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            IdType::Uid => "uid",
            IdType::Gid => "gid",
            IdType::Projid => "projid",
        }
    }
}

/// A range of IPv4 client addresses, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NidRange {
    /// Numbered across all nodemaps, as Lustre numbers them.
    pub id: u32,
    pub start: u32,
    pub end: u32,
}

impl NidRange {
    pub fn contains(&self, ip: u32) -> bool {
        self.start <= ip && ip <= self.end
    }
    fn overlaps(&self, start: u32, end: u32) -> bool {
        self.start <= end && start <= self.end
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdMapEntry {
    pub idtype: IdType,
    pub client: u32,
    pub fs: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nodemap {
    pub name: String,
    pub id: u32,
    pub admin: bool,
    pub trusted: bool,
    pub deny_unknown: bool,
    pub readonly_mount: bool,
    pub squash_uid: u32,
    pub squash_gid: u32,
    pub squash_projid: u32,
    pub ranges: Vec<NidRange>,
    pub idmaps: Vec<IdMapEntry>,
    /// The directory (absolute, normalized) its clients see as their root; None: the root.
    pub fileset: Option<String>,
}

impl Nodemap {
    fn new(name: &str, id: u32) -> Nodemap {
        Nodemap {
            name: name.to_string(),
            id,
            admin: false,
            trusted: false,
            deny_unknown: false,
            readonly_mount: false,
            squash_uid: SQUASH_ID_DEFAULT,
            squash_gid: SQUASH_ID_DEFAULT,
            squash_projid: SQUASH_ID_DEFAULT,
            ranges: Vec::new(),
            idmaps: Vec::new(),
            fileset: None,
        }
    }

    fn squash(&self, t: IdType) -> u32 {
        match t {
            IdType::Uid => self.squash_uid,
            IdType::Gid => self.squash_gid,
            IdType::Projid => self.squash_projid,
        }
    }

    /// `id` of type `t` from a client to the file system: the id and whether it was squashed.
    pub fn id_to_fs(&self, t: IdType, id: u32) -> (u32, bool) {
        if id == 0 && t == IdType::Projid {
            return (0, false); // no project: nobody's id to squash
        }
        if id == 0 {
            return if self.admin { (0, false) } else { (self.squash(t), true) };
        }
        if self.trusted {
            return (id, false);
        }
        match self.idmaps.iter().find(|m| m.idtype == t && m.client == id) {
            Some(m) => (m.fs, false),
            None => (self.squash(t), true),
        }
    }

    /// `id` of type `t` from the file system to a client (the attributes answered).
    pub fn id_to_client(&self, t: IdType, id: u32) -> u32 {
        if id == 0 && t == IdType::Projid {
            return 0;
        }
        if id == 0 {
            return if self.admin { 0 } else { self.squash(t) };
        }
        if self.trusted {
            return id;
        }
        match self.idmaps.iter().find(|m| m.idtype == t && m.fs == id) {
            Some(m) => m.client,
            None => self.squash(t),
        }
    }

    /// A request's identity (uid, gid, supplementary groups) as the file system sees it;
    /// refused (EACCES) when `deny_unknown` and its uid was squashed.
    pub fn to_fs(&self, who: &Ids) -> WeftResult<Ids> {
        let (uid, squashed) = self.id_to_fs(IdType::Uid, who.0);
        if squashed && self.deny_unknown {
            return Err(WeftError::new(
                ErrorCode::Access,
                format!("uid {} is not known to nodemap '{}' (deny_unknown)", who.0, self.name),
            ));
        }
        let (gid, _) = self.id_to_fs(IdType::Gid, who.1);
        let mut groups: Vec<u32> = who.2.iter().map(|g| self.id_to_fs(IdType::Gid, *g).0).collect();
        groups.sort_unstable();
        groups.dedup();
        Ok((uid, gid, groups))
    }

    /// Whether mapping changes nothing for anyone (a trusted admin nodemap, not read-only,
    /// without fileset): requests from it need no work at all.
    pub fn is_identity(&self) -> bool {
        self.admin && self.trusted && !self.readonly_mount && self.fileset.is_none()
    }
}

/// Every nodemap, and whether they are in force (`nodemap activate`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodemapConfig {
    pub active: bool,
    /// `default` first.
    pub maps: Vec<Nodemap>,
    pub next_map_id: u32,
    pub next_range_id: u32,
}

impl Default for NodemapConfig {
    fn default() -> Self {
        NodemapConfig { active: false, maps: vec![Nodemap::new(DEFAULT_NODEMAP, 0)], next_map_id: 1, next_range_id: 1 }
    }
}

/// A change to the nodemaps (`weft nodemap ...`), made by the management service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodemapCommand {
    Activate(bool),
    Add {
        name: String,
    },
    Del {
        name: String,
    },
    AddRange {
        name: String,
        range: String,
    },
    DelRange {
        name: String,
        range: String,
    },
    AddIdmap {
        name: String,
        idtype: IdType,
        idmap: String,
    },
    DelIdmap {
        name: String,
        idtype: IdType,
        idmap: String,
    },
    Modify {
        name: String,
        property: String,
        value: String,
    },
    /// `fileset: None` removes the fileset.
    SetFileset {
        name: String,
        fileset: Option<String>,
    },
}

fn check_name(name: &str) -> WeftResult<()> {
    if name.is_empty()
        || name.len() > NODEMAP_NAME_MAX
        || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(WeftError::invalid(format!(
            "nodemap name '{name}': 1 to {NODEMAP_NAME_MAX} letters, digits, '_' or '-'"
        )));
    }
    Ok(())
}

impl NodemapConfig {
    pub fn get(&self, name: &str) -> Option<&Nodemap> {
        self.maps.iter().find(|m| m.name == name)
    }

    fn get_mut(&mut self, name: &str) -> WeftResult<&mut Nodemap> {
        self.maps
            .iter_mut()
            .find(|m| m.name == name)
            .ok_or_else(|| WeftError::not_found(format!("no nodemap '{name}' (weft nodemap list shows them)")))
    }

    /// The nodemap a client at `peer` belongs to.
    pub fn classify(&self, peer: IpAddr) -> &Nodemap {
        let v4 = match peer {
            IpAddr::V4(a) => Some(a),
            IpAddr::V6(a) => a.to_ipv4_mapped(),
        };
        let found = v4.and_then(|a| {
            let ip = u32::from(a);
            self.maps.iter().find(|m| m.ranges.iter().any(|r| r.contains(ip)))
        });
        found.unwrap_or(&self.maps[0])
    }

    /// Applies `cmd`: Ok(whether it changed something), or why it is refused.
    pub fn apply(&mut self, cmd: &NodemapCommand) -> WeftResult<bool> {
        match cmd {
            NodemapCommand::Activate(on) => Ok(std::mem::replace(&mut self.active, *on) != *on),
            NodemapCommand::Add { name } => {
                check_name(name)?;
                if self.get(name).is_some() {
                    return Err(WeftError::new(ErrorCode::Exists, format!("nodemap '{name}' exists already")));
                }
                if self.maps.len() >= NODEMAPS_MAX {
                    return Err(WeftError::invalid(format!("{NODEMAPS_MAX} nodemaps at most")));
                }
                let id = self.next_map_id;
                self.next_map_id += 1;
                self.maps.push(Nodemap::new(name, id));
                Ok(true)
            }
            NodemapCommand::Del { name } => {
                if name == DEFAULT_NODEMAP {
                    return Err(WeftError::invalid("the default nodemap cannot be removed"));
                }
                self.get_mut(name)?;
                self.maps.retain(|m| m.name != *name);
                Ok(true)
            }
            NodemapCommand::AddRange { name, range } => {
                let (start, end) = parse_range(range)?;
                if name == DEFAULT_NODEMAP {
                    return Err(WeftError::invalid("the default nodemap takes no ranges: it has every other client"));
                }
                self.get_mut(name)?;
                for m in &self.maps {
                    if let Some(r) = m.ranges.iter().find(|r| r.overlaps(start, end)) {
                        return Err(WeftError::new(
                            ErrorCode::Exists,
                            format!(
                                "range {range} overlaps range {} of nodemap '{}' ({} - {})",
                                r.id,
                                m.name,
                                Ipv4Addr::from(r.start),
                                Ipv4Addr::from(r.end)
                            ),
                        ));
                    }
                }
                let id = self.next_range_id;
                let map = self.get_mut(name)?;
                if map.ranges.len() >= NODEMAP_ENTRIES_MAX {
                    return Err(WeftError::invalid(format!("{NODEMAP_ENTRIES_MAX} ranges per nodemap at most")));
                }
                map.ranges.push(NidRange { id, start, end });
                self.next_range_id += 1;
                Ok(true)
            }
            NodemapCommand::DelRange { name, range } => {
                let (start, end) = parse_range(range)?;
                let map = self.get_mut(name)?;
                let before = map.ranges.len();
                map.ranges.retain(|r| (r.start, r.end) != (start, end));
                if map.ranges.len() == before {
                    return Err(WeftError::not_found(format!("nodemap '{name}' has no range {range}")));
                }
                Ok(true)
            }
            NodemapCommand::AddIdmap { name, idtype, idmap } => {
                let pairs = parse_idmap(idmap)?;
                if name == DEFAULT_NODEMAP {
                    return Err(WeftError::invalid("the default nodemap takes no idmaps"));
                }
                let map = self.get_mut(name)?;
                for (client, fs) in &pairs {
                    if let Some(m) =
                        map.idmaps.iter().find(|m| m.idtype == *idtype && (m.client == *client || m.fs == *fs))
                    {
                        return Err(WeftError::new(
                            ErrorCode::Exists,
                            format!(
                                "nodemap '{name}' maps {} {}:{} already; del-idmap it first",
                                idtype.name(),
                                m.client,
                                m.fs
                            ),
                        ));
                    }
                }
                if map.idmaps.len() + pairs.len() > NODEMAP_ENTRIES_MAX {
                    return Err(WeftError::invalid(format!("{NODEMAP_ENTRIES_MAX} idmaps per nodemap at most")));
                }
                map.idmaps.extend(pairs.into_iter().map(|(client, fs)| IdMapEntry { idtype: *idtype, client, fs }));
                map.idmaps.sort_by_key(|m| (m.idtype, m.client));
                Ok(true)
            }
            NodemapCommand::DelIdmap { name, idtype, idmap } => {
                let pairs = parse_idmap(idmap)?;
                let map = self.get_mut(name)?;
                let before = map.idmaps.len();
                map.idmaps.retain(|m| m.idtype != *idtype || !pairs.contains(&(m.client, m.fs)));
                if map.idmaps.len() == before {
                    return Err(WeftError::not_found(format!(
                        "nodemap '{name}' has no {} idmap {idmap}",
                        idtype.name()
                    )));
                }
                Ok(true)
            }
            NodemapCommand::Modify { name, property, value } => {
                let map = self.get_mut(name)?;
                let flag = || parse_flag(property, value);
                let squash = || -> WeftResult<u32> {
                    value.trim().parse().ok().filter(|id| *id != 0).ok_or_else(|| {
                        WeftError::invalid(format!(
                            "{property}={value}: give an id from 1 to 4294967295 (0 is not allowed)"
                        ))
                    })
                };
                let before = map.clone();
                match property.as_str() {
                    "admin" => map.admin = flag()?,
                    "trusted" => map.trusted = flag()?,
                    "deny_unknown" => map.deny_unknown = flag()?,
                    "readonly_mount" => map.readonly_mount = flag()?,
                    "squash_uid" => map.squash_uid = squash()?,
                    "squash_gid" => map.squash_gid = squash()?,
                    "squash_projid" => map.squash_projid = squash()?,
                    _ => {
                        return Err(WeftError::invalid(format!(
                            "unknown nodemap property '{property}': allowed are {}",
                            PROPERTIES.join(", ")
                        )))
                    }
                }
                Ok(*map != before)
            }
            NodemapCommand::SetFileset { name, fileset } => {
                let fileset = fileset.as_deref().map(normalize_fileset).transpose()?.flatten();
                let map = self.get_mut(name)?;
                Ok(std::mem::replace(&mut map.fileset, fileset.clone()) != fileset)
            }
        }
    }

    /// `nodemap.active` and `nodemap.NAME.LEAF` with their values, in Lustre's shapes.
    pub fn param_values(&self) -> Vec<(String, String)> {
        let mut out = vec![("nodemap.active".to_string(), u8::from(self.active).to_string())];
        for m in &self.maps {
            let leaf = |l: &str| format!("nodemap.{}.{l}", m.name);
            out.push((leaf("id"), m.id.to_string()));
            out.push((leaf("admin_nodemap"), u8::from(m.admin).to_string()));
            out.push((leaf("trusted_nodemap"), u8::from(m.trusted).to_string()));
            out.push((leaf("deny_unknown"), u8::from(m.deny_unknown).to_string()));
            out.push((leaf("readonly_mount"), u8::from(m.readonly_mount).to_string()));
            out.push((leaf("squash_uid"), m.squash_uid.to_string()));
            out.push((leaf("squash_gid"), m.squash_gid.to_string()));
            out.push((leaf("squash_projid"), m.squash_projid.to_string()));
            let list = |items: Vec<String>| {
                if items.is_empty() {
                    "[\n]".to_string()
                } else {
                    format!("[\n{}\n]", items.join(",\n"))
                }
            };
            let idmaps = m
                .idmaps
                .iter()
                .map(|i| format!(" {{ idtype: {}, client_id: {}, fs_id: {} }}", i.idtype.name(), i.client, i.fs));
            out.push((leaf("idmap"), list(idmaps.collect())));
            let ranges = m.ranges.iter().map(|r| {
                let (s, e) = (Ipv4Addr::from(r.start), Ipv4Addr::from(r.end));
                format!(" {{ id: {}, start_nid: {s}@tcp, end_nid: {e}@tcp }}", r.id)
            });
            out.push((leaf("ranges"), list(ranges.collect())));
            let fileset = m.fileset.iter().map(|f| format!(" {{ primary:     {f} }}"));
            out.push((leaf("fileset"), list(fileset.collect())));
        }
        out
    }
}

fn parse_flag(property: &str, value: &str) -> WeftResult<bool> {
    match value.trim() {
        "1" | "on" | "true" | "yes" => Ok(true),
        "0" | "off" | "false" | "no" => Ok(false),
        _ => Err(WeftError::invalid(format!("{property}={value}: allowed values are 0, 1"))),
    }
}

/// `1`, `on`, `true`, `yes` or their opposites (`nodemap activate`).
pub fn parse_on_off(text: &str) -> WeftResult<bool> {
    parse_flag("activate", text)
}

/// `CLIENTID:FSID`, or ranges of one length `CLIENTID-END:FSID-END` (Lustre's): the pairs.
pub fn parse_idmap(text: &str) -> WeftResult<Vec<(u32, u32)>> {
    let bad = || {
        WeftError::invalid(format!(
            "idmap '{text}': give CLIENTID:FSID, e.g. 2001:1001, or ranges of one length, e.g. 2001-2010:1001-1010 (ids from 1)"
        ))
    };
    let (c, f) = text.split_once(':').ok_or_else(bad)?;
    let range = |t: &str| -> WeftResult<(u32, u32)> {
        let (a, b) = t.split_once('-').unwrap_or((t, t));
        let (a, b): (u32, u32) = (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
        if a == 0 || b < a {
            return Err(bad());
        }
        Ok((a, b))
    };
    let ((c0, c1), (f0, f1)) = (range(c)?, range(f)?);
    if c1 - c0 != f1 - f0 || (c1 - c0) as usize >= NODEMAP_ENTRIES_MAX {
        return Err(bad());
    }
    Ok((0..=c1 - c0).map(|i| (c0 + i, f0 + i)).collect())
}

/// A fileset as kept: absolute, no `.`/`..`, no trailing slash; None for `/` itself.
pub fn normalize_fileset(text: &str) -> WeftResult<Option<String>> {
    if !text.starts_with('/') {
        return Err(WeftError::invalid(format!("fileset '{text}': give an absolute path such as /projects/a")));
    }
    let parts: Vec<&str> = text.split('/').filter(|p| !p.is_empty()).collect();
    if parts.iter().any(|p| *p == "." || *p == "..") {
        return Err(WeftError::invalid(format!("fileset '{text}': no '.' or '..' components")));
    }
    Ok((!parts.is_empty()).then(|| format!("/{}", parts.join("/"))))
}

/// A range of client addresses: `a.b.c.d`, CIDR `a.b.c.d/N`, Lustre's `a.b.c.[x-y]`, or `*`
/// (every IPv4 address); an `@tcp` suffix is accepted. Both ends, as numbers.
pub fn parse_range(text: &str) -> WeftResult<(u32, u32)> {
    let bad = |why: &str| {
        WeftError::invalid(format!(
            "range '{text}': {why} (give 192.168.1.5, 192.168.1.0/24 or 192.168.1.[1-254], optionally @tcp)"
        ))
    };
    let t = text.trim();
    let t = match t.split_once('@') {
        Some((addr, net)) if net.starts_with("tcp") && net[3..].bytes().all(|b| b.is_ascii_digit()) => addr,
        Some((_, net)) => return Err(bad(&format!("network '{net}' is not tcp"))),
        None => t,
    };
    if t == "*" {
        return Ok((0, u32::MAX));
    }
    if let Some((addr, bits)) = t.split_once('/') {
        let a: Ipv4Addr = addr.parse().map_err(|_| bad("not an IPv4 address"))?;
        let n: u32 = bits.parse().ok().filter(|n| *n <= 32).ok_or_else(|| bad("the prefix length is 0 to 32"))?;
        let mask = if n == 0 { 0 } else { u32::MAX << (32 - n) };
        let start = u32::from(a) & mask;
        return Ok((start, start | !mask));
    }
    if let Some((head, last)) = t.rsplit_once('.') {
        if let Some(inner) = last.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let (x, y) = inner.split_once('-').unwrap_or((inner, inner));
            let octet = |s: &str| s.trim().parse::<u8>().map_err(|_| bad("an octet is 0 to 255"));
            let (x, y) = (octet(x)?, octet(y)?);
            if x > y {
                return Err(bad("the range's start is after its end"));
            }
            let base: Ipv4Addr = format!("{head}.0").parse().map_err(|_| bad("not an IPv4 address"))?;
            let base = u32::from(base);
            return Ok((base | u32::from(x), base | u32::from(y)));
        }
    }
    let a: Ipv4Addr = t.parse().map_err(|_| bad("not an IPv4 address"))?;
    Ok((u32::from(a), u32::from(a)))
}

/// The MDT's root squash (`mdt.*.root_squash`, `mdt.*.nosquash_nids`): root from any
/// address not in `nosquash` is the squash uid and gid, with no supplementary groups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RootSquash {
    /// (uid, gid); (0, 0): off.
    pub ids: (u32, u32),
    pub nosquash: Vec<(u32, u32)>,
    /// `nosquash_nids` as given, for get-param.
    pub nosquash_text: String,
}

impl RootSquash {
    /// `UID:GID`.
    pub fn parse_ids(text: &str) -> WeftResult<(u32, u32)> {
        let bad = || WeftError::invalid(format!("root_squash '{text}': give UID:GID, e.g. 65534:65534 (0:0 is off)"));
        let (u, g) = text.trim().split_once(':').ok_or_else(bad)?;
        let ids: (u32, u32) = (u.trim().parse().map_err(|_| bad())?, g.trim().parse().map_err(|_| bad())?);
        if ids.0 == 0 && ids.1 != 0 {
            // Squash on, and root still root: not what anyone means.
            return Err(WeftError::invalid(format!(
                "root_squash '{text}': root would stay uid 0; give a squash uid other than 0 (0:0 is off)"
            )));
        }
        Ok(ids)
    }

    /// A list of ranges separated by spaces or commas; `NONE`, `clear` or nothing empty it.
    pub fn parse_nids(text: &str) -> WeftResult<Vec<(u32, u32)>> {
        let t = text.trim().trim_matches(|c| c == '"' || c == '\'');
        if t.is_empty() || t == "NONE" || t == "clear" {
            return Ok(Vec::new());
        }
        t.split([' ', ',']).filter(|s| !s.is_empty()).map(parse_range).collect()
    }

    /// `who` from `peer`, squashed when it is root and the squash is on.
    pub fn apply(&self, peer: IpAddr, who: &mut Ids) {
        if self.ids == (0, 0) || who.0 != 0 {
            return;
        }
        let ip = match peer {
            IpAddr::V4(a) => Some(u32::from(a)),
            IpAddr::V6(a) => a.to_ipv4_mapped().map(u32::from),
        };
        if ip.is_some_and(|ip| self.nosquash.iter().any(|(s, e)| *s <= ip && ip <= *e)) {
            return;
        }
        who.0 = self.ids.0;
        who.1 = self.ids.1;
        who.2.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(t: &str) -> u32 {
        u32::from(t.parse::<Ipv4Addr>().unwrap())
    }

    #[test]
    fn ranges_in_every_form() {
        assert_eq!(parse_range("127.0.0.2").unwrap(), (ip("127.0.0.2"), ip("127.0.0.2")));
        assert_eq!(parse_range("127.0.0.2@tcp").unwrap(), (ip("127.0.0.2"), ip("127.0.0.2")));
        assert_eq!(parse_range("10.1.0.0/16").unwrap(), (ip("10.1.0.0"), ip("10.1.255.255")));
        assert_eq!(parse_range("10.1.2.77/24").unwrap(), (ip("10.1.2.0"), ip("10.1.2.255")));
        assert_eq!(parse_range("192.168.1.[1-254]@tcp0").unwrap(), (ip("192.168.1.1"), ip("192.168.1.254")));
        assert_eq!(parse_range("*").unwrap(), (0, u32::MAX));
        for bad in ["1.2.3", "1.2.3.4/33", "1.2.3.[9-2]", "1.2.3.4@o2ib", "host", "1.2.3.[1-300]"] {
            let e = parse_range(bad).unwrap_err().message;
            assert!(e.contains(bad) && e.contains("give"), "{bad}: {e}");
        }
    }

    #[test]
    fn commands_keep_default_refuse_overlaps_and_name_properties() {
        let mut c = NodemapConfig::default();
        let add = |c: &mut NodemapConfig, n: &str| c.apply(&NodemapCommand::Add { name: n.into() });
        add(&mut c, "a").unwrap();
        add(&mut c, "b").unwrap();
        assert_eq!(add(&mut c, "a").unwrap_err().code, ErrorCode::Exists);
        assert!(c.apply(&NodemapCommand::Del { name: "default".into() }).is_err());
        let range = |n: &str, r: &str| NodemapCommand::AddRange { name: n.into(), range: r.into() };
        c.apply(&range("a", "127.0.0.[2-3]")).unwrap();
        let e = c.apply(&range("b", "127.0.0.0/24")).unwrap_err().message;
        assert!(e.contains("overlaps") && e.contains("'a'"), "{e}");
        c.apply(&range("b", "127.0.0.4")).unwrap();
        assert_eq!(c.classify("127.0.0.3".parse().unwrap()).name, "a");
        assert_eq!(c.classify("127.0.0.4".parse().unwrap()).name, "b");
        assert_eq!(c.classify("127.0.0.1".parse().unwrap()).name, "default");
        let modify =
            |p: &str, v: &str| NodemapCommand::Modify { name: "a".into(), property: p.into(), value: v.into() };
        let e = c.apply(&modify("colour", "1")).unwrap_err().message;
        assert!(e.contains("admin, trusted, squash_uid"), "{e}");
        assert!(c.apply(&modify("squash_uid", "0")).unwrap_err().message.contains("0 is not allowed"));
        assert!(c.apply(&modify("admin", "maybe")).unwrap_err().message.contains("allowed values are 0, 1"));
        assert!(c.apply(&modify("admin", "1")).unwrap());
        assert!(!c.apply(&modify("admin", "1")).unwrap(), "no change");
        c.apply(&NodemapCommand::Del { name: "a".into() }).unwrap();
        assert_eq!(c.classify("127.0.0.3".parse().unwrap()).name, "default");
    }

    #[test]
    fn identities_map_both_ways() {
        let mut c = NodemapConfig::default();
        c.apply(&NodemapCommand::Add { name: "m".into() }).unwrap();
        let idmap = |t, m: &str| NodemapCommand::AddIdmap { name: "m".into(), idtype: t, idmap: m.into() };
        c.apply(&idmap(IdType::Uid, "2001:1001")).unwrap();
        c.apply(&idmap(IdType::Gid, "3001:1501")).unwrap();
        assert!(c.apply(&idmap(IdType::Uid, "2001:1002")).is_err(), "one mapping per client id");
        c.apply(&idmap(IdType::Uid, "3000-3002:5000-5002")).unwrap();
        assert!(c.apply(&idmap(IdType::Uid, "4000-4002:6000-6001")).unwrap_err().message.contains("one length"));
        assert_eq!(c.get("m").unwrap().id_to_fs(IdType::Uid, 3002), (5002, false));
        c.apply(&NodemapCommand::DelIdmap {
            name: "m".into(),
            idtype: IdType::Uid,
            idmap: "3000-3002:5000-5002".into(),
        })
        .unwrap();
        let m = c.get("m").unwrap().clone();
        let who = (2001, 3001, vec![3001, 7]);
        assert_eq!(m.to_fs(&who).unwrap(), (1001, 1501, vec![1501, 65534]));
        assert_eq!(m.to_fs(&(0, 0, vec![])).unwrap(), (65534, 65534, vec![]));
        assert_eq!(m.to_fs(&(5, 5, vec![])).unwrap().0, 65534);
        assert_eq!(m.id_to_client(IdType::Uid, 1001), 2001);
        assert_eq!(m.id_to_client(IdType::Uid, 1002), 65534);
        let mut denying = m.clone();
        denying.deny_unknown = true;
        assert_eq!(denying.to_fs(&(5, 5, vec![])).unwrap_err().code, ErrorCode::Access);
        let mut trusted = m.clone();
        trusted.trusted = true;
        assert_eq!(trusted.to_fs(&(5, 6, vec![])).unwrap().0, 5);
        assert_eq!(trusted.to_fs(&(0, 0, vec![])).unwrap().0, 65534, "root needs admin");
        trusted.admin = true;
        assert_eq!(trusted.to_fs(&(0, 0, vec![])).unwrap().0, 0);
    }

    #[test]
    fn root_squash_spares_nosquash_nids() {
        let squash = RootSquash {
            ids: RootSquash::parse_ids("1000:101").unwrap(),
            nosquash: RootSquash::parse_nids("127.0.0.1 10.0.0.[1-3]@tcp").unwrap(),
            nosquash_text: String::new(),
        };
        let mut root = (0, 0, vec![4]);
        squash.apply("127.0.0.1".parse().unwrap(), &mut root);
        assert_eq!(root.0, 0);
        squash.apply("127.0.0.2".parse().unwrap(), &mut root);
        assert_eq!(root, (1000, 101, vec![]));
        assert!(RootSquash::parse_ids("1000").is_err());
        assert!(RootSquash::parse_nids("NONE").unwrap().is_empty());
    }

    #[test]
    fn filesets_are_normalized_and_params_have_lustre_shapes() {
        assert_eq!(normalize_fileset("/a//b/").unwrap().as_deref(), Some("/a/b"));
        assert_eq!(normalize_fileset("/").unwrap(), None);
        assert!(normalize_fileset("a").is_err() && normalize_fileset("/a/../b").is_err());
        let mut c = NodemapConfig::default();
        c.apply(&NodemapCommand::Add { name: "m".into() }).unwrap();
        c.apply(&NodemapCommand::AddRange { name: "m".into(), range: "127.0.0.2".into() }).unwrap();
        c.apply(&NodemapCommand::AddIdmap { name: "m".into(), idtype: IdType::Uid, idmap: "2001:1001".into() })
            .unwrap();
        c.apply(&NodemapCommand::SetFileset { name: "m".into(), fileset: Some("/dir1".into()) }).unwrap();
        let values = c.param_values();
        let get = |n: &str| values.iter().find(|(k, _)| k == n).unwrap().1.clone();
        assert_eq!(get("nodemap.m.idmap"), "[\n { idtype: uid, client_id: 2001, fs_id: 1001 }\n]");
        assert_eq!(get("nodemap.m.ranges"), "[\n { id: 1, start_nid: 127.0.0.2@tcp, end_nid: 127.0.0.2@tcp }\n]");
        assert_eq!(get("nodemap.m.fileset"), "[\n { primary:     /dir1 }\n]");
        assert_eq!(get("nodemap.default.squash_uid"), "65534");
        assert_eq!(get("nodemap.active"), "0");
    }
}
