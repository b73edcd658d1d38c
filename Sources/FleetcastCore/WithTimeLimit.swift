/// Runs `body` for at most `limit`: returns its result, or `nil` when the time ran out first
/// (then `body` is cancelled, and awaited: it must honour cancellation promptly, as every wait
/// built on `Task.sleep`, task-cancellation handlers or async sequences does).
///
/// The one way Fleetcast bounds a wait (a drain, a flush, an acknowledgement, a back-off that
/// ends early): a task group racing `body` against `Task.sleep(for: limit)` on the continuous
/// clock. Cancelling the calling task cancels both.
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
