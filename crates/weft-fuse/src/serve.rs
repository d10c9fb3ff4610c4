//! How a kernel request's work runs: on the FUSE thread that received it, polled there as
//! `Handle::block_on` would (so an in-process server pipeline runs on this thread too, with
//! no hand-off to a runtime worker and back), except when a server's scheduler holds the
//! request back on purpose (a rate limit, a delay: `weft_rpc::take_held`). Then the
//! request is moved to the runtime and finished there, and the thread goes back to the
//! kernel for the next request. A mount has a few FUSE threads (two, or one per CPU queue
//! with io_uring): were they held by a throttled class of requests, every other process's
//! requests would wait behind it.
//!
//! The work is a future that answers the kernel itself (it owns its `Reply`), so it can be
//! finished anywhere. How many requests are finished off their threads at once is bounded
//! ([`HELD_REQUESTS_MAX`]): past it a held request keeps its thread, as all did before.

use crate::limits::HELD_REQUESTS_MAX;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use tokio::sync::Semaphore;

pub(crate) struct Serve {
    runtime: tokio::runtime::Handle,
    /// One permit per request finished off its FUSE thread.
    held: Arc<Semaphore>,
}

/// Wakes the FUSE thread that parked polling a request. The flag, not the thread's park
/// token, says whether it was woken: code polled on the thread that parks on its own would
/// consume the token, and the wake-up with it.
struct ThreadWaker {
    thread: std::thread::Thread,
    woken: AtomicBool,
}

impl ThreadWaker {
    /// Parks until woken since the last call.
    fn wait(&self) {
        while !self.woken.swap(false, Ordering::Acquire) {
            std::thread::park();
        }
    }
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

thread_local! {
    static THREAD_WAKER: Arc<ThreadWaker> =
        Arc::new(ThreadWaker { thread: std::thread::current(), woken: AtomicBool::new(false) });
}

impl Serve {
    pub(crate) fn new(runtime: tokio::runtime::Handle) -> Serve {
        Serve { runtime, held: Arc::new(Semaphore::new(HELD_REQUESTS_MAX)) }
    }

    pub(crate) fn runtime(&self) -> &tokio::runtime::Handle {
        &self.runtime
    }

    /// Runs `work` to its end on this thread, or until a scheduler holds it back; then it is
    /// finished as a task of the runtime and this returns.
    pub(crate) fn run(&self, work: impl Future<Output = ()> + Send + 'static) {
        let _runtime = self.runtime.enter();
        let mut work = Box::pin(work);
        let thread = THREAD_WAKER.with(Arc::clone);
        let waker = Waker::from(thread.clone());
        let mut cx = Context::from_waker(&waker);
        // A mark left by an earlier request polled on this thread is not this one's.
        weft_rpc::take_held();
        loop {
            if let Poll::Ready(()) = work.as_mut().poll(&mut cx) {
                return;
            }
            if weft_rpc::take_held() {
                if let Ok(slot) = self.held.clone().try_acquire_owned() {
                    self.runtime.spawn(async move {
                        work.await;
                        drop(slot);
                    });
                    return;
                }
            }
            // A wake-up left over from an earlier poll only polls once more, which is harmless.
            thread.wait();
        }
    }

    /// Requests finished off their threads now.
    #[cfg(test)]
    pub(crate) fn held_now(&self) -> usize {
        HELD_REQUESTS_MAX - self.held.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
    }

    #[test]
    fn work_runs_on_the_calling_thread_until_it_is_done() {
        let rt = runtime();
        let serve = Serve::new(rt.handle().clone());
        let here = std::thread::current().id();
        let (tx, rx) = std::sync::mpsc::channel();
        serve.run(async move {
            // Pending once, woken from a runtime worker (under the runtime's timer), and
            // still ends here.
            let mut polled = false;
            let woken_by_the_runtime = std::future::poll_fn(|cx| {
                if polled {
                    return std::task::Poll::Ready(());
                }
                polled = true;
                let waker = cx.waker().clone();
                tokio::spawn(async move { waker.wake() });
                std::task::Poll::Pending
            });
            tokio::time::timeout(Duration::from_secs(5), woken_by_the_runtime).await.expect("woken");
            tx.send(std::thread::current().id()).unwrap();
        });
        assert_eq!(rx.try_recv().unwrap(), here);
        assert!(tokio::task::try_id().is_none());
    }

    #[test]
    fn work_a_scheduler_holds_is_finished_elsewhere_and_the_thread_is_let_go() {
        let rt = runtime();
        let serve = Serve::new(rt.handle().clone());
        let go = Arc::new(tokio::sync::Notify::new());
        let done = Arc::new(AtomicBool::new(false));
        let (g, d) = (go.clone(), done.clone());
        serve.run(async move {
            // As the pipeline does when a policy holds a request in-process.
            weft_rpc::note_held();
            g.notified().await;
            d.store(true, Ordering::SeqCst);
        });
        assert!(!done.load(Ordering::SeqCst), "run returned while the work waits");
        assert_eq!(serve.held_now(), 1);
        go.notify_one();
        // Every permit free again: the held work finished on the runtime and let its go.
        let all = HELD_REQUESTS_MAX as u32;
        let permits = rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(5), serve.held.acquire_many(all)).await })
            .expect("the held work did not finish on the runtime")
            .unwrap();
        assert!(done.load(Ordering::SeqCst));
        drop(permits);
        assert_eq!(serve.held_now(), 0);
    }
}
