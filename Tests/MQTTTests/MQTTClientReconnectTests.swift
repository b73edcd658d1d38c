import FleetcastTestSupport
import MQTT
import Testing

@Suite struct MQTTClientReconnectTests {
    @Test func reconnectsAfterTheBrokerRestartsRestoringSubscriptionsAndQueuedPublishes() async throws {
        try await withBroker { broker in
            let client = try makeClient(broker)
            let states = client.connectionStates()
            try await client.connect()
            let subscription = try await client.subscribe(["r/#"])

            let downStates = Task {
                try await collectStates(states) { seen in
                    seen.contains { if case .reconnecting = $0 { true } else { false } }
                }
            }
            await broker.kill()
            let beforeRestart = try await downStates.value
            #expect(beforeRestart.prefix(3) == [.idle, .connecting, .connected])
            #expect(beforeRestart.contains { if case .disconnected = $0 { true } else { false } })

            // Published while the broker is down: queued and sent after the reconnect.
            let queued = Task {
                try await client.publish(topic: "r/while-down", string: "queued", qos: .atLeastOnce, retain: true)
            }
            await #expect(throws: MQTTError.notConnected) {
                try await client.publish(topic: "r/qos0", string: "dropped", qos: .atMostOnce)
            }
            let upStates = Task { try await collectStates(states) { $0.last == .connected } }
            try await broker.restart()
            let afterRestart = try await upStates.value
            #expect(afterRestart.last == .connected)
            try await withTimeout(.seconds(10), "the queued publish to be acknowledged") { try await queued.value }

            // The restored subscription delivers the publish made while down (retained, so it
            // arrives whether the broker saw the SUBSCRIBE or the PUBLISH first) …
            let first = try await collect(1, from: subscription)
            #expect(first.map(\.text) == ["queued"])
            // … and live messages published after the reconnect.
            try await client.publish(topic: "r/after", string: "live", qos: .atLeastOnce)
            let next = try await collect(1, from: subscription)
            #expect(next.last?.text == "live" || next.last?.text == "queued")
            if next.last?.text == "queued" {
                #expect(try await collect(1, from: subscription).map(\.text) == ["live"])
            }
            await client.shutdown()
        }
    }

    /// The broker's rules change: it disconnects the client and refuses one of its filters
    /// when the subscriptions are restored. That stream ends with the refusal instead of
    /// staying open and silent; the other is restored and delivers. MQTT 5 and 3.1.1.
    @Test(arguments: [MQTTProtocolVersion.v5, .v311])
    func aRestoredSubscriptionTheBrokerNowRefusesEndsItsStreamWithTheError(version: MQTTProtocolVersion) async throws {
        let security = try await DynamicSecurityBroker.start()
        do {
            try await security.addUser("watcher", password: "pw", subscribe: ["acl/#", "other/#"], publish: ["other/#"])
            let client = try makeClient(
                security.broker,
                configure: {
                    $0.protocolVersion = version
                    $0.username = "watcher"
                    $0.password = "pw"
                })
            let states = client.connectionStates()
            try await client.connect()
            let refused = try await client.subscribe(["acl/#"])
            let kept = try await client.subscribe(["other/#"])
            let reconnected = Task { try await collectStates(states) { $0.count > 3 && $0.last == .connected } }
            try await security.control(["removeRoleACL", "watcher", "subscribePattern", "acl/#"])
            _ = try await reconnected.value
            let ended = try await withTimeout(.seconds(10), "the refused stream to end") { () async -> (any Error)? in
                do {
                    for try await _ in refused {}
                    return nil
                } catch {
                    return error
                }
            }
            guard let refusal = ended as? MQTTError, refusal.code == .subscribeRejected, let code = refusal.reasonCode else {
                Issue.record("the stream ends with the refusal, not \(String(describing: ended))")
                await client.shutdown()
                await security.shutdown()
                return
            }
            #expect(refusal.filters == ["acl/#"] && code >= 0x80)
            #expect("\(ended!)".contains("check the broker's ACL"))
            // The other subscription was restored and still delivers.
            try await client.publish(topic: "other/x", string: "still here", qos: .atLeastOnce)
            #expect(try await collect(1, from: kept).map(\.text) == ["still here"])
            await client.shutdown()
        } catch {
            await security.shutdown()
            throw error
        }
        await security.shutdown()
    }

    @Test func subscriptionMadeWhileDownIsSentAfterTheReconnect() async throws {
        try await withBroker { broker in
            let client = try makeClient(broker)
            let states = client.connectionStates()
            try await client.connect()
            await broker.stop()
            _ = try await collectStates(states) { $0.last.map { if case .reconnecting = $0 { true } else { false } } ?? false }
            let subscription = try await client.subscribe(["late/#"])
            let upStates = Task { try await collectStates(states) { $0.last == .connected } }
            try await broker.restart()
            _ = try await upStates.value
            try await client.publish(topic: "late/1", string: "arrives", qos: .atLeastOnce)
            #expect(try await collect(1, from: subscription).map(\.text) == ["arrives"])
            await client.shutdown()
        }
    }

    @Test func shutdownWhileReconnectingEndsPromptly() async throws {
        try await withBroker { broker in
            let client = try makeClient(
                broker,
                configure: {
                    $0.reconnect = MQTTReconnectPolicy(initialDelay: .seconds(30), maximumDelay: .seconds(30), jitter: 0)
                })
            let states = client.connectionStates()
            try await client.connect()
            await broker.kill()
            _ = try await collectStates(states) { $0.last.map { if case .reconnecting = $0 { true } else { false } } ?? false }
            // Handed over while the broker is gone (libmosquitto queues it for the next
            // connection): it cannot be acknowledged before the stop. (Published before the kill,
            // a fast broker sometimes acknowledged it first.)
            let pending = Task { try await client.publish(topic: "x/y", string: "never acked", qos: .atLeastOnce) }
            try await withTimeout(.seconds(10), "shutdown during a 30 s backoff") {
                await client.shutdown(flushTimeout: .milliseconds(200))
            }
            await #expect(throws: MQTTError.self) { try await pending.value }
            #expect(client.connectionState == .closed)
        }
    }
}
