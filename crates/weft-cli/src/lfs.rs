//! The lfs-style commands: setstripe, getstripe, df, path2fid, fid2path. Output keeps
//! Lustre's shape where scripts parse it; `--json` gives the same data for programs.

use crate::size::human;
use crate::xattr;
use anyhow::{anyhow, bail};
use clap::Args;
use std::path::{Path, PathBuf};
use weft_client::virtual_xattr::{self as vx, LayoutAnswer, PathAnswer};
use weft_client::TargetStatfs;
use weft_proto::layout::StripeSpec;
use weft_proto::units::parse_size;

#[derive(Args)]
pub struct SetstripeArgs {
    /// Stripe count: 0 = default, -1 = all OSTs.
    #[arg(short = 'c', long = "stripe-count", allow_negative_numbers = true, value_name = "COUNT")]
    count: Option<i64>,
    /// Stripe size: a multiple of 64 KiB, with K/M/G suffixes; 0 = default (1 MiB).
    #[arg(short = 'S', long = "stripe-size", value_name = "SIZE")]
    size: Option<String>,
    /// OST index of the first stripe: -1 = let the MDS choose.
    #[arg(short = 'i', long = "stripe-index", allow_negative_numbers = true, value_name = "START_OST")]
    index: Option<i64>,
    /// Explicit OST list, e.g. 1,3,5-7.
    #[arg(short = 'o', long = "ost", value_name = "OST_LIST")]
    osts: Option<String>,
    /// Restrict the stripes to this pool.
    #[arg(short = 'p', long = "pool", value_name = "POOL")]
    pool: Option<String>,
    /// Delete a directory's default layout.
    #[arg(short = 'd', long = "delete")]
    delete: bool,
    /// A directory (sets its default for new files), or a new file to create with the layout.
    path: PathBuf,
}

#[derive(Args)]
pub struct GetstripeArgs {
    /// Only the stripe count.
    #[arg(short = 'c', long = "stripe-count")]
    count: bool,
    /// Only the stripe size.
    #[arg(short = 'S', long = "stripe-size")]
    size: bool,
    /// Only the index of the first stripe's OST.
    #[arg(short = 'i', long = "stripe-index")]
    index: bool,
    /// Only the pool.
    #[arg(short = 'p', long = "pool")]
    pool: bool,
    /// For a directory, its default layout only, not its files'.
    #[arg(short = 'd', long = "directory")]
    directory: bool,
    /// YAML, as lfs getstripe -y.
    #[arg(short = 'y', long = "yaml")]
    yaml: bool,
    /// JSON for programs.
    #[arg(long)]
    json: bool,
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

#[derive(Args)]
#[command(disable_help_flag = true)]
pub struct DfArgs {
    /// Inodes instead of space.
    #[arg(short = 'i', long)]
    inodes: bool,
    /// Human-readable sizes (-h as in lfs df; help is --help only here).
    #[arg(short = 'h', long = "human-readable")]
    human: bool,
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// JSON for programs.
    #[arg(long)]
    json: bool,
    /// A path in a Weft mount; without it, every Weft mount.
    path: Option<PathBuf>,
}

#[derive(Args)]
pub struct Path2fidArgs {
    /// JSON for programs.
    #[arg(long)]
    json: bool,
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

#[derive(Args)]
pub struct Fid2pathArgs {
    /// JSON for programs.
    #[arg(long)]
    json: bool,
    /// The mount point.
    mount: PathBuf,
    /// FIDs as [0x200000400:0x2:0x0].
    #[arg(required = true)]
    fids: Vec<String>,
}

/// `1,3,5-7` as lfs -o takes it.
pub fn parse_ost_list(text: &str) -> anyhow::Result<Vec<u32>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let bad = || anyhow!("OST list (-o) '{text}': '{part}' is not an index or a range like 5-7");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        bail!("OST list (-o) is empty");
    }
    Ok(out)
}

pub fn setstripe(a: SetstripeArgs) -> anyhow::Result<()> {
    if a.delete {
        if !a.path.is_dir() {
            bail!("setstripe -d takes a directory; {} is not one", a.path.display());
        }
        return xattr::set(&a.path, vx::LAYOUT_DELETE, b"1");
    }
    let spec = StripeSpec {
        stripe_count: a.count.unwrap_or(0),
        stripe_size: match &a.size {
            Some(s) => parse_size(s).map_err(|e| anyhow!("stripe size (-S): {e}"))?,
            None => 0,
        },
        start_ost: a.index.unwrap_or(-1),
        ost_list: match &a.osts {
            Some(o) => parse_ost_list(o)?,
            None => Vec::new(),
        },
        pool: a.pool.clone(),
    };
    spec.validate().map_err(|e| anyhow!("{}", e.message))?;
    if a.path.symlink_metadata().is_err() {
        // As lfs: the new file is created with its layout in one step, through its directory.
        let parent = match a.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = a.path.file_name().ok_or_else(|| anyhow!("{} names no file", a.path.display()))?;
        let mode = 0o666 & !current_umask();
        let value = serde_json::to_vec(&vx::CreateWithLayout { spec, mode })?;
        let attr = format!("{}{}", vx::CREATE_PREFIX, name.to_string_lossy());
        return xattr::set(&parent, &attr, &value).map_err(|e| anyhow!("cannot create {}: {e}", a.path.display()));
    }
    if a.path.is_file() && std::fs::metadata(&a.path)?.len() > 0 {
        bail!("{} already has data: a layout can only be set on a new or empty file, or a directory", a.path.display());
    }
    xattr::set(&a.path, vx::LAYOUT, &serde_json::to_vec(&spec)?).map_err(|e| {
        let busy = e.downcast_ref::<std::io::Error>().and_then(|io| io.raw_os_error()) == Some(libc::EBUSY);
        if busy {
            anyhow!(
                "{}: the file may already hold data, so its layout stays (set layouts on new files or directories)",
                a.path.display()
            )
        } else {
            e
        }
    })
}

