//! Changelogs: what an MDT records of every change to its namespace and attributes, for the
//! readers that register (policy engines, copytools, indexers) instead of scanning. The
//! record types, their numbers and the line a record prints as are Lustre's (`lfs
//! changelog`), so scripts written for Lustre read Weft's.

use crate::msg::Timestamp;
use crate::Fid;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// A record's type, with Lustre's numbers (`changelog_type2str`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[repr(u8)]
pub enum ChangelogType {
    Mark = 0,
    Create = 1,
    Mkdir = 2,
    Hardlink = 3,
    Softlink = 4,
    Mknod = 5,
    Unlink = 6,
    Rmdir = 7,
    Rename = 8,
    RenameTo = 9,
    Open = 10,
    Close = 11,
    Layout = 12,
    Truncate = 13,
    Setattr = 14,
    Xattr = 15,
    Hsm = 16,
    Mtime = 17,
    Ctime = 18,
    Atime = 19,
    Migrate = 20,
    Flrw = 21,
    Resync = 22,
    GetXattr = 23,
    DeniedOpen = 24,
}

impl ChangelogType {
    pub const ALL: [ChangelogType; 25] = [
        ChangelogType::Mark,
        ChangelogType::Create,
        ChangelogType::Mkdir,
        ChangelogType::Hardlink,
        ChangelogType::Softlink,
        ChangelogType::Mknod,
        ChangelogType::Unlink,
        ChangelogType::Rmdir,
        ChangelogType::Rename,
        ChangelogType::RenameTo,
        ChangelogType::Open,
        ChangelogType::Close,
        ChangelogType::Layout,
        ChangelogType::Truncate,
        ChangelogType::Setattr,
        ChangelogType::Xattr,
        ChangelogType::Hsm,
        ChangelogType::Mtime,
        ChangelogType::Ctime,
        ChangelogType::Atime,
        ChangelogType::Migrate,
        ChangelogType::Flrw,
        ChangelogType::Resync,
        ChangelogType::GetXattr,
        ChangelogType::DeniedOpen,
    ];

    /// Lustre's five-letter name (`CREAT`, `UNLNK`, ...).
    pub fn name(self) -> &'static str {
        [
            "MARK", "CREAT", "MKDIR", "HLINK", "SLINK", "MKNOD", "UNLNK", "RMDIR", "RENME", "RNMTO", "OPEN", "CLOSE",
            "LYOUT", "TRUNC", "SATTR", "XATTR", "HSM", "MTIME", "CTIME", "ATIME", "MIGRT", "FLRW", "RESYNC", "GXATR",
            "NOPEN",
        ][self as usize]
    }

    /// The type of a name as masks write it (`creat`, `UNLNK`; case does not matter).
    pub fn parse(name: &str) -> Option<ChangelogType> {
        ChangelogType::ALL.into_iter().find(|t| t.name().eq_ignore_ascii_case(name))
    }

    pub fn bit(self) -> u32 {
        1 << self as u32
    }
}

/// The types recorded unless the mask says otherwise: Lustre's default (all but OPEN,
/// ATIME, GXATR and NOPEN, which would record every read).
pub const CHANGELOG_MASK_DEFAULT: u32 = {
    let all = (1u32 << 25) - 1;
    all & !(1 << ChangelogType::Open as u32)
        & !(1 << ChangelogType::Atime as u32)
        & !(1 << ChangelogType::GetXattr as u32)
        & !(1 << ChangelogType::DeniedOpen as u32)
};

/// Record flags, as Lustre sets them: an unlink or rename that removed the last link of
/// its target (`CLF_UNLINK_LAST`, `CLF_RENAME_LAST`).
pub const CLF_LAST: u32 = 0x0001;
/// With [`CLF_LAST`]: the file removed had a copy in an HSM archive, which a policy engine
/// may now remove (Lustre's `CLF_UNLINK_HSM_EXISTS`).
pub const CLF_HSM_EXISTS: u32 = 0x0002;

/// One change, as the MDT recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangelogRecord {
    /// Its number on the MDT, from 1, in the order the changes were committed.
    pub index: u64,
    pub kind: ChangelogType,
    pub time: Timestamp,
    pub flags: u32,
    /// The file or directory changed (a rename: the one its new name replaced, or zero).
    pub target: Fid,
    /// The directory of `name` (a rename: the new name's).
    pub parent: Option<Fid>,
    pub name: Vec<u8>,
    /// A rename's source: the file renamed, its old directory and old name.
    pub source: Option<(Fid, Fid, Vec<u8>)>,
    pub uid: u32,
    pub gid: u32,
    pub jobid: String,
}

impl ChangelogRecord {
    /// The line `lfs changelog` prints:
    /// `INDEX NNTYPE HH:MM:SS.NSEC YYYY.MM.DD FLAGS t=[FID] [j=JOB] ef=0x1 u=UID:GID [p=[PFID] NAME]`
    /// (a rename adds ` s=[FID] sp=[PFID] OLDNAME`). The time is UTC.
    pub fn line(&self) -> String {
        let mut out = format!(
            "{} {:02}{} {} {:#x} t={}",
            self.index,
            self.kind as u8,
            self.kind.name(),
            clock_and_date(self.time),
            self.flags,
            self.target
        );
        if !self.jobid.is_empty() {
            let _ = write!(out, " j={}", self.jobid);
        }
        let _ = write!(out, " ef=0x1 u={}:{}", self.uid, self.gid);
        if let Some(p) = self.parent {
            let _ = write!(out, " p={p} {}", String::from_utf8_lossy(&self.name));
        }
        if let Some((fid, parent, name)) = &self.source {
            let _ = write!(out, " s={fid} sp={parent} {}", String::from_utf8_lossy(name));
        }
        out
    }
}

