//! `weft mount` and `weft umount`.

use crate::daemon;
use crate::limits::{MGS_PORT_DEFAULT, MOUNT_MGS_ANSWER_S_MAX, MOUNT_READY_TIMEOUT_S_MAX, MOUNT_THREADS_MAX};
use anyhow::{anyhow, bail};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;
use weft_fuse::{AtimeMode, JobidScheme, JobidVar, Passthrough};

#[derive(Args)]
pub struct MountArgs {
    /// The file system: its management service HOST[:PORT] (port 9800 if omitted), or
    /// HOST[:PORT]:/FSNAME, or Lustre's HOST@tcp:/FSNAME (port 9800); with an FSNAME, the
    /// management service must serve that file system.
    #[arg(value_name = "SOURCE")]
    mgs: String,
    /// Where to mount.
    #[arg(value_name = "MNT")]
    mountpoint: PathBuf,
    /// Comma-separated options: timeout=SECONDS (how long requests wait for a restarting
    /// server before EIO, default 100), threads=N (FUSE threads, default 2),
    /// jobid_var=disable|procname_uid|nodelocal|ENVVAR (how each request's jobid is made from
    /// its process, as Lustre's jobid_var; default procname_uid), jobid_name=FORMAT (%e
    /// process name, %u uid, %g gid, %h host, %H short host, %j the jobid_var variable, %p
    /// pid; default %e.%u), jobid=NAME (one jobid for every request: nodelocal), log=FILE, locks=on|off (off: no extent locks, no page cache kept across opens and 1 s
    /// attribute caching, as before the lock manager; only to measure what locking costs),
    /// passthrough=auto|on|off (the kernel reads and writes a file itself, past the mount and
    /// the servers' counters: auto, the default, only a persistent client cache's copies, so
    /// every byte on an OST is counted per job, user and target; on, also files of one object
    /// on an OST of this process, as `weft up` may, at local-disk speed with their bytes
    /// counted nowhere; off: all I/O through the mount, no cache),
    /// uring=on|off (on: the kernel's requests come through io_uring where it offers that,
    /// see `fuse.enable_uring`; off: through /dev/fuse reads), restore_timeout=SECONDS (how
    /// long an open of a released file waits for its restore before it fails, default 600),
    /// suid|nosuid, dev|nodev (setuid programs and device nodes on the mount take effect;
    /// default nosuid,nodev; suid and dev only for root), noatime|relatime|strictatime
    /// (when reads move atime, as on a local file system; default relatime), ro|rw (read-only:
    /// every change refused with EROFS; default rw), exec|noexec (programs on the mount may
    /// run; default exec), nid=ADDR (the local address to connect to the servers from, the
    /// one their nodemaps place this client by, as Lustre's client NID; `@tcp` accepted).
    #[arg(short = 'o', value_name = "OPTIONS")]
    options: Option<String>,
    /// Stay in the foreground instead of returning once mounted.
    #[arg(short = 'f', long)]
    foreground: bool,
}

#[derive(Args)]
pub struct UmountArgs {
    /// The mount point.
    #[arg(value_name = "MNT")]
    mountpoint: PathBuf,
}

pub struct MountOptions {
    pub timeout: Duration,
    pub threads: usize,
    pub jobid: JobidScheme,
    pub log: Option<PathBuf>,
    pub locks: bool,
    pub passthrough: Passthrough,
    pub uring: bool,
    pub restore_timeout: Duration,
    pub suid: bool,
    pub dev: bool,
    pub atime: AtimeMode,
    pub read_only: bool,
    pub noexec: bool,
    /// The file system's shared key file (`skpath=FILE`, as Lustre's mount option).
    pub skpath: Option<PathBuf>,
    /// `nid=ADDR`: the local address to connect from.
    pub local_address: Option<std::net::IpAddr>,
}

