import FleetcastTestSupport
import Foundation
import MQTT
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Cancelling a publish (or connect) ends its *wait* at once, even when the broker is gone, and
/// a late acknowledgement never completes anything else: what bounds the agent's shutdown.
@Suite struct MQTTClientCancellationTests {
    // MARK: the state machine alone (no socket): the races

    typealias State = MQTTClientState<String, String, String, String>

    func connectedState() -> State {
        var state = State(protocolVersion: .v5, sentCredentials: false)
        _ = state.startConnect("connect", cancelled: false)
        _ = state.connack(reasonCode: 0)
        return state
    }

    @Test func cancelledBeforeRegistrationButAlreadyAcknowledgedReportsTheAck() throws {
        var state = connectedState()
        let (epoch, token) = try state.beginPublish().get()
        _ = state.publishAcknowledged(mid: 6, reasonCode: 0x87)
        // The outcome is known: report it rather than "unknown" (CancellationError).
        let actions = state.publishSent(mid: 6, topic: "t", qos: .atLeastOnce, epoch: epoch, token: token, cancelled: true, ack: "p6")
        #expect(actions.cancel.isEmpty)
        #expect(actions.fail.map(\.1) == [.publishRejected(topic: "t", reasonCode: 0x87, reason: MQTTError.reasonString(0x87))])
    }

    @Test func cancellingTheLastAwaitedPublishEndsTheShutdownDrain() throws {
        var state = connectedState()
        let (epoch, token) = try state.beginPublish().get()
        _ = state.publishSent(mid: 1, topic: "t", qos: .atLeastOnce, epoch: epoch, token: token, cancelled: false, ack: "p1")
        #expect(state.beginShutdown().mustDrain)
        #expect(state.awaitDrain(id: 100, cancelled: false, "drain").resume.isEmpty)
        let cancelled = state.cancelPublish(mid: 1, token: token)
        #expect(cancelled.cancel == ["p1"])
        #expect(cancelled.resume == ["drain"], "no publish is awaited any more: the drain is over")
    }

    @Test func aDrainWaitFromACancelledShutdownIsResumedAtOnce() throws {
        var state = connectedState()
        let (epoch, token) = try state.beginPublish().get()
        _ = state.publishSent(mid: 1, topic: "t", qos: .atLeastOnce, epoch: epoch, token: token, cancelled: false, ack: "p1")
        _ = state.beginShutdown()
        #expect(state.awaitDrain(id: 1, cancelled: true, "drain").resume == ["drain"])
    }

    // MARK: a real broker that goes away

    /// Starts a QoS 1 publish on a client whose broker was just killed and returns once it
    /// waits for its PUBACK (the message is with libmosquitto).
    func publishWaitingForDeadBroker(_ client: MQTTClient, topic: String, text: String) async throws -> Task<Void, any Error> {
        // An immediate task runs synchronously up to its first suspension: the PUBACK wait.
        Task.immediate { try await client.publish(topic: topic, string: text, qos: .atLeastOnce, retain: true) }
    }

    /// Cancels `publishing` and returns its result and how long it took to end. If the
    /// cancellation were ignored, a shutdown after 15 s (which fails waiting publishes with
    /// `MQTTError.shutdown`) ends the wait, so the test fails instead of hanging.
    func cancelAndMeasure(_ publishing: Task<Void, any Error>, _ client: MQTTClient) async -> (Result<Void, any Error>, Duration) {
        let clock = ContinuousClock()
        let start = clock.now
        publishing.cancel()
        let result = await Self.result(of: publishing, shuttingDownAfter: .seconds(15), client)
        return (result, clock.now - start)
    }

    /// The result of `task`, once cancelled. If it has not ended after `limit` (its
    /// cancellation ignored), `client` is shut down, which ends the wait.
    static func result<T: Sendable>(
        of task: Task<T, any Error>, shuttingDownAfter limit: Duration, _ client: MQTTClient
    ) async -> Result<T, any Error> {
        if let result = try? await withTimeout(limit, "the cancelled call to end", { await task.result }) { return result }
        await client.shutdown(flushTimeout: .zero)
        return await task.result
    }

