//! Crash-safe small-file updates. A reader after a crash must find either the old or the new
//! content, never a torn mix, and a reply sent after the update must survive power loss: so
//! write a temporary file, fsync it, rename it over the old one, and fsync the directory
//! (the rename is only durable once the directory is).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

/// Makes the entries of `dir` (creations, renames, unlinks) durable.
pub(crate) fn fsync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Replaces `dir/name` with `bytes` atomically and durably.
pub(crate) fn replace_file(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    {
        let mut f = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(name))?;
    fsync_dir(dir)
}
