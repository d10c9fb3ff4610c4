//! `weft policy run`: a policy engine (as Robinhood or LIPE) that follows an MDT's changelog
//! instead of scanning the namespace.
//!
//! It keeps a catalog of the file system's regular files (FID, path, size, modification
//! time, HSM state) in its state directory, with the changelog reader it registered. The
//! first run registers the reader, then walks the tree once to fill the catalog (changes made
//! meanwhile are in the changelog, so nothing is missed); every later run reads only the
//! records since the last one, looks again at the files they name (by FID), and clears them.
//! Then each rule is matched against the catalog, and what the rules name is printed, or
//! done with `--apply`: archives as one request per archive, releases one by one.
//!
//! The rules, in TOML:
//! ```toml
//! [[rule]]
//! name = "archive-proj"
//! action = "archive"          # or "release"
//! under = "/proj"             # a path from the file system's root (default: everything)
//! not_modified_for = "1h"     # s, m, h or d
//! larger_than = "1G"          # K, M, G or T
//! archive = 2                 # archive only (default: the file's, else the MDT's default)
//!
//! [[rule]]
//! name = "release-big"
//! action = "release"
//! larger_than = "1G"
//! when_ost_full = 80          # percent: only while an OST is at least this full
//!
//! [[rule]]
//! name = "cold-to-disk"
//! action = "migrate"          # rewrite the data into `pool` (weft migrate): tiers
//! pool = "slow"
//! stripe_count = 2            # optional: the new layout's (default: the directory's)
//! not_modified_for = "1d"
//! ```
//! A migrate rule names a file with data outside its pool; once moved, the changelog's
//! layout record brings the file's new pools into the catalog.
//! The catalog is a JSON file: fine for the millions of files a project holds, not for a
//! whole site's billions (that wants a database; the changelog following stays the same).

use crate::mdts::Mdts;
use crate::xattr;
use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use weft_client::virtual_xattr::{self as vx, LayoutAnswer, PathAnswer};
use weft_client::TargetStatfs;
use weft_proto::msg::changelog::ChangelogRecord;
use weft_proto::msg::hsm::{HsmAction, HsmState, HS_RELEASED};
use weft_proto::msg::{mdt, TargetKind};
use weft_proto::Fid;

/// Files per archive request.
use crate::limits::HSM_REQUEST_FILES_MAX as REQUEST_FILES;
/// Changelog records asked for at once: as many as one answer holds.
use weft_proto::limits::CHANGELOG_READ_RECORDS_MAX as READ_BATCH;

#[derive(Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    command: PolicyCommand,
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Bring the catalog up to date from the changelog, then print what the rules name
    /// (dry run) or do it (--apply) (root).
    Run(RunArgs),
}

