import FleetcastTestSupport
import MQTT
import Testing

@Suite struct MQTTClientWillTests {
    @Test func willIsPublishedOnAnUncleanDisconnect() async throws {
        try await withBroker { broker in
            let observer = try await MosquittoCLI.subscribe(broker: broker, filter: "fleet/+/status", count: 1)
            let proxy = try await TCPProxy(to: broker.port)
            let client = try makeClient(
                broker, url: "mqtt://127.0.0.1:\(proxy.port)",
                configure: {
                    $0.will = MQTTWill(topic: "fleet/van-9/status", payload: Array("offline".utf8), qos: .atLeastOnce, retain: true)
                    $0.reconnect = MQTTReconnectPolicy(initialDelay: .seconds(30), maximumDelay: .seconds(30))
                })
            try await client.connect()
            await proxy.kill()  // the vehicle loses its network: no DISCONNECT reaches the broker
            #expect(await observer.messages() == ["fleet/van-9/status offline"])
            await client.shutdown(flushTimeout: .zero)
        }
    }

    @Test func cleanShutdownDoesNotPublishTheWill() async throws {
        try await withBroker { broker in
            let client = try makeClient(
                broker,
                configure: {
                    $0.will = MQTTWill(topic: "fleet/van-8/status", payload: Array("offline".utf8), qos: .atLeastOnce, retain: true)
                })
            try await client.connect()
            try await client.publish(topic: "fleet/van-8/status", string: "online", qos: .atLeastOnce, retain: true)
            await client.shutdown()
            // The retained status a newcomer sees is still "online": no will replaced it.
            let reader = try makeClient(broker)
            try await reader.connect()
            let subscription = try await reader.subscribe(["fleet/van-8/status"])
            #expect(try await collect(1, from: subscription).map(\.text) == ["online"])
            await reader.shutdown()
        }
    }
}
