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

    @usableFromInline let hub: Hub<Element>
    /// This subscription's identity in the hub's statistics.
    public let id: HubSubscriberID

    @usableFromInline init(hub: Hub<Element>, id: HubSubscriberID) {
        self.hub = hub
        self.id = id
    }

    deinit {
        hub.cancel(id)
    }

    /// This subscriber's counters now; nil once it has left the hub (cancelled or ended).
    @inlinable public var statistics: HubSubscriberStatistics? {
        hub.statistics(of: id)
    }

    /// The next value, waiting for one if the buffer is empty; nil once the subscription ended
    /// (source finished, cancelled, task cancelled). Throws the source's failure, once.
    @inlinable public func next() async throws -> Element? {
        try await hub.next(id)
    }

    /// Leaves the hub now: a pending `next()` returns nil, buffered values are discarded.
    /// Idempotent.
    @inlinable public func cancel() {
        hub.cancel(id)
    }

    /// Iterates the subscription; iterators share the subscription's single buffer.
    @inlinable public func makeAsyncIterator() -> Iterator {
        Iterator(subscription: self)
    }

    /// The iterator of a ``HubSubscription``; keeps the subscription alive while iterating.
    public struct Iterator: AsyncIteratorProtocol {
        @usableFromInline let subscription: HubSubscription<Element>

        @inlinable init(subscription: HubSubscription<Element>) {
            self.subscription = subscription
        }

        /// The next value; see ``HubSubscription/next()``.
        @inlinable public mutating func next() async throws -> Element? {
            try await subscription.next()
        }
    }
}
