import FleetCore
import Testing

/// The per-browser coalescing queues, driven with plain strings as vehicles and integers as
/// waiters: no tasks, no clock.
struct BrowserQueuesTests {
    typealias Queues = BrowserQueues<String, Int>

    /// Adds a browser, which must be accepted.
    func add(_ queues: inout Queues) throws -> Int {
        let id = queues.add()
        return try #require(id)
    }

    /// Queues whose browsers may hold 100 changes and miss `stalledFlushes` flushes in a row.
    static func stallLimited(_ stalledFlushes: Int) -> Queues {
        Queues(limits: BrowserQueueLimits(maximumPending: 100, maximumStalledFlushes: stalledFlushes))
    }

    /// A change of van-7 and a flush the browser misses (it is not waiting): nobody is dropped.
    func missFlush(_ queues: inout Queues, _ comment: Comment, sourceLocation: SourceLocation = #_sourceLocation) {
        queues.enqueue("van-7")
        #expect(queues.flush().drops.isEmpty, comment, sourceLocation: sourceLocation)
    }

    /// The batches a flush hands out, by waiter.
    func batches(_ actions: Queues.FlushActions) -> [Int: [String]] {
        Dictionary(uniqueKeysWithValues: actions.deliveries.map { ($0.waiter, $0.batch) })
    }

    @Test func aVehicleChangingManyTimesBetweenFlushesIsSentOnceInFirstChangeOrder() throws {
        var queues = Queues()
        let id = try add(&queues)
        for key in ["van-7", "bus-1", "van-7", "van-7", "car-3", "bus-1"] { queues.enqueue(key) }
        #expect(queues.pending(id) == ["van-7", "bus-1", "car-3"])
        guard case .wait = queues.next(id, waiter: 1) else { Issue.record("a ready browser waits for the flush"); return }
        let actions = queues.flush()
        #expect(batches(actions) == [1: ["van-7", "bus-1", "car-3"]])
        #expect(actions.drops.isEmpty)
        #expect(queues.pending(id).isEmpty)
    }

    @Test func aReadyBrowserWaitsForTheFlushAndAnEmptyQueueDeliversNothing() throws {
        var queues = Queues()
        let id = try add(&queues)
        guard case .wait = queues.next(id, waiter: 1) else { Issue.record("expected to wait"); return }
        #expect(queues.flush().deliveries.isEmpty)
        queues.enqueue("van-7")
        // Still waiting: updates go out at flushes only, at most one batch per flush interval.
        #expect(batches(queues.flush()) == [1: ["van-7"]])
    }

    @Test func eachBrowserHasItsOwnQueue() throws {
        var queues = Queues()
        let a = try add(&queues)
        queues.enqueue("van-7")
        let b = try add(&queues)
        queues.enqueue("bus-1")
        #expect(queues.pending(a) == ["van-7", "bus-1"])
        #expect(queues.pending(b) == ["bus-1"])  // it got van-7 in its snapshot
        _ = queues.next(a, waiter: 1)
        _ = queues.next(b, waiter: 2)
        #expect(batches(queues.flush()) == [1: ["van-7", "bus-1"], 2: ["bus-1"]])
    }

    @Test func aBrowserBusyAtAFlushIsDueAndGetsItsQueueAsSoonAsItAsks() throws {
        var queues = Queues()
        let id = try add(&queues)
        queues.enqueue("van-7")
        // No waiter: the writer is still busy with its previous batch.
        let actions = queues.flush()
        #expect(actions.deliveries.isEmpty && actions.drops.isEmpty)
        queues.enqueue("bus-1")
        guard case .deliver(let batch) = queues.next(id, waiter: 1) else { Issue.record("a due browser is served at once"); return }
        #expect(batch == ["van-7", "bus-1"])
        // Not due any more: the next batch waits for a flush.
        queues.enqueue("car-3")
        guard case .wait = queues.next(id, waiter: 2) else { Issue.record("expected to wait"); return }
    }

    @Test func browsersBeyondTheLimitAreRefusedUntilOneLeaves() {
        var queues = Queues(limits: BrowserQueueLimits(maximumBrowsers: 2))
        let first = queues.add()
        #expect(first != nil && queues.add() != nil)
        #expect(queues.add() == nil, "a third browser is refused")
        _ = queues.remove(first!)
        #expect(queues.add() != nil, "room again once one has left")
    }

    @Test func aBrowserOverItsBoundAtAFlushItCannotTakeIsDropped() throws {
        var queues = Queues(limits: BrowserQueueLimits(maximumPending: 3, maximumStalledFlushes: 100))
        let slow = try add(&queues)
        let fast = try add(&queues)
        _ = queues.next(fast, waiter: 2)
        for key in ["a", "b", "c", "d"] { queues.enqueue(key) }
        let actions = queues.flush()
        #expect(actions.drops == [Queues.Drop(id: slow, reason: .overBound, pending: 4)])
        // The ready browser took the same four: over the bound is fine when it can be sent.
        #expect(batches(actions) == [2: ["a", "b", "c", "d"]])
        #expect(queues.count == 1 && queues.droppedCount == 1)
        guard case .end = queues.next(slow, waiter: 1) else { Issue.record("a dropped browser's stream ends"); return }
        queues.enqueue("e")
        #expect(queues.pending(slow).isEmpty)
    }

    @Test func aBrowserThatMissesTooManyFlushesInARowIsDropped() throws {
        var queues = Self.stallLimited(3)
        let id = try add(&queues)
        for flush in 1...3 { missFlush(&queues, "flush \(flush)") }
        queues.enqueue("van-7")
        #expect(queues.flush().drops == [Queues.Drop(id: id, reason: .stalled, pending: 1)])
        #expect(queues.count == 0)
    }

    @Test func takingABatchResetsTheStallCount() throws {
        var queues = Self.stallLimited(2)
        let id = try add(&queues)
        for round in 1...5 {
            missFlush(&queues, "round \(round)")
            missFlush(&queues, "round \(round)")
            // The writer catches up: it takes the due batch at once.
            guard case .deliver(["van-7"]) = queues.next(id, waiter: round) else { Issue.record("round \(round)"); return }
        }
        // Flushes with nothing queued never count as missed.
        for _ in 1...10 { #expect(queues.flush().drops.isEmpty) }
        #expect(queues.count == 1)
    }

    @Test func removingABrowserReturnsItsWaiter() throws {
        var queues = Queues()
        let id = try add(&queues)
        _ = queues.next(id, waiter: 7)
        #expect(queues.remove(id) == 7)
        #expect(queues.remove(id) == nil)
        guard case .end = queues.next(id, waiter: 8) else { Issue.record("a removed browser's stream ends"); return }
    }

    @Test func finishEndsEveryWaiterAndRefusesNewBrowsers() throws {
        var queues = Queues()
        let a = try add(&queues)
        _ = try add(&queues)
        _ = queues.next(a, waiter: 1)
        #expect(queues.finish() == [1])
        let refused = queues.add()
        #expect(refused == nil)
        #expect(queues.count == 0)
    }
}
