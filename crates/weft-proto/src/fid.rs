//! File identifiers (FIDs), as Lustre has them: a 64-bit sequence, a 32-bit object id within
//! it and a 32-bit version. A FID never changes for the life of a file or object, whatever
//! renames happen, and is never reused.
//!
//! Sequences are split by owner so that no two allocators ever hand out the same FID:
//! * metadata (inode) FIDs: `SEQ_METADATA_BASE + n`, allocated by an MDT;
//! * object FIDs on an OST: `SEQ_OBJECT_BASE + ost_index`, object ids allocated by precreation.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct Fid {
    pub seq: u64,
    pub oid: u32,
    pub ver: u32,
}

/// First sequence of metadata FIDs (the value Lustre uses for FID_SEQ_NORMAL).
pub const SEQ_METADATA_BASE: u64 = 0x2_0000_0400;
/// Metadata sequences per MDT: MDT n allocates from `SEQ_METADATA_BASE + n * SEQ_PER_MDT ..`.
pub const SEQ_PER_MDT: u64 = 1 << 20;
/// First sequence of OST object FIDs; OST `i` uses sequence `SEQ_OBJECT_BASE + i`.
pub const SEQ_OBJECT_BASE: u64 = 0x1_0000_0000;
/// The most MDTs a file system has (indices 0..MDT_COUNT_MAX): each owns its metadata
/// sequences and a range of object ids on every OST ([`object_oid_range`]).
pub const MDT_COUNT_MAX: u32 = 64;
/// Object ids of each MDT but MDT0 on one OST: 2^25 (33 million objects per MDT and OST),
/// at the top of the id space; MDT0 has everything below them (2.1 billion), where every
/// object of a file system with one MDT already is. Several MDTs precreate on one OST without
/// meeting.
pub const OBJECT_OIDS_PER_MDT: u32 = 1 << 25;
/// The first object id past MDT0's range.
const OBJECT_OIDS_MDT0_END: u32 = 0u32.wrapping_sub((MDT_COUNT_MAX - 1) * OBJECT_OIDS_PER_MDT);

/// The object ids MDT `mdt` hands out on an OST (0 is never an object id).
pub fn object_oid_range(mdt: u32) -> std::ops::RangeInclusive<u32> {
    match mdt {
        0 => 1..=OBJECT_OIDS_MDT0_END - 1,
        m => {
            let first = OBJECT_OIDS_MDT0_END + (m.min(MDT_COUNT_MAX - 1) - 1) * OBJECT_OIDS_PER_MDT;
            first..=first + (OBJECT_OIDS_PER_MDT - 1)
        }
    }
}

/// The MDT whose range object id `oid` is in.
pub fn object_oid_mdt(oid: u32) -> u32 {
    match oid.checked_sub(OBJECT_OIDS_MDT0_END) {
        None => 0,
        Some(above) => 1 + above / OBJECT_OIDS_PER_MDT,
    }
}

impl Fid {
    pub const fn new(seq: u64, oid: u32, ver: u32) -> Self {
        Fid { seq, oid, ver }
    }

    /// The root directory of the file system.
    pub const ROOT: Fid = Fid::new(SEQ_METADATA_BASE, 1, 0);

    pub fn is_zero(&self) -> bool {
        self.seq == 0 && self.oid == 0 && self.ver == 0
    }

    /// The sequence an OST's objects are named in.
    pub fn object_seq(ost_index: u32) -> u64 {
        SEQ_OBJECT_BASE + ost_index as u64
    }

    /// The MDT that owns a metadata FID (whose sequences it allocates from); 0 for any
    /// other FID.
    pub fn mdt_index(&self) -> u32 {
        match self.seq.checked_sub(SEQ_METADATA_BASE) {
            Some(off) => (off / SEQ_PER_MDT) as u32,
            None => 0,
        }
    }

    /// The places of `fids` grouped by the MDT each is on, MDTs ascending, places in order:
    /// a request about several files goes to each one's MDT.
    pub fn by_mdt(fids: &[Fid]) -> std::collections::BTreeMap<u32, Vec<usize>> {
        let mut groups: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
        for (i, fid) in fids.iter().enumerate() {
            groups.entry(fid.mdt_index()).or_default().push(i);
        }
        groups
    }

    /// The inode number the mount reports for a metadata FID. A bijection on metadata
    /// FIDs: the root maps to 1, as FUSE requires.
    pub fn to_ino(&self) -> u64 {
        debug_assert!(self.seq >= SEQ_METADATA_BASE, "not a metadata FID: {self}");
        ((self.seq - SEQ_METADATA_BASE) << 32) | self.oid as u64
    }

