import FleetHistoryCore
import GNSS
import Testing

/// The completeness check's join of what each span of days holds: runs of consecutive numbers
/// from several spans, in any order, make one run's summary and its holes.
@Suite("Held numbers")
struct HeldNumbersTests {
    @Test("runs of numbers from several spans: touching and overlapping ones join, the rest leave holes")
    func joinsAcrossSpans() {
        var held = HeldNumbers()
        // van-1's run 7 over three spans, read out of order: 1…10, 21…30 (a hole of 11…20), then
        // 11…11 and 12…15 (touching), and 14…20 overlapping them: no hole left but 31 on.
        held.add(vehicle: "van-1", run: 7, first: 21, last: 30, count: 10)
        held.add(vehicle: "van-1", run: 7, first: 1, last: 10, count: 10)
        held.add(vehicle: "van-1", run: 7, first: 11, last: 11, count: 1)
        held.add(vehicle: "van-1", run: 7, first: 12, last: 15, count: 4)
        held.add(vehicle: "van-1", run: 7, first: 14, last: 20, count: 5)
        held.add(vehicle: "van-1", run: 7, first: 40, last: 41, count: 2)
        // Another run and another vehicle are apart.
        held.add(vehicle: "van-1", run: 8, first: 1, last: 3, count: 3)
        held.add(vehicle: "a-van", run: 1, first: 5, last: 5, count: 1)
        let (runs, gaps) = held.report()
        #expect(
            runs.map { "\($0.vehicle)/\($0.run) \($0.first)…\($0.last) \($0.held)" } == [
                "a-van/1 5…5 1", "van-1/7 1…41 32", "van-1/8 1…3 3",
            ])
        #expect(gaps == [SequenceGap(vehicle: "van-1", run: 7, first: 31, last: 39)])
    }

    @Test("the bounds of the numbers: 0 and the highest bigint, and a negative one taken as 0, never trap")
    func extremes() {
        var held = HeldNumbers()
        held.add(vehicle: "v", run: 1, first: 0, last: 0, count: 1)
        held.add(vehicle: "v", run: 1, first: Int64.max, last: Int64.max, count: 1)
        held.add(vehicle: "v", run: 1, first: Int64.max - 1, last: Int64.max, count: 2)
        held.add(vehicle: "w", run: -3, first: -5, last: -1, count: 5)
        let (runs, gaps) = held.report()
        #expect(gaps == [SequenceGap(vehicle: "v", run: 1, first: 1, last: UInt64(Int64.max) - 2)])
        #expect(runs.first { $0.vehicle == "w" }.map { [$0.run, $0.first, $0.last] } == [0, 0, 0])
    }
}

/// The completeness check's spans: each statement reads at most so many days' partitions.
@Suite("Completeness spans")
struct CompletenessSpanTests {
    let lower = UTCTimestamp(millisecondsSince1970: -62_135_596_800_000)  // year 1, as `Date.distantPast`
    let upper = UTCTimestamp(millisecondsSince1970: 64_060_588_800_000)  // year 4000

    @Test("450 days of partitions in spans of 200: three spans, end to end, from the lower bound to the upper")
    func threeSpans() {
        let first = HistoryDay(UTCTimestamp(millisecondsSince1970: 1_795_867_200_000))
        let days = (0..<450).map { first.adding(Int64($0)) }
        let spans = CompletenessSpan.cut(days, into: 200, from: lower, to: upper)
        #expect(spans.map(\.lower) == [lower, first.adding(200).start, first.adding(400).start])
        #expect(spans.map(\.upper) == [first.adding(200).start, first.adding(400).start, upper])
        #expect(spans.map(\.index) == [0, 1, 2] && spans.allSatisfy { $0.count == 3 })
        // A window within: only the partitions it touches count.
        let window = CompletenessSpan.cut(days, into: 200, from: first.adding(10).start, to: first.adding(20).start)
        #expect(window.map { [$0.index, $0.count] } == [[0, 1]])
        #expect(window.map { [$0.lower, $0.upper] } == [[first.adding(10).start, first.adding(20).start]])
    }

    @Test("no partition: one span over the whole range")
    func noPartition() {
        let spans = CompletenessSpan.cut([], into: 200, from: lower, to: upper)
        #expect(spans.map { [$0.index, $0.count] } == [[0, 1]])
        #expect(spans.map { [$0.lower, $0.upper] } == [[lower, upper]])
    }
}
