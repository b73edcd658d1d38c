import FleetcastCore

/// Runs `body`, throwing ``TestSupportError/timedOut(_:_:)`` if it has not finished within
/// `timeout`; `body` is then cancelled.
///
/// The wait is bounded even when `body` ignores cancellation (a task stuck in a blocking
/// system call): on timeout it is cancelled and left behind instead of awaited, so the test
/// fails with a message rather than hanging the whole run.
public func withTimeout<T: Sendable>(
    _ timeout: Duration,
    _ what: String = "an operation",
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    // Wrapped once more, so that a body returning nil is not taken for the time running out.
    let outcome: T?? = try await withTimeLimitLeavingBehind(timeout) { Optional.some(try await body()) }
    guard case .some(.some(let value)) = outcome else { throw TestSupportError.timedOut(what, timeout) }
    return value
}

/// Polls `condition` every `interval` until it holds; throws ``TestSupportError/timedOut(_:_:)``
/// after `timeout`. For state that offers no event to await (a port starting to accept
/// connections, a file gaining a line, a descriptor closed by an event loop). The one
/// poll-until of the tests: a condition that must act before it looks (publish a probe
/// message, then check what arrived) does so inside `condition`.
public func waitUntil(
    _ what: String,
    timeout: Duration = .seconds(10),
    interval: Duration = .milliseconds(10),
    _ condition: () async throws -> Bool
) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: timeout)
    while try await !condition() {
        guard clock.now < deadline else { throw TestSupportError.timedOut(what, timeout) }
        try await Task.sleep(for: interval)
    }
}
