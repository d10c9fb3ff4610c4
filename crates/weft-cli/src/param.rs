//! `weft set-param`, `get-param`, `list-param` (Lustre's `lctl set_param`, `get_param`,
//! `list_param`) against the server processes of a file system and the Weft mounts of this
//! node: the command asks the management service for the cluster map and sends the request
//! to every server process in it (or to `--server` alone), and reads or sets the mounts'
//! parameters (`jobid_var`, `jobid_name`) through their roots' virtual attributes. Output
//! is Lustre's `name=value`, each line led by the server's address or the mount's path
//! when several answer (as `clush` shows `lctl` run on each node).

use crate::limits::{PARAM_CONNECT_TIMEOUT_MS, PARAM_REQUEST_TIMEOUT_S};
use anyhow::{anyhow, bail};
use clap::Args;
use std::collections::BTreeSet;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;
use weft_client::params::{Answers, ParamServers};
use weft_proto::msg::param::{name_matches, name_or_parent_matches, ParamValue};
use weft_proto::msg::{Identity, RequestHeader};
use weft_rpc::mgs::MgsPeers;
use weft_rpc::PeerOptions;

#[derive(Args)]
pub struct ServersArgs {
    #[command(flatten)]
    at: crate::cluster_addr::MgsArgs,
    /// Only this server process (host:port), instead of every one in the cluster map.
    #[arg(long, value_name = "ADDR")]
    server: Option<String>,
}

#[derive(Args)]
pub struct SetParamArgs {
    /// Permanent: also kept by the management service, and applied by every server that
    /// has the parameter whenever it starts (and by those running now).
    #[arg(short = 'P')]
    permanent: bool,
    /// With -P: delete the permanent settings whose names NAME matches (no =VALUE); what
    /// servers run with now stays until they restart.
    #[arg(short = 'd', requires = "permanent")]
    delete: bool,
    /// NAME=VALUE, glob wildcards allowed in NAME (`ost.OSS.*.nrs_policies=tbf jobid`).
    #[arg(required = true, value_name = "NAME=VALUE")]
    params: Vec<String>,
    #[command(flatten)]
    at: ServersArgs,
}

#[derive(Args)]
pub struct GetParamArgs {
    /// Values only, without `name=`.
    #[arg(short = 'n')]
    no_name: bool,
    /// Names only.
    #[arg(short = 'N', conflicts_with = "no_name")]
    names_only: bool,
    /// Names, glob wildcards allowed in any dot-separated part (`obdfilter.*.job_stats`).
    #[arg(required = true, value_name = "NAME")]
    names: Vec<String>,
    #[command(flatten)]
    at: ServersArgs,
}

#[derive(Args)]
pub struct ListParamArgs {
    /// Names or their leading parts, glob wildcards allowed; default: every parameter.
    #[arg(value_name = "PATTERN")]
    patterns: Vec<String>,
    #[command(flatten)]
    at: ServersArgs,
}

/// The server processes to ask, their management service, and a runtime to ask them on;
/// and this node's Weft mounts.
struct Servers {
    rt: tokio::runtime::Runtime,
    /// None when no server is asked (only this node's mounts).
    servers: Option<ParamServers>,
    mounts: Vec<PathBuf>,
    /// Why no server is asked, when none is.
    no_servers: Option<String>,
}

