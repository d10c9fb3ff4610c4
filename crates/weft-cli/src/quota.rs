//! `weft quota` and `weft setquota` (Lustre's `lfs quota` and `lfs setquota`): limits on
//! the blocks (KiB) and inodes of a user, a group or a project, with soft limits that turn
//! hard after a grace time, in lfs's syntax and its table. Through the mount's virtual
//! attributes `weft.quota:KIND:ID` and `weft.quota.set` (the MDT's quota master answers).

use crate::xattr;
use anyhow::{anyhow, bail, Context};
use clap::Args;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use weft_client::quota::{QuotaReport, QuotaRequest};
use weft_client::virtual_xattr::{QUOTA_PREFIX, QUOTA_SET};
use weft_proto::msg::quota::{QuotaChange, QuotaKind, DEFAULT_ID};

#[derive(Args)]
#[command(disable_help_flag = true)]
pub struct QuotaArgs {
    #[command(flatten)]
    whose: Whose,
    /// The grace times (with -u, -g or -p and no name: `weft quota -t -u MNT`).
    #[arg(short = 't')]
    grace: bool,
    /// Also a row per target.
    #[arg(short = 'v')]
    verbose: bool,
    /// Sizes in K, M, G, T, P (-h as in lfs quota; help is --help only here).
    #[arg(short = 'h', long = "human-readable")]
    human: bool,
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// Count the id's inodes and blocks by a scan of every target too, and say whether the
    /// counters agree (root; exit status 1 when they do not).
    #[arg(long)]
    verify: bool,
    /// The mount point (any path in a Weft mount).
    #[arg(value_name = "MNT")]
    mount: Option<PathBuf>,
}

#[derive(Args)]
pub struct SetquotaArgs {
    #[command(flatten)]
    whose: Whose,
    /// Block soft limit in KiB (K, M, G, T, P, E suffixes; 0 is none); with -t, the block
    /// grace time (seconds or 1w2d3h4m5s).
    #[arg(short = 'b', value_name = "SOFT")]
    block_soft: Option<String>,
    /// Block hard limit in KiB.
    #[arg(short = 'B', value_name = "HARD")]
    block_hard: Option<String>,
    /// Inode soft limit (K, M, G suffixes); with -t, the inode grace time.
    #[arg(short = 'i', value_name = "SOFT")]
    inode_soft: Option<String>,
    /// Inode hard limit.
    #[arg(short = 'I', value_name = "HARD")]
    inode_hard: Option<String>,
    /// Grace times: -b and -i are times (`weft setquota -t -u -b 1w -i 1d MNT`).
    #[arg(short = 't')]
    grace: bool,
    /// The id follows the default limits again.
    #[arg(short = 'D', long = "default", conflicts_with_all = ["block_soft", "block_hard", "inode_soft", "inode_hard"])]
    follow_default: bool,
    /// Removes the id's limits (it follows the default again).
    #[arg(long, conflicts_with_all = ["block_soft", "block_hard", "inode_soft", "inode_hard"])]
    delete: bool,
    /// The mount point (any path in a Weft mount).
    #[arg(value_name = "MNT")]
    mount: Option<PathBuf>,
}

/// Whose quota: a user, a group or a project by name or number, or a kind's defaults.
#[derive(Args)]
struct Whose {
    /// A user (name or uid); with -t, the kind alone (`-t -u MNT`).
    #[arg(short = 'u', value_name = "USER", num_args = 0..=1, default_missing_value = "", conflicts_with_all = ["group", "project"])]
    user: Option<String>,
    /// A group (name or gid).
    #[arg(short = 'g', value_name = "GROUP", num_args = 0..=1, default_missing_value = "", conflicts_with = "project")]
    group: Option<String>,
    /// A project (id, or a name from /etc/projid).
    #[arg(short = 'p', value_name = "PROJECT", num_args = 0..=1, default_missing_value = "")]
    project: Option<String>,
    /// The default user limits (for users without their own).
    #[arg(short = 'U', conflicts_with_all = ["user", "group", "project", "default_group", "default_project"])]
    default_user: bool,
    /// The default group limits.
    #[arg(short = 'G', conflicts_with_all = ["user", "group", "project", "default_project"])]
    default_group: bool,
    /// The default project limits.
    #[arg(short = 'P', conflicts_with_all = ["user", "group", "project"])]
    default_project: bool,
}

