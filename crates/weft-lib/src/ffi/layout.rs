//! Layouts as `llapi_layout_*`: allocate one or read a file's or a directory's, get and set
//! the current component's stripe count, stripe size, pool and OSTs, walk and add
//! components, then make a file with it or give it to a directory.

use super::common::{boxed, bytes, copy_out, guard, hand_out, invalid, weft_file, weft_fs};
use crate::error::{Error, Result};
use crate::layout::{LayoutEdit, Select};
use std::ffi::{c_char, c_int};

/// A layout being read or made.
#[allow(non_camel_case_types)]
pub struct weft_layout {
    edit: LayoutEdit,
}

/// Which component `weft_layout_comp_use` makes current.
#[repr(C)]
#[allow(non_camel_case_types)]
pub enum weft_layout_comp_which {
    WEFT_LAYOUT_COMP_USE_FIRST = 1,
    WEFT_LAYOUT_COMP_USE_LAST = 2,
    WEFT_LAYOUT_COMP_USE_NEXT = 3,
    WEFT_LAYOUT_COMP_USE_PREV = 4,
}

/// The end of an extent that runs to the end of the file.
pub const WEFT_LAYOUT_EOF: u64 = u64::MAX;

/// # Safety
/// `layout` is NULL or a live layout handle.
unsafe fn edit<'a>(layout: *const weft_layout) -> Result<&'a LayoutEdit> {
    // SAFETY: as the caller promised.
    unsafe { layout.as_ref() }.map(|l| &l.edit).ok_or_else(|| invalid("the layout"))
}

/// # Safety
/// `layout` is NULL or a live layout handle no other thread uses.
unsafe fn edit_mut<'a>(layout: *mut weft_layout) -> Result<&'a mut LayoutEdit> {
    // SAFETY: as the caller promised.
    unsafe { layout.as_mut() }.map(|l| &mut l.edit).ok_or_else(|| invalid("the layout"))
}

/// # Safety
/// `out` is NULL or writable.
unsafe fn put<T>(out: *mut T, value: T) -> Result<i64> {
    // SAFETY: as the caller promised.
    let out = unsafe { out.as_mut() }.ok_or_else(|| invalid("the place for the value"))?;
    *out = value;
    Ok(0)
}

/// A new layout: one component over the whole file, every value the file system's default.
/// Never NULL; free it with `weft_layout_free`.
#[no_mangle]
pub extern "C" fn weft_layout_alloc() -> *mut weft_layout {
    boxed(weft_layout { edit: LayoutEdit::default() })
}

/// Frees a layout.
///
/// # Safety
/// `layout` is NULL or a layout handle not freed before.
#[no_mangle]
pub unsafe extern "C" fn weft_layout_free(layout: *mut weft_layout) {
    if !layout.is_null() {
        // SAFETY: the handle came from Box::into_raw and is freed once.
        drop(unsafe { Box::from_raw(layout) });
    }
}

/// The layout of the file `path` names (its OSTs as placed), or a directory's default:
/// `*layout` is a new handle, its first component current.
///
/// # Safety
/// `fs` is a mounted handle, `path` a NUL-terminated string, `layout` a writable pointer.
#[no_mangle]
pub unsafe extern "C" fn weft_layout_get_by_path(
    fs: *const weft_fs,
    path: *const c_char,
    layout: *mut *mut weft_layout,
) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let (fs, path) = unsafe { (super::common::fs(fs)?, bytes(path, "the path")?) };
        let edit = fs.layout_of(path)?;
        // SAFETY: as the caller promised.
        unsafe { hand_out(layout, weft_layout { edit }) }
    })
}

/// The layout of an open file.
///
/// # Safety
/// `file` is an open handle, `layout` a writable pointer.
#[no_mangle]
pub unsafe extern "C" fn weft_layout_get_by_file(file: *const weft_file, layout: *mut *mut weft_layout) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let (fs, f) = unsafe { super::common::file(file) }?;
        let edit = fs.layout_of_file(f)?;
        // SAFETY: as the caller promised.
        unsafe { hand_out(layout, weft_layout { edit }) }
    })
}

/// Makes the file `path` (O_CREAT|O_EXCL with `flags`, `mode` with the umask) with
/// `layout`, and opens it: `*file` is its handle (`llapi_layout_file_create`).
///
/// # Safety
/// `fs` is a mounted handle, `path` a NUL-terminated string, `layout` a live layout,
/// `file` a writable pointer.
#[no_mangle]
pub unsafe extern "C" fn weft_layout_file_create(
    fs: *const weft_fs,
    path: *const c_char,
    flags: c_int,
    mode: libc::mode_t,
    layout: *const weft_layout,
    file: *mut *mut weft_file,
) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let (mounted, path, edit) = unsafe { (super::common::fs(fs)?, bytes(path, "the path")?, edit(layout)?) };
        let flags = flags | libc::O_CREAT | libc::O_EXCL;
        let opened = mounted.open_with(path, flags, mode, Some(edit.spec()?))?;
        // SAFETY: as the caller promised.
        unsafe { hand_out(file, super::common::weft_file { fs, file: opened }) }
    })
}

