//! `weft mirror create|extend|split|resync|verify`: files with mirrors (Lustre's FLR, `lfs
//! mirror`). `-N[COUNT]` starts a group of mirrors whose options follow it (`-N -o 0 -N -o 2`,
//! `-N2 -c 2`, components with -E); the data is copied by a client of this process's own.
//! `create --sync` makes the mirrors written synchronously (every write to each of them).

use crate::lfs::{group_spec, words_after, LayoutOptions};
use crate::tool::Tool;
use anyhow::{anyhow, bail};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use weft_proto::StripeSpec;

#[derive(Args)]
pub struct MirrorArgs {
    #[command(subcommand)]
    command: MirrorCommand,
}

#[derive(Args)]
pub struct MirrorLayoutArgs {
    /// Mirrors (as many as COUNT, 1 without it) whose options follow, up to the next -N.
    #[arg(short = 'N', long = "mirror-count", num_args = 0..=1, default_missing_value = "1", value_name = "COUNT", action = clap::ArgAction::Append)]
    mirrors: Vec<u16>,
    #[command(flatten)]
    layout: LayoutOptions,
    /// Write the mirrors synchronously (create only; Weft's own): every write goes to each
    /// mirror in sync, so the loss of one OST loses neither data nor the file; a mirror
    /// whose OST fails goes stale and is resynced once it answers again.
    #[arg(long)]
    sync: bool,
    file: PathBuf,
}

