import MQTTCore

/// One MQTT message the agent wants to send: what kind it is, where it goes, and how.
public struct OutboundMessage: Sendable, Equatable {
    /// What a message carries; the outbox's drop rules depend on it.
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        /// A fix (contract fix JSON).
        case fix
        /// A heading (contract heading JSON).
        case heading
        /// A vehicle status (never dropped; a newer one supersedes a queued one).
        case status
    }

    /// The kind of payload.
    public let kind: Kind
    /// The MQTT topic.
    public let topic: String
    /// The payload bytes (contract JSON).
    public let payload: [UInt8]
    /// The MQTT QoS, 0, 1 or 2.
    public let qos: MQTTQoS
    /// Whether the broker keeps it as the topic's retained message.
    public let retain: Bool
    /// The per-vehicle sequence number it carries, for fixes and headings.
    public let seq: UInt64?

    /// A message; `seq` is the number written into the payload, if any.
    public init(kind: Kind, topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, seq: UInt64? = nil) {
        self.kind = kind
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.seq = seq
    }
}
