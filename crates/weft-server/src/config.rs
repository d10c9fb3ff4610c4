//! The server config file (TOML). Example, one node running every role:
//!
//! ```toml
//! fsname = "weft"
//! data_dir = "/srv/weft"
//! listen = "127.0.0.2:9800"
//! mgs_address = "127.0.0.2:9800"   # where the management service runs; a replicated
//! #                  # one's replicas as a list: "127.0.0.2:9800,127.0.0.3:9800,127.0.0.4:9800"
//!
//! [mgs]              # present: run the management service here
//! # replicas = ["127.0.0.2:9800", "127.0.0.3:9800", "127.0.0.4:9800"]
//! #                  # a replicated MGS: every server holding a replica, this one among them
//!
//! [mds]
//! index = 0          # the MDT this node serves
//! # replicas = ["127.0.0.2:9800", "127.0.0.3:9800", "127.0.0.4:9800"]
//! #                  # a replicated MDT: every server holding a replica, this one among them
//! # join = true      # this replica joins a running group (`weft replica add`): its
//! #                  # `replicas` lists every replica the group ever had, then itself
//!
//! [oss]
//! osts = [0, 7]      # OST indices served here; sparse is fine; each in data_dir/ost<index hex>
//! # failover_osts = [2, 3]  # OSTs this node may take over when their node dies (shared
//! #                  # storage: the same data_dir/ost<index hex> reachable from both)
//! ```
//!
//! `metrics_listen = "127.0.0.2:9101"` (top level) serves Prometheus metrics over HTTP at
//! `/metrics` there; without it there is no endpoint. `monitor_interval_s = 10` (the
//! default; 0 for none) is how often the management service's monitor records every
//! server's usage in its history.

use crate::limits::FSNAME_BYTES_MAX;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    pub fsname: String,
    pub data_dir: PathBuf,
    /// `host:port` to listen on; port 0 picks a free port (only sensible with `[mgs]` here).
    pub listen: String,
    /// `host:port` of the management service; may be this node's own `listen`. A replicated
    /// MGS's replicas separated by commas (`a:p,b:p,c:p`): requests go to the one that
    /// leads. Empty with `[mgs]` here: this node (or `[mgs] replicas`).
    pub mgs_address: String,
    #[serde(default)]
    pub mgs: Option<MgsRole>,
    #[serde(default)]
    pub mds: Option<MdsRole>,
    #[serde(default)]
    pub oss: Option<OssRole>,
    /// How long a client may take to answer a lock callback before it is evicted.
    #[serde(default = "default_lock_timeout_ms")]
    pub lock_timeout_ms: u64,
    /// How often this node's OSTs (and its MDT's data-on-MDT objects) commit what they
    /// wrote: the writes a power loss can take back, which clients keep to replay.
    #[serde(default = "default_commit_interval_ms")]
    pub commit_interval_ms: u64,
    /// `host:port` of the HTTP metrics endpoint (`/metrics`); none when unset.
    #[serde(default)]
    pub metrics_listen: Option<String>,
    /// With `[mgs]`: seconds between the monitor's scrapes of every server into the
    /// history (`weft stats`, `weft top`); 0 for no monitor.
    #[serde(default = "default_monitor_interval_s")]
    pub monitor_interval_s: u64,
    /// The file system's shared key file (`weft key new`): every connection to this node
    /// must prove it, and this node's own connections prove it. None: no key.
    #[serde(default)]
    pub key: Option<PathBuf>,
}

