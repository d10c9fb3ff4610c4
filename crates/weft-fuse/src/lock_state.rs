//! What a mount remembers of advisory locks between kernel requests: the owners that set
//! them through each open ([`Advisory`]) and the blocking requests in wait ([`Interrupts`]).
//! State only, apart from locks.rs (the requests, an `impl Mount`) so that mount.rs holds
//! it without importing the requests that use the mount.

use crate::limits::EARLY_INTERRUPTS_MAX;
use std::collections::{HashMap, VecDeque};
use tokio::sync::oneshot;
use weft_proto::Fid;

/// The lock owners that may hold advisory locks set through this mount, each with the open
/// file descriptions (kernel file handles) it set them through.
#[derive(Default)]
pub(crate) struct Advisory {
    /// By file, then by owner: the opens it locked through.
    files: HashMap<Fid, HashMap<u64, Vec<u64>>>,
}

impl Advisory {
    /// `owner` set a lock on `fid` through open `fh`.
    pub(crate) fn note(&mut self, fid: Fid, owner: u64, fh: u64) {
        let opens = self.files.entry(fid).or_default().entry(owner).or_default();
        if !opens.contains(&fh) {
            opens.push(fh);
        }
    }

    /// The locks of `owner` on `fid` are being released: whether it may have had any.
    pub(crate) fn forget(&mut self, fid: Fid, owner: u64) -> bool {
        let Some(owners) = self.files.get_mut(&fid) else { return false };
        let had = owners.remove(&owner).is_some();
        if owners.is_empty() {
            self.files.remove(&fid);
        }
        had
    }

    /// The last close of open `fh` of `fid`: the owners that set locks through it and may
    /// still hold them. An OFD lock's owner is the open itself. A process's fcntl locks were
    /// released by its own close of this open (the flush, which forgets them) before the
    /// last close could come, so an owner found here with them has locked again since, and
    /// only through this open.
    pub(crate) fn released(&mut self, fid: Fid, fh: u64) -> Vec<u64> {
        let Some(owners) = self.files.get_mut(&fid) else { return Vec::new() };
        let gone: Vec<u64> = owners.iter().filter(|(_, opens)| opens.contains(&fh)).map(|(owner, _)| *owner).collect();
        for owner in &gone {
            owners.remove(owner);
        }
        if owners.is_empty() {
            self.files.remove(&fid);
        }
        gone
    }
}

/// Blocking lock requests in wait, by the kernel's request id, so that a signal to the
/// waiting process ends the wait: the kernel sends FUSE_INTERRUPT, the request is answered
/// EINTR, and the kernel restarts the call (SA_RESTART) or returns EINTR. Without it a
/// request the file system has read can end on no signal, SIGKILL included.
#[derive(Default)]
pub(crate) struct Interrupts {
    waiting: HashMap<u64, oneshot::Sender<()>>,
    /// Interrupts that came before their request was registered (the kernel may hand the
    /// two to different FUSE threads), newest last.
    early: VecDeque<u64>,
}

impl Interrupts {
    /// Request `unique` starts to wait: what tells it a signal came, or None when its
    /// interrupt came already.
    pub(crate) fn wait(&mut self, unique: u64) -> Option<oneshot::Receiver<()>> {
        if let Some(at) = self.early.iter().position(|u| *u == unique) {
            self.early.remove(at);
            return None;
        }
        let (tx, rx) = oneshot::channel();
        self.waiting.insert(unique, tx);
        Some(rx)
    }

    /// The kernel interrupts request `unique`.
    pub(crate) fn interrupt(&mut self, unique: u64) {
        match self.waiting.remove(&unique) {
            Some(tx) => drop(tx.send(())),
            None => {
                // Most interrupts name a request that is not a lock wait and ends anyway;
                // the few kept are for a wait about to register.
                if self.early.len() == EARLY_INTERRUPTS_MAX {
                    self.early.pop_front();
                }
                self.early.push_back(unique);
            }
        }
    }

    /// Request `unique` no longer waits.
    pub(crate) fn done(&mut self, unique: u64) {
        self.waiting.remove(&unique);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_s_last_close_ends_the_locks_set_through_it_and_a_process_close_its_own() {
        let (f, g) = (Fid::new(0x200000400, 1, 0), Fid::new(0x200000400, 2, 0));
        let mut a = Advisory::default();
        // An OFD lock (owner 10, through open 1), a process's fcntl lock through opens 1
        // and 2 (owner 20), a lock on another file through the same handle number.
        a.note(f, 10, 1);
        a.note(f, 20, 1);
        a.note(f, 20, 2);
        a.note(g, 30, 1);
        assert!(a.forget(f, 20), "the process's close releases its locks");
        assert!(!a.forget(f, 20), "once");
        let mut owners = a.released(f, 1);
        owners.sort();
        assert_eq!(owners, vec![10], "the open's last close: its OFD lock");
        assert!(a.released(f, 1).is_empty());
        assert_eq!(a.released(g, 1), vec![30], "another file's opens are its own");
        // A process that locked again after its close, through another open.
        a.note(f, 20, 2);
        assert!(a.released(f, 1).is_empty());
        assert_eq!(a.released(f, 2), vec![20]);
    }

    #[test]
    fn a_signal_ends_a_lock_wait_even_when_its_interrupt_comes_first() {
        let mut i = Interrupts::default();
        let mut waiting = i.wait(7).expect("no interrupt yet");
        assert!(waiting.try_recv().is_err(), "nothing yet");
        i.interrupt(7);
        assert!(waiting.try_recv().is_ok(), "the wait learns of the signal");
        // The interrupt read by another thread before its request registered.
        i.interrupt(8);
        assert!(i.wait(8).is_none(), "a wait whose signal came already ends at once");
        assert!(i.wait(8).is_some(), "an early interrupt serves one wait");
        i.done(8);
        // Interrupts for requests that never wait are kept up to a bound.
        for unique in 100..100 + 2 * EARLY_INTERRUPTS_MAX as u64 {
            i.interrupt(unique);
        }
        assert_eq!(i.early.len(), EARLY_INTERRUPTS_MAX);
        assert!(i.wait(100).is_some(), "the oldest were dropped");
        assert!(i.wait(99 + 2 * EARLY_INTERRUPTS_MAX as u64).is_none(), "the newest kept");
    }
}
