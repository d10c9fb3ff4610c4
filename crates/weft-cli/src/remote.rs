//! One server (or the management service, replicated or not) asked by a command, as the
//! user who runs it: `weft qos`, `weft stats`/`top`
//! and `weft changelog*` send their requests through here (connect within
//! `PARAM_CONNECT_TIMEOUT_MS`, an answer within `PARAM_REQUEST_TIMEOUT_S`, an error naming the
//! server).

use crate::limits::{PARAM_CONNECT_TIMEOUT_MS, PARAM_REQUEST_TIMEOUT_S};
use anyhow::anyhow;
use std::time::Duration;
use weft_proto::msg::ops::{Op, Payload, Variant};
use weft_proto::msg::{Identity, ReplyBody, RequestHeader, ServiceRequest};
use weft_rpc::{Peer, PeerOptions};

pub(crate) struct Remote {
    /// How errors name it (`the management service at ADDR`, `weft-MDT0000`).
    name: String,
    to: To,
    rt: tokio::runtime::Runtime,
}

enum To {
    Server(Peer),
    /// The management service: each of its replicas (a list `A,B,C`), its leader asked.
    Mgs(weft_rpc::mgs::MgsPeers),
}

impl Remote {
    pub fn new(address: String, name: String) -> anyhow::Result<Remote> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        Ok(Remote { name, to: To::Server(Peer::new(address, options())), rt })
    }

    /// The management service at `list` (one address, or a replicated one's replicas).
    pub fn mgs(list: &str) -> anyhow::Result<Remote> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let name = format!("the management service at {list}");
        Ok(Remote { name, to: To::Mgs(weft_rpc::mgs::MgsPeers::new(list, options())), rt })
    }

    /// Sends `op` to target `index` of the server (0 for the management service).
    pub fn ask<O>(&self, index: u32, op: O) -> anyhow::Result<O::Reply>
    where
        O: Op,
        O::Request: ServiceRequest,
        O::Answer: Payload<ReplyBody> + Variant,
    {
        let header = RequestHeader { identity: caller_identity(), ..RequestHeader::default() };
        let timeout = Duration::from_secs(PARAM_REQUEST_TIMEOUT_S);
        let answer = match &self.to {
            To::Server(peer) => {
                self.rt.block_on(peer.op(header, index, op, bytes::Bytes::new(), timeout)).map(|(reply, _)| reply)
            }
            To::Mgs(peers) => self.rt.block_on(peers.op(header, op, timeout)),
        };
        answer.map_err(|e| anyhow!("{}: {}", self.name, e.message))
    }
}

fn options() -> PeerOptions {
    PeerOptions { connect_timeout: Duration::from_millis(PARAM_CONNECT_TIMEOUT_MS), ..PeerOptions::default() }
}

/// Who runs this command: its uid, gid and supplementary groups (the warnings of group
/// policies are theirs too; the servers check root by the uid).
pub(crate) fn caller_identity() -> Identity {
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    Identity { uid, gid, groups: supplementary_groups() }
}

fn supplementary_groups() -> Vec<u32> {
    // SAFETY: with a size of 0, getgroups only counts; then it fills at most `n` entries.
    let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    let mut groups = vec![0 as libc::gid_t; usize::try_from(n).unwrap_or(0)];
    let got = unsafe { libc::getgroups(n.max(0), groups.as_mut_ptr()) };
    groups.truncate(usize::try_from(got).unwrap_or(0));
    groups
}
