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
