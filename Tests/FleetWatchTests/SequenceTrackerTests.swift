import FleetWatch
import Testing

@Suite struct SequenceTrackerTests {
    func track(_ seqs: [UInt64]) -> SequenceTracker {
        var t = SequenceTracker()
        for s in seqs { t.record(s) }
        return t
    }

    @Test func jumpsCountTheSkippedMessages() {
        let t = track([10, 11, 14, 15, 20])
        #expect(t.missing == 2 + 4)
        #expect(t.highest == 20)
        #expect(t.duplicates == 0)
    }

    @Test func duplicatesAndReorderingAreNotGaps() {
        // At-least-once: 3 repeated, 5 and 6 swapped, 4 arrives after 7 (fills its hole).
        let t = track([1, 2, 3, 3, 6, 5, 7, 4, 7, 2])
        #expect(t.missing == 0)
        #expect(t.duplicates == 3)
        #expect(t.highest == 7)
    }

    @Test func outcomesSayWhatEachNumberWas() {
        var t = SequenceTracker()
        #expect(t.record(100) == .newest(skipped: 0))
        #expect(t.record(103) == .newest(skipped: 2))
        #expect(t.record(101) == .late(filledGap: true))
        #expect(t.record(101) == .duplicate)
        #expect(t.record(99) == .late(filledGap: false))  // before the first seen: never counted
        #expect(t.missing == 1)
        #expect(t.record(102) == .late(filledGap: true))
        #expect(t.missing == 0)
    }

    @Test func holesOlderThanTheWindowStayCounted() {
        var t = SequenceTracker()
        t.record(1)
        t.record(3)
        t.record(3 + SequenceTracker.window + 10)
        #expect(t.missing == 1 + SequenceTracker.window + 9)
        #expect(t.record(2) == .duplicate)  // too late to be matched: treated as an old redelivery
        #expect(t.missing == 1 + SequenceTracker.window + 9)
    }
}