impl Servers {
    fn find(a: &ServersArgs) -> anyhow::Result<Servers> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (connect, timeout) =
            (Duration::from_millis(PARAM_CONNECT_TIMEOUT_MS), Duration::from_secs(PARAM_REQUEST_TIMEOUT_S));
        if let Some(server) = &a.server {
            // Only for -P, which records the setting in the management service.
            let mgs = a.at.address(None).ok();
            let servers = ParamServers::one(server, mgs.as_deref(), connect, timeout);
            return Ok(Servers { rt, servers: Some(servers), mounts: Vec::new(), no_servers: None });
        }
        let mounts = crate::daemon::weft_mounts();
        let mgs = match a.at.address(None) {
            Ok(m) => m,
            // This node's mounts' own parameters can still be read and set.
            Err(e) if !mounts.is_empty() => {
                let why = format!("no server asked: {e:#} (or --server ADDR)");
                return Ok(Servers { rt, servers: None, mounts, no_servers: Some(why) });
            }
            Err(e) => return Err(e),
        };
        // One address, or a replicated MGS's: the map from its leader, and every replica asked.
        let servers =
            rt.block_on(ParamServers::of_cluster(&mgs, connect, timeout)).map_err(|e| anyhow!("{}", e.message))?;
        let addresses: BTreeSet<&str> = servers.addresses().into_iter().collect();
        // This node's mounts of that file system only (its management service is one of its
        // servers), not those of another one this node also mounts.
        let mounts = mounts
            .into_iter()
            .filter(|m| {
                crate::cluster_addr::of_mount(m).is_ok_and(|mgs| mgs.split(',').any(|a| addresses.contains(a.trim())))
            })
            .collect();
        Ok(Servers { rt, servers: Some(servers), mounts, no_servers: None })
    }

    /// The mounts' parameters `pattern` matches, per mount.
    /// A mount that went away since it was listed (unmounted by another program meanwhile)
    /// is not an error: it is no longer one of this node's mounts.
    fn mount_values(&self, pattern: &str) -> Answers<Vec<ParamValue>> {
        self.mounts
            .iter()
            .filter_map(|m| {
                // The mount matches: it answers every OST's osc.*.active, which weft.params
                // lists only some of.
                let read = crate::xattr::get_json::<Vec<ParamValue>>(m, &format!("weft.param:{pattern}"))
                    // A mount of an earlier version answers only the whole list.
                    .or_else(|_| crate::xattr::get_json::<Vec<ParamValue>>(m, "weft.params"));
                if read.is_err() && !crate::daemon::is_mounted(m) {
                    return None;
                }
                let values = read
                    .map(|all| all.into_iter().filter(|v| name_matches(pattern, &v.name)).collect::<Vec<_>>())
                    .map_err(|e| weft_proto::WeftError::io(format!("{e:#}")))
                    .and_then(|v| {
                        if v.is_empty() {
                            Err(weft_proto::WeftError::not_found(format!("no mount parameter matches '{pattern}'")))
                        } else {
                            Ok(v)
                        }
                    });
                Some((m.display().to_string(), values))
            })
            .collect()
    }

    /// Sets the mounts' parameters `pattern` matches; per mount, what it set.
    fn mount_set(&self, pattern: &str, value: &str) -> Answers<Vec<ParamValue>> {
        if !weft_fuse::params::NAMES.iter().any(|n| name_matches(pattern, n))
            && !weft_fuse::params::is_osc_active(pattern)
        {
            return Vec::new();
        }
        self.mount_values(pattern)
            .into_iter()
            .map(|(m, found)| {
                let set = found.and_then(|names| {
                    // Checked here too, so the answer reads as the servers' do (`MOUNT: why`);
                    // the mount checks again, and its own reason comes back through weft.error.
                    for v in &names {
                        weft_fuse::params::check(&v.name, value).map_err(weft_proto::WeftError::invalid)?;
                    }
                    crate::xattr::set(Path::new(&m), &format!("weft.param:{pattern}"), value.as_bytes())
                        .map_err(|e| weft_proto::WeftError::io(format!("{e:#}")))?;
                    Ok(names.into_iter().map(|v| ParamValue { name: v.name, value: value.to_string() }).collect())
                });
                (m, set)
            })
            .collect()
    }

    /// Records a permanent setting (or deletes those `name` matches) in the MGS.
    fn record(&self, name: &str, value: &str, delete: bool) -> anyhow::Result<()> {
        let Some(servers) = self.servers.as_ref().filter(|s| s.mgs().is_some()) else {
            bail!("-P keeps the setting in the management service: give --mgs ADDR (or run in a Weft mount, or where `weft up` started)");
        };
        self.rt.block_on(servers.record(&caller(), name, value, delete)).map_err(|e| anyhow!("{}", e.message))
    }

    fn get(&self, pattern: &str) -> Answers<Vec<ParamValue>> {
        self.servers.as_ref().map_or_else(Vec::new, |s| self.rt.block_on(s.get(&caller(), pattern)))
    }

    fn set(&self, pattern: &str, value: &str) -> Answers<Vec<ParamValue>> {
        self.servers.as_ref().map_or_else(Vec::new, |s| self.rt.block_on(s.set(&caller(), pattern, value)))
    }

    fn list(&self, pattern: &str) -> Answers<Vec<String>> {
        self.servers.as_ref().map_or_else(Vec::new, |s| self.rt.block_on(s.list(&caller(), pattern)))
    }
}

/// The management service `a` names (or `weft up`'s), and a runtime to ask it on.
pub(crate) fn management(a: &ServersArgs) -> anyhow::Result<(tokio::runtime::Runtime, MgsPeers)> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let opts = PeerOptions {
        connect_timeout: Duration::from_millis(PARAM_CONNECT_TIMEOUT_MS),
        request_timeout: Duration::from_secs(PARAM_REQUEST_TIMEOUT_S),
        ..PeerOptions::default()
    };
    Ok((rt, MgsPeers::new(&a.at.address(None)?, opts)))
}

/// One request to the management service, bounded by the parameter request timeout.
pub(crate) fn ask_management<O>(rt: &tokio::runtime::Runtime, mgs: &MgsPeers, op: O) -> anyhow::Result<O::Reply>
where
    O: weft_proto::msg::ops::Op<Request = weft_proto::msg::MgsRequest, Answer = weft_proto::msg::MgsReply>,
{
    rt.block_on(mgs.op(caller(), op, Duration::from_secs(PARAM_REQUEST_TIMEOUT_S)))
        .map_err(|e| anyhow!("management service at {}: {}", mgs.list(), e.message))
}

pub(crate) fn caller() -> RequestHeader {
    // SAFETY: geteuid and getegid have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    RequestHeader {
        identity: Identity { uid, gid, groups: Vec::new() },
        jobid: "weft".into(),
        ..RequestHeader::default()
    }
}

