//! What the operations that make or change a file's layout share: a layout made from a
//! spec and its components given objects (create, open of a released file, layout intents,
//! volatile files, setstripe), and the mirror a write intent keeps (layout intents, mirror
//! operations). Apart from create.rs, open.rs, mirror.rs and stripe.rs so that none of them
//! imports another for it.

use super::OpCtx;
use crate::objects::{instantiation_wants, Reservation};
use weft_proto::layout::{comp_flags, dom_mdt, dom_target};
use weft_proto::{Layout, StripeSpec, WeftResult};

/// The layout of `spec`, its first component instantiated from the request's reservation
/// (see [`instantiate`]).
pub fn layout_from(ctx: &mut OpCtx<'_>, spec: &StripeSpec, generation: u32) -> WeftResult<Layout> {
    let mut layout = ctx.core.objects.planned(spec);
    layout.generation = generation;
    if ctx.core.objects.sync_mirrors_by_pool(&layout) {
        layout.set_sync_mirrors(true);
    }
    instantiate(ctx, &mut layout, 1, None)?;
    Ok(layout)
}

/// Gives objects to every component of `layout` (of mirror `mirror` only, when given) that
/// reaches below `end` and has none
/// (Lustre's layout instantiation): those of the request's reservation when it was made
/// for exactly these components, noting in `ctx` that it is used; otherwise (the layout
/// changed since the request was prepared) objects reserved now, unwaited. Whether any
/// component was instantiated; the caller bumps the generation.
pub fn instantiate(ctx: &mut OpCtx<'_>, layout: &mut Layout, end: u64, mirror: Option<u16>) -> WeftResult<bool> {
    let wants = instantiation_wants(layout, end, dom_target(ctx.core.mdt_index), mirror);
    if wants.is_empty() {
        return Ok(false);
    }
    let owned;
    let res: &Reservation = match ctx.reservation {
        Some(r) if r.serves(&wants) => {
            ctx.reservation_used = true;
            r
        }
        _ => {
            owned = match ctx.core.objects.reserve_now(&wants) {
                Ok(r) => r,
                Err((taken, e)) => {
                    // Returned to the destroy queue like any unused reservation.
                    for obj in taken.objects() {
                        ctx.t.persist_next_oid(obj.ost, obj.fid.oid.saturating_add(1))?;
                        ctx.t.queue_destroy(obj.ost, obj.fid)?;
                    }
                    return Err(e);
                }
            };
            &owned
        }
    };
    for obj in res.objects() {
        ctx.t.persist_next_oid(obj.ost, obj.fid.oid.saturating_add(1))?;
    }
    for (id, _, objects) in &res.parts {
        let comp = layout.components.iter_mut().find(|c| c.id == *id).expect("wants come from this layout");
        comp.objects.clone_from(objects);
        comp.flags |= comp_flags::INIT;
    }
    Ok(true)
}

/// The mirror a write intent keeps: the first in sync whose objects are all on OSTs that
/// are up (the first in sync when none is whole).
pub fn primary(layout: &Layout, up: &impl Fn(u32) -> bool) -> u16 {
    let in_sync: Vec<u16> = layout.mirror_ids().into_iter().filter(|id| layout.mirror_in_sync(*id)).collect();
    let whole = |id: &u16| layout.mirror(*id).objects().all(|o| dom_mdt(o.ost).is_some() || up(o.ost));
    in_sync.iter().copied().find(whole).or(in_sync.first().copied()).unwrap_or(0)
}

/// Marks every component of every mirror but `keep` stale; whether any changed.
pub fn mark_stale_except(layout: &mut Layout, keep: u16) -> bool {
    let mut changed = false;
    for c in layout.components.iter_mut().filter(|c| c.mirror_id != keep) {
        changed |= c.flags & comp_flags::STALE == 0;
        c.flags |= comp_flags::STALE;
    }
    changed
}
