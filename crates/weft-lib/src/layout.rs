//! Layouts as Lustre's `llapi_layout_*` calls see them: a list of components, one of them
//! current, each with an extent, a stripe count and size, a pool and its OSTs. Read from a
//! file or a directory's default, edited, then given to a new file or a directory.

use crate::error::{Error, Result};
use crate::file::File;
use crate::fs::Fs;
use weft_proto::layout::{ComponentSpec, Layout, LayoutComponent, Pattern, StripeSpec};

/// One component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    pub start: u64,
    /// `u64::MAX`: to the end of the file.
    pub end: u64,
    /// 0: the default; -1: every OST.
    pub stripe_count: i64,
    /// 0: the default.
    pub stripe_size: u64,
    pub pool: Option<String>,
    /// The OSTs of its stripes in order: a file's as placed, or those asked for.
    pub osts: Vec<u32>,
    /// Data on the MDT.
    pub on_mdt: bool,
    /// Has objects (a file's component a write reached, or one made with the file).
    pub instantiated: bool,
    /// The mirror it belongs to (0: none).
    pub mirror_id: u16,
}

impl Component {
    fn whole() -> Component {
        Component {
            start: 0,
            end: u64::MAX,
            stripe_count: 0,
            stripe_size: 0,
            pool: None,
            osts: Vec::new(),
            on_mdt: false,
            instantiated: false,
            mirror_id: 0,
        }
    }

    fn of_spec(start: u64, end: u64, spec: &StripeSpec) -> Component {
        Component {
            start,
            end,
            stripe_count: spec.stripe_count,
            stripe_size: spec.stripe_size,
            pool: spec.pool.clone(),
            osts: spec.ost_list.clone(),
            ..Component::whole()
        }
    }

    fn of_layout(c: &LayoutComponent) -> Component {
        Component {
            start: c.extent_start,
            end: c.extent_end,
            stripe_count: c.stripe_count_shown(),
            stripe_size: c.stripe_size,
            pool: c.pool.clone(),
            osts: c.objects.iter().map(|o| o.ost).collect(),
            on_mdt: c.pattern == Pattern::Mdt,
            instantiated: !c.objects.is_empty() || matches!(c.pattern, Pattern::Released { .. }),
            mirror_id: c.mirror_id,
        }
    }

    fn stripe(&self) -> StripeSpec {
        StripeSpec {
            stripe_count: if self.osts.is_empty() { self.stripe_count } else { self.osts.len() as i64 },
            stripe_size: self.stripe_size,
            ost_list: self.osts.clone(),
            pool: self.pool.clone(),
            ..StripeSpec::unset()
        }
    }
}

/// A layout being read or made (`llapi_layout`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutEdit {
    pub components: Vec<Component>,
    /// The component the get and set calls act on.
    pub current: usize,
}

impl Default for LayoutEdit {
    /// One component over the whole file, every value the default (`llapi_layout_alloc`).
    fn default() -> LayoutEdit {
        LayoutEdit { components: vec![Component::whole()], current: 0 }
    }
}

/// Which component `LayoutEdit::select` makes current (`llapi_layout_comp_use`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Select {
    First,
    Last,
    Next,
    Prev,
}

impl LayoutEdit {
    /// A file's layout as it is.
    pub fn of_layout(layout: &Layout) -> LayoutEdit {
        let components: Vec<Component> = layout.components.iter().map(Component::of_layout).collect();
        match components.is_empty() {
            true => LayoutEdit::default(),
            false => LayoutEdit { components, current: 0 },
        }
    }

    /// A directory's default (or what a user asked for).
    pub fn of_spec(spec: &StripeSpec) -> LayoutEdit {
        if spec.components.is_empty() {
            return LayoutEdit { components: vec![Component::of_spec(0, u64::MAX, spec)], current: 0 };
        }
        let mut start = 0;
        let components = spec
            .components
            .iter()
            .map(|c| {
                let mut comp = Component::of_spec(start, c.end, &c.stripe);
                comp.on_mdt = c.on_mdt;
                start = c.end;
                comp
            })
            .collect();
        LayoutEdit { components, current: 0 }
    }

    /// What a create or a directory's default asks the MDS for: a plain spec for one
    /// component over the file, a composite one otherwise.
    pub fn spec(&self) -> Result<StripeSpec> {
        match &self.components[..] {
            [one] if one.start == 0 && one.end == u64::MAX && !one.on_mdt => Ok(one.stripe()),
            comps => {
                let mut start = 0;
                let mut out = Vec::new();
                for c in comps {
                    if c.start != start || c.end <= c.start {
                        return Err(Error::new(
                            libc::EINVAL,
                            format!(
                                "component [{}, {}) does not follow the one before, which ends at {start}",
                                c.start, c.end
                            ),
                        ));
                    }
                    start = c.end;
                    out.push(ComponentSpec { end: c.end, on_mdt: c.on_mdt, stripe: c.stripe() });
                }
                Ok(StripeSpec { components: out, ..StripeSpec::unset() })
            }
        }
    }

