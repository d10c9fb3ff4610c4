//! Rows of several MDTs: the reverse links of names on other MDTs, a participant's
//! prepared steps of distributed changes and a coordinator's committed ones (see
//! ops/update.rs and dne.rs).

use super::{Tables, WriteTables};
use crate::schema::{self, PreparedStep};
use weft_proto::msg::update::{TxnId, Update};
use weft_proto::{Fid, WeftError, WeftResult};

fn step_key(txn: &TxnId, step: u32) -> [u8; 24] {
    let mut k = [0u8; 24];
    k[..20].copy_from_slice(&schema::txn_key(txn));
    k[20..].copy_from_slice(&step.to_be_bytes());
    k
}

/// Whether `update` names `x`: as its inode, or as the directory of a name it touches.
fn names(update: &Update, x: Fid) -> bool {
    match update {
        Update::MakeDir { parent, master, .. } => *parent == x || *master == Some(x),
        Update::SetStripes { fid, stripes } => *fid == x || stripes.fids.contains(&x),
        Update::AddLink { fid, parent, .. }
        | Update::DropLink { fid, parent, .. }
        | Update::AddEntry { fid, parent, .. }
        | Update::Export { fid, parent, .. } => *fid == x || *parent == x,
        Update::RemoveDir { fid, parent, .. } => *fid == x || parent.as_ref().is_some_and(|(p, _)| *p == x),
        Update::Import { exported, parent, .. } => *parent == x || exported.entries.iter().any(|(_, f, _)| *f == x),
        Update::MoveLinks { from, to, children } => *from == x || *to == x || children.iter().any(|(f, _)| *f == x),
    }
}

fn corrupt(what: &str, e: postcard::Error) -> WeftError {
    WeftError::io(format!("a corrupt {what} row: {e}"))
}

impl Tables {
    /// A step this MDT prepared, if it still waits for its change's outcome.
    pub fn prepared_step(&self, txn: &TxnId, step: u32) -> WeftResult<Option<PreparedStep>> {
        self.with_row(schema::TABLE_UPDATES, &step_key(txn, step), |v| {
            postcard::from_bytes(v).map_err(|e| corrupt("prepared step", e))
        })
    }

    /// Every prepared step of `txn`, in step order.
    pub fn prepared_steps_of(&self, txn: &TxnId) -> WeftResult<Vec<(u32, PreparedStep)>> {
        let lo = schema::txn_key(txn);
        let hi = schema::prefix_end(&lo);
        let mut out = Vec::new();
        self.scan(schema::TABLE_UPDATES, &lo, Some(&hi), |k, v| {
            let step =
                u32::from_be_bytes(k[20..24].try_into().map_err(|_| WeftError::io("a short prepared step key"))?);
            out.push((step, postcard::from_bytes(v).map_err(|e| corrupt("prepared step", e))?));
            Ok(true)
        })?;
        Ok(out)
    }

    /// The changes with steps prepared here at `before_secs` or earlier (each once), at most
    /// `limit`; younger ones are passed over, so that many waiting changes do not hide the
    /// old ones behind them.
    pub fn prepared_txns(&self, before_secs: u64, limit: usize) -> WeftResult<Vec<TxnId>> {
        let mut out: Vec<TxnId> = Vec::new();
        let mut last: Option<TxnId> = None;
        self.scan(schema::TABLE_UPDATES, &[], None, |_, v| {
            let step: PreparedStep = postcard::from_bytes(v).map_err(|e| corrupt("prepared step", e))?;
            if step.prepared_secs <= before_secs && last != Some(step.txn) && out.last() != Some(&step.txn) {
                out.push(step.txn);
            }
            last = Some(step.txn);
            Ok(out.len() < limit)
        })?;
        Ok(out)
    }

    /// Whether a step prepared here of another change than `txn` names `fid`: as its inode,
    /// or as the directory of a name it adds, drops or moves.
    pub fn prepared_step_names(&self, fid: Fid, txn: &TxnId) -> WeftResult<bool> {
        let mut found = false;
        self.scan(schema::TABLE_UPDATES, &[], None, |_, v| {
            let step: PreparedStep = postcard::from_bytes(v).map_err(|e| corrupt("prepared step", e))?;
            found = step.txn != *txn && names(&step.update, fid);
            Ok(!found)
        })?;
        Ok(found)
    }

