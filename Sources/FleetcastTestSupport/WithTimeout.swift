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
    let race = TimeoutRace<T>()
    return try await withTaskCancellationHandler {
        let work = Task {
            do { race.finish(.success(try await body())) } catch { race.finish(.failure(error)) }
        }
        let timer = Task {
            // Cancelled when the body finishes first.
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            race.finish(.failure(TestSupportError.timedOut(what, timeout)))
        }
        race.track(work, timer)
        return try await race.outcome()
    } onCancel: {
        race.finish(.failure(CancellationError()))
    }
}

/// One ``withTimeout(_:_:_:)``: the first of body, timer and cancellation to finish decides
/// the outcome; the others are cancelled.
private final class TimeoutRace<T: Sendable>: Sendable {
    private struct State {
        var result: Result<T, any Error>?
        var continuation: CheckedContinuation<T, any Error>?
        var tasks: [Task<Void, Never>] = []
    }

    private let state = Locked(State())

    /// Records the outcome unless one is already recorded; resumes the waiter and cancels
    /// the tasks that lost.
    func finish(_ result: Result<T, any Error>) {
        let (continuation, tasks) = state.withLock { s -> (CheckedContinuation<T, any Error>?, [Task<Void, Never>]) in
            guard s.result == nil else { return (nil, []) }
            s.result = result
            defer {
                s.continuation = nil
                s.tasks = []
            }
            return (s.continuation, s.tasks)
        }
        tasks.forEach { $0.cancel() }
        continuation?.resume(with: result)
    }

    /// Keeps the tasks to cancel when the race is decided (at once if it already is).
    func track(_ tasks: Task<Void, Never>...) {
        let decided = state.withLock { s in
            if s.result == nil { s.tasks += tasks }
            return s.result != nil
        }
        if decided { tasks.forEach { $0.cancel() } }
    }

    /// Waits for the outcome.
    func outcome() async throws -> T {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
            let decided = state.withLock { s -> Result<T, any Error>? in
                if let result = s.result { return result }
                s.continuation = c
                return nil
            }
            if let decided { c.resume(with: decided) }
        }
    }
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