impl ServerConfig {
    /// Every role in one process (MGS, MDT 0, the OSTs `osts`) on a free loopback port, with
    /// the default lock timeout, no metrics endpoint and no monitor: `weft up`'s shape (which
    /// adds both), the network simulation's and the tests'.
    pub fn all_in_one(data_dir: PathBuf, osts: Vec<u32>) -> ServerConfig {
        ServerConfig {
            fsname: "weft".into(),
            data_dir,
            listen: "127.0.0.1:0".into(),
            mgs_address: String::new(),
            mgs: Some(MgsRole::default()),
            mds: Some(MdsRole { index: 0, replicas: Vec::new(), join: false }),
            oss: Some(OssRole { osts, failover_osts: Vec::new() }),
            lock_timeout_ms: LOCK_TIMEOUT_MS_DEFAULT,
            commit_interval_ms: crate::limits::OST_COMMIT_INTERVAL_MS,
            metrics_listen: None,
            monitor_interval_s: 0,
            key: None,
        }
    }
}

fn default_monitor_interval_s() -> u64 {
    crate::limits::MONITOR_INTERVAL_S_DEFAULT
}

/// The default of `lock_timeout_ms` (kept with the other bounds in [`crate::limits`]).
pub use crate::limits::LOCK_TIMEOUT_MS_DEFAULT;

fn default_commit_interval_ms() -> u64 {
    crate::limits::OST_COMMIT_INTERVAL_MS
}

