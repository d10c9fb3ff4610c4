//! Layouts: where a file's bytes live, and the striping math that maps file offsets to
//! object offsets. Pure logic, tested exhaustively against a byte-by-byte model.
//!
//! A [`Layout`] is a list of components, each covering an extent of the file with its own
//! striping (Lustre's composite layouts). A plain layout is one RAID-0 component over
//! `[0, EOF)`. A progressive layout (PFL) has several, one after the other: each is
//! *instantiated* (given objects) when the file first grows into it, so a small file never
//! uses the OSTs its tail components name. A first component may lie on the MDT (Data on
//! MDT, [`Pattern::Mdt`]): its one object is served by the MDS's node.
//!
//! Object offsets are computed from *file* offsets in every component (as Lustre does): a
//! component starting at 4 MiB with 1 MiB stripes over 4 objects puts file byte 4 MiB at
//! byte 1 MiB of its first object; bytes below the component's start are holes there.

use crate::error::{ErrorCode, WeftError, WeftResult};
use crate::fid::Fid;
use crate::limits::*;
use serde::{Deserialize, Serialize};

mod spec;
pub use spec::{select_osts, ComponentSpec, StripeSpec};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Pattern {
    Raid0,
    /// The file's data was released to an archive (HSM): the component has no objects; a
    /// restore gives it `stripe_count` new ones (Lustre's `LOV_PATTERN_F_RELEASED`).
    Released {
        stripe_count: u32,
    },
    /// Data on the MDT: one object on the MDT's server ([`dom_target`]).
    Mdt,
}

/// The object target that holds data-on-MDT objects of MDT `mdt`.
pub fn dom_target(mdt: u32) -> u32 {
    DOM_TARGET_BASE + mdt
}

/// The MDT whose data-on-MDT target `index` is, if it is one.
pub fn dom_mdt(index: u32) -> Option<u32> {
    index.checked_sub(DOM_TARGET_BASE)
}

/// Component flags, Lustre's `LCME_FL_*` values.
pub mod comp_flags {
    /// A mirror's component that missed writes (FLR).
    pub const STALE: u32 = 0x1;
    /// Preferred for reads.
    pub const PREF_RD: u32 = 0x2;
    /// Preferred for writes.
    pub const PREF_WR: u32 = 0x4;
    /// Instantiated: its objects are allocated.
    pub const INIT: u32 = 0x10;
    /// Weft's own, on every component of a file whose mirrors are written synchronously
    /// (`weft mirror create --sync`): a write goes to every mirror in sync, none goes stale
    /// unless its OST fails. Past Lustre's flags; a file-level property kept in the
    /// components so that layouts stored before it read back unchanged (without it). Shown
    /// as `lcm_flags: sync`, not among a component's flags.
    pub const SYNC_MIRRORS: u32 = 0x0100_0000;
    /// Lustre's names, in its order, for listings.
    pub const NAMES: [(u32, &str); 4] = [(INIT, "init"), (STALE, "stale"), (PREF_RD, "prefrd"), (PREF_WR, "prefwr")];

    /// `init,stale`, or `0` with none set (as lfs getstripe prints them).
    pub fn show(flags: u32) -> String {
        let names: Vec<&str> = NAMES.iter().filter(|(f, _)| flags & f != 0).map(|(_, n)| *n).collect();
        if names.is_empty() {
            "0".to_string()
        } else {
            names.join(",")
        }
    }
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
    /// Unique within the layout (Lustre's `lcme_id`), from 1.
    pub id: u32,
    /// The mirror this component belongs to (FLR), 0 for a file without mirrors.
    pub mirror_id: u16,
    /// [`comp_flags`].
    pub flags: u32,
    pub extent_start: u64,
    /// `u64::MAX` means end of file.
    pub extent_end: u64,
    pub pattern: Pattern,
    pub stripe_size: u64,
    pub pool: Option<String>,
    /// Empty until the component is instantiated.
    pub objects: Vec<StripeObject>,
    /// What was asked for it (its stripe count and OSTs when instantiated).
    pub want: StripeSpec,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// Changes whenever the layout changes, so that cached copies can be told stale.
    pub generation: u32,
    pub components: Vec<LayoutComponent>,
}

