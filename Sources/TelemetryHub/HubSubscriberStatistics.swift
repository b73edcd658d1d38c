/// A snapshot of one subscriber's counters, taken under the hub's lock.
public struct HubSubscriberStatistics: Sendable, Hashable {
    /// Which subscription these counters belong to.
    public let id: HubSubscriberID
    /// The buffering policy the subscription was made with.
    public let bufferingPolicy: HubBufferingPolicy
    /// Values handed to the consumer by `next()` (count).
    public let delivered: UInt64
    /// Values the buffering policy discarded because the buffer was full (count). Values still
    /// buffered when a subscription is cancelled are not counted.
    public let dropped: UInt64
    /// Values waiting in the subscriber's buffer right now (count).
    public let buffered: Int
    /// `true` once the source finished or failed for this subscriber: it only drains its buffer
    /// and then receives the end (or the error) once.
    public let isTerminated: Bool

    @usableFromInline init(
        id: HubSubscriberID, bufferingPolicy: HubBufferingPolicy, delivered: UInt64, dropped: UInt64, buffered: Int, isTerminated: Bool
    ) {
        self.id = id
        self.bufferingPolicy = bufferingPolicy
        self.delivered = delivered
        self.dropped = dropped
        self.buffered = buffered
        self.isTerminated = isTerminated
    }
}
