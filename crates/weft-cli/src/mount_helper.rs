//! `mount.fuse.weft`: the helper mount(8) runs for `mount -t fuse.weft SOURCE DIR` and for
//! fstab lines of type `fuse.weft`. It is the `weft` binary under that name (a link made by
//! `make install`): `main` looks at the name it was started as.
//!
//! mount(8)'s convention: `mount.fuse.weft SOURCE DIR [-sfnv] [-o OPTIONS]`; exit status 0
//! once mounted, 1 for a command line it cannot read, 32 for a mount that failed (mount(8)
//! passes the status on as its own). Options that belong to mount(8), fstab or systemd
//! (`defaults`, `_netdev`, `nofail`, `noauto`, `x-systemd.*`, ...) arrive with ours and
//! are dropped here; `weft mount` refuses anything it does not know.

use crate::mount;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

/// The name mount(8) looks for in /sbin for the type `fuse.weft`.
pub const HELPER_NAME: &str = "mount.fuse.weft";
/// mount(8)'s "incorrect invocation or permissions".
const STATUS_USAGE: u8 = 1;
/// mount(8)'s "mount failure".
const STATUS_MOUNT_FAILED: u8 = 32;

/// Whether this process was started as the mount helper (by the name in `argv[0]`).
pub fn started_as_helper(argv0: Option<&OsString>) -> bool {
    argv0.map(std::path::Path::new).and_then(|p| p.file_name()).is_some_and(|name| name == HELPER_NAME)
}

/// A helper command line, as mount(8) writes it.
#[derive(Debug, PartialEq, Eq, Default)]
struct HelperArgs {
    source: String,
    mountpoint: PathBuf,
    options: String,
    /// `-s`: drop options we do not know instead of failing.
    sloppy: bool,
    /// `-f`: check everything, mount nothing.
    fake: bool,
    /// `-v`: say what is done.
    verbose: bool,
}

/// Reads `SOURCE DIR [-sfnv] [-o OPTIONS] [-t fuse.weft]` (options anywhere, `-oOPTS` too).
fn parse_args(args: &[String]) -> Result<HelperArgs, String> {
    let mut a = HelperArgs::default();
    let mut positional = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.strip_prefix('-') {
            Some("o") => {
                let opts = it.next().ok_or("-o needs the options after it")?;
                a.options = join_options(&a.options, opts);
            }
            Some(rest) if rest.starts_with('o') => a.options = join_options(&a.options, &rest[1..]),
            Some("t") => {
                let t = it.next().ok_or("-t needs the type after it")?;
                if t != "fuse.weft" {
                    return Err(format!("type {t}: this helper mounts fuse.weft only"));
                }
            }
            Some("N") => return Err("-N (another mount namespace) is not supported".into()),
            Some(flags) if !flags.is_empty() && flags.chars().all(|c| "sfnv".contains(c)) => {
                a.sloppy |= flags.contains('s');
                a.fake |= flags.contains('f');
                a.verbose |= flags.contains('v');
                // -n (do not write /etc/mtab): this helper writes none anyway.
            }
            Some(other) if !other.is_empty() => return Err(format!("unknown flag -{other}")),
            _ => positional.push(arg.clone()),
        }
    }
    match positional.as_slice() {
        [source, dir] => {
            a.source = source.clone();
            a.mountpoint = PathBuf::from(dir);
            Ok(a)
        }
        _ => Err(format!("expected SOURCE DIR, got {} arguments", positional.len())),
    }
}

fn join_options(a: &str, b: &str) -> String {
    if a.is_empty() {
        b.to_string()
    } else {
        format!("{a},{b}")
    }
}

/// Whether `item` is an option for mount(8), fstab or systemd rather than for the mount
/// itself: these reach helpers along with the file system's own options.
fn is_mount8_option(item: &str) -> bool {
    let key = item.split_once('=').map_or(item, |(k, _)| k);
    matches!(key, "defaults" | "_netdev" | "nofail" | "noauto" | "auto" | "user" | "users" | "nouser" | "comment")
        || key.starts_with("x-")
}

