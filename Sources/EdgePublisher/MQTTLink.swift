import EdgeCore
import FleetProtocol
import FleetcastCore
import Logging
import MQTT

/// The agent's connection to its broker, as the publisher's ``MessageSending``.
///
/// libmosquitto reconnects by itself once a connection has been made, but a first connection
/// that fails ends its client. The link therefore makes a new client and tries again, with
/// exponential backoff and jitter (``MQTTConfiguration/reconnect``), while the broker cannot be
/// reached — naming the broker and the error in the log — and gives up at once on what retrying
/// cannot fix (TLS trust, credentials, authorisation). Until connected, sends fail with
/// ``MQTTError/notConnected`` and the publisher keeps the messages in its outbox.
public final class MQTTLink: MessageSending {
    private let configuration: MQTTConfiguration
    private let properties: MQTTPublishProperties
    /// The same for a compact batch, which is binary, not JSON.
    private let compactProperties: MQTTPublishProperties
    private let logger: Logger
    private let client = SanitizerVisibleMutex<MQTTClient?>(nil)
    /// The client connected last, kept after shutdown for its ``traffic``.
    private let lastClient = SanitizerVisibleMutex<MQTTClient?>(nil)

    /// - Parameters:
    ///   - configuration: broker, credentials, TLS, will.
    ///   - messageExpirySeconds: MQTT 5 message expiry of every publish, when configured.
    public init(configuration: MQTTConfiguration, messageExpirySeconds: Int?, logger: Logger) {
        self.configuration = configuration
        let expiry = messageExpirySeconds.map { UInt32(clamping: $0) }
        // No content type on JSON, the contract's default (20 bytes a message on the wire);
        // a compact batch, which is binary, names its own.
        self.properties = MQTTPublishProperties(contentType: nil, messageExpirySeconds: expiry)
        self.compactProperties = MQTTPublishProperties(contentType: FleetPayload.compactBatchContentType, messageExpirySeconds: expiry)
        var logger = logger
        logger[metadataKey: "mqtt.broker"] = "\(configuration.broker)"
        self.logger = logger
    }

    /// Hands the message to libmosquitto before its first suspension (so sends started in order
    /// reach the wire in order), then waits for the acknowledgement its QoS asks for.
    public func send(topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool) async throws {
        guard let client = client.withLock({ $0 }) else { throw MQTTError.notConnected }
        try await client.publish(topic: topic, payload: payload, qos: qos, retain: retain, properties: properties(of: payload))
    }

    /// Every payload of the contract is a JSON object but a compact batch (its magic byte).
    private func properties(of payload: [UInt8]) -> MQTTPublishProperties {
        payload.first == FleetPayload.compactBatchMagic[0] ? compactProperties : properties
    }

    /// As ``send(topic:payload:qos:retain:)``, with libmosquitto's acknowledgement delivered to
    /// `completion` on its network thread: no task, no continuation.
    public func send(
        topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        guard let client = client.withLock({ $0 }) else { return completion(.failure(MQTTError.notConnected)) }
        do {
            try client.publish(
                topic: topic, payload: payload, qos: qos, retain: retain, properties: properties(of: payload),
                completion: completion)
        } catch {
            completion(.failure(error))
        }
    }

    /// Connects with `will` as the last will, retrying while the broker is unreachable
    /// (``MQTTClient/connectRetrying(configuration:backoff:deadline:warningInterval:outageLevel:recoveryLevel:logger:)``).
    /// Returns once connected; throws the error when retrying cannot help, or
    /// `CancellationError` when cancelled first.
    public func connect(will: MQTTWill?) async throws {
        var configuration = self.configuration
        configuration.will = will
        // The agent's user must see an unreachable broker at the default level (a warning, once
        // per outage and at most every 5 minutes) and its return (a notice).
        let connected = try await MQTTClient.connectRetrying(
            configuration: configuration, outageLevel: .warning, recoveryLevel: .notice, logger: logger)
        client.withLock { $0 = connected }
        lastClient.withLock { $0 = connected }
    }

    /// The connection's states (``MQTTClient/connectionStates()``), starting with the current
    /// one, until the link shuts down; a stream that ends at once before ``connect(will:)``
    /// has returned.
    public func connectionStates() -> AsyncStream<MQTTConnectionState> {
        guard let client = client.withLock({ $0 }) else { return AsyncStream { $0.finish() } }
        return client.connectionStates()
    }

    /// The bytes on the wire of the broker connection, reconnections included (``MQTTTraffic``);
    /// zero before the first connection.
    public var traffic: MQTTTraffic? { lastClient.withLock { $0 }?.traffic ?? MQTTTraffic() }

    /// Disconnects cleanly (no will), after waiting up to `flushTimeout` for unacknowledged
    /// publishes, and gives up waiting after `timeout` in all (the network thread may be stuck
    /// in a TCP connect to an unreachable broker; it ends by itself). Returns `false` when it
    /// gave up.
    @discardableResult
    public func shutdown(flushTimeout: Duration = .seconds(5), timeout: Duration = .seconds(10)) async -> Bool {
        let current = client.withLock { client -> MQTTClient? in
            defer { client = nil }
            return client
        }
        guard let current else { return true }
        // MQTTClient.shutdown stops waiting when cancelled.
        return await withTimeLimit(timeout) { await current.shutdown(flushTimeout: flushTimeout) } != nil
    }
}
