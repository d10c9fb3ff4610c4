//! The `target` file that marks a directory as one OST of one file system. It exists so that
//! a configuration mistake (two OSTs given the same directory, a directory of another file
//! system, an index typo) fails at start with a message naming both values, instead of
//! silently serving another target's objects.
//!
//! Format (TOML, version 1):
//! ```toml
//! fsname = "weft"
//! index = 7
//! format_version = 1
//! ```

use crate::durable;
use crate::limits::TARGET_FILE_BYTES_MAX;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::Path;
use weft_proto::{WeftError, WeftResult};

/// The on-disk layout version of an OST directory; bump it with a compatibility note when
/// the object naming or the LAST_ID format changes.
pub const TARGET_FORMAT_VERSION: u32 = 1;
pub const TARGET_FILE_NAME: &str = "target";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct TargetFile {
    fsname: String,
    index: u32,
    format_version: u32,
}

/// Checks that `dir` is (or formats it as) OST `index` of `fsname`.
pub(crate) fn open_or_format(dir: &Path, fsname: &str, index: u32) -> WeftResult<()> {
    let path = dir.join(TARGET_FILE_NAME);
    let context = |e: std::io::Error| {
        let mut err = WeftError::from(e);
        err.message = format!("OST directory {}: {}: {}", dir.display(), path.display(), err.message);
        err
    };
    std::fs::create_dir_all(dir).map_err(context)?;
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let wanted = TargetFile { fsname: fsname.to_string(), index, format_version: TARGET_FORMAT_VERSION };
            let text = toml::to_string(&wanted).map_err(|e| {
                WeftError::io(format!("OST directory {}: cannot encode target file: {e}", dir.display()))
            })?;
            durable::replace_file(dir, TARGET_FILE_NAME, text.as_bytes()).map_err(context)?;
            return Ok(());
        }
        Err(e) => return Err(context(e)),
    };
    let mut text = String::new();
    file.take(TARGET_FILE_BYTES_MAX + 1).read_to_string(&mut text).map_err(context)?;
    if text.len() as u64 > TARGET_FILE_BYTES_MAX {
        return Err(WeftError::invalid(format!(
            "OST directory {}: {} is larger than {TARGET_FILE_BYTES_MAX} bytes: not a Weft target file",
            dir.display(),
            path.display()
        )));
    }
    let found: TargetFile = toml::from_str(&text).map_err(|e| {
        WeftError::invalid(format!(
            "OST directory {}: {} is not a Weft target file: {e}",
            dir.display(),
            path.display()
        ))
    })?;
    let mismatch = |what: &str, found: String, wanted: String| {
        WeftError::invalid(format!(
            "OST directory {} is formatted with {what} {found}, but the configuration asks for {what} {wanted}",
            dir.display()
        ))
    };
    if found.format_version != TARGET_FORMAT_VERSION {
        return Err(mismatch("format version", found.format_version.to_string(), TARGET_FORMAT_VERSION.to_string()));
    }
    if found.fsname != fsname {
        return Err(mismatch("fsname", format!("'{}'", found.fsname), format!("'{fsname}'")));
    }
    if found.index != index {
        return Err(mismatch("OST index", found.index.to_string(), index.to_string()));
    }
    Ok(())
}
