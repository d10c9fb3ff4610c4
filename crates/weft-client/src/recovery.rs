//! What a client does when a target moves to another server (a replicated MDT's new
//! leader) or its server restarted (the map shows a new instance: the management service
//! tells, Lustre's imperative recovery): it replays its locks, and its opens to a moved
//! MDT, there (Lustre's lock and open replay), and keeps, per target, what its import went
//! through for `mdc.*.import` / `osc.*.import`.

use crate::limits;
use crate::Client;
use std::fmt::Write;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::watch;
use weft_proto::lock::LockTarget;
use weft_proto::msg::{target_name, Caller, ClusterMap, TargetKind};
use weft_rpc::map::MapState;

/// Most OSTs whose imports a mount lists among its parameters (they travel in one extended
/// attribute, at most 64 KiB); the MDTs' are always listed.
pub const OSC_IMPORTS_LISTED_MAX: usize = 64;

/// What this client's import of one target went through since it started.
#[derive(Debug, Clone, Default)]
pub(crate) struct ImportStats {
    /// Servers the target was reached at: 1, plus one per move.
    moves: u64,
    /// A replay to the target's new server is under way.
    replaying: bool,
    locks_kept: u64,
    locks_refused: u64,
    opens_kept: u64,
    opens_refused: u64,
    /// Writes sent again because the target's server had not committed them, and those it
    /// refused (its replay window had ended: lost).
    writes_replayed: u64,
    writes_lost: u64,
}

impl Client {
    /// A target moved to another server (a replicated MDT's new leader) or its server
    /// restarted, which does not know the locks its old server granted: this client asks it to keep them under the
    /// same handles (lock replay, Lustre's), which it does during its recovery window
    /// (grants are held back meanwhile, so none can conflict). What it kept stays cached
    /// here: a stat after a failover costs no request. What it refused, or everything when
    /// the replay fails, is forgotten with what it guarded, as after a restart.
    pub(crate) async fn replay_locks(&self, target: LockTarget) {
        self.import(target, |i| {
            i.moves += 1;
            i.replaying = true;
        });
        // Writes first, as Lustre replays requests before locks: the lock replay must still
        // fall in the server's lock recovery window, and the writes are few (a commit
        // interval's worth at most).
        self.replay_writes(target).await;
        let mdt = matches!(target, LockTarget::Mdt(_));
        if let LockTarget::Mdt(index) = target {
            // Opens and advisory locks before the locks: an MDT's window ends once every
            // client it recorded replayed its locks, and nothing may be set or opened
            // against what this client holds before it is back.
            self.replay_opens(index).await;
            self.replay_advisory(target).await;
        }
        let locks = self.locks.granted_of(target);
        let asked = locks.len() as u64;
        // An MDT waits for each client it recorded to say it is back, holding locks or not.
        let replayed = if locks.is_empty() && !mdt {
            Ok(Vec::new())
        } else {
            let root = Caller::root();
            let replay = self.ldlm(&root, target, weft_proto::lock::Replay { locks });
            match tokio::time::timeout(Duration::from_millis(limits::LOCK_REPLAY_MS_MAX), replay).await {
                Ok(Ok(r)) => {
                    tracing::info!(?target, asked, kept = r.kept.len(), "replayed locks to the target's new server");
                    Ok(r.kept)
                }
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer within {} ms", limits::LOCK_REPLAY_MS_MAX)),
            }
        };
        let kept = replayed.unwrap_or_else(|why| {
            tracing::info!(?target, "lock replay failed ({why}): dropping what was cached under its locks");
            Vec::new()
        });
        let kept_n = kept.len() as u64;
        self.import(target, |i| {
            i.locks_kept += kept_n;
            i.locks_refused += asked - kept_n.min(asked);
        });
        let forgotten = self.locks.keep_only(target, &kept);
        if forgotten > 0 && mdt {
            self.inodes.clear();
        }
        self.import(target, |i| i.replaying = false);
    }

    /// Marks `target`'s lock replay as under way before it starts (see
    /// [`Client::replay_after_reconnect`]).
    pub(crate) fn mark_replaying(&self, target: LockTarget) {
        self.import(target, |i| i.replaying = true);
    }

    /// The targets whose lock replay is under way.
    pub(crate) fn replaying_targets(&self) -> Vec<LockTarget> {
        let imports = self.imports.lock().unwrap_or_else(|p| p.into_inner());
        imports.iter().filter(|(_, i)| i.replaying).map(|(t, _)| *t).collect()
    }

    pub(crate) fn note_write_replay(&self, target: LockTarget, replayed: u64, lost: u64) {
        self.import(target, |i| {
            i.writes_replayed += replayed;
            i.writes_lost += lost;
        });
    }

