//! `weft find`: find(1) over a Weft tree with Lustre's layout predicates (`lfs find`), decided
//! from metadata: the MDS's attributes and layouts, no file's data read. Prints one path a
//! line (or NUL-terminated with --print0), ready for `weft migrate`.

use crate::xattr;
use anyhow::{anyhow, bail};
use clap::Args;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use weft_client::virtual_xattr::{self as vx, LayoutAnswer};
use weft_proto::layout::{Layout, Pattern};
use weft_proto::units::parse_size;

#[derive(Args)]
pub struct FindArgs {
    /// Where to look (directories are walked, symlinks not followed).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Files with an object on any of these OSTs: indices (3 or 0,2-3) or names, as Lustre's
    /// `--ost FS-OSTxxxx_UUID` (weft-OST0003, weft-OST0003_UUID).
    #[arg(short = 'O', long = "ost", value_name = "OST_LIST")]
    ost: Option<String>,
    /// Files with a component in this pool.
    #[arg(long, value_name = "POOL")]
    pool: Option<String>,
    /// Stripe count of a component: N, +N (more), -N (fewer).
    #[arg(short = 'c', long = "stripe-count", allow_hyphen_values = true, value_name = "[+-]N")]
    stripe_count: Option<String>,
    /// Stripe size of a component: [+-]N[KMG].
    #[arg(short = 'S', long = "stripe-size", allow_hyphen_values = true, value_name = "[+-]SIZE")]
    stripe_size: Option<String>,
    /// Size: [+-]N[KMGT] bytes.
    #[arg(short = 's', long = "size", allow_hyphen_values = true, value_name = "[+-]SIZE")]
    size: Option<String>,
    /// Last change of the data: [+-]N[smhdw] ago (days without a unit; +: longer ago).
    #[arg(short = 'M', long = "mtime", allow_hyphen_values = true, value_name = "[+-]AGE")]
    mtime: Option<String>,
    /// Layout: raid0, mdt (data on the MDT), released; a comma list matches any.
    #[arg(short = 'L', long = "layout", value_name = "LAYOUT")]
    layout: Option<String>,
    /// Number of layout components: [+-]N.
    #[arg(long = "component-count", allow_hyphen_values = true, value_name = "[+-]N")]
    component_count: Option<String>,
    /// Name (the last part of the path) matches this glob.
    #[arg(short = 'n', long = "name", value_name = "GLOB")]
    name: Option<String>,
    /// Type: f (file), d (directory), l (symlink).
    #[arg(short = 't', long = "type", value_name = "TYPE")]
    kind: Option<String>,
    /// Levels of directories below the starting points to descend.
    #[arg(long = "maxdepth", value_name = "N")]
    maxdepth: Option<usize>,
    /// End each path with NUL instead of a newline.
    #[arg(long = "print0")]
    print0: bool,
}

/// `N`, `+N` (more than) or `-N` (less than).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cmp {
    Eq(u64),
    More(u64),
    Less(u64),
}

impl Cmp {
    fn parse(text: &str, what: &str, unit: impl Fn(&str) -> anyhow::Result<u64>) -> anyhow::Result<Cmp> {
        let value = |t: &str| unit(t).map_err(|e| anyhow!("{what} '{text}': {e}"));
        Ok(match text.as_bytes().first() {
            Some(b'+') => Cmp::More(value(&text[1..])?),
            Some(b'-') => Cmp::Less(value(&text[1..])?),
            _ => Cmp::Eq(value(text)?),
        })
    }

    fn holds(self, v: u64) -> bool {
        match self {
            Cmp::Eq(n) => v == n,
            Cmp::More(n) => v > n,
            Cmp::Less(n) => v < n,
        }
    }
}

fn number(t: &str) -> anyhow::Result<u64> {
    t.parse().map_err(|_| anyhow!("not a number"))
}

fn size(t: &str) -> anyhow::Result<u64> {
    parse_size(t).map_err(|e| anyhow!("{e}"))
}

/// An age in seconds: N with s, m, h, d or w (days without one).
fn age(t: &str) -> anyhow::Result<u64> {
    let (n, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c),
        _ => (t, 'd'),
    };
    let secs = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86400,
        'w' => 7 * 86400,
        _ => bail!("unit '{unit}': use s, m, h, d or w"),
    };
    Ok(number(n)? * secs)
}

