use super::*;
use crate::recovery::LockClients;
use std::sync::OnceLock;
use tokio::time::Instant;
use weft_proto::lock::{bits, Extent};

const OBJ: Fid = Fid::new(0x1_0000_0000, 1, 0);
const OBJ2: Fid = Fid::new(0x1_0000_0000, 2, 0);
const INODE: Fid = Fid::new(0x2_0000_0400, 7, 0);
const PLAIN: EnqueueOptions = EnqueueOptions { reuse: false, expand: false };

/// How a fake client answers callbacks.
#[derive(Debug, Clone)]
enum Behaviour {
    /// Answers this after the delay.
    Answer(CallbackAnswer, Duration),
    /// Never answers.
    Silent,
    /// Unreachable: the send fails at once.
    Unreachable,
    /// Gives the lock back when its operation is done: answers `Unknown` once the lock
    /// was cancelled (polls the namespace). Glimpses are answered `Flushed`.
    WhenDone,
}

#[derive(Default)]
struct Fake {
    behaviour: Mutex<HashMap<u64, Behaviour>>,
    calls: Mutex<Vec<(u64, CallbackRequest)>>,
    evicted: Mutex<Vec<(u64, String)>>,
    ns: OnceLock<Weak<Namespace>>,
}

impl Fake {
    fn set(&self, owner: u64, b: Behaviour) {
        self.behaviour.lock().unwrap().insert(owner, b);
    }
    fn calls(&self) -> Vec<(u64, CallbackRequest)> {
        self.calls.lock().unwrap().clone()
    }
    fn evicted(&self) -> Vec<(u64, String)> {
        self.evicted.lock().unwrap().clone()
    }
}

impl CallbackSender for Fake {
    fn send(
        &self,
        owner: u64,
        callback: CallbackRequest,
        _: Duration,
    ) -> BoxFuture<'static, WeftResult<CallbackAnswer>> {
        self.calls.lock().unwrap().push((owner, callback.clone()));
        let behaviour = self.behaviour.lock().unwrap().get(&owner).cloned();
        let ns = self.ns.get().cloned();
        Box::pin(async move {
            match behaviour.unwrap_or(Behaviour::Answer(CallbackAnswer::Released, Duration::ZERO)) {
                Behaviour::Answer(answer, delay) => {
                    tokio::time::sleep(delay).await;
                    Ok(answer)
                }
                Behaviour::Silent => futures::future::pending().await,
                Behaviour::Unreachable => Err(WeftError::new(ErrorCode::TimedOut, "client unreachable")),
                Behaviour::WhenDone => {
                    let CallbackRequest::Blocking { handle, .. } = callback else {
                        return Ok(CallbackAnswer::Flushed);
                    };
                    while ns.as_ref().and_then(Weak::upgrade).is_some_and(|ns| ns.lock(handle).is_some()) {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    Ok(CallbackAnswer::Unknown)
                }
            }
        })
    }

    fn evict(&self, owner: u64, reason: String) {
        self.evicted.lock().unwrap().push((owner, reason));
    }
}

fn setup(timeout_ms: u64) -> (Arc<Namespace>, Arc<Fake>) {
    let fake = Arc::new(Fake::default());
    let config = NamespaceConfig {
        target: LockTarget::Ost(3),
        callback_timeout: Duration::from_millis(timeout_ms),
        recovery_until: None,
    };
    let ns = Namespace::new(config, fake.clone());
    fake.ns.set(Arc::downgrade(&ns)).unwrap();
    (ns, fake)
}

fn ext(start: u64, end: u64) -> LockScope {
    LockScope::Extent(Extent { start, end })
}

/// The enqueue future can be spawned (no mutex guard lives across an await).
#[test]
fn futures_are_send() {
    fn send<T: Send>(_: &T) {}
    let (ns, _) = setup(100);
    send(&ns.enqueue(1, OBJ, LockMode::Pr, ext(0, 0), PLAIN));
    send(&ns.enqueue_many(1, &[]));
    send(&ns.glimpse(1, OBJ));
}