fn layout_of(path: &Path) -> anyhow::Result<LayoutAnswer> {
    xattr::get_json(path, vx::LAYOUT)
}

pub fn getstripe(a: GetstripeArgs) -> anyhow::Result<()> {
    let mut json_out = Vec::new();
    for path in &a.paths {
        let info = layout_of(path)?;
        let is_dir = path.is_dir();
        if a.json {
            json_out.push(
                serde_json::json!({"path": path, "fid": info.fid, "layout": info.layout, "default": info.default}),
            );
            continue;
        }
        if is_dir {
            print_dir_default(path, &info, &a);
            if !a.directory {
                let mut entries: Vec<PathBuf> =
                    std::fs::read_dir(path)?.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_file()).collect();
                entries.sort();
                for f in entries {
                    let i = layout_of(&f)?;
                    print_file_layout(&f, &i, &a)?;
                }
            }
        } else {
            print_file_layout(path, &info, &a)?;
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&json_out)?);
    }
    Ok(())
}

fn print_dir_default(path: &Path, info: &LayoutAnswer, a: &GetstripeArgs) {
    let d = info.default.clone().unwrap_or_else(StripeSpec::unset);
    if a.count || a.size || a.index || a.pool {
        if a.count {
            println!("{}", d.stripe_count);
        }
        if a.size {
            println!("{}", d.effective_stripe_size());
        }
        if a.index {
            println!("{}", d.start_ost);
        }
        if a.pool {
            println!("{}", d.pool.clone().unwrap_or_default());
        }
        return;
    }
    println!("{}", path.display());
    if info.default.is_none() {
        println!("stripe_count:  0 stripe_size:   0 pattern:       raid0 stripe_offset: -1 (no default: the file system's applies)");
    } else {
        print!(
            "stripe_count:  {} stripe_size:   {} pattern:       raid0 stripe_offset: {}",
            d.stripe_count,
            d.effective_stripe_size(),
            d.start_ost
        );
        if let Some(p) = &d.pool {
            print!(" pool:          {p}");
        }
        println!();
    }
    println!();
}

fn print_file_layout(path: &Path, info: &LayoutAnswer, a: &GetstripeArgs) -> anyhow::Result<()> {
    let Some(layout) = &info.layout else {
        println!("{} has no stripe info", path.display());
        return Ok(());
    };
    let c = layout.single().map_err(|e| anyhow!("{}: {}", path.display(), e.message))?;
    let first = c.objects.first().map(|o| o.ost).unwrap_or(0);
    let pattern = if layout.is_released() { "raid0,released" } else { "raid0" };
    if a.count || a.size || a.index || a.pool {
        if a.count {
            println!("{}", c.stripe_count_shown());
        }
        if a.size {
            println!("{}", c.stripe_size);
        }
        if a.index {
            println!("{first}");
        }
        if a.pool {
            println!("{}", c.pool.clone().unwrap_or_default());
        }
        return Ok(());
    }
    // The header is the same in both shapes, as lfs prints it.
    println!("{}", path.display());
    println!("lmm_stripe_count:  {}", c.stripe_count_shown());
    println!("lmm_stripe_size:   {}", c.stripe_size);
    println!("lmm_pattern:       {pattern}");
    println!("lmm_layout_gen:    {}", layout.generation);
    println!("lmm_stripe_offset: {first}");
    if let Some(p) = &c.pool {
        println!("lmm_pool:          {p}");
    }
    if a.yaml {
        println!("lmm_objects:");
        for o in &c.objects {
            println!("      - l_ost_idx: {}", o.ost);
            println!("        l_fid:     {}", o.fid);
        }
        println!();
        return Ok(());
    }
    println!("\tobdidx\t\t objid\t\t objid\t\t group");
    for o in &c.objects {
        println!("\t{:6}\t{:14}\t{:#14x}\t{:#14x}", o.ost, o.fid.oid, o.fid.oid, o.fid.seq);
    }
    println!();
    Ok(())
}