/// A piece of a file range that lies in one component.
#[derive(Debug, Clone, Copy)]
pub struct Segment<'a> {
    pub comp: &'a LayoutComponent,
    pub offset: u64,
    pub len: u64,
}

impl Layout {
    /// A plain RAID-0 layout over `objects`.
    pub fn raid0(stripe_size: u64, pool: Option<String>, objects: Vec<StripeObject>) -> Layout {
        let want = StripeSpec {
            stripe_count: objects.len().max(1) as i64,
            stripe_size,
            pool: pool.clone(),
            ..StripeSpec::unset()
        };
        Layout {
            generation: 0,
            components: vec![LayoutComponent {
                id: 1,
                mirror_id: 0,
                flags: comp_flags::INIT,
                extent_start: 0,
                extent_end: u64::MAX,
                pattern: Pattern::Raid0,
                stripe_size,
                pool,
                objects,
                want,
            }],
        }
    }

    /// The uninstantiated layout of `spec` (composite or plain): its components with their
    /// extents and striping, no objects yet.
    pub fn planned(spec: &StripeSpec) -> Layout {
        if !spec.mirrors.is_empty() {
            let components = spec
                .mirrors
                .iter()
                .enumerate()
                .flat_map(|(i, m)| Layout::planned_mirror(m, i as u16 + 1).components)
                .collect();
            return Layout { generation: 0, components };
        }
        let mut start = 0;
        let components = spec
            .component_specs()
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let comp = LayoutComponent {
                    id: i as u32 + 1,
                    mirror_id: 0,
                    flags: 0,
                    extent_start: start,
                    extent_end: c.end,
                    pattern: if c.on_mdt { Pattern::Mdt } else { Pattern::Raid0 },
                    stripe_size: if c.on_mdt { c.end } else { c.stripe.effective_stripe_size() },
                    pool: c.stripe.pool.clone(),
                    objects: Vec::new(),
                    want: c.stripe,
                };
                start = c.end;
                comp
            })
            .collect();
        Layout { generation: 0, components }
    }

    /// The planned components of one mirror `mirror_id` (from 1): ids as Lustre's,
    /// `mirror_id << 16 | n`.
    pub fn planned_mirror(spec: &StripeSpec, mirror_id: u16) -> Layout {
        let mut l = Layout::planned(spec);
        for c in &mut l.components {
            c.mirror_id = mirror_id;
            c.id |= u32::from(mirror_id) << 16;
        }
        l
    }

    /// The mirrors' ids, ascending (`[0]` for a file without mirrors).
    pub fn mirror_ids(&self) -> Vec<u16> {
        let mut ids: Vec<u16> = self.components.iter().map(|c| c.mirror_id).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    pub fn is_mirrored(&self) -> bool {
        self.components.iter().any(|c| c.mirror_id != 0)
    }

    /// The spec that makes a new layout of this one's shape (a layout without mirrors): a
    /// plain spec for one component over the whole file, else its components' extents,
    /// each on the MDT or with its striping (a migration that keeps the shape).
    pub fn shape(&self) -> StripeSpec {
        match &self.components[..] {
            [one] if one.extent_start == 0 && one.extent_end == u64::MAX && one.pattern != Pattern::Mdt => one.spec(),
            comps => StripeSpec {
                components: comps
                    .iter()
                    .map(|c| ComponentSpec {
                        end: c.extent_end,
                        on_mdt: c.pattern == Pattern::Mdt,
                        stripe: if c.pattern == Pattern::Mdt { StripeSpec::unset() } else { c.spec() },
                    })
                    .collect(),
                ..StripeSpec::unset()
            },
        }
    }

    /// Mirror `id` alone: its components.
    pub fn mirror(&self, id: u16) -> Layout {
        Layout {
            generation: self.generation,
            components: self.components.iter().filter(|c| c.mirror_id == id).cloned().collect(),
        }
    }

    /// Whether mirror `id` has every write (no stale component).
    pub fn mirror_in_sync(&self, id: u16) -> bool {
        self.components.iter().filter(|c| c.mirror_id == id).all(|c| c.flags & comp_flags::STALE == 0)
    }

    /// The mirrors reads may use, in the order to try them: in sync, preferred ones first.
    pub fn read_mirrors(&self) -> Vec<u16> {
        let mut ids: Vec<u16> = self.mirror_ids().into_iter().filter(|id| self.mirror_in_sync(*id)).collect();
        let preferred =
            |id: &u16| !self.components.iter().any(|c| c.mirror_id == *id && c.flags & comp_flags::PREF_RD != 0);
        ids.sort_by_key(preferred);
        ids
    }

    /// Whether the file's mirrors are written synchronously ([`comp_flags::SYNC_MIRRORS`]).
    pub fn sync_mirrors(&self) -> bool {
        self.is_mirrored() && self.components.iter().any(|c| c.flags & comp_flags::SYNC_MIRRORS != 0)
    }

    /// Makes the mirrors written synchronously, or not: the flag on every component.
    pub fn set_sync_mirrors(&mut self, on: bool) {
        for c in &mut self.components {
            match on {
                true => c.flags |= comp_flags::SYNC_MIRRORS,
                false => c.flags &= !comp_flags::SYNC_MIRRORS,
            }
        }
    }

    /// The mirrors a write goes to: every mirror in sync when they are written
    /// synchronously, else the one [`Layout::write_mirror`] names (`[0]` without mirrors).
    pub fn write_mirrors(&self) -> Vec<u16> {
        match self.sync_mirrors() {
            true => self.mirror_ids().into_iter().filter(|id| self.mirror_in_sync(*id)).collect(),
            false => vec![self.write_mirror()],
        }
    }

    /// The mirror writes go to: the first in sync (after a write intent, the only one).
    pub fn write_mirror(&self) -> u16 {
        let ids = self.mirror_ids();
        ids.iter().copied().find(|id| self.mirror_in_sync(*id)).unwrap_or(ids.first().copied().unwrap_or(0))
    }

    /// Whether a write must first tell the MDS (Lustre's layout write intent): a component it
    /// reaches has no objects, or more than one mirror is in sync (the others go stale) and
    /// they are not written synchronously.
    pub fn needs_write_intent(&self, offset: u64, len: u64) -> bool {
        if self.sync_mirrors() {
            return self.write_needs_instantiation(offset, len);
        }
        self.needs_instantiation(offset, len) || (self.is_mirrored() && self.read_mirrors().len() > 1)
    }

    /// Whether a component that a write of `[offset, offset+len)` reaches, in any mirror it
    /// goes to ([`Layout::write_mirrors`]), has no objects yet.
    pub fn write_needs_instantiation(&self, offset: u64, len: u64) -> bool {
        match self.sync_mirrors() {
            true => self.write_mirrors().into_iter().any(|id| self.mirror(id).needs_instantiation(offset, len)),
            false => self.needs_instantiation(offset, len),
        }
    }

    /// Whether listings show it as composite (Lustre's `lcm_*` form): more than one
    /// component, a component not over the whole file, or data on the MDT.
    pub fn is_composite(&self) -> bool {
        match self.components.as_slice() {
            [c] => c.extent_start != 0 || c.extent_end != u64::MAX || c.pattern == Pattern::Mdt || c.mirror_id != 0,
            _ => true,
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

    /// The single component of a plain layout, released or not (HSM works on these only).
    pub fn single(&self) -> WeftResult<&LayoutComponent> {
        match self.components.as_slice() {
            [c] if !self.is_composite() => Ok(c),
            _ => Err(WeftError::new(
                ErrorCode::NotSupported,
                format!(
                    "the file has a composite layout ({} components): this works on plain layouts only",
                    self.components.len()
                ),
            )),
        }
    }

    /// Whether the file's data can be read and written (it is not released).
    pub fn check_usable(&self) -> WeftResult<()> {
        if self.is_released() {
            return Err(WeftError::new(
                ErrorCode::NoData,
                "the file is released (its data is in an archive only): it must be restored first",
            ));
        }
        Ok(())
    }

    /// The single RAID-0 component of a plain layout (passthrough and HSM restores).
    pub fn plain(&self) -> WeftResult<&LayoutComponent> {
        self.check_usable()?;
        self.single()
    }

    /// The components that writes go to and sizes are read from, in file order: the write
    /// mirror's ([`Layout::write_mirror`]), all of them for a file without mirrors.
    pub fn data_components(&self) -> impl Iterator<Item = &LayoutComponent> {
        let mirror = if self.is_mirrored() { Some(self.write_mirror()) } else { None };
        self.components.iter().filter(move |c| mirror.is_none_or(|m| c.mirror_id == m))
    }

    /// The objects of [`Layout::data_components`].
    pub fn data_objects(&self) -> impl Iterator<Item = &StripeObject> {
        self.data_components().flat_map(|c| c.objects.iter())
    }

    /// Every instantiated component's objects, of every mirror.
    pub fn objects(&self) -> impl Iterator<Item = &StripeObject> {
        self.components.iter().flat_map(|c| c.objects.iter())
    }

    /// The end of the last component: writes reach no further (`u64::MAX`: none).
    pub fn end(&self) -> u64 {
        self.data_components().map(|c| c.extent_end).max().unwrap_or(0)
    }

    /// The largest size the file can reach: the end of its last component, or less where
    /// a component's objects would pass the largest object an OST keeps
    /// ([`OBJECT_SIZE_MAX_BYTES`] for each of its stripes).
    pub fn size_max(&self) -> u64 {
        let mut max = self.end().min(FILE_SIZE_MAX_BYTES);
        for c in self.data_components() {
            let by_objects = c.size_max_by_objects();
            if by_objects < c.extent_end {
                max = max.min(by_objects.max(c.extent_start));
            }
        }
        max
    }

    /// Refuses a write of `[offset, offset+len)` that reaches past the file's largest size
    /// (past a last component that does not go to the end of the file, or past what its
    /// objects can hold): EFBIG, as Lustre, before a byte is taken.
    pub fn check_writable(&self, offset: u64, len: u64) -> WeftResult<()> {
        let end = self.end();
        let max = self.size_max();
        if offset.saturating_add(len) > max {
            let why = if max == end {
                format!("the file's layout ends at {end} bytes: its last component (-E) goes no further")
            } else {
                format!("the file can be at most {max} bytes: its objects would pass the largest an OST keeps")
            };
            return Err(WeftError::new(ErrorCode::FileTooBig, why));
        }
        Ok(())
    }

    /// `[offset, offset+len)` split by component, in file order; a part past the last
    /// component is left out.
    pub fn segments(&self, offset: u64, len: u64) -> impl Iterator<Item = Segment<'_>> {
        let end = offset.saturating_add(len);
        self.data_components().filter_map(move |c| {
            let s = offset.max(c.extent_start);
            let e = end.min(c.extent_end);
            (s < e).then(|| Segment { comp: c, offset: s, len: e - s })
        })
    }

    /// Whether a component that `[offset, offset+len)` reaches has no objects yet.
    pub fn needs_instantiation(&self, offset: u64, len: u64) -> bool {
        self.segments(offset, len.max(1)).any(|seg| !seg.comp.is_instantiated())
    }

    /// Whether every component is instantiated (no other client can add objects to it).
    pub fn fully_instantiated(&self) -> bool {
        self.data_components().all(|c| c.is_instantiated())
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

    pub fn is_instantiated(&self) -> bool {
        self.flags & comp_flags::INIT != 0
    }

    /// The size object `stripe` has once the file is `file_size` bytes long: its share of
    /// the bytes of this component's extent below `file_size` (0 when the file ends before
    /// the component starts).
    pub fn object_size_in_file(&self, file_size: u64, stripe: usize) -> u64 {
        if file_size <= self.extent_start {
            return 0;
        }
        self.object_size_for(file_size.min(self.extent_end), stripe)
    }

    /// The spec that gives a new layout this component's shape (a restore's, an import's).
    pub fn spec(&self) -> StripeSpec {
        StripeSpec {
            stripe_count: self.stripe_count_shown().max(1),
            stripe_size: self.stripe_size,
            pool: self.pool.clone(),
            ..StripeSpec::unset()
        }
    }

    /// The stripe count a listing shows: a released component's is the one it will have
    /// once restored, an uninstantiated one's the count asked for (-1: all OSTs, 0: the
    /// default), an MDT component's 0 (as Lustre).
    pub fn stripe_count_shown(&self) -> i64 {
        match self.pattern {
            Pattern::Mdt => 0,
            Pattern::Released { stripe_count } => stripe_count as i64,
            Pattern::Raid0 if !self.is_instantiated() => match self.want.stripe_count {
                0 if self.want.ost_list.is_empty() => STRIPE_COUNT_DEFAULT as i64,
                0 => self.want.ost_list.len() as i64,
                n => n,
            },
            Pattern::Raid0 => self.objects.len() as i64,
        }
    }

    /// The file offset where this component's objects would pass the largest object an
    /// OST keeps: stripe units of the largest object times the stripe count (one stripe for
    /// one not yet instantiated with -1, which may get few). An MDT component ends first.
    pub fn size_max_by_objects(&self) -> u64 {
        let stripes = match self.pattern {
            Pattern::Mdt => return u64::MAX,
            _ if self.is_instantiated() && !self.objects.is_empty() => self.objects.len() as u64,
            _ => self.stripe_count_shown().max(1) as u64,
        };
        let unit = self.stripe_size.max(1);
        (OBJECT_SIZE_MAX_BYTES / unit * unit).saturating_mul(stripes)
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
    /// Computed per stripe from the range's first and last bytes in it, so its cost does not
    /// grow with the range (a punch of a whole file, of any size).
    pub fn object_extents(&self, offset: u64, len: u64) -> Vec<ObjectExtent> {
        let (ss, n) = (self.stripe_size, self.objects.len() as u64);
        debug_assert!(ss > 0 && n > 0);
        let Some(last) = offset.checked_add(len).and_then(|end| end.checked_sub(1)).filter(|_| len > 0) else {
            return Vec::new();
        };
        let (first_unit, last_unit) = (offset / ss, last / ss);
        (0..n)
            .filter_map(|k| {
                // The stripe's first unit at or after the range's first, and last at or before
                // its last.
                let from_unit = first_unit + (k + n - first_unit % n) % n;
                let to_unit = last_unit.checked_sub((last_unit % n + n - k) % n)?;
                if from_unit > to_unit {
                    return None;
                }
                let start = if from_unit == first_unit { offset } else { from_unit * ss };
                let end = if to_unit == last_unit { last } else { to_unit * ss + ss - 1 };
                let (stripe, object_offset) = self.locate(start);
                let object_end = self.locate(end).1 + 1;
                debug_assert_eq!(stripe as u64, k);
                Some(ObjectExtent { stripe, object_offset, len: object_end - object_offset })
            })
            .collect()
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
        // A range of any size costs one step per stripe (a punch of a whole file).
        let wide = comp(1 << 20, 4).object_extents(12345, 1 << 60);
        assert_eq!((wide.len(), wide.iter().map(|e| e.len).sum::<u64>()), (4, 1 << 60));
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
    fn a_layouts_shape_with_its_mdt_component_moved_to_an_ost() {
        let spec = StripeSpec {
            components: vec![
                ComponentSpec { end: 1 << 20, on_mdt: true, stripe: StripeSpec::unset() },
                ComponentSpec {
                    end: u64::MAX,
                    on_mdt: false,
                    stripe: StripeSpec { stripe_count: 2, ..StripeSpec::unset() },
                },
            ],
            ..StripeSpec::unset()
        };
        let planned = Layout::planned(&spec);
        let shape = planned.shape();
        assert_eq!(shape.components.len(), 2);
        assert!(shape.components[0].on_mdt && shape.components[0].end == 1 << 20);
        assert_eq!(shape.components[1].stripe.stripe_count, 2);
        let off = shape.off_mdt().expect("it had data on the MDT");
        assert!(off.validate().is_ok(), "{:?}", off.validate());
        let layout = Layout::planned(&off);
        assert_eq!(layout.components[0].pattern, Pattern::Raid0);
        assert_eq!((layout.components[0].extent_end, layout.components[0].stripe_size), (1 << 20, 1 << 20));
        assert_eq!(layout.components[0].want.stripe_count, 1);
        assert!(off.off_mdt().is_none(), "nothing left on the MDT");
        let plain = StripeSpec { stripe_count: 3, ..StripeSpec::unset() };
        assert_eq!(Layout::planned(&plain).shape().stripe_count, 3);
    }

    #[test]
    fn merge_inherits_unset_fields() {
        let dir =
            StripeSpec { stripe_count: 4, stripe_size: 2 << 20, pool: Some("fast".into()), ..StripeSpec::unset() };
        let mut file = StripeSpec::unset();
        file.stripe_size = 65536;
        let m = file.merged_over(&dir);
        assert_eq!((m.stripe_count, m.stripe_size, m.pool.as_deref()), (4, 65536, Some("fast")));
    }

    fn pfl() -> StripeSpec {
        let comp = |end, on_mdt, count| ComponentSpec {
            end,
            on_mdt,
            stripe: StripeSpec { stripe_count: count, ..StripeSpec::unset() },
        };
        StripeSpec {
            components: vec![comp(64 << 10, true, 0), comp(4 << 20, false, 1), comp(u64::MAX, false, 4)],
            ..StripeSpec::unset()
        }
    }

    #[test]
    fn a_composite_spec_plans_components_end_to_end() {
        let spec = pfl();
        spec.validate().unwrap();
        let l = Layout::planned(&spec);
        let ext: Vec<(u64, u64, Pattern)> =
            l.components.iter().map(|c| (c.extent_start, c.extent_end, c.pattern)).collect();
        assert_eq!(
            ext,
            [(0, 64 << 10, Pattern::Mdt), (64 << 10, 4 << 20, Pattern::Raid0), (4 << 20, u64::MAX, Pattern::Raid0)]
        );
        assert!(l.is_composite() && !l.fully_instantiated());
        assert_eq!(l.components.iter().map(|c| c.stripe_count_shown()).collect::<Vec<_>>(), [0, 1, 4]);
        // Segments split a range at component ends, in file order.
        let segs: Vec<(u32, u64, u64)> = l.segments(60 << 10, 8 << 20).map(|s| (s.comp.id, s.offset, s.len)).collect();
        assert_eq!(
            segs,
            [(1, 60 << 10, 4 << 10), (2, 64 << 10, (4 << 20) - (64 << 10)), (3, 4 << 20, (4 << 20) + (60 << 10))]
        );
        assert!(l.needs_instantiation(0, 1));
        assert!(!Layout::raid0(1 << 20, None, vec![]).is_composite());
        // A layout of the MDT component alone ends there.
        let only = StripeSpec { components: vec![spec.components[0].clone()], ..StripeSpec::unset() };
        let l = Layout::planned(&only);
        assert!(l.check_writable(0, 64 << 10).is_ok());
        assert_eq!(l.check_writable(64 << 10, 1).unwrap_err().code, ErrorCode::FileTooBig);
    }

    #[test]
    fn a_file_is_as_large_as_its_objects_can_hold_and_no_larger() {
        // One stripe: the largest object, rounded down to whole stripe units.
        let unit_max = OBJECT_SIZE_MAX_BYTES / (1 << 20) * (1 << 20);
        let one = Layout::raid0(1 << 20, None, comp(1 << 20, 1).objects);
        assert_eq!(one.size_max(), unit_max);
        assert!(one.check_writable(unit_max - 4096, 4096).is_ok());
        let err = one.check_writable(1 << 59, 1 << 20).unwrap_err();
        assert_eq!(err.code, ErrorCode::FileTooBig);
        assert!(err.message.contains("largest an OST keeps"), "{}", err.message);
        // Each stripe holds its share: the last byte maps into an object just below the limit.
        let four = Layout::raid0(1 << 20, None, comp(1 << 20, 4).objects);
        assert_eq!(four.size_max(), unit_max * 4);
        assert!(four.components[0].locate(four.size_max() - 1).1 < OBJECT_SIZE_MAX_BYTES);
        // A composite file: its last component's stripes (4, planned) decide; one ending
        // early ends the file there.
        assert_eq!(Layout::planned(&pfl()).size_max(), unit_max * 4);
        assert_eq!(
            Layout::planned(&StripeSpec { components: pfl().components[..2].to_vec(), ..StripeSpec::unset() })
                .size_max(),
            4 << 20
        );
    }

    #[test]
    fn composite_specs_are_checked_with_the_option_named() {
        let mut s = pfl();
        s.components[1].end = 32 << 10;
        assert!(s.validate().unwrap_err().message.contains("not past its start"));
        let mut s = pfl();
        s.components[0].end = 2 << 20;
        assert!(s.validate().unwrap_err().message.contains("-L mdt"));
        let mut s = pfl();
        s.components[1].on_mdt = true;
        assert!(s.validate().unwrap_err().message.contains("only the first component"));
        let mut s = pfl();
        s.components[1].end = (4 << 20) + (64 << 10);
        assert!(s.validate().unwrap_err().message.contains("multiple of its stripe size"));
        let mut s = pfl();
        s.stripe_count = 2;
        assert!(s.validate().unwrap_err().message.contains("after each -E"));
        // A composite default is taken whole; a plain spec over it inherits nothing of it.
        assert_eq!(StripeSpec::unset().merged_over(&pfl()), pfl());
        let plain = StripeSpec { stripe_count: 2, ..StripeSpec::unset() };
        assert_eq!(plain.merged_over(&pfl()), plain);
        assert_eq!(pfl().merged_over(&plain), pfl());
    }

    #[test]
    fn synchronous_mirrors_are_all_written_and_need_no_intent_but_for_objects() {
        let two = StripeSpec { mirrors: vec![StripeSpec::unset(), StripeSpec::unset()], ..StripeSpec::unset() };
        let mut l = Layout::planned(&two);
        for (k, c) in l.components.iter_mut().enumerate() {
            c.objects = vec![StripeObject { ost: k as u32, fid: Fid::new(1, k as u32, 0) }];
            c.flags |= comp_flags::INIT;
        }
        // FLR's: one mirror written, and a write intent first (the other goes stale).
        assert!(!l.sync_mirrors());
        assert_eq!(l.write_mirrors(), [1]);
        assert!(l.needs_write_intent(0, 10));
        l.set_sync_mirrors(true);
        assert!(l.sync_mirrors() && l.is_mirrored());
        assert_eq!(l.write_mirrors(), [1, 2]);
        assert!(!l.needs_write_intent(0, 10));
        // Weft's flag is not one of Lustre's component flags in listings.
        assert_eq!(comp_flags::show(l.components[0].flags), "init");
        // A stale mirror is not written; alone in sync, mirror 2 takes the writes.
        l.components[0].flags |= comp_flags::STALE;
        assert_eq!(l.write_mirrors(), [2]);
        assert_eq!(l.data_objects().map(|o| o.ost).collect::<Vec<_>>(), [1]);
        // A mirror without objects needs the intent that gives it some.
        l.components[1].objects.clear();
        l.components[1].flags &= !comp_flags::INIT;
        l.components[0].flags &= !comp_flags::STALE;
        assert!(l.needs_write_intent(0, 10) && l.write_needs_instantiation(0, 10));
        // A file without mirrors is never written "synchronously".
        let mut plain = Layout::raid0(1 << 20, None, vec![StripeObject { ost: 0, fid: Fid::new(1, 9, 0) }]);
        plain.set_sync_mirrors(true);
        assert!(!plain.sync_mirrors());
        assert_eq!(plain.write_mirrors(), [0]);
    }

    #[test]
    fn object_sizes_in_a_later_component_follow_the_file_size() {
        let mut l = Layout::planned(&pfl());
        let comp = &mut l.components[2];
        comp.objects = (0..4).map(|i| StripeObject { ost: i, fid: Fid::new(1, i, 0) }).collect();
        let comp = &l.components[2];
        // Ends before the component: empty objects.
        assert_eq!((0..4).map(|k| comp.object_size_in_file(4 << 20, k)).collect::<Vec<_>>(), [0, 0, 0, 0]);
        // 4 MiB + 1.5 MiB: stripe 0 holds unit 4 whole (object bytes 1M..2M), stripe 1 half
        // of unit 5; the others hold their earlier rounds as holes.
        let sizes: Vec<u64> = (0..4).map(|k| comp.object_size_in_file((5 << 20) + (512 << 10), k)).collect();
        assert_eq!(sizes, [2 << 20, (1 << 20) + (512 << 10), 1 << 20, 1 << 20]);
        assert_eq!(comp.file_size_from_objects(&sizes), (5 << 20) + (512 << 10));
    }
}
