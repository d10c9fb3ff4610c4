//! `weft key`: the file system's shared key (Lustre's `lgss_sk`), and how a command finds
//! the key it connects with: `--key FILE` (any command), else `WEFT_KEY_FILE`, else none
//! (a server config's `key`, and a mount's `-o skpath=FILE`, give it too).

use anyhow::{anyhow, bail};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use weft_rpc::secure::{Flavor, SharedKey, KEY_FILE_ENV};

#[derive(Args)]
pub struct KeyArgs {
    #[command(subcommand)]
    command: KeyCommand,
}

#[derive(Subcommand)]
enum KeyCommand {
    /// Make a new key file (mode 0600; an existing file is never overwritten). Give it to
    /// every server (`key = FILE` in its config, or --key) and every client (--key, or
    /// `-o skpath=FILE`).
    New {
        /// Where to write it.
        file: PathBuf,
        /// skpi: every frame sealed (AES-256-GCM: integrity and privacy); skn: the key is
        /// proved at connect only.
        #[arg(long, default_value = "skpi", value_parser = parse_flavor)]
        flavor: Flavor,
    },
    /// Show a key file's id and flavor (never the key).
    Show { file: PathBuf },
}

fn parse_flavor(s: &str) -> Result<Flavor, String> {
    Flavor::parse(s).map_err(|e| e.message)
}

pub fn key(a: KeyArgs) -> anyhow::Result<()> {
    match a.command {
        KeyCommand::New { file, flavor } => {
            let key = SharedKey::generate(flavor).map_err(|e| anyhow!("{}", e.message))?;
            key.save(&file).map_err(|e| anyhow!("{}", e.message))?;
            println!("{}: key {} flavor {}", file.display(), key.id_hex(), key.flavor());
        }
        KeyCommand::Show { file } => {
            let key = load(&file)?;
            println!("{}: key {} flavor {}", file.display(), key.id_hex(), key.flavor());
        }
    }
    Ok(())
}

fn load(path: &Path) -> anyhow::Result<SharedKey> {
    SharedKey::load(path).map_err(|e| anyhow!("{}", e.message))
}

/// Makes `path` (or `WEFT_KEY_FILE`'s) this process's key, before anything connects. The
/// path is put in the environment so that the copies this process starts in the
/// background (a mount, `weft up`) use it too.
pub fn use_key(path: Option<&Path>) -> anyhow::Result<()> {
    let path = match path {
        Some(p) => p.to_path_buf(),
        None => match std::env::var_os(KEY_FILE_ENV) {
            Some(p) if !p.is_empty() => PathBuf::from(p),
            _ => return Ok(()),
        },
    };
    let key = load(&path)?;
    weft_rpc::secure::set_process_key(Some(key)).map_err(|e| {
        anyhow!("{}: {} (--key, {KEY_FILE_ENV} and skpath must name the same key)", path.display(), e.message)
    })?;
    let absolute = std::path::absolute(&path).unwrap_or(path);
    if std::env::var_os(KEY_FILE_ENV).as_deref() != Some(absolute.as_os_str()) {
        // SAFETY: called while the process has one thread (before any runtime starts).
        unsafe { std::env::set_var(KEY_FILE_ENV, &absolute) };
    }
    Ok(())
}

/// A mount's `skpath=FILE`: its key, unless the process has one already from elsewhere
/// (then they must be the same).
pub fn mount_key(path: &Path) -> anyhow::Result<()> {
    if !path.is_file() {
        bail!("mount option skpath={}: no such key file", path.display());
    }
    use_key(Some(path))
}

/// `weft up --key FILE`: the key is kept in the file system's config (`path`), so that it
/// is required from then on, whether or not later starts name it, and so that commands
/// given `--data` find it ([`adopt_from_config`]).
pub fn record_in_config(
    path: &Path,
    mut config: weft_server::config::ServerConfig,
) -> anyhow::Result<weft_server::config::ServerConfig> {
    let given = std::env::var_os(KEY_FILE_ENV).filter(|p| !p.is_empty()).map(PathBuf::from);
    match (given, &config.key) {
        (Some(given), None) => {
            config.key = Some(given);
            std::fs::write(path, toml::to_string_pretty(&config)?)?;
        }
        // Started without --key: the processes it starts (the MDT's replicas, a detached
        // copy) take the recorded key from the environment, as with --key.
        (None, Some(recorded)) => use_key(Some(recorded))?,
        _ => {}
    }
    Ok(config)
}

/// The key a `weft up` config names, for a command given no key that found the file system
/// by its data directory.
pub fn adopt_from_config(data: &Path) {
    if weft_rpc::secure::process_key().is_some() {
        return;
    }
    let Ok(config) = weft_server::config::ServerConfig::load(&data.join("server.toml")) else { return };
    let Some(path) = config.key else { return };
    match SharedKey::load(&path) {
        Ok(key) => {
            let _ = weft_rpc::secure::set_process_key(Some(key));
        }
        Err(e) => eprintln!("weft: the file system's key is not usable, going on without it: {}", e.message),
    }
}
