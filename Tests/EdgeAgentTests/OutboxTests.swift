import EdgeAgent
import Testing

@Suite("Outbox")
struct OutboxTests {
    private func fix(_ seq: UInt64) -> OutboundMessage {
        OutboundMessage(kind: .fix, topic: "fleet/van-7/fix", payload: Array("{\"seq\":\(seq)}".utf8), qos: 1, retain: true, seq: seq)
    }

    private func heading(_ seq: UInt64) -> OutboundMessage {
        OutboundMessage(kind: .heading, topic: "fleet/van-7/heading", payload: Array("{\"seq\":\(seq)}".utf8), qos: 0, retain: true, seq: seq)
    }

    private func status(_ text: String) -> OutboundMessage {
        OutboundMessage(kind: .status, topic: "fleet/van-7/status", payload: Array(text.utf8), qos: 1, retain: true)
    }

    @Test("when full, the oldest fixes are dropped and counted")
    func dropOldestFixes() {
        let outbox = Outbox(capacity: 3)
        var results: [Outbox.EnqueueResult] = []
        for seq in 1...5 as ClosedRange<UInt64> { results.append(outbox.enqueue(fix(seq))) }
        #expect(outbox.queuedMessages.map(\.seq) == [3, 4, 5])
        #expect(outbox.droppedFixes == 2)
        #expect(results.suffix(2) == [
            .queuedDroppingOldest(droppedKind: .fix, droppedSeq: 1),
            .queuedDroppingOldest(droppedKind: .fix, droppedSeq: 2),
        ])
    }

    @Test("headings are dropped before fixes")
    func headingsFirst() {
        let outbox = Outbox(capacity: 3)
        outbox.enqueue(fix(1))
        outbox.enqueue(heading(2))
        outbox.enqueue(fix(3))
        outbox.enqueue(fix(4))
        #expect(outbox.queuedMessages.map(\.seq) == [1, 3, 4])
        #expect(outbox.droppedHeadings == 1)
        #expect(outbox.droppedFixes == 0)
        // A heading arriving when only fixes are queued is itself dropped, not a fix.
        #expect(outbox.enqueue(heading(5)) == .droppedIncoming)
        #expect(outbox.queuedMessages.map(\.seq) == [1, 3, 4])
        #expect(outbox.droppedHeadings == 2)
    }

    @Test("a status is never dropped, goes first, and a newer one supersedes a queued one")
    func statusRules() {
        let outbox = Outbox(capacity: 2)
        outbox.enqueue(fix(1))
        outbox.enqueue(fix(2))
        #expect(outbox.enqueue(status("A")) == .queued)
        #expect(outbox.enqueue(status("B")) == .superseded)
        outbox.enqueue(fix(3))
        let kinds = outbox.queuedMessages.map(\.kind)
        #expect(kinds == [.status, .fix, .fix])
        #expect(outbox.queuedMessages.first?.payload == Array("B".utf8))
        #expect(outbox.queuedMessages.compactMap(\.seq) == [2, 3])
        #expect(outbox.droppedFixes == 1)
    }

    @Test("a failed send is retried in order; only an acknowledged message is removed")
    func retryInOrder() async throws {
        let outbox = Outbox(capacity: 10)
        for seq in 1...3 as ClosedRange<UInt64> { outbox.enqueue(fix(seq)) }
        let first = try #require(try await outbox.next())
        #expect(first.message.seq == 1)
        outbox.release(first.id)  // send failed
        let again = try #require(try await outbox.next())
        #expect(again.id == first.id)
        #expect(outbox.count == 3)
        outbox.acknowledge(again.id)
        let second = try #require(try await outbox.next())
        #expect(second.message.seq == 2)
        #expect(outbox.count == 2)
    }

    @Test("the message being sent is never dropped")
    func inFlightKept() async throws {
        let outbox = Outbox(capacity: 2)
        outbox.enqueue(fix(1))
        outbox.enqueue(fix(2))
        let inFlight = try #require(try await outbox.next())
        outbox.enqueue(fix(3))
        #expect(outbox.queuedMessages.map(\.seq) == [1, 3])
        outbox.acknowledge(inFlight.id)
        #expect(outbox.queuedMessages.map(\.seq) == [3])
        #expect(outbox.droppedFixes == 1)
    }

    @Test("next() waits for a message and can be cancelled")
    func waitingConsumer() async throws {
        let outbox = Outbox(capacity: 4)
        async let received = outbox.next()
        outbox.enqueue(fix(7))
        #expect(try await received?.message.seq == 7)

        let empty = Outbox(capacity: 4)
        let waiter = Task { try await empty.next() }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
    }

    @Test("after close, the queue drains and then next() returns nil")
    func closeDrains() async throws {
        let outbox = Outbox(capacity: 4)
        outbox.enqueue(fix(1))
        outbox.close()
        #expect(outbox.enqueue(fix(2)) == .refusedClosed)
        let entry = try #require(try await outbox.next())
        outbox.acknowledge(entry.id)
        #expect(try await outbox.next() == nil)
        await outbox.waitUntilEmpty()
    }

    @Test("concurrent producers and a consumer lose nothing unaccounted (run under TSan)")
    func concurrent() async throws {
        let outbox = Outbox(capacity: 64)
        let producers = 4, perProducer = 2_000
        let acknowledged = try await withTimeout(60) {
            try await withThrowingTaskGroup(of: [UInt64].self) { group in
                group.addTask {
                    var seen: [UInt64] = []
                    var retried: Set<UInt64> = []
                    while let entry = try await outbox.next() {
                        if entry.id % 7 == 0, retried.insert(entry.id).inserted {
                            outbox.release(entry.id)  // a failed send: the same head comes again
                            await Task.yield()
                            continue
                        }
                        seen.append(entry.message.seq ?? 0)
                        outbox.acknowledge(entry.id)
                    }
                    return seen
                }
                try await withThrowingTaskGroup(of: Void.self) { producersGroup in
                    for producer in 0..<producers {
                        producersGroup.addTask {
                            for index in 0..<perProducer {
                                outbox.enqueue(self.fix(UInt64(producer * 1_000_000 + index)))
                                if index % 100 == 0 { await Task.yield() }
                            }
                        }
                    }
                    try await producersGroup.waitForAll()
                }
                outbox.close()
                var all: [UInt64] = []
                for try await part in group { all += part }
                return all
            }
        }
        #expect(UInt64(acknowledged.count) + outbox.droppedFixes == UInt64(producers * perProducer))
        #expect(Set(acknowledged).count == acknowledged.count, "no message delivered twice")
        for producer in 0..<producers {
            let own = acknowledged.filter { $0 / 1_000_000 == UInt64(producer) }
            #expect(own == own.sorted(), "each producer's messages arrive in order")
        }
    }
}