struct Predicates {
    osts: Option<Vec<u32>>,
    pool: Option<String>,
    stripe_count: Option<Cmp>,
    stripe_size: Option<Cmp>,
    size: Option<Cmp>,
    /// Age in seconds, compared in whole units of `mtime_unit` as find(1) does.
    mtime: Option<(Cmp, u64)>,
    layouts: Option<Vec<String>>,
    component_count: Option<Cmp>,
    name: Option<String>,
    kind: Option<char>,
}

impl Predicates {
    fn from(a: &FindArgs) -> anyhow::Result<Predicates> {
        let layouts = match &a.layout {
            Some(l) => {
                let v: Vec<String> = l.split(',').map(str::to_string).collect();
                if let Some(bad) = v.iter().find(|x| !["raid0", "mdt", "released"].contains(&x.as_str())) {
                    bail!("layout (-L) '{bad}': use raid0, mdt or released");
                }
                Some(v)
            }
            None => None,
        };
        let kind = match a.kind.as_deref() {
            None => None,
            Some("f") => Some('f'),
            Some("d") => Some('d'),
            Some("l") => Some('l'),
            Some(other) => bail!("type (-t) '{other}': use f, d or l"),
        };
        let mtime = match &a.mtime {
            Some(t) => {
                let digits = t.trim_start_matches(['+', '-']);
                let unit = age(&format!("1{}", digits.trim_start_matches(|c: char| c.is_ascii_digit())))?;
                Some((Cmp::parse(t, "mtime (-M)", age)?, unit))
            }
            None => None,
        };
        Ok(Predicates {
            osts: a.ost.as_deref().map(ost_list).transpose()?,
            pool: a.pool.clone(),
            stripe_count: a.stripe_count.as_deref().map(|t| Cmp::parse(t, "stripe count (-c)", number)).transpose()?,
            stripe_size: a.stripe_size.as_deref().map(|t| Cmp::parse(t, "stripe size (-S)", size)).transpose()?,
            size: a.size.as_deref().map(|t| Cmp::parse(t, "size (-s)", size)).transpose()?,
            mtime,
            layouts,
            component_count: a
                .component_count
                .as_deref()
                .map(|t| Cmp::parse(t, "component count", number))
                .transpose()?,
            name: a.name.clone(),
            kind,
        })
    }

    fn needs_layout(&self) -> bool {
        self.osts.is_some()
            || self.pool.is_some()
            || self.stripe_count.is_some()
            || self.stripe_size.is_some()
            || self.layouts.is_some()
            || self.component_count.is_some()
    }

    fn matches_layout(&self, l: &Layout) -> bool {
        if let Some(osts) = &self.osts {
            if !l.objects().any(|o| osts.contains(&o.ost)) {
                return false;
            }
        }
        if let Some(pool) = &self.pool {
            if !l.components.iter().any(|c| c.pool.as_ref() == Some(pool)) {
                return false;
            }
        }
        if let Some(c) = self.stripe_count {
            if !l.components.iter().any(|comp| c.holds(comp.stripe_count_shown().max(0) as u64)) {
                return false;
            }
        }
        if let Some(c) = self.stripe_size {
            if !l.components.iter().any(|comp| c.holds(comp.stripe_size)) {
                return false;
            }
        }
        if let Some(kinds) = &self.layouts {
            let has = |k: &str| match k {
                "mdt" => l.components.iter().any(|c| c.pattern == Pattern::Mdt),
                "released" => l.is_released(),
                _ => l.components.iter().any(|c| c.pattern == Pattern::Raid0),
            };
            if !kinds.iter().any(|k| has(k)) {
                return false;
            }
        }
        if let Some(c) = self.component_count {
            if !c.holds(l.components.len() as u64) {
                return false;
            }
        }
        true
    }

