import FleetcastCore
import FleetcastTestSupport
import Foundation
import InMemoryLogging
import Logging
import MQTT
import Testing

/// A member of a share group that stops while the broker holds a queue for it: against a real
/// mosquitto, with persistent sessions that acknowledge after handling, as `fleet-watch record`
/// connects. What is checked is what a recorder's operator would: every message reaches the
/// group, and the log says how the hand-over went.
@Suite struct MQTTClientHandOverTests {
    static let filter = "$share/recorders/handover/#"
    static let count = 1_000
    /// The broker sends each member at most this many ahead of its acknowledgements: the rest
    /// of its share waits in its session.
    static let window = 10
    /// A bound on a hang, not a speed target: under ThreadSanitizer, beside the other suites,
    /// the burst and its drain take tens of seconds.
    static let patience: Duration = .seconds(60)

    /// The messages one member's stream passed on, and whether its consumer acknowledges them.
    final class Member: Sendable {
        let client: MQTTClient
        let capture = InMemoryLogHandler()
        private let state = SanitizerVisibleMutex((texts: [String](), lastTag: UInt64(0), acknowledging: false))

        init(_ broker: TestBroker, id: String, acknowledging: Bool) throws {
            var logger = Logger(label: "handover") { [capture] _ in capture }
            logger.logLevel = .info
            client = try makeClient(
                broker, id: id,
                configure: {
                    $0.session = .persistent(expiry: .seconds(300))
                    $0.receiveMaximum = MQTTClientHandOverTests.window
                    $0.acknowledgement = .afterHandling
                }, logger: logger)
            state.withLock { $0.acknowledging = acknowledging }
        }

        var texts: [String] { state.withLock { $0.texts } }

        /// Takes what `subscription` passes on until it ends, acknowledging each message while
        /// acknowledging is on.
        func consume(_ subscription: MQTTSubscription) async throws {
            for try await message in subscription {
                let acknowledge = state.withLock { state in
                    state.texts.append(message.text)
                    state.lastTag = message.deliveryTag
                    return state.acknowledging
                }
                if acknowledge { client.acknowledge(through: message.deliveryTag) }
            }
        }

        /// From now on every message is acknowledged, those held so far at once.
        func startAcknowledging() {
            let last = state.withLock { state in
                state.acknowledging = true
                return state.lastTag
            }
            if last > 0 { client.acknowledge(through: last) }
        }

        func logged(_ level: Logger.Level, _ text: String) -> [InMemoryLogHandler.Entry] {
            capture.entries.filter { $0.level == level && $0.message.description.contains(text) }
        }
    }

    /// Both members subscribed, `count` messages published at QoS 1 and acknowledged by the
    /// broker: `leaving` holds its window unacknowledged, so its share of the rest is queued in
    /// its session.
    static func burst(_ broker: TestBroker, leaving: Member, staying: Member) async throws -> [Task<Void, any Error>] {
        var consumers: [Task<Void, any Error>] = []
        for member in [leaving, staying] {
            try await member.client.connect()
            let subscription = try await member.client.subscribe([filter])
            consumers.append(Task { try await member.consume(subscription) })
        }
        let publisher = try makeClient(broker)
        try await publisher.connect()
        for index in 0..<count {
            try await publisher.publish(topic: "handover/van-\(index % 7)/fix", string: "\(index)", qos: .atLeastOnce)
        }
        await publisher.shutdown()
        try await waitUntil("the leaving member's window to fill", timeout: patience) { leaving.texts.count == window }
        return consumers
    }

    @Test("a member stopping with its share of a burst queued takes it all first: every message once, hand-over done")
    func aStoppingMemberTakesItsQueueBeforeItDisconnects() async throws {
        try await withBroker(.init(extraConfiguration: ["max_queued_messages 100000"])) { broker in
            let leaving = try Member(broker, id: uniqueClientID("leaving"), acknowledging: false)
            let staying = try Member(broker, id: uniqueClientID("staying"), acknowledging: true)
            let consumers = try await Self.burst(broker, leaving: leaving, staying: staying)

            // Neither cut short nor ended early by a loaded machine's stalls: it ends at the
            // first 2 s of quiet.
            let stopping = Task {
                await leaving.client.shutdown(
                    flushTimeout: .zero, handingOver: true, handOverLimit: Self.patience, handOverQuiet: .seconds(2))
            }
            leaving.startAcknowledging()
            await stopping.value
            _ = try await consumers[0].value
            try await waitUntil("the group to have every message", timeout: Self.patience) {
                leaving.texts.count + staying.texts.count >= Self.count
            }

            let all = leaving.texts + staying.texts
            #expect(all.count == Self.count && Set(all) == Set((0..<Self.count).map(String.init)), "every message, once")
            #expect(leaving.texts.count > 10 * Self.window, "the broker had queued a share for the leaving member: \(leaving.texts.count)")
            let done = leaving.logged(.info, "MQTT hand-over done")
            #expect(done.count == 1, "\(leaving.capture.entries.map(\.message))")
            #expect(leaving.logged(.warning, "hand-over").isEmpty)
            consumers[1].cancel()
            await staying.client.shutdown()
        }
    }

    @Test("a hand-over cut short says so at warning; the rest comes with the session under the same client id")
    func aHandOverCutShortLeavesTheRestInTheSession() async throws {
        try await withBroker(.init(extraConfiguration: ["max_queued_messages 100000"])) { broker in
            let id = uniqueClientID("leaving")
            let leaving = try Member(broker, id: id, acknowledging: false)
            let staying = try Member(broker, id: uniqueClientID("staying"), acknowledging: true)
            let consumers = try await Self.burst(broker, leaving: leaving, staying: staying)

            // Its consumer never acknowledges: the broker sends it nothing beyond its window
            // (and the loop, waiting for the consumer, may not even write the UNSUBSCRIBE: the
            // session then keeps its subscription too).
            await leaving.client.shutdown(flushTimeout: .zero, handingOver: true, handOverLimit: .seconds(1))
            _ = try await consumers[0].value
            let warnings = leaving.logged(.warning, "MQTT hand-over cut short at its limit (the consumer had not handled")
            #expect(warnings.count == 1, "\(leaving.capture.entries.map(\.message))")
            #expect(warnings.first?.metadata["mqtt.client"]?.description == id, "the log names the session the rest waits in")
            #expect(leaving.logged(.info, "MQTT hand-over done").isEmpty)
            #expect(leaving.texts.count == Self.window)

            let again = try Member(broker, id: id, acknowledging: true)
            try await again.client.connect()
            let subscription = try await again.client.subscribe([Self.filter])
            let consumer = Task { try await again.consume(subscription) }
            try await waitUntil("the group and the session to have every message", timeout: Self.patience) {
                Set(again.texts + staying.texts).count >= Self.count
            }
            #expect(Set(again.texts + staying.texts) == Set((0..<Self.count).map(String.init)), "nothing lost")
            #expect(again.texts.count > 10 * Self.window, "the session kept the queue: \(again.texts.count)")
            consumer.cancel()
            consumers[1].cancel()
            await again.client.shutdown()
            await staying.client.shutdown()
        }
    }
}
