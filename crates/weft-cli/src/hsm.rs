//! `weft hsm state|set|clear FILE...`: a file's hierarchical storage state, as `lfs
//! hsm_state`, `hsm_set` and `hsm_clear` show and change it, through the mount (the virtual
//! attribute `weft.hsm`).

use crate::xattr;
use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use weft_client::virtual_xattr::{self as vx, HsmChange};
use weft_proto::msg::hsm::{
    HsmState, HS_ARCHIVED, HS_DIRTY, HS_EXISTS, HS_LOST, HS_NOARCHIVE, HS_NORELEASE, HS_USER_SETTABLE,
};

#[derive(Args)]
pub struct HsmArgs {
    #[command(subcommand)]
    command: HsmCommand,
}

#[derive(Subcommand)]
enum HsmCommand {
    /// Each file's HSM state: `PATH: (0x00000009) exists archived, archive_id:1`.
    State {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Set HSM flags (users: --norelease, --noarchive, --dirty; root all, and --archive-id).
    Set(FlagArgs),
    /// Clear HSM flags (users: --norelease, --noarchive, --dirty; root all).
    Clear(FlagArgs),
}

#[derive(Args)]
struct FlagArgs {
    /// Never release the file.
    #[arg(long)]
    norelease: bool,
    /// Never archive the file.
    #[arg(long)]
    noarchive: bool,
    /// The file changed since it was archived.
    #[arg(long)]
    dirty: bool,
    /// A copy exists in the archive (root).
    #[arg(long)]
    exists: bool,
    /// The archive's copy is complete and current (root).
    #[arg(long)]
    archived: bool,
    /// The archive's copy is lost (root).
    #[arg(long)]
    lost: bool,
    /// The archive the copy is in (root; with set only).
    #[arg(long, value_name = "NUM")]
    archive_id: Option<u32>,
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

impl FlagArgs {
    fn bits(&self) -> u32 {
        [
            (self.norelease, HS_NORELEASE),
            (self.noarchive, HS_NOARCHIVE),
            (self.dirty, HS_DIRTY),
            (self.exists, HS_EXISTS),
            (self.archived, HS_ARCHIVED),
            (self.lost, HS_LOST),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .fold(0, |bits, (_, bit)| bits | bit)
    }
}

/// Changes one file's flags. The mount passes only an errno back, so what the MDT would
/// refuse is checked here first, to say why (the MDT checks again).
fn change_one(f: &std::path::Path, change: HsmChange) -> anyhow::Result<()> {
    let meta = std::fs::metadata(f).with_context(|| f.display().to_string())?;
    if !meta.is_file() {
        bail!("{}: not a regular file: HSM states are for files", f.display());
    }
    // SAFETY: getuid cannot fail.
    let root = unsafe { libc::getuid() } == 0;
    if !root && ((change.set | change.clear) & !HS_USER_SETTABLE != 0 || change.archive_id != 0) {
        bail!(
            "{}: only root sets or clears exists, archived, lost and the archive id (users: norelease, noarchive, \
             dirty)",
            f.display()
        );
    }
    let current: HsmState = xattr::get_json(f, vx::HSM)?;
    current.changed(change.set, change.clear, change.archive_id).map_err(|why| anyhow!("{}: {why}", f.display()))?;
    xattr::set(f, vx::HSM, &serde_json::to_vec(&change)?)
}

fn change(files: &[PathBuf], change: HsmChange) -> anyhow::Result<()> {
    let mut failed = 0;
    for f in files {
        if let Err(e) = change_one(f, change) {
            eprintln!("weft hsm: {e:#}");
            failed += 1;
        }
    }
    if failed > 0 {
        bail!("{failed} of {} files not changed", files.len());
    }
    Ok(())
}

pub fn hsm(a: HsmArgs) -> anyhow::Result<()> {
    match a.command {
        HsmCommand::State { files, json } => {
            let mut failed = 0;
            for f in &files {
                match xattr::get_json::<HsmState>(f, vx::HSM) {
                    Ok(s) if json => {
                        let v = serde_json::json!({ "path": f, "states": s.states, "archive_id": s.archive_id });
                        println!("{v}");
                    }
                    Ok(s) => println!("{}: {}", f.display(), s.describe()),
                    Err(e) => {
                        eprintln!("weft hsm: {e:#}");
                        failed += 1;
                    }
                }
            }
            if failed > 0 {
                bail!("{failed} of {} files not read", files.len());
            }
            Ok(())
        }
        HsmCommand::Set(f) => {
            let bits = f.bits();
            if bits == 0 && f.archive_id.is_none() {
                return Err(anyhow!(
                    "give a flag to set: --norelease, --noarchive, --dirty, --exists, --archived, --lost"
                ));
            }
            change(&f.files, HsmChange { set: bits, clear: 0, archive_id: f.archive_id.unwrap_or(0) })
        }
        HsmCommand::Clear(f) => {
            if f.archive_id.is_some() {
                bail!("--archive-id goes with set (a file keeps its archive id when flags are cleared)");
            }
            let bits = f.bits();
            if bits == 0 {
                bail!("give a flag to clear: --norelease, --noarchive, --dirty, --exists, --archived, --lost");
            }
            change(&f.files, HsmChange { set: 0, clear: bits, archive_id: 0 })
        }
    }
}
