//! The clients that hold this MDT's locks, recorded in its store (schema `clients`; Lustre
//! keeps its clients in `last_rcvd`), so that a recovery window after the death of the MDT's
//! server (a replicated MDT's new leader, or a restart) waits for exactly them: it ends as
//! soon as all of them replayed, and evicts those that do not come back (weft-dlm
//! `recovery.rs`). A client is recorded before its first lock is granted (one write per
//! client, through the group of a replicated MDT), and forgotten when it disconnects
//! (unmount) or is evicted.

use crate::background::internal;
use crate::writer::{InternalOp, Queue};
use futures::future::BoxFuture;
use std::collections::HashSet;
use std::sync::{Arc, RwLock};
use weft_dlm::recovery::LockClients;
use weft_proto::WeftResult;

pub(crate) struct MdtClients {
    queue: Queue,
    /// What the store holds, kept here: asked before every grant.
    known: Arc<RwLock<HashSet<u64>>>,
}

impl MdtClients {
    pub(crate) fn new(queue: Queue, recorded: Vec<u64>) -> MdtClients {
        MdtClients { queue, known: Arc::new(RwLock::new(recorded.into_iter().collect())) }
    }
}

impl LockClients for MdtClients {
    fn known(&self, owner: u64) -> bool {
        self.known.read().unwrap_or_else(|p| p.into_inner()).contains(&owner)
    }

    fn record(&self, owner: u64) -> BoxFuture<'static, WeftResult<()>> {
        let (queue, known) = (self.queue.clone(), self.known.clone());
        Box::pin(async move {
            internal(&queue, InternalOp::LockClients { add: vec![owner], remove: Vec::new() }).await?;
            known.write().unwrap_or_else(|p| p.into_inner()).insert(owner);
            Ok(())
        })
    }

    fn forget(&self, owners: Vec<u64>) -> BoxFuture<'static, WeftResult<()>> {
        let (queue, known) = (self.queue.clone(), self.known.clone());
        Box::pin(async move {
            // Out of the set first: a grant meanwhile records the client again, after this.
            known.write().unwrap_or_else(|p| p.into_inner()).retain(|c| !owners.contains(c));
            internal(&queue, InternalOp::LockClients { add: Vec::new(), remove: owners }).await.map(drop)
        })
    }

    fn recorded(&self) -> Vec<u64> {
        self.known.read().unwrap_or_else(|p| p.into_inner()).iter().copied().collect()
    }
}
