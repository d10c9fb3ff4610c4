//! The shared key of a file system: what `weft key new` writes and every server and client
//! of the file system reads, and the flavor of protection it asks for.
//!
//! A key file is text, so that an administrator can see what it is without a tool:
//!
//! ```text
//! # Weft shared key: every server and client of the file system needs this file; keep it
//! # secret (mode 0600).
//! flavor = skpi
//! id = 5c0f2a9e41d3b786
//! key = 64 hexadecimal digits
//! ```
//!
//! The id is the first 8 bytes of SHA-256 over a label and the key: it names the key in
//! messages and in the handshake (so that a server tells a client with another key from a
//! client that broke the handshake) and says nothing of the key itself.

use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::{Arc, OnceLock};
use weft_proto::{ErrorCode, WeftError, WeftResult};

/// Bytes of a key.
pub const KEY_BYTES: usize = 32;

/// How a connection is protected once both sides proved they hold the key (Lustre's SSK
/// flavors, of which two are offered; see [`Flavor::parse`] for why not `ska` and `ski`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Flavor {
    /// Authentication at connect only: the handshake proves the key; frames then travel as
    /// without a key. Stops a node without the key, not someone on the path.
    Skn = 1,
    /// Every byte after the handshake sealed with AES-256-GCM: integrity and privacy of
    /// messages and bulk data. A frame whose seal fails is dropped with its connection.
    Skpi = 2,
}

impl Flavor {
    pub const NAMES: &'static str = "skn, skpi";

    pub fn name(self) -> &'static str {
        match self {
            Flavor::Skn => "skn",
            Flavor::Skpi => "skpi",
        }
    }

    pub fn parse(s: &str) -> WeftResult<Flavor> {
        match s.trim() {
            "skn" => Ok(Flavor::Skn),
            "skpi" => Ok(Flavor::Skpi),
            // AES-GCM with AES-NI seals at the speed it would authenticate: integrity alone
            // would cost the same as integrity and privacy, so only the stronger is offered.
            f @ ("ska" | "ski") => Err(WeftError::invalid(format!(
                "flavor {f}: Weft seals every frame with AES-256-GCM (integrity and privacy at the cost of \
                 integrity alone); use skpi, or skn for authentication at connect only (allowed: {})",
                Flavor::NAMES
            ))),
            f => Err(WeftError::invalid(format!("unknown flavor {f:?} (allowed: {})", Flavor::NAMES))),
        }
    }

    pub(crate) fn from_byte(b: u8) -> Option<Flavor> {
        match b {
            1 => Some(Flavor::Skn),
            2 => Some(Flavor::Skpi),
            _ => None,
        }
    }
}

impl std::fmt::Display for Flavor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A file system's shared key and its flavor.
#[derive(Clone, PartialEq, Eq)]
pub struct SharedKey {
    secret: [u8; KEY_BYTES],
    flavor: Flavor,
    id: [u8; 8],
}

impl std::fmt::Debug for SharedKey {
    /// Never the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedKey").field("id", &self.id_hex()).field("flavor", &self.flavor).finish()
    }
}

impl SharedKey {
    pub fn new(secret: [u8; KEY_BYTES], flavor: Flavor) -> SharedKey {
        let mut h = Sha256::new();
        h.update(b"weft shared key id v1");
        h.update(secret);
        let digest = h.finalize();
        let mut id = [0u8; 8];
        id.copy_from_slice(&digest[..8]);
        SharedKey { secret, flavor, id }
    }

    /// A new key from the operating system's random generator.
    pub fn generate(flavor: Flavor) -> WeftResult<SharedKey> {
        let mut secret = [0u8; KEY_BYTES];
        getrandom::fill(&mut secret).map_err(|e| WeftError::io(format!("no random bytes for a key: {e}")))?;
        Ok(SharedKey::new(secret, flavor))
    }

    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    pub(crate) fn secret(&self) -> &[u8; KEY_BYTES] {
        &self.secret
    }

    pub(crate) fn id(&self) -> [u8; 8] {
        self.id
    }

    /// The key's id, as messages and `weft key show` print it.
    pub fn id_hex(&self) -> String {
        hex(&self.id)
    }

    /// The key file's text.
    pub fn to_file_text(&self) -> String {
        format!(
            "# Weft shared key: every server and client of the file system needs this file; keep it\n\
             # secret (mode 0600).\nflavor = {}\nid = {}\nkey = {}\n",
            self.flavor,
            self.id_hex(),
            hex(&self.secret)
        )
    }

