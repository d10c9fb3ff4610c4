//! `weft copytool`: an HSM agent (Lustre's `lhsmtool_posix`). It polls the MDT's
//! coordinator for the actions of the archives it serves, runs up to `--parallel` of them at
//! once over the client library (no mount needed), reports progress every second and each
//! action's end. Several may run at once, on any node; one that dies has its actions handed
//! to another once the coordinator misses its polls.
//!
//! Backends:
//! * `posix:DIR`: each file's copy is `DIR/XXXX/FID` (XXXX: the low 16 bits of its object
//!   id, which spreads the copies over 65536 directories), written to a temporary name,
//!   synced and renamed, with `FID.meta.json` beside it: the FID, the path,
//!   the size, owner, mode, times and layout when archived. From these `--import` rebuilds a
//!   file (released, its data in the archive) in a new file system, and `--rebind` moves a
//!   copy to a new FID.
//! * `command:PROGRAM`: `PROGRAM archive FID` gets the data on its standard input,
//!   `PROGRAM restore FID` gives it on its standard output, `PROGRAM remove FID`,
//!   `PROGRAM rebind OLD NEW` and `PROGRAM meta FID` (prints the metadata JSON) do the rest;
//!   the environment has WEFT_FID, WEFT_ARCHIVE_ID, WEFT_SIZE and WEFT_META (the JSON). A
//!   site plugs its tape library or object store in here.

use crate::cluster_addr::MgsArgs;
use anyhow::{anyhow, bail, Context};
use clap::Args;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use weft_client::copytool::{self, Agent as CoreAgent, Failure};
use weft_client::virtual_xattr::HsmChange;
use weft_client::{Client, ClientConfig};
use weft_proto::limits::HSM_MESSAGE_BYTES_MAX;
use weft_proto::limits::RPC_BULK_BYTES_MAX;
use weft_proto::lock::LockMode;
use weft_proto::msg::hsm::{HsmAction, HsmActionItem, HS_ARCHIVED, HS_EXISTS};
use weft_proto::msg::{Caller, FileType, Identity, SetAttr, SetTime, Timestamp, OPEN_WRITE};
use weft_proto::{Fid, StripeSpec, WeftError};

#[derive(Args)]
pub struct CopytoolArgs {
    /// An archive this copytool serves (repeat for several; none: every archive).
    #[arg(long = "archive", short = 'A', value_name = "N")]
    archives: Vec<u32>,
    /// Where the copies are: posix:DIR, or command:PROGRAM (see the documentation).
    #[arg(long, value_name = "BACKEND")]
    backend: String,
    /// Files copied at once.
    #[arg(long, default_value_t = 4, value_name = "N")]
    parallel: u32,
    /// This copytool's name, as the coordinator lists it (default: HOST-PID).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Admin: move the archive's copy of OLD_FID to NEW_FID (the file was rebuilt with a new
    /// FID), then exit.
    #[arg(long, num_args = 2, value_names = ["OLD_FID", "NEW_FID"])]
    rebind: Option<Vec<String>>,
    /// Admin: make PATH (from the file system's root, `/proj/a`) a released file whose data
    /// is the archive's copy of FID, with the metadata archived with it, then exit.
    #[arg(long, num_args = 2, value_names = ["FID", "PATH"])]
    import: Option<Vec<String>>,
    /// A Weft mount of the file system to serve, as lhsmtool_posix takes it; its
    /// management service is asked (the copytool itself uses no mount).
    #[arg(value_name = "MOUNT")]
    mount: Option<PathBuf>,
    #[command(flatten)]
    at: MgsArgs,
}

/// What the archive keeps beside each copy: enough to rebuild the file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArchivedMeta {
    pub fid: String,
    /// The path when archived, from the file system's root (empty if it had none).
    pub path: String,
    pub size: u64,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub atime: Timestamp,
    pub mtime: Timestamp,
    pub ctime: Timestamp,
    pub stripe_count: u32,
    pub stripe_size: u64,
    pub pool: Option<String>,
    pub archive_id: u32,
}

