/// Errors the hub itself raises. A failure of the hub's source is passed on unchanged instead.
public enum HubError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `next(timeout:)` saw no value within `timeout`.
    case timedOut(after: Duration)
    /// The waiting task was cancelled before a value arrived.
    case cancelled
    /// The source finished (normally) before a value arrived.
    case finished
    /// Two tasks called `next()` on the same subscription at the same time; a subscription has
    /// one consumer. The second call gets this error and the first keeps waiting.
    case concurrentNext(HubSubscriberID)

    /// A sentence saying what happened.
    public var description: String {
        switch self {
        case .timedOut(let after):
            return "no value arrived from the hub within \(after)"
        case .cancelled:
            return "the task waiting for a value from the hub was cancelled"
        case .finished:
            return "the hub's source finished before a value arrived"
        case .concurrentNext(let id):
            return "two tasks called next() on the same hub subscription (\(id)) at once; give each task its own subscription"
        }
    }
}
