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
    /// In a client that acknowledges after handling (``MQTTAcknowledgement/afterHandling``):
    /// the message's place in the order of delivery, to pass to
    /// ``MQTTClient/acknowledge(through:)`` once it and every earlier message are handled. 0
    /// in a client that acknowledges on receipt.
    public var deliveryTag: UInt64

    /// Creates a message value.
    public init(topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, deliveryTag: UInt64 = 0) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.deliveryTag = deliveryTag
    }
}