#[derive(Debug, Clone)]
enum Backend {
    Posix(PathBuf),
    Command(PathBuf),
}

/// An anyhow error as the coordinator records it.
fn failure(e: anyhow::Error) -> Failure {
    let errno = if let Some(w) = e.downcast_ref::<WeftError>() {
        w.code.errno()
    } else {
        crate::errors::errno_of(&e).unwrap_or(libc::EIO)
    };
    Failure::new(errno, format!("{e:#}"))
}

impl Backend {
    fn parse(text: &str) -> anyhow::Result<Backend> {
        match text.split_once(':') {
            Some(("posix", dir)) if !dir.is_empty() => {
                let dir = PathBuf::from(dir);
                std::fs::create_dir_all(&dir).with_context(|| format!("--backend posix:{}", dir.display()))?;
                Ok(Backend::Posix(dir))
            }
            Some(("command", prog)) if !prog.is_empty() => Ok(Backend::Command(PathBuf::from(prog))),
            _ => bail!("--backend {text}: posix:DIR or command:PROGRAM"),
        }
    }

    /// `DIR/XXXX/FID` of a posix archive.
    fn copy_path(dir: &Path, fid: Fid) -> PathBuf {
        dir.join(format!("{:04x}", fid.oid & 0xffff)).join(fid_name(fid))
    }

    fn meta_path(dir: &Path, fid: Fid) -> PathBuf {
        let mut p = Backend::copy_path(dir, fid).into_os_string();
        p.push(".meta.json");
        PathBuf::from(p)
    }

