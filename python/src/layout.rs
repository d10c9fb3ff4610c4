//! Layouts between Python and `weft::LayoutEdit`: a list of components, each a tuple (the
//! pure-Python part makes `weft.Layout` and `weft.Component` of them).

use crate::os_error;
use pyo3::prelude::*;
use weft::{Component, LayoutEdit};

/// A component asked for: (start, end, stripe_count, stripe_size, pool, osts, on_mdt);
/// `end` None is the end of the file, 0 a default, stripe_count -1 every OST.
pub(crate) type ComponentIn = (u64, Option<u64>, i64, u64, Option<String>, Vec<u32>, bool);

/// A component read back: the same, then whether it has objects and its mirror.
pub(crate) type ComponentOut = (u64, Option<u64>, i64, u64, Option<String>, Vec<u32>, bool, bool, u16);

pub(crate) fn edit_of(comps: Vec<ComponentIn>) -> PyResult<LayoutEdit> {
    if comps.is_empty() {
        return Ok(LayoutEdit::default());
    }
    let components = comps
        .into_iter()
        .map(|(start, end, stripe_count, stripe_size, pool, osts, on_mdt)| Component {
            start,
            end: end.unwrap_or(u64::MAX),
            stripe_count,
            stripe_size,
            pool,
            osts,
            on_mdt,
            instantiated: false,
            mirror_id: 0,
        })
        .collect();
    let edit = LayoutEdit { components, current: 0 };
    // Checked here, so that a bad layout fails before anything is made.
    edit.spec().map_err(|e| os_error(e, None))?;
    Ok(edit)
}

pub(crate) fn components_of(edit: &LayoutEdit) -> Vec<ComponentOut> {
    edit.components
        .iter()
        .map(|c| {
            let end = (c.end != u64::MAX).then_some(c.end);
            (
                c.start,
                end,
                c.stripe_count,
                c.stripe_size,
                c.pool.clone(),
                c.osts.clone(),
                c.on_mdt,
                c.instantiated,
                c.mirror_id,
            )
        })
        .collect()
}