    fn import(&self, target: LockTarget, f: impl FnOnce(&mut ImportStats)) {
        f(self.imports.lock().unwrap_or_else(|p| p.into_inner()).entry(target).or_default());
    }

    /// `{mdc,osc}.FS-TARGET-{mdc,osc}-CLIENT.import` for the targets of the map, in the shape
    /// of Lustre's (the fields Weft has): the state (FULL, REPLAY_LOCKS while it replays to
    /// a target's new server, DISCONN for a target the map has down), the server it is
    /// reached at, how many it was reached at, and what its replays kept.
    pub fn import_params(&self) -> Vec<(String, String)> {
        let state = self.map.current();
        let map = &state.map;
        let imports = self.imports.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let client = self.client_id();
        let mut osts = 0;
        let mut out = Vec::new();
        for t in &map.targets {
            let (kind, short) = match t.kind {
                TargetKind::Mdt => ("mdc", "mdc"),
                TargetKind::Ost => ("osc", "osc"),
            };
            if t.kind == TargetKind::Ost {
                osts += 1;
                if osts > OSC_IMPORTS_LISTED_MAX {
                    continue;
                }
            }
            let target = target_name(&map.fsname, t.kind, t.index);
            let i = imports.get(&LockTarget::of(t.kind, t.index)).cloned().unwrap_or_default();
            let status = match (t.state, i.replaying) {
                (weft_proto::msg::TargetState::Down, _) => "DISCONN",
                (_, true) => "REPLAY_LOCKS",
                _ => "FULL",
            };
            let name = format!("{target}-{short}-{client:x}");
            let mut v = String::new();
            let _ = writeln!(v, "import:");
            let _ = writeln!(v, "    name: {name}");
            let _ = writeln!(v, "    target: {target}_UUID");
            let _ = writeln!(v, "    state: {status}");
            let flags = if t.kind == TargetKind::Mdt {
                "inode_bit_locks, lock_replay, open_replay, reply_cache"
            } else {
                "extent_locks, lock_replay, write_replay"
            };
            let _ = writeln!(v, "    connect_flags: [ {flags} ]");
            let _ = writeln!(v, "    import_flags: [ replayable, connect_tried ]");
            let _ = writeln!(v, "    connection:");
            // Every server that may serve it (Lustre's failover NIDs), as they registered.
            let nids = if t.servers.is_empty() { t.address.clone() } else { t.servers.join(", ") };
            let _ = writeln!(v, "       failover_nids: [ {nids} ]");
            let _ = writeln!(v, "       current_connection: {}", t.address);
            let _ = writeln!(v, "       generation: {}", i.moves + 1);
            let _ = writeln!(v, "    replay:");
            let _ = writeln!(v, "       locks_kept: {}", i.locks_kept);
            let _ = writeln!(v, "       locks_refused: {}", i.locks_refused);
            let _ = writeln!(v, "       writes_replayed: {}", i.writes_replayed);
            let _ = writeln!(v, "       writes_lost: {}", i.writes_lost);
            if t.kind == TargetKind::Mdt {
                let _ = writeln!(v, "       opens_kept: {}", i.opens_kept);
                let _ = writeln!(v, "       opens_refused: {}", i.opens_refused);
            }
            out.push((format!("{kind}.{name}.import"), v));
        }
        out
    }

    /// Records an open this client made (or forgets one it closed), for [`Client::replay_opens`].
    pub(crate) fn note_open(&self, opened: &weft_proto::msg::mdt::Opened, flags: u32) {
        let open = weft_proto::msg::mdt::ReplayedOpen {
            fid: opened.inode.attr.fid,
            handle: opened.handle,
            flags: flags & (weft_proto::msg::OPEN_READ | weft_proto::msg::OPEN_WRITE),
            passthrough: opened.io == weft_proto::msg::OpenIo::Passthrough,
        };
        let fresh = self.opens.lock().unwrap_or_else(|p| p.into_inner()).insert(opened.handle, open).is_none();
        // Never under the opens lock: one lock at a time (note_closed takes them in turn).
        let attr = &opened.inode.attr;
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        let entry = owners.entry(attr.fid).or_insert((0, owner_of(attr)));
        entry.0 += u32::from(fresh);
        entry.1 = owner_of(attr);
    }

    pub(crate) fn note_closed(&self, handle: u64) {
        let closed = self.opens.lock().unwrap_or_else(|p| p.into_inner()).remove(&handle);
        if let Some(closed) = closed {
            let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(entry) = owners.get_mut(&closed.fid) {
                entry.0 = entry.0.saturating_sub(1);
                if entry.0 == 0 {
                    owners.remove(&closed.fid);
                }
            }
        }
    }

    /// The owner of a file open here as the MDS last answered it (a chown here).
    pub(crate) fn note_owner(&self, attr: &weft_proto::msg::Attr) {
        if let Some(entry) = self.owners.lock().unwrap_or_else(|p| p.into_inner()).get_mut(&attr.fid) {
            entry.1 = owner_of(attr);
        }
    }

