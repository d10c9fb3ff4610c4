//! `weft migrate`: rewrites files' data into a new layout while they stay in use (as
//! `lfs migrate`): `weft find MNT --ost 3 | weft migrate -o 0,1,2` empties OST 3. The copy
//! is made by a client of this process's own (see weft-client's `migrate`), as the user who
//! runs the command.

use crate::lfs::LayoutOptions;
use crate::xattr;
use anyhow::{anyhow, bail};
use clap::Args;
use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use weft_client::virtual_xattr as vx;
use weft_client::{Client, ClientConfig};
use weft_proto::msg::Caller;
use weft_proto::Fid;

#[derive(Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    layout: LayoutOptions,
    /// Print each file as it is done.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Files in a Weft mount; without any, one path a line from standard input.
    files: Vec<PathBuf>,
}

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

pub fn migrate(a: MigrateArgs) -> anyhow::Result<()> {
    let spec = a.layout.spec("migrate", &a.files)?;
    let files: Vec<PathBuf> = if a.files.is_empty() {
        let mut v = Vec::new();
        for line in std::io::stdin().lock().lines() {
            let line = line?;
            if !line.is_empty() {
                v.push(PathBuf::from(line));
            }
        }
        v
    } else {
        a.files.clone()
    };
    let mut tool = Tool::new("weft_migrate")?;
    let mut failed = 0usize;
    for f in &files {
        let done = match f.is_file() {
            false => Err(anyhow!("not a regular file")),
            true => tool.on(f, |c, who, fid| {
                let spec = spec.clone();
                async move { c.migrate(&who, fid, &spec).await }
            }),
        };
        match done {
            Ok(_) if a.verbose => println!("{}: migrated", f.display()),
            Ok(_) => {}
            Err(e) => {
                eprintln!("weft migrate: {}: {e}", f.display());
                failed += 1;
            }
        }
    }
    if failed > 0 {
        bail!("{failed} of {} files were not migrated (above)", files.len());
    }
    Ok(())
}
