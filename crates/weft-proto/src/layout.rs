//! Layouts: where a file's bytes live, and the striping math that maps file offsets to
//! object offsets. Pure logic, tested exhaustively against a byte-by-byte model.
//!
//! A [`Layout`] is a list of components, each covering an extent of the file with its own
//! striping (Lustre's composite layouts). Version 1 writes exactly one RAID-0 component
//! covering `[0, EOF)`; readers reject anything else with `NotSupported` so that later
//! composite layouts and mirrors extend the format instead of replacing it.

use crate::error::{ErrorCode, WeftError, WeftResult};
use crate::fid::Fid;
use crate::limits::*;
use serde::{Deserialize, Serialize};

/// What a user asks for (`setstripe`), also a directory's default for new files.
/// Zero or negative fields mean "inherit / let the MDS choose", as in Lustre.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct StripeSpec {
    /// 0 = default, -1 = all OSTs, otherwise the count.
    pub stripe_count: i64,
    /// 0 = default; otherwise a multiple of 64 KiB.
    pub stripe_size: u64,
    /// -1 = let the MDS choose; otherwise the OST index of the first stripe.
    pub start_ost: i64,
    /// An explicit list of OST indices (Lustre's `-o`); empty = none.
    pub ost_list: Vec<u32>,
    /// Restrict the stripes to this pool.
    pub pool: Option<String>,
}

impl StripeSpec {
    pub fn unset() -> Self {
        StripeSpec { stripe_count: 0, stripe_size: 0, start_ost: -1, ost_list: Vec::new(), pool: None }
    }

    /// Checks the values a user typed; the message names the option and what is allowed.
    pub fn validate(&self) -> WeftResult<()> {
        if self.stripe_count < -1 {
            return Err(WeftError::invalid(format!(
                "stripe count (-c) {} is invalid: use 0 for the default, -1 for all OSTs, or a positive count",
                self.stripe_count
            )));
        }
        if self.stripe_count > STRIPE_COUNT_MAX as i64 {
            return Err(WeftError::invalid(format!(
                "stripe count (-c) {} is too large: at most {STRIPE_COUNT_MAX}",
                self.stripe_count
            )));
        }
        if !self.stripe_size.is_multiple_of(STRIPE_SIZE_UNIT_BYTES) {
            return Err(WeftError::invalid(format!(
                "stripe size (-S) {} must be a multiple of 64 KiB ({STRIPE_SIZE_UNIT_BYTES} bytes), or 0 for the default",
                self.stripe_size
            )));
        }
        if self.stripe_size > STRIPE_SIZE_MAX_BYTES {
            return Err(WeftError::invalid(format!(
                "stripe size (-S) {} is too large: at most {STRIPE_SIZE_MAX_BYTES} bytes",
                self.stripe_size
            )));
        }
        if self.start_ost < -1 || self.start_ost > u32::MAX as i64 {
            return Err(WeftError::invalid(format!(
                "start OST (-i) {} is invalid: use -1 to let the MDS choose, or an OST index",
                self.start_ost
            )));
        }
        if !self.ost_list.is_empty() {
            let mut seen = self.ost_list.clone();
            seen.sort_unstable();
            seen.dedup();
            if seen.len() != self.ost_list.len() {
                return Err(WeftError::invalid("OST list (-o) names an OST more than once"));
            }
            if self.stripe_count > 0 && self.stripe_count as usize != self.ost_list.len() {
                return Err(WeftError::invalid(format!(
                    "stripe count (-c) {} differs from the {} OSTs listed with -o",
                    self.stripe_count,
                    self.ost_list.len()
                )));
            }
        }
        Ok(())
    }

    /// Fills what this spec leaves open from `inherited` (a directory default).
    pub fn merged_over(&self, inherited: &StripeSpec) -> StripeSpec {
        StripeSpec {
            stripe_count: if self.stripe_count != 0 || !self.ost_list.is_empty() {
                self.stripe_count
            } else {
                inherited.stripe_count
            },
            stripe_size: if self.stripe_size != 0 { self.stripe_size } else { inherited.stripe_size },
            start_ost: if self.start_ost >= 0 || !self.ost_list.is_empty() {
                self.start_ost
            } else {
                inherited.start_ost
            },
            ost_list: if self.ost_list.is_empty() && self.stripe_count == 0 {
                inherited.ost_list.clone()
            } else {
                self.ost_list.clone()
            },
            pool: self.pool.clone().or_else(|| inherited.pool.clone()),
        }
    }

    pub fn effective_stripe_size(&self) -> u64 {
        if self.stripe_size == 0 {
            STRIPE_SIZE_DEFAULT_BYTES
        } else {
            self.stripe_size
        }
    }
}