    /// An OST said `fid`'s owner is close to its quota there: writes go through for a
    /// while ([`Client::quota_tight`]).
    pub(crate) fn note_quota_tight(&self, fid: weft_proto::Fid) {
        let until = std::time::Instant::now() + std::time::Duration::from_millis(crate::limits::QUOTA_TIGHT_HOLD_MS);
        let mut tight = self.quota_tight.lock().unwrap_or_else(|p| p.into_inner());
        tight.retain(|_, t| *t > std::time::Instant::now());
        tight.insert(fid, until);
    }

    /// Whether writes to `fid` should go through, not behind: an OST said recently that its
    /// owner is close to a quota limit (so that EDQUOT reaches the write that passes it).
    pub fn quota_tight(&self, fid: weft_proto::Fid) -> bool {
        let tight = self.quota_tight.lock().unwrap_or_else(|p| p.into_inner());
        !tight.is_empty() && tight.get(&fid).is_some_and(|t| *t > std::time::Instant::now())
    }

    /// Whose quotas the writes to `fid` count against; None for a file not open here (its
    /// objects keep the owner they have).
    pub(crate) fn owner_of(&self, fid: weft_proto::Fid) -> Option<weft_proto::msg::quota::QuotaOwner> {
        self.owners.lock().unwrap_or_else(|p| p.into_inner()).get(&fid).map(|e| e.1)
    }

    /// Open replay: a replicated MDT's new leader does not know the opens this client made
    /// under the old one (they lived in its memory); this client gives it them back under
    /// the same handles during its recovery window, so that the last close of a file still
    /// records its size or destroys it if unlinked, and an unlinked file open here is not
    /// taken for an orphan. A refused open's close is answered "stale", as after a restart.
    async fn replay_opens(&self, mdt: u32) {
        let opens: Vec<weft_proto::msg::mdt::ReplayedOpen> = self
            .opens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|o| o.fid.mdt_index() == mdt)
            .copied()
            .collect();
        if opens.is_empty() {
            return;
        }
        let asked = opens.len();
        let root = Caller::root();
        let replay = self.mdt(&root, weft_proto::msg::mdt::ReplayOpens { opens });
        match tokio::time::timeout(Duration::from_millis(limits::LOCK_REPLAY_MS_MAX), replay).await {
            Ok(Ok(kept)) => {
                tracing::info!(asked, kept = kept.len(), "replayed opens to the MDT's new leader");
                let kept = kept.len() as u64;
                self.import(LockTarget::Mdt(mdt), |i| {
                    i.opens_kept += kept;
                    i.opens_refused += (asked as u64).saturating_sub(kept);
                });
            }
            Ok(Err(e)) => tracing::info!("open replay failed ({e}): the opens' closes will be answered stale"),
            Err(_) => tracing::info!("open replay got no answer within {} ms", limits::LOCK_REPLAY_MS_MAX),
        }
    }
}

/// The targets `before` had at another address than `after` has them, or under another
/// instance (their server registered again: it restarted).
pub(crate) fn moved_targets(before: &ClusterMap, after: &ClusterMap) -> Vec<LockTarget> {
    after
        .targets
        .iter()
        .filter(|t| {
            before
                .targets
                .iter()
                .any(|b| b.kind == t.kind && b.index == t.index && (b.address != t.address || b.instance != t.instance))
        })
        .map(|t| LockTarget::of(t.kind, t.index))
        .collect()
}

fn owner_of(attr: &weft_proto::msg::Attr) -> weft_proto::msg::quota::QuotaOwner {
    weft_proto::msg::quota::QuotaOwner { uid: attr.uid, gid: attr.gid, projid: attr.projid }
}

impl Client {
    /// A peer opened a new connection in place of a broken one, so it may be talking to a
    /// restarted server, which has forgotten the locks it granted: this client replays the
    /// locks of that server's targets (as when the map shows a restart, which it may not
    /// show yet), unless a replay of them is under way. A server that restarted keeps them
    /// during its recovery window, in which it grants nothing else, so no cache they guard
    /// goes stale; a server that did not restart (a network blip) refuses them (it is in no
    /// window), and they are forgotten with what they guarded, as are the locks of a
    /// replay that comes after the window. Runs as a task: the replay goes on the new
    /// connection after the request that made it.
    pub(crate) fn replay_after_reconnect(&self, address: &str) {
        let replaying = self.replaying_targets();
        let targets: Vec<LockTarget> = self
            .targets_at(address)
            .into_iter()
            .filter(|t| {
                !replaying.contains(t)
                    && (self.locks.holds_any(*t) || self.holds_advisory_on(*t) || self.keeps_writes_for(*t))
            })
            .collect();
        if targets.is_empty() {
            return;
        }
        tracing::info!("reconnected to {address}: replaying the locks of its targets");
        for &target in &targets {
            self.mark_replaying(target);
        }
        let client = self.weak_self.clone();
        tokio::spawn(async move {
            for target in targets {
                let Some(c) = client.upgrade() else { return };
                c.replay_locks(target).await;
            }
        });
    }

