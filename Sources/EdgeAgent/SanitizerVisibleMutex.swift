import Synchronization

/// A `Synchronization.Mutex` whose hand-offs ThreadSanitizer can see.
///
/// On Linux, `Mutex` is a priority-inheritance futex: under contention the kernel passes
/// ownership straight to the waiting thread, so no user-space atomic operation orders the two
/// critical sections and `swift test --sanitize=thread` reports races that cannot happen (a
/// twelve-line contended `Mutex<[Int]>` program reproduces it). An acquiring load on entry
/// and a releasing add on exit of every critical section make the order the lock already
/// guarantees visible to the sanitizer. They cost two uncontended atomic operations and change
/// nothing else: exclusion is still the `Mutex`'s.
struct SanitizerVisibleMutex<Value>: ~Copyable {
    private let mutex: Mutex<Value>
    private let order = Atomic<UInt>(0)

    init(_ value: sending Value) {
        mutex = Mutex(value)
    }

    /// Runs `body` with exclusive access to the value, like `Mutex.withLock`.
    borrowing func withLock<Result, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
            _ = order.load(ordering: .acquiring)
            defer { order.wrappingAdd(1, ordering: .releasing) }
            return try body(&value)
        }
    }
}

extension SanitizerVisibleMutex: Sendable {}
