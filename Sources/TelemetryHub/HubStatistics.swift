/// A hub-wide snapshot of counters, taken in one go under the hub's lock.
public struct HubStatistics: Sendable, Hashable {
    /// Every live subscription, in subscription order, including terminated subscriptions that
    /// still have buffered values or an undelivered end.
    public let subscribers: [HubSubscriberStatistics]
    /// Values broadcast by the hub since it was created (count), whether or not anyone listened.
    public let yielded: UInt64
    /// How many times the hub started its source (count); 0 for a hub fed by hand.
    public let sourceStarts: UInt64
    /// `true` while the source is meant to be running (a run is active).
    public let isSourceRunning: Bool

    /// Subscriptions that still receive new values (not terminated).
    public var activeSubscriberCount: Int {
        subscribers.count(where: { !$0.isTerminated })
    }

    @usableFromInline init(subscribers: [HubSubscriberStatistics], yielded: UInt64, sourceStarts: UInt64, isSourceRunning: Bool) {
        self.subscribers = subscribers
        self.yielded = yielded
        self.sourceStarts = sourceStarts
        self.isSourceRunning = isSourceRunning
    }
}
