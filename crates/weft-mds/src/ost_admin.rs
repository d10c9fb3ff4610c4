//! What an administrator asks the MDS about the OSTs it places objects on: each OST's
//! `max_create_count` (Lustre's `osp.FS-OSTxxxx-osc-MDTxxxx.max_create_count`: 0 drains
//! it), and what this MDT still has on one (`weft del-ost` refuses to take an OST out of
//! the map while anything is left there).

use crate::objects::Objects;
use crate::Mds;
use weft_proto::WeftResult;

impl Mds {
    /// The OSTs' object pools and the choice of OSTs for new files.
    pub fn objects(&self) -> &Objects {
        &self.core.objects
    }

    /// What this MDT still has on OST `ost`: (files, objects of those files, objects queued
    /// for destruction there). Reads every inode (see `Tables::objects_on_ost`).
    pub fn objects_on_ost(&self, ost: u32) -> WeftResult<(u64, u64, u64)> {
        self.core.read_view().objects_on_ost(ost)
    }

    /// The OSTs of the map this MDS places objects on, ascending (their `osp.*` names).
    pub fn known_osts(&self) -> Vec<u32> {
        let st = self.core.objects.lock();
        let mut osts: Vec<u32> = st.ost_pools.keys().copied().filter(|o| Some(*o) != st.dom).collect();
        osts.sort_unstable();
        osts
    }
}