impl Whose {
    fn defaults(&self) -> [bool; 3] {
        [self.default_user, self.default_group, self.default_project]
    }
}

/// Which quota the arguments name: a kind and an id (DEFAULT_ID for the defaults), and the
/// name to print; None when only a kind's letter was given without a name (`-t -u`).
fn target(
    user: &Option<String>,
    group: &Option<String>,
    project: &Option<String>,
    defaults: [bool; 3],
) -> anyhow::Result<Option<(QuotaKind, u32, String)>> {
    let named = [(QuotaKind::User, user), (QuotaKind::Group, group), (QuotaKind::Project, project)];
    for (kind, name) in named {
        match name.as_deref() {
            Some("") => bail!("-{}: name whose quota", kind.letter()),
            Some(name) => return Ok(Some((kind, resolve(kind, name)?, name.to_string()))),
            None => {}
        }
    }
    for (kind, on) in QuotaKind::ALL.into_iter().zip(defaults) {
        if on {
            return Ok(Some((kind, DEFAULT_ID, "default".into())));
        }
    }
    Ok(None)
}

/// A name or number as the id of `kind`: users and groups from the system's databases,
/// projects from /etc/projid (`name:id` lines).
fn resolve(kind: QuotaKind, name: &str) -> anyhow::Result<u32> {
    if let Ok(id) = name.parse::<u32>() {
        if id == DEFAULT_ID {
            bail!("{name}: 4294967295 is no {}'s id", kind.name());
        }
        return Ok(id);
    }
    let c = CString::new(name).map_err(|_| anyhow!("{name}: a name has no NUL byte"))?;
    let found = match kind {
        // SAFETY: c is a valid C string; the returned entry is read at once, on this thread.
        QuotaKind::User => unsafe { libc::getpwnam(c.as_ptr()).as_ref().map(|p| p.pw_uid) },
        // SAFETY: as above.
        QuotaKind::Group => unsafe { libc::getgrnam(c.as_ptr()).as_ref().map(|g| g.gr_gid) },
        QuotaKind::Project => std::fs::read_to_string("/etc/projid").ok().and_then(|text| {
            text.lines()
                .find_map(|l| l.split_once(':').filter(|(n, _)| *n == name).and_then(|(_, id)| id.trim().parse().ok()))
        }),
    };
    found.ok_or_else(|| match kind {
        QuotaKind::User => anyhow!("-u {name}: no such user"),
        QuotaKind::Group => anyhow!("-g {name}: no such group"),
        QuotaKind::Project => anyhow!("-p {name}: not a project id, nor a name in /etc/projid"),
    })
}

/// The kind a bare `-u`/`-g`/`-p` names for `-t`, and the mount point: `-t -u MNT` reaches
/// here as `-u MNT` (the option takes the word after it), so a "name" with no MNT after it
/// is the mount point.
fn grace_kind(
    user: &Option<String>,
    group: &Option<String>,
    project: &Option<String>,
    mount: &Option<PathBuf>,
) -> anyhow::Result<(QuotaKind, PathBuf)> {
    let (kind, word) = [(QuotaKind::User, user), (QuotaKind::Group, group), (QuotaKind::Project, project)]
        .into_iter()
        .find_map(|(k, v)| v.clone().map(|v| (k, v)))
        .ok_or_else(|| anyhow!("-t: name the kind with -u, -g or -p"))?;
    match (mount, word.as_str()) {
        (Some(m), "") => Ok((kind, m.clone())),
        (None, w) if !w.is_empty() => Ok((kind, PathBuf::from(w))),
        (Some(_), w) => bail!("-t -{} takes no name ({w}): grace times are the kind's", kind.letter()),
        (None, _) => bail!("give the mount point (MNT)"),
    }
}

