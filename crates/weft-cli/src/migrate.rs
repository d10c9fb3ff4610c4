//! `weft migrate`: rewrites files' data into a new layout while they stay in use (as
//! `lfs migrate`): `weft find MNT --ost 3 | weft migrate -o 0,1,2` empties OST 3. The copy
//! is made by a client of this process's own (see weft-client's `migrate`), as the user who
//! runs the command.

use crate::lfs::LayoutOptions;
use crate::tool::Tool;
use anyhow::{anyhow, bail};
use clap::Args;
use std::io::BufRead;
use std::path::PathBuf;

#[derive(Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    layout: LayoutOptions,
    /// Print each file as it is done.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Move the inodes of each path (a directory with everything below it) to this MDT
    /// (`lfs migrate -m`); the data stays on its OSTs. Root only.
    #[arg(short = 'm', long = "mdt-index", value_name = "MDT_IDX")]
    mdt: Option<u32>,
    /// With -m: the directory itself, not what is in it.
    #[arg(short = 'd', long = "directory", requires = "mdt")]
    directory: bool,
    /// Files in a Weft mount; without any, one path a line from standard input.
    files: Vec<PathBuf>,
}

pub fn migrate(a: MigrateArgs) -> anyhow::Result<()> {
    if let Some(mdt) = a.mdt {
        if a.layout.any() {
            bail!(
                "-m/--mdt-index moves inodes between MDTs; the layout options (-c -S -i -o -p -E -L) do not go with it"
            );
        }
        return crate::migrate_mdt::migrate(&paths(&a.files)?, mdt, !a.directory, a.verbose);
    }
    let spec = a.layout.spec("migrate", &a.files)?;
    let files = paths(&a.files)?;
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

/// The paths given, or one a line from standard input when none is.
fn paths(given: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    if !given.is_empty() {
        return Ok(given.to_vec());
    }
    let mut v = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        if !line.is_empty() {
            v.push(PathBuf::from(line));
        }
    }
    Ok(v)
}
