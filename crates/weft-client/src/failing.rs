//! The targets that failed a mirror's read lately, and the order mirror reads try the
//! mirrors in: pure, no clock read (the caller passes `now`), so a test moves time on.

use crate::limits::MIRROR_FAILING_MS;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use weft_proto::layout::Layout;

/// Target index -> until when it counts as failing.
#[derive(Debug, Default)]
pub struct FailingTargets {
    until: HashMap<u32, Instant>,
}

impl FailingTargets {
    /// A read of `mirror` failed at `now`: its targets go last for [`MIRROR_FAILING_MS`].
    /// Targets whose time is over are forgotten (so the map holds only recent failures).
    pub fn note(&mut self, mirror: &Layout, now: Instant) {
        let until = now + Duration::from_millis(MIRROR_FAILING_MS);
        self.until.retain(|_, t| *t > now);
        for o in mirror.objects() {
            self.until.insert(o.ost, until);
        }
    }

    /// Whether target `ost` counts as failing at `now`.
    pub fn failing(&self, ost: u32, now: Instant) -> bool {
        self.until.get(&ost).is_some_and(|t| *t > now)
    }

    /// The mirrors of `layout` in sync, in the order reads try them at `now`: those with an
    /// object on a failing target last, the others in the layout's order.
    pub fn read_order(&self, layout: &Layout, now: Instant) -> Vec<u16> {
        let mut order = layout.read_mirrors();
        order.sort_by_key(|id| layout.mirror(*id).objects().any(|o| self.failing(o.ost, now)));
        order
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::layout::{LayoutComponent, Pattern, StripeObject, StripeSpec};
    use weft_proto::Fid;

    /// A file with mirror 1 on OST 0 and mirror 2 on OST 1.
    fn two_mirrors() -> Layout {
        let component = |id: u32, ost: u32| LayoutComponent {
            id,
            mirror_id: id as u16,
            flags: 0,
            extent_start: 0,
            extent_end: u64::MAX,
            pattern: Pattern::Raid0,
            stripe_size: 1 << 20,
            pool: None,
            objects: vec![StripeObject { ost, fid: Fid::new(0x1_0000_0000, id, 0) }],
            want: StripeSpec::unset(),
        };
        Layout { generation: 1, components: vec![component(1, 0), component(2, 1)] }
    }

    #[test]
    fn a_failed_mirror_goes_last_for_a_while() {
        let layout = two_mirrors();
        let mut failing = FailingTargets::default();
        let start = Instant::now();
        assert_eq!(failing.read_order(&layout, start), [1, 2]);
        failing.note(&layout.mirror(1), start);
        assert_eq!(failing.read_order(&layout, start), [2, 1]);
        let over = start + Duration::from_millis(MIRROR_FAILING_MS);
        assert_eq!(failing.read_order(&layout, over - Duration::from_millis(1)), [2, 1]);
        assert_eq!(failing.read_order(&layout, over), [1, 2], "failing no more");
        // Both failed: the layout's order; the older failure is forgotten at the next note.
        failing.note(&layout.mirror(2), start + Duration::from_millis(10));
        assert_eq!(failing.read_order(&layout, start + Duration::from_millis(20)), [1, 2]);
        failing.note(&layout.mirror(2), over + Duration::from_millis(1));
        assert_eq!(failing.until.len(), 1);
        assert_eq!(failing.read_order(&layout, over + Duration::from_millis(2)), [1, 2]);
        assert!(failing.failing(1, over) && !failing.failing(0, over));
    }
}