/// The options to hand to `weft mount`, and those dropped (mount(8)'s own, and with
/// `sloppy` the unknown ones).
fn filter_options(options: &str, sloppy: bool) -> (String, Vec<String>) {
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for item in options.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let key = item.split_once('=').map_or(item, |(k, _)| k);
        if is_mount8_option(item) || (sloppy && !mount::MOUNT_OPTION_KEYS.contains(&key)) {
            dropped.push(item.to_string());
        } else {
            kept.push(item);
        }
    }
    (kept.join(","), dropped)
}

/// Runs the helper with the arguments after argv[0]; its exit status.
pub fn main(args: Vec<String>) -> ExitCode {
    let a = match parse_args(&args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{HELPER_NAME}: {e}\nusage: {HELPER_NAME} SOURCE DIR [-sfnv] [-o OPTIONS]");
            return ExitCode::from(STATUS_USAGE);
        }
    };
    let (options, dropped) = filter_options(&a.options, a.sloppy);
    if a.verbose {
        println!(
            "{HELPER_NAME}: mounting {} at {} with options '{options}' (left to mount(8): '{}')",
            a.source,
            a.mountpoint.display(),
            dropped.join(",")
        );
    }
    let result = if a.fake {
        mount::parse_options(Some(&options))
            .and_then(|_| mount::parse_source(&a.source))
            .and_then(|s| mount::check_source(&s))
    } else {
        mount::mount(mount::MountArgs::new(&a.source, a.mountpoint.clone(), Some(options)))
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{HELPER_NAME}: cannot mount {} at {}: {e:#}", a.source, a.mountpoint.display());
            ExitCode::from(STATUS_MOUNT_FAILED)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn mount8_command_lines_are_read() {
        let a = parse_args(&args("mgs1@tcp:/scratch /mnt/w -o rw,_netdev")).unwrap();
        assert_eq!(
            (a.source.as_str(), a.mountpoint.to_str(), a.options.as_str()),
            ("mgs1@tcp:/scratch", Some("/mnt/w"), "rw,_netdev")
        );
        let a = parse_args(&args("-sv src /mnt -oro -n -o noexec -t fuse.weft")).unwrap();
        assert!(a.sloppy && a.verbose && !a.fake);
        assert_eq!(a.options, "ro,noexec");
        assert!(parse_args(&args("-f a b")).unwrap().fake);
        assert!(parse_args(&args("only-source")).unwrap_err().contains("SOURCE DIR"));
        assert!(parse_args(&args("a b -o")).unwrap_err().contains("-o needs"));
        assert!(parse_args(&args("a b -t fuse.sshfs")).unwrap_err().contains("fuse.weft only"));
        assert!(parse_args(&args("a b -q")).unwrap_err().contains("-q"));
    }

    #[test]
    fn mount8_and_systemd_options_are_dropped_ours_kept() {
        let (kept, dropped) =
            filter_options("defaults,_netdev,nofail,x-systemd.automount,ro,noexec,comment=x,user=ann,timeout=5", false);
        assert_eq!(kept, "ro,noexec,timeout=5");
        assert_eq!(dropped, ["defaults", "_netdev", "nofail", "x-systemd.automount", "comment=x", "user=ann"]);
        // Not sloppy: an unknown option is kept, for `weft mount` to refuse by name.
        assert_eq!(filter_options("speed=11,auto,noauto,users,nouser", false).0, "speed=11");
        let (kept, dropped) = filter_options("speed=11,ro", true);
        assert_eq!((kept.as_str(), dropped), ("ro", vec!["speed=11".to_string()]));
    }

    #[test]
    fn the_helper_is_known_by_its_name() {
        assert!(started_as_helper(Some(&OsString::from("/sbin/mount.fuse.weft"))));
        assert!(started_as_helper(Some(&OsString::from("mount.fuse.weft"))));
        assert!(!started_as_helper(Some(&OsString::from("/usr/local/bin/weft"))));
        assert!(!started_as_helper(None));
    }
}