    /// The MDTs still to hear that `txn` committed, if this MDT committed it and some have not.
    pub fn committed_txn(&self, txn: &TxnId) -> WeftResult<Option<Vec<u32>>> {
        self.with_row(schema::TABLE_TXNS, &schema::txn_key(txn), |v| {
            postcard::from_bytes(v).map_err(|e| corrupt("committed change", e))
        })
    }

    /// The committed changes whose participants have not all heard, at most `limit`.
    pub fn committed_txns(&self, limit: usize) -> WeftResult<Vec<(TxnId, Vec<u32>)>> {
        let mut out = Vec::new();
        self.scan(schema::TABLE_TXNS, &[], None, |k, v| {
            let key: [u8; 20] = k.try_into().map_err(|_| WeftError::io("a committed change key of the wrong size"))?;
            let txn = TxnId {
                coordinator: u32::from_be_bytes(key[..4].try_into().expect("4 bytes")),
                start: u64::from_be_bytes(key[4..12].try_into().expect("8 bytes")),
                seq: u64::from_be_bytes(key[12..].try_into().expect("8 bytes")),
            };
            out.push((txn, postcard::from_bytes(v).map_err(|e| corrupt("committed change", e))?));
            Ok(out.len() < limit)
        })?;
        Ok(out)
    }

    /// Whether `child` has the name `name` in `parent` (its reverse link is here).
    pub fn has_link_row(&self, child: Fid, parent: Fid, name: &[u8]) -> WeftResult<bool> {
        self.exists(schema::TABLE_LINKS, schema::link_key(child, parent, name).as_slice())
    }
}

impl WriteTables {
    pub fn put_prepared_step(&mut self, txn: &TxnId, step: u32, prepared: &PreparedStep) -> WeftResult<()> {
        let value =
            postcard::to_stdvec(prepared).map_err(|e| WeftError::io(format!("encoding a prepared step: {e}")))?;
        self.put(schema::TABLE_UPDATES, &step_key(txn, step), &value)
    }

    pub fn remove_prepared_step(&mut self, txn: &TxnId, step: u32) -> WeftResult<()> {
        self.del(schema::TABLE_UPDATES, &step_key(txn, step)).map(drop)
    }

    /// Records that this MDT committed `txn`, with the MDTs still to tell (none: forgets it).
    pub fn put_committed_txn(&mut self, txn: &TxnId, tell: &[u32]) -> WeftResult<()> {
        let key = schema::txn_key(txn);
        if tell.is_empty() {
            return self.del(schema::TABLE_TXNS, &key).map(drop);
        }
        let value =
            postcard::to_stdvec(tell).map_err(|e| WeftError::io(format!("encoding a committed change: {e}")))?;
        self.put(schema::TABLE_TXNS, &key, &value)
    }

    /// The reverse link of a name in a directory of another MDT (or of this one).
    pub fn add_link_row(&mut self, child: Fid, parent: Fid, name: &[u8]) -> WeftResult<()> {
        self.put(schema::TABLE_LINKS, schema::link_key(child, parent, name).as_slice(), [].as_slice())
    }

    /// An entry alone, without its reverse link (whose MDT keeps it).
    pub fn put_dentry(
        &mut self,
        parent: Fid,
        name: &[u8],
        child: Fid,
        kind: weft_proto::msg::FileType,
    ) -> WeftResult<()> {
        self.put(
            schema::TABLE_DENTRIES,
            schema::dentry_key(parent, name).as_slice(),
            schema::encode_dentry(child, kind).as_slice(),
        )
    }

    /// Removes an entry alone, leaving its reverse link.
    pub fn remove_dentry(&mut self, parent: Fid, name: &[u8]) -> WeftResult<()> {
        self.del(schema::TABLE_DENTRIES, schema::dentry_key(parent, name).as_slice()).map(drop)
    }

    pub fn remove_link_row(&mut self, child: Fid, parent: Fid, name: &[u8]) -> WeftResult<()> {
        self.del(schema::TABLE_LINKS, schema::link_key(child, parent, name).as_slice()).map(drop)
    }
}
