import FleetProtocol
import GNSS

/// A run of consecutive message numbers of one vehicle that the database does not hold.
public struct SequenceGap: Sendable, Equatable {
    /// The vehicle.
    public var vehicle: String
    /// The numbering run (``MessageNumber/run``).
    public var run: UInt64
    /// The first missing `seq`.
    public var first: UInt64
    /// The last missing `seq` (inclusive).
    public var last: UInt64

    /// A gap.
    public init(vehicle: String, run: UInt64, first: UInt64, last: UInt64) {
        self.vehicle = vehicle
        self.run = run
        self.first = first
        self.last = last
    }

    /// How many messages the gap is: `last - first + 1`, 0 when `last < first`. Exact, in 128
    /// bits: a gap from 0 to `UInt64.max` is 2^64 numbers, one more than a `UInt64` holds.
    public var count: UInt128 { last < first ? 0 : UInt128(last - first) + 1 }
}

/// What the database holds of one vehicle's numbering run, within the range checked.
public struct SequenceRunSummary: Sendable, Equatable {
    /// The vehicle.
    public var vehicle: String
    /// The numbering run.
    public var run: UInt64
    /// The lowest `seq` held (fixes and headings together).
    public var first: UInt64
    /// The highest `seq` held (fixes and headings together).
    public var last: UInt64
    /// Messages held between them, both included.
    public var held: UInt64

    /// A summary.
    public init(vehicle: String, run: UInt64, first: UInt64, last: UInt64, held: UInt64) {
        self.vehicle = vehicle
        self.run = run
        self.first = first
        self.last = last
        self.held = held
    }

    /// Messages missing between ``first`` and ``last``, exact in 128 bits (see
    /// ``SequenceGap/count``); 0 when ``held`` covers the range.
    public var missing: UInt128 {
        let span = last < first ? 0 : UInt128(last - first) + 1
        return span - min(UInt128(held), span)
    }
}

/// The completeness check of `TrackStore.completeness(vehicle:since:until:)`.
///
/// Its totals are counts of message numbers, in 128 bits and exact: a vehicle whose `seq`
/// jumped from 1 to 2^63 − 1 (a corrupt or hostile sender) in three runs lacks more numbers
/// than a `UInt64` holds, and the report must still say so rather than trap.
public struct CompletenessReport: Sendable, Equatable {
    /// Each vehicle's runs, by vehicle then run.
    public var runs: [SequenceRunSummary]
    /// The holes, by vehicle, run and `seq`.
    public var gaps: [SequenceGap]
    /// When retention removed the history before it: the first instant kept, from which each
    /// run was checked (what was removed is not missing).
    public var retainedFrom: UTCTimestamp?
    /// Messages the recorder set aside in `fleetcast_quarantine` (of the vehicle checked, or
    /// of all): received and not stored, kept to be read and replayed.
    public var setAside: Int

    /// A report of `runs` and their `gaps`.
    public init(runs: [SequenceRunSummary], gaps: [SequenceGap], retainedFrom: UTCTimestamp? = nil, setAside: Int = 0) {
        self.runs = runs
        self.gaps = gaps
        self.retainedFrom = retainedFrom
        self.setAside = setAside
    }

    /// Whether nothing is missing.
    public var isComplete: Bool { gaps.isEmpty }
    /// Messages missing in all. Each gap is at most 2^64, so the sum cannot overflow 128 bits
    /// before there are 2^64 gaps.
    public var missing: UInt128 { gaps.reduce(0) { $0 + $1.count } }
    /// Messages held in all, fixes and headings, over every run checked.
    public var held: UInt128 { runs.reduce(0) { $0 + UInt128($1.held) } }
}

/// The numbers held, as the spans of a completeness check read them (FleetHistory's
/// `TrackReader.completeness(vehicle:since:until:)`): per vehicle and run, runs of consecutive
/// numbers, joined where they touch or overlap, and the rows counted. Memory: one entry per
/// run of numbers read.
package struct HeldNumbers {
    private struct Key: Hashable, Comparable {
        var vehicle: String
        var run: UInt64
        static func < (a: Key, b: Key) -> Bool { (a.vehicle, a.run) < (b.vehicle, b.run) }
    }
    private var islands: [Key: [(first: UInt64, last: UInt64)]] = [:]
    private var rows: [Key: UInt64] = [:]

    /// Nothing held yet.
    package init() {}

    /// `count` rows numbered `first…last` (every number between held) of `vehicle`'s `run`, as
    /// PostgreSQL's `bigint` columns give them (a negative value, which no recorder writes, is
    /// taken as 0).
    package mutating func add(vehicle: String, run: Int64, first: Int64, last: Int64, count: Int64) {
        let key = Key(vehicle: vehicle, run: UInt64(clamping: run))
        let (low, high) = (UInt64(clamping: first), UInt64(clamping: last))
        islands[key, default: []].append((min(low, high), max(low, high)))
        rows[key, default: 0] &+= UInt64(clamping: count)
    }

    /// Each run's summary, and the holes between what is held, by vehicle, run and `seq`.
    package func report() -> (runs: [SequenceRunSummary], gaps: [SequenceGap]) {
        var runs: [SequenceRunSummary] = []
        var gaps: [SequenceGap] = []
        for key in islands.keys.sorted() {
            let sorted = islands[key, default: []].sorted { $0.first < $1.first }
            guard var current = sorted.first else { continue }
            let lowest = current.first
            for next in sorted.dropFirst() {
                // Overlapping or touching (next.first is current.last + 1): one run of numbers.
                // Otherwise next.first ≥ current.last + 2, so neither bound below wraps.
                if next.first <= current.last || next.first - current.last == 1 {
                    current.last = max(current.last, next.last)
                } else {
                    gaps.append(SequenceGap(vehicle: key.vehicle, run: key.run, first: current.last + 1, last: next.first - 1))
                    current = next
                }
            }
            runs.append(
                SequenceRunSummary(vehicle: key.vehicle, run: key.run, first: lowest, last: current.last, held: rows[key, default: 0]))
        }
        return (runs, gaps)
    }
}

/// One statement's part of a completeness check: the rows timed in `[lower, upper)`, the
/// ``index``-th of ``count`` spans. One statement over every partition holds a lock per
/// partition and index until its transaction ends, more than PostgreSQL's lock table takes at
/// its defaults; a span reads at most a bounded number of days' partitions.
package struct CompletenessSpan: Sendable, Equatable {
    package var index: Int
    package var count: Int
    package var lower: UTCTimestamp
    package var upper: UTCTimestamp

    /// `[lower, upper)` cut into spans of at most `days` of the `partitions` (in order) each, the
    /// first from `lower` and the last to `upper` (whatever lies outside every partition is in
    /// one of the two); one span when no partition lies within.
    package static func cut(
        _ partitions: [HistoryDay], into days: Int, from lower: UTCTimestamp, to upper: UTCTimestamp
    ) -> [CompletenessSpan] {
        let inside = partitions.filter { $0.adding(1).start > lower && $0.start < upper }
        var starts = stride(from: 0, to: inside.count, by: max(1, days)).map { inside[$0].start }
        if starts.isEmpty { starts = [lower] } else { starts[0] = lower }
        return starts.indices.map { index in
            CompletenessSpan(
                index: index, count: starts.count, lower: starts[index], upper: index + 1 < starts.count ? starts[index + 1] : upper)
        }
    }
}