impl MountArgs {
    /// The arguments of `weft mount SOURCE MNT -o OPTIONS` (the mount helper's way in).
    pub fn new(source: &str, mountpoint: PathBuf, options: Option<String>) -> MountArgs {
        MountArgs { mgs: source.to_string(), mountpoint, options, foreground: false }
    }
}

/// Every option key `weft mount -o` knows (flags and `key=` alike), for the mount helper's
/// sloppy mode (`-s`): a key not here is dropped there, refused here.
pub const MOUNT_OPTION_KEYS: &[&str] = &[
    "timeout",
    "threads",
    "jobid_var",
    "jobid_name",
    "jobid",
    "log",
    "locks",
    "passthrough",
    "uring",
    "restore_timeout",
    "suid",
    "nosuid",
    "dev",
    "nodev",
    "noatime",
    "relatime",
    "strictatime",
    "ro",
    "rw",
    "exec",
    "noexec",
    "skpath",
    "nid",
];

const MOUNT_OPTIONS_ALLOWED: &str = "timeout=SECONDS, threads=N, jobid_var=VAR, jobid_name=FORMAT, jobid=NAME, \
     log=FILE, locks=on|off, passthrough=auto|on|off, uring=on|off, restore_timeout=SECONDS, suid, nosuid, dev, nodev, noatime, relatime, strictatime, ro, rw, exec, noexec, skpath=FILE, nid=ADDR";

fn on_off(key: &str, v: &str) -> anyhow::Result<bool> {
    match v {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => bail!("mount option {key}={v}: allowed values are on, off"),
    }
}

pub fn parse_options(text: Option<&str>) -> anyhow::Result<MountOptions> {
    let mut o = MountOptions {
        timeout: Duration::from_secs(weft_rpc::limits::REQUEST_TIMEOUT_S_DEFAULT),
        threads: weft_fuse::limits::THREADS_DEFAULT,
        jobid: JobidScheme::default(),
        log: None,
        locks: true,
        passthrough: Passthrough::default(),
        uring: true,
        restore_timeout: Duration::from_secs(weft_client::limits::RESTORE_TIMEOUT_S_DEFAULT),
        suid: false,
        dev: false,
        atime: AtimeMode::default(),
        read_only: false,
        noexec: false,
        skpath: None,
        local_address: None,
    };
    for item in text.unwrap_or("").split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = item.split_once('=').unwrap_or((item, ""));
        match k {
            "timeout" => {
                let s: u64 =
                    v.parse().map_err(|_| anyhow!("mount option timeout={v}: give whole seconds, e.g. timeout=30"))?;
                if s == 0 {
                    bail!("mount option timeout=0: give at least 1 second");
                }
                o.timeout = Duration::from_secs(s);
            }
            "threads" => {
                o.threads =
                    v.parse().ok().filter(|n| (1..=MOUNT_THREADS_MAX).contains(n)).ok_or_else(|| {
                        anyhow!("mount option threads={v}: give a number from 1 to {MOUNT_THREADS_MAX}")
                    })?;
            }
            "jobid_var" => o.jobid.var = JobidVar::parse(v).map_err(|e| anyhow!("mount option {e}"))?,
            "jobid_name" => o.jobid.name = v.to_string(),
            "jobid" => o.jobid = JobidScheme { var: JobidVar::NodeLocal, name: v.to_string() },
            "log" => o.log = Some(PathBuf::from(v)),
            "locks" => o.locks = on_off(k, v)?,
            "passthrough" => o.passthrough = Passthrough::parse(v).map_err(|e| anyhow!("mount option {e}"))?,
            "uring" => o.uring = on_off(k, v)?,
            "restore_timeout" => {
                let s: u64 = v.parse().ok().filter(|s| *s > 0).ok_or_else(|| {
                    anyhow!("mount option restore_timeout={v}: give whole seconds, 1 or more, e.g. restore_timeout=600")
                })?;
                o.restore_timeout = Duration::from_secs(s);
            }
            "suid" | "nosuid" | "dev" | "nodev" if !v.is_empty() => {
                bail!("mount option {item}: {k} takes no value (allowed: suid, nosuid, dev, nodev)")
            }
            "suid" => o.suid = true,
            "nosuid" => o.suid = false,
            "dev" => o.dev = true,
            "nodev" => o.dev = false,
            "noatime" | "relatime" | "strictatime" if !v.is_empty() => {
                bail!("mount option {item}: {k} takes no value (allowed: noatime, relatime, strictatime)")
            }
            "noatime" => o.atime = AtimeMode::NoAtime,
            "relatime" => o.atime = AtimeMode::Relatime,
            "strictatime" => o.atime = AtimeMode::StrictAtime,
            "ro" | "rw" | "exec" | "noexec" if !v.is_empty() => {
                bail!("mount option {item}: {k} takes no value (allowed: ro, rw, exec, noexec)")
            }
            "ro" => o.read_only = true,
            "rw" => o.read_only = false,
            "nid" => {
                let addr = v.strip_suffix("@tcp").unwrap_or(v);
                o.local_address = Some(addr.parse().map_err(|_| {
                    anyhow!("mount option nid={v}: give a local address of this host, e.g. nid=192.168.1.5@tcp")
                })?);
            }
            "exec" => o.noexec = false,
            "noexec" => o.noexec = true,
            "skpath" if v.is_empty() => bail!("mount option skpath: give the key file, skpath=FILE"),
            "skpath" => o.skpath = Some(PathBuf::from(v)),
            _ => bail!("unknown mount option '{k}': allowed are {MOUNT_OPTIONS_ALLOWED}"),
        }
    }
    // SAFETY: geteuid only reads the process's credentials.
    refuse_unprivileged(&o, unsafe { libc::geteuid() })?;
    Ok(o)
}

