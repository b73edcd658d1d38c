import FleetcastCore

/// A reference to a value guarded by the project's lock (`SanitizerVisibleMutex`), for state
/// that test helpers and tests share between tasks, threads and escaping closures (a
/// `~Copyable` mutex cannot be captured by them; this class can).
public final class Locked<Value>: Sendable {
    private let state: SanitizerVisibleMutex<Value>

    /// A lock around `value`.
    public init(_ value: sending Value) {
        state = SanitizerVisibleMutex(value)
    }

    /// Runs `body` with exclusive access to the value.
    public func withLock<R, E: Error>(_ body: (inout sending Value) throws(E) -> sending R) throws(E) -> sending R {
        try state.withLock(body)
    }
}
