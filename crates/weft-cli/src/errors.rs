//! The one place where the CLI turns errors into words.
//!
//! A request to the mount (a virtual `weft.*` attribute) comes back as an errno only; the
//! mount keeps why it refused it (the server's message, or its own) for the thread that
//! asked, and `refused` reads that back (`weft.error`) right after the failure. The reason
//! is used only if the errno it was kept with is the failure's. The sentence a person sees
//! is then `weft COMMAND: PATH: REASON (ERRNO)`; without a reason, the errno's own words
//! (`Permission denied`). Every command prints its failures through `sentence`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use weft_client::virtual_xattr::{self as vx, ErrorAnswer};

/// The command being run (`setstripe`, `hsm release`), named once by main.
static COMMAND: OnceLock<String> = OnceLock::new();

pub fn set_command(name: String) {
    let _ = COMMAND.set(name);
}

/// `weft COMMAND: ERROR`, the line a person sees for an error.
pub fn sentence(e: &anyhow::Error) -> String {
    match COMMAND.get() {
        Some(command) => format!("weft {command}: {e:#}"),
        None => format!("weft: {e:#}"),
    }
}

/// Prints `sentence(e)` on stderr.
pub fn report(e: &anyhow::Error) {
    eprintln!("{}", sentence(e));
}

/// A request about `path` that was refused with `errno`, and why when the mount kept a reason.
#[derive(Debug)]
pub struct Refused {
    pub path: PathBuf,
    pub reason: Option<String>,
    pub errno: i32,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plain;
        let reason = match &self.reason {
            Some(r) => r.as_str(),
            // No Weft mount answered at all: a Weft mount keeps a reason for each of its
            // own refusals of a `weft.*` attribute, unknown ones included.
            None if matches!(self.errno, libc::ENODATA | libc::EOPNOTSUPP) => {
                "not on a Weft file system (or its mount is too old for this command)"
            }
            None => {
                plain = plain_words(self.errno);
                &plain
            }
        };
        write!(f, "{}: {reason} ({})", self.path.display(), errno_name(self.errno))
    }
}

impl std::error::Error for Refused {}

/// The errno of an error, when it is one the system or the mount answered.
pub fn errno_of(e: &anyhow::Error) -> Option<i32> {
    e.chain().find_map(|c| match c.downcast_ref::<Refused>() {
        Some(r) => Some(r.errno),
        None => c.downcast_ref::<std::io::Error>().and_then(std::io::Error::raw_os_error),
    })
}

/// The error for a request about `path` that failed with `e`: the mount's reason for it
/// read back when it kept one with the same errno.
pub fn refused(path: &Path, e: std::io::Error) -> anyhow::Error {
    let Some(errno) = e.raw_os_error() else { return anyhow::Error::new(e).context(path.display().to_string()) };
    let kept = crate::sys_xattr::get(path, vx::ERROR)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<ErrorAnswer>(&bytes).ok())
        .filter(|a| a.errno == errno);
    let reason = kept.map(|a| in_words_of(&a.message, &a.fid, path));
    anyhow::Error::new(Refused { path: path.to_path_buf(), reason, errno })
}

/// The same refusal said of `path` (a new file refused through its directory).
pub fn said_of(e: anyhow::Error, path: &Path) -> anyhow::Error {
    match e.downcast::<Refused>() {
        Ok(r) => anyhow::Error::new(Refused { path: path.to_path_buf(), ..r }),
        Err(e) => e,
    }
}

/// A server's message in the user's words: the file's FID, which it names, becomes the
/// path the user gave (the sentence names that path first, so a leading FID goes).
fn in_words_of(message: &str, fid: &str, path: &Path) -> String {
    if fid.is_empty() {
        return message.to_string();
    }
    let rest = message.strip_prefix(fid).map(|r| r.trim_start_matches(':').trim_start());
    rest.unwrap_or(message).replace(fid, &path.display().to_string())
}

/// What the system says for `errno`, without Rust's `(os error N)`.
fn plain_words(errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    match text.rsplit_once(" (os error ") {
        Some((words, _)) => words.to_string(),
        None => text,
    }
}

/// The libc name of an errno (as `errno -l` prints it).
pub fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::E2BIG => "E2BIG",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EXDEV => "EXDEV",
        libc::ENODEV => "ENODEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::ENFILE => "ENFILE",
        libc::EMFILE => "EMFILE",
        libc::EFBIG => "EFBIG",
        libc::ENOSPC => "ENOSPC",
        libc::EROFS => "EROFS",
        libc::EMLINK => "EMLINK",
        libc::ERANGE => "ERANGE",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::ENOLCK => "ENOLCK",
        libc::ENOSYS => "ENOSYS",
        libc::ENOTEMPTY => "ENOTEMPTY",
        libc::ENODATA => "ENODATA",
        libc::EPROTO => "EPROTO",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ESTALE => "ESTALE",
        libc::EDQUOT => "EDQUOT",
        libc::ECANCELED => "ECANCELED",
        libc::ENOTCONN => "ENOTCONN",
        other => return format!("errno {other}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(reason: Option<&str>, errno: i32) -> String {
        let r = Refused { path: PathBuf::from("/mnt/f"), reason: reason.map(str::to_string), errno };
        r.to_string()
    }

    #[test]
    fn a_refusal_names_the_path_the_reason_and_the_errno() {
        assert_eq!(refused(Some("it is open"), libc::EBUSY), "/mnt/f: it is open (EBUSY)");
        assert_eq!(refused(None, libc::EACCES), "/mnt/f: Permission denied (EACCES)");
        assert_eq!(
            refused(None, libc::EOPNOTSUPP),
            "/mnt/f: not on a Weft file system (or its mount is too old for this command) (EOPNOTSUPP)"
        );
        assert_eq!(refused(None, 4095), "/mnt/f: Unknown error 4095 (errno 4095)");
    }

    #[test]
    fn the_fid_a_server_names_becomes_the_users_path() {
        let fid = "0x200000400:0x1f:0x0";
        let path = Path::new("dir/f");
        assert_eq!(in_words_of(&format!("{fid} cannot be released: x"), fid, path), "cannot be released: x");
        assert_eq!(in_words_of(&format!("{fid}: gone"), fid, path), "gone");
        assert_eq!(in_words_of(&format!("the layout of {fid} changed"), fid, path), "the layout of dir/f changed");
        assert_eq!(in_words_of("only root sets it", fid, path), "only root sets it");
        assert_eq!(in_words_of("no fid known", "", path), "no fid known");
    }

    #[test]
    fn the_errno_is_found_under_context() {
        let e = anyhow::Error::new(Refused { path: PathBuf::from("f"), reason: None, errno: libc::EBUSY });
        assert_eq!(errno_of(&e.context("setstripe")), Some(libc::EBUSY));
        let io = anyhow::Error::new(std::io::Error::from_raw_os_error(libc::ENOENT)).context("x");
        assert_eq!(errno_of(&io), Some(libc::ENOENT));
        assert_eq!(errno_of(&anyhow::anyhow!("words")), None);
    }
}
