//! HSM requests and states by path (`llapi_hsm_request`, `llapi_hsm_state_get`).

use crate::error::Result;
use crate::fs::Fs;
use weft_proto::msg::hsm::{HsmAction, HsmState};

/// What is asked of the coordinator, or done at once (release).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HsmRequest {
    Archive,
    /// Frees the objects of an archived, clean, closed file (done by the MDT at once).
    Release,
    Restore,
    Remove,
    Cancel,
}

impl Fs {
    /// Asks for `request` on every file of `paths` (one request per MDT; a release one per
    /// file); `archive_id` 0 is the file's archive, or the default one.
    pub fn hsm_request(&self, paths: &[&[u8]], request: HsmRequest, archive_id: u32) -> Result<()> {
        let who = self.who();
        let mut fids = Vec::with_capacity(paths.len());
        for path in paths {
            fids.push(self.resolve(&who, path, true)?.attr.fid);
        }
        let action = match request {
            HsmRequest::Release => {
                for fid in fids {
                    self.run(self.client.hsm_release(&who, fid))?;
                }
                return Ok(());
            }
            HsmRequest::Archive => HsmAction::Archive,
            HsmRequest::Restore => HsmAction::Restore,
            HsmRequest::Remove => HsmAction::Remove,
            HsmRequest::Cancel => HsmAction::Cancel,
        };
        self.run(self.client.hsm_request(&who, action, archive_id, fids, Vec::new())).map(drop)
    }

    /// The HSM flags (`HS_*`) and archive of a file.
    pub fn hsm_state(&self, path: &[u8]) -> Result<HsmState> {
        let who = self.who();
        let fid = self.resolve(&who, path, true)?.attr.fid;
        self.run(self.client.hsm_state(&who, fid))
    }
}
