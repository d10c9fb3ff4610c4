//! Statahead (Lustre's, batched): a client that looks up name after name of one directory
//! that it has not cached (`ls -l`, `find`, `du`, rsync, mdtest's stat phase, a new process
//! of the interception library) reads the directory's entries with their inodes instead,
//! a page of up to `READDIR_ENTRIES_MAX` in one request (`ReaddirPlus`), each inode under
//! an intent lock like a lookup's, into the inode cache.
//!
//! When: after [`STATAHEAD_TRIGGER_LOOKUPS`] lookups in a directory that went to the MDS
//! and found their name (lookups of absent names, as a compiler's search of include
//! paths, never start it), each further lookup there that the cache cannot answer first
//! reads the next page, until the listing ends; then it starts over only after as many
//! lookups again. One page per lookup bounds the cost for a program that looks up a few
//! names of a large directory: at most one page more per lookup than without it. A page
//! whose inodes mostly cannot be cached (files being written: their size is the objects')
//! pauses it there for a while, and so does a failed read.
//!
//! A sparse walk pauses it too: a program that lists a directory and looks up only a few
//! of its names in the listing's order (`find -name '*01*' -size ...`, IO-500's find) would
//! pay a page of inodes, about the MDS's cost of a hundred lookups, for every few names it
//! looks at. Such a walk shows itself when a page is due: this client listed the directory,
//! the page before held the name it was read for (the lookups follow the listing) and
//! fewer than one of [`STATAHEAD_SPARSE_RATIO`] of its entries were looked up from the
//! cache since. A program that looks names up without listing them (mdtest's stat of
//! file.0, file.1, ...) is never taken for one, even when by chance a page holds its name.

use crate::inodes::Answer;
use crate::limits::{STATAHEAD_DIRS_MAX, STATAHEAD_PAUSE, STATAHEAD_SPARSE_RATIO, STATAHEAD_TRIGGER_LOOKUPS};
use crate::Client;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;
use weft_proto::limits::READDIR_ENTRIES_MAX;
use weft_proto::msg::{mdt, Caller, InodeInfo};
use weft_proto::Fid;

/// What statahead knows of the directories looked up in.
#[derive(Default)]
pub(crate) struct Statahead {
    dirs: Mutex<HashMap<Fid, Ahead>>,
}

#[derive(Default)]
struct Ahead {
    /// Lookups there that went to the MDS and found their name, this cycle.
    found: u32,
    /// Where the next page starts (0: the start).
    cookie: u64,
    /// A page is being read (by another thread: this lookup goes on without it).
    reading: bool,
    /// Pages here brought little to cache: none is read before this.
    paused_until: Option<Instant>,
    /// The last page read: its entries, whether it held the name it was read for, and the
    /// lookups the cache answered here since.
    last_len: usize,
    last_had_name: bool,
    hits: u32,
    /// This client read the directory's listing.
    listed: bool,
}

impl Statahead {
    fn dirs(&self) -> std::sync::MutexGuard<'_, HashMap<Fid, Ahead>> {
        self.dirs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A lookup in `dir` went to the MDS and found its name.
    pub(crate) fn found_at_mds(&self, dir: Fid) {
        let mut dirs = self.dirs();
        if dirs.len() >= STATAHEAD_DIRS_MAX && !dirs.contains_key(&dir) {
            dirs.clear(); // rare: a program walking very many directories
        }
        let ahead = dirs.entry(dir).or_default();
        ahead.found = ahead.found.saturating_add(1);
    }

    /// The page to read before a lookup in `dir`, if one is due; marks it being read.
    fn due(&self, dir: Fid) -> Option<u64> {
        let mut dirs = self.dirs();
        let ahead = dirs.get_mut(&dir)?;
        if ahead.found < STATAHEAD_TRIGGER_LOOKUPS || ahead.reading {
            return None;
        }
        if ahead.paused_until.is_some_and(|t| t > Instant::now()) {
            return None;
        }
        if ahead.listed && ahead.last_had_name && (ahead.hits as usize) * STATAHEAD_SPARSE_RATIO < ahead.last_len {
            // A sparse walk of the listing: plain lookups cost the MDS less.
            *ahead = Ahead { paused_until: Some(Instant::now() + STATAHEAD_PAUSE), listed: true, ..Ahead::default() };
            return None;
        }
        ahead.reading = true;
        Some(ahead.cookie)
    }

