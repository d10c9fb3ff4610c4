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

    pub fn open(&mut self, fid: Fid, flags: u32, client_id: u64, undo: &mut Vec<Undo>) -> u64 {
        self.next_handle += 1;
        let h = self.next_handle;
        self.insert(h, OpenHandle { fid, flags: flags & (OPEN_READ | OPEN_WRITE), client_id });
        undo.push(Undo::Opened(h));
        h
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
        let a = of.open(f, OPEN_READ, 1, &mut undo);
        let b = of.open(f, OPEN_WRITE, 1, &mut undo);
        assert_eq!(of.counts(f), OpenCounts { opens: 2, writers: 1 });
        of.close(b, &mut undo).unwrap();
        assert_eq!(of.counts(f), OpenCounts { opens: 1, writers: 0 });
        of.revert(undo);
        assert_eq!(of.counts(f), OpenCounts::default());
        assert!(of.handle(a).is_none() && of.is_empty());
    }
}