#[derive(Subcommand)]
enum MirrorCommand {
    /// Create a file with mirrors (lfs mirror create -N2, -N -p fast -N -p slow, ...).
    Create(MirrorLayoutArgs),
    /// Add mirrors to a file and copy its data into them (lfs mirror extend -N [options]).
    Extend(MirrorLayoutArgs),
    /// Remove a mirror and destroy its objects (lfs mirror split --mirror-id ID -d).
    Split {
        #[arg(long = "mirror-id", value_name = "ID")]
        mirror_id: u16,
        /// Destroy the mirror (the only way here: no split-off copy is kept).
        #[arg(short = 'd', long = "destroy")]
        destroy: bool,
        file: PathBuf,
    },
    /// Copy the data of the mirror in sync into the stale ones (lfs mirror resync).
    Resync {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Compare the mirrors' data; exits with 1 if any differs (lfs mirror verify).
    Verify {
        /// A line for every mirror, not only those that differ.
        #[arg(short = 'v', long)]
        verbose: bool,
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

/// The mirrors' specs of a create or extend: one per mirror, from each `-N` group of the
/// words after `command`.
fn mirror_specs(command: &str, a: &MirrorLayoutArgs) -> anyhow::Result<Vec<StripeSpec>> {
    let words = words_after(command);
    let mut words: Vec<&str> = words.iter().map(String::as_str).filter(|w| *w != "--sync").collect();
    if words.last().map(std::path::Path::new) == Some(a.file.as_path()) {
        words.pop();
    }
    let starts: Vec<usize> = words
        .iter()
        .enumerate()
        .filter(|(_, w)| w.starts_with("-N") || w.starts_with("--mirror-count"))
        .map(|(i, _)| i)
        .collect();
    if starts.first() != Some(&0) {
        bail!("give each mirror's options after its -N (e.g. -N -o 0 -N -o 2, or -N2)");
    }
    let mut specs = Vec::new();
    let ends: Vec<usize> = starts.iter().skip(1).copied().chain([words.len()]).collect();
    for (&start, &end) in starts.iter().zip(&ends) {
        let head = words[start];
        let mut rest = &words[start + 1..end];
        let count_text = head.strip_prefix("--mirror-count=").or(head.strip_prefix("-N")).unwrap_or("");
        let count: u16 = match count_text {
            "" if head == "--mirror-count" || rest.first().is_some_and(|w| w.parse::<u16>().is_ok()) => {
                let c = rest.first().ok_or_else(|| anyhow!("--mirror-count needs a number"))?;
                rest = &rest[1..];
                c.parse().map_err(|_| anyhow!("mirror count '{c}' is not a number"))?
            }
            "" => 1,
            t => t.parse().map_err(|_| anyhow!("mirror count (-N) '{t}' is not a number"))?,
        };
        let spec = if rest.is_empty() { StripeSpec::unset() } else { group_spec(rest)? };
        specs.extend(std::iter::repeat_n(spec, usize::from(count)));
    }
    Ok(specs)
}

pub fn mirror(a: MirrorArgs) -> anyhow::Result<()> {
    match a.command {
        MirrorCommand::Create(c) => {
            let mirrors = mirror_specs("create", &c)?;
            let spec = StripeSpec { mirrors, ..StripeSpec::unset() };
            spec.validate().map_err(|e| anyhow!("{}", e.message))?;
            if c.sync && spec.mirrors.len() < 2 {
                bail!("--sync needs at least two mirrors (-N2, or -N ... -N ...)");
            }
            crate::lfs::apply_layout(&c.file, spec)?;
            if c.sync {
                let mut tool = Tool::new("weft_mirror")?;
                tool.on(&c.file, |client, who, fid| async move { client.mirror_set_sync(&who, fid, true).await })
                    .map_err(|e| anyhow!("{}: {e}", c.file.display()))?;
            }
            Ok(())
        }
        MirrorCommand::Extend(c) => {
            if c.sync {
                bail!("--sync is given at create: an extended file keeps whether its mirrors are synchronous");
            }
            let mut tool = Tool::new("weft_mirror")?;
            for spec in mirror_specs("extend", &c)? {
                spec.validate().map_err(|e| anyhow!("{}", e.message))?;
                tool.on(&c.file, |client, who, fid| async move { client.mirror_extend(&who, fid, spec).await })
                    .map_err(|e| anyhow!("{}: {e}", c.file.display()))?;
            }
            Ok(())
        }
        MirrorCommand::Split { mirror_id, destroy, file } => {
            if !destroy {
                bail!("give -d: weft mirror split destroys the mirror (no split-off copy is kept)");
            }
            let mut tool = Tool::new("weft_mirror")?;
            tool.on(&file, |client, who, fid| async move { client.mirror_split(&who, fid, mirror_id).await })
                .map_err(|e| anyhow!("{}: {e}", file.display()))?;
            Ok(())
        }
        MirrorCommand::Resync { files } => {
            let mut tool = Tool::new("weft_mirror")?;
            let mut failed = 0;
            for f in &files {
                if let Err(e) = tool.on(f, |client, who, fid| async move { client.mirror_resync(&who, fid).await }) {
                    eprintln!("weft mirror resync: {}: {e}", f.display());
                    failed += 1;
                }
            }
            if failed > 0 {
                bail!("{failed} of {} files were not resynced (above)", files.len());
            }
            Ok(())
        }
        MirrorCommand::Verify { verbose, files } => {
            let mut tool = Tool::new("weft_mirror")?;
            let mut bad = 0;
            for f in &files {
                let checks = tool.on(f, |client, who, fid| async move { client.mirror_verify(&who, fid).await })?;
                let reference = checks.iter().find(|c| c.in_sync).map_or(0, |c| c.mirror_id);
                for c in &checks {
                    let state = if c.in_sync { "in sync" } else { "stale" };
                    match c.differs_at {
                        Some(at) => {
                            bad += 1;
                            println!(
                                "{}: mirror {} ({state}) differs from mirror {reference} at byte {at}",
                                f.display(),
                                c.mirror_id
                            );
                        }
                        None if verbose || !c.in_sync => {
                            println!(
                                "{}: mirror {} ({state}) has the data of mirror {reference}",
                                f.display(),
                                c.mirror_id
                            )
                        }
                        None => {}
                    }
                }
            }
            drop(tool);
            if bad > 0 {
                std::process::exit(1);
            }
            Ok(())
        }
    }
}
