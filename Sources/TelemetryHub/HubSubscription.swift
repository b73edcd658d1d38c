/// One subscriber's view of a ``Hub``: an async sequence of the values yielded after
/// ``Hub/subscribe(bufferingPolicy:)``, with this subscriber's counters.
///
/// Iterate it from one task at a time. The subscription ends (and leaves the hub, which stops
/// the source after the last one) when the iterating task is cancelled, when ``cancel()`` is
/// called, or when the object is released, whichever comes first. Iteration throws the source's
/// error once if the source fails, and ends normally if the source finishes.
public final class HubSubscription<Element: Sendable>: AsyncSequence, Sendable {
    /// Errors thrown: the source's own failure, or ``HubError/concurrentNext(_:)``.
    public typealias Failure = any Error

    private let hub: Hub<Element>
    /// This subscription's identity in the hub's statistics.
    public let id: HubSubscriberID

    init(hub: Hub<Element>, id: HubSubscriberID) {
        self.hub = hub
        self.id = id
    }

    deinit {
        hub.cancel(id)
    }

    /// This subscriber's counters now; nil once it has left the hub (cancelled or ended).
    public var statistics: HubSubscriberStatistics? {
        hub.statistics(of: id)
    }

    /// The next value, waiting for one if the buffer is empty; nil once the subscription ended
    /// (source finished, cancelled, task cancelled). Throws the source's failure, once.
    public func next() async throws -> Element? {
        try await hub.next(id)
    }

    /// Leaves the hub now: a pending `next()` returns nil, buffered values are discarded.
    /// Idempotent.
    public func cancel() {
        hub.cancel(id)
    }

    /// Iterates the subscription; iterators share the subscription's single buffer.
    public func makeAsyncIterator() -> Iterator {
        Iterator(subscription: self)
    }

    /// The iterator of a ``HubSubscription``; keeps the subscription alive while iterating.
    public struct Iterator: AsyncIteratorProtocol {
        let subscription: HubSubscription<Element>

        /// The next value; see ``HubSubscription/next()``.
        public mutating func next() async throws -> Element? {
            try await subscription.next()
        }
    }
}