#[tokio::test(start_paused = true)]
async fn holder_is_called_back_and_releases() {
    let (ns, fake) = setup(2000);
    let held = ns.enqueue(1, OBJ, LockMode::Pw, LockScope::Extent(Extent::WHOLE), PLAIN).await.unwrap();
    fake.set(1, Behaviour::Answer(CallbackAnswer::Released, Duration::from_millis(20)));
    let got = ns.enqueue(2, OBJ, LockMode::Pr, ext(0, 10), PLAIN).await.unwrap();
    assert_eq!((got.mode, got.scope), (LockMode::Pr, ext(0, 10)));
    let blocking = CallbackRequest::Blocking {
        target: LockTarget::Ost(3),
        handle: held.handle,
        resource: OBJ,
        wanted: ext(0, 10),
    };
    assert_eq!(fake.calls(), vec![(1, blocking)]);
    assert!(ns.lock(held.handle).is_none());
    assert_eq!(ns.lock_count(), 1);
    assert!(fake.evicted().is_empty());
}

#[tokio::test(start_paused = true)]
async fn narrowed_answer_keeps_the_narrowed_lock() {
    let (ns, fake) = setup(2000);
    let lookup_update = LockScope::Bits(bits::LOOKUP | bits::UPDATE);
    let held = ns.enqueue(1, INODE, LockMode::Pr, lookup_update, PLAIN).await.unwrap();
    fake.set(1, Behaviour::Answer(CallbackAnswer::Narrowed(LockScope::Bits(bits::LOOKUP)), Duration::ZERO));
    ns.enqueue(2, INODE, LockMode::Ex, LockScope::Bits(bits::UPDATE), PLAIN).await.unwrap();
    let kept = ns.lock(held.handle).unwrap();
    assert!(kept.granted);
    assert_eq!((kept.mode, kept.scope), (LockMode::Pr, LockScope::Bits(bits::LOOKUP)));
    assert_eq!(ns.lock_count(), 2);
}

#[tokio::test(start_paused = true)]
async fn narrowed_answer_that_still_conflicts_counts_as_released() {
    let (ns, fake) = setup(2000);
    let held = ns.enqueue(1, INODE, LockMode::Pr, LockScope::Bits(bits::ALL), PLAIN).await.unwrap();
    fake.set(1, Behaviour::Answer(CallbackAnswer::Narrowed(LockScope::Bits(bits::UPDATE)), Duration::ZERO));
    ns.enqueue(2, INODE, LockMode::Ex, LockScope::Bits(bits::UPDATE), PLAIN).await.unwrap();
    assert!(ns.lock(held.handle).is_none());
    assert!(fake.evicted().is_empty());
}

#[tokio::test(start_paused = true)]
async fn silent_holder_is_evicted_after_the_timeout() {
    let (ns, fake) = setup(200);
    let held = ns.enqueue(1, OBJ, LockMode::Pw, ext(0, 99), PLAIN).await.unwrap();
    ns.enqueue(1, INODE, LockMode::Pr, LockScope::Bits(bits::LOOKUP), PLAIN).await.unwrap();
    fake.set(1, Behaviour::Silent);
    let start = Instant::now();
    let got = ns.enqueue(2, OBJ, LockMode::Pw, ext(50, 50), PLAIN).await.unwrap();
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(200) && waited < Duration::from_millis(1000), "{waited:?}");
    assert_eq!(got.scope, ext(50, 50));
    let evicted = fake.evicted();
    assert_eq!(evicted.len(), 1);
    let (owner, reason) = &evicted[0];
    assert_eq!(*owner, 1);
    for part in ["Ost(3)", &format!("lock {}", held.handle), "200ms"] {
        assert!(reason.contains(part), "{reason:?} does not name {part}");
    }
    // All of the evicted owner's locks went, not only the blocking one.
    assert_eq!(ns.owner_lock_count(1), 0);
    assert_eq!(ns.lock_count(), 1);
}

#[tokio::test(start_paused = true)]
async fn unreachable_holder_is_evicted_at_once() {
    let (ns, fake) = setup(5000);
    ns.enqueue(1, OBJ, LockMode::Pr, ext(0, 99), PLAIN).await.unwrap();
    fake.set(1, Behaviour::Unreachable);
    let start = Instant::now();
    ns.enqueue(2, OBJ, LockMode::Ex, ext(0, 0), PLAIN).await.unwrap();
    assert!(start.elapsed() < Duration::from_secs(1));
    assert_eq!(fake.evicted().iter().map(|e| e.0).collect::<Vec<_>>(), vec![1]);
    assert!(fake.evicted()[0].1.contains("unreachable"));
}

