//! Whether a request polled on this thread is held back by a scheduling policy. A request
//! made in-process runs the server's pipeline on its caller's thread; when a policy holds it
//! back the pipeline says so on that thread ([`note_held`]), and a caller that polls requests
//! on threads it must not lose for long (the FUSE mount's workers) asks after each poll
//! ([`take_held`]) and finishes such a request elsewhere. A Peer whose server sent a Held
//! frame notes it the same way. A thread-local mark, not a registry: nothing is looked up.

thread_local! {
    /// Set when a request polled on this thread was held back by a scheduling policy.
    static HELD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks that a request polled on this thread waits because a policy holds it back (the
/// pipeline's schedule stage does).
pub fn note_held() {
    HELD.with(|h| h.set(true));
}

/// Whether a request polled on this thread since the last call was held back by a policy
/// (and clears the mark).
pub fn take_held() -> bool {
    HELD.with(|h| h.replace(false))
}
