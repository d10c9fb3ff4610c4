//! `weft project` (Lustre's `lfs project`): a file's project id, which quotas by project
//! count against, and a directory's inheritance flag (PROJINHERIT: new files and
//! subdirectories take the directory's id). Listed as lfs prints it, `"%5u %c %s"` (id,
//! `P` when the flag is set, path); set, cleared and checked, over a tree with `-r`.
//! Reading is anyone's; changing is root's (the MDS decides).

use crate::xattr;
use anyhow::{bail, Context};
use clap::Args;
use std::io::Write;
use std::path::{Path, PathBuf};
use weft_client::virtual_xattr::{ProjectChange, ProjectState, PROJECT};

#[derive(Args)]
pub struct ProjectArgs {
    /// Set this project id (0 to 4294967294); with -c, the id expected.
    #[arg(short = 'p', value_name = "ID")]
    projid: Option<u32>,
    /// Set the inheritance flag on directories: new entries take their project.
    #[arg(short = 's')]
    inherit: bool,
    /// Check: print the files under each directory whose project or flag differs from the
    /// directory's (or from -p ID).
    #[arg(short = 'c', conflicts_with_all = ["clear", "inherit"])]
    check: bool,
    /// With -c: print only the paths, each ended by a NUL byte (for xargs -0).
    #[arg(short = '0', requires = "check")]
    null: bool,
    /// Clear: the project id becomes 0 and the inheritance flag is removed.
    #[arg(short = 'C', conflicts_with_all = ["projid", "inherit"])]
    clear: bool,
    /// With -C: keep the project id, clear the flag only.
    #[arg(short = 'k', requires = "clear")]
    keep: bool,
    /// Recurse into directories.
    #[arg(short = 'r')]
    recursive: bool,
    /// A directory itself, not its entries (listing).
    #[arg(short = 'd', conflicts_with = "recursive")]
    directory: bool,
    #[arg(required = true, value_name = "FILE|DIR")]
    paths: Vec<PathBuf>,
}

/// The largest project id (4294967295 is reserved, as in Lustre).
const PROJID_MAX: u32 = u32::MAX - 1;

pub fn project(a: ProjectArgs) -> anyhow::Result<()> {
    if a.projid.is_some_and(|p| p > PROJID_MAX) {
        bail!("-p: a project id is 0 to {PROJID_MAX}");
    }
    let mut out = std::io::stdout().lock();
    for path in &a.paths {
        if a.check {
            check(&a, path, &mut out)?;
        } else if a.clear {
            let change = ProjectChange { projid: (!a.keep).then_some(0), inherit: Some(false) };
            apply(path, change, a.recursive)?;
        } else if a.projid.is_some() || a.inherit {
            let change = ProjectChange { projid: a.projid, inherit: a.inherit.then_some(true) };
            apply(path, change, a.recursive)?;
        } else if a.directory || !is_dir(path)? {
            print_one(&mut out, path)?;
        } else {
            list_entries(&mut out, path, a.recursive)?;
        }
    }
    Ok(())
}

fn state(path: &Path) -> anyhow::Result<ProjectState> {
    xattr::get_json(path, PROJECT)
}

fn is_dir(path: &Path) -> anyhow::Result<bool> {
    Ok(std::fs::metadata(path).with_context(|| path.display().to_string())?.is_dir())
}

/// The files and directories in `dir`, sorted (symlinks and special files have no project
/// of their own to show or set, as lfs skips them).
fn entries(dir: &Path) -> anyhow::Result<Vec<(PathBuf, bool)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| dir.display().to_string())? {
        let entry = entry.with_context(|| dir.display().to_string())?;
        let kind = entry.file_type().with_context(|| entry.path().display().to_string())?;
        if kind.is_dir() || kind.is_file() {
            found.push((entry.path(), kind.is_dir()));
        }
    }
    found.sort();
    Ok(found)
}

fn print_one(out: &mut impl Write, path: &Path) -> anyhow::Result<()> {
    let s = state(path)?;
    writeln!(out, "{:5} {} {}", s.projid, if s.inherit { 'P' } else { '-' }, path.display())?;
    Ok(())
}

fn list_entries(out: &mut impl Write, dir: &Path, recursive: bool) -> anyhow::Result<()> {
    for (path, sub) in entries(dir)? {
        print_one(out, &path)?;
        if recursive && sub {
            list_entries(out, &path, true)?;
        }
    }
    Ok(())
}

/// Sets `change` on `path` and, with `recursive`, on everything below it; the inheritance
/// flag goes to directories only.
fn apply(path: &Path, change: ProjectChange, recursive: bool) -> anyhow::Result<()> {
    let dir = is_dir(path)?;
    let here = if dir { change } else { ProjectChange { inherit: None, ..change } };
    if here.projid.is_some() || here.inherit.is_some() {
        xattr::set(path, PROJECT, &serde_json::to_vec(&here)?)?;
    }
    if recursive && dir {
        for (entry, _) in entries(path)? {
            apply(&entry, change, true)?;
        }
    }
    Ok(())
}

/// Prints what under `dir` does not carry its project (or `-p`'s) and, for directories,
/// its inheritance flag.
fn check(a: &ProjectArgs, dir: &Path, out: &mut impl Write) -> anyhow::Result<()> {
    if !is_dir(dir)? {
        bail!("{}: -c checks the entries of a directory", dir.display());
    }
    let tree = a.projid.unwrap_or(state(dir)?.projid);
    let mut walk = vec![dir.to_path_buf()];
    while let Some(d) = walk.pop() {
        for (path, sub) in entries(&d)? {
            let s = state(&path)?;
            let mut report = |why: String| -> anyhow::Result<()> {
                if a.null {
                    out.write_all(path.as_os_str().as_encoded_bytes())?;
                    out.write_all(b"\0")?;
                } else {
                    writeln!(out, "{} - {why}", path.display())?;
                }
                Ok(())
            };
            if s.projid != tree {
                report(format!("project identifier is not set (inode={}, tree={tree})", s.projid))?;
            } else if sub && !s.inherit {
                report("project inheritance flag is not set".to_string())?;
            }
            if sub && a.recursive {
                walk.push(path);
            }
        }
    }
    Ok(())
}
