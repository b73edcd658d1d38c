import FleetCore
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

    @Test func lateMessagesFillHolesHoweverOld() {
        // A connection lost for a long time: the live message after it opens one big hole,
        // the backlog fills it oldest first, long after.
        var t = SequenceTracker()
        t.record(100)
        #expect(t.record(5_001) == .newest(skipped: 4_900))
        #expect(t.missing == 4_900)
        for seq in UInt64(101)...2_000 { #expect(t.record(seq) == .late(filledGap: true)) }
        #expect(t.missing == 3_000)
        #expect(t.record(1_500) == .duplicate)  // at-least-once redelivery of a batch
        for seq in UInt64(2_001)...5_000 { t.record(seq) }
        #expect(t.missing == 0)
        #expect(t.duplicates == 1)
        #expect(t.holeCount == 0)
    }

    @Test func historyFromBeforeTheFirstNumberIsLateButNeverMissing() {
        var t = SequenceTracker()
        t.record(10)
        for seq in UInt64(5)...9 { #expect(t.record(seq) == .late(filledGap: false)) }
        #expect(t.missing == 0)
        #expect(t.lowest == 5)
        #expect(t.record(7) == .duplicate)
        // Out of order below the first: 2 leaves 3 and 4 unknown (not missing), then they fill.
        #expect(t.record(2) == .late(filledGap: false))
        #expect(t.record(4) == .late(filledGap: false))
        #expect(t.record(3) == .late(filledGap: false))
        #expect(t.record(3) == .duplicate)
        #expect(t.missing == 0 && t.holeCount == 0 && t.duplicates == 2)
    }

    @Test func fillingTheMiddleOfAHoleSplitsIt() {
        var t = SequenceTracker()
        t.record(1)
        t.record(10)  // 2...9 missing
        #expect(t.record(5) == .late(filledGap: true))
        #expect(t.holeCount == 2)
        #expect(t.record(5) == .duplicate)
        for seq: UInt64 in [2, 9, 3, 8, 4, 7, 6] { #expect(t.record(seq) == .late(filledGap: true), "\(seq)") }
        #expect(t.missing == 0 && t.holeCount == 0)
    }

    @Test func beyondTheCapTheSmallestHolesAreForgottenButStayCounted() {
        var t = SequenceTracker()
        t.record(0)
        t.record(1_001)  // one big hole: 1...1000, an outage
        // Then many single lost messages (QoS 0 headings), each its own hole: 1002, 1004, …
        var seq: UInt64 = 1_001
        for _ in 0..<(SequenceTracker.maximumHoles * 4) {
            seq += 2
            t.record(seq)
        }
        let lost = UInt64(1_000 + SequenceTracker.maximumHoles * 4)
        #expect(t.missing == lost)
        #expect(t.holeCount == SequenceTracker.maximumHoles)
        #expect(t.forgotten == UInt64(SequenceTracker.maximumHoles * 3 + 1))
        // The big hole is still remembered: the backlog still closes it.
        for s in UInt64(1)...1_000 { #expect(t.record(s) == .late(filledGap: true)) }
        #expect(t.missing == lost - 1_000)
        // A forgotten number arriving after all counts as a duplicate; its gap stays counted.
        #expect(t.record(1_002) == .duplicate)
        #expect(t.missing == lost - 1_000)
        // The newest single holes are remembered.
        #expect(t.record(seq - 1) == .late(filledGap: true))
    }
}
