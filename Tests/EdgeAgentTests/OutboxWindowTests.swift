import EdgeAgent
import Testing

/// The outbox with several messages leased (in flight) at once, and waiting for room.
@Suite("Outbox window")
struct OutboxWindowTests {
    private func fix(_ seq: UInt64) -> OutboundMessage {
        OutboundMessage(kind: .fix, topic: "fleet/van-7/fix", payload: Array("{\"seq\":\(seq)}".utf8), qos: 1, retain: true, seq: seq)
    }

    private func status(_ text: String) -> OutboundMessage {
        OutboundMessage(kind: .status, topic: "fleet/van-7/status", payload: Array(text.utf8), qos: 1, retain: true)
    }

    @Test("entries are leased in queue order, at most `window` at once; an acknowledgement frees a slot")
    func windowRespected() async throws {
        let outbox = Outbox(capacity: 10, window: 3)
        for seq in 1...5 as ClosedRange<UInt64> { outbox.enqueue(fix(seq)) }
        var leased: [OutboxEntry] = []
        for _ in 0..<3 { leased.append(try #require(try await outbox.next())) }
        #expect(leased.map(\.message.seq) == [1, 2, 3])
        #expect(outbox.leasedCount == 3)

        // With the window full, next() waits — so a cancelled call throws instead of leasing.
        let overstep = Task { try await outbox.next() }
        overstep.cancel()
        await #expect(throws: CancellationError.self, "the window is full: a fourth lease must wait") {
            try await overstep.value
        }
        #expect(outbox.leasedCount == 3)
        let fourth = Task { try await outbox.next() }
        outbox.acknowledge(leased[1].id)  // acknowledgements may come out of order
        let next = try #require(try await withTimeout { try await fourth.value })
        #expect(next.message.seq == 4)
        #expect(outbox.queuedMessages.compactMap(\.seq) == [1, 3, 4, 5])
        #expect(outbox.leasedCount == 3)
    }

    @Test("a released entry is handed out again before everything queued after it")
    func releaseResendsInOrder() async throws {
        let outbox = Outbox(capacity: 10, window: 4)
        for seq in 1...6 as ClosedRange<UInt64> { outbox.enqueue(fix(seq)) }
        var leased: [OutboxEntry] = []
        for _ in 0..<4 { leased.append(try #require(try await outbox.next())) }
        outbox.release(leased[1].id)  // seq 2 failed
        outbox.release(leased[3].id)  // seq 4 failed
        outbox.acknowledge(leased[0].id)
        var again: [UInt64?] = []
        for _ in 0..<3 { again.append(try #require(try await outbox.next()).message.seq) }
        #expect(again == [2, 4, 5], "retries first, in queue order, then new messages")
        #expect(outbox.leasedCount == 4)  // 3 (still leased), 2, 4, 5
    }

    @Test("a full outbox never drops a leased entry; it drops the oldest unleased one")
    func dropsNeverLeased() async throws {
        let outbox = Outbox(capacity: 4, window: 3)
        for seq in 1...4 as ClosedRange<UInt64> { outbox.enqueue(fix(seq)) }
        for _ in 0..<3 { _ = try #require(try await outbox.next()) }
        #expect(outbox.enqueue(fix(5)) == .queuedDroppingOldest(droppedKind: .fix, droppedSeq: 4))
        #expect(outbox.queuedMessages.compactMap(\.seq) == [1, 2, 3, 5])

        let all = Outbox(capacity: 3, window: 3)
        for seq in 1...3 as ClosedRange<UInt64> { all.enqueue(fix(seq)) }
        for _ in 0..<3 { _ = try #require(try await all.next()) }
        #expect(all.enqueue(fix(4)) == .droppedIncoming, "all leased: the incoming fix is the one dropped")
        #expect(all.queuedMessages.compactMap(\.seq) == [1, 2, 3])
        #expect(all.droppedFixes == 1)
    }

    @Test("a status goes right after the leased entries and supersedes only an unleased status")
    func statusAfterLeased() async throws {
        let outbox = Outbox(capacity: 10, window: 2)
        for seq in 1...3 as ClosedRange<UInt64> { outbox.enqueue(fix(seq)) }
        _ = try await outbox.next()
        _ = try await outbox.next()
        #expect(outbox.enqueue(status("A")) == .queued)
        #expect(outbox.enqueue(status("B")) == .superseded)
        #expect(outbox.queuedMessages.map(\.kind) == [.fix, .fix, .status, .fix])
        #expect(outbox.queuedMessages[2].payload == Array("B".utf8))
    }

    @Test("a message retried after a newer one on its topic was acknowledged goes out unretained; an obsolete status is dropped")
    func retainedStaysNewest() async throws {
        let outbox = Outbox(capacity: 10, window: 4)
        outbox.enqueue(status("online"))
        outbox.enqueue(fix(1))
        outbox.enqueue(fix(2))
        let statusEntry = try #require(try await outbox.next())
        let first = try #require(try await outbox.next())
        let second = try #require(try await outbox.next())
        outbox.enqueue(status("no-fix"))
        let newerStatus = try #require(try await outbox.next())
        outbox.acknowledge(second.id)
        outbox.acknowledge(newerStatus.id)
        outbox.release(first.id)
        outbox.release(statusEntry.id)
        #expect(outbox.queuedMessages.map(\.kind) == [.fix], "the older status is obsolete: the newer one was acknowledged")
        let retried = try #require(try await outbox.next())
        #expect(retried.message.seq == 1)
        #expect(retried.message.retain == false, "fix 2 is the retained one on the broker; fix 1 must not replace it")
        #expect(retried.message.payload == first.message.payload)
    }

    @Test("waitForRoom returns once a fix or heading fits without a drop, or at close; it is cancellable")
    func waitForRoom() async throws {
        let outbox = Outbox(capacity: 2, window: 2)
        outbox.enqueue(fix(1))
        outbox.enqueue(status("online"))  // statuses take no room
        try await withTimeout { try await outbox.waitForRoom() }

        outbox.enqueue(fix(2))
        let waiting = Task {
            try await outbox.waitForRoom()
            return outbox.count
        }
        let entry = try #require(try await outbox.next())  // the status (it jumped the queue)
        outbox.acknowledge(entry.id)
        let fixEntry = try #require(try await outbox.next())
        outbox.acknowledge(fixEntry.id)
        #expect(try await withTimeout { try await waiting.value } <= 1)

        let full = Outbox(capacity: 1)
        full.enqueue(fix(1))
        let cancelled = Task { try await full.waitForRoom() }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        let closing = Task { try await full.waitForRoom() }
        full.close()
        try await withTimeout { try await closing.value }
        #expect(full.droppedFixes == 0)
    }
}
