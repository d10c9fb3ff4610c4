//! The mount's handle tables: open files (fh → what read, write and release need) and
//! open directories (fh → one cached page of entries). Pure bookkeeping, no I/O.

use crate::iomode::KernelIo;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use weft_proto::layout::Layout;
use weft_proto::msg::{Attr, DirEntry};
use weft_proto::Fid;

/// Handles by number. Lookups take a read lock for a hash lookup only; the values are
/// shared so that no lock is held across a request to a server.
pub struct HandleTable<T> {
    next: AtomicU64,
    entries: RwLock<HashMap<u64, Arc<T>>>,
}

impl<T> Default for HandleTable<T> {
    fn default() -> Self {
        HandleTable { next: AtomicU64::new(1), entries: RwLock::new(HashMap::new()) }
    }
}

impl<T> HandleTable<T> {
    /// Stores `value` under a new handle number (never 0, never reused).
    pub fn insert(&self, value: T) -> u64 {
        let fh = self.next.fetch_add(1, Ordering::Relaxed);
        self.entries.write().unwrap_or_else(|p| p.into_inner()).insert(fh, Arc::new(value));
        fh
    }

    pub fn get(&self, fh: u64) -> Option<Arc<T>> {
        self.entries.read().unwrap_or_else(|p| p.into_inner()).get(&fh).cloned()
    }

    pub fn remove(&self, fh: u64) -> Option<Arc<T>> {
        self.entries.write().unwrap_or_else(|p| p.into_inner()).remove(&fh)
    }

    /// The values for which `matches` holds (e.g. every open of one file).
    pub fn find_all(&self, matches: impl Fn(&T) -> bool) -> Vec<Arc<T>> {
        self.entries.read().unwrap_or_else(|p| p.into_inner()).values().filter(|v| matches(v)).cloned().collect()
    }

    /// Every value, leaving the table empty (unmount).
    pub fn drain(&self) -> Vec<Arc<T>> {
        self.entries.write().unwrap_or_else(|p| p.into_inner()).drain().map(|(_, v)| v).collect()
    }
}

/// One open of a regular file: the client library's open (layout, size, whether it wrote;
/// `weft_client::OpenFile`, reached through `Deref`) and what the kernel side adds.
#[derive(Debug)]
pub struct OpenFile {
    core: weft_client::OpenFile,
    /// What the kernel was told for this open.
    pub io: KernelIo,
    /// A read-only open of a file whose size the MDS knew: the lock its answer came with,
    /// and `Mount::write_opens` before it was sent (see `Mount::size_still_exact`).
    pub exact_size: Option<(u64, u64)>,
    /// The file's mode at open, while its setuid and setgid bits may still have to be
    /// cleared by a write (see `Mount::write`); 0 once they are.
    privileged_mode: AtomicU32,
    /// The job that opened it: its close is that job's (the kernel's release often comes
    /// with no process).
    pub jobid: String,
    /// Opened through a persistent client cache's copy (`pcc.rs`).
    pub through_cache: AtomicBool,
}

impl std::ops::Deref for OpenFile {
    type Target = weft_client::OpenFile;
    fn deref(&self) -> &weft_client::OpenFile {
        &self.core
    }
}

impl std::ops::DerefMut for OpenFile {
    fn deref_mut(&mut self) -> &mut weft_client::OpenFile {
        &mut self.core
    }
}

/// The mode a write by a process without CAP_FSETID leaves, if it changes any bit (as
/// Linux's `should_remove_suid`): setuid goes, and setgid if the group may execute.
pub fn mode_without_privileges(mode: u32) -> Option<u32> {
    let mut m = mode & !libc::S_ISUID;
    let group_exec = libc::S_ISGID | libc::S_IXGRP;
    if m & group_exec == group_exec {
        m &= !libc::S_ISGID;
    }
    (m != mode).then_some(m)
}

