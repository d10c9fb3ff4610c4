//! Pure planning of striped I/O, apart from the sending: which object ranges a file range
//! touches, split into requests no larger than the bulk limit, where each byte of a read
//! reply lands in the caller's buffer, and which bytes of a write go to which object.
//!
//! Everything here is tested against a byte-by-byte model; nothing performs I/O.

use bytes::{Bytes, BytesMut};
use weft_proto::layout::LayoutComponent;

/// One request's worth of one object: a contiguous object range, at most the bulk limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectPiece {
    /// Index into the component's objects.
    pub stripe: usize,
    pub object_offset: u64,
    pub len: u64,
}

/// A run of a piece that is contiguous in the file too (it lies in one stripe unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// Offset of the run inside the piece.
    pub piece_offset: u64,
    pub file_offset: u64,
    pub len: u64,
}

/// The object pieces of `[offset, offset+len)`: one contiguous object range per stripe
/// touched, split so that no piece exceeds `piece_bytes_max`.
pub fn plan_pieces(comp: &LayoutComponent, offset: u64, len: u64, piece_bytes_max: u64) -> Vec<ObjectPiece> {
    assert!(piece_bytes_max > 0, "a piece must be allowed at least one byte");
    if len == 0 || comp.objects.is_empty() {
        return Vec::new();
    }
    let mut pieces = Vec::new();
    for extent in comp.object_extents(offset, len) {
        let mut done = 0;
        while done < extent.len {
            let take = (extent.len - done).min(piece_bytes_max);
            pieces.push(ObjectPiece { stripe: extent.stripe, object_offset: extent.object_offset + done, len: take });
            done += take;
        }
    }
    pieces
}

/// The runs of `piece` (first `len` bytes of it), in object order. Within one stripe unit
/// consecutive object bytes are consecutive file bytes, so a run ends at each unit boundary.
pub fn runs<'a>(comp: &'a LayoutComponent, piece: &ObjectPiece, len: u64) -> impl Iterator<Item = Run> + 'a {
    let stripe_size = comp.stripe_size;
    let stripe = piece.stripe;
    let start = piece.object_offset;
    let len = len.min(piece.len);
    let mut pos = 0u64;
    std::iter::from_fn(move || {
        if pos >= len {
            return None;
        }
        let object_offset = start + pos;
        let take = (stripe_size - object_offset % stripe_size).min(len - pos);
        let run = Run { piece_offset: pos, file_offset: comp.file_offset(stripe, object_offset), len: take };
        pos += take;
        Some(run)
    })
}

/// Copies the bytes an object returned for `piece` into `out`, which holds the file range
/// starting at `range_offset`. `data` may be shorter than the piece (the object ends
/// early): the rest of `out` is left as it is (zero), which is how holes read.
pub fn scatter(comp: &LayoutComponent, range_offset: u64, piece: &ObjectPiece, data: &[u8], out: &mut [u8]) {
    assert!(data.len() as u64 <= piece.len, "an object returned more bytes than asked for");
    for run in runs(comp, piece, data.len() as u64) {
        assert!(run.file_offset >= range_offset, "a piece lies outside the range it was planned for");
        let dst = (run.file_offset - range_offset) as usize;
        let src = run.piece_offset as usize;
        let n = run.len as usize;
        out[dst..dst + n].copy_from_slice(&data[src..src + n]);
    }
}

/// The bytes of `piece` taken from `data`, which holds the file range starting at
/// `range_offset`. A piece that is contiguous in the file is a slice of `data` (no copy);
/// otherwise its runs are gathered into one buffer.
pub fn gather(comp: &LayoutComponent, range_offset: u64, piece: &ObjectPiece, data: &Bytes) -> Bytes {
    if comp.objects.len() == 1 {
        // One stripe: object offsets are file offsets.
        let start = (piece.object_offset - range_offset) as usize;
        return data.slice(start..start + piece.len as usize);
    }
    let mut runs = runs(comp, piece, piece.len).peekable();
    let Some(first) = runs.next() else {
        return Bytes::new();
    };
    let first_start = (first.file_offset - range_offset) as usize;
    if runs.peek().is_none() {
        return data.slice(first_start..first_start + first.len as usize);
    }
    let mut buffer = BytesMut::with_capacity(piece.len as usize);
    buffer.extend_from_slice(&data[first_start..first_start + first.len as usize]);
    for run in runs {
        let start = (run.file_offset - range_offset) as usize;
        buffer.extend_from_slice(&data[start..start + run.len as usize]);
    }
    debug_assert_eq!(buffer.len() as u64, piece.len);
    buffer.freeze()
}