    /// This client reads a page of `dir`'s listing.
    pub(crate) fn listed(&self, dir: Fid) {
        let mut dirs = self.dirs();
        if dirs.len() >= STATAHEAD_DIRS_MAX && !dirs.contains_key(&dir) {
            dirs.clear();
        }
        dirs.entry(dir).or_default().listed = true;
    }

    /// A lookup in `dir` the inode cache answered.
    pub(crate) fn hit(&self, dir: Fid) {
        if let Some(ahead) = self.dirs().get_mut(&dir) {
            ahead.hits = ahead.hits.saturating_add(1);
        }
    }

    /// A page of `len` entries was read (`next`: where the next starts; None: the listing
    /// ended, or the read failed, and a new cycle starts), `had_name` whether it held the
    /// name it was read for. A page not `useful` (most of its inodes could not be cached)
    /// stops statahead in the directory for [`STATAHEAD_PAUSE`].
    fn read(&self, dir: Fid, next: Option<u64>, useful: bool, len: usize, had_name: bool) {
        let mut dirs = self.dirs();
        let Some(ahead) = dirs.get_mut(&dir) else { return };
        ahead.reading = false;
        match next {
            _ if !useful => {
                *ahead = Ahead {
                    paused_until: Some(Instant::now() + STATAHEAD_PAUSE),
                    listed: ahead.listed,
                    ..Ahead::default()
                }
            }
            Some(cookie) => {
                (ahead.cookie, ahead.last_len, ahead.last_had_name, ahead.hits) = (cookie, len, had_name, 0);
            }
            None => *ahead = Ahead { listed: ahead.listed, ..Ahead::default() },
        }
    }
}

impl Client {
    /// Before a lookup of `name` in `parent` goes to the MDS: the next page of the
    /// directory with its inodes when statahead is due there, and `name`'s inode if the
    /// page had it (else None: the caller looks it up).
    pub(crate) async fn statahead(&self, who: &Caller, parent: Fid, name: &[u8]) -> Option<InodeInfo> {
        if !self.config.statahead {
            return None;
        }
        let cookie = self.statahead.due(parent)?;
        let since = self.inodes.since();
        let read = self.mdt(who, mdt::ReaddirPlus { fid: parent, cookie, max_entries: READDIR_ENTRIES_MAX }).await;
        let plus = match read {
            Ok(plus) => plus,
            Err(e) => {
                tracing::debug!(%parent, error = %e, "statahead stops in this directory");
                self.statahead.read(parent, None, false, 0, false);
                return None;
            }
        };
        let next = plus.page.entries.last().map(|e| e.cookie).filter(|_| !plus.page.eof);
        // Files being written (their size is the objects', not the MDS's) are not cached:
        // a page that brought mostly those would be read again for nothing.
        let cacheable = plus.inodes.iter().filter(|i| crate::inodes::cacheable(i)).count();
        let useful = cacheable * 2 >= plus.page.entries.len();
        let had_name = plus.page.entries.iter().any(|e| e.name == name);
        self.statahead.read(parent, next, useful, plus.page.entries.len(), had_name);
        let names: HashMap<Fid, &[u8]> = plus.page.entries.iter().map(|e| (e.fid, e.name.as_slice())).collect();
        for inode in &plus.inodes {
            // A FID under two names of the page (hard links): the inode alone.
            let name = names.get(&inode.attr.fid).map(|n| (parent, *n));
            self.inodes.remember(Answer { name, inode, name_only: false, bare: false }, since);
        }
        self.still_cached(self.inodes.name(parent, name))
    }
}

#[cfg(test)]
#[path = "statahead_tests.rs"]
mod tests;