impl OpenFile {
    pub fn new(fid: Fid, mds_handle: u64, layout: Option<Layout>, size_at_open: u64) -> OpenFile {
        OpenFile {
            core: weft_client::OpenFile::new(fid, mds_handle, layout, size_at_open),
            io: KernelIo::Cached,
            exact_size: None,
            privileged_mode: AtomicU32::new(0),
            jobid: String::new(),
            through_cache: AtomicBool::new(false),
        }
    }

    /// Records the file's mode at open, if a write by a process without CAP_FSETID would
    /// clear bits of it.
    pub fn note_mode(&self, mode: u32) {
        if mode_without_privileges(mode).is_some() {
            self.privileged_mode.store(mode, Ordering::Release);
        }
    }

    /// The mode at open if a write may still have to clear its setuid and setgid bits.
    pub fn privileged_mode(&self) -> Option<u32> {
        Some(self.privileged_mode.load(Ordering::Acquire)).filter(|&m| m != 0)
    }

    /// Their setuid and setgid bits are cleared: later writes need not look.
    pub fn privileges_cleared(&self) {
        self.privileged_mode.store(0, Ordering::Release);
    }
}

/// Directory offsets the kernel sees are positions in the listing, counted per open
/// directory: `.` is 0 and `..` is 1, the MDT's entries follow from 2 in the order it lists
/// them. An entry's offset is where the listing resumes after it (its position + 1).
///
/// Why not the MDT's cookies: they are 64-bit name hashes, so half of them would be
/// negative as a kernel `loff_t` (seekdir fails on those), and entries with equal hashes
/// share one cookie, so a kernel buffer ending inside such a group could not resume exactly.
/// Positions are small, dense and unique; the MDT's pages never split a hash group, so
/// fetching the page after the last cookie of a page is exact.
pub const DIR_OFFSET_DOT: u64 = 1;
pub const DIR_OFFSET_DOTDOT: u64 = 2;
const DIR_POSITION_FIRST_ENTRY: u64 = 2;

/// Where a listing resumes for a kernel offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// From `.` (offset 0).
    Dot,
    /// From `..`.
    DotDot,
    /// From the MDT entry with this index (0: the first).
    Entry(u64),
}

pub fn resume_at(offset: u64) -> Resume {
    match offset {
        0 => Resume::Dot,
        DIR_OFFSET_DOT => Resume::DotDot,
        k => Resume::Entry(k - DIR_POSITION_FIRST_ENTRY),
    }
}

/// The kernel offset after the MDT entry with index `index`.
pub fn entry_offset(index: u64) -> u64 {
    index + DIR_POSITION_FIRST_ENTRY + 1
}

/// One open directory: the page of entries fetched last, with the index of its first
/// entry, so that a listing costs one MDT request per page rather than one per kernel
/// buffer. Memory per open directory is one page (at most READDIR_ENTRIES_MAX entries).
#[derive(Debug)]
pub struct OpenDir {
    pub fid: Fid,
    /// The directory's attributes as this mount knew them at the open: an fstat after the
    /// directory was removed (rmdir, or a rename over it) answers them with no links, as a
    /// local file system does.
    pub attr_at_open: Option<Attr>,
    page: Mutex<Option<DirWindow>>,
}

#[derive(Debug)]
struct DirWindow {
    /// Index (in the whole listing) of `entries[0]`.
    first_index: u64,
    entries: Vec<DirEntry>,
    /// The cookie to fetch the next page after.
    next_cookie: u64,
    eof: bool,
}

/// What to do to list from an entry index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// These entries, the first with index `first_index`.
    Entries { first_index: u64, entries: Vec<DirEntry> },
    /// Fetch the MDT page after `after_cookie` (0: from the start); its first entry has
    /// index `first_index`. Then ask again.
    Fetch { after_cookie: u64, first_index: u64 },
    /// No entries from there.
    End,
}

