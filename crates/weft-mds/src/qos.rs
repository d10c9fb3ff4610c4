//! Where new objects go once the OSTs are out of balance: Lustre's allocator
//! (`lod_qos.c`). While the free space of the OSTs differs by less than `qos_threshold_rr`
//! percent of the largest, objects go round robin; past it, each stripe goes to an OST
//! drawn at random with a weight that grows with its free space (and, in the part
//! `qos_prio_free` leaves, evenly, which stands for Lustre's weighting by load: Weft's OSTs
//! share their servers' load evenly on one machine).

/// `lod.*.qos_threshold_rr` and `lod.*.qos_prio_free`, percent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QosSettings {
    pub threshold_rr: u8,
    pub prio_free: u8,
}

/// Lustre's defaults: `qos_threshold_rr=17`, `qos_prio_free=91`.
impl Default for QosSettings {
    fn default() -> Self {
        QosSettings { threshold_rr: 17, prio_free: 91 }
    }
}

impl QosSettings {
    /// A percentage parameter's value, or an error naming the parameter and what it takes.
    pub fn parse_percent(name: &str, value: &str) -> Result<u8, String> {
        match value.trim().trim_end_matches('%').parse::<u8>() {
            Ok(p) if p <= 100 => Ok(p),
            _ => Err(format!("{name} '{value}': a percentage, 0 to 100")),
        }
    }
}

/// Whether the OSTs' free space is out of balance (Lustre's `lod_qos_is_usable` test): the
/// emptiest and the fullest differ by `threshold_rr` percent of the emptiest's free space or
/// more. Fewer than two OSTs are never out of balance.
pub fn out_of_balance(free: &[u64], threshold_rr: u8) -> bool {
    let (Some(max), Some(min)) = (free.iter().max(), free.iter().min()) else { return false };
    free.len() >= 2 && (max - min) as u128 * 100 >= *max as u128 * u128::from(threshold_rr) && max > min
}

/// A step of splitmix64: the draws of one placement, from a seed (the create's turn), so a
/// test replays them.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `count` distinct OSTs of `candidates` (index, free bytes), each drawn in turn with a
/// weight of `prio_free` percent its share of the free space and the rest an even share
/// (Lustre's weighted random allocation, `lod_ost_alloc_qos`; its weighting by an OST's
/// recent objects is the even share here). The draws come from `seed`.
pub fn weighted_pick(candidates: &[(u32, u64)], count: usize, prio_free: u8, seed: u64) -> Vec<u32> {
    let mut left: Vec<(u32, u64)> = candidates.to_vec();
    let mut state = seed;
    let mut out = Vec::with_capacity(count.min(left.len()));
    while out.len() < count && !left.is_empty() {
        // Weights in millionths of the whole, so small OSTs keep a non-zero chance.
        let total: u128 = left.iter().map(|(_, f)| u128::from(*f)).sum::<u128>().max(1);
        let n = left.len() as u128;
        let weight = |free: u64| -> u128 {
            u128::from(prio_free) * 10_000 * u128::from(free) / total + u128::from(100 - prio_free) * 10_000 / n + 1
        };
        let sum: u128 = left.iter().map(|(_, f)| weight(*f)).sum();
        let mut at = u128::from(next(&mut state)) % sum;
        let i = left
            .iter()
            .position(|(_, f)| {
                let w = weight(*f);
                if at < w {
                    return true;
                }
                at -= w;
                false
            })
            .unwrap_or(left.len() - 1);
        out.push(left.remove(i).0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balance_is_judged_against_the_threshold() {
        let gib = 1u64 << 30;
        assert!(!out_of_balance(&[100 * gib, 90 * gib], 17), "10% apart: round robin");
        assert!(out_of_balance(&[100 * gib, 80 * gib], 17), "20% apart: weighted");
        assert!(!out_of_balance(&[100 * gib, 10 * gib], 100), "threshold 100: always round robin");
        assert!(!out_of_balance(&[5 * gib], 17) && !out_of_balance(&[], 17));
        assert!(!out_of_balance(&[0, 0], 0), "equal: balanced whatever the threshold");
    }

    #[test]
    fn the_emptier_ost_gets_most_objects_once_out_of_balance() {
        let gib = 1u64 << 30;
        // OST 7 has ten times the free space of OST 1.
        let osts = [(1, 10 * gib), (7, 100 * gib)];
        let mut on7 = 0;
        for seed in 0..1000 {
            let pick = weighted_pick(&osts, 1, 91, seed);
            assert_eq!(pick.len(), 1);
            on7 += usize::from(pick[0] == 7);
        }
        // Expected 0.91 * 100/110 + 0.09 / 2 = 87.2%.
        assert!((820..=920).contains(&on7), "OST 7 drew {on7} of 1000");
        // prio_free 0: even, whatever the space.
        let even = (0..1000).filter(|s| weighted_pick(&osts, 1, 0, *s)[0] == 7).count();
        assert!((430..=570).contains(&even), "{even} of 1000 with prio_free 0");
        // Distinct OSTs, as many as asked (or as there are), each once.
        let three = [(0, gib), (1, 2 * gib), (2, 3 * gib), (3, 0)];
        let mut pick = weighted_pick(&three, 3, 91, 42);
        pick.sort_unstable();
        pick.dedup();
        assert_eq!(pick.len(), 3);
        assert_eq!(weighted_pick(&three, 9, 91, 1).len(), 4);
        // A full OST keeps a small chance (the even share): it is not starved for ever.
        let full = (0..2000).filter(|s| weighted_pick(&three, 1, 91, *s)[0] == 3).count();
        assert!((1..=100).contains(&full), "the full OST drew {full} of 2000");
    }
}