    @Test func publishAwaitingAnAckFromAKilledBrokerIsCancelledPromptlyAndTheClientShutsDownPromptly() async throws {
        try await withBroker { broker in
            let client = try makeClient(broker)
            try await client.connect()
            try await client.publish(topic: "cancel/warm-up", string: "acknowledged", qos: .atLeastOnce)
            await broker.kill()

            let publishing = try await publishWaitingForDeadBroker(client, topic: "cancel/a", text: "a")
            let (result, elapsed) = await cancelAndMeasure(publishing, client)
            #expect(throws: CancellationError.self) { try result.get() }
            #expect(elapsed < .seconds(8), "the cancelled wait ended after \(elapsed)")

            // Nothing is awaited any more: shutdown does not wait for the abandoned message,
            // and stops the reconnecting loop thread at once.
            let clock = ContinuousClock()
            let start = clock.now
            try await withTimeout(.seconds(10), "the client to shut down") { await client.shutdown() }
            #expect(clock.now - start < .seconds(10), "shutdown took \(clock.now - start)")
            #expect(client.connectionState == .closed, "the loop has ended")
        }
    }

    @Test func afterACancelledPublishTheNextPublishGetsItsOwnAckOnceTheBrokerIsBack() async throws {
        try await withBroker { broker in
            let client = try makeClient(broker)
            let states = client.connectionStates()
            try await client.connect()
            await broker.kill()
            let publishing = try await publishWaitingForDeadBroker(client, topic: "cancel/abandoned", text: "abandoned")
            let (result, _) = await cancelAndMeasure(publishing, client)
            #expect(throws: CancellationError.self) { try result.get() }

            let reconnected = Task { try await collectStates(states) { $0.count > 3 && $0.last == .connected } }
            try await broker.restart()
            _ = try await reconnected.value
            // A new publish waits for, and gets, its own PUBACK.
            try await withTimeout(.seconds(10), "the publish after the restart to be acknowledged") {
                try await client.publish(topic: "cancel/fresh", string: "fresh", qos: .atLeastOnce, retain: true)
            }
            // libmosquitto resent the abandoned message after the reconnect (documented: a
            // cancelled publish may still be delivered); the broker stored it.
            let reader = try makeClient(broker)
            try await reader.connect()
            let retained = try await reader.subscribe(["cancel/abandoned", "cancel/fresh"])
            let texts = try await collect(2, from: retained).map(\.text)
            #expect(Set(texts) == ["abandoned", "fresh"])
            // Its late PUBACK was dropped (the state tests show why that matters): the publishes
            // that follow, which libmosquitto may give the same mid, each get their own.
            for index in 0..<20 {
                try await withTimeout(.seconds(10), "publish \(index) after the abandoned one") {
                    try await client.publish(topic: "cancel/after/\(index)", string: "\(index)", qos: .atLeastOnce)
                }
            }
            await reader.shutdown()
            await client.shutdown()
        }
    }

    @Test func connectCancelledWhileTheServerNeverAnswersThrowsCancellationAndTheLoopEnds() async throws {
        // A TCP listener that never accepts: the kernel completes the handshake, the CONNECT
        // is buffered, and no CONNACK ever comes (a broker that hangs).
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(listener >= 0)
        defer { close(listener) }
        let port = try #require(bindToFreeLoopbackPort(listener))
        try #require(listen(listener, 4) == 0)

        let client = try MQTTClient(
            configuration: MQTTConfiguration(broker: BrokerURL(host: "127.0.0.1", port: port), clientID: uniqueClientID("silent")),
            logger: quietLogger)
        let connecting = Task { try await client.connect() }
        try await waitUntil("the client to be connecting", timeout: .seconds(5)) { client.connectionState == .connecting }
        let clock = ContinuousClock()
        let start = clock.now
        connecting.cancel()
        let result = await Self.result(of: connecting, shuttingDownAfter: .seconds(15), client)
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(clock.now - start < .seconds(12), "the cancelled connect ended after \(clock.now - start)")
        try await waitUntil("the loop thread to end", timeout: .seconds(5)) { client.connectionState == .closed }
        await #expect(throws: MQTTError.shutdown) { try await client.publish(topic: "t", string: "x") }
    }
}
