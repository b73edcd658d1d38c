/// One fix or heading in the outbox: its `seq`, its kind, when the agent accepted it, and its
/// contract JSON payload (without `"kind"`), exactly as it is published live.
public struct OutboxRecord: Sendable, Equatable {
    /// The per-vehicle sequence number written into the payload; the store's key.
    public let seq: UInt64
    /// `.fix` or `.heading` (statuses are never stored).
    public let kind: OutboundMessage.Kind
    /// When the agent accepted it, milliseconds since 1970 (UTC, the agent's clock): the outbox's
    /// maximum age is measured from here, not from the receiver's time.
    public let storedAtMilliseconds: Int64
    /// The contract JSON payload.
    public let payload: [UInt8]

    public init(seq: UInt64, kind: OutboundMessage.Kind, storedAtMilliseconds: Int64, payload: [UInt8]) {
        self.seq = seq
        self.kind = kind
        self.storedAtMilliseconds = storedAtMilliseconds
        self.payload = payload
    }

    /// The bytes it counts for against the outbox's byte limit: the payload plus a fixed
    /// per-record overhead (key, kind, time and SQLite's row and index overhead, rounded up).
    public var accountedBytes: Int { payload.count + Self.overheadBytes }

    /// The per-record overhead counted against the byte limit.
    public static let overheadBytes = 48
}
