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
use std::path::PathBuf;
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
    let who = Caller::new(crate::remote::caller_identity(), "weft_migrate".to_string());
    // Lock callbacks are answered while data is copied: a runtime with threads of its own.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let mut clients: HashMap<String, Arc<Client>> = HashMap::new();
    let mut failed = 0usize;
    for f in &files {
        let done = (|| -> anyhow::Result<()> {
            if !f.is_file() {
                bail!("not a regular file");
            }
            let mgs = String::from_utf8(xattr::get(f, vx::MGS)?)?;
            let fid: Fid =
                String::from_utf8(xattr::get(f, vx::FID)?)?.trim().parse().map_err(|e| anyhow!("its FID: {e}"))?;
            let client = match clients.get(&mgs) {
                Some(c) => c.clone(),
                None => {
                    let c = rt
                        .block_on(Client::connect(ClientConfig::new(mgs.clone())))
                        .map_err(|e| anyhow!("cannot reach the file system at {mgs}: {}", e.message))?;
                    clients.insert(mgs, c.clone());
                    c
                }
            };
            rt.block_on(client.migrate(&who, fid, &spec)).map_err(|e| anyhow!("{}", e.message))?;
            Ok(())
        })();
        match done {
            Ok(()) if a.verbose => println!("{}: migrated", f.display()),
            Ok(()) => {}
            Err(e) => {
                eprintln!("weft migrate: {}: {e}", f.display());
                failed += 1;
            }
        }
    }
    // The locks this client took go back now: no server waits for a client that is gone.
    for c in clients.values() {
        rt.block_on(c.release_locks());
    }
    if failed > 0 {
        bail!("{failed} of {} files were not migrated (above)", files.len());
    }
    Ok(())
}
