//! The clients that hold this MDT's locks, recorded in its store (schema `clients`; Lustre
//! keeps its clients in `last_rcvd`), so that a recovery window after the death of the MDT's
//! server (a replicated MDT's new leader, or a restart) waits for exactly them: it ends as
//! soon as all of them replayed, and evicts those that do not come back (weft-dlm
//! `recovery.rs`). A client is recorded before its first lock is granted (one write per
//! client, through the group of a replicated MDT), and forgotten when it disconnects
//! (unmount) or is evicted. An MDT from before the table trusts it only once a window that
//! ran its whole length recorded every client that replayed in it (`complete`).

use crate::background::internal;
use crate::writer::{InternalOp, Queue};
use futures::future::BoxFuture;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use weft_dlm::recovery::LockClients;
use weft_proto::WeftResult;

pub(crate) struct MdtClients {
    inner: Arc<Inner>,
}

struct Inner {
    queue: Queue,
    /// What the store holds, kept here: asked before every grant.
    known: RwLock<HashSet<u64>>,
    /// Whether the store's record names every client holding locks.
    complete: AtomicBool,
    /// One change of the record at a time, the set updated with it: a record and a forget
    /// of one client cannot cross (the set saying recorded while the store does not).
    changing: tokio::sync::Mutex<()>,
}

impl MdtClients {
    pub(crate) fn new(queue: Queue, recorded: Vec<u64>, complete: bool) -> MdtClients {
        let inner = Inner {
            queue,
            known: RwLock::new(recorded.into_iter().collect()),
            complete: AtomicBool::new(complete),
            changing: tokio::sync::Mutex::new(()),
        };
        MdtClients { inner: Arc::new(inner) }
    }
}

impl Inner {
    fn known(&self) -> std::sync::RwLockReadGuard<'_, HashSet<u64>> {
        self.known.read().unwrap_or_else(|p| p.into_inner())
    }

    fn known_mut(&self) -> std::sync::RwLockWriteGuard<'_, HashSet<u64>> {
        self.known.write().unwrap_or_else(|p| p.into_inner())
    }
}

impl LockClients for MdtClients {
    fn known(&self, owner: u64) -> bool {
        self.inner.known().contains(&owner)
    }

    fn record(&self, owner: u64) -> BoxFuture<'static, WeftResult<()>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let _one = inner.changing.lock().await;
            // Several first enqueues of one client: one write.
            if inner.known().contains(&owner) {
                return Ok(());
            }
            internal(&inner.queue, InternalOp::LockClients { add: vec![owner], remove: Vec::new(), complete: false })
                .await?;
            inner.known_mut().insert(owner);
            Ok(())
        })
    }

    fn forget(&self, owners: Vec<u64>) -> BoxFuture<'static, WeftResult<()>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let _one = inner.changing.lock().await;
            let owners: Vec<u64> = owners.into_iter().filter(|o| inner.known().contains(o)).collect();
            if owners.is_empty() {
                return Ok(());
            }
            internal(
                &inner.queue,
                InternalOp::LockClients { add: Vec::new(), remove: owners.clone(), complete: false },
            )
            .await?;
            inner.known_mut().retain(|c| !owners.contains(c));
            Ok(())
        })
    }

    fn recorded(&self) -> Option<Vec<u64>> {
        let complete = self.inner.complete.load(Ordering::Acquire);
        complete.then(|| self.inner.known().iter().copied().collect())
    }

    fn complete(&self) -> BoxFuture<'static, WeftResult<()>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            if inner.complete.load(Ordering::Acquire) {
                return Ok(());
            }
            let _one = inner.changing.lock().await;
            internal(&inner.queue, InternalOp::LockClients { add: Vec::new(), remove: Vec::new(), complete: true })
                .await?;
            inner.complete.store(true, Ordering::Release);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::Env;
    use std::sync::Arc;

    use weft_proto::lock::{LockMode, LockScope};

    use crate::testutil::namespace;

    /// A new MDT's record is complete; a client granted a lock is in it, also after a
    /// restart; one that disconnects is not.
    #[tokio::test]
    async fn the_record_of_lock_holders_survives_a_restart() {
        let mut env = Env::new().await;
        let ns = namespace();
        env.mds().set_lock_namespace(ns.clone());
        let bits = LockScope::Bits(weft_proto::lock::bits::LOOKUP);
        ns.enqueue(7, weft_proto::Fid::ROOT, LockMode::Pr, bits, Default::default()).await.unwrap();
        ns.enqueue(8, weft_proto::Fid::ROOT, LockMode::Pr, bits, Default::default()).await.unwrap();
        ns.disconnect(8).await.unwrap();
        // The namespace holds the MDS (through its record) open.
        drop(ns);
        env.restart().await;
        let view = env.mds().core.read_view();
        assert!(view.lock_clients_complete().unwrap(), "a new MDT's record is complete");
        assert_eq!(view.lock_clients().unwrap(), vec![7]);
    }

    /// A record of lock holders that cannot be written (a storage fault).
    struct Unrecordable;
    impl weft_dlm::recovery::LockClients for Unrecordable {
        fn known(&self, _: u64) -> bool {
            false
        }
        fn record(&self, _: u64) -> futures::future::BoxFuture<'static, weft_proto::WeftResult<()>> {
            Box::pin(async { Err(weft_proto::WeftError::io("injected: the record cannot be written")) })
        }
        fn forget(&self, _: Vec<u64>) -> futures::future::BoxFuture<'static, weft_proto::WeftResult<()>> {
            Box::pin(async { Ok(()) })
        }
        fn recorded(&self) -> Option<Vec<u64>> {
            None
        }
        fn complete(&self) -> futures::future::BoxFuture<'static, weft_proto::WeftResult<()>> {
            Box::pin(async { Ok(()) })
        }
    }

    /// A change that committed is answered as made when the lock its answer would carry
    /// cannot be had (here its holder cannot be recorded): without the lock, not with an
    /// error (the DNE simulation's seed 15 with a lock service: a mkdir answered EIO, after
    /// a journal append under the client's record failed, was there after the restart).
    #[tokio::test]
    async fn a_change_made_is_answered_made_when_its_lock_cannot_be_had() {
        let env = Env::new().await;
        let ns = namespace();
        env.mds().set_lock_namespace(ns.clone());
        ns.set_lock_clients(Arc::new(Unrecordable));
        let mkdir =
            weft_proto::msg::mdt::Mkdir { parent: weft_proto::Fid::ROOT, name: b"d".to_vec(), mode: 0o755, umask: 0 };
        let header = env.header_as(&weft_proto::msg::Identity::root());
        let made = env.mds().handle(&header, mkdir.into(), weft_proto::msg::Run::Inline).await;
        let made = made.expect("the mkdir was made, and says so");
        let (answer, _) = made.into_parts();
        assert!(answer.inode().is_some_and(|i| i.lock.is_none()), "answered without a lock: {answer:?}");
    }
}
