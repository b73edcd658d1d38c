import Synchronization
import TelemetryHub
import Testing

/// The hub with real tasks: many subscribers, cancellation, slow subscribers, source lifecycle.
@Suite("Hub broadcasting", .timeLimit(.minutes(1)))
struct HubTests {
    /// A hub over a probed source that produces at once (no interval) but waits for its gate,
    /// closed until the test opens it: `count` values, or a failure after `failAfter`.
    static func gatedHub(
        count: Int? = nil, failAfter: Int? = nil
    ) -> (hub: Hub<Int>, counts: Watched<SourceCounts>, gate: Watched<Bool>) {
        let counts = Watched(SourceCounts())
        let gate = Watched(false)
        let hub = Hub(source: ProbedSource(counts: counts, interval: .zero, count: count, failAfter: failAfter, gate: gate))
        return (hub, counts, gate)
    }

    /// Every value of `subscription`, to its end.
    static func values(of subscription: HubSubscription<Int>) async throws -> [Int] {
        var seen: [Int] = []
        for try await value in subscription {
            seen.append(value)
        }
        return seen
    }

    @Test("100 concurrent unbounded subscribers each see every value, in order")
    func hundredSubscribersSeeTheSameValues() async throws {
        let hub = Hub<Int>()
        let subscriptions = (0..<100).map { _ in hub.subscribe(bufferingPolicy: .unbounded) }
        let consumers = subscriptions.map { subscription in
            Task { try await Self.values(of: subscription) }
        }
        let producer = Task {
            for value in 0..<2_000 {
                hub.yield(value)
            }
            hub.finish()
        }
        await producer.value
        for consumer in consumers {
            let seen = try await consumer.value
            #expect(seen == Array(0..<2_000))
        }
        #expect(hub.statistics.yielded == 2_000)
    }

    @Test("subscribers subscribing from their own tasks to a source all get its values")
    func subscribersFromManyTasks() async throws {
        let (hub, counts, gate) = Self.gatedHub(count: 500)
        let subscribed = Watched(0)
        let consumers = (0..<20).map { _ in
            Task {
                let subscription = hub.subscribe()
                subscribed.update { $0 += 1 }
                return try await Self.values(of: subscription)
            }
        }
        #expect(await subscribed.wait { $0 == 20 })
        gate.update { $0 = true }
        for consumer in consumers {
            #expect(try await consumer.value == Array(0..<500))
        }
        #expect(counts.value.starts == 1)
    }

    @Test("cancelling one subscriber's task ends only that subscriber")
    func cancellingOneLeavesOthers() async throws {
        let hub = Hub<Int>()
        let firstValueSeen = Watched(false)
        let victim = hub.subscribe()
        let victimTask = Task {
            var seen: [Int] = []
            for try await value in victim {
                seen.append(value)
                firstValueSeen.update { $0 = true }
            }
            return seen
        }
        let others = (0..<5).map { _ in hub.subscribe() }
        let otherTasks = others.map { subscription in
            Task { try await Self.values(of: subscription) }
        }
        hub.yield(0)
        #expect(await firstValueSeen.wait { $0 })
        victimTask.cancel()
        let victimSeen = try await victimTask.value
        #expect(victimSeen.first == 0)
        #expect(victim.statistics == nil, "a cancelled subscriber leaves the hub")
        #expect(hub.statistics.subscribers.map(\.id) == others.map(\.id))

        for value in 1..<100 {
            hub.yield(value)
        }
        hub.finish()
        for task in otherTasks {
            #expect(try await task.value == Array(0..<100))
        }
    }

    @Test("a newest(1) subscriber that never reads stalls neither the source nor the others")
    func slowSubscriberDoesNotStall() async throws {
        let (hub, counts, gate) = Self.gatedHub(count: 5_000)
        let sleeper = hub.subscribe(bufferingPolicy: .newest(1))
        let reader = hub.subscribe(bufferingPolicy: .unbounded)
        let readerTask = Task { try await Self.values(of: reader) }
        gate.update { $0 = true }
        // The source runs to its end and the reader gets everything while the sleeper never reads.
        #expect(try await readerTask.value == Array(0..<5_000))
        #expect(counts.value.produced == 5_000)
        let sleeping = try #require(sleeper.statistics)
        #expect(sleeping.dropped == 4_999)
        #expect(sleeping.buffered == 1)
        #expect(sleeping.delivered == 0)
        #expect(sleeping.isTerminated)
        // When it finally reads, it gets the newest value and then the end.
        #expect(try await sleeper.next() == 4_999)
        #expect(try await sleeper.next() == nil)
    }

    @Test("oldest(n) keeps the first n values and counts the rest as dropped")
    func oldestKeepsFirst() async throws {
        let hub = Hub<Int>()
        let subscription = hub.subscribe(bufferingPolicy: .oldest(3))
        for value in 1...10 {
            hub.yield(value)
        }
        #expect(subscription.statistics?.dropped == 7)
        #expect(subscription.statistics?.buffered == 3)
        hub.finish()
        let seen = try await Self.values(of: subscription)
        #expect(seen == [1, 2, 3])
    }

