import FleetcastCore
import FleetcastTestSupport
import MQTT
import Testing

/// `publish` hands the message to libmosquitto before its first suspension point, so
/// publishes started as immediate tasks reach the broker in the order they were started even
/// though all of them are awaited at once (the agent's pipelined sender relies on it).
@Suite struct MQTTClientPublishOrderTests {
    /// Publishes awaiting their acknowledgement now, and the most at once.
    struct Outstanding: Sendable {
        var now = 0
        var most = 0
    }

    @Test func publishesStartedAsImmediateTasksArriveInStartOrder() async throws {
        try await withBroker { broker in
            let subscriber = try makeClient(broker)
            try await subscriber.connect()
            let subscription = try await subscriber.subscribe(["order/#"], qos: .atLeastOnce)
            let publisher = try makeClient(broker, configure: { $0.maxInflightMessages = 32 })
            try await publisher.connect()
            let count = 500
            let outstanding = Locked(Outstanding())

            try await withThrowingDiscardingTaskGroup { group in
                for index in 0..<count {
                    group.addImmediateTask {
                        outstanding.withLock {
                            $0.now += 1; $0.most = max($0.most, $0.now)
                        }
                        defer { outstanding.withLock { $0.now -= 1 } }
                        try await publisher.publish(topic: "order/van-1/fix", string: "\(index)", qos: .atLeastOnce, retain: true)
                    }
                }
            }

            let received = try await collect(count, from: subscription, timeout: .seconds(30))
            let texts = received.map(\.text)
            let firstOutOfOrder = texts.indices.first { texts[$0] != "\($0)" }
            #expect(texts.count == count)
            #expect(firstOutOfOrder == nil, "the subscriber sees them in start order; first difference at \(firstOutOfOrder ?? -1)")
            #expect(received.allSatisfy { $0.qos == .atLeastOnce })
            #expect(outstanding.withLock { $0.most } > 1, "publishes were awaited concurrently, not one by one")

            // The retained message is the last one started.
            let late = try makeClient(broker)
            try await late.connect()
            let retained = try await collect(1, from: try await late.subscribe(["order/van-1/fix"]))
            #expect(retained.map(\.text) == ["\(count - 1)"])
            #expect(retained.map(\.retain) == [true])

            await late.shutdown()
            await publisher.shutdown()
            await subscriber.shutdown()
        }
    }
}
