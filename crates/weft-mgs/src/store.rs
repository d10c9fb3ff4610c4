//! The MGS's only persistent state: `cluster-map.json` in the MGS directory.
//!
//! JSON, because the file is small, written rarely, and an administrator may need to read
//! it when a cluster will not start. Format (version 1):
//! ```json
//! { "format_version": 1, "map": { "version": 3, "fsname": "weft", "targets": [..], "pools": {..} } }
//! ```
//! A replica of a replicated MGS adds `"group_state": "HEX"`: the replicated group's opaque
//! state of the entry that made this map (weft-raft's `Machine` contract), in the same file
//! so that one rename makes the map and the entry it came from durable together: a crash can
//! never leave a map with the state of another entry. A single MGS writes no such field, and
//! a file without it reads as "no entry applied yet" (the group then re-applies its log).
//!
//! Written atomically and durably (temporary file, fsync, rename, fsync of the directory):
//! a reply to a mutation is sent only after this returns, so an acknowledged registration
//! survives a crash, and a crash mid-write leaves the previous map intact.

use crate::limits::MAP_FILE_BYTES_MAX;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;
use weft_proto::msg::ClusterMap;
use weft_proto::{WeftError, WeftResult};

pub const MAP_FILE_NAME: &str = "cluster-map.json";
/// The layout of `cluster-map.json`; bump it with a compatibility note when it changes.
pub const MAP_FORMAT_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct MapFile {
    format_version: u32,
    map: ClusterMap,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    group_state: Option<String>,
}

fn io_context(path: &Path, e: std::io::Error) -> WeftError {
    let mut err = WeftError::from(e);
    err.message = format!("{}: {}", path.display(), err.message);
    err
}

/// The persisted map, or None when the directory holds none yet.
pub fn load(dir: &Path) -> WeftResult<Option<ClusterMap>> {
    Ok(load_with_state(dir)?.map(|(map, _)| map))
}

/// The persisted map with the replicated group's state kept beside it (None: none kept).
pub fn load_with_state(dir: &Path) -> WeftResult<Option<(ClusterMap, Option<Vec<u8>>)>> {
    let path = dir.join(MAP_FILE_NAME);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_context(&path, e)),
    };
    let mut bytes = Vec::new();
    file.take(MAP_FILE_BYTES_MAX + 1).read_to_end(&mut bytes).map_err(|e| io_context(&path, e))?;
    if bytes.len() as u64 > MAP_FILE_BYTES_MAX {
        return Err(WeftError::io(format!("{} is larger than {MAP_FILE_BYTES_MAX} bytes", path.display())));
    }
    let file: MapFile = serde_json::from_slice(&bytes)
        .map_err(|e| WeftError::io(format!("{} is damaged or not an MGS map: {e}", path.display())))?;
    if file.format_version != MAP_FORMAT_VERSION {
        return Err(WeftError::invalid(format!(
            "{} has format version {}, this MGS reads version {MAP_FORMAT_VERSION}",
            path.display(),
            file.format_version
        )));
    }
    let state = match file.group_state {
        Some(hex) => Some(from_hex(&hex).ok_or_else(|| {
            WeftError::io(format!("{} is damaged: its group_state is not hexadecimal", path.display()))
        })?),
        None => None,
    };
    Ok(Some((file.map, state)))
}

pub fn save(dir: &Path, map: &ClusterMap) -> WeftResult<()> {
    save_with_state(dir, map, None)
}

/// Saves `map` with the replicated group's `state` of the entry that made it, in one file.
pub fn save_with_state(dir: &Path, map: &ClusterMap, state: Option<&[u8]>) -> WeftResult<()> {
    let file = MapFile { format_version: MAP_FORMAT_VERSION, map: map.clone(), group_state: state.map(to_hex) };
    let bytes = serde_json::to_vec_pretty(&file).map_err(|e| WeftError::io(format!("cannot encode the map: {e}")))?;
    let tmp = dir.join(format!("{MAP_FILE_NAME}.tmp"));
    {
        let mut f =
            OpenOptions::new().write(true).create(true).truncate(true).open(&tmp).map_err(|e| io_context(&tmp, e))?;
        f.write_all(&bytes).map_err(|e| io_context(&tmp, e))?;
        f.sync_all().map_err(|e| io_context(&tmp, e))?;
    }
    let path = dir.join(MAP_FILE_NAME);
    std::fs::rename(&tmp, &path).map_err(|e| io_context(&path, e))?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io_context(dir, e))
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| text.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect()
}
