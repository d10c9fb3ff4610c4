//! A file's hierarchical storage state (Lustre's `hsm_states`): whether a copy exists in an
//! archive, whether it is up to date, whether the file's data was released from the OSTs,
//! and the flags users set, with the archive the copy is in. The bits, their names and the
//! line `weft hsm state` prints are Lustre's (`lfs hsm_state`).

use serde::{Deserialize, Serialize};

/// A copy exists in the archive (maybe out of date).
pub const HS_EXISTS: u32 = 0x1;
/// The file changed since it was archived.
pub const HS_DIRTY: u32 = 0x2;
/// The file's data is in the archive only.
pub const HS_RELEASED: u32 = 0x4;
/// The archive's copy is complete and up to date.
pub const HS_ARCHIVED: u32 = 0x8;
/// Never release the file.
pub const HS_NORELEASE: u32 = 0x10;
/// Never archive the file.
pub const HS_NOARCHIVE: u32 = 0x20;
/// The archive's copy is lost.
pub const HS_LOST: u32 = 0x40;
/// The archive copy is a client's read-write persistent cache (Lustre's `HS_PCCRW`): the
/// client that attached the file holds its data, writes it there, and restores it when
/// another client wants it (as its archive's copytool). A restore ends the attachment: the
/// copy's flags go with it.
pub const HS_PCCRW: u32 = 0x80;
/// Every bit above.
pub const HS_ALL: u32 = 0xff;
/// The bits `hsm set` and `hsm clear` change (released is the release's and the restore's).
pub const HS_SETTABLE: u32 = HS_EXISTS | HS_DIRTY | HS_ARCHIVED | HS_NORELEASE | HS_NOARCHIVE | HS_LOST | HS_PCCRW;
/// The bits a user other than root may change (Lustre's rule).
pub const HS_USER_SETTABLE: u32 = HS_DIRTY | HS_NORELEASE | HS_NOARCHIVE;

/// Bytes a request may pass to the copytool with each file (`--data`).
pub const HSM_DATA_BYTES_MAX: usize = 1024;

/// The bits above which an action's cookie names the MDT that queued it: MDT n's cookies
/// start at `n << HSM_COOKIE_MDT_SHIFT` (MDT0's are those of a file system with one MDT),
/// so that a copytool's progress of an action goes to its MDT.
pub const HSM_COOKIE_MDT_SHIFT: u32 = 48;

/// The MDT whose action `cookie` is.
pub fn hsm_cookie_mdt(cookie: u64) -> u32 {
    (cookie >> HSM_COOKIE_MDT_SHIFT) as u32
}

/// The flags as `hsm set`/`hsm clear` name them, in Lustre's option order.
pub const HSM_FLAG_OPTIONS: [(&str, u32); 6] = [
    ("norelease", HS_NORELEASE),
    ("noarchive", HS_NOARCHIVE),
    ("dirty", HS_DIRTY),
    ("exists", HS_EXISTS),
    ("archived", HS_ARCHIVED),
    ("lost", HS_LOST),
];

/// A file's HSM state: its bits and the archive its copy is in (0: none yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HsmState {
    pub states: u32,
    pub archive_id: u32,
}

impl HsmState {
    /// What `lfs hsm_state` prints after `PATH: `: `(0x00000009) exists archived, archive_id:5`.
    pub fn describe(&self) -> String {
        let mut out = format!("({:#010x})", self.states);
        for (bit, word) in [
            (HS_RELEASED, "released"),
            (HS_EXISTS, "exists"),
            (HS_DIRTY, "dirty"),
            (HS_ARCHIVED, "archived"),
            (HS_NORELEASE, "never_release"),
            (HS_NOARCHIVE, "never_archive"),
            (HS_LOST, "lost_from_hsm"),
            (HS_PCCRW, "pccrw"),
        ] {
            if self.states & bit != 0 {
                out.push(' ');
                out.push_str(word);
            }
        }
        if self.archive_id != 0 {
            out.push_str(&format!(", archive_id:{}", self.archive_id));
        }
        out
    }

    /// A copy exists in the archive, complete, up to date and not lost.
    pub fn archived_clean(&self) -> bool {
        self.states & (HS_EXISTS | HS_ARCHIVED) == (HS_EXISTS | HS_ARCHIVED) && self.states & (HS_DIRTY | HS_LOST) == 0
    }

    /// Whether an archive of the file has something to do and is allowed.
    pub fn wants_archive(&self) -> bool {
        !self.archived_clean() && self.states & (HS_NOARCHIVE | HS_RELEASED) == 0
    }

