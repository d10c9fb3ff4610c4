//! Directories over several MDTs, in lfs's words: `mkdir`/`setdirstripe` (a directory on
//! another MDT, or striped over several; `-D` a directory's default for its new
//! subdirectories), `getdirstripe` (Lustre's output shape), `mdts`.

use crate::xattr;
use anyhow::{anyhow, bail};
use clap::Args;
use std::path::{Path, PathBuf};
use weft_client::virtual_xattr::{self as vx, DirDefault, MkdirPlaced};
use weft_proto::dirstripe::{DirHash, DirStripeSpec};
use weft_proto::msg::update::DirStripeInfo;

#[derive(Args)]
pub struct SetdirstripeArgs {
    /// The MDTs the directory's names spread over (its stripes); 1 or 0: a plain directory.
    #[arg(short = 'c', short_alias = 'T', long = "mdt-count", value_name = "COUNT")]
    count: Option<u32>,
    /// The MDT of the directory (its first stripe); -1: chosen by Weft (round robin).
    #[arg(short = 'i', long = "mdt-index", allow_negative_numbers = true, value_name = "MDT")]
    index: Option<i64>,
    /// How names spread over the stripes: fnv_1a_64 (the default) or crush.
    #[arg(short = 'H', long = "mdt-hash", value_name = "HASH")]
    hash: Option<String>,
    /// Set the default for new subdirectories of an existing DIR instead of making DIR.
    #[arg(short = 'D', long = "default")]
    default: bool,
    /// With -D: remove the default.
    #[arg(short = 'd', long = "delete")]
    delete: bool,
    /// The new directory's permission bits (octal), before the umask; default 0777.
    #[arg(short = 'o', long = "mode", value_name = "MODE")]
    mode: Option<String>,
    /// The directory.
    dir: PathBuf,
}

impl SetdirstripeArgs {
    fn spec(&self) -> anyhow::Result<DirStripeSpec> {
        let hash = match &self.hash {
            Some(h) => DirHash::parse(h).map_err(|e| anyhow!("-H/--mdt-hash: {e}"))?,
            None => DirHash::default(),
        };
        let index = match self.index {
            None | Some(-1) => None,
            Some(i) if (0..i64::from(weft_proto::fid::MDT_COUNT_MAX)).contains(&i) => Some(i as u32),
            Some(i) => bail!(
                "-i/--mdt-index {i}: expected an MDT index from 0 to {} or -1",
                weft_proto::fid::MDT_COUNT_MAX - 1
            ),
        };
        let count = self.count.unwrap_or(1);
        if count > weft_proto::fid::MDT_COUNT_MAX {
            bail!("-c/--mdt-count {count}: at most {} MDTs", weft_proto::fid::MDT_COUNT_MAX);
        }
        Ok(DirStripeSpec { count, index, hash })
    }
}

/// `weft mkdir` / `weft setdirstripe`.
pub fn setdirstripe(a: SetdirstripeArgs) -> anyhow::Result<()> {
    if a.delete && !a.default {
        bail!("-d/--delete removes a default: give it with -D");
    }
    if a.default {
        if !a.dir.is_dir() {
            bail!("setdirstripe -D takes an existing directory; {} is not one", a.dir.display());
        }
        let default = if a.delete { None } else { Some(a.spec()?) };
        return xattr::set(&a.dir, vx::DIRSTRIPE, &serde_json::to_vec(&DirDefault { default })?);
    }
    let mode = match &a.mode {
        Some(m) => u32::from_str_radix(m.trim_start_matches("0o"), 8)
            .ok()
            .filter(|m| *m <= 0o7777)
            .ok_or_else(|| anyhow!("-o/--mode {m}: expected octal permission bits such as 0755"))?,
        None => 0o777,
    };
    let parent = match a.dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = a.dir.file_name().ok_or_else(|| anyhow!("{} names no directory", a.dir.display()))?;
    let value = serde_json::to_vec(&MkdirPlaced { spec: a.spec()?, mode })?;
    let attr = format!("{}{}", vx::MKDIR_PREFIX, name.to_string_lossy());
    xattr::set(&parent, &attr, &value).map_err(|e| crate::errors::said_of(e, &a.dir))
}

#[derive(Args)]
pub struct GetdirstripeArgs {
    /// The default for new subdirectories instead of the directory's own placement.
    #[arg(short = 'D', long = "default")]
    default: bool,
    /// The stripe count only.
    #[arg(short = 'c', long = "mdt-count")]
    count: bool,
    /// The MDT index only.
    #[arg(short = 'i', long = "mdt-index")]
    index: bool,
    /// The hash type only.
    #[arg(short = 'H', long = "mdt-hash")]
    hash: bool,
    /// As YAML.
    #[arg(short = 'y', long = "yaml")]
    yaml: bool,
    /// As JSON.
    #[arg(long)]
    json: bool,
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
}

pub fn getdirstripe(a: GetdirstripeArgs) -> anyhow::Result<()> {
    let mut all = Vec::new();
    for dir in &a.dirs {
        let info: DirStripeInfo = xattr::get_json(dir, vx::DIRSTRIPE)?;
        if a.json {
            all.push(serde_json::json!({"path": dir, "placement": info}));
            continue;
        }
        if a.dirs.len() > 1 {
            println!("{}", dir.display());
        }
        print!("{}", render(&info, &a));
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&all)?);
    }
    Ok(())
}