    /// Whether this client holds advisory locks, which the MDT `target` keeps.
    fn holds_advisory_on(&self, target: LockTarget) -> bool {
        matches!(target, LockTarget::Mdt(_)) && !self.held_advisory().is_empty()
    }

    /// The lock targets the map has served at `address`.
    fn targets_at(&self, address: &str) -> Vec<LockTarget> {
        let state = self.map.current();
        state.map.targets.iter().filter(|t| t.address == address).map(|t| LockTarget::of(t.kind, t.index)).collect()
    }

    /// A connection to `address` broke. While this client holds locks of a target there, a
    /// server that calls one back must be able to reach it, so it connects again at once
    /// (an empty cancel: the first request on the new connection also tells the server
    /// where the client is) rather than at its next request, which for an idle client may
    /// be never: the server would evict it after its lock timeout. Event-driven, so an idle
    /// client with healthy connections sends nothing (Lustre's clients ping every server
    /// for this). Tries again after a pause, doubling, until the request timeout.
    pub(crate) fn connection_lost(&self, address: &str) {
        let Some(target) = self.targets_at(address).into_iter().find(|t| self.locks.holds_any(*t)) else {
            return;
        };
        let client = self.weak_self.clone();
        let request_timeout = self.config.request_timeout;
        tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let mut pause = Duration::from_millis(limits::RECONNECT_PAUSE_MS_MIN);
            loop {
                tokio::time::sleep(pause).await;
                let Some(c) = client.upgrade() else { return };
                if !c.locks.holds_any(target) {
                    return;
                }
                let root = Caller::root();
                let probe = c.ldlm(&root, target, weft_proto::lock::Cancel { handles: Vec::new() });
                if tokio::time::timeout(c.config.connect_timeout, probe).await.is_ok_and(|r| r.is_ok()) {
                    return;
                }
                drop(c);
                if started.elapsed() >= request_timeout {
                    return;
                }
                pause = (pause * 2).min(Duration::from_millis(limits::RECONNECT_PAUSE_MS_MAX));
            }
        });
    }
}

/// Drops the connections to servers that left the map, as the map changes, and replays
/// the locks of a target that moved ([`Client::replay_locks`]). Ends when the client is
/// dropped.
pub(crate) async fn drop_peers_that_left(client: Weak<Client>, mut changes: watch::Receiver<Arc<MapState>>) {
    let mut before = changes.borrow_and_update().clone();
    while changes.changed().await.is_ok() {
        let Some(client) = client.upgrade() else { return };
        let state = changes.borrow_and_update().clone();
        client.peers.retain_map(&state);
        // The MDT first: its window waits for this client's lock replay, the OSTs' do not.
        let mut moved = moved_targets(&before.map, &state.map);
        moved.sort_by_key(|t| !matches!(t, LockTarget::Mdt(_)));
        for target in moved {
            client.replay_locks(target).await;
        }
        before = state;
    }
}

/// Comes back under a new id when the management service says a server evicted this client
/// (`MapFollower::evictions`): an idle client learns it without pinging every server.
/// Ends when the client is dropped.
pub(crate) async fn watch_evictions(client: Weak<Client>, mut evicted: watch::Receiver<u64>) {
    while evicted.changed().await.is_ok() {
        let id = *evicted.borrow_and_update();
        let Some(client) = client.upgrade() else { return };
        client.evicted(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_proto::msg::TargetKind;

    #[test]
    fn a_target_moved_or_restarted_is_named_and_one_that_stayed_or_came_is_not() {
        let target = |kind, index, address: &str| weft_proto::msg::TargetInfo::new(kind, index, address);
        let map = |targets| ClusterMap { targets, ..ClusterMap::default() };
        let before = map(vec![target(TargetKind::Mdt, 0, "a:1"), target(TargetKind::Ost, 1, "b:1")]);
        let after = map(vec![
            target(TargetKind::Mdt, 0, "c:1"),
            target(TargetKind::Ost, 1, "b:1"),
            target(TargetKind::Ost, 2, "d:1"),
        ]);
        assert_eq!(moved_targets(&before, &after), vec![LockTarget::Mdt(0)]);
        assert!(moved_targets(&after, &after).is_empty());
        let mut restarted = after.clone();
        restarted.targets[1].instance += 1;
        assert_eq!(moved_targets(&after, &restarted), vec![LockTarget::Ost(1)], "a new instance at the same address");
    }
}
