//! The lfs-style commands: setstripe, getstripe, df, path2fid, fid2path. Output keeps
//! Lustre's shape where scripts parse it; `--json` gives the same data for programs.

use crate::size::human;
use crate::xattr;
use anyhow::{anyhow, bail};
use clap::Args;
use std::path::{Path, PathBuf};
use weft_client::virtual_xattr::{self as vx, LayoutAnswer, PathAnswer};
use weft_client::TargetStatfs;
use weft_proto::layout::{comp_flags, ComponentSpec, Layout, LayoutComponent, Pattern, StripeSpec};
use weft_proto::units::parse_size;

/// The layout options of setstripe and migrate: one plain layout, or components (`-E`)
/// each followed by its own options.
#[derive(Args)]
pub struct LayoutOptions {
    /// A component's end (progressive layouts): the options after it, up to the next -E,
    /// describe that component; -1 or EOF for the end of the file.
    #[arg(short = 'E', long = "component-end", allow_negative_numbers = true, value_name = "END", action = clap::ArgAction::Append)]
    ends: Vec<String>,
    /// `mdt`: the component's data on the MDT (data on MDT; the first component only).
    #[arg(short = 'L', long = "layout", value_name = "LAYOUT", action = clap::ArgAction::Append)]
    layout: Vec<String>,
    /// Stripe count: 0 = default, -1 = all OSTs.
    #[arg(short = 'c', long = "stripe-count", allow_negative_numbers = true, value_name = "COUNT", action = clap::ArgAction::Append)]
    count: Vec<i64>,
    /// Stripe size: a multiple of 64 KiB, with K/M/G suffixes; 0 = default (1 MiB).
    #[arg(short = 'S', long = "stripe-size", value_name = "SIZE", action = clap::ArgAction::Append)]
    size: Vec<String>,
    /// OST index of the first stripe: -1 = let the MDS choose.
    #[arg(short = 'i', long = "stripe-index", allow_negative_numbers = true, value_name = "START_OST", action = clap::ArgAction::Append)]
    index: Vec<i64>,
    /// Explicit OST list, e.g. 1,3,5-7.
    #[arg(short = 'o', long = "ost", value_name = "OST_LIST", action = clap::ArgAction::Append)]
    osts: Vec<String>,
    /// Restrict the stripes to this pool.
    #[arg(short = 'p', long = "pool", value_name = "POOL", action = clap::ArgAction::Append)]
    pool: Vec<String>,
}

impl LayoutOptions {
    /// Whether any layout option was given.
    pub fn any(&self) -> bool {
        [self.ends.len(), self.layout.len(), self.count.len(), self.size.len()].iter().any(|n| *n > 0)
            || [self.index.len(), self.osts.len(), self.pool.len()].iter().any(|n| *n > 0)
    }

    /// The spec these options give. With -E, the words after `command` on the command line
    /// are parsed again component by component (the `paths`, which end them, left out).
    pub fn spec(&self, command: &str, paths: &[PathBuf]) -> anyhow::Result<StripeSpec> {
        let spec = if self.ends.is_empty() {
            let once = [self.count.len(), self.size.len(), self.index.len(), self.osts.len(), self.pool.len()];
            if once.iter().any(|n| *n > 1) {
                bail!("each of -c, -S, -i, -o and -p is given once, or once per component after each -E");
            }
            if !self.layout.is_empty() {
                bail!("-L mdt describes a component: give it after its -E, e.g. -E 64K -L mdt -E -1");
            }
            plain_spec(
                self.count.first().copied(),
                self.size.first().map(String::as_str),
                self.index.first().copied(),
                self.osts.first().map(String::as_str),
                self.pool.first().map(String::as_str),
            )?
        } else {
            composite_spec(&words_after(command), paths)?
        };
        spec.validate().map_err(|e| anyhow!("{}", e.message))?;
        Ok(spec)
    }
}

#[derive(Args)]
pub struct SetstripeArgs {
    #[command(flatten)]
    layout: LayoutOptions,
    /// Delete a directory's default layout.
    #[arg(short = 'd', long = "delete")]
    delete: bool,
    /// A directory (sets its default for new files), or a new file to create with the layout.
    path: PathBuf,
}

/// The options of one component (`-E END` and what follows it up to the next `-E`), parsed
/// again group by group: clap takes every option of the command line at once and cannot
/// tell which `-E` an option came after.
#[derive(clap::Parser)]
#[command(no_binary_name = true, disable_help_flag = true)]
struct ComponentArgs {
    #[arg(short = 'E', long = "component-end", allow_negative_numbers = true)]
    end: String,
    #[arg(short = 'L', long = "layout")]
    layout: Option<String>,
    #[command(flatten)]
    striping: PlainArgs,
}