/// Gives `layout` to directory `path` as the default of the files made in it (`lfs
/// setstripe DIR`), or to an empty file that has no objects yet.
///
/// # Safety
/// `fs` is a mounted handle, `path` a NUL-terminated string, `layout` a live layout.
#[no_mangle]
pub unsafe extern "C" fn weft_layout_set(fs: *const weft_fs, path: *const c_char, layout: *const weft_layout) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let (fs, path, edit) = unsafe { (super::common::fs(fs)?, bytes(path, "the path")?, edit(layout)?) };
        fs.set_layout(path, edit).map(|()| 0)
    })
}

/// The current component's stripe count: 0 the default, -1 every OST.
///
/// # Safety
/// `layout` is a live layout, `count` writable.
#[no_mangle]
pub unsafe extern "C" fn weft_layout_stripe_count_get(layout: *const weft_layout, count: *mut i64) -> c_int {
    // SAFETY: as the caller promised.
    guard(|| unsafe { put(count, edit(layout)?.current().stripe_count) })
}

/// Sets the current component's stripe count: 0 the default, -1 every OST.
///
/// # Safety
/// `layout` is a live layout no other thread uses.
#[no_mangle]
pub unsafe extern "C" fn weft_layout_stripe_count_set(layout: *mut weft_layout, count: i64) -> c_int {
    guard(|| {
        if count < -1 {
            return Err(Error::new(
                libc::EINVAL,
                format!("stripe count {count}: 0 (the default), -1 (every OST) or a count"),
            ));
        }
        // SAFETY: as the caller promised.
        let c = unsafe { edit_mut(layout) }?.current_mut();
        c.stripe_count = count;
        if !c.osts.is_empty() && count != c.osts.len() as i64 {
            c.osts.clear();
        }
        Ok(0)
    })
}

/// The current component's stripe size in bytes (0: the default).
///
/// # Safety
/// `layout` is a live layout, `size` writable.
#[no_mangle]
pub unsafe extern "C" fn weft_layout_stripe_size_get(layout: *const weft_layout, size: *mut u64) -> c_int {
    // SAFETY: as the caller promised.
    guard(|| unsafe { put(size, edit(layout)?.current().stripe_size) })
}

/// Sets the current component's stripe size: 0 the default, else a multiple of 64 KiB.
///
/// # Safety
/// `layout` is a live layout no other thread uses.
#[no_mangle]
pub unsafe extern "C" fn weft_layout_stripe_size_set(layout: *mut weft_layout, size: u64) -> c_int {
    guard(|| {
        if !size.is_multiple_of(64 << 10) {
            return Err(Error::new(libc::EINVAL, format!("stripe size {size}: 0 or a multiple of 65536")));
        }
        // SAFETY: as the caller promised.
        unsafe { edit_mut(layout) }?.current_mut().stripe_size = size;
        Ok(0)
    })
}

/// The current component's pool into `name` (`size` bytes, NUL-terminated); empty when
/// it has none. Its length.
///
/// # Safety
/// `layout` is a live layout, `name` `size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn weft_layout_pool_name_get(
    layout: *const weft_layout,
    name: *mut c_char,
    size: usize,
) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let pool = unsafe { edit(layout) }?.current().pool.clone().unwrap_or_default();
        let mut text = pool.into_bytes();
        text.push(0);
        // SAFETY: as the caller promised.
        unsafe { copy_out(&text, name, size.max(1)) }.map(|n| n - 1)
    })
}

/// Sets the current component's pool; NULL or "" for none.
///
/// # Safety
/// `layout` is a live layout no other thread uses, `name` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn weft_layout_pool_name_set(layout: *mut weft_layout, name: *const c_char) -> c_int {
    guard(|| {
        let pool = match name.is_null() {
            true => None,
            // SAFETY: as the caller promised.
            false => Some(String::from_utf8_lossy(unsafe { bytes(name, "the pool") }?).into_owned()),
        };
        // SAFETY: as the caller promised.
        unsafe { edit_mut(layout) }?.current_mut().pool = pool.filter(|p| !p.is_empty());
        Ok(0)
    })
}

/// The OST index of stripe `stripe` of the current component (as placed, or as asked);
/// -ENODATA when it has none there.
///
/// # Safety
/// `layout` is a live layout, `index` writable.
#[no_mangle]
pub unsafe extern "C" fn weft_layout_ost_index_get(layout: *const weft_layout, stripe: u32, index: *mut u64) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let osts = &unsafe { edit(layout) }?.current().osts;
        let ost = osts.get(stripe as usize).ok_or_else(|| {
            Error::new(libc::ENODATA, format!("stripe {stripe} has no OST here ({} stripes placed)", osts.len()))
        })?;
        // SAFETY: as the caller promised.
        unsafe { put(index, u64::from(*ost)) }
    })
}

