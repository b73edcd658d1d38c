import FleetcastTestSupport
import MQTT
import Testing

@Suite struct MQTTClientLifecycleTests {
    @Test func shutdownAndReleaseFreeTheCallbackContext() async throws {
        try await withBroker { broker in
            var client: MQTTClient? = try makeClient(broker)
            weak let context = client?.context
            try await client?.connect()
            try await client?.publish(topic: "life/1", string: "x", qos: .atLeastOnce)
            await client?.shutdown()
            #expect(context != nil)
            client = nil
            // Released once the loop thread has let go of it, which may lag the return of
            // shutdown() by a scheduling quantum on a loaded machine (seen under TSan in CI).
            try await waitUntil("mosquitto_destroy to run and the Unmanaged context to be released", timeout: .seconds(10)) {
                context == nil
            }
        }
    }

    @Test func droppingAConnectedClientStopsItsThreadAndFreesTheContext() async throws {
        try await withBroker { broker in
            var client: MQTTClient? = try makeClient(broker)
            weak let context = client?.context
            try await client?.connect()
            client = nil
            // The loop thread notices the stop, sends DISCONNECT and drops the last reference.
            try await waitUntil("the loop thread to release the context", timeout: .seconds(5)) { context == nil }
        }
    }

    @Test func aClientThatNeverConnectedIsFreedAtOnce() throws {
        var client: MQTTClient? = try MQTTClient(
            configuration: MQTTConfiguration(broker: BrokerURL(host: "127.0.0.1"), clientID: "never"), logger: quietLogger)
        weak let context = client?.context
        #expect(context != nil)
        client = nil
        #expect(context == nil)
    }

    @Test func shutdownWaitsForPublishesAwaitingTheirAcknowledgement() async throws {
        try await withBroker { broker in
            let subscriber = try makeClient(broker)
            try await subscriber.connect()
            let subscription = try await subscriber.subscribe(["flush/#"])
            let client = try makeClient(broker, configure: { $0.maxInflightMessages = 2 })
            try await client.connect()
            let count = 50
            let (handedOver, signal) = AsyncStream.makeStream(of: Void.self)
            let publishes = Task {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    // An immediate task runs synchronously up to its acknowledgement wait, so
                    // once the loop is done every publish has been handed to libmosquitto.
                    for index in 0..<count {
                        group.addImmediateTask { try await client.publish(topic: "flush/\(index)", string: "\(index)", qos: .atLeastOnce) }
                    }
                    signal.yield()
                    try await group.waitForAll()
                }
            }
            // Once every publish has been handed to libmosquitto, shut down: all must be acknowledged.
            for await _ in handedOver { break }
            await client.shutdown()
            try await publishes.value
            #expect(try await collect(count, from: subscription).count == count)
            await subscriber.shutdown()
        }
    }

    /// A stream that ends right before `shutdown()` sends an UNSUBSCRIBE; a DISCONNECT
    /// written before its UNSUBACK is read made the kernel reset the connection, so the
    /// broker saw a lost client and published its will (about 1 close in 60 before the fix).
    @Test func endingASubscriptionRightBeforeShutdownStillClosesCleanly() async throws {
        try await withBroker { broker in
            let watcher = try makeClient(broker)
            try await watcher.connect()
            let wills = try await watcher.subscribe(["clean-close/#"])
            var ids: [String] = []
            for round in 0..<100 {
                let id = uniqueClientID("clean-close-\(round)")
                ids.append(id)
                let client = try makeClient(broker, id: id) {
                    $0.will = MQTTWill(topic: "clean-close/will/\(round)", payload: Array("lost".utf8), qos: .atLeastOnce, retain: false)
                }
                try await client.connect()
                let subscribed = Locked(false)
                // What fleet-watch does: iterate until cancelled, then shut down in the cancelled task.
                let consumer = Task {
                    let subscription = try await client.subscribe(["clean-close/data/\(round)"])
                    subscribed.withLock { $0 = true }
                    for try await _ in subscription {}
                    await client.shutdown(flushTimeout: .zero)
                }
                try await waitUntil("round \(round) subscribed", interval: .milliseconds(1)) { subscribed.withLock { $0 } }
                consumer.cancel()
                try await consumer.value
            }
            // The broker handles each connection in order: once this marker arrives, any will
            // published at those closes has arrived before it.
            try await watcher.publish(topic: "clean-close/marker", string: "end", qos: .atLeastOnce)
            let received = try await collect(1, from: wills)
            #expect(received.map(\.topic) == ["clean-close/marker"], "no will may be published after a clean shutdown")
            let log = broker.log
            let unclean = ids.filter { !log.contains("Client \($0) disconnected.") }
            #expect(unclean.isEmpty, "closed without a DISCONNECT: \(unclean)")
            await watcher.shutdown()
        }
    }
}
