//! `weft hsm state|set|clear FILE...`: a file's hierarchical storage state, as `lfs
//! hsm_state`, `hsm_set` and `hsm_clear` show and change it, through the mount (the virtual
//! attribute `weft.hsm`). `weft hsm archive|restore|remove|cancel FILE...`: requests to the
//! MDT's coordinator, every file of a command in one request (sent to the MDT the mount's
//! map names, as the caller); `weft hsm release FILE...` through the mount
//! (`weft.hsm.release`); `weft hsm action FILE...` what the coordinator does with each.

use crate::errors;
use crate::mdts::Mdts;
use crate::xattr;
use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use weft_client::virtual_xattr::{self as vx, HsmChange};
use weft_proto::msg::hsm::{
    HsmAction, HsmState, HS_ARCHIVED, HS_DIRTY, HS_EXISTS, HS_LOST, HS_NOARCHIVE, HS_NORELEASE,
};
use weft_proto::msg::mdt;
use weft_proto::Fid;

use crate::limits::HSM_REQUEST_FILES_MAX as HSM_REQUEST_FILES;

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
    /// Copy files into an archive (a copytool serving it does; the command returns once
    /// the requests are queued).
    Archive(RequestArgs),
    /// Free the OST objects of archived, unchanged, closed files; their size and times stay,
    /// and the next open restores them.
    Release(ListArgs),
    /// Bring released files' data back ahead of time (the command returns once queued).
    Restore(ListArgs),
    /// Delete files' copies from their archive.
    Remove(RequestArgs),
    /// Stop the requests waiting or running on files.
    Cancel(ListArgs),
    /// The request waiting or running on each file, else the last one if it ended lately:
    /// `PATH: ARCHIVE running (1048576 bytes moved)`, or `PATH: NOOP`.
    Action {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
struct ListArgs {
    /// Also the files named in FILE, one per line.
    #[arg(long, value_name = "FILE")]
    filelist: Option<PathBuf>,
    /// Bytes passed to the copytool with each request.
    #[arg(long, value_name = "DATA")]
    data: Option<String>,
    files: Vec<PathBuf>,
}

#[derive(Args)]
struct RequestArgs {
    /// The archive (default: the file's, else the MDT's hsm.default_archive_id).
    #[arg(long, value_name = "NUM")]
    archive: Option<u32>,
    #[command(flatten)]
    list: ListArgs,
}

impl ListArgs {
    fn all_files(&self) -> anyhow::Result<Vec<PathBuf>> {
        let mut files = self.files.clone();
        if let Some(list) = &self.filelist {
            let text = std::fs::read_to_string(list).with_context(|| format!("--filelist {}", list.display()))?;
            files.extend(text.lines().map(str::trim).filter(|l| !l.is_empty()).map(PathBuf::from));
        }
        if files.is_empty() {
            bail!("name the files (FILE... or --filelist FILE)");
        }
        Ok(files)
    }
}

/// A file's FID, as its mount names it.
pub(crate) fn fid_of(f: &std::path::Path) -> anyhow::Result<Fid> {
    let text = String::from_utf8(xattr::get(f, vx::FID)?).context("the mount answered weft.fid with non-text")?;
    text.trim().parse::<Fid>().map_err(|e| anyhow!("{}: the mount answered weft.fid {text}: {e}", f.display()))
}

fn fids_of(files: &[PathBuf]) -> anyhow::Result<Vec<Fid>> {
    files.iter().map(|f| fid_of(f)).collect()
}

/// An MDT's error with the FIDs it names replaced by the paths the user gave.
fn with_paths(e: anyhow::Error, files: &[PathBuf], fids: &[Fid]) -> anyhow::Error {
    let mut text = format!("{e:#}");
    for (f, fid) in files.iter().zip(fids) {
        text = text.replace(&fid.to_string(), &f.display().to_string());
    }
    anyhow!(text)
}

/// One request on every file (several when the list is longer than one request takes).
fn request(action: HsmAction, archive: Option<u32>, list: &ListArgs) -> anyhow::Result<()> {
    let files = list.all_files()?;
    let fids = fids_of(&files)?;
    let mdts = Mdts::of(&files[0])?;
    let data = list.data.clone().unwrap_or_default().into_bytes();
    // Each file's actions are queued by its MDT.
    for (index, at) in Fid::by_mdt(&fids) {
        let files: Vec<PathBuf> = at.iter().map(|i| files[*i].clone()).collect();
        let fids: Vec<Fid> = at.iter().map(|i| fids[*i]).collect();
        for (fchunk, chunk) in files.chunks(HSM_REQUEST_FILES).zip(fids.chunks(HSM_REQUEST_FILES)) {
            let fids = chunk.to_vec();
            let op = mdt::HsmRequest { action, archive_id: archive.unwrap_or(0), fids, data: data.clone() };
            mdts.ask(index, op).map_err(|e| with_paths(e, fchunk, chunk))?;
        }
    }
    Ok(())
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

/// Changes one file's flags (the MDT checks who may and what follows; the mount carries
/// its reason back).
fn change_one(f: &std::path::Path, change: HsmChange) -> anyhow::Result<()> {
    xattr::set(f, vx::HSM, &serde_json::to_vec(&change)?)
}

fn change(files: &[PathBuf], change: HsmChange) -> anyhow::Result<()> {
    let mut failed = 0;
    for f in files {
        if let Err(e) = change_one(f, change) {
            errors::report(&e);
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
                        errors::report(&e);
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
        HsmCommand::Archive(r) => request(HsmAction::Archive, r.archive, &r.list),
        HsmCommand::Remove(r) => request(HsmAction::Remove, r.archive, &r.list),
        HsmCommand::Restore(l) => request(HsmAction::Restore, None, &l),
        HsmCommand::Cancel(l) => request(HsmAction::Cancel, None, &l),
        HsmCommand::Release(l) => {
            let files = l.all_files()?;
            let mut failed = 0;
            for f in &files {
                if let Err(e) = xattr::set(f, vx::HSM_RELEASE, b"1") {
                    errors::report(&e);
                    failed += 1;
                }
            }
            if failed > 0 {
                bail!("{failed} of {} files not released", files.len());
            }
            Ok(())
        }
        HsmCommand::Action { files, json } => {
            let fids = fids_of(&files)?;
            let mdts = Mdts::of(&files[0])?;
            for (f, fid) in files.iter().zip(&fids) {
                let action = mdts
                    .ask(fid.mdt_index(), mdt::HsmActionGet { fid: *fid })
                    .map_err(|e| with_paths(e, &files, &fids))?;
                if json {
                    let v = serde_json::json!({ "path": f, "action": action });
                    println!("{v}");
                } else {
                    let what = action.map_or_else(|| "NOOP".to_string(), |a| a.describe());
                    println!("{}: {what}", f.display());
                }
            }
            Ok(())
        }
    }
}
