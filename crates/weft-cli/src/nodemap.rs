//! `weft nodemap ...`: which client addresses get which identity policy, as Lustre's `lctl
//! nodemap_*` (see weft-proto's `nodemap` module for what each property does). The
//! management service keeps the nodemaps in its cluster map; every server follows it and
//! maps requests within a second or so of a change. Root only, except list and info.

use crate::param::{ask_management, management, ServersArgs};
use anyhow::anyhow;
use clap::{Args, Subcommand};
use weft_proto::msg::{mgs, ClusterMap};
use weft_proto::nodemap::{parse_on_off, parse_range, IdType, NodemapCommand, DEFAULT_NODEMAP};

#[derive(Args)]
pub struct NodemapArgs {
    #[command(subcommand)]
    command: NodemapSub,
    #[command(flatten)]
    at: ServersArgs,
}

#[derive(Args)]
struct Named {
    /// The nodemap.
    #[arg(long)]
    name: String,
}

#[derive(Args)]
struct Idmap {
    #[arg(long)]
    name: String,
    /// uid, gid or projid.
    #[arg(long, value_name = "uid|gid|projid")]
    idtype: String,
    /// CLIENTID:FSID: the id a client of the nodemap uses, and the one the file system keeps;
    /// or ranges of one length, CLIENTID-END:FSID-END.
    #[arg(long, value_name = "CLIENTID:FSID")]
    idmap: String,
}

#[derive(Subcommand)]
enum NodemapSub {
    /// Put the nodemaps in force (1) or not (0) (lctl nodemap_activate); also on/off.
    Activate { value: String },
    /// A new nodemap (lctl nodemap_add): not admin, not trusted, squashing to 65534.
    Add {
        /// Its name (or --name).
        #[arg(required_unless_present = "name")]
        nodemap: Option<String>,
        #[arg(long, conflicts_with = "nodemap")]
        name: Option<String>,
    },
    /// Remove a nodemap (lctl nodemap_del); its clients fall into `default`.
    Del {
        #[arg(required_unless_present = "name")]
        nodemap: Option<String>,
        #[arg(long, conflicts_with = "nodemap")]
        name: Option<String>,
    },
    /// Give a nodemap a range of client addresses (lctl nodemap_add_range): 10.0.0.5,
    /// 10.0.0.0/24 or 10.0.0.[2-20], optionally @tcp; ranges of nodemaps may not overlap.
    AddRange {
        #[arg(long)]
        name: String,
        #[arg(long)]
        range: String,
    },
    /// Take a range from a nodemap (lctl nodemap_del_range), given as it was added.
    DelRange {
        #[arg(long)]
        name: String,
        #[arg(long)]
        range: String,
    },
    /// Map a client id to a file system id (lctl nodemap_add_idmap).
    AddIdmap(Idmap),
    /// Remove an id mapping (lctl nodemap_del_idmap).
    DelIdmap(Idmap),
    /// Set a property (lctl nodemap_modify): admin, trusted, squash_uid, squash_gid,
    /// squash_projid, deny_unknown, readonly_mount; `--property P=V` also works.
    Modify {
        #[arg(long)]
        name: String,
        #[arg(long)]
        property: String,
        #[arg(long)]
        value: Option<String>,
    },
    /// The directory the nodemap's clients see as their root (lctl nodemap_fileset_add).
    FilesetAdd {
        #[arg(long)]
        name: String,
        #[arg(long)]
        fileset: String,
    },
    /// Remove a nodemap's fileset (lctl nodemap_fileset_del): its clients see the root.
    FilesetDel(Named),
    /// The nodemaps' names, `default` first.
    List {
        /// JSON for programs: every nodemap with its settings.
        #[arg(long)]
        json: bool,
    },
    /// Every setting of one nodemap, as `weft get-param nodemap.NAME.*` prints them; without
    /// a name, the names of the parameters (lctl nodemap_info).
    Info { nodemap: Option<String> },
    /// The nodemap a client address falls in (lctl nodemap_test_nid).
    TestNid { nid: String },
}