    fn command(prog: &Path, args: &[String], meta: Option<&ArchivedMeta>) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(prog);
        cmd.args(args).kill_on_drop(true);
        if let Some(m) = meta {
            cmd.env("WEFT_FID", &m.fid)
                .env("WEFT_ARCHIVE_ID", m.archive_id.to_string())
                .env("WEFT_SIZE", m.size.to_string())
                .env("WEFT_META", serde_json::to_string(m).unwrap_or_default());
        }
        cmd
    }

    async fn run(prog: &Path, args: &[String]) -> anyhow::Result<Vec<u8>> {
        let out = Backend::command(prog, args, None).stdin(Stdio::null()).output().await?;
        if !out.status.success() {
            bail!(
                "{} {} failed ({}): {}",
                prog.display(),
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(out.stdout)
    }

    /// Where the archive's copy of `fid` is written.
    async fn archive_sink(&self, meta: &ArchivedMeta, fid: Fid, cookie: u64) -> anyhow::Result<Sink> {
        match self {
            Backend::Posix(dir) => {
                let path = Backend::copy_path(dir, fid);
                let parent = path.parent().expect("a copy path has a directory");
                tokio::fs::create_dir_all(parent).await?;
                // The cookie in the name: an action handed out again to this copytool does not
                // share its temporary file with a first attempt still running.
                let tmp = parent.join(format!(".{}.tmp.{cookie:x}", fid_name(fid)));
                let file = tokio::fs::File::create(&tmp).await?;
                Ok(Sink::File { file, tmp, dir: dir.clone(), fid, cookie })
            }
            Backend::Command(prog) => {
                let mut child = Backend::command(prog, &["archive".into(), fid_name(fid)], Some(meta))
                    .stdin(Stdio::piped())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .with_context(|| format!("running {}", prog.display()))?;
                let stdin = child.stdin.take().expect("piped");
                // Read while the data goes in: a program that says much on its standard error
                // must not block on a full pipe. Its last HSM_MESSAGE_BYTES_MAX are kept for
                // the error (the coordinator keeps no more).
                let mut stderr = child.stderr.take().expect("piped");
                let said = tokio::spawn(async move {
                    let mut kept = Vec::new();
                    let mut buf = [0u8; HSM_MESSAGE_BYTES_MAX];
                    while let Ok(n) = stderr.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        kept.extend_from_slice(&buf[..n]);
                        let excess = kept.len().saturating_sub(HSM_MESSAGE_BYTES_MAX);
                        kept.drain(..excess);
                    }
                    kept
                });
                Ok(Sink::Child { child, stdin, said, what: format!("{} archive {}", prog.display(), fid_name(fid)) })
            }
        }
    }

    /// The archive's copy of `fid`, to read; and for a command, the process to wait for.
    async fn restore_source(
        &self,
        fid: Fid,
    ) -> anyhow::Result<(Box<dyn AsyncRead + Unpin + Send>, Option<tokio::process::Child>)> {
        match self {
            Backend::Posix(dir) => {
                let path = Backend::copy_path(dir, fid);
                let file = tokio::fs::File::open(&path)
                    .await
                    .with_context(|| format!("the archive's copy {}", path.display()))?;
                Ok((Box::new(file), None))
            }
            Backend::Command(prog) => {
                let mut child = Backend::command(prog, &["restore".into(), fid_name(fid)], None)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::inherit())
                    .spawn()?;
                let out = child.stdout.take().expect("piped");
                Ok((Box::new(out), Some(child)))
            }
        }
    }

    async fn remove(&self, fid: Fid) -> anyhow::Result<()> {
        match self {
            Backend::Posix(dir) => {
                for p in [Backend::copy_path(dir, fid), Backend::meta_path(dir, fid)] {
                    match tokio::fs::remove_file(&p).await {
                        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                        _ => {}
                    }
                }
                Ok(())
            }
            Backend::Command(prog) => Backend::run(prog, &["remove".into(), fid_name(fid)]).await.map(drop),
        }
    }

    async fn meta(&self, fid: Fid) -> anyhow::Result<ArchivedMeta> {
        let bytes = match self {
            Backend::Posix(dir) => {
                let p = Backend::meta_path(dir, fid);
                tokio::fs::read(&p).await.with_context(|| format!("no archived copy of {fid} ({})", p.display()))?
            }
            Backend::Command(prog) => Backend::run(prog, &["meta".into(), fid_name(fid)]).await?,
        };
        serde_json::from_slice(&bytes).with_context(|| format!("the archived metadata of {fid}"))
    }

    async fn rebind(&self, old: Fid, new: Fid) -> anyhow::Result<()> {
        match self {
            Backend::Posix(dir) => {
                let mut meta = self.meta(old).await?;
                meta.fid = new.to_string();
                let to = Backend::copy_path(dir, new);
                tokio::fs::create_dir_all(to.parent().expect("a copy path has a directory")).await?;
                tokio::fs::write(Backend::meta_path(dir, new), serde_json::to_vec_pretty(&meta)?).await?;
                tokio::fs::rename(Backend::copy_path(dir, old), &to)
                    .await
                    .with_context(|| format!("moving the copy of {old} to {new}"))?;
                tokio::fs::remove_file(Backend::meta_path(dir, old)).await?;
                Ok(())
            }
            Backend::Command(prog) => {
                Backend::run(prog, &["rebind".into(), fid_name(old), fid_name(new)]).await.map(drop)
            }
        }
    }
}

/// An archive copy being written.
enum Sink {
    File {
        file: tokio::fs::File,
        tmp: PathBuf,
        dir: PathBuf,
        fid: Fid,
        cookie: u64,
    },
    Child {
        child: tokio::process::Child,
        stdin: tokio::process::ChildStdin,
        said: tokio::task::JoinHandle<Vec<u8>>,
        what: String,
    },
}

impl Sink {
    fn writer(&mut self) -> &mut (dyn AsyncWrite + Unpin + Send) {
        match self {
            Sink::File { file, .. } => file,
            Sink::Child { stdin, .. } => stdin,
        }
    }

