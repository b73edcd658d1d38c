import Synchronization

/// A `Synchronization.Mutex` whose hand-offs ThreadSanitizer can see: the project's lock for
/// shared state.
///
/// On Linux, `Mutex` is a futex inside the (uninstrumented) standard library; under contention
/// the kernel passes ownership straight to the waiting thread, so no user-space atomic operation
/// orders the two critical sections and `swift test --sanitize=thread` reports races that cannot
/// happen (a contended twelve-line `Mutex<[Int]>` program reproduces it). An acquiring load on
/// entry and a releasing add on exit of every critical section make the order the lock already
/// guarantees visible to the sanitizer. Exclusion is still the `Mutex`'s; the cost is one
/// uncontended atomic load and add per critical section.
///
/// Use it exactly like `Mutex.withLock`: decide under the lock, act (resume continuations,
/// call out) after it.
@frozen
public struct SanitizerVisibleMutex<Value: ~Copyable>: ~Copyable {
    @usableFromInline let mutex: Mutex<Value>
    @usableFromInline let order = Atomic<UInt>(0)

    /// A lock around `value`.
    @inlinable
    public init(_ value: consuming sending Value) {
        mutex = Mutex(value)
    }

    /// Runs `body` with exclusive access to the value, like `Mutex.withLock`.
    @inlinable
    public borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
            _ = order.load(ordering: .acquiring)
            defer { order.wrappingAdd(1, ordering: .releasing) }
            return try body(&value)
        }
    }
}

// Both stored properties are Sendable (`Mutex` for any Value, `Atomic<UInt>`): no unchecked claim.
extension SanitizerVisibleMutex: Sendable where Value: ~Copyable {}