    fn matches(&self, path: &Path, meta: &std::fs::Metadata, now: i64) -> anyhow::Result<bool> {
        let ft = meta.file_type();
        let kind = if ft.is_dir() {
            'd'
        } else if ft.is_symlink() {
            'l'
        } else {
            'f'
        };
        if self.kind.is_some_and(|k| k != kind) {
            return Ok(false);
        }
        if let Some(glob) = &self.name {
            use std::os::unix::ffi::OsStrExt;
            let name = path.file_name().map(|n| n.as_bytes()).unwrap_or_default();
            if !weft_proto::glob::matches(glob.as_bytes(), name) {
                return Ok(false);
            }
        }
        if self.size.is_some_and(|c| !c.holds(meta.len())) {
            return Ok(false);
        }
        if let Some((c, unit)) = self.mtime {
            let secs = (now - meta.mtime()).max(0) as u64;
            // As find(1): the age in whole units, rounded down, against N units.
            let units = secs / unit;
            let holds = match c {
                Cmp::Eq(n) => units == n / unit,
                Cmp::More(n) => units > n / unit,
                Cmp::Less(n) => units < n / unit,
            };
            if !holds {
                return Ok(false);
            }
        }
        if self.needs_layout() {
            if kind != 'f' {
                return Ok(false);
            }
            let info: LayoutAnswer = xattr::get_json(path, vx::LAYOUT)?;
            match &info.layout {
                Some(l) if self.matches_layout(l) => {}
                _ => return Ok(false),
            }
        }
        Ok(true)
    }
}

pub fn find(a: FindArgs) -> anyhow::Result<()> {
    let preds = Predicates::from(&a)?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs() as i64;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let end = if a.print0 { b'\0' } else { b'\n' };
    let mut failed = false;
    for start in &a.paths {
        let mut stack = vec![(start.clone(), 0usize)];
        while let Some((path, depth)) = stack.pop() {
            let meta = match std::fs::symlink_metadata(&path) {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("weft find: {}: {e}", path.display());
                    failed = true;
                    continue;
                }
            };
            match preds.matches(&path, &meta, now) {
                Ok(true) => {
                    use std::io::Write;
                    use std::os::unix::ffi::OsStrExt;
                    let written = out.write_all(path.as_os_str().as_bytes()).and_then(|_| out.write_all(&[end]));
                    if written.is_err() {
                        return Ok(()); // the reader went away (| head)
                    }
                }
                Ok(false) => {}
                Err(e) => {
                    eprintln!("weft find: {}: {e}", path.display());
                    failed = true;
                }
            }
            if meta.is_dir() && a.maxdepth.is_none_or(|m| depth < m) {
                let mut children: Vec<PathBuf> = match std::fs::read_dir(&path) {
                    Ok(rd) => rd.filter_map(|e| e.ok()).map(|e| e.path()).collect(),
                    Err(e) => {
                        eprintln!("weft find: {}: {e}", path.display());
                        failed = true;
                        continue;
                    }
                };
                // Popped in name order.
                children.sort_unstable_by(|x, y| y.cmp(x));
                stack.extend(children.into_iter().map(|c| (c, depth + 1)));
            }
        }
    }
    if failed {
        bail!("some paths could not be looked at (above)");
    }
    Ok(())
}

/// `--ost`'s list: indices and ranges, or OST names (`FS-OSTxxxx`, with or without `_UUID`).
fn ost_list(text: &str) -> anyhow::Result<Vec<u32>> {
    let parts: anyhow::Result<Vec<String>> = text
        .split(',')
        .map(|part| match part.trim().rsplit_once("-OST") {
            Some((_, hex)) => {
                let hex = hex.strip_suffix("_UUID").unwrap_or(hex);
                u32::from_str_radix(hex, 16).map(|i| i.to_string()).map_err(|_| {
                    anyhow::anyhow!("--ost '{part}': an OST index (3), a range (2-5) or a name (weft-OST0003_UUID)")
                })
            }
            None => Ok(part.to_string()),
        })
        .collect();
    crate::lfs::parse_ost_list(&parts?.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_and_units() {
        assert_eq!(Cmp::parse("+1M", "s", size).unwrap(), Cmp::More(1 << 20));
        assert_eq!(Cmp::parse("-3", "c", number).unwrap(), Cmp::Less(3));
        assert_eq!(Cmp::parse("2h", "M", age).unwrap(), Cmp::Eq(7200));
        assert_eq!(age("5").unwrap(), 5 * 86400);
        assert!(age("5y").unwrap_err().to_string().contains("unit 'y'"));
        assert!(Cmp::More(3).holds(4) && !Cmp::More(3).holds(3) && Cmp::Less(3).holds(2) && Cmp::Eq(3).holds(3));
    }

    #[test]
    fn osts_by_index_range_or_lustre_name() {
        assert_eq!(ost_list("3").unwrap(), vec![3]);
        assert_eq!(ost_list("weft-OST0003_UUID,weft-OST000a,1-2").unwrap(), vec![3, 10, 1, 2]);
        assert!(ost_list("weft-OSTzz").unwrap_err().to_string().contains("--ost 'weft-OSTzz'"));
    }
}
