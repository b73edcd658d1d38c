import EdgeCore
import MQTT

/// Something that delivers MQTT messages: the real MQTT client in the agent, a recorder in
/// tests. The publisher's sender loop is its only caller; it keeps up to
/// ``Publisher/Settings/sendWindow`` sends outstanding at once.
///
/// **Ordering requirement.** The live loop starts sends in queue order with the callback form,
/// which hands the message over before it returns; the callback form's default runs the async
/// form in an immediate task (`Task.immediate`, SE-0472), which runs synchronously up to its
/// first suspension point. An implementation must therefore hand the
/// message to its transport (for libmosquitto: `mosquitto_publish`, which queues it for the
/// wire) **before its first suspension point**, and only then await the acknowledgement. Then
/// messages reach the transport — and the broker — in exactly the order the loop started them:
/// `seq` order on the wire matches queue order, and the last retained fix is the newest.
/// An implementation that awaits anything first (an actor hop, a lock taken asynchronously)
/// lets sends overtake each other. `MQTTClient.publish(topic:payload:qos:retain:properties:)`
/// meets the requirement.
public protocol MessageSending: Sendable {
    /// Hands one message to the transport (before any suspension, see the protocol) and
    /// returns once it is acknowledged as its QoS requires (handed to the network for QoS 0,
    /// PUBACK for 1, PUBCOMP for 2). Throws when it was not delivered (not connected, refused,
    /// timed out, cancelled); the publisher then retries it. Called concurrently for different
    /// messages.
    ///
    /// - Parameters:
    ///   - topic: the MQTT topic.
    ///   - payload: the message bytes.
    ///   - qos: the MQTT quality of service.
    ///   - retain: whether the broker keeps it as the topic's retained message.
    func send(topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool) async throws

    /// The same without a task: hands the message to the transport before it returns and calls
    /// `completion` once with the outcome, from any thread, outside every lock. The live loop
    /// sends this way (a task and a continuation per message cost as much as the message). The
    /// default runs ``send(topic:payload:qos:retain:)`` in an immediate task, which keeps the
    /// ordering requirement.
    func send(
        topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void)

    /// What the link has cost on the network so far (bytes on the wire), for the vehicle's
    /// status; `nil` where the transport cannot tell.
    var traffic: MQTTTraffic? { get }
}

extension MessageSending {
    /// Not counted.
    public var traffic: MQTTTraffic? { nil }

    public func send(
        topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        Task.immediate {
            do {
                try await send(topic: topic, payload: payload, qos: qos, retain: retain)
                completion(.success(()))
            } catch {
                completion(.failure(error))
            }
        }
    }
}
