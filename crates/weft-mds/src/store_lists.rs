//! Lists read from the store beyond one file's rows: the files whose synchronous mirrors
//! await a resync, the clients that hold this MDT's locks (which a recovery window waits
//! for), and the files that keep data on the MDT (which a conversion to a replicated MDT
//! moves to OSTs).

use super::{Tables, WriteTables};
use crate::schema;
use weft_proto::layout::Pattern;
use weft_proto::{Fid, WeftError, WeftResult};

impl Tables {
    /// The files with an instantiated data-on-MDT component, in FID order (reads every
    /// inode: for a tool run offline, not for serving).
    pub fn files_with_data_on_mdt(&self) -> WeftResult<Vec<Fid>> {
        let mut out = Vec::new();
        self.scan(schema::TABLE_INODES, &[], None, |k, v| {
            let fid = Fid::from_bytes(k).ok_or_else(|| WeftError::io("a corrupt inode key"))?;
            let rec = schema::decode_inode(fid, v)?;
            let on_mdt = |c: &weft_proto::layout::LayoutComponent| c.pattern == Pattern::Mdt && c.is_instantiated();
            if rec.layout.is_some_and(|l| l.components.iter().any(on_mdt)) {
                out.push(fid);
            }
            Ok(true)
        })?;
        Ok(out)
    }

    /// What this MDT still has on OST `ost`: (files whose layouts name an object there,
    /// those objects, objects there queued for destruction). Reads every inode: for
    /// `weft del-ost`, which refuses to take an OST out of the map while anything remains on
    /// it, not for serving (a scan, not a counter kept by every change that adds or drops
    /// objects: nothing to keep in step, and it costs only when asked).
    pub fn objects_on_ost(&self, ost: u32) -> WeftResult<(u64, u64, u64)> {
        let (mut files, mut objects) = (0u64, 0u64);
        self.scan(schema::TABLE_INODES, &[], None, |k, v| {
            let fid = Fid::from_bytes(k).ok_or_else(|| WeftError::io("a corrupt inode key"))?;
            if let Some(layout) = schema::decode_inode(fid, v)?.layout {
                let here = layout.objects().filter(|o| o.ost == ost).count() as u64;
                files += u64::from(here > 0);
                objects += here;
            }
            Ok(true)
        })?;
        let mut queued = 0u64;
        self.scan(schema::TABLE_DESTROY_QUEUE, &[], None, |k, _| {
            queued += u64::from(schema::split_destroy_key(k)?.0 == ost);
            Ok(true)
        })?;
        Ok((files, objects, queued))
    }

    /// The files queued for a resync of their synchronous mirrors, in FID order, at most
    /// `limit`.
    pub fn resync_entries(&self, limit: usize) -> WeftResult<Vec<Fid>> {
        let mut out = Vec::new();
        self.scan(schema::TABLE_RESYNC_QUEUE, &[], None, |k, _| {
            let fid = Fid::from_bytes(k).ok_or_else(|| WeftError::io("a corrupt resync queue key"))?;
            out.extend((out.len() < limit).then_some(fid));
            Ok(out.len() < limit)
        })?;
        Ok(out)
    }

    /// Whether the clients table names every client that holds this MDT's locks
    /// ([`schema::COUNTER_CLIENTS_COMPLETE_KEY`]).
    pub fn lock_clients_complete(&self) -> WeftResult<bool> {
        Ok(self.with_row(schema::TABLE_COUNTERS, schema::COUNTER_CLIENTS_COMPLETE_KEY, |_| Ok(()))?.is_some())
    }

    /// The clients recorded as holding this MDT's locks ([`schema::TABLE_CLIENTS`]).
    pub fn lock_clients(&self) -> WeftResult<Vec<u64>> {
        let mut out = Vec::new();
        self.scan(schema::TABLE_CLIENTS, &[], None, |k, _| {
            let id = <[u8; 8]>::try_from(k).map_err(|_| WeftError::io("a corrupt key in the MDT's clients table"))?;
            out.push(u64::from_be_bytes(id));
            Ok(true)
        })?;
        Ok(out)
    }
}

impl WriteTables {
    /// Queues `fid` for a resync of its synchronous mirrors ([`schema::TABLE_RESYNC_QUEUE`]).
    pub fn queue_resync(&mut self, fid: Fid) -> WeftResult<()> {
        self.put(schema::TABLE_RESYNC_QUEUE, fid.to_bytes().as_slice(), [].as_slice())?;
        Ok(())
    }

    pub fn unqueue_resync(&mut self, fid: Fid) -> WeftResult<()> {
        self.del(schema::TABLE_RESYNC_QUEUE, fid.to_bytes().as_slice()).map(drop)
    }

    /// Records `client` as holding this MDT's locks, since `unix_secs`.
    pub fn add_lock_client(&mut self, client: u64, unix_secs: u64) -> WeftResult<()> {
        self.put(schema::TABLE_CLIENTS, client.to_be_bytes().as_slice(), unix_secs.to_be_bytes().as_slice())
    }

    pub fn remove_lock_client(&mut self, client: u64) -> WeftResult<()> {
        self.del(schema::TABLE_CLIENTS, client.to_be_bytes().as_slice()).map(drop)
    }

    /// The clients table names every client that holds this MDT's locks from now on.
    pub fn mark_lock_clients_complete(&mut self) -> WeftResult<()> {
        self.put(schema::TABLE_COUNTERS, schema::COUNTER_CLIENTS_COMPLETE_KEY, [1u8].as_slice())
    }
}