    /// Why the file's state forbids a release (Lustre's rules), None if it allows one.
    pub fn release_refusal(&self) -> Option<&'static str> {
        if self.states & HS_NORELEASE != 0 {
            Some("it is marked norelease")
        } else if self.states & (HS_EXISTS | HS_ARCHIVED) != (HS_EXISTS | HS_ARCHIVED) {
            Some("it was never archived (weft hsm archive it first)")
        } else if self.states & HS_DIRTY != 0 {
            Some("it changed since it was archived (dirty): archive it again first")
        } else if self.states & HS_LOST != 0 {
            Some("its archive copy is lost")
        } else {
            None
        }
    }

    /// `set` and `clear` applied, checked as Lustre's MDT checks them: only bits of
    /// [`HS_SETTABLE`], not both set and cleared, and a state that makes sense (no dirty
    /// without a copy, no lost or released without an archived copy, no dirty and released).
    pub fn changed(&self, set: u32, clear: u32, archive_id: u32) -> Result<HsmState, String> {
        if (set | clear) & !HS_SETTABLE != 0 {
            return Err(format!(
                "HSM flags {:#x}: only {}",
                (set | clear) & !HS_SETTABLE,
                HSM_FLAG_OPTIONS.map(|(n, _)| n).join(", ")
            ));
        }
        if set & clear != 0 {
            return Err(format!("HSM flags {:#x} both set and cleared", set & clear));
        }
        let states = (self.states | set) & !clear;
        let has = |bit| states & bit != 0;
        if has(HS_DIRTY) && !has(HS_EXISTS) {
            return Err("dirty needs a copy in the archive: set exists too".into());
        }
        if has(HS_DIRTY) && has(HS_RELEASED) {
            return Err("a released file cannot be dirty: restore it first".into());
        }
        if (has(HS_RELEASED) || has(HS_LOST)) && !has(HS_ARCHIVED) {
            return Err("released and lost need an archived copy: keep archived".into());
        }
        let archive_id = match archive_id {
            0 => self.archive_id,
            id if self.archive_id != 0 && self.archive_id != id && self.states & HS_EXISTS != 0 => {
                return Err(format!(
                    "the file's copy is in archive {}, not {id}: remove it from the archive first",
                    self.archive_id
                ))
            }
            id => id,
        };
        Ok(HsmState { states, archive_id })
    }
}

/// The HSM event a changelog record of type HSM tells (Lustre's `hsm_event`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum HsmEvent {
    Archive = 0,
    Restore = 1,
    Cancel = 2,
    Release = 3,
    Remove = 4,
    State = 5,
}

/// An HSM changelog record's flags, as Lustre packs them: the error (7 bits), the event (3
/// bits), then the file's flags (dirty).
pub fn hsm_changelog_flags(event: HsmEvent, error: u8, dirty: bool) -> u32 {
    u32::from(error & 0x7f) | (event as u32) << 7 | u32::from(dirty) << 10
}

/// What a copytool is asked to do with a file (Lustre's `hsm_copytool_action`), with the
/// names `hsm action` and `mdt.*.hsm.actions` print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HsmAction {
    /// Copy the file's data into the archive.
    Archive,
    /// Copy the archive's copy back into the file's (new) objects.
    Restore,
    /// Delete the archive's copy.
    Remove,
    /// Stop the actions waiting or running on the file (the coordinator's own: no copytool
    /// gets one).
    Cancel,
}

impl HsmAction {
    pub const ALL: [HsmAction; 4] = [HsmAction::Archive, HsmAction::Restore, HsmAction::Remove, HsmAction::Cancel];

    pub fn name(self) -> &'static str {
        match self {
            HsmAction::Archive => "ARCHIVE",
            HsmAction::Restore => "RESTORE",
            HsmAction::Remove => "REMOVE",
            HsmAction::Cancel => "CANCEL",
        }
    }

    /// The event of the changelog record the action's end writes.
    pub fn event(self) -> HsmEvent {
        match self {
            HsmAction::Archive => HsmEvent::Archive,
            HsmAction::Restore => HsmEvent::Restore,
            HsmAction::Remove => HsmEvent::Remove,
            HsmAction::Cancel => HsmEvent::Cancel,
        }
    }
}

/// Where an action is (Lustre's `agent_req_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ActionStatus {
    /// Queued, no copytool has it.
    Waiting,
    /// A copytool took it.
    Started,
    Succeed,
    Failed,
    Canceled,
}

impl ActionStatus {
    pub fn name(self) -> &'static str {
        match self {
            ActionStatus::Waiting => "WAITING",
            ActionStatus::Started => "STARTED",
            ActionStatus::Succeed => "SUCCEED",
            ActionStatus::Failed => "FAILED",
            ActionStatus::Canceled => "CANCELED",
        }
    }

    /// Ended: kept a while to be seen, then forgotten.
    pub fn is_final(self) -> bool {
        matches!(self, ActionStatus::Succeed | ActionStatus::Failed | ActionStatus::Canceled)
    }
}

