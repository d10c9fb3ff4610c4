//! What a user asks for: a stripe specification (`setstripe`, a directory's default), its
//! components and mirrors, how it is checked and inherited, and the choice of OSTs for a new
//! file.

use crate::error::{ErrorCode, WeftError, WeftResult};
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
    /// A composite (progressive) layout when not empty: its components in file order, each
    /// with its own striping (the fields above are then unset). Lustre's `-E END ... -E -1`.
    #[serde(default)]
    pub components: Vec<ComponentSpec>,
    /// A mirrored file (FLR) when not empty: each mirror's own spec, plain or composite
    /// (the fields above are then unset). Lustre's `lfs mirror create -N ... -N ...`.
    #[serde(default)]
    pub mirrors: Vec<StripeSpec>,
}

/// One component of a composite spec: it covers the file from the previous component's
/// end (0 for the first) to `end` (`u64::MAX`: to the end of the file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentSpec {
    pub end: u64,
    /// Data on the MDT (`-L mdt`): only the first component, at most [`DOM_SIZE_MAX_BYTES`].
    #[serde(default)]
    pub on_mdt: bool,
    /// The component's striping (its own `components` empty).
    pub stripe: StripeSpec,
}

impl ComponentSpec {
    /// The component as it is where the MDT keeps no data: the same extent, on one OST
    /// whose stripe is the whole extent (an MDT component ends at most at
    /// [`DOM_SIZE_MAX_BYTES`], a multiple of the stripe unit), so the file's shape past it
    /// is unchanged.
    pub fn off_mdt(&self) -> ComponentSpec {
        if !self.on_mdt {
            return self.clone();
        }
        let stripe = StripeSpec { stripe_count: 1, stripe_size: self.end, ..StripeSpec::unset() };
        ComponentSpec { end: self.end, on_mdt: false, stripe }
    }
}

impl StripeSpec {
    pub fn unset() -> Self {
        StripeSpec {
            stripe_count: 0,
            stripe_size: 0,
            start_ost: -1,
            ost_list: Vec::new(),
            pool: None,
            components: Vec::new(),
            mirrors: Vec::new(),
        }
    }

    /// Whether nothing is asked for (every field says "inherit").
    pub fn is_unset(&self) -> bool {
        *self == StripeSpec::unset()
    }

    /// Whether this is a composite (progressive or mirrored) spec.
    pub fn is_composite(&self) -> bool {
        !self.components.is_empty() || !self.mirrors.is_empty()
    }

    /// This spec with its data-on-MDT component (`-L mdt`) on one OST instead (see
    /// [`ComponentSpec::off_mdt`]), for an MDT that keeps no file data (a replicated one);
    /// None when no component is on the MDT.
    pub fn off_mdt(&self) -> Option<StripeSpec> {
        self.components.iter().any(|c| c.on_mdt).then(|| StripeSpec {
            components: self.components.iter().map(ComponentSpec::off_mdt).collect(),
            ..self.clone()
        })
    }

    /// Checks the values a user typed; the message names the option and what is allowed.
    pub fn validate(&self) -> WeftResult<()> {
        if !self.mirrors.is_empty() {
            return self.validate_mirrors();
        }
        if self.is_composite() {
            return self.validate_composite();
        }
        self.validate_plain()
    }

    fn validate_mirrors(&self) -> WeftResult<()> {
        let bare = StripeSpec { mirrors: Vec::new(), ..self.clone() };
        if !bare.is_unset() {
            return Err(WeftError::invalid("a mirrored layout takes its options after each -N, not before the first"));
        }
        if self.mirrors.len() < 2 || self.mirrors.len() > MIRRORS_MAX {
            return Err(WeftError::invalid(format!(
                "{} mirrors (-N): a mirrored file has 2 to {MIRRORS_MAX}",
                self.mirrors.len()
            )));
        }
        for (i, m) in self.mirrors.iter().enumerate() {
            if !m.mirrors.is_empty() {
                return Err(WeftError::invalid(format!("mirror {} nests mirrors", i + 1)));
            }
            if m.components.iter().any(|c| c.on_mdt) {
                return Err(WeftError::invalid(
                    "data on the MDT (-L mdt) cannot be mirrored: its one copy is the MDT's",
                ));
            }
            m.validate().map_err(|e| WeftError::invalid(format!("mirror {}: {}", i + 1, e.message)))?;
        }
        Ok(())
    }

