/// Something that delivers MQTT messages: the real MQTT client in the agent, a recorder in
/// tests. The publisher's sender loop is its only caller, one message at a time, in order.
public protocol MessageSending: Sendable {
    /// Sends one message and returns once it is acknowledged as its QoS requires (handed to
    /// the network for QoS 0, PUBACK for 1, PUBCOMP for 2). Throws when it was not delivered
    /// (not connected, refused, timed out, cancelled); the publisher then retries it.
    ///
    /// - Parameters:
    ///   - topic: the MQTT topic.
    ///   - payload: the message bytes.
    ///   - qos: 0, 1 or 2.
    ///   - retain: whether the broker keeps it as the topic's retained message.
    func send(topic: String, payload: [UInt8], qos: Int, retain: Bool) async throws
}
