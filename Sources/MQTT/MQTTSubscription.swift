import MQTTCore

/// The messages of one subscription, as an `AsyncSequence`.
///
/// Several subscriptions may live on one ``MQTTClient``; each receives only the messages
/// whose topic matches one of its ``filters``. When the consumer stops iterating (its task
/// is cancelled, or the subscription is dropped) the client unsubscribes the filters no
/// other subscription uses. The sequence ends when the client shuts down.
public struct MQTTSubscription: AsyncSequence, Sendable {
    /// Each element is one received message.
    public typealias Element = MQTTMessage

    /// The filters this subscription was made with (as given, including `$share/group/`).
    public let filters: [String]
    let stream: AsyncThrowingStream<MQTTMessage, any Error>

    /// The iterator; call `next()` from one task at a time.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<MQTTMessage, any Error>.AsyncIterator

        /// The next message, `nil` at the end, or the error that ended the subscription.
        public mutating func next() async throws -> MQTTMessage? {
            try await base.next()
        }
    }

    /// Makes the iterator.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.makeAsyncIterator())
    }
}
