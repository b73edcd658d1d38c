/// A message handed to the outbox's consumer, with the id to acknowledge or release it by.
public struct OutboxEntry: Sendable, Equatable {
    /// Identifies the message in ``Outbox/acknowledge(_:)`` and ``Outbox/release(_:)``.
    public let id: UInt64
    /// The message to send.
    public let message: OutboundMessage
}
