import FleetcastCore
import FleetcastTestSupport
import InMemoryLogging
import Logging
import MQTT
import Testing

@Suite struct MQTTConnectRetryTests {
    static let unreachable = "MQTT broker unreachable, retrying"

    /// A fast backoff without jitter, so that a second of retrying makes many attempts.
    static let fast = Backoff(initial: .milliseconds(20), maximum: .milliseconds(50), jitter: 0)

    static func recording() -> (InMemoryLogHandler, Logger) {
        let memory = InMemoryLogHandler()
        var logger = Logger(label: "connect-retry-test") { _ in memory }
        logger.logLevel = .trace
        return (memory, logger)
    }

    @Test func anUnreachableBrokerIsWarnedAboutOnceAndRetriedUntilCancelled() async throws {
        let port = try FreePort.next()  // nothing listens there
        let (memory, logger) = Self.recording()
        let configuration = MQTTConfiguration(broker: BrokerURL(host: "127.0.0.1", port: port), clientID: uniqueClientID("retry"))
        let connecting = Task {
            try await MQTTClient.connectRetrying(configuration: configuration, backoff: Self.fast, logger: logger)
        }
        defer { connecting.cancel() }
        try await waitUntil("three retries", timeout: .seconds(20)) {
            memory.entries.filter { $0.message.description == Self.unreachable }.count >= 3
        }
        connecting.cancel()
        await #expect(throws: CancellationError.self) { _ = try await connecting.value }
        let retries = memory.entries.filter { $0.message.description == Self.unreachable }
        #expect(retries.first?.level == .info, "a library reports at info unless its application raises it")
        #expect(retries.dropFirst().allSatisfy { $0.level == .debug }, "one report per outage, not one per attempt")
        #expect(retries.first?.metadata["mqtt.broker"]?.description == "mqtt://127.0.0.1:\(port)")
        #expect(retries.first?.metadata["mqtt.error"]?.description.contains("connection refused") == true)
        #expect(retries.first?.metadata["retry.attempt"]?.description == "1")
        #expect(!memory.entries.contains { $0.message.description == "MQTT broker reachable again" })
    }

    @Test func aLongOutageIsWarnedAboutAgainAfterTheWarningInterval() async throws {
        let port = try FreePort.next()
        let (memory, logger) = Self.recording()
        let configuration = MQTTConfiguration(broker: BrokerURL(host: "127.0.0.1", port: port), clientID: uniqueClientID("retry"))
        let connecting = Task {
            try await MQTTClient.connectRetrying(
                configuration: configuration, backoff: Self.fast, warningInterval: .milliseconds(300), outageLevel: .warning,
                logger: logger)
        }
        defer { connecting.cancel() }
        try await waitUntil("a second warning", timeout: .seconds(20)) {
            memory.entries.filter { $0.message.description == Self.unreachable && $0.level == .warning }.count >= 2
        }
    }

    @Test func theLastErrorIsThrownAtTheDeadline() async throws {
        let port = try FreePort.next()
        let configuration = MQTTConfiguration(broker: BrokerURL(host: "127.0.0.1", port: port), clientID: uniqueClientID("retry"))
        let clock = ContinuousClock()
        let start = clock.now
        await #expect(throws: MQTTError.connectionRefused(host: "127.0.0.1", port: port)) {
            _ = try await MQTTClient.connectRetrying(
                configuration: configuration, backoff: Self.fast, deadline: start + .seconds(1), logger: quietLogger)
        }
        #expect(clock.now - start < .seconds(10), "no retry is started past the deadline")
    }

    @Test func aBrokerThatComesUpIsConnectedAndItsReturnNoticed() async throws {
        try await withBroker { broker in
            await broker.stop()
            let (memory, logger) = Self.recording()
            let configuration = MQTTConfiguration(broker: try BrokerURL(parsing: broker.url), clientID: uniqueClientID("retry"))
            let connecting = Task {
                try await MQTTClient.connectRetrying(
                    configuration: configuration, backoff: Self.fast, outageLevel: .warning, recoveryLevel: .notice, logger: logger)
            }
            try await waitUntil("the outage warning") {
                memory.entries.contains { $0.message.description == Self.unreachable && $0.level == .warning }
            }
            try await broker.restart()
            let client = try await withTimeout(.seconds(10), "the connection") { try await connecting.value }
            #expect(client.connectionState == .connected)
            let notice = memory.entries.first { $0.message.description == "MQTT broker reachable again" }
            #expect(notice?.level == .notice)
            #expect(notice?.metadata["mqtt.broker"]?.description == broker.url)
            await client.shutdown()
        }
    }

    @Test func whatRetryingCannotMendIsThrownAtOnce() async throws {
        try await withBroker(.init(users: ["alice": "s3cret-pw"])) { broker in
            let (memory, logger) = Self.recording()
            let configuration = MQTTConfiguration(broker: try BrokerURL(parsing: broker.url), clientID: uniqueClientID("retry"))
            await #expect(throws: MQTTError.self) {
                // Anonymous: refused as not authorized, which no retry changes.
                _ = try await MQTTClient.connectRetrying(configuration: configuration, backoff: Self.fast, logger: logger)
            }
            #expect(!memory.entries.contains { $0.message.description == Self.unreachable })
        }
    }
}