#[tokio::test(start_paused = true)]
async fn glimpse_calls_back_only_other_owners_write_locks() {
    let (ns, fake) = setup(2000);
    ns.enqueue(1, OBJ, LockMode::Pw, ext(0, 99), PLAIN).await.unwrap();
    ns.enqueue(1, OBJ, LockMode::Pw, ext(100, 199), PLAIN).await.unwrap();
    ns.enqueue(2, OBJ, LockMode::Pr, ext(200, 299), PLAIN).await.unwrap();
    ns.enqueue(3, OBJ, LockMode::Ex, ext(300, 399), PLAIN).await.unwrap();
    ns.enqueue(4, OBJ, LockMode::Pw, ext(400, 499), PLAIN).await.unwrap();
    ns.enqueue(5, OBJ2, LockMode::Pw, ext(0, 99), PLAIN).await.unwrap();
    fake.set(1, Behaviour::Answer(CallbackAnswer::Flushed, Duration::from_millis(10)));
    fake.set(3, Behaviour::Answer(CallbackAnswer::Flushed, Duration::from_millis(10)));
    ns.glimpse(4, OBJ).await;
    let mut called: Vec<u64> = fake.calls().iter().map(|c| c.0).collect();
    called.sort();
    // One glimpse per owner: not the reader 2, not the asker 4, not 5 on another object.
    assert_eq!(called, vec![1, 3]);
    assert!(fake.calls().iter().all(|c| c.1 == CallbackRequest::Glimpse { target: LockTarget::Ost(3), resource: OBJ }));
    assert!(fake.evicted().is_empty());
    assert_eq!(ns.lock_count(), 6);
}