/// One request of the coordinator on one file, as it keeps it and shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HsmActionItem {
    /// Names the action to the copytool and in its reports (Lustre's cookie).
    pub cookie: u64,
    pub fid: crate::Fid,
    pub action: HsmAction,
    pub archive_id: u32,
    pub status: ActionStatus,
    /// What the requester passed for the copytool (`--data`).
    pub data: Vec<u8>,
    /// The copytool that has it (its agent name), empty while waiting.
    pub agent: String,
    /// Bytes copied so far, as the copytool reported.
    pub bytes: u64,
    pub submitted: super::Timestamp,
    /// The last change of status or progress.
    pub changed: super::Timestamp,
    /// A failed action's errno and the copytool's words (for a waiting action shown by
    /// `hsm action`: why it waits).
    pub errno: i32,
    pub message: String,
}

impl HsmActionItem {
    /// What `hsm action` prints after `PATH: ` (Lustre's `lfs hsm_action` words, and the
    /// error of a failed action, which Lustre does not show).
    pub fn describe(&self) -> String {
        let name = self.action.name();
        match self.status {
            ActionStatus::Waiting if !self.message.is_empty() => {
                format!("{name} waiting ({} bytes moved): {}", self.bytes, self.message)
            }
            ActionStatus::Waiting => format!("{name} waiting ({} bytes moved)", self.bytes),
            ActionStatus::Started => format!("{name} running ({} bytes moved)", self.bytes),
            ActionStatus::Succeed => format!("{name} done ({} bytes moved)", self.bytes),
            ActionStatus::Failed => {
                format!("{name} failed ({} bytes moved): errno {}: {}", self.bytes, self.errno, self.message)
            }
            ActionStatus::Canceled => format!("{name} canceled ({} bytes moved)", self.bytes),
        }
    }

    /// One line of `mdt.*.hsm.actions`, in Lustre's shape (the record header's fields that
    /// have a meaning here: its index is the cookie).
    pub fn actions_line(&self) -> String {
        let data: String = self.data.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "lrh=[type=10680000 len={} idx=1/{}] fid={} dfid={} compound/cookie={:#x}/{:#x} action={} archive#={} \
             flags=0x0 extent=0x0-0xffffffffffffffff gid=0x0 datalen={} status={} data=[{}]",
            136 + self.data.len(),
            self.cookie,
            self.fid,
            self.fid,
            self.cookie,
            self.cookie,
            self.action.name(),
            self.archive_id,
            self.data.len(),
            self.status.name(),
            data
        )
    }
}

/// `hsm_control` of an MDT: whether its coordinator hands out requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HsmControl {
    /// Requests are taken and handed to copytools.
    Enabled,
    /// Requests are taken and queued; none is handed out (a pause).
    Disabled,
    /// No request is taken.
    Shutdown,
}

impl HsmControl {
    pub fn name(self) -> &'static str {
        match self {
            HsmControl::Enabled => "enabled",
            HsmControl::Disabled => "disabled",
            HsmControl::Shutdown => "shutdown",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_print_as_lustre_prints_them() {
        assert_eq!(HsmState { states: 0x9, archive_id: 5 }.describe(), "(0x00000009) exists archived, archive_id:5");
        assert_eq!(
            HsmState { states: 0xd, archive_id: 1 }.describe(),
            "(0x0000000d) released exists archived, archive_id:1"
        );
        assert_eq!(HsmState::default().describe(), "(0x00000000)");
        assert_eq!(hsm_changelog_flags(HsmEvent::State, 0, false), 0x280);
    }

    #[test]
    fn changes_are_checked() {
        let none = HsmState::default();
        assert_eq!(none.changed(HS_NORELEASE, 0, 0), Ok(HsmState { states: HS_NORELEASE, archive_id: 0 }));
        assert!(none.changed(HS_DIRTY, 0, 0).unwrap_err().contains("set exists too"));
        assert!(none.changed(HS_EXISTS | HS_LOST, 0, 0).unwrap_err().contains("keep archived"));
        let archived = none.changed(HS_EXISTS | HS_ARCHIVED, 0, 2).unwrap();
        assert_eq!(archived, HsmState { states: 0x9, archive_id: 2 });
        assert!(archived.changed(0, 0, 3).unwrap_err().contains("in archive 2"));
        assert!(none.changed(HS_RELEASED, 0, 0).unwrap_err().contains("only norelease"));
        assert!(none.changed(HS_DIRTY, HS_DIRTY, 0).unwrap_err().contains("both set and cleared"));
        let released = HsmState { states: HS_EXISTS | HS_ARCHIVED | HS_RELEASED, archive_id: 1 };
        assert!(released.changed(HS_DIRTY, 0, 0).unwrap_err().contains("restore it first"));
        assert!(released.changed(0, HS_ARCHIVED, 0).unwrap_err().contains("keep archived"));
    }
}
