import FleetcastTestSupport
import TelemetryHub
import Testing

/// `next(timeout:)`: the one-shot value.
@Suite("Hub.next(timeout:)", .timeLimit(.minutes(1)))
struct HubNextTimeoutTests {
    @Test("returns the next value yielded after the call, not the latest one")
    func returnsNextValue() async throws {
        let hub = Hub<Int>()
        hub.yield(1)
        let request = Task { try await hub.next(timeout: .seconds(20)) }
        // Nothing to await here but the hub's own counters: wait until the request subscribed.
        try await waitUntil("the request to subscribe", timeout: .seconds(20), interval: .milliseconds(1)) {
            hub.statistics.activeSubscriberCount == 1
        }
        hub.yield(2)
        #expect(try await request.value == 2)
        #expect(hub.statistics.subscribers.isEmpty, "the one-shot subscription is gone")
    }

    @Test("starts a source for the request and stops it afterwards")
    func startsAndStopsSource() async throws {
        let counts = Watched(SourceCounts())
        let hub = Hub(source: ProbedSource(counts: counts))
        let value = try await hub.next(timeout: .seconds(20))
        #expect(value == 0)
        #expect(await counts.wait { $0.starts == 1 && $0.stops == 1 })
    }

    @Test("throws timedOut when no value arrives in time")
    func timesOut() async throws {
        let hub = Hub<Int>()
        let clock = ContinuousClock()
        let start = clock.now
        await #expect(throws: HubError.timedOut(after: .milliseconds(50))) {
            try await hub.next(timeout: .milliseconds(50))
        }
        #expect(clock.now - start >= .milliseconds(50))
        #expect(hub.statistics.subscribers.isEmpty)
        #expect(HubError.timedOut(after: .milliseconds(50)).description.contains("within"))
    }

    @Test("throws cancelled when the waiting task is cancelled, and stops the source")
    func throwsOnCancellation() async throws {
        let counts = Watched(SourceCounts())
        let hub = Hub(source: ProbedSource(counts: counts, silent: true))
        let request = Task { try await hub.next(timeout: .seconds(30)) }
        #expect(await counts.wait { $0.starts == 1 })
        request.cancel()
        await #expect(throws: HubError.cancelled) {
            try await request.value
        }
        #expect(await counts.wait { $0.stops == 1 })
        #expect(hub.statistics.subscribers.isEmpty)
    }

    @Test("throws cancelled at once in an already cancelled task")
    func alreadyCancelled() async throws {
        let hub = Hub<Int>()
        let request = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await hub.next(timeout: .seconds(30))
        }
        await #expect(throws: HubError.cancelled) {
            try await request.value
        }
    }

    @Test("passes the source's failure on, and says finished when the source ends first")
    func sourceEndsFirst() async throws {
        let failing = Hub(source: ProbedSource(counts: Watched(SourceCounts()), failAfter: 0))
        await #expect(throws: SourceTestFailure(code: 7)) {
            try await failing.next(timeout: .seconds(20))
        }
        let empty = Hub(source: ProbedSource(counts: Watched(SourceCounts()), count: 0))
        await #expect(throws: HubError.finished) {
            try await empty.next(timeout: .seconds(20))
        }
    }
}
