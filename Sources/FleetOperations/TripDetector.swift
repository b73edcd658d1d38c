import GNSS

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Great-circle distance in metres between two positions in degrees (haversine on the mean
/// Earth sphere, as `GNSS`' `Fix.distance(to:)`).
func greatCircleMetres(_ latitude1: Double, _ longitude1: Double, _ latitude2: Double, _ longitude2: Double) -> Double {
    let toRadians = Double.pi / 180
    let s1 = sin((latitude2 - latitude1) * toRadians / 2)
    let s2 = sin((longitude2 - longitude1) * toRadians / 2)
    let a = s1 * s1 + cos(latitude1 * toRadians) * cos(latitude2 * toRadians) * s2 * s2
    return 2 * earthMeanRadiusMetres * asin(min(1, a.squareRoot()))
}

/// One fix as the trip detector reads it: when, where (degrees, WGS 84) and how fast (m/s, when
/// the receiver said).
package struct TripPoint: Sendable, Equatable {
    package var time: UTCTimestamp
    package var latitude: Double
    package var longitude: Double
    package var speed: Double?

    package init(time: UTCTimestamp, latitude: Double, longitude: Double, speed: Double? = nil) {
        (self.time, self.latitude, self.longitude, self.speed) = (time, latitude, longitude, speed)
    }

    /// Great-circle distance in metres.
    package func distance(to other: TripPoint) -> Double {
        greatCircleMetres(latitude, longitude, other.latitude, other.longitude)
    }

    /// Seconds from `other` to this point.
    package func seconds(since other: TripPoint) -> Double {
        Double(time.millisecondsSince1970 - other.time.millisecondsSince1970) / 1000
    }
}

/// The rules that cut a vehicle's fixes into trips and stops, with their defaults. Traccar's
/// defaults are the model (a trip of at least 500 m, parking of at least 300 s); the radius
/// and speed are chosen against a parked receiver's jitter (a few metres, a few tenths of a
/// metre per second).
package struct TripRules: Sendable, Equatable {
    /// A stop lasts at least this long, in seconds, within ``stopRadius`` of where it began.
    package var minimumStopSeconds: Double = 300
    /// Metres: a parked vehicle's reported position wanders this far at most.
    package var stopRadius: Double = 50
    /// m/s: at or below it (walking pace) a fix may begin a stop.
    package var stopSpeed: Double = 1.5
    /// Metres: movement between stops shorter than this is not a trip (the stops merge).
    package var minimumTripMetres: Double = 500
    /// Seconds without a fix that end a trip (the receiver off, a tunnel for a long time).
    package var maximumGapSeconds: Double = 600

    package init() {}
}

/// A trip: the movement between two stops, with its distance (the fixes' great-circle steps,
/// never a stop's jitter, metres), its duration (seconds) and speeds (m/s).
package struct Trip: Sendable, Equatable {
    package var start: TripPoint
    package var end: TripPoint
    package var distanceMetres: Double
    package var maximumSpeed: Double
    package var durationSeconds: Double { end.seconds(since: start) }
    /// Distance over duration, m/s (0 for an instant).
    package var averageSpeed: Double { durationSeconds > 0 ? distanceMetres / durationSeconds : 0 }

    package init(start: TripPoint, end: TripPoint, distanceMetres: Double, maximumSpeed: Double) {
        (self.start, self.end, self.distanceMetres, self.maximumSpeed) = (start, end, distanceMetres, maximumSpeed)
    }
}

/// A stop: where the vehicle stayed (the fix it stopped at, the centre of its radius), from
/// when (seconds since 1970, UTC) until its last fix there.
package struct Stop: Sendable, Equatable {
    package var position: TripPoint
    package var start: UTCTimestamp
    package var end: TripPoint
    package var durationSeconds: Double { Double(end.time.millisecondsSince1970 - start.millisecondsSince1970) / 1000 }

    /// A stop that began at `position`.
    package init(position: TripPoint, end: TripPoint) {
        (self.position, self.start, self.end) = (position, position.time, end)
    }

    /// The same stop, lasting until `end`.
    func lasting(until end: TripPoint) -> Stop {
        var stop = self
        stop.end = end
        return stop
    }
}

/// What the detector closed.
package enum TripEvent: Sendable, Equatable {
    case trip(Trip)
    case stop(Stop)
}

/// Cuts one vehicle's fixes, in time order, into trips and stops as they arrive: a plain value,
/// fed one fix at a time, that says what it closed. Nothing is kept but the open segment, so a
/// recorder can feed it forever, and can rebuild it after a restart by feeding the fixes since
/// the last closed segment.
///
/// A fix at walking pace or below is a stop's candidate beginning; the stop is confirmed once
/// the vehicle has stayed within ``TripRules/stopRadius`` of it for
/// ``TripRules/minimumStopSeconds``, and it began then. The trip before it ends at that fix:
/// the steps taken since (a parked receiver's jitter) are not its distance. The stop ends at
/// its last fix inside the radius, where the next trip begins. Movement between two stops
/// shorter than ``TripRules/minimumTripMetres`` is no trip: the stops merge. A gap longer than
/// ``TripRules/maximumGapSeconds`` ends a trip at its last fix; after a gap a stop goes on if the
/// vehicle is still where it stopped.
package struct TripDetector: Sendable {
    package let rules: TripRules

    /// The open trip (or the movement that may become one).
    private struct Moving {
        var start: TripPoint
        var distance: Double = 0
        var maximumSpeed: Double = 0
    }

    /// A slow fix that may begin a stop, and the steps taken since.
    private struct Candidate {
        var anchor: TripPoint
        var distanceSince: Double = 0
    }

    private enum Segment {
        case none
        case moving(Moving, candidate: Candidate?)
        case stopped(Stop)
    }

    private var segment = Segment.none
    private var last: TripPoint?
    /// The stop before the open movement, held back until the movement proves a trip (a short
    /// one merges it with the next stop).
    private var previousStop: Stop?

    package init(rules: TripRules = TripRules()) {
        self.rules = rules
    }

    /// Takes the next fix (fixes out of order, or of the same time, are ignored: a late backlog
    /// is fed again in order by the caller); returns what it closed, oldest first.
    package mutating func add(_ point: TripPoint) -> [TripEvent] {
        var closed: [TripEvent] = []
        guard let previous = last else {
            last = point
            segment = .moving(Moving(start: point), candidate: isSlow(point) ? Candidate(anchor: point) : nil)
            return closed
        }
        guard point.time > previous.time else { return closed }
        defer { last = point }
        if point.seconds(since: previous) > rules.maximumGapSeconds {
            if case .stopped(let stop) = segment, point.distance(to: stop.position) <= rules.stopRadius {
                segment = .stopped(stop.lasting(until: point))
                return closed
            }
            closeOpen(at: previous, into: &closed)
            segment = .moving(Moving(start: point), candidate: isSlow(point) ? Candidate(anchor: point) : nil)
            return closed
        }
        switch segment {
        case .none:
            segment = .moving(Moving(start: point), candidate: isSlow(point) ? Candidate(anchor: point) : nil)
        case .stopped(let stop):
            if point.distance(to: stop.position) <= rules.stopRadius {
                segment = .stopped(stop.lasting(until: point))
            } else {
                // Left: the stop ended at its last fix. The movement begins then, from where the
                // vehicle was parked (its last fix there is anywhere in the radius).
                if let held = previousStop { closed.append(.stop(held)) }
                previousStop = stop
                var departure = stop.position
                departure.time = stop.end.time
                var moving = Moving(start: departure)
                moving.distance = departure.distance(to: point)
                moving.maximumSpeed = point.speed ?? 0
                segment = .moving(moving, candidate: isSlow(point) ? Candidate(anchor: point) : nil)
            }
        case .moving(var moving, var candidate):
            let step = previous.distance(to: point)
            moving.distance += step
            moving.maximumSpeed = max(moving.maximumSpeed, point.speed ?? 0)
            if var current = candidate, point.distance(to: current.anchor) <= rules.stopRadius {
                current.distanceSince += step
                candidate = current
                if point.seconds(since: current.anchor) >= rules.minimumStopSeconds {
                    moving.distance -= current.distanceSince
                    confirmStop(Stop(position: current.anchor, end: point), after: moving, into: &closed)
                    return closed
                }
            } else {
                candidate = isSlow(point) ? Candidate(anchor: point) : nil
            }
            segment = .moving(moving, candidate: candidate)
        }
        return closed
    }

    /// Closes what is open at the end of the data (a day's report, a finished replay): a trip
    /// long enough, a stop long enough.
    package mutating func finish() -> [TripEvent] {
        var closed: [TripEvent] = []
        if let last { closeOpen(at: last, into: &closed) }
        segment = .none
        return closed
    }

    private func isSlow(_ point: TripPoint) -> Bool {
        (point.speed ?? 0) <= rules.stopSpeed
    }

    /// A stop is confirmed after `moving`: the movement is a trip if long enough, else the stop
    /// before it and this one are one stop.
    private mutating func confirmStop(_ stop: Stop, after moving: Moving, into closed: inout [TripEvent]) {
        if moving.distance >= rules.minimumTripMetres {
            if let held = previousStop { closed.append(.stop(held)) }
            previousStop = nil
            closed.append(
                .trip(Trip(start: moving.start, end: stop.position, distanceMetres: moving.distance, maximumSpeed: moving.maximumSpeed)))
            segment = .stopped(stop)
        } else if let held = previousStop {
            // One stop from the first arrival, where the vehicle is parked now.
            previousStop = nil
            var merged = stop
            merged.start = held.start
            segment = .stopped(merged)
        } else {
            segment = .stopped(stop)
        }
    }

    /// Ends what is open at `point` (a gap or the end of the data).
    private mutating func closeOpen(at point: TripPoint, into closed: inout [TripEvent]) {
        switch segment {
        case .none: break
        case .stopped(let stop):
            if let held = previousStop { closed.append(.stop(held)) }
            previousStop = nil
            if stop.durationSeconds >= rules.minimumStopSeconds { closed.append(.stop(stop)) }
        case .moving(var moving, let candidate):
            var end = point
            if let candidate {
                // Still at a candidate stop too short to confirm: the trip ended where it began.
                moving.distance -= candidate.distanceSince
                end = candidate.anchor
            }
            if let held = previousStop { closed.append(.stop(held)) }
            previousStop = nil
            if moving.distance >= rules.minimumTripMetres {
                closed.append(
                    .trip(Trip(start: moving.start, end: end, distanceMetres: moving.distance, maximumSpeed: moving.maximumSpeed)))
            }
        }
        segment = .none
    }
}