fn default_lock_timeout_ms() -> u64 {
    LOCK_TIMEOUT_MS_DEFAULT
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct MgsRole {
    /// A replicated MGS: the `host:port` of every server process holding a replica, this
    /// one's `listen` among them (an odd number). Empty: a single MGS.
    #[serde(default)]
    pub replicas: Vec<String>,
    /// This replica joins a running group: as [`MdsRole::join`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub join: bool,
}

impl MgsRole {
    /// This server's replica id in the MGS's group, and the members it starts the group
    /// with (none when it joins); None for a single MGS.
    pub fn group(&self, listen: &str) -> anyhow::Result<Option<(u64, std::collections::BTreeMap<u64, String>)>> {
        replica_group("[mgs]", &self.replicas, self.join, listen)
    }
}

/// The replica id of the server listening at `listen` among `replicas` (1 + its place), and
/// the members it starts its group with: all of `replicas` for a founder, none for a
/// replica that joins a running group (it waits to be added, and never initializes a group
/// of its own); None when `replicas` is empty. `section` names the config section in the
/// errors. Once a replica's log is initialized, the membership in it is the group's, and
/// these lists only give each replica its id: they grow at the end and never reorder.
fn replica_group(
    section: &str,
    replicas: &[String],
    join: bool,
    listen: &str,
) -> anyhow::Result<Option<(u64, std::collections::BTreeMap<u64, String>)>> {
    if replicas.is_empty() {
        if join {
            anyhow::bail!(
                "{section} join = true without replicas: list every replica the group ever had, then this one"
            );
        }
        return Ok(None);
    }
    let members: std::collections::BTreeMap<u64, String> =
        replicas.iter().enumerate().map(|(i, a)| (i as u64 + 1, a.clone())).collect();
    // A joiner's list is the founders and every replica added since, removed ones too: any
    // length. The founders start a group of them all, best of an odd number.
    if !join && members.len().is_multiple_of(2) {
        anyhow::bail!(
            "{section} replicas lists {} servers: a group needs an odd number (1, 3, 5) so that a majority survives the loss of a minority",
            members.len()
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(twice) = replicas.iter().find(|a| !seen.insert(a.as_str())) {
        anyhow::bail!("{section} replicas lists {twice} twice");
    }
    let Some((&id, _)) = members.iter().find(|(_, a)| a.as_str() == listen) else {
        anyhow::bail!("{section} replicas {replicas:?} does not list this server's listen address {listen}");
    };
    if join {
        return Ok(Some((id, std::collections::BTreeMap::new())));
    }
    Ok(Some((id, members)))
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MdsRole {
    pub index: u32,
    /// A replicated MDT: the `host:port` of every server process holding a replica, this
    /// one's `listen` among them (an odd number, 3 by default under `weft up --replicas`).
    /// Empty: a single MDT.
    #[serde(default)]
    pub replicas: Vec<String>,
    /// This replica joins a running group rather than founding one: it starts without
    /// initializing a group, and waits for the leader to add it (`weft replica add`), when
    /// it gets a snapshot and the log. Its `replicas` lists every replica the group ever had,
    /// removed ones too, in their order, then this one (its id is its place). Only a fresh
    /// replica reads it: once its log holds the group's membership, that decides.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub join: bool,
}

impl MdsRole {
    /// This server's replica id in the MDT's group (1 + its place in `replicas`), and the
    /// members it starts the group with (none when it joins); None for a single MDT.
    pub fn group(&self, listen: &str) -> anyhow::Result<Option<(u64, std::collections::BTreeMap<u64, String>)>> {
        replica_group("[mds]", &self.replicas, self.join, listen)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OssRole {
    /// The OSTs this node serves first.
    #[serde(default)]
    pub osts: Vec<u32>,
    /// The OSTs this node may take over when their server dies, over shared storage (the
    /// same directory reachable from both nodes). A node that lists any serves all its
    /// OSTs under a lease from the management service (`weft-server/src/failover.rs`).
    #[serde(default)]
    pub failover_osts: Vec<u32>,
}

impl OssRole {
    /// Whether this node takes part in failover: its OSTs are served under a lease.
    pub fn fails_over(&self) -> bool {
        !self.failover_osts.is_empty()
    }
}

impl ServerConfig {
    pub fn load(path: &std::path::Path) -> anyhow::Result<ServerConfig> {
        let text =
            std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read config {}: {e}", path.display()))?;
        let config: ServerConfig =
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("config {} is not valid: {e}", path.display()))?;
        config.validate()?;
        Ok(config)
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        let ok_name = !self.fsname.is_empty()
            && self.fsname.len() <= FSNAME_BYTES_MAX
            && self.fsname.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !ok_name {
            anyhow::bail!("fsname '{}' is invalid: 1 to {FSNAME_BYTES_MAX} letters, digits or '_'", self.fsname);
        }
        if self.mgs.is_none() && self.mds.is_none() && self.oss.is_none() {
            anyhow::bail!("the config names no role: add at least one of [mgs], [mds], [oss]");
        }
        if let Some(o) = &self.oss {
            if o.osts.is_empty() && o.failover_osts.is_empty() {
                anyhow::bail!("[oss] osts is empty: list the OST indices this node serves, e.g. osts = [0, 1]");
            }
            let mut s = o.osts.clone();
            s.sort_unstable();
            s.dedup();
            if s.len() != o.osts.len() {
                anyhow::bail!("[oss] osts lists an index twice: {:?}", o.osts);
            }
            let mut f = o.failover_osts.clone();
            f.sort_unstable();
            f.dedup();
            if f.len() != o.failover_osts.len() {
                anyhow::bail!("[oss] failover_osts lists an index twice: {:?}", o.failover_osts);
            }
            if let Some(both) = o.failover_osts.iter().find(|i| o.osts.contains(i)) {
                anyhow::bail!(
                    "[oss] OST {both} is in both osts and failover_osts: osts are served here first, failover_osts taken over from another node"
                );
            }
        }
        if let Some(m) = &self.mds {
            if m.index >= weft_proto::fid::MDT_COUNT_MAX {
                anyhow::bail!(
                    "[mds] index {} is out of range: an MDT index is 0 to {}",
                    m.index,
                    weft_proto::fid::MDT_COUNT_MAX - 1
                );
            }
            m.group(&self.listen)?;
        }
        let listed = weft_rpc::mgs::parse_addresses(&self.mgs_address);
        if let Some(m) = &self.mgs {
            if m.group(&self.listen)?.is_some() {
                if self.listen.ends_with(":0") {
                    anyhow::bail!(
                        "[mgs] replicas: listen {} has port 0: a replica's address must be fixed",
                        self.listen
                    );
                }
                if let Some(other) = listed.iter().find(|a| !m.replicas.contains(a)) {
                    anyhow::bail!(
                        "mgs_address lists {other}, which is not among [mgs] replicas {:?}: list the replicas, or leave mgs_address empty",
                        m.replicas
                    );
                }
            }
        }
        if self.mgs.is_none() {
            if let Some(zero) = listed.iter().find(|a| a.ends_with(":0")) {
                anyhow::bail!("mgs_address {zero} has port 0: give the management service's real port");
            }
        }
        Ok(())
    }

    pub(crate) fn mgs_address_is_self(&self) -> bool {
        self.mgs_address == self.listen || self.mgs_address.is_empty()
    }

    /// The management service's addresses as clients of it are given them (`a:p,b:p`):
    /// `mgs_address`, or with `[mgs]` here and `mgs_address` empty or this node's `listen`,
    /// the replicas, or `own` (this server's resolved address) for a single MGS.
    pub fn mgs_addresses(&self, own: &str) -> String {
        match &self.mgs {
            Some(m) if self.mgs_address_is_self() && m.replicas.is_empty() => own.to_string(),
            Some(m) if self.mgs_address_is_self() => m.replicas.join(","),
            _ => self.mgs_address.clone(),
        }
    }

    pub fn roles_text(&self) -> String {
        let mut r = Vec::new();
        if self.mgs.is_some() {
            r.push("mgs".to_string());
        }
        if let Some(m) = &self.mds {
            r.push(format!("mds (MDT{:04x})", m.index));
        }
        if let Some(o) = &self.oss {
            match o.failover_osts.len() {
                0 => r.push(format!("oss ({} OSTs)", o.osts.len())),
                f => r.push(format!("oss ({} OSTs, {f} failover)", o.osts.len())),
            }
        }
        r.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example_and_rejects_mistakes() {
        let text = r#"
fsname = "weft"
data_dir = "/srv/weft"
listen = "127.0.0.2:9800"
mgs_address = "127.0.0.2:9800"
[mgs]
[mds]
index = 0
[oss]
osts = [0, 7]
"#;
        let c: ServerConfig = toml::from_str(text).unwrap();
        c.validate().unwrap();
        assert_eq!(c.oss.unwrap().osts, vec![0, 7]);
        assert!(toml::from_str::<ServerConfig>(&text.replace("osts", "ost_list")).is_err());
        let mut bad: ServerConfig = toml::from_str(text).unwrap();
        bad.fsname = "far-too-long-name".into();
        assert!(bad.validate().unwrap_err().to_string().contains("fsname"));
    }

    #[test]
    fn failover_osts_are_parsed_and_checked() {
        let text = r#"
fsname = "weft"
data_dir = "/srv/weft"
listen = "127.0.0.4:9800"
mgs_address = "127.0.0.2:9800"
[oss]
osts = [0, 1]
failover_osts = [2, 3]
"#;
        let c: ServerConfig = toml::from_str(text).unwrap();
        c.validate().unwrap();
        assert!(c.oss.as_ref().unwrap().fails_over());
        assert_eq!(c.roles_text(), "oss (2 OSTs, 2 failover)");
        let standby: ServerConfig = toml::from_str(&text.replace("osts = [0, 1]\n", "")).unwrap();
        standby.validate().expect("a node may only stand by");
        let both: ServerConfig = toml::from_str(&text.replace("[2, 3]", "[1, 2]")).unwrap();
        let e = both.validate().unwrap_err().to_string();
        assert!(e.contains("OST 1 is in both osts and failover_osts"), "{e}");
        let twice: ServerConfig = toml::from_str(&text.replace("[2, 3]", "[2, 2]")).unwrap();
        assert!(twice.validate().unwrap_err().to_string().contains("failover_osts lists an index twice"));
        let none: ServerConfig = toml::from_str(&text.replace("[0, 1]", "[]").replace("[2, 3]", "[]")).unwrap();
        assert!(none.validate().unwrap_err().to_string().contains("[oss] osts is empty"));
    }

    #[test]
    fn a_replicated_mgs_is_checked_as_a_replicated_mdt_is() {
        let text = r#"
fsname = "weft"
data_dir = "/srv/weft"
listen = "127.0.0.3:9800"
mgs_address = "127.0.0.2:9800,127.0.0.3:9800,127.0.0.4:9800"
[mgs]
replicas = ["127.0.0.2:9800", "127.0.0.3:9800", "127.0.0.4:9800"]
"#;
        let c: ServerConfig = toml::from_str(text).unwrap();
        c.validate().unwrap();
        let (id, members) = c.mgs.as_ref().unwrap().group(&c.listen).unwrap().unwrap();
        assert_eq!((id, members.len()), (2, 3));
        assert_eq!(c.mgs_addresses("ignored"), "127.0.0.2:9800,127.0.0.3:9800,127.0.0.4:9800");
        let mut empty = c.clone();
        empty.mgs_address.clear();
        assert_eq!(empty.mgs_addresses("ignored"), c.mgs_address, "the replicas, when mgs_address is empty");
        let error = |edit: &dyn Fn(&mut ServerConfig)| {
            let mut bad = c.clone();
            edit(&mut bad);
            bad.validate().unwrap_err().to_string()
        };
        let even = error(&|b| b.mgs.as_mut().unwrap().replicas.truncate(2));
        assert!(even.contains("[mgs] replicas lists 2 servers") && even.contains("odd"), "{even}");
        let not_me = error(&|b| b.listen = "127.0.0.9:9800".into());
        assert!(not_me.contains("does not list this server's listen address 127.0.0.9:9800"), "{not_me}");
        let twice = error(&|b| b.mgs.as_mut().unwrap().replicas[2] = "127.0.0.2:9800".into());
        assert!(twice.contains("lists 127.0.0.2:9800 twice"), "{twice}");
        let stray = error(&|b| b.mgs_address = "127.0.0.5:9800".into());
        assert!(stray.contains("mgs_address lists 127.0.0.5:9800"), "{stray}");
        let client: ServerConfig = toml::from_str(&text.replace(
            "[mgs]\nreplicas = [\"127.0.0.2:9800\", \"127.0.0.3:9800\", \"127.0.0.4:9800\"]",
            "[oss]\nosts = [0]",
        ))
        .unwrap();
        client.validate().unwrap();
        assert_eq!(client.mgs_addresses("ignored"), c.mgs_address, "an OSS reaches every replica");
    }

    #[test]
    fn a_joining_replica_takes_its_place_in_the_list_and_starts_no_group() {
        let text = r#"
fsname = "weft"
data_dir = "/srv/weft"
listen = "127.0.0.5:9800"
mgs_address = "127.0.0.2:9800,127.0.0.3:9800,127.0.0.4:9800"
[mds]
index = 0
replicas = ["127.0.0.2:9800", "127.0.0.3:9800", "127.0.0.4:9800", "127.0.0.5:9800"]
join = true
"#;
        let c: ServerConfig = toml::from_str(text).unwrap();
        c.validate().expect("a joiner's list is every replica the group had, then itself: any length");
        let (id, members) = c.mds.as_ref().unwrap().group(&c.listen).unwrap().unwrap();
        assert_eq!(id, 4, "its place in the list");
        assert!(members.is_empty(), "it starts no group of its own: {members:?}");
        let founder: ServerConfig = toml::from_str(&text.replace("join = true\n", "")).unwrap();
        let e = founder.validate().unwrap_err().to_string();
        assert!(e.contains("[mds] replicas lists 4 servers") && e.contains("odd"), "{e}");
        let lone: ServerConfig = toml::from_str(&text.replace(
            "replicas = [\"127.0.0.2:9800\", \"127.0.0.3:9800\", \"127.0.0.4:9800\", \"127.0.0.5:9800\"]\n",
            "",
        ))
        .unwrap();
        assert!(lone.validate().unwrap_err().to_string().contains("join = true without replicas"));
        let written = toml::to_string(&founder.mds).unwrap();
        assert!(!written.contains("join"), "a founder's config does not name join: {written}");
    }
}