    /// The inverse of [`Fid::to_ino`].
    pub fn from_ino(ino: u64) -> Fid {
        Fid::new(SEQ_METADATA_BASE + (ino >> 32), ino as u32, 0)
    }

    /// Fixed-width big-endian bytes, so that byte order is FID order in key-value stores.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.seq.to_be_bytes());
        b[8..12].copy_from_slice(&self.oid.to_be_bytes());
        b[12..].copy_from_slice(&self.ver.to_be_bytes());
        b
    }

    pub fn from_bytes(b: &[u8]) -> Option<Fid> {
        if b.len() != 16 {
            return None;
        }
        Some(Fid::new(
            u64::from_be_bytes(b[..8].try_into().ok()?),
            u32::from_be_bytes(b[8..12].try_into().ok()?),
            u32::from_be_bytes(b[12..].try_into().ok()?),
        ))
    }
}

/// Printed as Lustre prints FIDs: `[0x200000400:0x1:0x0]`.
impl fmt::Display for Fid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{:#x}:{:#x}:{:#x}]", self.seq, self.oid, self.ver)
    }
}

impl FromStr for Fid {
    type Err = String;
    /// Accepts `[0x200000400:0x1:0x0]` and the same without brackets.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().trim_start_matches('[').trim_end_matches(']');
        let parts: Vec<&str> = t.split(':').collect();
        if parts.len() != 3 {
            return Err(format!("'{s}' is not a FID: expected [SEQ:OID:VER], e.g. [0x200000400:0x1:0x0]"));
        }
        let num = |p: &str| -> Result<u64, String> {
            let p = p.trim();
            let r = if let Some(h) = p.strip_prefix("0x") { u64::from_str_radix(h, 16) } else { p.parse() };
            r.map_err(|_| format!("'{s}' is not a FID: '{p}' is not a number"))
        };
        let seq = num(parts[0])?;
        let oid = u32::try_from(num(parts[1])?).map_err(|_| format!("'{s}': object id exceeds 32 bits"))?;
        let ver = u32::try_from(num(parts[2])?).map_err(|_| format!("'{s}': version exceeds 32 bits"))?;
        Ok(Fid::new(seq, oid, ver))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_ino_one_and_ino_round_trips() {
        assert_eq!(Fid::ROOT.to_ino(), 1);
        for fid in [Fid::ROOT, Fid::new(SEQ_METADATA_BASE, 77, 0), Fid::new(SEQ_METADATA_BASE + 5, u32::MAX, 0)] {
            assert_eq!(Fid::from_ino(fid.to_ino()), fid);
        }
    }

    #[test]
    fn metadata_fids_name_their_mdt_and_object_ranges_do_not_meet() {
        assert_eq!(Fid::ROOT.mdt_index(), 0);
        assert_eq!(Fid::new(SEQ_METADATA_BASE + SEQ_PER_MDT - 1, 9, 0).mdt_index(), 0);
        assert_eq!(Fid::new(SEQ_METADATA_BASE + 3 * SEQ_PER_MDT + 2, 9, 0).mdt_index(), 3);
        assert_eq!(Fid::new(Fid::object_seq(4), 9, 0).mdt_index(), 0);
        assert_eq!(object_oid_range(0), 1..=(1u32 << 31) + OBJECT_OIDS_PER_MDT - 1);
        assert_eq!(*object_oid_range(1).start(), (1u32 << 31) + OBJECT_OIDS_PER_MDT);
        assert_eq!(*object_oid_range(2).start(), *object_oid_range(1).end() + 1);
        for m in [0, 1, 7, MDT_COUNT_MAX - 1] {
            let r = object_oid_range(m);
            assert_eq!((object_oid_mdt(*r.start()), object_oid_mdt(*r.end())), (m, m));
        }
        assert_eq!(*object_oid_range(MDT_COUNT_MAX - 1).end(), u32::MAX);
    }

    #[test]
    fn display_parse_round_trip_and_bytes_order() {
        let f = Fid::new(0x200000400, 0x1f, 0);
        assert_eq!(f.to_string(), "[0x200000400:0x1f:0x0]");
        assert_eq!(f.to_string().parse::<Fid>().unwrap(), f);
        assert!("nonsense".parse::<Fid>().is_err());
        let a = Fid::new(1, 2, 0);
        let b = Fid::new(1, 3, 0);
        assert!(a.to_bytes() < b.to_bytes());
        assert_eq!(Fid::from_bytes(&b.to_bytes()), Some(b));
    }
}