/// Prints `name=value` lines (multi-line values as `name=` then the lines), led by the
/// server's address when several servers answered. A reader that went away (`| head`)
/// ends the printing quietly.
fn print_values(answers: &[(String, Vec<ParamValue>)], no_name: bool, names_only: bool) {
    use std::io::Write;
    let several = answers.iter().filter(|(_, v)| !v.is_empty()).count() > 1;
    let mut out = std::io::stdout().lock();
    for (server, values) in answers {
        let lead = if several { format!("{server}: ") } else { String::new() };
        for v in values {
            let value = v.value.trim_end_matches('\n');
            let text = match (names_only, no_name, value.contains('\n')) {
                (true, ..) => v.name.clone(),
                (false, true, _) => value.to_string(),
                (false, false, true) => format!("{}=\n{value}", v.name),
                (false, false, false) => format!("{}={value}", v.name),
            };
            for line in text.lines() {
                if writeln!(out, "{lead}{line}").is_err() {
                    return;
                }
            }
        }
    }
}

/// What answered with values: each server's address or mount's path, and the values.
type Found = Vec<(String, Vec<ParamValue>)>;

/// Splits the answers into values and failures; fails when nothing matched anywhere, with
/// each server's reason.
fn gather(
    what: &str,
    answers: Answers<Vec<ParamValue>>,
    no_servers: Option<&str>,
) -> anyhow::Result<(Found, Vec<String>)> {
    let mut found = Vec::new();
    let mut failed = Vec::new();
    let mut unmatched = Vec::new();
    for (server, answer) in answers {
        match answer {
            Ok(values) => found.push((server, values)),
            Err(e) if e.code == weft_proto::ErrorCode::NotFound => unmatched.push(format!("{server}: {}", e.message)),
            Err(e) => failed.push(format!("{server}: {}", e.message)),
        }
    }
    if let Some(why) = no_servers {
        unmatched.push(why.to_string());
    }
    if found.is_empty() && failed.is_empty() {
        bail!("no server has a parameter matching '{what}' (weft list-param shows them)\n{}", unmatched.join("\n"));
    }
    Ok((found, failed))
}

fn finish(failed: Vec<String>) -> anyhow::Result<()> {
    if failed.is_empty() {
        return Ok(());
    }
    bail!("{}", failed.join("\n"))
}

pub fn set_param(a: SetParamArgs) -> anyhow::Result<()> {
    let servers = Servers::find(&a.at)?;
    let mut failed = Vec::new();
    for p in &a.params {
        if a.delete {
            let name = p.split_once('=').map_or(p.as_str(), |(n, _)| n);
            servers.record(name, "", true)?;
            continue;
        }
        let Some((name, value)) = p.split_once('=') else {
            bail!("'{p}' is not NAME=VALUE");
        };
        // Applied now first: a name or value the servers refuse is not kept. A mount
        // parameter is kept once its value is good, whether or not a mount is here: the
        // mounts of other nodes apply it.
        let mut answers = servers.set(name, value);
        answers.extend(servers.mount_set(name, value));
        let client_param: Vec<&str> = weft_fuse::params::NAMES.into_iter().filter(|n| name_matches(name, n)).collect();
        let (found, f) = match gather(name, answers, servers.no_servers.as_deref()) {
            Ok(r) => r,
            Err(_) if a.permanent && !client_param.is_empty() => (Vec::new(), Vec::new()),
            Err(e) => return Err(e),
        };
        print_values(&found, false, false);
        if a.permanent {
            for n in &client_param {
                weft_fuse::params::check(n, value).map_err(|e| anyhow!("{e}"))?;
            }
            if !f.is_empty() {
                bail!("not kept permanently, as servers refused it:\n{}", f.join("\n"));
            }
            servers.record(name, value, false)?;
        }
        failed.extend(f);
    }
    finish(failed)
}

pub fn get_param(a: GetParamArgs) -> anyhow::Result<()> {
    let servers = Servers::find(&a.at)?;
    let mut failed = Vec::new();
    for name in &a.names {
        let mut answers = servers.get(name);
        answers.extend(servers.mount_values(name));
        let (found, f) = gather(name, answers, servers.no_servers.as_deref())?;
        print_values(&found, a.no_name, a.names_only);
        failed.extend(f);
    }
    finish(failed)
}

pub fn list_param(a: ListParamArgs) -> anyhow::Result<()> {
    let servers = Servers::find(&a.at)?;
    let patterns = if a.patterns.is_empty() { vec!["*".to_string()] } else { a.patterns.clone() };
    let mut names = BTreeSet::new();
    let mut failed = Vec::new();
    for pattern in &patterns {
        for (server, answer) in servers.list(pattern) {
            match answer {
                Ok(n) => names.extend(n),
                Err(e) => failed.push(format!("{server}: {}", e.message)),
            }
        }
        if !servers.mounts.is_empty() {
            names.extend(
                weft_fuse::params::NAMES.iter().filter(|n| name_or_parent_matches(pattern, n)).map(|n| n.to_string()),
            );
        }
    }
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for name in names {
        if writeln!(out, "{name}").is_err() {
            break;
        }
    }
    finish(failed)
}