/// A registered reader: its id (`cl1`, or `cl2-NAME`), the last record it cleared, and when
/// it last cleared (or registered).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangelogUser {
    pub id: String,
    pub cleared: u64,
    pub since: Timestamp,
}

/// An MDT's changelog readers and its last record (Lustre's `changelog_users`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ChangelogUsers {
    /// The index of the last record written (0: none yet).
    pub current_index: u64,
    /// Records kept (written and not cleared by every reader).
    pub records: u64,
    pub users: Vec<ChangelogUser>,
    /// The types recorded.
    pub mask: u32,
}

impl ChangelogUsers {
    /// Lustre's listing: `current_index: N`, then `ID index (idle) mask` per reader, the
    /// idle time in seconds since `now`.
    pub fn listing(&self, now: i64) -> String {
        let mask = self.mask;
        let mut out = format!("current_index: {}\n", self.current_index);
        out.push_str("ID                             index (idle) mask\n");
        for u in &self.users {
            let idle = (now - u.since.sec).max(0);
            let _ = writeln!(out, "{:<30} {} ({idle}) {}", u.id, u.cleared, mask_names(mask).replace(' ', ","));
        }
        out
    }
}

/// A mask as Lustre's `changelog_mask` shows it: the names of its types, separated by spaces.
pub fn mask_names(mask: u32) -> String {
    ChangelogType::ALL.into_iter().filter(|t| mask & t.bit() != 0).map(|t| t.name()).collect::<Vec<_>>().join(" ")
}

/// A mask as Lustre's `changelog_mask` takes it: type names separated by spaces or commas
/// make the mask; `+NAME` adds to `current` and `-NAME` takes away (then names alone add too).
pub fn parse_mask(text: &str, current: u32) -> Result<u32, String> {
    let words: Vec<&str> = text.split([' ', ',']).filter(|w| !w.is_empty()).collect();
    if words.is_empty() {
        return Err("an empty changelog mask: give type names such as CREAT UNLNK, or +NAME / -NAME".into());
    }
    let relative = words.iter().any(|w| w.starts_with(['+', '-']));
    let mut mask = if relative { current } else { 0 };
    for w in words {
        let (sign, name) = match w.as_bytes()[0] {
            b'+' | b'-' => (w.as_bytes()[0], &w[1..]),
            _ => (b'+', w),
        };
        let t = ChangelogType::parse(name).ok_or_else(|| {
            let all: Vec<&str> = ChangelogType::ALL.iter().map(|t| t.name()).collect();
            format!("changelog type '{name}': one of {}", all.join(" "))
        })?;
        if sign == b'+' {
            mask |= t.bit();
        } else {
            mask &= !t.bit();
        }
    }
    Ok(mask)
}

/// `HH:MM:SS.NSEC YYYY.MM.DD` in UTC.
fn clock_and_date(t: Timestamp) -> String {
    let days = t.sec.div_euclid(86_400);
    let secs = t.sec.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{:02}:{:02}:{:02}.{:09} {y:04}.{m:02}.{d:02}", secs / 3600, secs / 60 % 60, secs % 60, t.nsec)
}

/// The proleptic Gregorian date of a day counted from 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_prints_as_lustres_line() {
        let rec = ChangelogRecord {
            index: 2,
            kind: ChangelogType::Create,
            // 2018-01-09 15:15:36.687592024 UTC
            time: Timestamp { sec: 1_515_510_936, nsec: 687_592_024 },
            flags: 0,
            target: Fid::new(0x200000402, 2, 0),
            parent: Some(Fid::new(0x200000402, 1, 0)),
            name: b"chloe.jpg".to_vec(),
            source: None,
            uid: 500,
            gid: 500,
            jobid: "cp.500".into(),
        };
        assert_eq!(
            rec.line(),
            "2 01CREAT 15:15:36.687592024 2018.01.09 0x0 t=[0x200000402:0x2:0x0] j=cp.500 ef=0x1 u=500:500 \
             p=[0x200000402:0x1:0x0] chloe.jpg"
        );
    }

    #[test]
    fn names_masks_and_dates() {
        assert_eq!(ChangelogType::parse("unlnk"), Some(ChangelogType::Unlink));
        assert_eq!(ChangelogType::parse("RNMTO"), Some(ChangelogType::RenameTo));
        assert_eq!(ChangelogType::parse("nope"), None);
        assert!(CHANGELOG_MASK_DEFAULT & ChangelogType::Create.bit() != 0);
        assert!(CHANGELOG_MASK_DEFAULT & ChangelogType::Open.bit() == 0);
        assert_eq!(mask_names(ChangelogType::Create.bit() | ChangelogType::Hsm.bit()), "CREAT HSM");
        let c = ChangelogType::Create.bit();
        assert_eq!(parse_mask("creat,UNLNK", 0), Ok(c | ChangelogType::Unlink.bit()));
        assert_eq!(parse_mask("+OPEN -CREAT", c), Ok(ChangelogType::Open.bit()));
        assert!(parse_mask("CREATE", 0).unwrap_err().contains("one of MARK CREAT"));
        assert!(parse_mask(" ", 0).is_err());
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(clock_and_date(Timestamp { sec: -1, nsec: 0 }), "23:59:59.000000000 1969.12.31");
    }
}
