//! Where a command that talks to the cluster (`set-param`, `get-param`, `list-param`,
//! `pool`, `stats`, `top`, `qos`, `changelog*`, `copytool`, `bench --api native`) finds its
//! management service, in one place. As `lctl` and `lfs` on a Lustre client node find the
//! file system from its mount, so do these, in this order:
//!
//! 1. `--mgs ADDR`;
//! 2. the mount the command was given (`weft copytool ... /mnt/weft`, as `lhsmtool_posix`
//!    takes it);
//! 3. `--data DIR`, when given: the file system `weft up --data DIR` started;
//! 4. the Weft mount holding the current directory;
//! 5. `./weft-data`, where a plain `weft up` keeps its state;
//! 6. the one Weft mount of this node, if there is exactly one.
//!
//! An option the user wrote (--data) comes before where the command happens to run; a mount
//! answers its management service through its virtual `weft.mgs` attribute (any file or
//! directory in it does). When nothing answers, the error lists what was tried.

use anyhow::{anyhow, bail};
use clap::Args;
use std::path::{Path, PathBuf};

/// Where `weft up` keeps its state unless told otherwise.
const DEFAULT_DATA: &str = "./weft-data";

#[derive(Args, Clone, Default)]
pub struct MgsArgs {
    /// The management service (host:port; a replicated one's replicas as
    /// host:port,host:port,...); default: that of the Weft mount holding the
    /// current directory, else the one `weft up` started (see --data).
    #[arg(long, value_name = "ADDR")]
    pub mgs: Option<String>,
    /// The data directory of `weft up`, to find its management service (not given: the
    /// Weft mount holding the current directory, else ./weft-data).
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
}

/// The management service of the Weft mount that holds `path` (any path in it).
pub(crate) fn of_mount(path: &Path) -> anyhow::Result<String> {
    let bytes = crate::xattr::get(path, weft_client::virtual_xattr::MGS)?;
    let address = String::from_utf8(bytes)
        .map_err(|_| anyhow!("{}: the mount answered weft.mgs with non-text", path.display()))?;
    Ok(address.trim().to_string())
}

impl MgsArgs {
    /// The management service's address (see the module's order); `mount` is a mount (or a
    /// path in one) the command was given.
    pub(crate) fn address(&self, mount: Option<&Path>) -> anyhow::Result<String> {
        if let Some(m) = &self.mgs {
            return Ok(m.clone());
        }
        let mut tried = Vec::new();
        if let Some(m) = mount {
            // Given a mount, it is the answer or the error: another file system would be wrong.
            return of_mount(m).map_err(|e| anyhow!("the management service of the mount {}: {e:#}", m.display()));
        }
        if let Some(data) = &self.data {
            return from_data(data).ok_or_else(|| {
                anyhow!("no file system started by `weft up --data {}` is recorded there", data.display())
            });
        }
        match of_mount(Path::new(".")) {
            Ok(m) => return Ok(m),
            Err(_) => tried.push("the current directory (not in a Weft mount)".to_string()),
        }
        match from_data(Path::new(DEFAULT_DATA)) {
            Some(m) => return Ok(m),
            None => tried.push(format!("{DEFAULT_DATA} (no `weft up` state there)")),
        }
        match crate::daemon::weft_mounts().as_slice() {
            [one] => match of_mount(one) {
                Ok(m) => return Ok(m),
                Err(e) => tried.push(format!("this node's Weft mount {} ({e:#})", one.display())),
            },
            [] => tried.push("this node's Weft mounts (none)".to_string()),
            several => tried.push(format!(
                "this node's Weft mounts ({}: several, which one?)",
                several.iter().map(|m| m.display().to_string()).collect::<Vec<_>>().join(", ")
            )),
        }
        bail!(
            "cannot find the management service: tried {}; give --mgs ADDR, run in a Weft mount, or --data DIR of `weft up`",
            tried.join(", ")
        )
    }
}

/// The management service of the file system `weft up --data DIR` started, if it recorded one.
fn from_data(data: &Path) -> Option<String> {
    crate::key::adopt_from_config(data);
    crate::up::read_state(data).map(|s| s.mgs_address)
}