    @Test("the source stops after the last subscriber leaves and restarts for the next one")
    func sourceStopsAndRestarts() async throws {
        let counts = Watched(SourceCounts())
        let hub = Hub(source: ProbedSource(counts: counts))
        #expect(counts.value.starts == 0, "no subscriber, no source")

        // Two subscribers; one leaving by cancel() keeps the source running for the other.
        let first = hub.subscribe()
        var second: HubSubscription<Int>? = hub.subscribe(bufferingPolicy: .newest(1))
        #expect(try await first.next() != nil)
        #expect(counts.value.starts == 1)
        first.cancel()
        let before = counts.value.produced
        #expect(try await second?.next() != nil)
        #expect(try await second?.next() != nil)
        #expect(counts.value.produced > before, "the remaining subscriber still gets new values")
        #expect(counts.value.stops == 0)
        #expect(hub.statistics.isSourceRunning)

        // The last one leaving by being dropped stops the source.
        second = nil
        #expect(await counts.wait { $0.stops == 1 })
        #expect(!hub.statistics.isSourceRunning)

        // A new subscriber restarts it; leaving by task cancellation stops it again.
        let gotValue = Watched(false)
        let third = Task {
            for try await _ in hub.subscribe() {
                gotValue.update { $0 = true }
            }
        }
        #expect(await gotValue.wait { $0 })
        #expect(counts.value.starts == 2)
        third.cancel()
        try await third.value
        #expect(await counts.wait { $0.stops == 2 })

        // A subscriber that finishes iterating (breaks out of the loop) leaves too.
        for try await _ in hub.subscribe() {
            break
        }
        #expect(await counts.wait { $0.stops == 3 })
        #expect(counts.value.starts == 3)
        #expect(counts.value.maxRunning == 1, "two iterations of the source never overlap")
        #expect(hub.statistics.sourceStarts == 3)
    }

    @Test("a failing source: every subscriber gets the error once; the next subscriber restarts it")
    func failingSourceReachesEverySubscriber() async throws {
        let (hub, counts, gate) = Self.gatedHub(failAfter: 3)
        let subscriptions = (0..<10).map { index in
            hub.subscribe(bufferingPolicy: index.isMultiple(of: 2) ? .unbounded : .newest(8))
        }
        let outcomes = subscriptions.map { subscription in
            Task { () -> (values: [Int], errors: [SourceTestFailure], endedAfterError: Bool) in
                var values: [Int] = []
                var errors: [SourceTestFailure] = []
                do {
                    for try await value in subscription {
                        values.append(value)
                    }
                } catch let error as SourceTestFailure {
                    errors.append(error)
                } catch {
                    Issue.record("unexpected error \(error)")
                }
                let after = try? await subscription.next()
                return (values, errors, after == nil)
            }
        }
        gate.update { $0 = true }
        for outcome in outcomes {
            let (values, errors, endedAfterError) = await outcome.value
            #expect(values == [0, 1, 2])
            #expect(errors == [SourceTestFailure(code: 7)])
            #expect(endedAfterError, "the error is delivered once, then the sequence is over")
        }
        #expect(counts.value.starts == 1)
        #expect(!hub.statistics.isSourceRunning)

        // Later subscribers start the source again.
        let later = hub.subscribe()
        #expect(try await later.next() == 0)
        #expect(counts.value.starts == 2)
    }

    @Test("a hand-fed hub passes finish(throwing:) to its subscribers and stays usable")
    func manualFailure() async throws {
        let hub = Hub<String>()
        let subscription = hub.subscribe()
        hub.yield("a")
        hub.finish(throwing: SourceTestFailure(code: 3))
        #expect(try await subscription.next() == "a")
        await #expect(throws: SourceTestFailure(code: 3)) {
            try await subscription.next()
        }
        #expect(try await subscription.next() == nil)

        let later = hub.subscribe()
        hub.yield("b")
        #expect(try await later.next() == "b")
    }

    @Test("latest holds the last value, across finish")
    func latest() {
        let hub = Hub<Int>()
        #expect(hub.latest == nil)
        hub.yield(1)
        hub.yield(2)
        #expect(hub.latest == 2)
        hub.finish()
        #expect(hub.latest == 2)
    }

    @Test("counters are readable per subscription while subscribed and in the hub snapshot")
    func counters() async throws {
        let hub = Hub<Int>()
        let fast = hub.subscribe()
        let slow = hub.subscribe(bufferingPolicy: .newest(2))
        for value in 0..<5 {
            hub.yield(value)
        }
        #expect(try await fast.next() == 0)
        #expect(try await fast.next() == 1)
        #expect(fast.statistics?.delivered == 2)
        #expect(fast.statistics?.buffered == 3)
        #expect(slow.statistics?.dropped == 3)
        let snapshot = hub.statistics
        #expect(snapshot.subscribers.map(\.id) == [fast.id, slow.id])
        #expect(snapshot.subscribers.map(\.delivered) == [2, 0])
        #expect(snapshot.subscribers.map(\.dropped) == [0, 3])
        #expect(snapshot.activeSubscriberCount == 2)
        #expect(snapshot.yielded == 5)
        slow.cancel()
        #expect(slow.statistics == nil)
        #expect(hub.statistics.subscribers.count == 1)
    }
}