#[tokio::test(start_paused = true)]
async fn glimpse_evicts_a_silent_writer() {
    let (ns, fake) = setup(150);
    ns.enqueue(1, OBJ, LockMode::Pw, ext(0, 99), PLAIN).await.unwrap();
    fake.set(1, Behaviour::Silent);
    let start = Instant::now();
    ns.glimpse(2, OBJ).await;
    assert!(start.elapsed() >= Duration::from_millis(150));
    assert_eq!(fake.evicted().len(), 1);
    assert!(fake.evicted()[0].1.contains("glimpse"));
    assert_eq!(ns.lock_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn dropped_enqueue_cancels_its_request() {
    let (ns, fake) = setup(5000);
    ns.enqueue(1, OBJ, LockMode::Pw, ext(0, 99), PLAIN).await.unwrap();
    fake.set(1, Behaviour::Silent);
    let gave_up =
        tokio::time::timeout(Duration::from_millis(50), ns.enqueue(2, OBJ, LockMode::Pr, ext(0, 0), PLAIN)).await;
    assert!(gave_up.is_err());
    assert_eq!(ns.lock_count(), 1);
    assert_eq!(ns.owner_lock_count(2), 0);
    // The holder was called back once, and nothing else waits.
    assert_eq!(fake.calls().len(), 1);
    assert!(ns.inner().waiters.is_empty());
}

#[tokio::test(start_paused = true)]
async fn enqueue_many_in_opposite_orders_does_not_deadlock() {
    let (ns, fake) = setup(2000);
    fake.set(1, Behaviour::WhenDone);
    fake.set(2, Behaviour::WhenDone);
    let scope = LockScope::Bits(bits::UPDATE);
    let operation = |owner: u64, wants: Vec<(Fid, LockMode, LockScope)>| {
        let ns = ns.clone();
        tokio::spawn(async move {
            for _ in 0..20 {
                let grants = ns.enqueue_many(owner, &wants).await.unwrap();
                // Answered in the order asked.
                assert_eq!(
                    grants.iter().map(|g| g.resource).collect::<Vec<_>>(),
                    wants.iter().map(|w| w.0).collect::<Vec<_>>()
                );
                tokio::time::sleep(Duration::from_millis(3)).await;
                ns.cancel(owner, &grants.iter().map(|g| g.handle).collect::<Vec<_>>());
            }
        })
    };
    let start = Instant::now();
    let a = operation(1, vec![(INODE, LockMode::Ex, scope), (OBJ, LockMode::Ex, ext(0, 0))]);
    let b = operation(2, vec![(OBJ, LockMode::Ex, ext(0, 0)), (INODE, LockMode::Ex, scope)]);
    a.await.unwrap();
    b.await.unwrap();
    assert!(start.elapsed() < Duration::from_millis(1500), "{:?}", start.elapsed());
    assert!(fake.evicted().is_empty(), "{:?}", fake.evicted());
    assert_eq!(ns.lock_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn enqueue_many_cancels_what_it_took_when_it_fails() {
    let (ns, fake) = setup(5000);
    ns.enqueue(2, OBJ2, LockMode::Pw, ext(0, 0), PLAIN).await.unwrap();
    fake.set(2, Behaviour::Silent);
    let ns2 = ns.clone();
    let many = tokio::spawn(async move {
        ns2.enqueue_many(1, &[(OBJ2, LockMode::Pw, ext(0, 0)), (OBJ, LockMode::Pw, ext(0, 0))]).await
    });
    // OBJ (the lower FID) is taken first; then it waits for OBJ2 until owner 1 is evicted.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(ns.owner_lock_count(1), 2);
    ns.drop_owner(1);
    assert_eq!(many.await.unwrap().unwrap_err().code, ErrorCode::Evicted);
    assert_eq!(ns.owner_lock_count(1), 0);
    assert_eq!(ns.lock_count(), 1);
}

#[tokio::test(start_paused = true)]
async fn new_blockers_get_callbacks_while_a_request_waits() {
    let (ns, fake) = setup(2000);
    let reader = ns.enqueue(1, OBJ, LockMode::Pr, ext(0, 99), PLAIN).await.unwrap();
    fake.set(1, Behaviour::Answer(CallbackAnswer::Released, Duration::from_millis(50)));
    let ns2 = ns.clone();
    let writer = tokio::spawn(async move { ns2.enqueue(2, OBJ, LockMode::Pw, ext(0, 99), PLAIN).await });
    tokio::time::sleep(Duration::from_millis(10)).await;
    // A reader behind the waiting writer: no granted blocker yet, so no callback.
    let ns3 = ns.clone();
    let late = tokio::spawn(async move { ns3.enqueue(3, OBJ, LockMode::Pr, ext(10, 10), PLAIN).await });
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(fake.calls().len(), 1);
    // Once the writer is granted, it blocks the reader and is called back in turn.
    let patience = Duration::from_secs(1);
    let writer = tokio::time::timeout(patience, writer).await.expect("writer never granted").unwrap().unwrap();
    tokio::time::timeout(patience, late).await.expect("late reader never granted").unwrap().unwrap();
    let handles: Vec<(u64, LockHandle)> = fake
        .calls()
        .into_iter()
        .map(|(owner, c)| match c {
            CallbackRequest::Blocking { handle, .. } => (owner, handle),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(handles, vec![(1, reader.handle), (2, writer.handle)]);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_whose_owner_is_evicted_gets_evicted() {
    let (ns, fake) = setup(200);
    // Owner 1 holds OBJ and waits for OBJ2, held by owner 2.
    ns.enqueue(1, OBJ, LockMode::Pw, ext(0, 0), PLAIN).await.unwrap();
    ns.enqueue(2, OBJ2, LockMode::Pw, ext(0, 0), PLAIN).await.unwrap();
    fake.set(1, Behaviour::Silent);
    fake.set(2, Behaviour::Silent);
    // Owner 3 wants OBJ first: owner 1 times out 100 ms before owner 2 would.
    let ns3 = ns.clone();
    let third = tokio::spawn(async move { ns3.enqueue(3, OBJ, LockMode::Pr, ext(0, 0), PLAIN).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let err = ns.enqueue(1, OBJ2, LockMode::Pr, ext(0, 0), PLAIN).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Evicted);
    third.await.unwrap().unwrap();
    assert_eq!(ns.owner_lock_count(1), 0);

    // The same through an admin's drop_owner.
    let (ns, fake) = setup(5000);
    ns.enqueue(2, OBJ2, LockMode::Pw, ext(0, 0), PLAIN).await.unwrap();
    fake.set(2, Behaviour::Silent);
    let ns1 = ns.clone();
    let waiter = tokio::spawn(async move { ns1.enqueue(1, OBJ2, LockMode::Pr, ext(0, 0), PLAIN).await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    ns.drop_owner(1);
    assert_eq!(waiter.await.unwrap().unwrap_err().code, ErrorCode::Evicted);
    assert_eq!(ns.lock_count(), 1);
    assert!(fake.evicted().is_empty());
}

#[tokio::test(start_paused = true)]
async fn reuse_and_expand_pass_through() {
    let (ns, _) = setup(2000);
    let opts = EnqueueOptions { reuse: true, expand: true };
    let first = ns.enqueue(1, OBJ, LockMode::Pw, ext(0, 4095), opts).await.unwrap();
    assert_eq!(first.scope, LockScope::Extent(Extent::WHOLE));
    let again = ns.enqueue(1, OBJ, LockMode::Pr, ext(8192, 12287), opts).await.unwrap();
    assert_eq!(again, first);
    assert_eq!(ns.lock_count(), 1);
}

/// An operation's locks hold off other owners without calling anyone back, and the
/// waiter is granted when the operation cancels them; other owners' cached locks are
/// called back as usual.
#[tokio::test(start_paused = true)]
async fn operation_locks_are_waited_for_never_called_back() {
    let (ns, fake) = setup(300);
    let cached = ns.enqueue(2, INODE, LockMode::Pr, LockScope::Bits(bits::UPDATE), PLAIN).await.unwrap();
    let op = ns.enqueue_operation(1, &[(INODE, LockMode::Ex, LockScope::Bits(bits::UPDATE))]).await.unwrap();
    assert_eq!(fake.calls().len(), 1, "the cached lock of owner 2 was called back");
    assert!(ns.lock(cached.handle).is_none());
    let waiter = {
        let ns = ns.clone();
        tokio::spawn(async move { ns.enqueue(3, INODE, LockMode::Pr, LockScope::Bits(bits::UPDATE), PLAIN).await })
    };
    // Longer than the callback timeout: a callback to owner 1 would have evicted it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiter.is_finished(), "granted while the operation holds EX");
    assert_eq!(fake.calls().len(), 1, "the operation's lock was called back");
    assert!(fake.evicted().is_empty());
    ns.cancel(1, &[op[0].handle]);
    let got = tokio::time::timeout(Duration::from_secs(2), waiter).await.unwrap().unwrap().unwrap();
    assert_eq!(got.mode, LockMode::Pr);
}

fn setup_bounded(locks_per_client_max: usize, waiting_per_resource_max: usize) -> (Arc<Namespace>, Arc<Fake>) {
    let fake = Arc::new(Fake::default());
    let config =
        NamespaceConfig { target: LockTarget::Ost(3), callback_timeout: Duration::from_secs(5), recovery_until: None };
    let bounds = NamespaceBounds { locks_per_client_max, waiting_per_resource_max };
    let ns = Namespace::with_bounds(config, bounds, fake.clone());
    fake.ns.set(Arc::downgrade(&ns)).unwrap();
    (ns, fake)
}

/// A client takes locks up to its bound; one more is `NoLocks` and changes nothing (no
/// callback, nobody evicted); a lock handed out again is no new lock; a cancel makes room.
#[tokio::test(start_paused = true)]
async fn a_client_past_its_lock_bound_gets_no_locks() {
    let (ns, fake) = setup_bounded(3, 8);
    let objects = [Fid::new(0x1_0000_0000, 10, 0), Fid::new(0x1_0000_0000, 11, 0), Fid::new(0x1_0000_0000, 12, 0)];
    ns.enqueue(1, objects[0], LockMode::Pw, ext(0, 99), PLAIN).await.unwrap();
    let below = ns.enqueue(1, objects[1], LockMode::Pw, ext(0, 99), PLAIN).await.unwrap(); // one below
    ns.enqueue(1, objects[2], LockMode::Pw, ext(0, 99), PLAIN).await.unwrap(); // at the bound
    ns.enqueue(2, OBJ, LockMode::Pw, ext(0, 99), PLAIN).await.unwrap();
    let err = ns.enqueue(1, OBJ, LockMode::Pr, ext(0, 0), PLAIN).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::NoLocks);
    assert!(err.message.contains("holds 3 locks"), "{}", err.message);
    assert_eq!((ns.owner_lock_count(1), ns.lock_count()), (3, 4), "nothing changed");
    assert!(fake.calls().is_empty(), "owner 2 was called back for a refused request");
    assert!(fake.evicted().is_empty());
    // A lock the client holds already is handed out again, bound or not.
    let reuse = EnqueueOptions { reuse: true, expand: false };
    assert_eq!(ns.enqueue(1, objects[1], LockMode::Pr, ext(10, 20), reuse).await.unwrap(), below);
    // Other clients are not bounded by client 1's locks.
    ns.enqueue(3, OBJ2, LockMode::Pr, ext(0, 0), PLAIN).await.unwrap();
    // After a release the client takes a lock again, up to the bound.
    ns.cancel(1, &[below.handle]);
    ns.enqueue(1, OBJ2, LockMode::Pr, ext(0, 0), PLAIN).await.unwrap();
    assert_eq!(ns.enqueue(1, OBJ2, LockMode::Pr, ext(5, 5), PLAIN).await.unwrap_err().code, ErrorCode::NoLocks);
}

/// Requests wait on a resource up to the bound; one more is `Again` and leaves the line as
/// it was; once the line moves, a request may wait again.
#[tokio::test(start_paused = true)]
async fn a_request_past_the_waiting_bound_is_told_to_come_back() {
    let (ns, fake) = setup_bounded(100, 2);
    let held = ns.enqueue(1, OBJ, LockMode::Pw, ext(0, 99), PLAIN).await.unwrap();
    for owner in 1..=4 {
        fake.set(owner, Behaviour::Silent);
    }
    let wait = |owner: u64| {
        let ns = ns.clone();
        tokio::spawn(async move { ns.enqueue(owner, OBJ, LockMode::Pw, ext(0, 0), PLAIN).await })
    };
    let first = wait(2); // one below
    let second = wait(3); // at the bound
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(ns.lock_count(), 3);
    let err = ns.enqueue(4, OBJ, LockMode::Pr, ext(50, 50), PLAIN).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Again);
    assert!(err.message.contains("2 requests wait"), "{}", err.message);
    assert_eq!((ns.lock_count(), ns.owner_lock_count(4)), (3, 0), "the line is as it was");
    assert!(fake.evicted().is_empty());
    // Another resource has a line of its own.
    ns.enqueue(4, OBJ2, LockMode::Pr, ext(0, 0), PLAIN).await.unwrap();
    // The holder gives its lock back: the first waiter is granted, the line has room.
    ns.cancel(1, &[held.handle]);
    let granted = first.await.unwrap().unwrap();
    let third = wait(4);
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(!third.is_finished());
    ns.cancel(2, &[granted.handle]);
    let granted = second.await.unwrap().unwrap();
    ns.cancel(3, &[granted.handle]);
    third.await.unwrap().unwrap();
}

/// A target whose server changed holds grants back for the window it is given, and a later,
/// shorter window does not cut an earlier one short.
#[test]
fn grants_are_held_for_a_window_that_only_grows() {
    let (ns, _) = setup(100);
    assert_eq!(ns.grants_held_until(), None);
    let before = std::time::Instant::now();
    ns.hold_grants_for(Duration::from_secs(10));
    let until = ns.grants_held_until().expect("held");
    assert!(until >= before + Duration::from_secs(10) && until <= std::time::Instant::now() + Duration::from_secs(10));
    ns.hold_grants_for(Duration::from_secs(1));
    assert_eq!(ns.grants_held_until(), Some(until));
    ns.hold_grants_for(Duration::ZERO);
    assert_eq!(ns.grants_held_until(), Some(until));
}

/// A replay is taken only while grants are held back for the recovery window.
#[tokio::test]
async fn locks_are_replayed_only_inside_the_recovery_window() {
    let (ns, _) = setup(100);
    let grant = LockGrant { handle: 7, resource: OBJ, mode: LockMode::Pw, scope: ext(0, 99) };
    assert!(ns.replay(1, &[grant]).is_empty(), "no window, no replay");
    ns.hold_grants_for(Duration::from_secs(60));
    assert_eq!(ns.replay(1, &[grant, LockGrant { handle: 8, scope: ext(100, 199), ..grant }]), vec![7, 8]);
    assert!(ns.replay(2, &[LockGrant { handle: 9, ..grant }]).is_empty(), "another client's conflicting write");
    assert_eq!(ns.lock(7).map(|l| l.owner), Some(1));
    assert_eq!((ns.owner_lock_count(1), ns.owner_lock_count(2)), (2, 0));
}

/// A window ended sooner than it was to lets a waiting enqueue through then, not at its
/// first end (a new leader holds grants until the clients can know where it is).
#[tokio::test]
async fn a_recovery_window_ended_early_lets_waiting_enqueues_through() {
    let (ns, _) = setup(100);
    ns.hold_grants_for(Duration::from_secs(3600));
    let waiting = tokio::spawn({
        let ns = ns.clone();
        async move { ns.enqueue(1, OBJ, LockMode::Pw, ext(0, 9), PLAIN).await }
    });
    tokio::task::yield_now().await;
    assert!(!waiting.is_finished(), "nothing is granted inside the window");
    ns.end_recovery_in(Duration::ZERO);
    let granted = tokio::time::timeout(Duration::from_secs(10), waiting).await;
    assert!(granted.expect("granted once the window ended").unwrap().is_ok());
    assert!(ns.recovery_status().starts_with("status: COMPLETE"), "{}", ns.recovery_status());
}

/// A record of clients kept in memory, as an MDT keeps it in its store.
struct Record {
    set: Mutex<BTreeSet<u64>>,
    complete: std::sync::atomic::AtomicBool,
}

impl LockClients for Record {
    fn known(&self, owner: u64) -> bool {
        self.set.lock().unwrap().contains(&owner)
    }
    fn record(&self, owner: u64) -> BoxFuture<'static, WeftResult<()>> {
        self.set.lock().unwrap().insert(owner);
        Box::pin(async { Ok(()) })
    }
    fn forget(&self, owners: Vec<u64>) -> BoxFuture<'static, WeftResult<()>> {
        self.set.lock().unwrap().retain(|c| !owners.contains(c));
        Box::pin(async { Ok(()) })
    }
    fn recorded(&self) -> Option<Vec<u64>> {
        let complete = self.complete.load(std::sync::atomic::Ordering::Relaxed);
        complete.then(|| self.set.lock().unwrap().iter().copied().collect())
    }
    fn complete(&self) -> BoxFuture<'static, WeftResult<()>> {
        self.complete.store(true, std::sync::atomic::Ordering::Relaxed);
        Box::pin(async { Ok(()) })
    }
}

fn recorded(clients: &[u64]) -> Arc<Record> {
    let set = Mutex::new(clients.iter().copied().collect());
    Arc::new(Record { set, complete: std::sync::atomic::AtomicBool::new(true) })
}

/// A new leader's window: grants held, the record of `clients` set, then the server
/// registered (the window ends once they replayed, `max` from now at the latest).
fn registered_window(clients: &[u64], max: Duration) -> (Arc<Namespace>, Arc<Fake>, Arc<Record>) {
    let (ns, fake) = setup(100);
    let record = recorded(clients);
    ns.hold_grants_for(Duration::from_secs(3600));
    ns.set_lock_clients(record.clone());
    ns.end_recovery_when_replayed(max);
    (ns, fake, record)
}

/// A client is recorded before its first lock is granted; an operation's lock (the server's,
/// for one change) records nobody; a client that disconnects is forgotten with its locks.
#[tokio::test]
async fn a_client_is_recorded_before_its_first_lock_and_forgotten_when_it_disconnects() {
    let (ns, _) = setup(100);
    let record = recorded(&[]);
    ns.set_lock_clients(record.clone());
    ns.enqueue_operation(9, &[(OBJ, LockMode::Ex, ext(0, 9))]).await.unwrap();
    assert_eq!(record.recorded(), Some(vec![]));
    ns.enqueue(1, OBJ2, LockMode::Pr, ext(0, 9), PLAIN).await.unwrap();
    assert_eq!(record.recorded(), Some(vec![1]));
    ns.disconnect(1).await.unwrap();
    assert_eq!(record.recorded(), Some(vec![]));
    assert_eq!(ns.owner_lock_count(1), 0, "its locks went with it");
}

/// The window waits for the recorded clients and ends as soon as the last of them
/// replayed (one that held nothing says so with an empty replay), long before its end:
/// a waiting enqueue goes through then.
#[tokio::test]
async fn a_window_ends_once_every_recorded_client_replayed() {
    let (ns, fake, _) = registered_window(&[1, 2], Duration::from_secs(3600));
    let waiting = tokio::spawn({
        let ns = ns.clone();
        async move { ns.enqueue(3, OBJ2, LockMode::Pw, ext(0, 9), PLAIN).await }
    });
    let grant = LockGrant { handle: 7, resource: OBJ, mode: LockMode::Pw, scope: ext(0, 99) };
    assert_eq!(ns.replay(1, &[grant]), vec![7]);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "client 2 is not back yet");
    let status = ns.recovery_status();
    assert!(status.contains("status: RECOVERING\n") && status.contains("connected_clients: 1/2\n"), "{status}");
    assert!(ns.replay(2, &[]).is_empty());
    let granted = tokio::time::timeout(Duration::from_secs(10), waiting).await;
    assert!(granted.expect("granted once both replayed").unwrap().is_ok());
    let status = ns.recovery_status();
    assert!(status.contains("status: COMPLETE\n") && status.contains("completed_clients: 2/2\n"), "{status}");
    assert!(status.contains("evicted_clients: 0\n") && status.contains("replayed_locks: 1\n"), "{status}");
    assert!(fake.evicted().is_empty());
}

/// A recorded client that does not replay by the window's end is evicted and forgotten
/// (the next window does not wait for it); the one that came back keeps its lock.
#[tokio::test]
async fn a_client_that_does_not_come_back_is_evicted_at_the_windows_end() {
    let (ns, fake, record) = registered_window(&[1, 2], Duration::from_millis(300));
    let grant = LockGrant { handle: 7, resource: OBJ, mode: LockMode::Pw, scope: ext(0, 99) };
    assert_eq!(ns.replay(1, &[grant]), vec![7]);
    tokio::time::timeout(Duration::from_secs(10), ns.recovery_over()).await.expect("the window ends");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let evicted: Vec<u64> = fake.evicted().into_iter().map(|(c, _)| c).collect();
    assert_eq!(evicted, vec![2]);
    assert_eq!(record.recorded(), Some(vec![1]), "the evicted client is forgotten");
    assert_eq!(ns.lock(7).map(|l| l.owner), Some(1));
    let status = ns.recovery_status();
    assert!(status.contains("completed_clients: 1/2\n") && status.contains("evicted_clients: 1\n"), "{status}");
}

/// A restart's window (the namespace made with one) waits for the recorded clients too,
/// and with none recorded it ends at once: nobody held a lock to replay.
#[tokio::test]
async fn a_restarts_window_with_nobody_recorded_ends_at_once() {
    let fake = Arc::new(Fake::default());
    let config = NamespaceConfig {
        target: LockTarget::Mdt(0),
        callback_timeout: Duration::from_millis(100),
        recovery_until: Some(std::time::Instant::now() + Duration::from_secs(3600)),
    };
    let ns = Namespace::new(config, fake.clone());
    assert!(ns.grants_held_until().is_some());
    ns.set_lock_clients(recorded(&[]));
    tokio::time::timeout(Duration::from_secs(10), ns.recovery_over()).await.expect("over at once");
    ns.enqueue(1, OBJ, LockMode::Pr, ext(0, 9), PLAIN).await.unwrap();
}

/// A client whose opens or advisory locks came back (its lock replay follows) is given more
/// time at the window's end, once, and is not evicted when it replays then.
#[tokio::test]
async fn a_client_that_began_coming_back_gets_more_time() {
    let (ns, fake, _) = registered_window(&[1], Duration::from_millis(200));
    ns.replay_begun(1);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(ns.grants_held_until().is_some(), "still held for client 1: {}", ns.recovery_status());
    assert!(ns.replay(1, &[]).is_empty());
    tokio::time::timeout(Duration::from_secs(10), ns.recovery_over()).await.expect("over once it replayed");
    assert!(fake.evicted().is_empty());
}

/// A record that may miss clients (a target from before it) is not trusted: the window
/// lasts its whole length and evicts nobody; the clients that replayed in it are recorded
/// and the record is complete from then on.
#[tokio::test]
async fn an_incomplete_record_waits_the_whole_window_then_is_complete() {
    let (ns, fake) = setup(100);
    let record = Arc::new(Record { set: Mutex::new(BTreeSet::new()), complete: Default::default() });
    ns.hold_grants_for(Duration::from_secs(3600));
    ns.set_lock_clients(record.clone());
    ns.end_recovery_when_replayed(Duration::from_millis(300));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(ns.grants_held_until().is_some(), "an empty record that may miss clients ends nothing");
    let grant = LockGrant { handle: 7, resource: OBJ, mode: LockMode::Pw, scope: ext(0, 99) };
    assert_eq!(ns.replay(5, &[grant]), vec![7]);
    tokio::time::timeout(Duration::from_secs(10), ns.recovery_over()).await.expect("the window ends");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(fake.evicted().is_empty());
    assert_eq!(record.recorded(), Some(vec![5]), "the client that replayed is recorded, the record complete");
}

/// A new window (a replica leading again) is not ended, nor its clients evicted, by the
/// watcher of the last one; and a window that ended early is not opened again when the
/// server registers.
#[tokio::test]
async fn a_windows_watcher_leaves_the_next_window_alone_and_an_ended_one_stays_ended() {
    let (ns, fake, _) = registered_window(&[1], Duration::from_millis(200));
    ns.hold_grants_for(Duration::from_secs(3600));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(ns.recovering(), "the new window still holds: {}", ns.recovery_status());
    assert!(fake.evicted().is_empty(), "{:?}", fake.evicted());

    let (ns, _) = setup(100);
    ns.hold_grants_for(Duration::from_secs(3600));
    ns.set_lock_clients(recorded(&[1]));
    assert!(ns.replay(1, &[]).is_empty());
    tokio::time::timeout(Duration::from_secs(10), ns.recovery_over()).await.expect("over once client 1 is back");
    ns.end_recovery_when_replayed(Duration::from_secs(3600));
    assert!(!ns.recovering(), "the registration opens no ended window");
}
