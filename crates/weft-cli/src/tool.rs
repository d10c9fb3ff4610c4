//! Clients of this process's own that tools (migrate, mirror, policy) run their work on, as
//! the user who runs them.

use crate::xattr;
use anyhow::anyhow;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use weft_client::virtual_xattr as vx;
use weft_client::{Client, ClientConfig};
use weft_proto::msg::Caller;
use weft_proto::Fid;

/// Clients of this process's own, one per file system, that tools (migrate, mirror) run
/// their work on as the user who runs them; their locks go back when it ends.
pub(crate) struct Tool {
    rt: tokio::runtime::Runtime,
    clients: HashMap<String, Arc<Client>>,
    pub who: Caller,
}

impl Tool {
    pub fn new(jobid: &str) -> anyhow::Result<Tool> {
        // Lock callbacks are answered while data is copied: a runtime with threads of its own.
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        let who = Caller::new(crate::remote::caller_identity(), jobid.to_string());
        Ok(Tool { rt, clients: HashMap::new(), who })
    }

    /// Runs `work` with a client of the file system `file` is in and the file's FID.
    pub fn on<T, F>(&mut self, file: &Path, work: impl FnOnce(Arc<Client>, Caller, Fid) -> F) -> anyhow::Result<T>
    where
        F: std::future::Future<Output = weft_proto::WeftResult<T>>,
    {
        let mgs = crate::cluster_addr::of_mount(file)?;
        let fid: Fid =
            String::from_utf8(xattr::get(file, vx::FID)?)?.trim().parse().map_err(|e| anyhow!("its FID: {e}"))?;
        let client = match self.clients.get(&mgs) {
            Some(c) => c.clone(),
            None => {
                let c = self
                    .rt
                    .block_on(Client::connect(ClientConfig::new(mgs.clone())))
                    .map_err(|e| anyhow!("cannot reach the file system at {mgs}: {}", e.message))?;
                self.clients.insert(mgs, c.clone());
                c
            }
        };
        self.rt.block_on(work(client, self.who.clone(), fid)).map_err(|e| anyhow!("{}", e.message))
    }
}

impl Drop for Tool {
    fn drop(&mut self) {
        // The locks this process took go back now: no server waits for a client that is gone.
        for c in self.clients.values() {
            self.rt.block_on(c.release_locks());
        }
    }
}
