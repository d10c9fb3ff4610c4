//! The authorize stage of the server pipeline: whether a request may run at all.
//!
//! Today one rule: a client this server evicted (it did not answer a lock callback in time)
//! is refused everything until it comes back under a new id. Mode bits are checked by the
//! MDS where it knows the inode; identity mapping (Lustre's nodemap, root squash) and
//! shared-key checks are rules that belong here.

use crate::context::RequestContext;
use crate::exports::Exports;
use std::sync::Arc;
use weft_proto::WeftResult;

pub struct Authorize {
    exports: Arc<Exports>,
}

impl Authorize {
    pub fn new(exports: Arc<Exports>) -> Authorize {
        Authorize { exports }
    }

    /// Ok when the request may go on to be scheduled; the error is its answer otherwise.
    pub fn check(&self, ctx: &RequestContext) -> WeftResult<()> {
        match self.exports.eviction_error(ctx.header.client_id) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
