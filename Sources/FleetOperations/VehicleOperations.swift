import GNSS

/// One vehicle's trips, stops and zone events, kept up as its fixes are recorded: the
/// decisions of `fleet-watch record`'s operations, without the database. A plain value: the
/// recorder feeds it each batch of the vehicle's newly stored fixes and stores what it closed;
/// when a batch reaches back before what was fed (a backlog after an outage arrives behind the
/// live fixes), it says so, and the recorder rebuilds it from the stored fixes from a point
/// where the detector's state is known (``resumePoint(after:reaching:horizonSeconds:)``).
package struct VehicleOperations: Sendable {
    package private(set) var detector: TripDetector
    package private(set) var tracker: ZoneTracker?
    /// The time of the newest fix fed.
    package private(set) var last: UTCTimestamp?
    /// The fix before the next one for zones: a fix whose implied speed from it is impossible
    /// is not fed to zones (it becomes the next one's reference all the same, so a receiver
    /// that jumped once and stays is followed again from its second fix).
    private var zoneReference: TripPoint?
    /// Fixes not fed to zones for an impossible implied speed, since the vehicle's start.
    package private(set) var impossibleForZones = 0

    /// The fastest a vehicle is taken to move between two fixes for zones: 150 m/s (540 km/h).
    /// A vehicle jumping across a 100 m zone 25 times a second implies 2,500 m/s; each jump
    /// would have been an enter or an exit.
    package static let maximumZoneSpeedMetresPerSecond = 150.0

    /// A trip or stop closed, and the time of the fix that closed it: the detector decided it
    /// from the fixes up to then, so fixes arriving later with later times cannot change it.
    package struct Closed: Sendable, Equatable {
        package var segment: TripEvent
        package var decidedAt: UTCTimestamp

        package init(_ segment: TripEvent, decidedAt: UTCTimestamp) {
            (self.segment, self.decidedAt) = (segment, decidedAt)
        }
    }

    /// What a batch led to.
    package enum Outcome: Sendable, Equatable {
        /// Fed: the trips and stops it closed, and the zone events, oldest first.
        case closed([Closed], [ZoneEvent])
        /// The batch holds a fix before (or at) the newest fed, at `time`: nothing was fed;
        /// rebuild from the stored fixes.
        case rewind(to: UTCTimestamp)
    }

    /// A vehicle's operations starting afresh (no fix fed), in `inside` zones.
    package init(rules: TripRules, zones: ZoneSet?, hysteresisMetres: Double = 15, inside: Set<String> = []) {
        detector = TripDetector(rules: rules)
        tracker = zones.map { ZoneTracker(zones: $0, hysteresisMetres: hysteresisMetres, inside: inside) }
    }

    /// Feeds `points` (the vehicle's fixes just stored, in any order), unless one is older than
    /// the newest already fed.
    package mutating func add(_ points: [TripPoint]) -> Outcome {
        let sorted = points.sorted { $0.time < $1.time }
        if let last, let first = sorted.first, first.time <= last {
            // A fix at the same instant as the newest is a duplicate row (another seq of the
            // same time): not new, nothing to rebuild.
            if sorted.allSatisfy({ $0.time == last }) { return .closed([], []) }
            return .rewind(to: first.time)
        }
        return .closed(feed(sorted), zoneEvents(sorted))
    }

    /// Feeds stored fixes in time order while rebuilding (each strictly after the one before;
    /// the same instant twice is fed once).
    package mutating func replay(_ point: TripPoint) -> ([Closed], [ZoneEvent]) {
        if let last, point.time <= last { return ([], []) }
        return (feed([point]), zoneEvents([point]))
    }

    /// Closes what is open: the trip or stop in progress, as far as the last fix fed (for a
    /// listing up to now; the recorder never stores these, the next fixes may extend them).
    package func open() -> [TripEvent] {
        var copy = detector
        return copy.finish()
    }

    private mutating func feed(_ sorted: [TripPoint]) -> [Closed] {
        var closed: [Closed] = []
        for point in sorted where last.map({ point.time > $0 }) ?? true {
            closed += detector.add(point).map { Closed($0, decidedAt: point.time) }
            last = point.time
        }
        return closed
    }

    private mutating func zoneEvents(_ sorted: [TripPoint]) -> [ZoneEvent] {
        guard tracker != nil else { return [] }
        var events: [ZoneEvent] = []
        var previous: UTCTimestamp?
        for point in sorted where previous.map({ point.time > $0 }) ?? true {
            previous = point.time
            defer { zoneReference = point }
            if let reference = zoneReference {
                let seconds = Double(point.time.millisecondsSince1970 - reference.time.millisecondsSince1970) / 1000
                if point.distance(to: reference) > Self.maximumZoneSpeedMetresPerSecond * max(seconds, 0.001) {
                    impossibleForZones += 1
                    continue
                }
            }
            events += tracker!.add(point)
        }
        return events
    }

    /// Where a rebuild starts, for a rebuild that must cover fixes from `time` on: the end of
    /// the stored trip decided last before `time` (`tripEnd`, nil when there is none; see
    /// ``Closed/decidedAt``). Right after the detector closed that trip, its
    /// state is the one a fresh detector reaches from the trip's end fed the same fixes (a trip
    /// ends where the stop after it begins, at a slow fix, and nothing before it is held back;
    /// or a gap ended it, and the detector began afresh after the gap), and no fix before
    /// `time` changed since. Never more than `horizonSeconds` before `time` (a vehicle that made
    /// no trip for a week starts afresh a week back: a stop longer than that is cut there).
    package static func resumePoint(
        after tripEnd: UTCTimestamp?, reaching time: UTCTimestamp, horizonSeconds: Double = 7 * 86_400
    ) -> UTCTimestamp {
        let floor = UTCTimestamp(millisecondsSince1970: time.millisecondsSince1970 - Int64(horizonSeconds * 1000))
        return max(tripEnd ?? floor, floor)
    }
}
