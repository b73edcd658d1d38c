import FleetcastTestSupport
import MQTT
import Testing

@Suite struct MQTTClientPublishSubscribeTests {
    @Test(arguments: MQTTQoS.allCases)
    func publishIsDeliveredWithItsQoSAndAcknowledged(qos: MQTTQoS) async throws {
        try await withBroker { broker in
            let subscriber = try makeClient(broker)
            try await subscriber.connect()
            let subscription = try await subscriber.subscribe(["qos/#"], qos: .exactlyOnce)
            let publisherID = uniqueClientID("publisher")
            let publisher = try makeClient(broker, id: publisherID)
            try await publisher.connect()

            try await publisher.publish(topic: "qos/\(qos.rawValue)", string: "payload \(qos.rawValue)", qos: qos)
            // Acknowledgement semantics: when publish returns, the broker has sent its ack.
            switch qos {
            case .atMostOnce: break
            case .atLeastOnce: #expect(broker.log.contains("Sending PUBACK to \(publisherID)"))
            case .exactlyOnce: #expect(broker.log.contains("Sending PUBCOMP to \(publisherID)"))
            }
            let received = try await collect(1, from: subscription)
            #expect(
                received == [
                    MQTTMessage(topic: "qos/\(qos.rawValue)", payload: Array("payload \(qos.rawValue)".utf8), qos: qos, retain: false)
                ])
            await publisher.shutdown()
            await subscriber.shutdown()
        }
    }

    @Test func manyPublishesInFlightAtOnceAllArrive() async throws {
        try await withBroker { broker in
            let subscriber = try makeClient(broker)
            try await subscriber.connect()
            let subscription = try await subscriber.subscribe(["burst/#"])
            let publisher = try makeClient(broker, configure: { $0.maxInflightMessages = 8 })
            try await publisher.connect()
            let count = 300
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<count {
                    group.addTask {
                        try await publisher.publish(
                            topic: "burst/\(index % 7)", string: "\(index)", qos: index % 3 == 0 ? .exactlyOnce : .atLeastOnce)
                    }
                }
                try await group.waitForAll()
            }
            let received = try await collect(count, from: subscription)
            #expect(Set(received.map(\.text)) == Set((0..<count).map(String.init)))
            await publisher.shutdown()
            await subscriber.shutdown()
        }
    }

    @Test func retainedMessageReachesALaterSubscriberWithTheRetainFlag() async throws {
        try await withBroker { broker in
            let publisher = try makeClient(broker)
            try await publisher.connect()
            try await publisher.publish(topic: "fleet/van-1/fix", string: "{\"v\":1}", qos: .atLeastOnce, retain: true)
            try await publisher.publish(topic: "fleet/van-1/live", string: "not retained", qos: .atLeastOnce, retain: false)
            await publisher.shutdown()

            let late = try makeClient(broker)
            try await late.connect()
            let subscription = try await late.subscribe(["fleet/van-1/fix"])
            let received = try await collect(1, from: subscription)
            #expect(received == [MQTTMessage(topic: "fleet/van-1/fix", payload: Array("{\"v\":1}".utf8), qos: .atLeastOnce, retain: true)])

            // A live message on a subscribed topic arrives without the retain flag.
            try await late.publish(topic: "fleet/van-1/fix", string: "{\"v\":2}", qos: .atLeastOnce, retain: true)
            let live = try await collect(1, from: subscription)
            #expect(live.map(\.retain) == [false])
            await late.shutdown()
        }
    }

    @Test func mqtt5PropertiesReachOtherClients() async throws {
        try await withBroker { broker in
            let observer = try await MosquittoCLI.subscribe(
                broker: broker, filter: "props/#", count: 1, extra: ["-V", "5", "-F", "%t|%C|%E|%p"])
            let client = try makeClient(broker)
            try await client.connect()
            try await client.publish(
                topic: "props/fix", string: "{}", qos: .atLeastOnce,
                properties: MQTTPublishProperties(contentType: "application/json", messageExpirySeconds: 600))
            let lines = await observer.messages()
            #expect(lines.count == 1)
            let fields = lines.first?.split(separator: "|").map(String.init) ?? []
            #expect(fields.count == 4)
            #expect(fields.first == "props/fix")
            #expect(fields.dropFirst().first == "application/json")
            #expect(Int(fields.dropFirst(2).first ?? "").map { (590...600).contains($0) } == true, "expiry interval \(fields)")
            await client.shutdown()
        }
    }

    @Test func severalStreamsOnOneClientGetOnlyTheirMessages() async throws {
        try await withBroker { broker in
            let client = try makeClient(broker)
            try await client.connect()
            let fixes = try await client.subscribe(["fleet/+/fix"])
            let status = try await client.subscribe(["fleet/+/status"])
            let everything = try await client.subscribe(["fleet/#"])
            let publisher = try makeClient(broker)
            try await publisher.connect()
            for topic in ["fleet/a/fix", "fleet/a/status", "fleet/b/heading", "fleet/b/fix", "fleet/b/status"] {
                try await publisher.publish(topic: topic, string: topic, qos: .atLeastOnce)
            }
            let fixTopics = try await collect(2, from: fixes).map(\.topic)
            let statusTopics = try await collect(2, from: status).map(\.topic)
            let allTopics = try await collect(5, from: everything).map(\.topic)
            #expect(fixTopics == ["fleet/a/fix", "fleet/b/fix"])
            #expect(statusTopics == ["fleet/a/status", "fleet/b/status"])
            #expect(allTopics == ["fleet/a/fix", "fleet/a/status", "fleet/b/heading", "fleet/b/fix", "fleet/b/status"])
            // After the last message each stream got, the next one it gets is its own again.
            try await publisher.publish(topic: "fleet/c/status", string: "end", qos: .atLeastOnce)
            try await publisher.publish(topic: "fleet/c/fix", string: "end", qos: .atLeastOnce)
            let nextFix = try await collect(1, from: fixes).map(\.topic)
            let nextStatus = try await collect(1, from: status).map(\.topic)
            #expect(nextFix == ["fleet/c/fix"])
            #expect(nextStatus == ["fleet/c/status"])
            await publisher.shutdown()
            await client.shutdown()
        }
    }

    @Test func sharedSubscriptionSplitsMessagesBetweenClients() async throws {
        try await withBroker { broker in
            let first = try makeClient(broker)
            let second = try makeClient(broker)
            try await first.connect()
            try await second.connect()
            let a = try await first.subscribe(["$share/watchers/shared/+/fix"])
            let b = try await second.subscribe(["$share/watchers/shared/+/fix"])
            let (merged, sink) = AsyncStream.makeStream(of: (String, String).self)
            let forwarders = [("first", a), ("second", b)].map { name, subscription in
                Task {
                    for try await message in subscription { sink.yield((name, message.text)) }
                }
            }
            let publisher = try makeClient(broker)
            try await publisher.connect()
            let count = 20
            for index in 0..<count {
                try await publisher.publish(topic: "shared/van-\(index)/fix", string: "\(index)", qos: .atLeastOnce)
            }
            let received = try await withTimeout(.seconds(10), "shared deliveries") {
                var seen: [(String, String)] = []
                for await item in merged {
                    seen.append(item)
                    if seen.count == count { break }
                }
                return seen
            }
            #expect(Set(received.map(\.1)) == Set((0..<count).map(String.init)), "each message delivered once")
            #expect(Set(received.map(\.0)) == ["first", "second"], "the group shares the load")
            for forwarder in forwarders { forwarder.cancel() }
            await publisher.shutdown()
            await first.shutdown()
            await second.shutdown()
        }
    }

    @Test func endingAStreamUnsubscribesUnlessAnotherStreamUsesTheFilter() async throws {
        try await withBroker { broker in
            let clientID = uniqueClientID("unsub")
            let client = try makeClient(broker, id: clientID)
            try await client.connect()
            let keeper = try await client.subscribe(["keep/#"])
            let consumer = Task {
                let transient = try await client.subscribe(["keep/#", "drop/#"])
                return try await collect(1, from: transient)
            }
            // Let the transient subscription receive one message, then end its task.
            try await waitUntil("the transient SUBSCRIBE") { broker.log.contains("drop/#") }
            try await client.publish(topic: "drop/1", string: "one", qos: .atLeastOnce)
            #expect(try await consumer.value.map(\.text) == ["one"])
            // The stream ended: the client sends UNSUBSCRIBE for drop/# only.
            try await waitUntil("UNSUBSCRIBE from \(clientID)") { broker.log.contains("Received UNSUBSCRIBE from \(clientID)") }
            try await client.publish(topic: "keep/2", string: "still here", qos: .atLeastOnce)
            #expect(try await collect(1, from: keeper).map(\.text) == ["still here"])
            await client.shutdown()
        }
    }

    @Test func cliPublisherReachesTheClient() async throws {
        try await withBroker { broker in
            let client = try makeClient(broker, configure: { $0.protocolVersion = .v311 })
            try await client.connect()
            let subscription = try await client.subscribe(["cli/#"], qos: .atLeastOnce)
            try await MosquittoCLI.publish(broker: broker, topic: "cli/x", message: "from mosquitto_pub", qos: 1)
            #expect(try await collect(1, from: subscription).map(\.text) == ["from mosquitto_pub"])
            await client.shutdown()
        }
    }
}
