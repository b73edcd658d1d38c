import EdgeCore
import FleetProtocol
import OutboxCore
import Testing

/// The batched uplink's hold, as plain values: how long a batch that is not full waits for
/// company, on the monotonic clock, whatever the wall clock says.
@Suite struct BacklogBatcherTests {
    private static let start = ContinuousClock.now
    private static let wall: Int64 = 1_715_673_600_000

    private func records(_ count: Int, storedAt: Int64 = wall) -> [OutboxRecord] {
        (1...count).map { OutboxRecord(seq: UInt64($0), kind: .fix, storedAtMilliseconds: storedAt, payload: Array("{}".utf8)) }
    }

    private func view(flushBelow: UInt64 = 0, failing: Bool = false, inStore: Int = 0) -> BacklogBatcher.HoldView {
        .init(flushBelow: flushBelow, flushGeneration: 7, storeFailing: failing, inStore: inStore)
    }

    private func hold(
        _ records: [OutboxRecord], window: Duration? = .seconds(60), outbox: BacklogBatcher.HoldView,
        firstSeen: inout (seq: UInt64, at: ContinuousClock.Instant)?, after elapsed: Duration = .zero,
        wall: Int64 = wall
    ) -> (left: Duration, flushGeneration: UInt64)? {
        BacklogBatcher.hold(
            records, limit: 10, maximumBytes: 1 << 20, window: window, outbox: outbox, firstSeen: &firstSeen,
            now: Self.start + elapsed, wallMilliseconds: wall)
    }

    @Test("a batch that is not full waits out the window from when the drain first saw its oldest record")
    func waitsOutTheWindow() {
        var seen: (seq: UInt64, at: ContinuousClock.Instant)?
        #expect(hold(records(3), outbox: view(), firstSeen: &seen)?.left == .seconds(60))
        #expect(seen?.seq == 1)
        #expect(hold(records(3), outbox: view(), firstSeen: &seen, after: .seconds(45))?.left == .seconds(15))
        #expect(hold(records(3), outbox: view(), firstSeen: &seen, after: .seconds(45))?.flushGeneration == 7)
        #expect(hold(records(3), outbox: view(), firstSeen: &seen, after: .seconds(60)) == nil, "old enough: it goes")
    }

    @Test("it goes at once when not batched, full (here or in the store), flushed, or the store cannot be written")
    func goesAtOnce() {
        var seen: (seq: UInt64, at: ContinuousClock.Instant)?
        #expect(hold(records(3), window: nil, outbox: view(), firstSeen: &seen) == nil)
        #expect(hold(records(10), outbox: view(), firstSeen: &seen) == nil)
        #expect(hold(records(3), outbox: view(inStore: 10), firstSeen: &seen) == nil)
        #expect(hold(records(3), outbox: view(flushBelow: 2), firstSeen: &seen) == nil)
        #expect(hold(records(3), outbox: view(failing: true), firstSeen: &seen) == nil)
        #expect(seen == nil, "nothing was held")
    }

    @Test("the wall clock only shortens the wait: a record stored before this run, or a clock set back")
    func wallClockOnlyShortens() {
        var seen: (seq: UInt64, at: ContinuousClock.Instant)?
        let stored50sAgo = records(3, storedAt: Self.wall - 50_000)
        #expect(hold(stored50sAgo, outbox: view(), firstSeen: &seen)?.left == .seconds(10))
        seen = nil
        // The clock was set back an hour after the records were stored: the window still ends.
        let storedInTheFuture = records(3, storedAt: Self.wall + 3_600_000)
        #expect(hold(storedInTheFuture, outbox: view(), firstSeen: &seen)?.left == .seconds(60))
        seen = nil
        let damaged = records(3, storedAt: .min)
        #expect(hold(damaged, outbox: view(), firstSeen: &seen) == nil, "a damaged store's time does not trap: the batch goes")
    }
}
