import FleetcastTestSupport
import Testing

@testable import MQTT

/// Once connected, the network loop sleeps in `poll(2)` for up to
/// `MQTTConnectionLoop.selectTimeoutMilliseconds` and a request made from another thread wakes
/// it (`LoopWakeup.packetQueued()`): it does not read libmosquitto's own wake-up socket pair.
/// Were the wake-up lost, every request on an idle connection would wait out that timeout.
@Suite struct MQTTClientWakeupTests {
    @Test func requestsOnAnIdleConnectionGoOutAtOnceNotAtTheLoopsTimeout() async throws {
        try await withBroker { broker in
            let client = try makeClient(broker)
            try await client.connect()
            let clock = ContinuousClock()
            let start = clock.now
            // One request at a time, each awaited: the loop has gone back to sleep after the
            // previous acknowledgement when the next request is queued.
            let publishes = 10
            for index in 0..<publishes {
                try await client.publish(topic: "wake/\(index)", string: "\(index)", qos: .atLeastOnce)
            }
            let subscriptions = 3
            var opened: [MQTTSubscription] = []
            for index in 0..<subscriptions {
                opened.append(try await client.subscribe(["wake/\(index)"], qos: .atLeastOnce))
            }
            let spent = start.duration(to: clock.now)
            // Without the wake-up each request would wait most of the loop's timeout; half of it
            // for every request together leaves a loaded machine 50 ms a request.
            let timeout = Duration.milliseconds(Int(MQTTConnectionLoop.selectTimeoutMilliseconds))
            #expect(spent < timeout * (publishes + subscriptions) / 2, "\(publishes + subscriptions) requests took \(spent)")
            #expect(opened.count == subscriptions)
            await client.shutdown()
        }
    }
}