/// Chooses the OSTs for a new file. `available` are the indices that may be used (up, and
/// in the pool if one is named), in any order and sparse; `cursor` rotates the default
/// start so that files spread over all OSTs (Lustre's round-robin allocator).
pub fn select_osts(spec: &StripeSpec, available: &[u32], cursor: u64) -> WeftResult<Vec<u32>> {
    let mut avail: Vec<u32> = available.to_vec();
    avail.sort_unstable();
    avail.dedup();
    if !spec.ost_list.is_empty() {
        for ost in &spec.ost_list {
            if avail.binary_search(ost).is_err() {
                return Err(WeftError::invalid(format!("OST {ost} (in -o) is not an available OST")));
            }
        }
        return Ok(spec.ost_list.clone());
    }
    if avail.is_empty() {
        return Err(WeftError::new(ErrorCode::NoSpace, "no OST is available for new files"));
    }
    let count = match spec.stripe_count {
        -1 => avail.len(),
        0 => STRIPE_COUNT_DEFAULT as usize,
        n => n as usize,
    }
    .min(avail.len());
    let start = if spec.start_ost >= 0 {
        let want = spec.start_ost as u32;
        avail
            .binary_search(&want)
            .map_err(|_| WeftError::invalid(format!("start OST (-i) {want} is not an available OST")))?
    } else {
        (cursor % avail.len() as u64) as usize
    };
    Ok((0..count).map(|i| avail[(start + i) % avail.len()]).collect())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Pattern {
    Raid0,
    /// The file's data was released to an archive (HSM): the component has no objects; a
    /// restore gives it `stripe_count` new ones (Lustre's `LOV_PATTERN_F_RELEASED`).
    Released {
        stripe_count: u32,
    },
}

/// One stripe: the OST that holds it and the object's FID there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeObject {
    pub ost: u32,
    pub fid: Fid,
}

/// One component of a layout: an extent of the file and how it is striped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutComponent {
    pub extent_start: u64,
    /// `u64::MAX` means end of file.
    pub extent_end: u64,
    pub pattern: Pattern,
    pub stripe_size: u64,
    pub pool: Option<String>,
    pub objects: Vec<StripeObject>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// Changes whenever the layout changes, so that cached copies can be told stale.
    pub generation: u32,
    pub components: Vec<LayoutComponent>,
}

impl Layout {
    /// A plain RAID-0 layout over `objects`.
    pub fn raid0(stripe_size: u64, pool: Option<String>, objects: Vec<StripeObject>) -> Layout {
        Layout {
            generation: 0,
            components: vec![LayoutComponent {
                extent_start: 0,
                extent_end: u64::MAX,
                pattern: Pattern::Raid0,
                stripe_size,
                pool,
                objects,
            }],
        }
    }

    /// The layout of a released file: `self`'s shape without its objects.
    pub fn released(&self) -> Layout {
        Layout {
            generation: self.generation.wrapping_add(1),
            components: self
                .components
                .iter()
                .map(|c| LayoutComponent {
                    pattern: Pattern::Released { stripe_count: c.stripe_count().max(1) as u32 },
                    objects: Vec::new(),
                    ..c.clone()
                })
                .collect(),
        }
    }

    /// Whether the file's data is in an archive only (see [`Pattern::Released`]).
    pub fn is_released(&self) -> bool {
        self.components.iter().any(|c| matches!(c.pattern, Pattern::Released { .. }))
    }

    /// The single component of a version-1 layout, released or not (for listings).
    pub fn single(&self) -> WeftResult<&LayoutComponent> {
        match self.components.as_slice() {
            [c] if c.extent_start == 0 && c.extent_end == u64::MAX => Ok(c),
            _ => Err(WeftError::new(
                ErrorCode::NotSupported,
                "composite layouts are not supported by this version of Weft",
            )),
        }
    }

    /// The single RAID-0 component of a version-1 layout.
    pub fn plain(&self) -> WeftResult<&LayoutComponent> {
        match self.components.as_slice() {
            [c] if matches!(c.pattern, Pattern::Released { .. }) => Err(WeftError::new(
                ErrorCode::NoData,
                "the file is released (its data is in an archive only): it must be restored first",
            )),
            [c] if c.extent_start == 0 && c.extent_end == u64::MAX => Ok(c),
            _ => Err(WeftError::new(
                ErrorCode::NotSupported,
                "composite layouts are not supported by this version of Weft",
            )),
        }
    }
}

/// An object file's last change as its OST reports it (`ost::ObjectAttr::mtime_ns`); a
/// client that does the I/O on the file itself (passthrough) reads the same.
pub fn object_mtime_ns(m: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    (m.mtime().max(0) as u64).saturating_mul(1_000_000_000).saturating_add(m.mtime_nsec().max(0) as u64)
}