/// suid and dev let whoever can write the file system become root or reach raw devices on
/// this node: only root may ask for them (as mount(8) and fusermount3 rule).
fn refuse_unprivileged(o: &MountOptions, euid: u32) -> anyhow::Result<()> {
    let asked: Vec<&str> = [("suid", o.suid), ("dev", o.dev)].iter().filter(|(_, on)| *on).map(|(n, _)| *n).collect();
    if euid != 0 && !asked.is_empty() {
        bail!(
            "mount option {}: only root may mount with setuid programs or device nodes in effect (uid {euid} asked); \
             leave it out for the default nosuid,nodev",
            asked.join(",")
        );
    }
    Ok(())
}

/// The source the mount shows in /proc/mounts, `findmnt` and `df`: which file system of
/// which management service, as Lustre's `mgsnid:/fsname`.
pub fn mount_source(mgs: &str, fsname: &str) -> String {
    format!("{mgs}:/{fsname}")
}

/// What a mount's SOURCE names: the management service's `host:port`, and the file system
/// it must serve when the source names one.
#[derive(Debug, PartialEq, Eq)]
pub struct Source {
    pub mgs: String,
    pub fsname: Option<String>,
}

/// Parses a mount source: `HOST[:PORT]`, `HOST[:PORT]:/FSNAME`, or Lustre's
/// `HOST@tcp:/FSNAME` (a NID carries no port: the default one). A replicated management
/// service is its replicas separated by commas: `HOST[:PORT],HOST[:PORT]:/FSNAME`.
pub fn parse_source(text: &str) -> anyhow::Result<Source> {
    let (address, fsname) = match text.split_once(":/") {
        Some((address, fsname)) => {
            if fsname.is_empty() || fsname.contains(['/', ':', '@', ',']) {
                bail!("mount source {text}: give the file system's name after ':/', e.g. mgs1:9800:/scratch");
            }
            (address, Some(fsname.to_string()))
        }
        None => (text, None),
    };
    let mgs = match address.split_once('@') {
        Some((host, net)) => {
            if host.contains(':') || net.contains(':') {
                bail!("mount source {text}: give one management service, HOST@tcp:/FSNAME");
            }
            if !net.starts_with("tcp") || !net[3..].chars().all(|c| c.is_ascii_digit()) {
                bail!("mount source {text}: network '{net}' is not one Weft runs on; give HOST@tcp:/FSNAME or HOST:PORT:/FSNAME");
            }
            if host.is_empty() {
                bail!("mount source {text}: the management service's host is missing, e.g. mgs1@tcp:/scratch");
            }
            format!("{host}:{MGS_PORT_DEFAULT}")
        }
        None => {
            weft_rpc::mgs::parse_addresses(address).iter().map(|a| with_default_port(a)).collect::<Vec<_>>().join(",")
        }
    };
    if mgs.is_empty() || mgs.starts_with(':') || mgs.contains(",:") {
        bail!("mount source {text}: the management service's host is missing, e.g. mgs1:9800:/scratch");
    }
    Ok(Source { mgs, fsname })
}

