import FleetcastTestSupport
import Foundation
import Logging
import MQTT

/// A logger that drops everything (tests that check logs use `InMemoryLogHandler`).
let quietLogger = Logger(label: "mqtt-tests", factory: { _ in SwiftLogNoOpLogHandler() })

/// Reconnects quickly so the reconnect tests run in about a second.
let fastReconnect = MQTTReconnectPolicy(initialDelay: .milliseconds(100), maximumDelay: .seconds(1), multiplier: 2, jitter: 0.2)

func uniqueClientID(_ prefix: String) -> String { "\(prefix)-\(UUID().uuidString.prefix(8))" }

/// A client for `broker` (its URL unless `url` is given).
func makeClient(
    _ broker: TestBroker,
    id: String = uniqueClientID("client"),
    url: String? = nil,
    configure: (inout MQTTConfiguration) -> Void = { _ in },
    logger: Logger = quietLogger
) throws -> MQTTClient {
    var configuration = MQTTConfiguration(broker: try BrokerURL(parsing: url ?? broker.url), clientID: id, reconnect: fastReconnect)
    if let certificates = broker.certificates { configuration.tls = MQTTTLSConfiguration(caFile: certificates.caFile) }
    configure(&configuration)
    return try MQTTClient(configuration: configuration, logger: logger)
}

/// Collects `count` messages from `subscription`, failing after `timeout`.
func collect(_ count: Int, from subscription: MQTTSubscription, timeout: Duration = .seconds(10)) async throws -> [MQTTMessage] {
    try await withTimeout(timeout, "\(count) messages on \(subscription.filters)") {
        var received: [MQTTMessage] = []
        var iterator = subscription.makeAsyncIterator()
        while received.count < count, let message = try await iterator.next() {
            received.append(message)
        }
        return received
    }
}

/// Collects connection states until `predicate` holds for the states seen so far.
func collectStates(
    _ stream: AsyncStream<MQTTConnectionState>, timeout: Duration = .seconds(20),
    until predicate: @escaping @Sendable ([MQTTConnectionState]) -> Bool
) async throws -> [MQTTConnectionState] {
    try await withTimeout(timeout, "connection states") {
        var seen: [MQTTConnectionState] = []
        for await state in stream {
            seen.append(state)
            if predicate(seen) { break }
        }
        return seen
    }
}

extension MQTTMessage {
    var text: String { String(decoding: payload, as: UTF8.self) }
}