fn mount_of(mount: &Option<PathBuf>) -> anyhow::Result<&Path> {
    mount.as_deref().ok_or_else(|| anyhow!("give the mount point (MNT)"))
}

/// A size in KiB from `123`, `100M`, `2G` (powers of 1024; a plain number is KiB).
fn parse_kib(what: &str, text: &str) -> anyhow::Result<u64> {
    parse_scaled(text, 0).with_context(|| format!("{what} {text:?}: a size in KiB, with K, M, G, T, P or E"))
}

/// An inode count from `1000`, `10k`, `2M` (powers of 1024, as lfs).
fn parse_count(what: &str, text: &str) -> anyhow::Result<u64> {
    parse_scaled(text, 1).with_context(|| format!("{what} {text:?}: a count, with K, M, G or T"))
}

/// A number with a suffix of powers of 1024; `k_power` is the power K stands for (0 for a
/// size in KiB, where K is the unit; 1 for a count).
fn parse_scaled(text: &str, k_power: u32) -> anyhow::Result<u64> {
    let text = text.trim();
    let (num, scale) = match text.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let power = match c.to_ascii_uppercase() {
                'K' => 0,
                'M' => 1,
                'G' => 2,
                'T' => 3,
                'P' => 4,
                'E' => 5,
                _ => bail!("unknown suffix {c}"),
            };
            (&text[..i], 1024u64.pow(power + k_power))
        }
        _ => (text, 1),
    };
    let n: u64 = num.parse().map_err(|_| anyhow!("not a number"))?;
    n.checked_mul(scale).ok_or_else(|| anyhow!("too large"))
}

/// A grace time from seconds or `1w2d3h4m5s`.
fn parse_grace(what: &str, text: &str) -> anyhow::Result<u64> {
    let bad = || anyhow!("{what} {text:?}: seconds, or a time such as 1w2d3h4m5s");
    if let Ok(s) = text.parse::<u64>() {
        return Ok(s);
    }
    let mut total = 0u64;
    let mut num = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let unit = match c {
            'w' => 7 * 86400,
            'd' => 86400,
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(bad()),
        };
        let n: u64 = num.parse().map_err(|_| bad())?;
        total = total.checked_add(n.checked_mul(unit).ok_or_else(bad)?).ok_or_else(bad)?;
        num.clear();
    }
    if !num.is_empty() {
        return Err(bad());
    }
    Ok(total)
}

/// Seconds as lfs prints them: `1w`, `6d23h56m44s`, `0s`.
pub fn sec2str(mut s: u64) -> String {
    if s == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, len) in [('w', 7 * 86400), ('d', 86400), ('h', 3600), ('m', 60), ('s', 1)] {
        if s >= len {
            out.push_str(&format!("{}{unit}", s / len));
            s %= len;
        }
    }
    out
}

/// KiB as lfs prints them: the number, or with -h `%5.4g` of the largest unit and its letter.
fn kbytes(kib: u64, human: bool) -> String {
    if !human {
        return kib.to_string();
    }
    for (shift, unit) in [(40, 'P'), (30, 'T'), (20, 'G'), (10, 'M')] {
        if kib >> shift != 0 {
            return format!("{}{unit}", g4(kib as f64 / (1u64 << shift) as f64));
        }
    }
    format!("{kib}k")
}