fn either(positional: Option<String>, named: Option<String>) -> String {
    positional.or(named).unwrap_or_default()
}

pub fn nodemap(a: NodemapArgs) -> anyhow::Result<()> {
    let (rt, mgs) = management(&a.at)?;
    let fetch = || {
        rt.block_on(weft_rpc::map::fetch_map_from(&mgs, mgs.options().request_timeout))
            .map_err(|e| anyhow!("cannot reach the management service at {}: {}", mgs.list(), e.message))
    };
    let command = match a.command {
        NodemapSub::Activate { value } => {
            NodemapCommand::Activate(parse_on_off(&value).map_err(|e| anyhow!(e.message))?)
        }
        NodemapSub::Add { nodemap, name } => NodemapCommand::Add { name: either(nodemap, name) },
        NodemapSub::Del { nodemap, name } => NodemapCommand::Del { name: either(nodemap, name) },
        NodemapSub::AddRange { name, range } => {
            parse_range(&range).map_err(|e| anyhow!(e.message))?;
            NodemapCommand::AddRange { name, range }
        }
        NodemapSub::DelRange { name, range } => NodemapCommand::DelRange { name, range },
        NodemapSub::AddIdmap(i) => {
            let idtype = IdType::parse(&i.idtype).map_err(|e| anyhow!(e.message))?;
            NodemapCommand::AddIdmap { name: i.name, idtype, idmap: i.idmap }
        }
        NodemapSub::DelIdmap(i) => {
            let idtype = IdType::parse(&i.idtype).map_err(|e| anyhow!(e.message))?;
            NodemapCommand::DelIdmap { name: i.name, idtype, idmap: i.idmap }
        }
        NodemapSub::Modify { name, property, value } => {
            let (property, value) = match (property.split_once('='), value) {
                (Some((p, v)), None) => (p.to_string(), v.to_string()),
                (None, Some(v)) => (property, v),
                _ => anyhow::bail!("give --property PROPERTY --value VALUE (or --property PROPERTY=VALUE)"),
            };
            NodemapCommand::Modify { name, property, value }
        }
        NodemapSub::FilesetAdd { name, fileset } => NodemapCommand::SetFileset { name, fileset: Some(fileset) },
        NodemapSub::FilesetDel(n) => NodemapCommand::SetFileset { name: n.name, fileset: None },
        NodemapSub::List { json } => return list(&fetch()?, json),
        NodemapSub::Info { nodemap } => return info(&fetch()?, nodemap.as_deref()),
        NodemapSub::TestNid { nid } => {
            let (ip, _) = parse_range(&nid).map_err(|e| anyhow!(e.message))?;
            let map = fetch()?;
            println!("{}", map.nodemap.classify(std::net::Ipv4Addr::from(ip).into()).name);
            return Ok(());
        }
    };
    ask_management(&rt, &mgs, mgs::Nodemap { command })?;
    Ok(())
}

fn list(map: &ClusterMap, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&map.nodemap)?);
        return Ok(());
    }
    for m in &map.nodemap.maps {
        println!("{}", m.name);
    }
    Ok(())
}

fn info(map: &ClusterMap, name: Option<&str>) -> anyhow::Result<()> {
    let values = map.nodemap.param_values();
    match name {
        None => {
            println!("nodemap.active");
            for m in &map.nodemap.maps {
                println!("nodemap.{}", m.name);
            }
        }
        Some(name) => {
            if map.nodemap.get(name).is_none() {
                anyhow::bail!("no nodemap '{name}' (weft nodemap list shows them; '{DEFAULT_NODEMAP}' always exists)");
            }
            let prefix = format!("nodemap.{name}.");
            for (n, v) in values.iter().filter(|(n, _)| n.starts_with(&prefix)) {
                if v.contains('\n') {
                    println!("{n}=\n{v}");
                } else {
                    println!("{n}={v}");
                }
            }
        }
    }
    Ok(())
}
