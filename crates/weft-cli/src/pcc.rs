//! `weft pcc`: a mount's persistent client caches (Lustre's `lctl pcc add|del|list` and
//! `lfs pcc attach|detach|state`), through the virtual attributes `weft.pcc.*` of the
//! mount's root and of each file.

use crate::xattr;
use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use weft_fuse::pcc::{AddRequest, AttachRequest, CacheInfo, DelRequest, DetachRequest, FileState, Kind};

#[derive(Args)]
pub struct PccArgs {
    #[command(subcommand)]
    command: PccCommand,
}

#[derive(Subcommand)]
enum PccCommand {
    /// Add a cache directory to a mount (root): `--param "RULE KEY=VALUE..."` as lctl pcc
    /// add takes it, e.g. "fname={*.h5} roid=1 pccro=1" or "uid={1000} rwid=2 pccrw=1",
    /// with Weft's quota=SIZE and evict=lru|size.
    Add {
        mountpoint: PathBuf,
        cache: PathBuf,
        #[arg(short, long)]
        param: String,
    },
    /// Remove a cache from a mount (root): its read-write files go back to the servers
    /// first (with -k they stay in the directory, released, for a later add).
    Del {
        #[arg(short, long)]
        keep: bool,
        mountpoint: PathBuf,
        cache: PathBuf,
    },
    /// A mount's caches, as lctl pcc list prints them (YAML), with what each holds.
    List {
        mountpoint: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Put files into a cache of their mount: read-only (-r, the default) or read-write
    /// (-w: the file is released on the servers, its data kept here until another client
    /// wants it).
    Attach {
        #[arg(short = 'r', long = "readonly", conflicts_with = "write")]
        readonly: bool,
        #[arg(short = 'w', long = "write")]
        write: bool,
        /// The cache's id (roid or rwid); default: the first cache of the kind.
        #[arg(short, long, default_value_t = 0)]
        id: u32,
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Take files out of the cache (read-write files' data goes back to the servers).
    Detach {
        #[arg(short, long)]
        keep: bool,
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Each file's cache state: `file: PATH, type: readwrite, PCC_file: COPY, open_count: N,
    /// flags: F`, or `type: none`.
    State {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[arg(long)]
        json: bool,
    },
}

fn json(value: &impl serde::Serialize) -> anyhow::Result<Vec<u8>> {
    Ok(serde_json::to_vec(value)?)
}

/// Runs `each` on every file, reporting failures (a refusal names the file itself);
/// fails if any did.
fn every(files: &[PathBuf], each: impl Fn(&Path) -> anyhow::Result<()>) -> anyhow::Result<()> {
    let mut failed = 0;
    for f in files {
        if let Err(e) = each(f) {
            let e = if e.is::<crate::errors::Refused>() { e } else { e.context(f.display().to_string()) };
            crate::errors::report(&e);
            failed += 1;
        }
    }
    if failed > 0 {
        bail!("{failed} of {} files failed", files.len());
    }
    Ok(())
}

/// `lctl pcc list`'s YAML, with Weft's fields after Lustre's.
fn list_yaml(caches: &[CacheInfo]) -> String {
    let mut out = String::from("pcc:\n");
    for c in caches {
        out.push_str(&format!(
            "  - pccpath: {}\n    rwid: {}\n    roid: {}\n    flags: {:#x}\n    autocache: {}\n    quota: {}\n    \
             evict: {}\n    used: {}\n    files: {}\n",
            c.pccpath,
            c.rwid,
            c.roid,
            c.flags,
            c.autocache,
            c.quota_bytes,
            format!("{:?}", c.evict).to_lowercase(),
            c.used_bytes,
            c.files
        ));
    }
    out
}

/// `lfs pcc state`'s line.
fn state_line(path: &Path, s: &FileState) -> String {
    if s.kind == "none" {
        return format!("file: {}, type: none", path.display());
    }
    format!(
        "file: {}, type: {}, PCC_file: {}, open_count: {}, flags: {:x}",
        path.display(),
        s.kind,
        s.pcc_file,
        s.open_count,
        s.flags
    )
}

pub fn pcc(a: PccArgs) -> anyhow::Result<()> {
    match a.command {
        PccCommand::Add { mountpoint, cache, param } => {
            let dir = std::path::absolute(&cache).with_context(|| cache.display().to_string())?;
            let req = AddRequest { dir: dir.display().to_string(), param };
            xattr::set(&mountpoint, "weft.pcc.add", &json(&req)?)
        }
        PccCommand::Del { keep, mountpoint, cache } => {
            let dir = std::path::absolute(&cache).with_context(|| cache.display().to_string())?;
            xattr::set(&mountpoint, "weft.pcc.del", &json(&DelRequest { dir: dir.display().to_string(), keep })?)
        }
        PccCommand::List { mountpoint, json } => {
            let caches: Vec<CacheInfo> = xattr::get_json(&mountpoint, "weft.pcc.list")?;
            if json {
                println!("{}", serde_json::to_string_pretty(&caches)?);
            } else {
                print!("{}", list_yaml(&caches));
            }
            Ok(())
        }
        PccCommand::Attach { readonly: _, write, id, files } => {
            let kind = if write { Kind::Readwrite } else { Kind::Readonly };
            let value = json(&AttachRequest { kind: Some(kind), id })?;
            every(&files, |f| xattr::set(f, "weft.pcc.attach", &value))
        }
        PccCommand::Detach { keep, files } => {
            let value = json(&DetachRequest { keep })?;
            every(&files, |f| xattr::set(f, "weft.pcc.detach", &value))
        }
        PccCommand::State { files, json } => every(&files, |f| {
            let s: FileState = xattr::get_json(f, "weft.pcc.state")?;
            if json {
                println!("{}", serde_json::to_string(&serde_json::json!({"file": f, "state": s}))?);
            } else {
                println!("{}", state_line(f, &s));
            }
            Ok(())
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_and_list_print_in_lustres_shapes() {
        let none = FileState { kind: "none".into(), id: 0, pcc_file: String::new(), open_count: 0, flags: 0 };
        assert_eq!(state_line(Path::new("/mnt/f"), &none), "file: /mnt/f, type: none");
        let rw = FileState {
            kind: "readwrite".into(),
            id: 2,
            pcc_file: "/pcc/rw/0x1:0x2:0x0".into(),
            open_count: 1,
            flags: 0,
        };
        assert_eq!(
            state_line(Path::new("/mnt/f"), &rw),
            "file: /mnt/f, type: readwrite, PCC_file: /pcc/rw/0x1:0x2:0x0, open_count: 1, flags: 0"
        );
        let c = CacheInfo {
            pccpath: "/pcc".into(),
            param: "fname={*.h5} roid=1".into(),
            rwid: 0,
            roid: 1,
            flags: 0x2e,
            autocache: "fname={*.h5}".into(),
            quota_bytes: 1 << 30,
            evict: weft_proto::pcc::Evict::Lru,
            used_bytes: 5,
            files: 1,
        };
        let y = list_yaml(&[c]);
        assert!(
            y.starts_with(
                "pcc:\n  - pccpath: /pcc\n    rwid: 0\n    roid: 1\n    flags: 0x2e\n    autocache: fname={*.h5}\n"
            ),
            "{y}"
        );
        assert!(y.contains("    evict: lru\n"), "{y}");
    }
}