    /// The copy made durable under its name, with its metadata beside it.
    async fn finish(self, meta: &ArchivedMeta) -> anyhow::Result<()> {
        match self {
            Sink::File { file, tmp, dir, fid, cookie } => {
                file.sync_all().await?;
                drop(file);
                let path = Backend::copy_path(&dir, fid);
                let parent = path.parent().expect("a copy path has a directory");
                let meta_tmp = parent.join(format!(".{}.meta.tmp.{cookie:x}", fid_name(fid)));
                let mut meta_file = tokio::fs::File::create(&meta_tmp).await?;
                meta_file.write_all(&serde_json::to_vec_pretty(meta)?).await?;
                meta_file.sync_all().await?;
                drop(meta_file);
                tokio::fs::rename(&meta_tmp, Backend::meta_path(&dir, fid)).await?;
                tokio::fs::rename(&tmp, &path).await?;
                // The names durable too before the coordinator is told the copy is safe.
                tokio::fs::File::open(parent).await?.sync_all().await?;
                Ok(())
            }
            Sink::Child { mut child, mut stdin, said, what } => {
                stdin.shutdown().await?;
                drop(stdin);
                let status = child.wait().await?;
                let said = said.await.unwrap_or_default();
                if !status.success() {
                    bail!("{what} failed ({status}): {}", String::from_utf8_lossy(&said).trim());
                }
                Ok(())
            }
        }
    }

    /// A copy that failed: nothing of it left (a command is killed).
    async fn abort(self) {
        match self {
            Sink::File { file, tmp, .. } => {
                drop(file);
                let _ = tokio::fs::remove_file(&tmp).await;
            }
            Sink::Child { mut child, said, .. } => {
                let _ = child.kill().await;
                said.abort();
            }
        }
    }
}

/// A FID as file names and arguments carry it: `0x200000401:0x1:0x0`.
fn fid_name(fid: Fid) -> String {
    fid.to_string().trim_matches(['[', ']']).to_string()
}

fn parse_fid(text: &str) -> anyhow::Result<Fid> {
    text.parse::<Fid>().map_err(|e| anyhow!("'{text}': a FID such as [0x200000401:0x1:0x0]: {e}"))
}

/// A copytool: the coordinator's side of it (shared with the client cache's) and where its
/// copies are.
struct Agent {
    core: Arc<CoreAgent>,
    backend: Backend,
}

impl Agent {
    async fn run(&self, item: HsmActionItem) {
        let started = Instant::now();
        let result = match item.action {
            HsmAction::Archive => self.archive(&item).await.map(|(bytes, version)| (bytes, 0, version)),
            HsmAction::Restore => self.restore(&item).await,
            HsmAction::Remove => self.backend.remove(item.fid).await.map(|()| (0, 0, 0)).map_err(failure),
            HsmAction::Cancel => Ok((0, 0, 0)),
        };
        self.core.report_end(&item, result, started).await;
    }

    /// The file's metadata as the archive keeps it, but its size: the caller takes that
    /// from the glimpse its copy goes by.
    async fn meta_of(&self, fid: Fid, archive_id: u32) -> Result<(ArchivedMeta, weft_proto::Layout), Failure> {
        let (c, who) = (&self.core.client, &self.core.who);
        let inode = c.getattr(who, fid).await?;
        let layout = inode.layout.clone().ok_or_else(|| failure(anyhow!("{fid} has no layout")))?;
        let comp = layout.single()?;
        let path = c.fid2path(who, fid).await.map(|p| format!("/{}", String::from_utf8_lossy(&p))).unwrap_or_default();
        let a = &inode.attr;
        let meta = ArchivedMeta {
            fid: fid.to_string(),
            path,
            size: a.size,
            mode: a.mode,
            uid: a.uid,
            gid: a.gid,
            atime: a.atime,
            mtime: a.mtime,
            ctime: a.ctime,
            stripe_count: comp.stripe_count_shown() as u32,
            stripe_size: comp.stripe_size,
            pool: comp.pool.clone(),
            archive_id,
        };
        Ok((meta, layout))
    }