/// A file's data version (Lustre's): from its objects' sizes and last changes, in stripe
/// order (`ost::ObjectAttr`). Equal versions: no write between the two readings (to the
/// resolution of the OSTs' clocks). Never 0, which stands for "unknown".
pub fn data_version(objects: impl IntoIterator<Item = (u64, u64)>) -> u64 {
    // FNV-1a 64: stable across builds (versions are stored on the MDT and compared with
    // ones other clients compute).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (size, mtime_ns) in objects {
        for b in size.to_le_bytes().into_iter().chain(mtime_ns.to_le_bytes()) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h.max(1)
}

/// A piece of a file range that lies in one stripe unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Index into the component's objects.
    pub stripe: usize,
    pub object_offset: u64,
    pub file_offset: u64,
    pub len: u64,
}

/// The part of a file range that lies in one object: always one contiguous object range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectExtent {
    pub stripe: usize,
    pub object_offset: u64,
    pub len: u64,
}

impl LayoutComponent {
    pub fn stripe_count(&self) -> usize {
        self.objects.len()
    }

    /// The spec that gives a new layout this component's shape (a restore's, an import's).
    pub fn spec(&self) -> StripeSpec {
        StripeSpec {
            stripe_count: self.stripe_count_shown().max(1) as i64,
            stripe_size: self.stripe_size,
            start_ost: -1,
            ost_list: Vec::new(),
            pool: self.pool.clone(),
        }
    }

    /// The stripe count a listing shows: a released component's is the one it will have
    /// once restored.
    pub fn stripe_count_shown(&self) -> usize {
        match self.pattern {
            Pattern::Released { stripe_count } => stripe_count as usize,
            Pattern::Raid0 => self.objects.len(),
        }
    }

    /// Object offset of file offset `off` and the stripe holding it.
    pub fn locate(&self, off: u64) -> (usize, u64) {
        let ss = self.stripe_size;
        let n = self.objects.len() as u64;
        debug_assert!(ss > 0 && n > 0);
        let unit = off / ss;
        let stripe = (unit % n) as usize;
        let object_offset = (unit / n) * ss + off % ss;
        (stripe, object_offset)
    }

    /// The file offset of byte `object_offset` of object `stripe`.
    pub fn file_offset(&self, stripe: usize, object_offset: u64) -> u64 {
        let ss = self.stripe_size;
        let n = self.objects.len() as u64;
        (object_offset / ss * n + stripe as u64) * ss + object_offset % ss
    }

