import FleetcastTestSupport
@testable import MQTT
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
            #expect(context == nil, "mosquitto_destroy ran and the Unmanaged context was released")
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
            let publishes = Task {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in 0..<count {
                        group.addTask { try await client.publish(topic: "flush/\(index)", string: "\(index)", qos: .atLeastOnce) }
                    }
                    try await group.waitForAll()
                }
            }
            // Once every publish has been handed to libmosquitto, shut down: all must be acknowledged.
            try await waitUntil("all publishes handed over") {
                client.context.state.withLock { $0.publishesHandedOver } == count
            }
            await client.shutdown()
            try await publishes.value
            #expect(try await collect(count, from: subscription).count == count)
            await subscriber.shutdown()
        }
    }
}

