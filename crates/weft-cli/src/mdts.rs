//! The MDTs of a file system, as the commands that talk to them straight (HSM requests,
//! changelogs, the policy engine's readers) reach them: each from the map (a mount's, or
//! the management service's), connected as the caller when first asked. A file's requests
//! go to its FID's MDT.

use crate::remote::Remote;
use crate::xattr;
use anyhow::anyhow;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use weft_client::virtual_xattr as vx;
use weft_proto::msg::ops::{Op, Payload, Variant};
use weft_proto::msg::{target_name, ReplyBody, ServiceRequest, TargetKind};

pub(crate) struct Mdts {
    fsname: String,
    addresses: BTreeMap<u32, String>,
    remotes: RefCell<HashMap<u32, Remote>>,
}

impl Mdts {
    /// The MDTs of the file system `file` is in.
    pub fn of(file: &std::path::Path) -> anyhow::Result<Mdts> {
        Mdts::from_map(xattr::get_json(file, vx::MAP)?)
    }

    /// The MDTs `map` names.
    pub fn from_map(map: weft_proto::msg::ClusterMap) -> anyhow::Result<Mdts> {
        let addresses: BTreeMap<u32, String> =
            map.targets.iter().filter(|t| t.kind == TargetKind::Mdt).map(|t| (t.index, t.address.clone())).collect();
        if !addresses.contains_key(&0) {
            return Err(anyhow!("the file system {} has no MDT 0 in its map", map.fsname));
        }
        Ok(Mdts { fsname: map.fsname, addresses, remotes: RefCell::default() })
    }

    /// Whether the file system has MDT `index`.
    pub fn has(&self, index: u32) -> bool {
        self.addresses.contains_key(&index)
    }

    /// Their indices, ascending.
    pub fn indices(&self) -> Vec<u32> {
        self.addresses.keys().copied().collect()
    }

    /// MDT `index` as Lustre names it (`weft-MDT0000`).
    pub fn name(&self, index: u32) -> String {
        target_name(&self.fsname, TargetKind::Mdt, index)
    }

    /// Sends `op` to MDT `index`.
    pub fn ask<O>(&self, index: u32, op: O) -> anyhow::Result<O::Reply>
    where
        O: Op,
        O::Request: ServiceRequest,
        O::Answer: Payload<ReplyBody> + Variant,
    {
        let mut remotes = self.remotes.borrow_mut();
        let remote = match remotes.entry(index) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let address = self
                    .addresses
                    .get(&index)
                    .ok_or_else(|| anyhow!("the file system {} has no MDT {index}", self.fsname))?;
                e.insert(Remote::new(address.clone(), self.name(index))?)
            }
        };
        remote.ask(index, op)
    }
}