/// Lustre's `lfs getdirstripe` text for one directory.
fn render(info: &DirStripeInfo, a: &GetdirstripeArgs) -> String {
    let mut out = String::new();
    if a.default {
        let Some(d) = &info.default else {
            // Lustre prints nothing for a directory without a default.
            return out;
        };
        let offset = d.index.map_or(-1, i64::from);
        let only = only_field(a, d.count, offset, d.hash.name());
        if let Some(line) = only {
            return line;
        }
        out.push_str(&format!(
            "lmv_stripe_count: {} lmv_stripe_offset: {offset} lmv_hash_type: {} lmv_max_inherit: -1 lmv_max_inherit_rr: 0\n",
            d.count,
            d.hash.name()
        ));
        return out;
    }
    let (count, hash) = match &info.stripes {
        Some(s) => (s.fids.len() as u32, s.hash.name()),
        None => (0, "none"),
    };
    if let Some(line) = only_field(a, count, i64::from(info.mdt), hash) {
        return line;
    }
    if a.yaml {
        out.push_str(&format!("lmv_stripe_count: {count}\nlmv_stripe_offset: {}\nlmv_hash_type: {hash}\n", info.mdt));
        if let Some(s) = &info.stripes {
            out.push_str("lmv_objects:\n");
            for fid in &s.fids {
                out.push_str(&format!("      - l_mdt_idx: {}\n        l_fid:     {fid}\n", fid.mdt_index()));
            }
        }
        return out;
    }
    out.push_str(&format!("lmv_stripe_count: {count} lmv_stripe_offset: {} lmv_hash_type: {hash}\n", info.mdt));
    if let Some(s) = &info.stripes {
        out.push_str("mdtidx\t\t FID[seq:oid:ver]\n");
        for fid in &s.fids {
            out.push_str(&format!("{:6}\t\t {fid}\t\t\n", fid.mdt_index()));
        }
    }
    out
}

fn only_field(a: &GetdirstripeArgs, count: u32, offset: i64, hash: &str) -> Option<String> {
    match (a.count, a.index, a.hash) {
        (true, _, _) => Some(format!("{count}\n")),
        (_, true, _) => Some(format!("{offset}\n")),
        (_, _, true) => Some(format!("{hash}\n")),
        _ => None,
    }
}

#[derive(Args)]
pub struct MdtsArgs {
    /// A path in the file system (default: every Weft mount).
    path: Option<PathBuf>,
}

/// `weft mdts`: `MDTS:` and one `INDEX: NAME_UUID STATE` line per MDT, as `lfs mdts`.
pub fn mdts(a: MdtsArgs) -> anyhow::Result<()> {
    let mounts = match &a.path {
        Some(p) => vec![p.clone()],
        None => crate::daemon::weft_mounts(),
    };
    if mounts.is_empty() {
        bail!("no Weft file system is mounted; give a path in one");
    }
    for m in &mounts {
        print!("{}", mdts_of(m)?);
    }
    Ok(())
}

fn mdts_of(mount: &Path) -> anyhow::Result<String> {
    let map: weft_proto::msg::ClusterMap = xattr::get_json(mount, vx::MAP)?;
    let mut out = String::from("MDTS:\n");
    for t in map.mdts() {
        let state = if t.state == weft_proto::msg::TargetState::Up { "ACTIVE" } else { "INACTIVE" };
        out.push_str(&format!("{}: {}_UUID {state}\n", t.index, t.name(&map.fsname)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use weft_proto::dirstripe::DirStripes;
    use weft_proto::Fid;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        get: GetdirstripeArgs,
    }

    #[test]
    fn getdirstripe_prints_lustres_shape() {
        let a = Cli::parse_from(["x", "d"]).get;
        let plain = DirStripeInfo { mdt: 1, stripes: None, default: None };
        assert_eq!(render(&plain, &a), "lmv_stripe_count: 0 lmv_stripe_offset: 1 lmv_hash_type: none\n");
        let m = Fid::new(0x200000400, 2, 0);
        let s = Fid::new(0x200000400 + weft_proto::fid::SEQ_PER_MDT, 2, 0);
        let striped = DirStripeInfo {
            mdt: 0,
            stripes: Some(DirStripes { hash: DirHash::Crush, fids: vec![m, s] }),
            default: None,
        };
        assert_eq!(
            render(&striped, &a),
            "lmv_stripe_count: 2 lmv_stripe_offset: 0 lmv_hash_type: crush\n\
             mdtidx\t\t FID[seq:oid:ver]\n     0\t\t [0x200000400:0x2:0x0]\t\t\n     1\t\t [0x200100400:0x2:0x0]\t\t\n"
        );
        let d = Cli::parse_from(["x", "-D", "d"]).get;
        let with_default = DirStripeInfo {
            mdt: 0,
            stripes: None,
            default: Some(DirStripeSpec { count: 2, index: None, hash: DirHash::Fnv1a64 }),
        };
        assert_eq!(
            render(&with_default, &d),
            "lmv_stripe_count: 2 lmv_stripe_offset: -1 lmv_hash_type: fnv_1a_64 lmv_max_inherit: -1 lmv_max_inherit_rr: 0\n"
        );
        assert_eq!(render(&plain, &d), "");
        assert_eq!(render(&striped, &Cli::parse_from(["x", "-c", "d"]).get), "2\n");
    }
}
