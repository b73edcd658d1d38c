/// The last-will message the broker publishes when the client goes away without a clean
/// DISCONNECT (network loss, crash, keep-alive timeout). Set before connecting.
public struct MQTTWill: Sendable, Hashable {
    /// The topic the will is published to (no wildcards).
    public var topic: String
    /// The will payload bytes.
    public var payload: [UInt8]
    /// The QoS of the will publish.
    public var qos: MQTTQoS
    /// Whether the broker retains the will message.
    public var retain: Bool

    /// Creates a will message.
    public init(topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
    }
}
