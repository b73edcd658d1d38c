/// Runs `body`, throwing ``TestSupportError/timedOut(_:_:)`` if it has not finished within
/// `timeout`. `body` is cancelled on timeout and must honour cancellation (awaiting an
/// `AsyncStream`, `Task.sleep` and `withTaskCancellationHandler` code do).
public func withTimeout<T: Sendable>(
    _ timeout: Duration,
    _ what: String = "an operation",
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw TestSupportError.timedOut(what, timeout)
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw TestSupportError.timedOut(what, timeout) }
        return first
    }
}

/// Polls `condition` every `interval` until it holds; throws after `timeout`. For state that
/// offers no event to await (a port starting to accept connections, a file gaining a line).
public func waitUntil(
    _ what: String,
    timeout: Duration = .seconds(10),
    interval: Duration = .milliseconds(10),
    _ condition: () throws -> Bool
) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: timeout)
    while try !condition() {
        guard clock.now < deadline else { throw TestSupportError.timedOut(what, timeout) }
        try await Task.sleep(for: interval)
    }
}