/// Places stripe `stripe` of the current component on OST `index` (stripes in order from
/// 0: the next one, or one set before); the stripe count follows.
///
/// # Safety
/// `layout` is a live layout no other thread uses.
#[no_mangle]
pub unsafe extern "C" fn weft_layout_ost_index_set(layout: *mut weft_layout, stripe: u32, index: u64) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let c = unsafe { edit_mut(layout) }?.current_mut();
        let index = u32::try_from(index).map_err(|_| Error::new(libc::EINVAL, format!("OST index {index}")))?;
        match (stripe as usize).cmp(&c.osts.len()) {
            std::cmp::Ordering::Less => c.osts[stripe as usize] = index,
            std::cmp::Ordering::Equal => c.osts.push(index),
            std::cmp::Ordering::Greater => {
                return Err(Error::new(
                    libc::EINVAL,
                    format!("stripe {stripe}: place stripes in order ({} so far)", c.osts.len()),
                ))
            }
        }
        c.stripe_count = c.osts.len() as i64;
        Ok(0)
    })
}

/// How many components the layout has.
///
/// # Safety
/// `layout` is a live layout, `count` writable.
#[no_mangle]
pub unsafe extern "C" fn weft_layout_comp_count(layout: *const weft_layout, count: *mut u32) -> c_int {
    // SAFETY: as the caller promised.
    guard(|| unsafe { put(count, edit(layout)?.components.len() as u32) })
}

/// The current component's extent [start, end); end WEFT_LAYOUT_EOF: to the end of the file.
///
/// # Safety
/// `layout` is a live layout, `start` and `end` writable.
#[no_mangle]
pub unsafe extern "C" fn weft_layout_comp_extent_get(
    layout: *const weft_layout,
    start: *mut u64,
    end: *mut u64,
) -> c_int {
    guard(|| {
        // SAFETY: as the caller promised.
        let c = unsafe { edit(layout) }?.current();
        // SAFETY: as the caller promised.
        unsafe { put(start, c.start).and_then(|_| put(end, c.end)) }
    })
}

/// Sets the current component's extent.
///
/// # Safety
/// `layout` is a live layout no other thread uses.
#[no_mangle]
pub unsafe extern "C" fn weft_layout_comp_extent_set(layout: *mut weft_layout, start: u64, end: u64) -> c_int {
    // SAFETY: as the caller promised.
    guard(|| unsafe { edit_mut(layout) }?.set_extent(start, end).map(|()| 0))
}

/// Adds a component after the last (which must end before the end of the file), from where
/// it ends to the end of the file, with its striping; current from now on.
///
/// # Safety
/// `layout` is a live layout no other thread uses.
#[no_mangle]
pub unsafe extern "C" fn weft_layout_comp_add(layout: *mut weft_layout) -> c_int {
    // SAFETY: as the caller promised.
    guard(|| unsafe { edit_mut(layout) }?.add_component().map(|()| 0))
}

/// Makes another component current (`which`: a `weft_layout_comp_which`); -ENOENT past the first or the last.
///
/// # Safety
/// `layout` is a live layout no other thread uses.
#[no_mangle]
pub unsafe extern "C" fn weft_layout_comp_use(layout: *mut weft_layout, which: c_int) -> c_int {
    use weft_layout_comp_which::*;
    guard(|| {
        let which = match which {
            w if w == WEFT_LAYOUT_COMP_USE_FIRST as c_int => Select::First,
            w if w == WEFT_LAYOUT_COMP_USE_LAST as c_int => Select::Last,
            w if w == WEFT_LAYOUT_COMP_USE_NEXT as c_int => Select::Next,
            w if w == WEFT_LAYOUT_COMP_USE_PREV as c_int => Select::Prev,
            w => {
                return Err(Error::new(
                    libc::EINVAL,
                    format!("{w}: one of WEFT_LAYOUT_COMP_USE_FIRST, _LAST, _NEXT, _PREV"),
                ))
            }
        };
        // SAFETY: as the caller promised.
        unsafe { edit_mut(layout) }?.select(which).map(|()| 0)
    })
}

/// Whether the current component has objects (1) or not yet (0).
///
/// # Safety
/// `layout` is a live layout.
#[no_mangle]
pub unsafe extern "C" fn weft_layout_comp_instantiated(layout: *const weft_layout) -> c_int {
    // SAFETY: as the caller promised.
    guard(|| Ok(i64::from(unsafe { edit(layout) }?.current().instantiated)))
}
