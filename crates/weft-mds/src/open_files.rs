//! Open handles, in memory only: no open survives a restart (clients reopen after
//! reconnecting), which is why orphans left on disk are destroyed at start.
//!
//! Changed only by the writer thread while it applies a batch; each change is logged in the
//! batch's undo list so that an abandoned batch leaves the table as it was.

use std::collections::HashMap;
use weft_proto::msg::{OpenIo, OPEN_READ, OPEN_WRITE};
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
    /// Granted [`OpenIo::Passthrough`].
    pub passthrough: bool,
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
    /// Opens granted passthrough.
    pub passthrough: u32,
}

/// One client's opens of one file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct ClientOpens {
    opens: u32,
    passthrough: u32,
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
    by_client: HashMap<(Fid, u64), ClientOpens>,
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

    /// How `client_id` may do the I/O of a new open of `fid` (see [`OpenIo`]).
    /// `passthrough_wanted`: the client asked for it and the file can have it (a regular file
    /// of one object).
    pub fn io_for(&self, fid: Fid, client_id: u64, passthrough_wanted: bool) -> OpenIo {
        let all = self.counts(fid);
        let mine = self.by_client.get(&(fid, client_id)).copied().unwrap_or_default();
        if all.passthrough > mine.passthrough {
            OpenIo::Uncached
        } else if passthrough_wanted && all.opens == mine.opens {
            OpenIo::Passthrough
        } else {
            OpenIo::Cached
        }
    }

    /// Registers an open, with the I/O [`OpenFiles::io_for`] gives it. `size_trusted`: the
    /// size was trusted before this open (the caller checks that no other writer has the
    /// file open).
    pub fn open(
        &mut self,
        fid: Fid,
        flags: u32,
        client_id: u64,
        size_trusted: bool,
        passthrough_wanted: bool,
        undo: &mut Vec<Undo>,
    ) -> (u64, OpenIo) {
        let io = self.io_for(fid, client_id, passthrough_wanted);
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
        let passthrough = io == OpenIo::Passthrough;
        self.insert(h, OpenHandle { fid, flags, client_id, trusted_size_epoch, passthrough });
        undo.push(Undo::Opened(h));
        (h, io)
    }

    /// The table of an MDS started at `start` (nanoseconds since the epoch, its start id):
    /// its handles are numbered from there, so that no handle it gives out is one an earlier
    /// MDS of the same MDT gave (which a client may replay to it: [`OpenFiles::replay`]). An
    /// MDS gives out fewer handles than nanoseconds pass, so an earlier one's handles all lie
    /// below a later one's start.
    pub fn starting_at(start: u64) -> OpenFiles {
        OpenFiles { next_handle: start, ..OpenFiles::default() }
    }

    /// Open replay: registers an open a client held from this MDT's previous server, under
    /// its handle. False when the handle is in use here.
    pub fn replay(&mut self, handle: u64, oh: OpenHandle, undo: &mut Vec<Undo>) -> bool {
        if handle == 0 || self.handles.contains_key(&handle) {
            return false;
        }
        let oh = OpenHandle { flags: oh.flags & (OPEN_READ | OPEN_WRITE), trusted_size_epoch: None, ..oh };
        if oh.writes() {
            self.counts.entry(oh.fid).or_default().write_epoch += 1;
        }
        self.insert(handle, oh);
        undo.push(Undo::Opened(handle));
        true
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

    /// Reverts the changes of an abandoned batch, newest first.
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
        let mine = self.by_client.entry((oh.fid, oh.client_id)).or_default();
        mine.opens += 1;
        if oh.passthrough {
            c.passthrough += 1;
            mine.passthrough += 1;
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
        let key = (oh.fid, oh.client_id);
        let mine = self.by_client.get_mut(&key).expect("an open handle has its client's counts");
        mine.opens -= 1;
        if oh.passthrough {
            c.passthrough -= 1;
            mine.passthrough -= 1;
        }
        if mine.opens == 0 {
            self.by_client.remove(&key);
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
        let (a, _) = of.open(f, OPEN_READ, 1, false, false, &mut undo);
        let (b, _) = of.open(f, OPEN_WRITE, 1, false, false, &mut undo);
        assert_eq!((of.counts(f).opens, of.counts(f).writers), (2, 1));
        of.close(b, &mut undo).unwrap();
        assert_eq!((of.counts(f).opens, of.counts(f).writers), (1, 0));
        of.revert(undo);
        assert_eq!(of.counts(f), OpenCounts::default());
        assert!(of.handle(a).is_none() && of.is_empty());
    }

    #[test]
    fn passthrough_only_alone_and_others_uncached_while_it_lasts() {
        let mut of = OpenFiles::default();
        let f = Fid::new(1, 2, 0);
        let mut undo = Vec::new();
        // Client 1 alone: passthrough; its second open too.
        let (p1, io) = of.open(f, OPEN_WRITE, 1, false, true, &mut undo);
        assert_eq!(io, OpenIo::Passthrough);
        let (p1b, io) = of.open(f, OPEN_READ, 1, false, true, &mut undo);
        assert_eq!(io, OpenIo::Passthrough);
        // Client 2 meanwhile: nothing cached, whatever it asks.
        let (u2, io) = of.open(f, OPEN_READ, 2, false, true, &mut undo);
        assert_eq!(io, OpenIo::Uncached);
        assert_eq!(of.io_for(f, 2, false), OpenIo::Uncached);
        // Client 1 cannot have passthrough once client 2 has the file open, even after its
        // own passthrough opens closed; client 2 caches again once they closed.
        of.close(p1, &mut undo).unwrap();
        assert_eq!(of.io_for(f, 2, false), OpenIo::Uncached, "client 1's second open still lasts");
        of.close(p1b, &mut undo).unwrap();
        assert_eq!(of.io_for(f, 1, true), OpenIo::Cached, "client 2 has it open");
        assert_eq!(of.io_for(f, 2, false), OpenIo::Cached);
        assert_eq!(of.io_for(f, 2, true), OpenIo::Passthrough, "client 2 alone now");
        of.close(u2, &mut undo).unwrap();
        assert!(of.is_empty() && of.by_client.is_empty() && of.counts.is_empty());
        of.revert(undo);
        assert!(of.is_empty() && of.by_client.is_empty());
    }
}