    /// The copy's bytes and the data version it is of (0: the file changed meanwhile). No
    /// open: a copytool that dies leaves no open handle on the MDT (which would keep the file
    /// from being released); the extent locks keep the reads coherent with writers.
    async fn archive(&self, item: &HsmActionItem) -> Result<(u64, u64), Failure> {
        let (c, who, fid) = (&self.core.client, &self.core.who, item.fid);
        let (mut meta, layout) = self.meta_of(fid, item.archive_id).await?;
        // The size copied and the version it is of from one reading of the objects.
        let before = c.glimpse_versioned(who, &layout).await?;
        let size = before.size;
        meta.size = size;
        let mut sink = self.backend.archive_sink(&meta, fid, item.cookie).await.map_err(failure)?;
        let copied = match self.copy_out(item, &layout, size, sink.writer()).await {
            Ok(bytes) => bytes,
            Err(f) => {
                sink.abort().await;
                return Err(f);
            }
        };
        sink.finish(&meta).await.map_err(failure)?;
        let after = c.glimpse_versioned(who, &layout).await?;
        // Written meanwhile: the copy is of no version the file had, and leaves it dirty.
        let unchanged = (after.size, after.data_version) == (size, before.data_version);
        let version = if unchanged && copied == size { before.data_version } else { 0 };
        Ok((copied, version))
    }

    /// The file's bytes into `out`, a chunk at a time under a read lock.
    async fn copy_out(
        &self,
        item: &HsmActionItem,
        layout: &weft_proto::Layout,
        size: u64,
        out: &mut (dyn AsyncWrite + Unpin + Send),
    ) -> Result<u64, Failure> {
        let (c, who, fid) = (&self.core.client, &self.core.who, item.fid);
        let mut progress = self.core.progress(item.cookie);
        let mut offset = 0u64;
        while offset < size {
            let len = (size - offset).min(u64::from(RPC_BULK_BYTES_MAX));
            let locks = c.extent_lock(who, fid, layout, offset, len, LockMode::Pr).await?;
            let data = c.read(who, layout, offset, len as u32, size).await?;
            drop(locks);
            if data.is_empty() {
                return Err(failure(anyhow!("{fid} ended at {offset} bytes, before its size {size}")));
            }
            out.write_all(&data).await?;
            offset += data.len() as u64;
            progress.moved(offset).await?;
        }
        out.flush().await?;
        Ok(offset)
    }

    /// The bytes restored, the blocks they take and their data version.
    async fn restore(&self, item: &HsmActionItem) -> Result<(u64, u64, u64), Failure> {
        let (c, who, fid) = (&self.core.client, &self.core.who, item.fid);
        let size = c.getattr(who, fid).await?.attr.size;
        // Opened first: a restore that is no longer wanted starts no backend program.
        let layout = self.core.restore_open(item).await?;
        let (mut source, child) = self.backend.restore_source(fid).await.map_err(failure)?;
        let moved = self.core.restore_write(item, &layout, &mut source, Some(size)).await;
        drop(source);
        let moved = moved?;
        if let Some(child) = child {
            let status = child.wait_with_output().await?.status;
            if !status.success() {
                return Err(failure(anyhow!("the backend's restore of {fid} failed ({status})")));
            }
        }
        Ok(moved)
    }