pub fn df(a: DfArgs) -> anyhow::Result<()> {
    let mounts = match &a.path {
        Some(p) => vec![p.clone()],
        None => crate::daemon::weft_mounts(),
    };
    if mounts.is_empty() {
        bail!("no Weft file system is mounted; give a path in one");
    }
    let mut all = Vec::new();
    for m in &mounts {
        let targets: Vec<TargetStatfs> = xattr::get_json(m, vx::DF)?;
        if a.json {
            all.push(serde_json::json!({"mount": m, "targets": targets}));
            continue;
        }
        print_df(m, &targets, &a);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&all)?);
    }
    Ok(())
}

fn print_df(mount: &Path, targets: &[TargetStatfs], a: &DfArgs) {
    let num = |kib: u64| if a.human { human(kib * 1024) } else { kib.to_string() };
    if a.inodes {
        println!("{:<20} {:>12} {:>12} {:>12} {:>5} Mounted on", "UUID", "Inodes", "IUsed", "IFree", "IUse%");
    } else {
        let unit = if a.human { "bytes" } else { "1K-blocks" };
        println!("{:<20} {:>12} {:>12} {:>12} {:>5} Mounted on", "UUID", unit, "Used", "Available", "Use%");
    }
    let (mut total, mut used, mut avail, mut files, mut ffree) = (0u64, 0u64, 0u64, 0u64, 0u64);
    for t in targets {
        let kind = match t.kind {
            weft_proto::msg::TargetKind::Mdt => "MDT",
            weft_proto::msg::TargetKind::Ost => "OST",
        };
        let name = format!("{}_UUID", t.name);
        let on = format!("{}[{kind}:{}]", mount.display(), t.index);
        let Some(s) = &t.statfs else {
            println!(
                "{name:<20} {:>12} {:>12} {:>12} {:>5} {on} ({})",
                "-",
                "-",
                "-",
                "-",
                t.error.as_deref().unwrap_or("unavailable")
            );
            continue;
        };
        if a.inodes {
            let iused = s.files.saturating_sub(s.ffree);
            println!("{name:<20} {:>12} {:>12} {:>12} {:>4}% {on}", s.files, iused, s.ffree, percent(iused, s.files));
            if kind == "MDT" {
                files += s.files;
                ffree += s.ffree;
            }
        } else {
            let k = s.bsize as u64 / 1024;
            let (tb, fb, ab) = (s.blocks * k, s.bfree * k, s.bavail * k);
            let u = tb.saturating_sub(fb);
            println!("{name:<20} {:>12} {:>12} {:>12} {:>4}% {on}", num(tb), num(u), num(ab), percent(u, u + ab));
            if kind == "OST" {
                total += tb;
                used += u;
                avail += ab;
            }
        }
    }
    println!();
    if a.inodes {
        let iused = files.saturating_sub(ffree);
        println!(
            "{:<20} {:>12} {:>12} {:>12} {:>4}% {}",
            "filesystem_summary:",
            files,
            iused,
            ffree,
            percent(iused, files),
            mount.display()
        );
    } else {
        println!(
            "{:<20} {:>12} {:>12} {:>12} {:>4}% {}",
            "filesystem_summary:",
            num(total),
            num(used),
            num(avail),
            percent(used, used + avail),
            mount.display()
        );
    }
    println!();
}

fn percent(part: u64, whole: u64) -> u64 {
    if whole == 0 {
        0
    } else {
        (part * 100).div_ceil(whole)
    }
}

pub fn path2fid(a: Path2fidArgs) -> anyhow::Result<()> {
    let mut out = Vec::new();
    for p in &a.paths {
        let fid = String::from_utf8(xattr::get(p, vx::FID)?)?;
        match (a.json, a.paths.len() > 1) {
            (true, _) => out.push(serde_json::json!({"path": p, "fid": fid})),
            (false, true) => println!("{}: {fid}", p.display()),
            (false, false) => println!("{fid}"),
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    }
    Ok(())
}

pub fn fid2path(a: Fid2pathArgs) -> anyhow::Result<()> {
    let mut out = Vec::new();
    for f in &a.fids {
        let fid: weft_proto::Fid = f.parse().map_err(|e: String| anyhow!(e))?;
        let ans: PathAnswer =
            xattr::get_json(&a.mount, &format!("{}{fid}", vx::FID2PATH_PREFIX)).map_err(|e| anyhow!("{fid}: {e}"))?;
        let path = a.mount.join(ans.path);
        if a.json {
            out.push(serde_json::json!({"fid": fid.to_string(), "path": path}));
        } else {
            println!("{}", path.display());
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    }
    Ok(())
}

fn current_umask() -> u32 {
    // SAFETY: umask(2) cannot fail; it is set back at once to what it was.
    unsafe {
        let old = libc::umask(0o022);
        libc::umask(old);
        old as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ost_lists() {
        assert_eq!(parse_ost_list("1,3,5-7").unwrap(), vec![1, 3, 5, 6, 7]);
        assert!(parse_ost_list("7-5").is_err());
        assert!(parse_ost_list("x").unwrap_err().to_string().contains("-o"));
    }
}