/// One component's striping from its options.
fn plain_spec(
    count: Option<i64>,
    size: Option<&str>,
    index: Option<i64>,
    osts: Option<&str>,
    pool: Option<&str>,
) -> anyhow::Result<StripeSpec> {
    Ok(StripeSpec {
        stripe_count: count.unwrap_or(0),
        stripe_size: match size {
            Some(s) => parse_size(s).map_err(|e| anyhow!("stripe size (-S): {e}"))?,
            None => 0,
        },
        start_ost: index.unwrap_or(-1),
        ost_list: match osts {
            Some(o) => parse_ost_list(o)?,
            None => Vec::new(),
        },
        pool: pool.map(str::to_string),
        ..StripeSpec::unset()
    })
}

/// `-E` as lfs takes it: a size with K/M/G/T suffixes, or -1 / EOF for the end of the file.
fn parse_end(text: &str) -> anyhow::Result<u64> {
    match text {
        "-1" | "EOF" | "eof" => Ok(u64::MAX),
        _ => parse_size(text)
            .map_err(|e| anyhow!("component end (-E) '{text}': {e} (or -1 / EOF for the end of the file)")),
    }
}

/// The components of a composite layout, from the words after the command on the command
/// line (`args`, the paths last).
fn composite_spec(args: &[String], paths: &[PathBuf]) -> anyhow::Result<StripeSpec> {
    let mut words: Vec<&str> = args.iter().map(String::as_str).collect();
    while words.last().is_some_and(|w| paths.iter().any(|p| p.as_path() == Path::new(w))) {
        words.pop();
    }
    let is_end = |w: &str| w == "-E" || w == "--component-end" || w.starts_with("--component-end=");
    let first = words.iter().position(|w| is_end(w)).unwrap_or(words.len());
    if first != 0 {
        bail!("with -E, give each component's options after its -E (found '{}' before the first)", words[0]);
    }
    let mut starts: Vec<usize> = words.iter().enumerate().filter(|(_, w)| is_end(w)).map(|(i, _)| i).collect();
    starts.push(words.len());
    let mut components = Vec::new();
    for (n, pair) in starts.windows(2).enumerate() {
        let group = &words[pair[0]..pair[1]];
        let c = <ComponentArgs as clap::Parser>::try_parse_from(group.iter().copied())
            .map_err(|e| anyhow!("component {} ({}): {}", n + 1, group.join(" "), e.render().to_string().trim()))?;
        let on_mdt = match c.layout.as_deref() {
            None | Some("raid0") => false,
            Some("mdt") => true,
            Some(other) => bail!("layout (-L) '{other}' of component {}: use mdt or raid0", n + 1),
        };
        let stripe = c.striping.spec()?;
        components.push(ComponentSpec { end: parse_end(&c.end)?, on_mdt, stripe });
    }
    Ok(StripeSpec { components, ..StripeSpec::unset() })
}

/// The striping options of one component or one mirror (`-N` and what follows it), parsed
/// again group by group.
#[derive(clap::Parser)]
#[command(no_binary_name = true, disable_help_flag = true)]
struct PlainArgs {
    #[arg(short = 'c', long = "stripe-count", allow_negative_numbers = true)]
    count: Option<i64>,
    #[arg(short = 'S', long = "stripe-size")]
    size: Option<String>,
    #[arg(short = 'i', long = "stripe-index", allow_negative_numbers = true)]
    index: Option<i64>,
    #[arg(short = 'o', long = "ost")]
    osts: Option<String>,
    #[arg(short = 'p', long = "pool")]
    pool: Option<String>,
}

/// The spec of a group of options (one mirror's): components when it has -E, else plain.
pub fn group_spec(words: &[&str]) -> anyhow::Result<StripeSpec> {
    let is_end = |w: &&str| *w == "-E" || *w == "--component-end" || w.starts_with("--component-end=");
    if words.iter().any(is_end) {
        let owned: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        return composite_spec(&owned, &[]);
    }
    let p = <PlainArgs as clap::Parser>::try_parse_from(words.iter().copied())
        .map_err(|e| anyhow!("{}: {}", words.join(" "), e.render().to_string().trim()))?;
    p.spec()
}

impl PlainArgs {
    fn spec(&self) -> anyhow::Result<StripeSpec> {
        plain_spec(self.count, self.size.as_deref(), self.index, self.osts.as_deref(), self.pool.as_deref())
    }
}

/// The words after `command` on this process's command line.
pub fn words_after(command: &str) -> Vec<String> {
    let all: Vec<String> = std::env::args().collect();
    match all.iter().position(|w| w == command) {
        Some(i) => all[i + 1..].to_vec(),
        None => Vec::new(),
    }
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
    let spec = a.layout.spec("setstripe", std::slice::from_ref(&a.path))?;
    apply_layout(&a.path, spec)
}

/// Gives `path` the layout `spec`: a directory its default, a new path a new file made with
/// it, an empty file a new layout.
struct SetstripePath {
    path: PathBuf,
}

