//! Open handles, in memory only: no open survives a restart (clients reopen after
//! reconnecting), which is why orphans left on disk are destroyed at start.
//!
//! Changed only by the writer thread while it applies a batch; each change is logged in the
//! batch's undo list so that an aborted transaction leaves the table as it was.

use std::collections::HashMap;
use weft_proto::msg::{OPEN_READ, OPEN_WRITE};
use weft_proto::Fid;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenHandle {
    pub fid: Fid,
    pub flags: u32,
    pub client_id: u64,
    /// For a writer: the MDS trusted the file's size when it opened, and the file's write
    /// epoch then. If the epoch is unchanged at its close (no other writer opened, no size
    /// was set), a close that wrote nothing may restore the trusted size without a glimpse.
    pub trusted_size_epoch: Option<u64>,
}

impl OpenHandle {
    pub fn writes(&self) -> bool {
        self.flags & OPEN_WRITE != 0
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenCounts {
    pub opens: u32,
    pub writers: u32,
    /// Moves on every open for writing and every size change while the file is open.
    pub write_epoch: u64,
}

/// An in-memory change, and how to revert it.
#[derive(Debug)]
pub enum Undo {
    Opened(u64),
    Closed(u64, OpenHandle),
}

#[derive(Debug, Default)]
pub struct OpenFiles {
    next_handle: u64,
    handles: HashMap<u64, OpenHandle>,
    counts: HashMap<Fid, OpenCounts>,
}

impl OpenFiles {
    pub fn counts(&self, fid: Fid) -> OpenCounts {
        self.counts.get(&fid).copied().unwrap_or_default()
    }

    pub fn handle(&self, handle: u64) -> Option<&OpenHandle> {
        self.handles.get(&handle)
    }

    pub fn len(&self) -> usize {
        self.handles.len()
    }

    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }

    /// Registers an open. `size_trusted`: the size was trusted before this open (the
    /// caller checks that no other writer has the file open).
    pub fn open(&mut self, fid: Fid, flags: u32, client_id: u64, size_trusted: bool, undo: &mut Vec<Undo>) -> u64 {
        self.next_handle += 1;
        let h = self.next_handle;
        let flags = flags & (OPEN_READ | OPEN_WRITE);
        let trusted_size_epoch = if flags & OPEN_WRITE != 0 {
            let c = self.counts.entry(fid).or_default();
            c.write_epoch += 1;
            size_trusted.then_some(c.write_epoch)
        } else {
            None
        };
        self.insert(h, OpenHandle { fid, flags, client_id, trusted_size_epoch });
        undo.push(Undo::Opened(h));
        h
    }

    /// A size change (truncate) of an open file: writers open now can no longer vouch for it.
    pub fn size_changed(&mut self, fid: Fid) {
        if let Some(c) = self.counts.get_mut(&fid) {
            c.write_epoch += 1;
        }
    }

    /// Whether closing writer `oh` that wrote nothing leaves the size it trusted at open valid.
    pub fn size_still_trusted(&self, oh: &OpenHandle) -> bool {
        oh.trusted_size_epoch.is_some_and(|e| self.counts(oh.fid).write_epoch == e)
    }

    pub fn close(&mut self, handle: u64, undo: &mut Vec<Undo>) -> Option<OpenHandle> {
        let oh = self.remove(handle)?;
        undo.push(Undo::Closed(handle, oh.clone()));
        Some(oh)
    }

    /// Reverts the changes of an aborted transaction, newest first.
    pub fn revert(&mut self, undo: Vec<Undo>) {
        for u in undo.into_iter().rev() {
            match u {
                Undo::Opened(h) => {
                    let removed = self.remove(h);
                    assert!(removed.is_some(), "reverting an open whose handle {h} is gone");
                }
                Undo::Closed(h, oh) => self.insert(h, oh),
            }
        }
    }

    fn insert(&mut self, h: u64, oh: OpenHandle) {
        let c = self.counts.entry(oh.fid).or_default();
        c.opens += 1;
        if oh.writes() {
            c.writers += 1;
        }
        let old = self.handles.insert(h, oh);
        assert!(old.is_none(), "open handle {h} used twice");
    }

    fn remove(&mut self, h: u64) -> Option<OpenHandle> {
        let oh = self.handles.remove(&h)?;
        let c = self.counts.get_mut(&oh.fid).expect("an open handle has counts");
        assert!(c.opens > 0 && (!oh.writes() || c.writers > 0), "open counts of {} underflow", oh.fid);
        c.opens -= 1;
        if oh.writes() {
            c.writers -= 1;
        }
        if c.opens == 0 {
            self.counts.remove(&oh.fid);
        }
        Some(oh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_opens_and_revert_restores() {
        let mut of = OpenFiles::default();
        let f = Fid::new(1, 2, 0);
        let mut undo = Vec::new();
        let a = of.open(f, OPEN_READ, 1, false, &mut undo);
        let b = of.open(f, OPEN_WRITE, 1, false, &mut undo);
        assert_eq!((of.counts(f).opens, of.counts(f).writers), (2, 1));
        of.close(b, &mut undo).unwrap();
        assert_eq!((of.counts(f).opens, of.counts(f).writers), (1, 0));
        of.revert(undo);
        assert_eq!(of.counts(f), OpenCounts::default());
        assert!(of.handle(a).is_none() && of.is_empty());
    }
}
