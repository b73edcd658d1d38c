import FleetcastCore

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
        let next: Element??
        do {
            next = try await withTimeLimit(timeout) { try await subscription.next() }
        } catch is CancellationError {
            throw HubError.cancelled
        }
        if Task.isCancelled { throw HubError.cancelled }
        guard let ended = next else { throw HubError.timedOut(after: timeout) }
        // The subscription ended without a value: the source finished.
        guard let value = ended else { throw HubError.finished }
        return value
    }
}