#[derive(Args)]
struct RunArgs {
    /// The rules (TOML): `[[rule]]` tables with `name`, `action` (archive, release or migrate),
    /// `under` (a path from the root), `not_modified_for` (1h), `larger_than` (1G),
    /// `when_ost_full` (a percentage), to archive `archive` (an id), to migrate `pool` and
    /// `stripe_count`.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Where the engine keeps its catalog and changelog reader.
    #[arg(long, value_name = "DIR")]
    state: PathBuf,
    /// Do what the rules name (without it: print it and change nothing).
    #[arg(long)]
    apply: bool,
    /// The file system's mount point.
    #[arg(value_name = "MNT")]
    mount: PathBuf,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    rule: Vec<RuleText>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleText {
    name: String,
    action: String,
    under: Option<String>,
    not_modified_for: Option<String>,
    larger_than: Option<String>,
    when_ost_full: Option<u32>,
    archive: Option<u32>,
    pool: Option<String>,
    stripe_count: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Do {
    Archive,
    Release,
    Migrate,
}

#[derive(Debug)]
struct Rule {
    name: String,
    action: Do,
    under: String,
    not_modified_for_s: Option<u64>,
    larger_than: Option<u64>,
    when_ost_full: Option<u32>,
    archive: Option<u32>,
    /// A migrate rule's pool and stripe count.
    pool: Option<String>,
    stripe_count: Option<i64>,
}

fn parse_rules(text: &str) -> anyhow::Result<Vec<Rule>> {
    let config: Config = toml::from_str(text)?;
    if config.rule.is_empty() {
        bail!("no [[rule]] in the config");
    }
    config
        .rule
        .into_iter()
        .map(|r| {
            let name = r.name.clone();
            let what = |e: String| anyhow!("rule {name}: {e}");
            let action = match r.action.as_str() {
                "archive" => Do::Archive,
                "release" => Do::Release,
                "migrate" => Do::Migrate,
                a => return Err(what(format!("action '{a}': archive, release or migrate"))),
            };
            if action != Do::Archive && r.archive.is_some() {
                return Err(what("archive = N goes with action = \"archive\"".into()));
            }
            if (action == Do::Migrate) != r.pool.is_some() || (action != Do::Migrate && r.stripe_count.is_some()) {
                return Err(what(
                    "pool = \"NAME\" (and stripe_count) go with action = \"migrate\", which needs a pool".into(),
                ));
            }
            let under = r.under.unwrap_or_else(|| "/".into());
            if !under.starts_with('/') {
                return Err(what(format!("under = \"{under}\": a path from the file system's root, /dir")));
            }
            let not_modified_for_s = r
                .not_modified_for
                .map(|d| weft_proto::units::parse_duration(&d).map_err(|e| what(format!("not_modified_for: {e}"))))
                .transpose()?;
            let larger_than = r
                .larger_than
                .map(|s| weft_proto::units::parse_size(&s).map_err(|e| what(format!("larger_than: {e}"))))
                .transpose()?;
            if r.when_ost_full.is_some_and(|p| p > 100) {
                return Err(what("when_ost_full: a percentage, 0 to 100".into()));
            }
            Ok(Rule {
                name: r.name,
                action,
                under: under.trim_end_matches('/').to_string(),
                not_modified_for_s,
                larger_than,
                when_ost_full: r.when_ost_full,
                archive: r.archive,
                pool: r.pool,
                stripe_count: r.stripe_count,
            })
        })
        .collect()
}

/// What the engine knows of one file.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    /// From the file system's root: `/proj/a`.
    path: String,
    size: u64,
    mtime: i64,
    states: u32,
    /// The pools of the components that hold its data (None: a component in no pool).
    #[serde(default)]
    pools: Vec<Option<String>>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Catalog {
    /// MDT0 and the changelog reader registered on it.
    mdt: String,
    reader: String,
    /// The last changelog record taken in.
    last_index: u64,
    /// The readers on the other MDTs (a file system with several): by MDT index, the reader
    /// and the last record taken in.
    #[serde(default)]
    more: BTreeMap<u32, (String, u64)>,
    /// The first walk of the tree is done (it is done again if a run stopped in it).
    walked: bool,
    #[serde(with = "as_pairs")]
    files: BTreeMap<Fid, Entry>,
}

/// The catalog's files as a list of (FID, entry) pairs (JSON keys are strings only).
mod as_pairs {
    use super::{Entry, Fid};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<S: Serializer>(map: &BTreeMap<Fid, Entry>, s: S) -> Result<S::Ok, S::Error> {
        map.iter().collect::<Vec<_>>().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<Fid, Entry>, D::Error> {
        Ok(Vec::<(Fid, Entry)>::deserialize(d)?.into_iter().collect())
    }
}

impl Catalog {
    /// The reader on MDT `index` and the last record it took in.
    fn reader_of(&mut self, index: u32) -> (&mut String, &mut u64) {
        if index == 0 {
            return (&mut self.reader, &mut self.last_index);
        }
        let (reader, last) = self.more.entry(index).or_default();
        (reader, last)
    }
}

struct Engine {
    mount: PathBuf,
    mdts: Mdts,
}

impl Engine {
    /// What the file with this FID is now: None if it is gone or not a regular file; an
    /// error if that cannot be told now (the catalog keeps what it had).
    fn look(&self, fid: Fid) -> anyhow::Result<Option<Entry>> {
        let answer: PathAnswer = match xattr::get_json(&self.mount, &format!("{}{fid}", vx::FID2PATH_PREFIX)) {
            Ok(a) => a,
            Err(e) if is_gone(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(self.look_at(&format!("/{}", answer.path)))
    }

    /// Whether `fid` is a directory now.
    fn is_dir(&self, fid: Fid) -> bool {
        let Ok(answer) = xattr::get_json::<PathAnswer>(&self.mount, &format!("{}{fid}", vx::FID2PATH_PREFIX)) else {
            return false;
        };
        std::fs::symlink_metadata(self.mount.join(&answer.path)).is_ok_and(|m| m.is_dir())
    }

    fn look_at(&self, path: &str) -> Option<Entry> {
        let full = self.mount.join(path.trim_start_matches('/'));
        let meta = std::fs::symlink_metadata(&full).ok()?;
        if !meta.is_file() {
            return None;
        }
        let state: HsmState = xattr::get_json(&full, vx::HSM).ok()?;
        let layout: Option<LayoutAnswer> = xattr::get_json(&full, vx::LAYOUT).ok();
        let pools = layout
            .and_then(|l| l.layout)
            .map(|l| l.data_components().map(|c| c.pool.clone()).collect())
            .unwrap_or_default();
        Some(Entry { path: path.to_string(), size: meta.len(), mtime: meta.mtime(), states: state.states, pools })
    }

    /// The first run's walk of the tree (the reader is registered before it: what changes
    /// while it walks is in the changelog).
    fn scan(&self, dir: &Path, rel: &str, out: &mut BTreeMap<Fid, Entry>) -> anyhow::Result<()> {
        for entry in std::fs::read_dir(dir).with_context(|| dir.display().to_string())? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = format!("{rel}/{name}");
            let kind = entry.file_type()?;
            if kind.is_dir() {
                self.scan(&entry.path(), &path, out)?;
            } else if kind.is_file() {
                // A file removed while the walk goes is in the changelog: skipped here.
                let Ok(fid) = crate::hsm::fid_of(&entry.path()) else { continue };
                if let Some(e) = self.look_at(&path) {
                    out.insert(fid, e);
                }
            }
        }
        Ok(())
    }

    /// MDT `index`'s changelog since the catalog's last record of it, taken in. Returns how
    /// many records were read.
    fn follow(&self, index: u32, catalog: &mut Catalog) -> anyhow::Result<usize> {
        let mut changed = BTreeSet::new();
        let mut renamed = BTreeSet::new();
        let mut read = 0;
        loop {
            let start = *catalog.reader_of(index).1 + 1;
            let records: Vec<ChangelogRecord> =
                self.mdts.ask(index, mdt::ChangelogRead { start, end: 0, max: READ_BATCH })?;
            let Some(last) = records.last() else { break };
            *catalog.reader_of(index).1 = last.index;
            read += records.len();
            for r in &records {
                changed.insert(r.target);
                if let Some((source, _, _)) = &r.source {
                    changed.insert(*source);
                    renamed.insert(*source);
                }
            }
        }
        let mut again: Vec<Fid> = changed.into_iter().filter(|f| *f != Fid::default()).collect();
        // A directory renamed: the paths of everything under it changed.
        if renamed.iter().any(|fid| !catalog.files.contains_key(fid) && self.is_dir(*fid)) {
            again.extend(catalog.files.keys().copied());
        }
        for fid in again {
            match self.look(fid) {
                Ok(Some(e)) => {
                    catalog.files.insert(fid, e);
                }
                Ok(None) => {
                    catalog.files.remove(&fid);
                }
                Err(e) => crate::errors::report(&e.context(format!("{fid} kept as it was"))),
            }
        }
        Ok(read)
    }

    /// The fullest OST's use, in percent.
    fn fullest_ost(&self) -> anyhow::Result<u32> {
        let targets: Vec<TargetStatfs> = crate::lfs::df_rows(&self.mount)?;
        Ok(targets
            .iter()
            .filter(|t| t.kind == TargetKind::Ost)
            .filter_map(|t| t.statfs)
            .filter(|s| s.blocks > 0)
            .map(|s| ((s.blocks - s.bfree) * 100).div_ceil(s.blocks) as u32)
            .max()
            .unwrap_or(0))
    }
}

/// Whether an error says the file is gone.
fn is_gone(e: &anyhow::Error) -> bool {
    crate::errors::errno_of(e) == Some(libc::ENOENT)
}

fn under(path: &str, dir: &str) -> bool {
    dir.is_empty() || path == dir || path.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/'))
}

/// Whether `rule` names the file now (`full`: the fullest OST's use).
fn names(rule: &Rule, e: &Entry, now: i64, full: u32) -> bool {
    let state = HsmState { states: e.states, archive_id: 0 };
    let state_ok = match rule.action {
        Do::Archive => state.wants_archive(),
        Do::Release => state.release_refusal().is_none() && e.states & HS_RELEASED == 0,
        Do::Migrate => e.states & HS_RELEASED == 0 && e.pools.iter().any(|p| p.as_ref() != rule.pool.as_ref()),
    };
    state_ok
        && under(&e.path, &rule.under)
        && rule.not_modified_for_s.is_none_or(|d| now.saturating_sub(e.mtime) >= d as i64)
        && rule.larger_than.is_none_or(|s| e.size > s)
        && rule.when_ost_full.is_none_or(|p| full >= p)
}

pub fn policy(a: PolicyArgs) -> anyhow::Result<()> {
    match a.command {
        PolicyCommand::Run(r) => run(r),
    }
}

fn run(a: RunArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&a.config).with_context(|| format!("--config {}", a.config.display()))?;
    let rules = parse_rules(&text).with_context(|| format!("--config {}", a.config.display()))?;
    let mdts = Mdts::of(&a.mount)?;
    let mdt_name = mdts.name(0);
    let engine = Engine { mount: a.mount.clone(), mdts };
    std::fs::create_dir_all(&a.state).with_context(|| format!("--state {}", a.state.display()))?;
    let catalog_file = a.state.join("catalog.json");
    let mut catalog = match std::fs::read(&catalog_file) {
        Ok(bytes) => serde_json::from_slice::<Catalog>(&bytes)
            .with_context(|| format!("{} is not a policy catalog", catalog_file.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Catalog::default(),
        Err(e) => return Err(anyhow::Error::new(e).context(catalog_file.display().to_string())),
    };
    if !catalog.mdt.is_empty() && catalog.mdt != mdt_name {
        bail!("{} is the catalog of {}, not of {mdt_name}", catalog_file.display(), catalog.mdt);
    }
    catalog.mdt = mdt_name;
    // A reader on each MDT (one added since the last run gets one too).
    let indices = engine.mdts.indices();
    for &index in &indices {
        // Its reader gone (deregistered by an admin): records were lost, so walk again.
        let readers = engine.mdts.ask(index, mdt::ChangelogUsersList {})?;
        let (reader, _) = catalog.reader_of(index);
        if !reader.is_empty() && !readers.users.iter().any(|u| u.id == *reader) {
            let name = engine.mdts.name(index);
            eprintln!(
                "weft policy: changelog reader {reader} on {name} is gone: registering again and walking the tree"
            );
            reader.clear();
        }
        if reader.is_empty() {
            // Registered before the walk (what changes while it walks is in the changelog),
            // and saved at once: a run that stops in the walk does not leave a reader nobody
            // reads.
            let user = engine.mdts.ask(index, mdt::ChangelogRegister { name: Some("policy".into()) })?;
            let (reader, last) = catalog.reader_of(index);
            (*reader, *last) = (user.id.clone(), user.cleared);
            catalog.walked = false;
            save(&a.state, &catalog)?;
        }
    }
    if !catalog.walked {
        catalog.files.clear();
        engine.scan(&a.mount, "", &mut catalog.files)?;
        catalog.walked = true;
        println!(
            "catalog: {} files from a first walk; changelog reader {} from now on",
            catalog.files.len(),
            catalog.reader
        );
    }
    let mut read_of = Vec::new();
    for &index in &indices {
        read_of.push((index, engine.follow(index, &mut catalog)?));
    }
    // Saved (synced) before the records are cleared: a crash between loses nothing.
    save(&a.state, &catalog)?;
    for &(index, read) in &read_of {
        if read > 0 {
            let (reader, last) = catalog.reader_of(index);
            let clear = mdt::ChangelogClear { id: reader.clone(), end: *last };
            engine.mdts.ask(index, clear)?;
        }
    }
    let read: usize = read_of.iter().map(|(_, n)| n).sum();
    let upto: Vec<String> = indices.iter().map(|i| catalog.reader_of(*i).1.to_string()).collect();
    println!(
        "catalog: {} files, {read} changelog records taken in (to record {})",
        catalog.files.len(),
        upto.join(", ")
    );

    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs() as i64;
    let full = if rules.iter().any(|r| r.when_ost_full.is_some()) { engine.fullest_ost()? } else { 0 };
    // Each file goes to the first rule of each action that names it.
    let mut archives: BTreeMap<u32, Vec<(Fid, &Entry, &Rule)>> = BTreeMap::new();
    let mut releases = Vec::new();
    let mut migrations = Vec::new();
    for (fid, e) in &catalog.files {
        for action in [Do::Archive, Do::Release, Do::Migrate] {
            if let Some(rule) = rules.iter().filter(|r| r.action == action).find(|r| names(r, e, now, full)) {
                match action {
                    Do::Archive => archives.entry(rule.archive.unwrap_or(0)).or_default().push((*fid, e, rule)),
                    Do::Release => releases.push((*fid, e, rule)),
                    Do::Migrate => migrations.push((*fid, e, rule)),
                }
            }
        }
    }
    let verb = if a.apply { "" } else { "would " };
    for (fid, e, rule) in archives.values().flatten() {
        println!("{verb}archive {} ({fid}, rule {})", e.path, rule.name);
    }
    for (fid, e, rule) in &releases {
        println!("{verb}release {} ({fid}, rule {})", e.path, rule.name);
    }
    for (fid, e, rule) in &migrations {
        let pool = rule.pool.as_deref().unwrap_or_default();
        println!("{verb}migrate {} to pool {pool} ({fid}, rule {})", e.path, rule.name);
    }
    let planned = archives.values().map(Vec::len).sum::<usize>() + releases.len() + migrations.len();
    if !a.apply {
        println!("dry run: {planned} actions, none done (--apply does them)");
        return Ok(());
    }
    let mut failed = 0;
    // Each file's action is queued by its MDT.
    let archive = |archive_id: u32, fids: Vec<Fid>| -> anyhow::Result<()> {
        for (index, at) in Fid::by_mdt(&fids) {
            let fids = at.iter().map(|i| fids[*i]).collect();
            let op = mdt::HsmRequest { action: HsmAction::Archive, archive_id, fids, data: Vec::new() };
            engine.mdts.ask(index, op)?;
        }
        Ok(())
    };
    for (archive_id, files) in &archives {
        for chunk in files.chunks(REQUEST_FILES) {
            if archive(*archive_id, chunk.iter().map(|(f, _, _)| *f).collect()).is_ok() {
                continue;
            }
            // A request is all or none: one file the catalog has stale (removed, busy) must
            // not hold back the others, so one by one.
            for (fid, e, _) in chunk {
                if let Err(err) = archive(*archive_id, vec![*fid]) {
                    crate::errors::report(&err.context(format!("archive of {}", e.path)));
                    failed += 1;
                }
            }
        }
    }
    for (_, e, _) in &releases {
        let full_path = a.mount.join(e.path.trim_start_matches('/'));
        if let Err(err) = xattr::set(&full_path, vx::HSM_RELEASE, b"1") {
            crate::errors::report(&err.context(format!("release of {}", e.path)));
            failed += 1;
        }
    }
    if !migrations.is_empty() {
        let mut tool = crate::tool::Tool::new("weft_policy")?;
        for (_, e, rule) in &migrations {
            let spec = weft_proto::StripeSpec {
                pool: rule.pool.clone(),
                stripe_count: rule.stripe_count.unwrap_or(0),
                ..weft_proto::StripeSpec::unset()
            };
            let full_path = a.mount.join(e.path.trim_start_matches('/'));
            let moved = tool.on(&full_path, |c, who, fid| async move { c.migrate(&who, fid, &spec).await });
            if let Err(err) = moved {
                crate::errors::report(&err.context(format!("migration of {}", e.path)));
                failed += 1;
            }
        }
    }
    println!("{} actions done, {failed} failed", planned - failed);
    if failed > 0 {
        bail!("{failed} of {planned} actions failed");
    }
    Ok(())
}

/// Writes the catalog durably (a temporary file synced, renamed, the directory synced).
fn save(dir: &Path, catalog: &Catalog) -> anyhow::Result<()> {
    use std::io::Write;
    let tmp = dir.join("catalog.json.tmp");
    let mut f = std::fs::File::create(&tmp).with_context(|| tmp.display().to_string())?;
    f.write_all(&serde_json::to_vec(catalog)?)?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join("catalog.json"))?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::msg::hsm::{HS_ARCHIVED, HS_DIRTY, HS_EXISTS, HS_NOARCHIVE};

    fn entry(path: &str, size: u64, mtime: i64, states: u32) -> Entry {
        Entry { path: path.into(), size, mtime, states, pools: vec![None] }
    }

    #[test]
    fn rules_name_files_by_place_age_size_state_and_fullness() {
        let rules = parse_rules(
            "[[rule]]\nname = \"old\"\naction = \"archive\"\nunder = \"/proj\"\nnot_modified_for = \"1h\"\n\
             [[rule]]\nname = \"big\"\naction = \"release\"\nlarger_than = \"1M\"\nwhen_ost_full = 80\n",
        )
        .unwrap();
        let now = 100_000;
        let (old, big) = (&rules[0], &rules[1]);
        assert!(names(old, &entry("/proj/a", 1, now - 3600, 0), now, 0));
        assert!(!names(old, &entry("/proj/a", 1, now - 3599, 0), now, 0), "too young");
        assert!(!names(old, &entry("/projects/a", 1, 0, 0), now, 0), "not under /proj");
        assert!(!names(old, &entry("/proj/a", 1, 0, HS_EXISTS | HS_ARCHIVED), now, 0), "archived already");
        assert!(names(old, &entry("/proj/a", 1, 0, HS_EXISTS | HS_ARCHIVED | HS_DIRTY), now, 0), "dirty");
        assert!(!names(old, &entry("/proj/a", 1, 0, HS_NOARCHIVE), now, 0));
        let archived = HS_EXISTS | HS_ARCHIVED;
        assert!(names(big, &entry("/x", 2 << 20, now, archived), now, 80));
        assert!(!names(big, &entry("/x", 2 << 20, now, archived), now, 79), "OSTs not full enough");
        assert!(!names(big, &entry("/x", 1 << 20, now, archived), now, 90), "not larger than 1M");
        assert!(!names(big, &entry("/x", 2 << 20, now, 0), now, 90), "never archived");
        assert!(!names(big, &entry("/x", 2 << 20, now, archived | HS_RELEASED), now, 90));
    }

    #[test]
    fn bad_configs_name_the_rule_and_the_field() {
        let e = |t: &str| format!("{:#}", parse_rules(t).unwrap_err());
        assert!(e("[[rule]]\nname = \"r\"\naction = \"delete\"\n").contains("rule r: action 'delete'"));
        assert!(e("[[rule]]\nname = \"r\"\naction = \"archive\"\nunder = \"proj\"\n")
            .contains("from the file system's root"));
        assert!(
            e("[[rule]]\nname = \"r\"\naction = \"archive\"\nnot_modified_for = \"1y\"\n").contains("not_modified_for")
        );
        assert!(e("[[rule]]\nname = \"r\"\naction = \"archive\"\nolder = 1\n").contains("unknown field"));
        assert!(e("").contains("no [[rule]]"));
        assert!(e("[[rule]]\nname = \"r\"\naction = \"migrate\"\n").contains("needs a pool"));
        assert!(e("[[rule]]\nname = \"r\"\naction = \"release\"\npool = \"slow\"\n").contains("go with action"));
    }

    #[test]
    fn a_migrate_rule_names_files_with_data_outside_its_pool() {
        let rules = parse_rules(
            "[[rule]]\nname = \"cold\"\naction = \"migrate\"\npool = \"slow\"\nnot_modified_for = \"1d\"\n",
        )
        .unwrap();
        let now = 1_000_000;
        let mut e = entry("/a", 1, now - 2 * 86400, 0);
        e.pools = vec![Some("fast".into()), Some("fast".into())];
        assert!(names(&rules[0], &e, now, 0));
        e.pools = vec![Some("slow".into())];
        assert!(!names(&rules[0], &e, now, 0), "in the pool already");
        e.pools = vec![Some("fast".into())];
        e.mtime = now - 3600;
        assert!(!names(&rules[0], &e, now, 0), "not cold yet");
    }
}