    /// `--import FID PATH`: PATH made a released file of the archive's copy of FID.
    async fn import(&self, archive_id: u32, old: Fid, path: &str) -> anyhow::Result<Fid> {
        let (c, who) = (&self.core.client, &self.core.who);
        let meta = self.backend.meta(old).await?;
        let (parent_path, name) = path.trim_end_matches('/').rsplit_once('/').unwrap_or(("", path));
        if name.is_empty() {
            bail!("--import {path}: give the new file's path from the file system's root, e.g. /proj/file");
        }
        let mut parent = Fid::ROOT;
        for part in parent_path.split('/').filter(|p| !p.is_empty()) {
            let inode = c.lookup(who, parent, part.as_bytes()).await.map_err(|e| anyhow!("{path}: {}", e.message))?;
            if inode.attr.kind != FileType::Directory {
                bail!("{path}: {part} is not a directory");
            }
            parent = inode.attr.fid;
        }
        let spec = StripeSpec {
            stripe_count: i64::from(meta.stripe_count.max(1)),
            stripe_size: meta.stripe_size,
            pool: meta.pool.clone(),
            ..StripeSpec::unset()
        };
        let opened = c
            .create(who, parent, name.as_bytes(), meta.mode & 0o7777, true, Some(spec), OPEN_WRITE)
            .await
            .map_err(|e| anyhow!("creating {path}: {}", e.message))?;
        let fid = opened.inode.attr.fid;
        c.close(who, fid, opened.handle, Some(weft_client::Glimpse::default())).await?;
        let layout = opened.inode.layout.clone().ok_or_else(|| anyhow!("{path} was created without a layout"))?;
        c.truncate(who, fid, &layout, meta.size, None).await?;
        let change = HsmChange { set: HS_EXISTS | HS_ARCHIVED, clear: 0, archive_id };
        c.hsm_set(who, fid, change).await?;
        self.backend.rebind(old, fid).await?;
        c.hsm_release(who, fid).await?;
        let set = SetAttr {
            uid: Some(meta.uid),
            gid: Some(meta.gid),
            atime: Some(SetTime::At(meta.atime)),
            mtime: Some(SetTime::At(meta.mtime)),
            ..SetAttr::default()
        };
        c.setattr(who, fid, set).await?;
        Ok(fid)
    }
}

pub fn copytool(a: CopytoolArgs) -> anyhow::Result<()> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bail!("a copytool runs as root (it reads and writes every user's files)");
    }
    if a.parallel == 0 || a.parallel > 64 {
        bail!("--parallel {}: 1 to 64", a.parallel);
    }
    let backend = Backend::parse(&a.backend)?;
    let mgs = a.at.address(a.mount.as_deref())?;
    crate::logging::to_stderr();
    let name = a.name.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        format!("{}-{}", host.trim(), std::process::id())
    });
    // Lock callbacks are answered while copies run: a runtime with threads of its own.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async move {
        let client = Client::connect(ClientConfig::new(mgs.clone()))
            .await
            .map_err(|e| anyhow!("cannot reach the file system at {mgs}: {}", e.message))?;
        let who = Caller::new(Identity { uid: 0, gid: 0, groups: Vec::new() }, format!("copytool.{name}"));
        let agent = Arc::new(Agent { core: Arc::new(CoreAgent { client, who, name }), backend });
        if let Some(r) = &a.rebind {
            let (old, new) = (parse_fid(&r[0])?, parse_fid(&r[1])?);
            agent.backend.rebind(old, new).await?;
            println!("{old} rebound to {new}");
            return Ok(());
        }
        if let Some(i) = &a.import {
            let archive_id = match a.archives.as_slice() {
                [id] => *id,
                _ => bail!("--import needs the one archive the copy is in (--archive N)"),
            };
            let old = parse_fid(&i[0])?;
            let fid = agent.import(archive_id, old, &i[1]).await?;
            println!("{} imported from {old} as {fid}", i[1]);
            return Ok(());
        }
        serve(agent, a.archives.clone(), a.parallel).await
    })
}

async fn serve(agent: Arc<Agent>, archives: Vec<u32>, parallel: u32) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let ids = if archives.is_empty() {
        "every archive".to_string()
    } else {
        archives.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
    };
    let name = agent.core.name.clone();
    tracing::info!(name = %name, "copytool serving archive {ids}");
    println!("copytool {name} serving archive {ids}");
    let core = agent.core.clone();
    let client = core.client.clone();
    let run: copytool::Runner = Arc::new(move |item| {
        let agent = agent.clone();
        Box::pin(async move { agent.run(item).await })
    });
    let stop = Box::pin(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    });
    copytool::serve(core, archives, parallel, run, stop).await;
    // Its locks go back and the MDT forgets it: no recovery window waits for it.
    client.release_locks().await;
    Ok(())
}