/// `%.4g`: four significant digits, no trailing zeros.
fn g4(v: f64) -> String {
    let digits = if v >= 1000.0 {
        0
    } else if v >= 100.0 {
        1
    } else if v >= 10.0 {
        2
    } else {
        3
    };
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The mount point column: a path longer than 15 characters goes on its own line.
fn first_column(name: &str) -> String {
    if name.len() > 15 {
        format!("{name}\n{:15}", "")
    } else {
        format!("{name:>15}")
    }
}

/// One half of a row (blocks or inodes): used with `*` when over a limit, soft, hard, and
/// the grace left while over the soft limit.
fn half(used: String, used_n: u64, soft: u64, hard: u64, grace_end: Option<u64>, now: u64, h: bool) -> String {
    let fmt = |v: u64| if h { kbytes(v, true) } else { v.to_string() };
    let over_hard = hard != 0 && used_n >= hard;
    let over_soft = soft != 0 && used_n > soft;
    let grace = match grace_end {
        _ if over_hard || !over_soft => "-".to_string(),
        Some(end) if end > now => sec2str(end - now),
        Some(_) => "expired".to_string(),
        None => "-".to_string(),
    };
    let flag = if over_hard || over_soft { '*' } else { ' ' };
    format!(" {used:>7}{flag} {:>6} {:>7} {grace:>7}", fmt(soft), fmt(hard))
}

fn report(mount: &Path, kind: QuotaKind, id: u32, name: &str) -> anyhow::Result<QuotaReport> {
    let attr = format!("{QUOTA_PREFIX}{}:{id}", kind.letter());
    xattr::get_json(mount, &attr).with_context(|| format!("the quota of {} {name}", kind.name()))
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn print_quota(a: &QuotaArgs, mount: &Path, kind: QuotaKind, id: u32, name: &str, r: &QuotaReport) {
    let q = &r.info;
    let now = now();
    let h = a.human;
    println!("Disk quotas for {} {name} ({}id {id}):", kind.name(), kind.letter());
    println!(
        "{:>15}{:>8} {:>7}{:>8}{:>8}{:>8} {:>7}{:>8}{:>8}",
        "Filesystem",
        if h { "used" } else { "kbytes" },
        "quota",
        "limit",
        "grace",
        "files",
        "quota",
        "limit",
        "grace"
    );
    let used = r.used_kib();
    // An OST that did not answer: its blocks are missing, shown as lfs shows unfetched values.
    let used_text = if r.incomplete() { format!("[{}]", kbytes(used, h)) } else { kbytes(used, h) };
    let l = &q.limits;
    let blocks = half(used_text, used, l.block_soft_kib, l.block_hard_kib, q.block_grace_end, now, h);
    let inodes = half(q.inodes.to_string(), q.inodes, l.inode_soft, l.inode_hard, q.inode_grace_end, now, false);
    println!("{}{blocks}{inodes}", first_column(&mount.display().to_string()));
    if a.verbose {
        let dash = "-".to_string();
        let row = |name: &str, b: String, i: String| {
            println!(
                "{} {b:>7}  {dash:>6} {dash:>7} {dash:>7} {i:>7}  {dash:>6} {dash:>7} {dash:>7}",
                first_column(name)
            );
        };
        row(&format!("{}_UUID", r.mdt), "0".into(), q.inodes.to_string());
        for t in &r.osts {
            let b = match t.used_kib {
                Some(kib) => kbytes(kib, h),
                None => format!("[{}]", t.error.as_deref().unwrap_or("?")),
            };
            row(&format!("{}_UUID", t.name), b, dash.clone());
        }
    }
}

fn print_default(a: &QuotaArgs, mount: &Path, kind: QuotaKind, r: &QuotaReport) {
    let q = &r.info;
    println!("Disk default {} quota:", kind.name());
    println!(
        "{:>15} {:>8}{:>8}{:>8} {:>8}{:>8}{:>8}",
        "Filesystem", "bquota", "blimit", "bgrace", "iquota", "ilimit", "igrace"
    );
    let l = &q.limits;
    println!(
        "{} {:>8}{:>8}{:>8} {:>8}{:>8}{:>8}",
        first_column(&mount.display().to_string()),
        kbytes(l.block_soft_kib, a.human),
        kbytes(l.block_hard_kib, a.human),
        sec2str(q.block_grace_s),
        l.inode_soft,
        l.inode_hard,
        sec2str(q.inode_grace_s)
    );
}

/// Compares the counters with a scan of every target; false when one differs.
fn verify(mount: &Path, kind: QuotaKind, id: u32) -> anyhow::Result<bool> {
    let attr = format!("{QUOTA_PREFIX}{}:{id}:verify", kind.letter());
    let r: QuotaReport = xattr::get_json(mount, &attr)?;
    let mut ok = true;
    let scanned = r.info.inodes_scanned.unwrap_or(0);
    let same = scanned == r.info.inodes;
    ok &= same;
    println!(
        "{}: {} inodes counted, {scanned} by a scan: {}",
        r.mdt,
        r.info.inodes,
        if same { "ok" } else { "DIFFERENT" }
    );
    for t in &r.osts {
        match (t.used_kib, t.scanned_kib) {
            (Some(used), Some(scanned)) => {
                let same = used == scanned;
                ok &= same;
                println!(
                    "{}: {used} KiB counted, {scanned} by a scan: {}",
                    t.name,
                    if same { "ok" } else { "DIFFERENT" }
                );
            }
            _ => {
                ok = false;
                println!("{}: not verified: {}", t.name, t.error.as_deref().unwrap_or("no answer"));
            }
        }
    }
    Ok(ok)
}

pub fn quota(a: QuotaArgs) -> anyhow::Result<()> {
    let w = &a.whose;
    let defaults = w.defaults();
    if a.grace {
        let (kind, mount) = grace_kind(&w.user, &w.group, &w.project, &a.mount)?;
        let r = report(&mount, kind, DEFAULT_ID, "default")?;
        println!(
            "Block grace time: {}; Inode grace time: {}",
            sec2str(r.info.block_grace_s),
            sec2str(r.info.inode_grace_s)
        );
        return Ok(());
    }
    let targets = match target(&w.user, &w.group, &w.project, defaults)? {
        Some(t) => vec![t],
        None => {
            // SAFETY: getuid and getgid have no preconditions.
            let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
            vec![
                (QuotaKind::User, uid, name_of(QuotaKind::User, uid)),
                (QuotaKind::Group, gid, name_of(QuotaKind::Group, gid)),
            ]
        }
    };
    let mount = mount_of(&a.mount)?;
    let mut all_ok = true;
    for (kind, id, name) in targets {
        let r = report(mount, kind, id, &name)?;
        if id == DEFAULT_ID {
            print_default(&a, mount, kind, &r);
        } else {
            print_quota(&a, mount, kind, id, &name, &r);
        }
        if a.verify && id != DEFAULT_ID {
            all_ok &= verify(mount, kind, id)?;
        }
    }
    if !all_ok {
        bail!("the quota counters differ from what a scan of the targets finds");
    }
    Ok(())
}

fn name_of(kind: QuotaKind, id: u32) -> String {
    // SAFETY: the entries are read at once, on this thread.
    let name = unsafe {
        match kind {
            QuotaKind::User => libc::getpwuid(id).as_ref().map(|p| std::ffi::CStr::from_ptr(p.pw_name)),
            QuotaKind::Group => libc::getgrgid(id).as_ref().map(|g| std::ffi::CStr::from_ptr(g.gr_name)),
            QuotaKind::Project => None,
        }
        .map(|c| c.to_string_lossy().into_owned())
    };
    name.unwrap_or_else(|| id.to_string())
}

pub fn setquota(a: SetquotaArgs) -> anyhow::Result<()> {
    // The MDT refuses anyone else too; said here because the kernel would refuse the change
    // of the mount root's attribute first, with a bare EACCES.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("only root sets quotas");
    }
    let w = &a.whose;
    let defaults = w.defaults();
    let (request, mount) = if a.grace {
        let (kind, mount) = grace_kind(&w.user, &w.group, &w.project, &a.mount)?;
        if a.block_hard.is_some() || a.inode_hard.is_some() {
            bail!("-t takes grace times with -b (blocks) and -i (inodes), not -B or -I");
        }
        let block_s = a.block_soft.as_deref().map(|t| parse_grace("-b", t)).transpose()?;
        let inode_s = a.inode_soft.as_deref().map(|t| parse_grace("-i", t)).transpose()?;
        if block_s.is_none() && inode_s.is_none() {
            bail!("-t: give -b BLOCK_GRACE and/or -i INODE_GRACE");
        }
        (QuotaRequest::Grace { kind, block_s, inode_s }, mount)
    } else {
        let Some((kind, id, _)) = target(&w.user, &w.group, &w.project, defaults)? else {
            bail!("name whose limits: -u USER, -g GROUP, -p PROJECT, or -U, -G, -P for the defaults");
        };
        let mount = mount_of(&a.mount)?.to_path_buf();
        if a.delete || a.follow_default {
            (QuotaRequest::Delete { kind, id }, mount)
        } else {
            let change = QuotaChange {
                block_soft_kib: a.block_soft.as_deref().map(|t| parse_kib("-b", t)).transpose()?,
                block_hard_kib: a.block_hard.as_deref().map(|t| parse_kib("-B", t)).transpose()?,
                inode_soft: a.inode_soft.as_deref().map(|t| parse_count("-i", t)).transpose()?,
                inode_hard: a.inode_hard.as_deref().map(|t| parse_count("-I", t)).transpose()?,
            };
            if change == QuotaChange::default() {
                bail!("give a limit: -b, -B, -i or -I (or -D / --delete for the default limits)");
            }
            (QuotaRequest::Set { kind, id, change }, mount)
        }
    };
    xattr::set(&mount, QUOTA_SET, &serde_json::to_vec(&request)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_counts_and_times_parse_as_lfs_takes_them() {
        assert_eq!(parse_kib("-B", "100").unwrap(), 100);
        assert_eq!(parse_kib("-B", "100M").unwrap(), 100 * 1024);
        assert_eq!(parse_kib("-B", "2g").unwrap(), 2 * 1024 * 1024);
        assert!(parse_kib("-B", "12X").unwrap_err().to_string().contains("-B \"12X\""));
        assert_eq!(parse_count("-I", "10k").unwrap(), 10240);
        assert_eq!(parse_grace("-b", "1w2d3h4m5s").unwrap(), 7 * 86400 + 2 * 86400 + 3 * 3600 + 4 * 60 + 5);
        assert_eq!(parse_grace("-b", "3600").unwrap(), 3600);
        assert!(parse_grace("-b", "1x").is_err());
        assert!(parse_grace("-b", "5d3").is_err());
        assert_eq!(sec2str(604800), "1w");
        assert_eq!(sec2str(604800 - 196), "6d23h56m44s");
        assert_eq!(sec2str(0), "0s");
        assert_eq!(kbytes(30720, true), "30M");
        assert_eq!(kbytes(1536, true), "1.5M");
        assert_eq!(kbytes(512, true), "512k");
        assert_eq!(kbytes(30720, false), "30720");
    }

    #[test]
    fn a_row_marks_what_is_over_and_shows_the_grace_left() {
        let now = 1_000_000;
        // Over the soft limit, within the grace: '*' and the time left.
        let r = half("30720".into(), 30720, 30000, 40000, Some(now + 604800 - 196), now, false);
        assert_eq!(r, "   30720*  30000   40000 6d23h56m44s");
        assert_eq!(half("10".into(), 10, 0, 0, None, now, false), "      10       0       0       -");
        assert!(half("5".into(), 5, 4, 0, Some(now - 1), now, false).ends_with("expired"));
        assert!(half("9".into(), 9, 0, 9, None, now, false).contains("9*"), "at the hard limit");
    }
}
