//! `weft pool new|add|remove|list|destroy`: OST pools, as `lctl pool_*`; and `weft pool
//! set`, a pool's settings (Weft's own: whether new files' mirrors in it are written
//! synchronously). A pool is named
//! `FSNAME.POOL` (or just `POOL`); OSTs by index (`0,2-3`) or by name (`weft-OST0002`,
//! `weft-OST[0-3]`, hex as Lustre names them).

use crate::param::{ask_management, management, ServersArgs};
use anyhow::{anyhow, bail};
use clap::{Args, Subcommand};
use weft_proto::msg::{mgs, ClusterMap, TargetKind};

#[derive(Args)]
pub struct PoolArgs {
    #[command(subcommand)]
    command: PoolCommand,
    #[command(flatten)]
    at: ServersArgs,
}

#[derive(Subcommand)]
enum PoolCommand {
    /// Create an empty pool (lctl pool_new).
    New { pool: String },
    /// Add OSTs to a pool (lctl pool_add): indices (0,2-3) or names (weft-OST[0-3]).
    Add {
        pool: String,
        #[arg(required = true)]
        osts: Vec<String>,
    },
    /// Take OSTs out of a pool (lctl pool_remove).
    Remove {
        pool: String,
        #[arg(required = true)]
        osts: Vec<String>,
    },
    /// The pools, or one pool's OSTs (lctl pool_list).
    List {
        /// FSNAME, FSNAME.POOL or POOL; default: every pool.
        name: Option<String>,
        /// JSON for programs.
        #[arg(long)]
        json: bool,
    },
    /// Remove an empty pool (lctl pool_destroy).
    Destroy { pool: String },
    /// A pool's settings: with --sync-mirrors on, a new file with a mirror in the pool
    /// writes its mirrors synchronously, as `weft mirror create --sync` makes it.
    Set {
        pool: String,
        /// Whether new files' mirrors in this pool are written synchronously.
        #[arg(long, value_name = "on|off", value_parser = ["on", "off"])]
        sync_mirrors: String,
    },
}

/// The pool's name without the file system's (`weft.fast` or `fast`), the file system's
/// name checked when given.
fn pool_name<'a>(text: &'a str, map: &ClusterMap) -> anyhow::Result<&'a str> {
    match text.split_once('.') {
        Some((fs, pool)) if fs == map.fsname => Ok(pool),
        Some((fs, _)) => bail!("pool '{text}' names file system '{fs}'; this one is '{}'", map.fsname),
        None => Ok(text),
    }
}

/// OST indices from words like `0,2-3`, `weft-OST0002` or `weft-OST[0-3]`.
pub(crate) fn ost_indices(words: &[String], fsname: &str) -> anyhow::Result<Vec<u32>> {
    let mut out = Vec::new();
    let prefix = format!("{fsname}-OST");
    for w in words {
        let w = w.trim_end_matches("_UUID");
        match w.strip_prefix(&prefix) {
            Some(rest) => {
                let hex = |t: &str| {
                    u32::from_str_radix(t, 16).map_err(|_| anyhow!("OST name '{w}': '{t}' is not a hex index"))
                };
                match rest.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
                    Some(range) => {
                        for part in range.split(',') {
                            match part.split_once('-') {
                                Some((a, b)) => out.extend(hex(a)?..=hex(b)?),
                                None => out.push(hex(part)?),
                            }
                        }
                    }
                    None => out.push(hex(rest)?),
                }
            }
            None if w.contains("-OST") => bail!("OST name '{w}' is not of file system '{fsname}'"),
            None => out.extend(crate::lfs::parse_ost_list(w)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

pub fn pool(a: PoolArgs) -> anyhow::Result<()> {
    let (rt, mgs) = management(&a.at)?;
    let map = rt
        .block_on(weft_rpc::map::fetch_map_from(&mgs, mgs.options().request_timeout))
        .map_err(|e| anyhow!("cannot reach the management service at {}: {}", mgs.list(), e.message))?;
    let fs = map.fsname.clone();
    match a.command {
        PoolCommand::New { pool } => {
            let pool = pool_name(&pool, &map)?.to_string();
            ask_management(&rt, &mgs, mgs::PoolNew { pool })?;
        }
        PoolCommand::Add { pool, osts } => {
            let pool = pool_name(&pool, &map)?.to_string();
            if !map.pools.contains_key(&pool) {
                bail!("no pool '{fs}.{pool}': create it with weft pool new {fs}.{pool}");
            }
            ask_management(&rt, &mgs, mgs::PoolAdd { pool, osts: ost_indices(&osts, &fs)? })?;
        }
        PoolCommand::Remove { pool, osts } => {
            let pool = pool_name(&pool, &map)?.to_string();
            ask_management(&rt, &mgs, mgs::PoolRemove { pool, osts: ost_indices(&osts, &fs)? })?;
        }
        PoolCommand::Destroy { pool } => {
            let pool = pool_name(&pool, &map)?.to_string();
            ask_management(&rt, &mgs, mgs::PoolDestroy { pool })?;
        }
        PoolCommand::Set { pool, sync_mirrors } => {
            let pool = pool_name(&pool, &map)?.to_string();
            if !map.pools.contains_key(&pool) {
                bail!("no pool '{fs}.{pool}': create it with weft pool new {fs}.{pool}");
            }
            let sync_mirrors = sync_mirrors == "on";
            ask_management(&rt, &mgs, mgs::PoolSet { pool, sync_mirrors })?;
        }
        PoolCommand::List { name, json } => {
            let one = match name.as_deref() {
                None => None,
                Some(n) if n == fs => None,
                Some(n) => Some(pool_name(n, &map)?.to_string()),
            };
            if json {
                let pools: Vec<_> = map
                    .pools
                    .iter()
                    .filter(|(p, _)| one.as_ref().is_none_or(|o| o == *p))
                    .map(|(p, osts)| {
                        let sync_mirrors = map.sync_mirror_pools.contains(p);
                        serde_json::json!({"pool": format!("{fs}.{p}"), "osts": osts, "sync_mirrors": sync_mirrors})
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&pools)?);
                return Ok(());
            }
            match one {
                None => {
                    println!("Pools from {fs}:");
                    for p in map.pools.keys() {
                        println!("{fs}.{p}");
                    }
                }
                Some(p) => {
                    let osts =
                        map.pools.get(&p).ok_or_else(|| anyhow!("no pool '{fs}.{p}': weft pool list shows them"))?;
                    println!("Pool: {fs}.{p}");
                    for o in osts {
                        println!("{}_UUID", weft_proto::msg::target_name(&fs, TargetKind::Ost, *o));
                    }
                    // Weft's own setting, after Lustre's lines (shown only when on).
                    if map.sync_mirror_pools.contains(&p) {
                        println!("sync_mirrors: on");
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osts_by_index_range_and_lustre_name() {
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(ost_indices(&w(&["0,2-3"]), "weft").unwrap(), [0, 2, 3]);
        assert_eq!(ost_indices(&w(&["weft-OST000a", "weft-OST[0-1]"]), "weft").unwrap(), [0, 1, 10]);
        assert_eq!(ost_indices(&w(&["weft-OST0001_UUID"]), "weft").unwrap(), [1]);
        assert!(ost_indices(&w(&["other-OST0001"]), "weft").unwrap_err().to_string().contains("'weft'"));
    }
}
