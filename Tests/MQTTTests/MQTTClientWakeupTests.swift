import FleetcastTestSupport
import MQTT
import Testing

/// Once connected, the network loop sleeps in `poll(2)` for up to
/// `MQTTConfiguration.turnTimeoutMilliseconds` and a request made from another thread wakes
/// it (`LoopWakeup.packetQueued()`): it does not read libmosquitto's own wake-up socket pair.
/// Were the wake-up lost, every request on an idle connection would wait out that timeout,
/// here made 10 s so that nothing else can end the wait in time.
@Suite struct MQTTClientWakeupTests {
    /// The turn reads past libmosquitto's early stop while the TLS session holds bytes; that
    /// needs OpenSSL's `SSL_pending`, found through libmosquitto (not linked by the package).
    @Test func theTLSSessionsBufferedBytesCanBeAskedFor() {
        #expect(TLSPending.isAvailable)
    }

    @Test(arguments: [false, true])
    func requestsOnAnIdleConnectionGoOutAtOnceNotAtTheLoopsTimeout(tls: Bool) async throws {
        try await withBroker(.init(tls: tls)) { broker in
            let client = try makeClient(broker, configure: { $0.turnTimeoutMilliseconds = 10_000 })
            try await client.connect()
            // libmosquitto's socket pair first filled (a byte a queued packet, never read once
            // connected): the wake-up must not depend on it.
            try await withThrowingDiscardingTaskGroup { group in
                for index in 0..<1_000 {
                    group.addImmediateTask { try await client.publish(topic: "fill/\(index % 10)", string: "\(index)", qos: .atLeastOnce) }
                }
            }
            let clock = ContinuousClock()
            // One request at a time, each awaited: the loop has gone back to sleep after the
            // previous acknowledgement when the next request is queued. Without the wake-up
            // each would wait most of the loop's 10 s; 5 s for ten of them leaves a loaded
            // machine half a second a request.
            let bound = Duration.seconds(5)
            let requests = 10
            var start = clock.now
            for index in 0..<requests {
                try await client.publish(topic: "wake/\(index)", string: "\(index)", qos: .atLeastOnce)
            }
            let publishing = start.duration(to: clock.now)
            #expect(publishing < bound, "\(requests) publishes took \(publishing)")

            start = clock.now
            var opened: [MQTTSubscription] = []
            for index in 0..<requests {
                opened.append(try await client.subscribe(["wake/\(index)"], qos: .atLeastOnce))
            }
            let subscribing = start.duration(to: clock.now)
            #expect(subscribing < bound, "\(requests) subscribes took \(subscribing)")
            #expect(opened.count == requests)

            // The DISCONNECT, too, is queued from this task.
            start = clock.now
            await client.shutdown()
            let stopping = start.duration(to: clock.now)
            #expect(stopping < bound, "the shutdown took \(stopping)")
        }
    }
}
