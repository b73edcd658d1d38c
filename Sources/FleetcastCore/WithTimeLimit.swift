/// Runs `body` for at most `limit`: returns its result, or `nil` when the time ran out first
/// (then `body` is cancelled, and awaited: it must honour cancellation promptly, as every wait
/// built on `Task.sleep`, task-cancellation handlers or async sequences does).
///
/// The way Fleetcast bounds a wait (a drain, a flush, an acknowledgement, a back-off that
/// ends early): a task group racing `body` against `Task.sleep(for: limit)` on the continuous
/// clock. Cancelling the calling task cancels both. For work that may not honour cancellation,
/// ``withTimeLimitLeavingBehind(_:_:)``.
///
/// - Parameters:
///   - limit: the longest wait (a `Duration`).
///   - body: the work; its result is returned when it finishes first.
@inlinable
public func withTimeLimit<T: Sendable>(
    _ limit: Duration, _ body: @escaping @Sendable () async -> T
) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await body() }
        group.addTask {
            try? await Task.sleep(for: limit)
            return nil
        }
        defer { group.cancelAll() }
        return await group.next() ?? nil
    }
}

/// ``withTimeLimit(_:_:)`` for work that throws: its error is rethrown when it fails first.
@inlinable
public func withTimeLimit<T: Sendable>(
    _ limit: Duration, _ body: @escaping @Sendable () async throws -> T
) async throws -> T? {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try? await Task.sleep(for: limit)
            return nil
        }
        defer { group.cancelAll() }
        return try await group.next() ?? nil
    }
}

/// ``withTimeLimit(_:_:)`` for work that may not honour cancellation: a query on a connection
/// whose server stopped answering (a frozen or unreachable PostgreSQL; postgres-nio does not
/// cancel a query in flight), a call blocked in the kernel. When the time runs out it returns
/// `nil` at once, and when the calling task is cancelled it throws `CancellationError` at once;
/// either way `body` is cancelled and left to finish on its own, its result or error dropped.
///
/// Only for work whose late finish is harmless: an idempotent write, retried by the caller, that
/// may still commit after it was given up on.
///
/// - Parameters:
///   - limit: the longest wait (a `Duration`, on the continuous clock).
///   - body: the work; its result is returned, or its error rethrown, when it finishes first.
public func withTimeLimitLeavingBehind<T: Sendable>(
    _ limit: Duration, _ body: @escaping @Sendable () async throws -> T
) async throws -> T? {
    let race = TimeLimitRace<T>()
    return try await withTaskCancellationHandler {
        let work = Task {
            do { race.finish(.success(try await body())) } catch { race.finish(.failure(error)) }
        }
        let timer = Task {
            // Cancelled when the body finishes first.
            guard (try? await Task.sleep(for: limit)) != nil else { return }
            race.finish(.success(nil))
        }
        race.track(work, timer)
        return try await race.outcome()
    } onCancel: {
        race.finish(.failure(CancellationError()))
    }
}

/// One ``withTimeLimitLeavingBehind(_:_:)``: the first of the body, the timer and a
/// cancellation decides the outcome; the tasks that lost are cancelled, never awaited.
private final class TimeLimitRace<T: Sendable>: Sendable {
    private struct State {
        var result: Result<T?, any Error>?
        var continuation: CheckedContinuation<T?, any Error>?
        var tasks: [Task<Void, Never>] = []
    }

    private let state = SanitizerVisibleMutex(State())

    /// Records the outcome unless one is recorded already; then, outside the lock, resumes the
    /// waiter and cancels the tasks.
    func finish(_ result: Result<T?, any Error>) {
        let (continuation, tasks) = state.withLock { s -> (CheckedContinuation<T?, any Error>?, [Task<Void, Never>]) in
            guard s.result == nil else { return (nil, []) }
            s.result = result
            defer {
                s.continuation = nil
                s.tasks = []
            }
            return (s.continuation, s.tasks)
        }
        for task in tasks { task.cancel() }
        continuation?.resume(with: result)
    }

    /// Keeps the tasks to cancel once the race is decided (at once when it is already).
    func track(_ tasks: Task<Void, Never>...) {
        let decided = state.withLock { s in
            if s.result == nil { s.tasks += tasks }
            return s.result != nil
        }
        if decided { for task in tasks { task.cancel() } }
    }

    /// Waits for the outcome.
    func outcome() async throws -> T? {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T?, any Error>) in
            let decided = state.withLock { s -> Result<T?, any Error>? in
                if let result = s.result { return result }
                s.continuation = continuation
                return nil
            }
            if let decided { continuation.resume(with: decided) }
        }
    }
}