impl OpenDir {
    pub fn new(fid: Fid, attr_at_open: Option<Attr>) -> OpenDir {
        OpenDir { fid, attr_at_open, page: Mutex::new(None) }
    }

    pub fn step(&self, index: u64) -> Step {
        let page = self.page.lock().unwrap_or_else(|p| p.into_inner());
        let Some(w) = page.as_ref() else {
            return Step::Fetch { after_cookie: 0, first_index: 0 };
        };
        let end = w.first_index + w.entries.len() as u64;
        if index < w.first_index {
            // Behind the window (rewinddir, seekdir back): list again from the start.
            Step::Fetch { after_cookie: 0, first_index: 0 }
        } else if index < end {
            Step::Entries { first_index: index, entries: w.entries[(index - w.first_index) as usize..].to_vec() }
        } else if w.eof {
            Step::End
        } else {
            // At or past the end of the window: walk forward a page.
            Step::Fetch { after_cookie: w.next_cookie, first_index: end }
        }
    }

    /// Keeps the page fetched after `after_cookie`. An empty page ends the listing even if
    /// the MDT did not say so, so that a listing always terminates.
    pub fn store(&self, first_index: u64, after_cookie: u64, entries: Vec<DirEntry>, eof: bool) {
        let next_cookie = entries.last().map(|e| e.cookie).unwrap_or(after_cookie);
        let eof = eof || entries.is_empty();
        *self.page.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(DirWindow { first_index, entries, next_cookie, eof });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_clears_setuid_and_setgid_with_group_exec_as_linux_does() {
        assert_eq!(mode_without_privileges(0o106777), Some(0o100777));
        assert_eq!(mode_without_privileges(0o4755), Some(0o755));
        assert_eq!(mode_without_privileges(0o2755), Some(0o755), "setgid with group exec");
        assert_eq!(mode_without_privileges(0o2745), None, "setgid without group exec: mandatory locking, kept");
        assert_eq!(mode_without_privileges(0o6745), Some(0o2745));
        assert_eq!(mode_without_privileges(0o1777), None, "the sticky bit stays");
        let f = OpenFile::new(Fid::new(1, 1, 0), 1, None, 0);
        f.note_mode(0o100644);
        assert_eq!(f.privileged_mode(), None, "nothing to clear");
        f.note_mode(0o104755);
        assert_eq!(f.privileged_mode(), Some(0o104755));
        f.privileges_cleared();
        assert_eq!(f.privileged_mode(), None);
    }
    use weft_proto::msg::FileType;

    #[test]
    fn table_hands_out_fresh_handles_and_forgets_removed_ones() {
        let t: HandleTable<OpenFile> = HandleTable::default();
        let a = t.insert(OpenFile::new(Fid::new(1, 1, 0), 10, None, 5));
        let b = t.insert(OpenFile::new(Fid::new(1, 2, 0), 11, None, 0));
        let c = t.insert(OpenFile::new(Fid::new(1, 1, 0), 12, None, 5));
        assert!(a != 0 && a != b && b != c && a != c);
        assert_eq!(t.get(b).unwrap().mds_handle, 11);
        assert_eq!(t.find_all(|f| f.fid == Fid::new(1, 1, 0)).len(), 2);
        assert_eq!(t.remove(b).unwrap().mds_handle, 11);
        assert!(t.get(b).is_none() && t.remove(b).is_none());
        let d = t.insert(OpenFile::new(Fid::new(1, 3, 0), 13, None, 0));
        assert!(d > c, "handles are never reused");
        assert_eq!(t.drain().len(), 3);
        assert!(t.get(a).is_none() && t.drain().is_empty());
    }

    #[test]
    fn directory_offsets_resume_where_the_kernel_stopped() {
        assert_eq!(resume_at(0), Resume::Dot);
        assert_eq!(resume_at(DIR_OFFSET_DOT), Resume::DotDot);
        assert_eq!(resume_at(DIR_OFFSET_DOTDOT), Resume::Entry(0));
        for index in [0u64, 1, 2, 77, 1 << 40] {
            assert_eq!(resume_at(entry_offset(index)), Resume::Entry(index + 1));
            assert!(entry_offset(index) > DIR_OFFSET_DOTDOT);
        }
    }

    fn entry(name: &str, cookie: u64) -> DirEntry {
        DirEntry { name: name.as_bytes().to_vec(), fid: Fid::new(1, cookie as u32, 0), kind: FileType::Regular, cookie }
    }

    /// A model MDT: entries in cookie order, pages of `max` that never split a group of
    /// equal cookies, resuming after a cookie.
    fn mdt_page(all: &[DirEntry], after: u64, max: usize) -> (Vec<DirEntry>, bool) {
        let mut out: Vec<DirEntry> = Vec::new();
        for e in all.iter().filter(|e| e.cookie > after) {
            if out.len() >= max && out.last().is_some_and(|l| l.cookie != e.cookie) {
                return (out, false);
            }
            out.push(e.clone());
        }
        (out, true)
    }

    /// Lists like the kernel does: from `start`, taking at most `buffer` entries per call
    /// and resuming at the offset of the last one taken.
    fn list(dir: &OpenDir, all: &[DirEntry], start: u64, buffer: usize, fetches: &mut usize) -> Vec<String> {
        let mut names = Vec::new();
        let mut offset = start;
        loop {
            let Resume::Entry(mut index) = resume_at(offset) else { panic!("dots are the caller's") };
            let mut taken = 0;
            loop {
                match dir.step(index) {
                    Step::End => return names,
                    Step::Fetch { after_cookie, first_index } => {
                        *fetches += 1;
                        let (entries, eof) = mdt_page(all, after_cookie, 3);
                        dir.store(first_index, after_cookie, entries, eof);
                    }
                    Step::Entries { first_index, entries } => {
                        for (i, e) in entries.iter().enumerate() {
                            if taken == buffer {
                                break;
                            }
                            names.push(String::from_utf8(e.name.clone()).unwrap());
                            offset = entry_offset(first_index + i as u64);
                            taken += 1;
                        }
                        if taken == buffer {
                            break;
                        }
                        index = first_index + entries.len() as u64;
                    }
                }
            }
        }
    }

    #[test]
    fn listing_in_small_buffers_sees_every_entry_once_even_with_equal_cookies() {
        // Cookies with a group of three equal hashes that a kernel buffer can split.
        let all: Vec<DirEntry> =
            [("a", 5), ("b", 9), ("c", 9), ("d", 9), ("e", 12), ("f", u64::MAX - 1), ("g", u64::MAX - 1)]
                .iter()
                .map(|(n, c)| entry(n, *c))
                .collect();
        let want: Vec<String> = all.iter().map(|e| String::from_utf8(e.name.clone()).unwrap()).collect();
        for buffer in 1..=8 {
            let dir = OpenDir::new(Fid::new(1, 1, 0), None);
            let mut fetches = 0;
            assert_eq!(list(&dir, &all, DIR_OFFSET_DOTDOT, buffer, &mut fetches), want, "buffer {buffer}");
            assert!(fetches <= 4, "one fetch per page, not per buffer: {fetches}");
            // Seeking back (a telldir value from earlier) lists the rest again.
            let mut again = 0;
            assert_eq!(list(&dir, &all, entry_offset(1), buffer, &mut again), want[2..].to_vec());
        }
        let empty = OpenDir::new(Fid::new(1, 1, 0), None);
        let mut fetches = 0;
        assert!(list(&empty, &[], DIR_OFFSET_DOTDOT, 4, &mut fetches).is_empty());
        // An empty page that does not say eof still ends the listing.
        let d = OpenDir::new(Fid::new(1, 1, 0), None);
        d.store(0, 0, vec![], false);
        assert_eq!(d.step(0), Step::End);
    }
}
