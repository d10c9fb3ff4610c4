//! The bytes the benchmarks write and check. Every 8-byte word of a stream holds its own word
//! index (offset / 8) xor a key derived from a seed, so a block that lands at the wrong
//! offset, a stale block from an earlier run, a hole or a torn write is caught, not just a
//! wrong length. Seeds name the stream: a run seed mixed with what the stream is (the ior-easy
//! file of rank r, the ior-hard file, mdtest-hard file i of rank r).

/// SplitMix64's finalizer: spreads seeds that differ in one bit over the whole word.
pub fn mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What a stream holds, for its seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    IorEasy { rank: u32 },
    IorHard,
    MdtestHard { rank: u32, index: u64 },
    Single,
}

/// The seed of `stream` in the run whose seed is `run_seed`.
pub fn seed(run_seed: u64, stream: Stream) -> u64 {
    let id = match stream {
        Stream::IorEasy { rank } => (1 << 60) | rank as u64,
        Stream::IorHard => 2 << 60,
        Stream::MdtestHard { rank, index } => (3 << 60) ^ ((rank as u64) << 40) ^ index,
        Stream::Single => 4 << 60,
    };
    mix(run_seed ^ mix(id))
}

fn byte_at(key: u64, offset: u64) -> u8 {
    ((offset / 8) ^ key).to_le_bytes()[(offset % 8) as usize]
}

/// Fills `buf` with the bytes of stream `seed` at `offset`.
pub fn fill(seed: u64, offset: u64, buf: &mut [u8]) {
    let key = mix(seed);
    let head = (((8 - offset % 8) % 8) as usize).min(buf.len());
    let (first, rest) = buf.split_at_mut(head);
    for (i, b) in first.iter_mut().enumerate() {
        *b = byte_at(key, offset + i as u64);
    }
    let mut word = (offset + head as u64) / 8;
    let mut words = rest.chunks_exact_mut(8);
    for w in &mut words {
        w.copy_from_slice(&(word ^ key).to_le_bytes());
        word += 1;
    }
    let tail = words.into_remainder();
    for (i, b) in tail.iter_mut().enumerate() {
        *b = (word ^ key).to_le_bytes()[i];
    }
}

/// The bytes of stream `seed` at `offset`.
pub fn bytes(seed: u64, offset: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    fill(seed, offset, &mut v);
    v
}

/// The first byte of `data` (read at `offset` of stream `seed`) that is not what was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    pub offset: u64,
    pub found: u8,
    pub expected: u8,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "offset {}: read byte {:#04x}, expected {:#04x}", self.offset, self.found, self.expected)
    }
}

/// Checks `data`, read at `offset`, against stream `seed`, a word at a time.
pub fn verify(seed: u64, offset: u64, data: &[u8]) -> Result<(), Mismatch> {
    let key = mix(seed);
    let head = (((8 - offset % 8) % 8) as usize).min(data.len());
    let first_bad = |from: usize, to: usize| -> Result<(), Mismatch> {
        for (i, &found) in data[from..to].iter().enumerate() {
            let at = offset + (from + i) as u64;
            let expected = byte_at(key, at);
            if found != expected {
                return Err(Mismatch { offset: at, found, expected });
            }
        }
        Ok(())
    };
    first_bad(0, head)?;
    let words = data[head..].chunks_exact(8);
    let tail_start = data.len() - words.remainder().len();
    for (word, (i, w)) in ((offset + head as u64) / 8..).zip(words.enumerate()) {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        if u64::from_le_bytes(a) != word ^ key {
            let from = head + i * 8;
            return first_bad(from, from + 8);
        }
    }
    first_bad(tail_start, data.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_offset_matches_the_byte_model() {
        let seed = 42;
        let whole = bytes(seed, 0, 100);
        let key = mix(seed);
        for (i, b) in whole.iter().enumerate() {
            assert_eq!(*b, byte_at(key, i as u64));
        }
        for off in 0..20u64 {
            for len in [0usize, 1, 7, 8, 9, 31, 64] {
                let part = bytes(seed, off, len);
                assert_eq!(part, whole[off as usize..off as usize + len], "offset {off} len {len}");
                assert_eq!(verify(seed, off, &part), Ok(()));
            }
        }
    }

    #[test]
    fn a_flipped_byte_is_found_where_it_is() {
        let seed = seed(7, Stream::IorEasy { rank: 3 });
        for off in [0u64, 3, 1 << 20] {
            let mut data = bytes(seed, off, 3901);
            for at in [0usize, 5, 8, 1000, 3900] {
                let good = data[at];
                data[at] ^= 0x40;
                let m = verify(seed, off, &data).unwrap_err();
                assert_eq!(m, Mismatch { offset: off + at as u64, found: good ^ 0x40, expected: good });
                data[at] = good;
            }
        }
    }

    #[test]
    fn misplaced_and_foreign_blocks_do_not_verify() {
        let s = seed(1, Stream::IorHard);
        assert!(verify(s, 47008, &bytes(s, 0, 47008)).is_err(), "a block at the wrong offset");
        let other = seed(2, Stream::IorHard);
        assert!(verify(s, 0, &bytes(other, 0, 64)).is_err(), "a block from another run");
        assert!(verify(s, 0, &[0u8; 64]).is_err(), "a hole");
        let a = seed(1, Stream::MdtestHard { rank: 0, index: 1 });
        let b = seed(1, Stream::MdtestHard { rank: 1, index: 0 });
        assert_ne!(a, b);
    }
}
