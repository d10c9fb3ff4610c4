//! Virtual extended attributes: the interface between the `weft` CLI and the mount. Their
//! values are JSON; they are answered by the mount (not stored) and never listed.

use weft_proto::Fid;

/// The prefix of every virtual attribute.
pub const VIRTUAL_PREFIX: &[u8] = b"weft.";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Virtual {
    /// get: `{"layout", "default", "fid"}`; set: a JSON StripeSpec (SetStripe).
    Layout,
    /// set (any value) or remove: DeleteStripe.
    LayoutDelete,
    /// get: the FID string.
    Fid,
    /// get: `{"path": "dir/file"}` of the FID after the colon.
    Fid2Path(Fid),
    /// get: per-target statfs, `[TargetStatfs]`.
    Df,
    /// get: the cluster map.
    Map,
    /// get: this mount's opens of the file by I/O mode, `{"cached", "passthrough", "uncached"}`.
    Io,
    /// set on a directory: create the named file with the layout in the value (a JSON
    /// `CreateWithLayout`), as lfs setstripe creates a new file with its layout in one step.
    Create(Vec<u8>),
    /// A `weft.` name this version does not know.
    Unknown,
}

/// Which virtual attribute `name` is; `None` for an ordinary attribute (stored on the MDT).
pub fn parse(name: &[u8]) -> Option<Virtual> {
    let rest = name.strip_prefix(VIRTUAL_PREFIX)?;
    Some(match rest {
        b"layout" => Virtual::Layout,
        b"layout.delete" => Virtual::LayoutDelete,
        b"fid" => Virtual::Fid,
        b"df" => Virtual::Df,
        b"map" => Virtual::Map,
        b"io" => Virtual::Io,
        _ if rest.len() > b"create:".len() && rest.starts_with(b"create:") => {
            Virtual::Create(rest[b"create:".len()..].to_vec())
        }
        _ => match rest.strip_prefix(b"fid2path:") {
            Some(fid) => match std::str::from_utf8(fid).ok().and_then(|s| s.parse::<Fid>().ok()) {
                Some(fid) => Virtual::Fid2Path(fid),
                None => Virtual::Unknown,
            },
            None => Virtual::Unknown,
        },
    })
}

/// How to answer a getxattr or listxattr of a `value` with the caller's buffer `size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The caller asked for the size only (size 0).
    Size(u32),
    /// The value fits: send it.
    Data,
    /// The buffer is too small (or the value larger than any buffer): ERANGE.
    Range,
}

pub fn answer(value_len: usize, size: u32) -> Answer {
    match u32::try_from(value_len) {
        Ok(len) if size == 0 => Answer::Size(len),
        Ok(len) if len <= size => Answer::Data,
        _ => Answer::Range,
    }
}

/// The listxattr value for `names`: each name NUL-terminated, virtual names left out.
pub fn list_value(names: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for name in names.iter().filter(|n| !n.starts_with(VIRTUAL_PREFIX)) {
        out.extend_from_slice(name);
        out.push(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_to_virtual_attributes_or_none() {
        assert_eq!(parse(b"weft.layout"), Some(Virtual::Layout));
        assert_eq!(parse(b"weft.create:new file"), Some(Virtual::Create(b"new file".to_vec())));
        assert_eq!(parse(b"weft.create:"), Some(Virtual::Unknown));
        assert_eq!(parse(b"weft.layout.delete"), Some(Virtual::LayoutDelete));
        assert_eq!(parse(b"weft.fid"), Some(Virtual::Fid));
        assert_eq!(parse(b"weft.df"), Some(Virtual::Df));
        assert_eq!(parse(b"weft.map"), Some(Virtual::Map));
        let fid = Fid::new(0x200000400, 0x1f, 0);
        assert_eq!(parse(format!("weft.fid2path:{fid}").as_bytes()), Some(Virtual::Fid2Path(fid)));
        assert_eq!(parse(b"weft.fid2path:0x200000400:0x1f:0x0"), Some(Virtual::Fid2Path(fid)));
        assert_eq!(parse(b"weft.fid2path:junk"), Some(Virtual::Unknown));
        assert_eq!(parse(b"weft.other"), Some(Virtual::Unknown));
        assert_eq!(parse(b"user.weft.layout"), None);
        assert_eq!(parse(b"user.x"), None);
    }

    #[test]
    fn size_protocol_answers_size_data_or_range() {
        assert_eq!(answer(10, 0), Answer::Size(10));
        assert_eq!(answer(0, 0), Answer::Size(0));
        assert_eq!(answer(10, 10), Answer::Data);
        assert_eq!(answer(10, 64), Answer::Data);
        assert_eq!(answer(10, 9), Answer::Range);
    }

    #[test]
    fn list_leaves_out_virtual_names() {
        let names = vec![b"user.a".to_vec(), b"weft.layout".to_vec(), b"trusted.b".to_vec()];
        assert_eq!(list_value(&names), b"user.a\0trusted.b\0".to_vec());
        assert!(list_value(&[]).is_empty());
    }
}