    /// Splits `[offset, offset+len)` at stripe-unit boundaries, in file order.
    pub fn chunks(&self, offset: u64, len: u64) -> impl Iterator<Item = Chunk> + '_ {
        let end = offset.saturating_add(len);
        let ss = self.stripe_size;
        let mut pos = offset;
        std::iter::from_fn(move || {
            if pos >= end {
                return None;
            }
            let (stripe, object_offset) = self.locate(pos);
            let take = (ss - pos % ss).min(end - pos);
            let c = Chunk { stripe, object_offset, file_offset: pos, len: take };
            pos += take;
            Some(c)
        })
    }

    /// The object range each stripe contributes to `[offset, offset+len)`, one per stripe
    /// touched, ordered by stripe. Each is contiguous in the object, so one request each.
    pub fn object_extents(&self, offset: u64, len: u64) -> Vec<ObjectExtent> {
        let mut out: Vec<ObjectExtent> = Vec::with_capacity(self.objects.len().min(16));
        for c in self.chunks(offset, len) {
            match out.iter_mut().find(|e| e.stripe == c.stripe) {
                Some(e) => {
                    debug_assert_eq!(e.object_offset + e.len, c.object_offset, "object extent must be contiguous");
                    e.len += c.len;
                }
                None => out.push(ObjectExtent { stripe: c.stripe, object_offset: c.object_offset, len: c.len }),
            }
            // Once every stripe is touched the rest only extends them: skip ahead in whole rounds.
        }
        out.sort_by_key(|e| e.stripe);
        out
    }

    /// The size object `stripe` has in a file of exactly `file_size` bytes (for truncate).
    pub fn object_size_for(&self, file_size: u64, stripe: usize) -> u64 {
        let ss = self.stripe_size;
        let n = self.objects.len() as u64;
        let round = ss * n;
        let base = file_size / round * ss;
        let rem = file_size % round;
        base + rem.saturating_sub(stripe as u64 * ss).min(ss)
    }

    /// The file size implied by the objects' sizes (Lustre's glimpse): the end of the
    /// last byte any object holds.
    pub fn file_size_from_objects(&self, object_sizes: &[u64]) -> u64 {
        object_sizes
            .iter()
            .enumerate()
            .filter(|(_, s)| **s > 0)
            .map(|(k, s)| self.file_offset(k, s - 1) + 1)
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comp(ss: u64, n: usize) -> LayoutComponent {
        let objects = (0..n).map(|i| StripeObject { ost: i as u32 * 7, fid: Fid::new(1, i as u32, 0) }).collect();
        Layout::raid0(ss, None, objects).components.remove(0)
    }

    /// Byte-by-byte model: which stripe and object offset each file byte lands in.
    fn model(ss: u64, n: u64, off: u64) -> (usize, u64) {
        let unit = off / ss;
        ((unit % n) as usize, (unit / n) * ss + off % ss)
    }

    #[test]
    fn chunks_and_extents_match_the_byte_model() {
        for ss in [4u64, 8] {
            for n in 1..=4usize {
                let c = comp(ss, n);
                for off in 0..40u64 {
                    for len in 0..40u64 {
                        let mut covered = 0;
                        for ch in c.chunks(off, len) {
                            for b in 0..ch.len {
                                assert_eq!(model(ss, n as u64, ch.file_offset + b), (ch.stripe, ch.object_offset + b));
                            }
                            assert_eq!(ch.file_offset, off + covered);
                            covered += ch.len;
                        }
                        assert_eq!(covered, len);
                        let ext = c.object_extents(off, len);
                        let total: u64 = ext.iter().map(|e| e.len).sum();
                        assert_eq!(total, len);
                        for e in &ext {
                            for b in 0..e.len {
                                let fo = c.file_offset(e.stripe, e.object_offset + b);
                                assert!(fo >= off && fo < off + len);
                                assert_eq!(model(ss, n as u64, fo), (e.stripe, e.object_offset + b));
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn object_sizes_and_glimpse_invert_each_other() {
        for ss in [4u64, 8] {
            for n in 1..=4usize {
                let c = comp(ss, n);
                for size in 0..100u64 {
                    let sizes: Vec<u64> = (0..n).map(|k| c.object_size_for(size, k)).collect();
                    // Each object's size is the count of file bytes below `size` that land in it.
                    for (k, s) in sizes.iter().enumerate() {
                        let count = (0..size).filter(|o| model(ss, n as u64, *o).0 == k).count() as u64;
                        assert_eq!(*s, count, "ss={ss} n={n} size={size} k={k}");
                    }
                    assert_eq!(c.file_size_from_objects(&sizes), size);
                }
            }
        }
    }

    #[test]
    fn select_osts_handles_sparse_indices_counts_and_errors() {
        let avail = [1000, 0, 7];
        let mut s = StripeSpec::unset();
        s.stripe_count = -1;
        assert_eq!(select_osts(&s, &avail, 0).unwrap(), vec![0, 7, 1000]);
        s.stripe_count = 2;
        s.start_ost = 7;
        assert_eq!(select_osts(&s, &avail, 0).unwrap(), vec![7, 1000]);
        s.start_ost = 1000;
        assert_eq!(select_osts(&s, &avail, 0).unwrap(), vec![1000, 0]);
        s.start_ost = 3;
        assert!(select_osts(&s, &avail, 0).unwrap_err().message.contains("start OST (-i) 3"));
        s.start_ost = -1;
        s.stripe_count = 10;
        assert_eq!(select_osts(&s, &avail, 4).unwrap(), vec![7, 1000, 0]);
        s.ost_list = vec![1000, 0];
        s.stripe_count = 0;
        assert_eq!(select_osts(&s, &avail, 0).unwrap(), vec![1000, 0]);
        s.ost_list = vec![5];
        assert!(select_osts(&s, &avail, 0).is_err());
        assert_eq!(select_osts(&StripeSpec::unset(), &[], 0).unwrap_err().code, ErrorCode::NoSpace);
    }

    #[test]
    fn validate_names_the_option() {
        let mut s = StripeSpec::unset();
        s.stripe_size = 1000;
        let e = s.validate().unwrap_err();
        assert!(e.message.contains("-S") && e.message.contains("multiple of 64 KiB"), "{e}");
        s.stripe_size = 65536;
        s.stripe_count = -2;
        assert!(s.validate().unwrap_err().message.contains("-c"));
        s.stripe_count = 4;
        assert!(s.validate().is_ok());
    }

    #[test]
    fn merge_inherits_unset_fields() {
        let dir = StripeSpec {
            stripe_count: 4,
            stripe_size: 2 << 20,
            start_ost: -1,
            ost_list: vec![],
            pool: Some("fast".into()),
        };
        let mut file = StripeSpec::unset();
        file.stripe_size = 65536;
        let m = file.merged_over(&dir);
        assert_eq!((m.stripe_count, m.stripe_size, m.pool.as_deref()), (4, 65536, Some("fast")));
    }
}