    /// Reads a key file's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> WeftResult<SharedKey> {
        let bad = |why: String| WeftError::invalid(format!("{origin}: {why}"));
        let (mut flavor, mut id, mut secret) = (None, None, None);
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((name, value)) = line.split_once('=') else {
                return Err(bad(format!("line {}: expected NAME = VALUE", n + 1)));
            };
            let value = value.trim();
            match name.trim() {
                "flavor" => flavor = Some(Flavor::parse(value).map_err(|e| bad(e.message))?),
                "id" => id = Some(value.to_string()),
                "key" => {
                    let bytes = unhex(value)
                        .filter(|b| b.len() == KEY_BYTES)
                        .ok_or_else(|| bad(format!("key must be {} hexadecimal digits", KEY_BYTES * 2)))?;
                    let mut s = [0u8; KEY_BYTES];
                    s.copy_from_slice(&bytes);
                    secret = Some(s);
                }
                other => {
                    return Err(bad(format!("line {}: unknown field {other:?} (allowed: flavor, id, key)", n + 1)))
                }
            }
        }
        let secret = secret.ok_or_else(|| bad("no key line".into()))?;
        let key = SharedKey::new(secret, flavor.unwrap_or(Flavor::Skpi));
        if let Some(id) = id {
            if id != key.id_hex() {
                return Err(bad(format!(
                    "id {id} does not match the key (its id is {}): the file was edited",
                    key.id_hex()
                )));
            }
        }
        Ok(key)
    }

    /// Reads a key file. A file that others may read is refused, as ssh refuses a private
    /// key that is not private.
    pub fn load(path: &Path) -> WeftResult<SharedKey> {
        use std::os::unix::fs::MetadataExt;
        let origin = path.display().to_string();
        let meta = std::fs::metadata(path)
            .map_err(|e| WeftError::new(ErrorCode::NotFound, format!("key file {origin}: {e}")))?;
        if meta.mode() & 0o077 != 0 {
            return Err(WeftError::new(
                ErrorCode::Access,
                format!(
                    "key file {origin} may be read by others (mode {:04o}): chmod 600 {origin}",
                    meta.mode() & 0o7777
                ),
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| WeftError::io(format!("key file {origin}: {e}")))?;
        SharedKey::parse(&text, &origin)
    }

    /// Writes a new key file, readable by its owner only; refuses to overwrite one.
    pub fn save(&self, path: &Path) -> WeftResult<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let origin = path.display();
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| WeftError::io(format!("key file {origin}: {e}")))?;
        f.write_all(self.to_file_text().as_bytes()).map_err(|e| WeftError::io(format!("key file {origin}: {e}")))?;
        f.sync_all().map_err(|e| WeftError::io(format!("key file {origin}: {e}")))
    }
}

/// The key this process's servers and peers use unless told otherwise: set once at start
/// (`--key`, a server config's `key`, `WEFT_KEY_FILE`), read by [`PeerOptions::default`] and
/// [`ServerLimits::default`]. A process that sets none speaks without a key.
///
/// [`PeerOptions::default`]: crate::PeerOptions
/// [`ServerLimits::default`]: crate::server::ServerLimits
pub fn process_key() -> Option<Arc<SharedKey>> {
    PROCESS_KEY.get().cloned().flatten()
}

static PROCESS_KEY: OnceLock<Option<Arc<SharedKey>>> = OnceLock::new();

/// Sets [`process_key`]; a second call with another key is refused (peers and servers made
/// since would disagree).
pub fn set_process_key(key: Option<SharedKey>) -> WeftResult<()> {
    let key = key.map(Arc::new);
    let set = PROCESS_KEY.get_or_init(|| key.clone());
    if *set != key {
        return Err(WeftError::invalid("the process's key was set already, to another key"));
    }
    Ok(())
}

/// The environment variable naming a key file, for commands given no `--key`.
pub const KEY_FILE_ENV: &str = "WEFT_KEY_FILE";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_file_reads_back_and_an_edited_one_is_refused() {
        let key = SharedKey::generate(Flavor::Skn).unwrap();
        let text = key.to_file_text();
        assert_eq!(SharedKey::parse(&text, "f").unwrap(), key);
        assert!(!format!("{key:?}").contains(&hex(key.secret())), "Debug shows the secret");
        let other = SharedKey::generate(Flavor::Skn).unwrap();
        let edited = text.replace(&hex(key.secret()), &hex(other.secret()));
        let e = SharedKey::parse(&edited, "f").unwrap_err();
        assert!(e.message.contains("does not match"), "{}", e.message);
        let e = SharedKey::parse("flavor = ski\nkey = 00\n", "f").unwrap_err();
        assert!(e.message.contains("use skpi"), "{}", e.message);
        let e = SharedKey::parse("key = abc\n", "f").unwrap_err();
        assert!(e.message.contains("64 hexadecimal digits"), "{}", e.message);
        let e = SharedKey::parse("colour = red\n", "f").unwrap_err();
        assert!(e.message.contains("allowed: flavor, id, key"), "{}", e.message);
    }

    #[test]
    fn a_key_file_others_may_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        let key = SharedKey::generate(Flavor::Skpi).unwrap();
        key.save(&path).unwrap();
        assert_eq!(SharedKey::load(&path).unwrap(), key);
        assert!(key.save(&path).is_err(), "overwrote a key file");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = SharedKey::load(&path).unwrap_err();
        assert!(e.message.contains("chmod 600"), "{}", e.message);
    }
}
