/// Identifies one subscription of a ``Hub``; unique for the lifetime of the hub.
public struct HubSubscriberID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The raw number, increasing in subscription order from 0.
    public let rawValue: UInt64

    /// Wraps a raw subscriber number.
    @inlinable public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    /// Orders subscriptions by the time they were made.
    public static func < (lhs: HubSubscriberID, rhs: HubSubscriberID) -> Bool {
        lhs.rawValue < rhs.rawValue
    }

    /// `subscriber#N`.
    public var description: String { "subscriber#\(rawValue)" }
}
