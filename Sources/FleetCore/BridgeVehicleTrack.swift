import FleetProtocol
import GNSS

/// What a bridge remembers of one vehicle: whether it is online, and its latest live fix and
/// latest true heading, so that a fix without a track over ground can take the vehicle's heading as its
/// course (a vehicle standing still, or a receiver that sends no VTG/RMC track).
package struct BridgeVehicleTrack: Sendable, Equatable {
    /// The latest live fix.
    package var fix: Fix?
    /// The message number of ``fix``.
    package var fixSeq: MessageNumber?
    /// The latest heading with a true heading.
    package var heading: Heading?
    /// Whether the vehicle's latest `status` said online.
    package var online = false

    /// How far apart, in receiver milliseconds, a heading and a fix may be for the heading to
    /// stand in for the fix's course: 10 s. A retained heading of yesterday is not today's course.
    package static let headingMaxAgeMilliseconds: Int64 = 10_000

    /// The position of the latest fix, as the event `seq` (a heading's, when it gives the fix
    /// a new course) orders it; `nil` before the first fix.
    package func position(seq: MessageNumber?) -> FleetBridgeOutput.Position? {
        fix.map { FleetBridgeOutput.Position(time: $0.time, seq: seq) }
    }

    /// Remembers `fix` as the latest, unless it is older than the one remembered (by fix time,
    /// then `seq`: a late or repeated message must not move the vehicle back); returns whether
    /// it did.
    package mutating func record(_ fix: Fix, seq: MessageNumber?) -> Bool {
        if let current = position(seq: fixSeq), FleetBridgeOutput.Position(time: fix.time, seq: seq).isOlder(than: current) {
            return false
        }
        self.fix = fix
        fixSeq = seq
        if let heading = fix.heading { record(heading) }
        return true
    }

    /// Remembers a heading that has a true heading (a magnetic one alone is not a course).
    package mutating func record(_ heading: Heading) {
        if heading.trueHeading != nil { self.heading = heading }
    }

    /// The course over ground of `fix`, degrees from true north: its track when it has one,
    /// else the true heading of its own instant, otherwise the latest true heading when it has no time (HDT carries none) or its time is
    /// within ``headingMaxAgeMilliseconds`` of the fix's.
    package func course(of fix: Fix) -> Double? {
        if let track = fix.track { return track }
        if let degrees = fix.heading?.trueHeading { return degrees }
        guard let heading, let degrees = heading.trueHeading else { return nil }
        if let time = heading.time,
            abs(time.millisecondsSince1970 - fix.time.millisecondsSince1970) > Self.headingMaxAgeMilliseconds
        {
            return nil
        }
        return degrees
    }
}
