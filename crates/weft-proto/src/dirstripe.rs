//! Directories over several MDTs (Lustre's DNE): a directory lives on one MDT (a remote
//! directory lives on another MDT than its parent), and a striped directory spreads its
//! names over several, each name on the stripe its hash picks (Lustre's LMV).
//!
//! A striped directory is its master inode (stripe 0, on the MDT the directory was placed
//! on) and one more directory inode per further stripe, each on its own MDT, unnamed. A
//! name's entry, and the inode of a file or plain directory made under that name, live on
//! the name's stripe: the client hashes the name and sends the request to that stripe's
//! MDT, so the MDTs share the directory's load without talking to each other.

use crate::Fid;
use serde::{Deserialize, Serialize};

/// How names are spread over the stripes (Lustre's `lmv_hash_type`, with its names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum DirHash {
    /// FNV-1a 64 of the name modulo the stripe count: Lustre's default.
    #[default]
    Fnv1a64,
    /// A consistent hash (highest random weight per stripe, as CRUSH's straw2 places): a
    /// change of the stripe count moves only the names of the stripes added or removed.
    /// A name of mkstemp's shape (`base.XXXXXX`) is placed by its base, so a temporary
    /// file renamed to its base name stays on its stripe (Lustre's crush2 fix, LU-15720).
    Crush,
}

impl DirHash {
    /// Lustre's name of the hash type, as `getdirstripe` prints and `-H` takes.
    pub fn name(self) -> &'static str {
        match self {
            DirHash::Fnv1a64 => "fnv_1a_64",
            DirHash::Crush => "crush",
        }
    }

    pub fn parse(s: &str) -> Result<DirHash, String> {
        match s {
            "fnv_1a_64" => Ok(DirHash::Fnv1a64),
            "crush" | "crush2" => Ok(DirHash::Crush),
            other => Err(format!("unknown directory hash '{other}': expected fnv_1a_64 or crush")),
        }
    }

    /// The stripe of `name` among `count` (count > 0).
    pub fn stripe_of(self, name: &[u8], count: usize) -> usize {
        assert!(count > 0, "a striped directory has at least one stripe");
        if count == 1 {
            return 0;
        }
        match self {
            DirHash::Fnv1a64 => (fnv1a64(name) % count as u64) as usize,
            DirHash::Crush => {
                let key = temp_name_base(name);
                (0..count)
                    .max_by_key(|&i| (mix(fnv1a64(key) ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)), i))
                    .unwrap_or(0)
            }
        }
    }
}

/// FNV-1a, 64 bits.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A 64-bit finalizer (splitmix64's): weights of one name for different stripes must not
/// be correlated.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The base of a name of mkstemp's shape: `base.` and six or eight letters and digits,
/// at least one of them a digit or an upper-case letter (not a plain extension such as
/// `.tar`, `.config`).
fn temp_name_base(name: &[u8]) -> &[u8] {
    let Some(dot) = name.iter().rposition(|b| *b == b'.') else { return name };
    let (base, suffix) = (&name[..dot], &name[dot + 1..]);
    let shaped = matches!(suffix.len(), 6 | 8)
        && suffix.iter().all(u8::is_ascii_alphanumeric)
        && suffix.iter().any(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
        && !base.is_empty();
    if shaped {
        base
    } else {
        name
    }
}

/// The stripes of a striped directory: `fids[0]` is the master (the directory's own FID),
/// `fids[i]` the directory inode holding the names of stripe `i`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DirStripes {
    pub hash: DirHash,
    pub fids: Vec<Fid>,
}

impl DirStripes {
    /// The stripe that holds `name`.
    pub fn stripe_for(&self, name: &[u8]) -> Fid {
        self.fids[self.hash.stripe_of(name, self.fids.len())]
    }
}

/// How a new directory is spread (`weft mkdir -i -c -H`, and a directory's default for
/// its new subdirectories, `setdirstripe -D`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirStripeSpec {
    /// Stripes (MDTs) the names spread over; 0 and 1 mean a plain directory.
    pub count: u32,
    /// The MDT of the master (stripe 0), the others following in index order; None: the
    /// MDT of the parent for a plain directory, the least used one for a striped one
    /// (Lustre's `-i -1`).
    pub index: Option<u32>,
    pub hash: DirHash,
}

