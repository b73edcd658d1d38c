import FleetProtocol

/// What the publisher has done since it started: counts of messages, for `status`, logs and
/// tests. All counts are messages (not bytes).
public struct PublisherCounters: Sendable, Equatable {
    /// Fixes received from the source (any mode).
    public var fixesReceived: UInt64 = 0
    /// Headings received from the source.
    public var headingsReceived: UInt64 = 0
    /// Fixes without a position (mode 1) that were not published.
    public var fixesWithoutPosition: UInt64 = 0
    /// Fixes refused for a time implausibly far from the synchronized system clock
    /// (``FixTimeCheck``).
    public var fixesImplausible: UInt64 = 0
    /// Fixes the reporting policy held back.
    public var fixesSkippedByPolicy: UInt64 = 0
    /// Headings the reporting policy held back.
    public var headingsSkippedByPolicy: UInt64 = 0
    /// Headings joined into their instant's fix (no message of their own), whether the policy
    /// then passed that fix or not.
    public var headingsJoined: UInt64 = 0
    /// Fixes and headings put in the outbox.
    public var queued: UInt64 = 0
    /// Fixes and headings the broker acknowledged, live and backlog.
    public var published: UInt64 = 0
    /// Of those, the ones delivered in backlog batches.
    public var backlogPublished: UInt64 = 0
    /// Status messages the broker acknowledged (online, changes, offline).
    public var statusesPublished: UInt64 = 0
    /// Fixes and headings that will never be delivered, by cause (full, expired, rejected).
    public var drops = VehicleStatus.Drops()
    /// Transactions committed to the outbox store (one WAL `fsync` each).
    public var commits: UInt64 = 0
    /// Send attempts that failed (each is retried).
    public var sendFailures: UInt64 = 0

    /// All counters at zero.
    public init() {}

    /// Fixes and headings received.
    public var received: UInt64 { fixesReceived + headingsReceived }

    /// Fixes and headings the policy held back.
    public var skippedByPolicy: UInt64 { fixesSkippedByPolicy + headingsSkippedByPolicy }

    /// Fixes and headings lost, all causes.
    public var dropped: UInt64 { drops.total }
}