/// Asks the management service for its map, giving up after `MOUNT_MGS_ANSWER_S_MAX`, and
/// checks it serves the file system the source names. A mount at boot fails in seconds,
/// naming the address, rather than waiting out the request timeout in the background.
pub fn check_source(source: &Source) -> anyhow::Result<()> {
    let bound = Duration::from_secs(MOUNT_MGS_ANSWER_S_MAX);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let options = weft_rpc::PeerOptions { connect_timeout: bound, request_timeout: bound, ..Default::default() };
    let peer = weft_rpc::mgs::MgsPeers::new(&source.mgs, options);
    let map = rt
        .block_on(async { tokio::time::timeout(bound, weft_rpc::map::fetch_map_from(&peer, bound)).await })
        .map_err(|_| anyhow!("no answer from the management service at {} within {} s", source.mgs, bound.as_secs()))?
        .map_err(|e| anyhow!("cannot reach the management service at {}: {}", source.mgs, e.message))?;
    match &source.fsname {
        Some(asked) if *asked != map.fsname => bail!(
            "the management service at {} serves the file system '{}', not '{asked}' as the source asks",
            source.mgs,
            map.fsname
        ),
        _ => Ok(()),
    }
}

pub fn with_default_port(addr: &str) -> String {
    if addr.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
        addr.to_string()
    } else {
        format!("{addr}:{MGS_PORT_DEFAULT}")
    }
}

