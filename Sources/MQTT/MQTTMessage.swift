/// A message received on a subscription. Topic and payload are copies owned by Swift.
public struct MQTTMessage: Sendable, Hashable {
    /// The topic the message was published to.
    public var topic: String
    /// The payload bytes, exactly as published.
    public var payload: [UInt8]
    /// The QoS the message was delivered with (the lower of the publish and subscription QoS).
    public var qos: MQTTQoS
    /// True when the broker delivered a retained message (sent because of a new subscription).
    public var retain: Bool

    /// Creates a message value.
    public init(topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
    }
}
