import NIOConcurrencyHelpers

/// The lock around the client's shared state.
///
/// The project's default is `Synchronization.Mutex`, but on Linux (Swift 6.3.1) `Mutex` is a
/// futex inside the uninstrumented standard library: ThreadSanitizer cannot see it and
/// reports every access from two threads as a race, even though it excludes correctly
/// (checked with a two-thread counter under `-sanitize=thread`). State touched from
/// libmosquitto's thread and from tasks must be checkable with TSan, so this uses swift-nio's
/// `NIOLockedValueBox` (a `pthread_mutex_t`, which TSan intercepts). Same shape as
/// `Mutex.withLock`: switch back in one place once `Mutex` is TSan-visible.
struct StateLock<Value: Sendable>: Sendable {
    private let box: NIOLockedValueBox<Value>

    init(_ value: Value) {
        box = NIOLockedValueBox(value)
    }

    /// Runs `body` with exclusive access to the value. Never call out to user code or
    /// libmosquitto inside: decide here, act after.
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        try box.withLockedValue(body)
    }
}
