//! One open of a regular file, as every front end of the client library keeps it (the FUSE
//! adapter, libweft and its interception library): the layout the open knows with the MDT
//! lock it came with, the size it knows and whether it wrote. Pure bookkeeping; the reads
//! and writes that use it are `io.rs`.

mod io;

pub use io::{read_needs_glimpse, Siblings};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use weft_proto::layout::Layout;
use weft_proto::lock::LockHandle;
use weft_proto::Fid;

#[derive(Debug)]
pub struct OpenFile {
    pub fid: Fid,
    /// The MDS's open handle, for Close.
    pub mds_handle: u64,
    /// The layout as this open knows it: given at open, and replaced when components are
    /// instantiated (by a write through it, or seen on a read past what it knew) or the
    /// file migrates; with the MDT lock that came with it, while it holds the layout is
    /// the file's (see `Client::locked_layout`).
    layout: Mutex<(Option<Arc<Layout>>, Option<LockHandle>)>,
    /// The file size as this open knows it: the size at open, raised by writes through it,
    /// set by truncates and glimpses. Reads inside it are answered in full (zero-filled past
    /// the objects), so a reader never sees a short read inside the file.
    known_size: AtomicU64,
    wrote: AtomicBool,
    /// The client incarnation that opened it: after an eviction the open gives EIO.
    pub generation: u64,
}

/// Whether generation `a` is after `b` (generations wrap).
fn newer(a: u32, b: u32) -> bool {
    a != b && a.wrapping_sub(b) < u32::MAX / 2
}

impl OpenFile {
    pub fn new(fid: Fid, mds_handle: u64, layout: Option<Layout>, size_at_open: u64) -> OpenFile {
        OpenFile {
            fid,
            mds_handle,
            layout: Mutex::new((layout.map(Arc::new), None)),
            known_size: AtomicU64::new(size_at_open),
            wrote: AtomicBool::new(false),
            generation: 0,
        }
    }

    pub fn layout(&self) -> Option<Arc<Layout>> {
        self.layout.lock().unwrap_or_else(|p| p.into_inner()).0.clone()
    }

    /// The MDT lock the layout came with, if any.
    pub fn layout_lock(&self) -> Option<LockHandle> {
        self.layout.lock().unwrap_or_else(|p| p.into_inner()).1
    }

    /// The layout came with the MDT lock `lock` (an open's or a getattr's answer).
    pub fn set_layout_lock(&self, lock: Option<LockHandle>) {
        self.layout.lock().unwrap_or_else(|p| p.into_inner()).1 = lock;
    }

    /// A newer layout of the file (more components instantiated, or migrated), with the
    /// lock it came with when it came with one; an older one than this open knows is
    /// ignored.
    pub fn update_layout(&self, layout: Arc<Layout>, lock: Option<LockHandle>) -> Arc<Layout> {
        let mut known = self.layout.lock().unwrap_or_else(|p| p.into_inner());
        if lock.is_some() {
            known.1 = lock;
        }
        match &known.0 {
            Some(k) if k.generation == layout.generation || newer(k.generation, layout.generation) => k.clone(),
            _ => {
                known.0 = Some(layout.clone());
                layout
            }
        }
    }

    pub fn known_size(&self) -> u64 {
        self.known_size.load(Ordering::Acquire)
    }

    /// A write of `[offset, end)` went through this open and was acknowledged.
    pub fn note_write(&self, end: u64) {
        self.wrote.store(true, Ordering::Release);
        self.known_size.fetch_max(end, Ordering::AcqRel);
    }

    /// The objects hold at least `size` bytes (a glimpse). Never lowers the size: a read
    /// inside what this open wrote must stay whole.
    pub fn raise_size(&self, size: u64) {
        self.known_size.fetch_max(size, Ordering::AcqRel);
    }

    /// The size is now exactly `size` (a truncate through this client, a glimpse).
    pub fn set_size(&self, size: u64) {
        self.known_size.store(size, Ordering::Release);
    }

    /// Something else may have written the objects (the kernel, through passthrough): the
    /// close must read the size from the objects as after any write.
    pub fn assume_written(&self) {
        self.wrote.store(true, Ordering::Release);
    }

    pub fn wrote(&self) -> bool {
        self.wrote.load(Ordering::Acquire)
    }
}