/// Whether `piece` alone is the whole file range `[range_offset, range_offset+len)`, in
/// file order: then a read reply can be handed back without copying.
pub fn piece_is_whole_range(comp: &LayoutComponent, range_offset: u64, len: u64, piece: &ObjectPiece) -> bool {
    if piece.len != len {
        return false;
    }
    let mut r = runs(comp, piece, piece.len);
    match (r.next(), r.next()) {
        (Some(first), None) => first.file_offset == range_offset,
        // Several runs are still in file order when there is one stripe.
        (Some(first), Some(_)) => comp.objects.len() == 1 && first.file_offset == range_offset,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::layout::{Layout, StripeObject};
    use weft_proto::Fid;

    fn comp(stripe_size: u64, count: usize) -> LayoutComponent {
        let objects = (0..count).map(|i| StripeObject { ost: i as u32 * 3, fid: Fid::new(1, i as u32, 0) }).collect();
        Layout::raid0(stripe_size, None, objects).components.remove(0)
    }

    /// The model: file byte `off` lives in stripe `(off/ss) % n` at object offset
    /// `(off/ss/n)*ss + off%ss`. Objects are modelled as byte vectors.
    fn model_location(ss: u64, n: u64, off: u64) -> (usize, u64) {
        let unit = off / ss;
        ((unit % n) as usize, (unit / n) * ss + off % ss)
    }

    /// The objects a file of `content` would have.
    fn model_objects(ss: u64, n: usize, content: &[u8]) -> Vec<Vec<u8>> {
        let mut objects = vec![Vec::new(); n];
        for (off, byte) in content.iter().enumerate() {
            let (s, o) = model_location(ss, n as u64, off as u64);
            let o = o as usize;
            if objects[s].len() <= o {
                objects[s].resize(o + 1, 0);
            }
            objects[s][o] = *byte;
        }
        objects
    }

    fn content(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8 + 1).collect()
    }

    #[test]
    fn pieces_cover_the_range_once_and_respect_the_limit() {
        for ss in [4u64, 8] {
            for n in 1..=4usize {
                let c = comp(ss, n);
                for max in [1u64, 3, 5, 1000] {
                    for off in 0..30u64 {
                        for len in 0..30u64 {
                            let pieces = plan_pieces(&c, off, len, max);
                            let mut seen = vec![0u32; 64];
                            for p in &pieces {
                                assert!(p.len > 0 && p.len <= max);
                                for run in runs(&c, p, p.len) {
                                    for b in 0..run.len {
                                        let fo = run.file_offset + b;
                                        assert_eq!(
                                            model_location(ss, n as u64, fo),
                                            (p.stripe, p.object_offset + run.piece_offset + b)
                                        );
                                        seen[fo as usize] += 1;
                                    }
                                }
                            }
                            for (fo, count) in seen.iter().enumerate() {
                                let inside = (fo as u64) >= off && (fo as u64) < off + len;
                                assert_eq!(*count, inside as u32, "ss={ss} n={n} max={max} off={off} len={len}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn reads_scattered_from_model_objects_match_the_file_with_zero_filled_tails() {
        for ss in [4u64, 8] {
            for n in 1..=3usize {
                let c = comp(ss, n);
                for file_len in [0usize, 5, 17, 40] {
                    let file = content(file_len);
                    let objects = model_objects(ss, n, &file);
                    for off in 0..45u64 {
                        for len in 0..20u64 {
                            let mut out = vec![0u8; len as usize];
                            for p in plan_pieces(&c, off, len, 3) {
                                // The object returns what it has: short past its end.
                                let obj = &objects[p.stripe];
                                let start = (p.object_offset as usize).min(obj.len());
                                let end = ((p.object_offset + p.len) as usize).min(obj.len());
                                scatter(&c, off, &p, &obj[start..end], &mut out);
                            }
                            for (i, b) in out.iter().enumerate() {
                                let fo = off as usize + i;
                                let expect = file.get(fo).copied().unwrap_or(0);
                                assert_eq!(*b, expect, "ss={ss} n={n} file_len={file_len} off={off} len={len} i={i}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn writes_gathered_per_piece_land_where_the_model_puts_them() {
        for ss in [4u64, 8] {
            for n in 1..=3usize {
                let c = comp(ss, n);
                for off in 0..20u64 {
                    for len in 1..30u64 {
                        let data = Bytes::from(content(len as usize));
                        let mut objects = vec![vec![0u8; 64]; n];
                        for p in plan_pieces(&c, off, len, 5) {
                            let bytes = gather(&c, off, &p, &data);
                            assert_eq!(bytes.len() as u64, p.len);
                            let o = p.object_offset as usize;
                            objects[p.stripe][o..o + bytes.len()].copy_from_slice(&bytes);
                        }
                        for i in 0..len {
                            let (s, o) = model_location(ss, n as u64, off + i);
                            assert_eq!(objects[s][o as usize], data[i as usize]);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_single_unit_write_is_sliced_not_copied() {
        let c = comp(8, 3);
        let data = Bytes::from(content(6));
        let pieces = plan_pieces(&c, 9, 6, 1 << 20);
        assert_eq!(pieces.len(), 1);
        let bytes = gather(&c, 9, &pieces[0], &data);
        assert_eq!(bytes.as_ptr(), data.as_ptr(), "a contiguous piece must share the caller's buffer");
        assert!(piece_is_whole_range(&c, 9, 6, &pieces[0]));
        // Two units on one stripe: contiguous in the file only when there is one stripe.
        let one = comp(4, 1);
        let p = plan_pieces(&one, 2, 10, 1 << 20);
        assert_eq!(p.len(), 1);
        assert!(piece_is_whole_range(&one, 2, 10, &p[0]));
        let data = Bytes::from(content(10));
        assert_eq!(gather(&one, 2, &p[0], &data).as_ptr(), data.as_ptr());
        let three = comp(4, 3);
        assert!(plan_pieces(&three, 2, 10, 1 << 20).iter().all(|p| !piece_is_whole_range(&three, 2, 10, p)));
    }
}
