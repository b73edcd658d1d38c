import FleetcastTestSupport
import Testing

@testable import MQTT

/// Once connected, the network loop sleeps in `poll(2)` for up to
/// `MQTTConnectionLoop.turnTimeoutMilliseconds` and a request made from another thread wakes
/// it (`LoopWakeup.packetQueued()`): it does not read libmosquitto's own wake-up socket pair.
/// Were the wake-up lost, every request on an idle connection would wait out that timeout.
@Suite struct MQTTClientWakeupTests {
    @Test(arguments: [false, true])
    func requestsOnAnIdleConnectionGoOutAtOnceNotAtTheLoopsTimeout(tls: Bool) async throws {
        try await withBroker(.init(tls: tls)) { broker in
            let client = try makeClient(broker)
            try await client.connect()
            // libmosquitto's socket pair first filled (a byte a queued packet, never read once
            // connected): the wake-up must not depend on it.
            try await withThrowingDiscardingTaskGroup { group in
                for index in 0..<1_000 {
                    group.addImmediateTask { try await client.publish(topic: "fill/\(index % 10)", string: "\(index)", qos: .atLeastOnce) }
                }
            }
            let timeout = Duration.milliseconds(Int(MQTTConnectionLoop.turnTimeoutMilliseconds))
            let clock = ContinuousClock()
            // One request at a time, each awaited: the loop has gone back to sleep after the
            // previous acknowledgement when the next request is queued. Without the wake-up
            // each would wait most of the loop's timeout; half of it for all of them together
            // leaves a loaded machine 50 ms a request.
            let requests = 10
            var start = clock.now
            for index in 0..<requests {
                try await client.publish(topic: "wake/\(index)", string: "\(index)", qos: .atLeastOnce)
            }
            let publishing = start.duration(to: clock.now)
            #expect(publishing < timeout * requests / 2, "\(requests) publishes took \(publishing)")

            start = clock.now
            var opened: [MQTTSubscription] = []
            for index in 0..<requests {
                opened.append(try await client.subscribe(["wake/\(index)"], qos: .atLeastOnce))
            }
            let subscribing = start.duration(to: clock.now)
            #expect(subscribing < timeout * requests / 2, "\(requests) subscribes took \(subscribing)")
            #expect(opened.count == requests)

            // The DISCONNECT, too, is queued from this task.
            start = clock.now
            await client.shutdown()
            let stopping = start.duration(to: clock.now)
            #expect(stopping < timeout * 3 / 4, "the shutdown took \(stopping)")
        }
    }
}