pub fn mount(a: MountArgs) -> anyhow::Result<()> {
    let opts = parse_options(a.options.as_deref())?;
    let source = parse_source(&a.mgs)?;
    let mgs = source.mgs.clone();
    if !a.mountpoint.is_dir() {
        bail!("mount point {} is not a directory", a.mountpoint.display());
    }
    if daemon::is_mounted(&a.mountpoint) {
        bail!("{} is already a mount point", a.mountpoint.display());
    }
    if let Some(path) = &opts.skpath {
        crate::key::mount_key(path)?;
    }
    if !daemon::is_detached_child() {
        check_source(&source)?;
    }
    let log = opts.log.clone().unwrap_or_else(|| {
        let name = a.mountpoint.to_string_lossy().replace('/', "_");
        std::env::temp_dir().join(format!("weft-mount{name}.log"))
    });
    if !a.foreground && !daemon::is_detached_child() {
        let mut args =
            vec!["mount".to_string(), a.mgs.clone(), a.mountpoint.to_string_lossy().into_owned(), "-f".into()];
        if let Some(o) = &a.options {
            args.push("-o".into());
            args.push(o.clone());
        }
        let mut child = daemon::spawn_self(&args, &log)?;
        let mnt = a.mountpoint.clone();
        daemon::wait_ready(&mut child, &log, opts.timeout.min(Duration::from_secs(MOUNT_READY_TIMEOUT_S_MAX)), || {
            daemon::is_mounted(&mnt)
        })?;
        return Ok(());
    }
    if daemon::is_detached_child() || opts.log.is_some() {
        crate::logging::to_file(&log)?;
    } else {
        crate::logging::to_stderr();
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let client =
        rt.block_on(weft_client::Client::connect(client_config(&mgs, &opts))).map_err(|e| anyhow!("{}", e.message))?;
    let source = mount_source(&mgs, &client.map().fsname);
    tracing::info!("mounting {source} at {}", a.mountpoint.display());
    weft_fuse::mount_foreground(client, rt.handle().clone(), &a.mountpoint, fuse_options(&opts, &source))
        .map_err(|e| anyhow!("cannot mount at {}: {e}", a.mountpoint.display()))?;
    Ok(())
}

pub fn client_config(mgs: &str, opts: &MountOptions) -> weft_client::ClientConfig {
    weft_client::ClientConfig {
        mgs_address: mgs.to_string(),
        connect_timeout: Duration::from_millis(weft_rpc::limits::CONNECT_TIMEOUT_MS_DEFAULT),
        request_timeout: opts.timeout,
        extent_locks: opts.locks,
        restore_timeout: opts.restore_timeout,
        local_address: opts.local_address,
        ..weft_client::ClientConfig::new(mgs)
    }
}

pub fn fuse_options(opts: &MountOptions, fsname: &str) -> weft_fuse::MountOptions {
    weft_fuse::MountOptions {
        threads: opts.threads,
        attr_ttl: Duration::from_millis(weft_fuse::limits::ATTR_TTL_MS_DEFAULT),
        allow_other: true,
        fsname: fsname.to_string(),
        max_write_bytes: weft_fuse::limits::WRITE_BYTES_MAX,
        passthrough: opts.passthrough,
        uring: opts.uring,
        jobid: opts.jobid.clone(),
        suid: opts.suid,
        dev: opts.dev,
        atime: opts.atime,
        read_only: opts.read_only,
        noexec: opts.noexec,
    }
}

pub fn umount(a: UmountArgs) -> anyhow::Result<()> {
    if !daemon::is_mounted(&a.mountpoint) {
        bail!("{} is not mounted", a.mountpoint.display());
    }
    daemon::unmount(&a.mountpoint, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_name_the_bad_one() {
        let o = parse_options(Some("timeout=5,threads=4,jobid=x")).unwrap();
        assert_eq!((o.timeout, o.threads), (Duration::from_secs(5), 4));
        assert_eq!(o.jobid, JobidScheme { var: JobidVar::NodeLocal, name: "x".into() });
        let o = parse_options(Some("jobid_var=SLURM_JOB_ID,jobid_name=%e")).unwrap();
        assert_eq!(o.jobid, JobidScheme { var: JobidVar::Env("SLURM_JOB_ID".into()), name: "%e".into() });
        assert_eq!(parse_options(None).unwrap().jobid, JobidScheme::default());
        let e = parse_options(Some("jobid_var=no-such")).err().unwrap().to_string();
        assert!(e.contains("jobid_var=no-such") && e.contains("procname_uid"), "{e}");
        let e = parse_options(Some("speed=11")).err().unwrap().to_string();
        assert!(e.contains("speed") && e.contains("timeout=SECONDS"), "{e}");
        assert!(parse_options(Some("threads=0")).is_err());
        assert_eq!(parse_options(None).unwrap().passthrough, Passthrough::Auto);
        assert_eq!(parse_options(Some("passthrough=on")).unwrap().passthrough, Passthrough::On);
        let e = parse_options(Some("passthrough=maybe")).err().unwrap().to_string();
        assert!(e.contains("passthrough=maybe") && e.contains("auto, on, off"), "{e}");
        let o = parse_options(Some("nosuid,nodev")).unwrap();
        assert!(!o.suid && !o.dev);
        assert_eq!(parse_options(None).unwrap().atime, AtimeMode::Relatime);
        assert_eq!(parse_options(Some("strictatime")).unwrap().atime, AtimeMode::StrictAtime);
        assert_eq!(parse_options(Some("strictatime,noatime")).unwrap().atime, AtimeMode::NoAtime, "the last wins");
        let e = parse_options(Some("relatime=on")).err().unwrap().to_string();
        assert!(e.contains("relatime=on") && e.contains("noatime, relatime, strictatime"), "{e}");
        let e = parse_options(Some("suid=1")).err().unwrap().to_string();
        assert!(e.contains("suid=1") && e.contains("nosuid"), "{e}");
        let site = MountOptions { suid: true, dev: true, ..parse_options(None).unwrap() };
        assert!(refuse_unprivileged(&site, 0).is_ok());
        let e = refuse_unprivileged(&site, 1000).err().unwrap().to_string();
        assert!(e.contains("suid,dev") && e.contains("only root"), "{e}");
        assert!(refuse_unprivileged(&parse_options(None).unwrap(), 1000).is_ok());
        assert_eq!(mount_source("10.0.0.1:9800", "scratch"), "10.0.0.1:9800:/scratch");
        assert_eq!(with_default_port("10.0.0.1"), "10.0.0.1:9800");
        assert_eq!(with_default_port("127.0.0.2:9000"), "127.0.0.2:9000");
    }

    #[test]
    fn ro_and_noexec_are_options_and_every_listed_key_is_known() {
        let o = parse_options(Some("ro,noexec")).unwrap();
        assert!(o.read_only && o.noexec);
        let o = parse_options(Some("ro,noexec,rw,exec")).unwrap();
        assert!(!o.read_only && !o.noexec, "the last wins");
        let o = parse_options(None).unwrap();
        assert!(!o.read_only && !o.noexec, "rw,exec by default");
        let e = parse_options(Some("ro=1")).err().unwrap().to_string();
        assert!(e.contains("ro=1") && e.contains("takes no value"), "{e}");
        for key in MOUNT_OPTION_KEYS {
            if let Err(e) = parse_options(Some(key)) {
                assert!(!e.to_string().starts_with("unknown mount option"), "{key}: {e}");
            }
        }
    }

    #[test]
    fn sources_name_the_service_and_maybe_the_file_system() {
        let s = |mgs: &str, fsname: Option<&str>| Source { mgs: mgs.into(), fsname: fsname.map(Into::into) };
        assert_eq!(parse_source("10.0.0.1").unwrap(), s("10.0.0.1:9800", None));
        assert_eq!(parse_source("10.0.0.1:9000").unwrap(), s("10.0.0.1:9000", None));
        assert_eq!(parse_source("mgs1:9000:/scratch").unwrap(), s("mgs1:9000", Some("scratch")));
        assert_eq!(parse_source("mgs1:/scratch").unwrap(), s("mgs1:9800", Some("scratch")));
        assert_eq!(parse_source("10.0.0.1@tcp:/scratch").unwrap(), s("10.0.0.1:9800", Some("scratch")));
        assert_eq!(parse_source("mgs1@tcp0:/scratch").unwrap(), s("mgs1:9800", Some("scratch")));
        let e = parse_source("mgs1@o2ib:/scratch").err().unwrap().to_string();
        assert!(e.contains("o2ib") && e.contains("HOST@tcp:/FSNAME"), "{e}");
        let e = parse_source("mgs1:9000:/").err().unwrap().to_string();
        assert!(e.contains("file system's name"), "{e}");
        assert!(parse_source("a@tcp:b@tcp:/scratch").is_err(), "one service");
        assert!(parse_source(":9000:/scratch").is_err());
        assert_eq!(parse_source("m1:9000,m2,m3:9001:/scratch").unwrap(), s("m1:9000,m2:9800,m3:9001", Some("scratch")));
        assert_eq!(parse_source("m1:9000,m2:9000").unwrap(), s("m1:9000,m2:9000", None));
        assert!(parse_source("m1:9000,:9000:/scratch").is_err());
    }
}