pub fn apply_layout(path: &Path, spec: StripeSpec) -> anyhow::Result<()> {
    let a = SetstripePath { path: path.to_path_buf() };
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
        return xattr::set(&parent, &attr, &value).map_err(|e| crate::errors::said_of(e, &a.path));
    }
    if a.path.is_file() && std::fs::metadata(&a.path)?.len() > 0 {
        bail!("{} already has data: a layout can only be set on a new or empty file, or a directory", a.path.display());
    }
    xattr::set(&a.path, vx::LAYOUT, &serde_json::to_vec(&spec)?)
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
    if d.is_composite() && !(a.count || a.size || a.index || a.pool) {
        println!("{}", path.display());
        print_composite(&Layout::planned(&d));
        return;
    }
    // The last component's values stand for a composite default's in the one-value forms.
    let d = d.components.last().map(|c| c.stripe.clone()).unwrap_or(d);
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
    let one_value = a.count || a.size || a.index || a.pool;
    if layout.is_composite() && !one_value {
        println!("{}", path.display());
        print_composite(layout);
        return Ok(());
    }
    // A composite layout's one-value forms give its last instantiated component's (as lfs).
    let c = match layout.components.iter().rev().find(|c| c.is_instantiated()) {
        Some(c) => c,
        None => layout.components.last().ok_or_else(|| anyhow!("{}: a layout without components", path.display()))?,
    };
    let first = c.objects.first().map(|o| o.ost).unwrap_or(0);
    let pattern = if layout.is_released() { "raid0,released" } else { "raid0" };
    if one_value {
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

/// A composite layout as lfs getstripe prints one (the same with -y: the form is YAML).
fn print_composite(layout: &Layout) {
    let mirrors: std::collections::BTreeSet<u16> = layout.components.iter().map(|c| c.mirror_id).collect();
    println!("  lcm_layout_gen:    {}", layout.generation);
    if layout.sync_mirrors() {
        // Weft's own: the mirrors are written synchronously (mirror create --sync).
        println!("  lcm_flags:         sync");
    }
    println!("  lcm_mirror_count:  {}", mirrors.len().max(1));
    println!("  lcm_entry_count:   {}", layout.components.len());
    for c in &layout.components {
        print_component(c);
    }
}

fn print_component(c: &LayoutComponent) {
    let end = if c.extent_end == u64::MAX { "EOF".to_string() } else { c.extent_end.to_string() };
    println!("    lcme_id:             {}", c.id);
    println!("    lcme_mirror_id:      {}", c.mirror_id);
    println!("    lcme_flags:          {}", comp_flags::show(c.flags));
    println!("    lcme_extent.e_start: {}", c.extent_start);
    println!("    lcme_extent.e_end:   {end}");
    let (pattern, offset) = match c.pattern {
        Pattern::Mdt => ("mdt", 0),
        Pattern::Released { .. } => ("raid0,released", -1),
        Pattern::Raid0 => ("raid0", c.objects.first().map_or(c.want.start_ost, |o| i64::from(o.ost))),
    };
    println!("      lmm_stripe_count:  {}", c.stripe_count_shown());
    println!("      lmm_stripe_size:   {}", c.stripe_size);
    println!("      lmm_pattern:       {pattern}");
    println!("      lmm_layout_gen:    0");
    println!("      lmm_stripe_offset: {offset}");
    if let Some(p) = &c.pool {
        println!("      lmm_pool:          {p}");
    }
    if c.is_instantiated() && c.pattern == Pattern::Raid0 {
        println!("      lmm_objects:");
        for (k, o) in c.objects.iter().enumerate() {
            println!("      - {k}: {{ l_ost_idx: {}, l_fid: {} }}", o.ost, o.fid);
        }
    }
    println!();
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
        let targets = df_rows(m)?;
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

/// Every target's row of `weft df` from the mount at `mount`, a page at a time (`weft.df:FROM`).
pub(crate) fn df_rows(mount: &Path) -> anyhow::Result<Vec<TargetStatfs>> {
    let mut rows = Vec::new();
    loop {
        let page: Vec<TargetStatfs> = xattr::get_json(mount, &format!("{}{}", vx::DF_PAGE, rows.len()))?;
        let last = page.len() < vx::DF_PAGE_ROWS;
        rows.extend(page);
        if last {
            return Ok(rows);
        }
    }
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
        // Lustre's state letters after the row: N, no new objects (drained on an MDS).
        let on = format!("{}[{kind}:{}]{}", mount.display(), t.index, if t.no_create { " N" } else { "" });
        if !t.active {
            // Lustre's line for a device deactivated on this client.
            let short = t.name.rsplit_once('-').map_or(t.name.as_str(), |(_, s)| s);
            println!("{short:<20}: inactive device");
            continue;
        }
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