    pub fn current(&self) -> &Component {
        &self.components[self.current]
    }

    pub fn current_mut(&mut self) -> &mut Component {
        &mut self.components[self.current]
    }

    /// Makes another component current; ENOENT past the first or last.
    pub fn select(&mut self, which: Select) -> Result<()> {
        let last = self.components.len() - 1;
        self.current = match which {
            Select::First => 0,
            Select::Last => last,
            Select::Next if self.current < last => self.current + 1,
            Select::Prev if self.current > 0 => self.current - 1,
            _ => return Err(Error::new(libc::ENOENT, "no component there")),
        };
        Ok(())
    }

    /// Adds a component after the last, from where it ends, current from now on
    /// (`llapi_layout_comp_add`); its extent's end is set with `set_extent`.
    pub fn add_component(&mut self) -> Result<()> {
        let last = self.components.last().cloned().unwrap_or_else(Component::whole);
        if last.end == u64::MAX {
            return Err(Error::new(libc::EINVAL, "the last component reaches the end of the file: set its end first"));
        }
        self.components.push(Component { start: last.end, end: u64::MAX, on_mdt: false, ..last });
        self.current = self.components.len() - 1;
        Ok(())
    }

    /// Sets the current component's extent; `end` u64::MAX is the end of the file.
    pub fn set_extent(&mut self, start: u64, end: u64) -> Result<()> {
        if end <= start {
            return Err(Error::new(libc::EINVAL, format!("extent [{start}, {end}) is empty")));
        }
        let c = self.current_mut();
        (c.start, c.end) = (start, end);
        Ok(())
    }
}

impl Fs {
    /// The layout of what `path` names: a file's as it is, a directory's default (the
    /// file system's default values where it has none).
    pub fn layout_of(&self, path: &[u8]) -> Result<LayoutEdit> {
        let who = self.who();
        let inode = self.resolve(&who, path, true)?;
        let (layout, spec) = self.run(self.client.getstripe(&who, inode.attr.fid))?;
        match (layout, spec) {
            (Some(layout), _) => Ok(LayoutEdit::of_layout(&layout)),
            (None, Some(spec)) => Ok(LayoutEdit::of_spec(&spec)),
            (None, None) => Ok(LayoutEdit::default()),
        }
    }

    /// The layout of an open file.
    pub fn layout_of_file(&self, file: &File) -> Result<LayoutEdit> {
        match self.file_layout(file) {
            Some(layout) => Ok(LayoutEdit::of_layout(&layout)),
            None => Err(Error::new(libc::ENODATA, "the file has no layout")),
        }
    }

    /// Makes `layout` the default of directory `path` for the files made in it (`lfs
    /// setstripe DIR`), or the layout of an empty file that has none yet.
    pub fn set_layout(&self, path: &[u8], layout: &LayoutEdit) -> Result<()> {
        let who = self.who();
        let inode = self.resolve(&who, path, true)?;
        self.run(self.client.setstripe(&who, inode.attr.fid, layout.spec()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_composite_layout_is_made_component_by_component() {
        let mut l = LayoutEdit::default();
        assert!(l.add_component().is_err(), "the first reaches the end of the file");
        l.set_extent(0, 1 << 20).unwrap();
        l.current_mut().stripe_count = 1;
        l.add_component().unwrap();
        assert_eq!(l.current().start, 1 << 20);
        l.current_mut().stripe_count = -1;
        let spec = l.spec().unwrap();
        assert_eq!(spec.components.len(), 2);
        assert_eq!(spec.components[0].end, 1 << 20);
        assert_eq!(spec.components[1].end, u64::MAX);
        assert_eq!(spec.components[1].stripe.stripe_count, -1);
        assert_eq!(LayoutEdit::of_spec(&spec).components, l.components);
        l.select(Select::First).unwrap();
        assert!(l.select(Select::Prev).is_err());
        l.current_mut().end = 100;
        assert!(l.spec().is_err(), "a gap between components");
    }

    #[test]
    fn a_plain_layout_with_osts_asks_for_them() {
        let mut l = LayoutEdit::default();
        l.current_mut().osts = vec![3, 1];
        let spec = l.spec().unwrap();
        assert_eq!((spec.stripe_count, spec.ost_list.clone()), (2, vec![3, 1]));
        assert!(spec.components.is_empty());
    }
}
