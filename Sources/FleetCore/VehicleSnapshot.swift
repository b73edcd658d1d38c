import FleetProtocol
import GNSS

/// What fleet-watch knows about one vehicle: its newest fix and heading, its status, when it
/// was last heard from, and the health of its message stream.
public struct VehicleSnapshot: Sendable, Equatable {
    /// The vehicle.
    public let vehicle: VehicleID
    /// The newest live fix received, by its number (numbering run, then `seq`; by fix time
    /// alone when the publisher sends no `seq`); backlog fixes never.
    public internal(set) var fix: Fix?
    /// The newest live heading received (as ``fix``).
    public internal(set) var heading: Heading?
    /// The last status received (`nil` until one arrives).
    public internal(set) var status: VehicleStatus?
    /// When (local wall clock, UTC) a new message from the vehicle last arrived. Duplicates
    /// and repeats of the same status do not count, so a retained message redelivered on
    /// reconnect does not make a silent vehicle look alive.
    public internal(set) var lastSeen: UTCTimestamp
    /// Gap and duplicate detection over the `seq` numbers of the vehicle's current numbering
    /// run (fix and heading share one counter, per the contract).
    public internal(set) var sequence = SequenceTracker()
    /// The numbering run ``sequence`` counts (``MessageNumber/run``); `nil` before the first
    /// numbered message.
    public internal(set) var run: UInt64?
    /// Numbering runs the vehicle started since fleet-watch first heard from it: its outbox
    /// was lost (found corrupt, purged, a new card) and its numbering began again.
    public internal(set) var runsStarted: UInt64 = 0
    /// Messages on this vehicle's topics that were not contract messages.
    public internal(set) var malformed: UInt64 = 0
    /// Fix, heading and status messages received (duplicates and backlog entries included).
    public internal(set) var messages: UInt64 = 0
    /// Fixes and headings received in `backlog` batches (duplicates included).
    public internal(set) var backlog: UInt64 = 0

    package var lastFixSeq: MessageNumber?
    package var lastHeadingSeq: MessageNumber?

    package init(vehicle: VehicleID, lastSeen: UTCTimestamp) {
        self.vehicle = vehicle
        self.lastSeen = lastSeen
    }

    /// Whether the vehicle's last status says online; `nil` before any status.
    public var online: Bool? { status.map { $0.state == .online } }

    /// Messages still missing, from `seq` gaps: skipped numbers that have not arrived since,
    /// live or in a backlog batch (duplicates not counted).
    public var gaps: UInt64 { sequence.missing }

    /// Time since ``lastSeen`` at `now` (zero if the clock went back).
    public func age(now: UTCTimestamp) -> Duration {
        .milliseconds(max(0, now.millisecondsSince1970 - lastSeen.millisecondsSince1970))
    }

    /// Below this speed (m/s) an online vehicle's newest fix says it is parked: the agent's
    /// default reporting policy then reports once an hour, and the broker's last will says when
    /// its link goes.
    public static let parkedSpeed = 0.5

    /// Whether the last status says online and the newest fix is slower than ``parkedSpeed``.
    public var isParked: Bool { online == true && (fix?.speed).map { $0 < Self.parkedSpeed } == true }

    /// Whether nothing new has arrived for longer than `staleAfter` at `now`; a parked vehicle
    /// (``isParked``) only after ``parkedStaleAfter`` (or `staleAfter`, if longer): an hour of
    /// silence is what it is expected to send, but a vehicle whose broker node died got no last
    /// will, and its retained status says `online` for ever.
    public func isStale(now: UTCTimestamp, after staleAfter: Duration) -> Bool {
        age(now: now) > (isParked ? max(staleAfter, Self.parkedStaleAfter) : staleAfter)
    }

    /// How long a parked vehicle may stay silent before it is stale: the agent's parked
    /// heartbeat (`report.stoppedInterval`, one hour) and a quarter more.
    public static let parkedStaleAfter: Duration = .seconds(4_500)

    /// How old the shown fix is at `now`, by its own time (zero for one stamped ahead of this
    /// clock); `nil` without a fix. A retained fix 20 s old is 20 s old, however recently it
    /// arrived (``age(now:)`` says when something last arrived).
    public func fixAge(now: UTCTimestamp) -> Duration? {
        fix.map { .milliseconds(max(0, now.millisecondsSince1970 - $0.time.millisecondsSince1970)) }
    }

    /// Records a message number in the gap count: a message of the current run goes to
    /// ``sequence``; one of a later run starts the count afresh for that run; one of an earlier
    /// run (a late redelivery of history from before the vehicle's store was lost) is not
    /// counted, and is reported late.
    @discardableResult
    package mutating func record(_ number: MessageNumber, history: Bool = false) -> SequenceTracker.Outcome {
        if let run, number.run < run { return .late(filledGap: false) }
        if let run, number.run > run {
            sequence = SequenceTracker()
            runsStarted &+= 1
        }
        run = number.run
        return sequence.record(number.seq, history: history)
    }
}
