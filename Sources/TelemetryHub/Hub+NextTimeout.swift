extension Hub {
    /// The next value yielded after this call, like CoreLocation's one-shot location request.
    ///
    /// Subscribes with `.newest(1)` for the duration of the call (so on a hub with a source, it
    /// starts the source if nobody else did, and stops it again afterwards).
    ///
    /// - Parameter timeout: how long to wait at most (a `Duration`, on the continuous clock).
    /// - Throws: ``HubError/timedOut(after:)`` if no value arrived in time,
    ///   ``HubError/cancelled`` if the calling task was cancelled, ``HubError/finished`` if the
    ///   source finished first, or the source's own error if it failed first.
    public func next(timeout: Duration) async throws -> Element {
        if Task.isCancelled {
            throw HubError.cancelled
        }
        let subscription = subscribe(bufferingPolicy: .newest(1))
        defer { subscription.cancel() }
        do {
            return try await withThrowingTaskGroup(of: Element?.self) { group in
                group.addTask {
                    try await subscription.next()
                }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    throw HubError.timedOut(after: timeout)
                }
                defer { group.cancelAll() }
                guard let first = try await group.next() else {
                    throw HubError.cancelled
                }
                if let value = first {
                    return value
                }
                // The subscription ended without a value: cancelled, or the source finished.
                if Task.isCancelled {
                    throw HubError.cancelled
                }
                throw HubError.finished
            }
        } catch is CancellationError {
            throw HubError.cancelled
        }
    }
}
