import FleetcastTestSupport
import Foundation
@testable import MQTT
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

    func connectedState() -> MQTTClientState {
        var state = MQTTClientState(protocolVersion: .v5, sentCredentials: false)
        state.phase = .connected
        return state
    }

    @Test func cancellationBeforeTheMidIsRegisteredFailsTheWaitAndAbandonsTheMid() async throws {
        var state = connectedState()
        // The task is cancelled between mosquitto_publish (mid 5) and the registration: the
        // handler finds no wait to cancel …
        #expect(state.cancelPublish(mid: 5, token: 1).cancellations.isEmpty)
        // … so the registration, which reads the cancellation under the lock, ends it.
        await #expect(throws: CancellationError.self) {
            try await withCheckedThrowingContinuation { continuation in
                state.registerPublish(
                    mid: 5, topic: "t", qos: .atLeastOnce, epochAtSend: state.epoch, token: 1, cancelled: true,
                    continuation: continuation
                ).run()
            }
        }
        #expect(state.pendingPublishes.isEmpty)
        #expect(state.abandonedPublishes == [5])
        // Its PUBACK arrives later: dropped, not kept as an early ack for a future mid 5.
        #expect(state.publishAcknowledged(mid: 5, reasonCode: 0).completions.isEmpty)
        #expect(state.earlyAcks.isEmpty)
        #expect(state.abandonedPublishes.isEmpty)
    }

    @Test func cancelledBeforeRegistrationButAlreadyAcknowledgedReportsTheAck() async throws {
        var state = connectedState()
        state.publishAcknowledged(mid: 6, reasonCode: 0x87).run()
        // The outcome is known: report it rather than "unknown" (CancellationError).
        await #expect(throws: MQTTError.publishRejected(topic: "t", reasonCode: 0x87, reason: MQTTError.reasonString(0x87))) {
            try await withCheckedThrowingContinuation { continuation in
                state.registerPublish(
                    mid: 6, topic: "t", qos: .atLeastOnce, epochAtSend: state.epoch, token: 2, cancelled: true,
                    continuation: continuation
                ).run()
            }
        }
        #expect(state.earlyAcks.isEmpty && state.abandonedPublishes.isEmpty && state.pendingPublishes.isEmpty)
    }

    @Test func ackAfterACancelledWaitIsNotTakenByTheNextPublishReusingTheMid() async throws {
        var state = connectedState()
        await #expect(throws: CancellationError.self) {
            try await withCheckedThrowingContinuation { continuation in
                state.registerPublish(
                    mid: 9, topic: "old", qos: .atLeastOnce, epochAtSend: state.epoch, token: 3, continuation: continuation
                ).run()
                #expect(state.pendingPublishes[9] != nil)
                state.cancelPublish(mid: 9, token: 3).run()
            }
        }
        #expect(state.pendingPublishes.isEmpty && state.abandonedPublishes == [9])
        // The cancelled message's PUBACK (libmosquitto delivered it after all) is dropped.
        #expect(state.publishAcknowledged(mid: 9, reasonCode: 0).completions.isEmpty)
        #expect(state.earlyAcks[9] == nil)

        // libmosquitto wraps around and hands mid 9 to a new publish: it must wait for its own
        // acknowledgement, and a stale cancellation (old token) must not touch it.
        let completed = Locked(false)
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let registered = state.registerPublish(
                mid: 9, topic: "new", qos: .atLeastOnce, epochAtSend: state.epoch, token: 4,
                continuation: continuation)
            #expect(registered.completions.isEmpty && registered.cancellations.isEmpty, "no stale result for the new publish")
            #expect(state.cancelPublish(mid: 9, token: 3).cancellations.isEmpty)
            #expect(state.pendingPublishes[9]?.topic == "new")
            let acked = state.publishAcknowledged(mid: 9, reasonCode: 0)
            #expect(acked.completions.count == 1)
            completed.withLock { $0 = true }
            acked.run()
        }
        #expect(completed.withLock { $0 })
        #expect(state.pendingPublishes.isEmpty && state.earlyAcks.isEmpty && state.abandonedPublishes.isEmpty)
    }

    @Test func ackAfterAnAbandonedMidIsReusedCompletesTheNewOwner() async throws {
        var state = connectedState()
        state.abandonedPublishes = [12]
        // The new registration of mid 12 clears the abandoned mark: its ack is its own.
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            state.registerPublish(mid: 12, topic: "t", qos: .atLeastOnce, epochAtSend: state.epoch, token: 7, continuation: continuation).run()
            #expect(state.abandonedPublishes.isEmpty)
            state.publishAcknowledged(mid: 12, reasonCode: 0).run()
        }
    }

    @Test func cancellingTheLastAwaitedPublishEndsTheShutdownDrain() async throws {
        var initial = connectedState()
        initial.loopRunning = true
        let shared = Locked(initial)
        let waiting = Task {
            try await withCheckedThrowingContinuation { continuation in
                shared.withLock {
                    $0.registerPublish(mid: 1, topic: "t", qos: .atLeastOnce, epochAtSend: 0, token: 1, continuation: continuation)
                }.run()
            }
        }
        try await waitUntil("the publish to be registered") { shared.withLock { $0.pendingPublishes[1] != nil } }
        let drained = Task {
            await withCheckedContinuation { waiter in shared.withLock { $0.setDrainWaiter(id: 100, waiter) }.run() }
        }
        try await waitUntil("shutdown's drain to wait") { shared.withLock { $0.drainWaiters[100] != nil } }
        let cancelled = shared.withLock { $0.cancelPublish(mid: 1, token: 1) }
        #expect(cancelled.resumeDrain.count == 1, "no publish is awaited any more: the drain is over")
        cancelled.run()
        shared.withLock { $0.cancelDrainWaiter(id: 100) }.run()  // (only matters if the expectation failed)
        await drained.value
        await #expect(throws: CancellationError.self) { try await waiting.value }
    }

    @Test func connectCancelledBeforeItStartsStartsNoLoopAndClosesTheClient() async {
        var state = MQTTClientState(protocolVersion: .v5, sentCredentials: false)
        await #expect(throws: CancellationError.self) {
            try await withCheckedThrowingContinuation { continuation in
                let (error, startLoop, actions) = state.startConnect(continuation, cancelled: true)
                #expect(error == nil && !startLoop)
                actions.run()
            }
        }
        #expect(state.phase == .closed && !state.loopRunning && state.connectionState == .closed)
    }

    @Test func connectCancelledWhileWaitingForCONNACKStopsTheLoopWithoutReconnecting() async {
        var state = MQTTClientState(protocolVersion: .v5, sentCredentials: false)
        await #expect(throws: CancellationError.self) {
            try await withCheckedThrowingContinuation { continuation in
                let (_, startLoop, actions) = state.startConnect(continuation)
                #expect(startLoop)
                actions.run()
                state.cancelConnect().run()
            }
        }
        #expect(state.stopRequested && state.phase == .shuttingDown)
        // A CONNACK arriving afterwards is ignored; the loss that follows does not reconnect.
        #expect(state.connack(reasonCode: 0).actions.completions.isEmpty)
        #expect(state.phase == .shuttingDown)
        #expect(!state.connectionLost(.connectionLost(reason: "disconnected")).reconnect)
        #expect(state.cancelConnect().cancellations.isEmpty, "a second cancellation is a no-op")
    }

    // MARK: a real broker that goes away

    /// Starts a QoS 1 publish on a client whose broker was just killed and returns once it
    /// waits for its PUBACK (the message is with libmosquitto).
    func publishWaitingForDeadBroker(_ client: MQTTClient, topic: String, text: String) async throws -> Task<Void, any Error> {
        let publishing = Task { try await client.publish(topic: topic, string: text, qos: .atLeastOnce, retain: true) }
        try await waitUntil("the publish to wait for its PUBACK", timeout: .seconds(5)) {
            client.context.state.withLock { !$0.pendingPublishes.isEmpty }
        }
        return publishing
    }

    /// Cancels `publishing` and returns its result and how long it took to end. If the
    /// cancellation were ignored, a shutdown after 15 s (which fails waiting publishes with
    /// `MQTTError.shutdown`) ends the wait, so the test fails instead of hanging.
    func cancelAndMeasure(_ publishing: Task<Void, any Error>, _ client: MQTTClient) async -> (Result<Void, any Error>, Duration) {
        let clock = ContinuousClock()
        let start = clock.now
        publishing.cancel()
        let fallback = Task {
            try await Task.sleep(for: .seconds(15))
            await client.shutdown(flushTimeout: .zero)
        }
        let result = await publishing.result
        let elapsed = clock.now - start
        fallback.cancel()
        return (result, elapsed)
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
            #expect(client.context.state.withLock { $0.pendingPublishes.isEmpty })

            // Nothing is awaited any more: shutdown does not wait for the abandoned message,
            // and stops the reconnecting loop thread at once.
            let clock = ContinuousClock()
            let start = clock.now
            try await withTimeout(.seconds(10), "the client to shut down") { await client.shutdown() }
            #expect(clock.now - start < .seconds(10), "shutdown took \(clock.now - start)")
            #expect(client.connectionState == .closed)
            #expect(!client.context.state.withLock { $0.loopRunning })
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
            let abandoned = try #require(client.context.state.withLock { $0.abandonedPublishes.first })

            let reconnected = Task { try await collectStates(states) { $0.count > 3 && $0.last == .connected } }
            try await broker.restart()
            _ = try await reconnected.value
            // A new publish waits for, and gets, its own PUBACK.
            try await withTimeout(.seconds(10), "the publish after the restart to be acknowledged") {
                try await client.publish(topic: "cancel/fresh", string: "fresh", qos: .atLeastOnce, retain: true)
            }
            // libmosquitto resent the abandoned message after the reconnect (documented: a
            // cancelled publish may still be delivered); its late PUBACK was dropped, not kept.
            try await waitUntil("the abandoned message's PUBACK", timeout: .seconds(5)) {
                client.context.state.withLock { !$0.abandonedPublishes.contains(abandoned) }
            }
            #expect(client.context.state.withLock { $0.earlyAcks.isEmpty && $0.pendingPublishes.isEmpty })

            let reader = try makeClient(broker)
            try await reader.connect()
            let retained = try await reader.subscribe(["cancel/abandoned", "cancel/fresh"])
            let texts = try await collect(2, from: retained).map(\.text)
            #expect(Set(texts) == ["abandoned", "fresh"])
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
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 }
        }
        try #require(bound && listen(listener, 4) == 0)
        let port = Int(UInt16(bigEndian: address.sin_port))

        let client = try MQTTClient(
            configuration: MQTTConfiguration(broker: BrokerURL(host: "127.0.0.1", port: port), clientID: uniqueClientID("silent")),
            logger: quietLogger)
        let connecting = Task { try await client.connect() }
        try await waitUntil("the client to be connecting", timeout: .seconds(5)) { client.connectionState == .connecting }
        let clock = ContinuousClock()
        let start = clock.now
        connecting.cancel()
        let fallback = Task {
            try await Task.sleep(for: .seconds(15))
            await client.shutdown(flushTimeout: .zero)  // ends the wait if cancellation were ignored
        }
        let result = await connecting.result
        fallback.cancel()
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(clock.now - start < .seconds(12), "the cancelled connect ended after \(clock.now - start)")
        try await waitUntil("the loop thread to end", timeout: .seconds(5)) { !client.context.state.withLock { $0.loopRunning } }
        #expect(client.connectionState == .closed)
        await #expect(throws: MQTTError.shutdown) { try await client.publish(topic: "t", string: "x") }
    }
}