impl DirStripeSpec {
    /// A plain directory on the parent's MDT: what a directory without a default makes.
    pub const PLAIN: DirStripeSpec = DirStripeSpec { count: 1, index: None, hash: DirHash::Fnv1a64 };

    pub fn is_striped(&self) -> bool {
        self.count > 1
    }

    /// The MDTs of a new directory's stripes among `mdts` (the file system's MDT indices,
    /// ascending), the master first, for a parent on MDT `parent_mdt`; `least_used` picks
    /// the first MDT when the spec names none.
    pub fn place(&self, mdts: &[u32], parent_mdt: u32, least_used: u32) -> Result<Vec<u32>, String> {
        let count = self.count.max(1) as usize;
        if count > mdts.len() {
            return Err(format!(
                "a directory striped over {count} MDTs needs {count} MDTs; the file system has {}",
                mdts.len()
            ));
        }
        let first = match self.index {
            Some(i) if mdts.contains(&i) => i,
            Some(i) => return Err(format!("MDT index {i} is not in the file system (MDTs: {mdts:?})")),
            None if count == 1 => parent_mdt,
            None => least_used,
        };
        let at = mdts.iter().position(|m| *m == first).unwrap_or(0);
        Ok((0..count).map(|k| mdts[(at + k) % mdts.len()]).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_is_fnv1a64() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn names_spread_evenly_and_stay_put() {
        for hash in [DirHash::Fnv1a64, DirHash::Crush] {
            let mut per = [0u32; 4];
            for i in 0..4000 {
                let name = format!("file.{i}");
                let s = hash.stripe_of(name.as_bytes(), 4);
                assert_eq!(s, hash.stripe_of(name.as_bytes(), 4), "a name's stripe never changes");
                per[s] += 1;
            }
            assert!(per.iter().all(|n| (800..1200).contains(n)), "{hash:?} spreads unevenly: {per:?}");
        }
    }

    #[test]
    fn crush_moves_few_names_when_a_stripe_is_added() {
        let moved = (0..3000)
            .filter(|i| {
                let n = format!("n{i}");
                let (a, b) = (DirHash::Crush.stripe_of(n.as_bytes(), 3), DirHash::Crush.stripe_of(n.as_bytes(), 4));
                a != b
            })
            .count();
        // Ideally a quarter move (to the new stripe); modulo hashing would move three quarters.
        assert!((500..1000).contains(&moved), "{moved} of 3000 names moved");
    }

    #[test]
    fn crush_keeps_a_temporary_name_with_its_base() {
        for base in ["data.h5", "report", "x"] {
            let tmp = format!("{base}.a1B2c3");
            assert_eq!(DirHash::Crush.stripe_of(tmp.as_bytes(), 8), DirHash::Crush.stripe_of(base.as_bytes(), 8));
        }
        // A plain extension is part of the name.
        assert_eq!(temp_name_base(b"archive.tar"), b"archive.tar");
        assert_eq!(temp_name_base(b"kernel.config"), b"kernel.config");
    }

    #[test]
    fn placement_follows_index_order_from_the_first() {
        let mdts = [0, 1, 2, 5];
        let spec = |count, index| DirStripeSpec { count, index, hash: DirHash::Fnv1a64 };
        assert_eq!(spec(1, None).place(&mdts, 2, 0).unwrap(), vec![2]);
        assert_eq!(spec(1, Some(5)).place(&mdts, 2, 0).unwrap(), vec![5]);
        assert_eq!(spec(3, Some(2)).place(&mdts, 0, 0).unwrap(), vec![2, 5, 0]);
        assert_eq!(spec(2, None).place(&mdts, 0, 1).unwrap(), vec![1, 2]);
        assert!(spec(5, None).place(&mdts, 0, 0).unwrap_err().contains("needs 5 MDTs"));
        assert!(spec(1, Some(3)).place(&mdts, 0, 0).unwrap_err().contains("MDT index 3"));
        assert_eq!(DirHash::parse("crush").unwrap(), DirHash::Crush);
        assert!(DirHash::parse("all_char").unwrap_err().contains("fnv_1a_64 or crush"));
    }
}
