import MQTT

/// A message a test sender was given to send, as the publisher handed it over: the
/// ``HoldingSender``'s started sends and the ``RecordingSender``'s attempts and deliveries.
package struct SentMessage: Sendable, Equatable {
    package let topic: String
    package let payload: [UInt8]
    package let qos: MQTTQoS
    package let retain: Bool
    package var text: String { String(decoding: payload, as: UTF8.self) }
    package var isStatus: Bool { topic.hasSuffix("/status") }
}