    fn validate_composite(&self) -> WeftResult<()> {
        let plain = StripeSpec { components: Vec::new(), ..self.clone() };
        if !plain.is_unset() {
            return Err(WeftError::invalid(
                "a composite layout takes -c, -S, -i, -o and -p after each -E, not before the first",
            ));
        }
        if self.components.len() > LAYOUT_COMPONENTS_MAX {
            return Err(WeftError::invalid(format!(
                "{} components (-E) are too many: at most {LAYOUT_COMPONENTS_MAX}",
                self.components.len()
            )));
        }
        let mut start = 0u64;
        for (i, c) in self.components.iter().enumerate() {
            let n = i + 1;
            if c.stripe.is_composite() {
                return Err(WeftError::invalid(format!("component {n} nests components")));
            }
            c.stripe.validate_plain().map_err(|e| WeftError::invalid(format!("component {n}: {}", e.message)))?;
            if c.end <= start {
                return Err(WeftError::invalid(format!(
                    "component {n} ends (-E) at {} which is not past its start {start}: ends must grow",
                    c.end
                )));
            }
            if c.end != u64::MAX {
                let unit = if c.on_mdt { STRIPE_SIZE_UNIT_BYTES } else { c.stripe.effective_stripe_size() };
                if !c.end.is_multiple_of(unit) {
                    return Err(WeftError::invalid(format!(
                        "component {n} ends (-E) at {} which is not a multiple of its stripe size {unit}",
                        c.end
                    )));
                }
            }
            if c.on_mdt {
                if i != 0 {
                    return Err(WeftError::invalid(format!(
                        "component {n} is on the MDT (-L mdt): only the first component may be"
                    )));
                }
                if c.end == u64::MAX || c.end > DOM_SIZE_MAX_BYTES {
                    return Err(WeftError::invalid(format!(
                        "the MDT component (-L mdt) must end (-E) at most at {DOM_SIZE_MAX_BYTES} bytes (1M), not at {}",
                        if c.end == u64::MAX { "EOF".to_string() } else { c.end.to_string() }
                    )));
                }
                let s = &c.stripe;
                if s.stripe_count > 1 || !s.ost_list.is_empty() || s.start_ost >= 0 || s.pool.is_some() {
                    return Err(WeftError::invalid(
                        "the MDT component (-L mdt) takes no -c above 1, -i, -o or -p: its data is on the MDT",
                    ));
                }
            }
            start = c.end;
        }
        Ok(())
    }

    fn validate_plain(&self) -> WeftResult<()> {
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

    /// Fills what this spec leaves open from `inherited` (a directory default). A composite
    /// spec stands as it is; an unset one takes `inherited` whole; a plain one fills its
    /// unset fields from a plain `inherited` (a composite default gives it nothing).
    pub fn merged_over(&self, inherited: &StripeSpec) -> StripeSpec {
        if self.is_composite() {
            return self.clone();
        }
        if self.is_unset() {
            return inherited.clone();
        }
        let unset = StripeSpec::unset();
        let inherited = if inherited.is_composite() { &unset } else { inherited };
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
            components: Vec::new(),
            mirrors: Vec::new(),
        }
    }

    /// The components a layout made from this spec has: one over the whole file for a
    /// plain spec.
    pub fn component_specs(&self) -> Vec<ComponentSpec> {
        if self.is_composite() {
            self.components.clone()
        } else {
            vec![ComponentSpec { end: u64::MAX, on_mdt: false, stripe: self.clone() }]
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
