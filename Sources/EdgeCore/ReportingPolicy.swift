import GNSS

/// Decides which fixes and headings are worth sending, with the time / distance / angle
/// rules fleet trackers use to save cellular data.
///
/// A pure value: it has no clock and reads time only from the fixes themselves (the receiver's
/// UTC), so the same input always gives the same decisions. Feed every fix of mode 2D or 3D,
/// in order, to ``evaluate(_:)-(Fix)``; it returns the fix to publish (possibly with the held
/// track, see below) or why it was skipped.
///
/// ## Rules
/// With no rule set (the default) every fix is published. Otherwise, after the first fix
/// (always published), a fix is published when:
/// 1. ``maxInterval`` (s) has elapsed since the last published fix (heartbeat) — always; or
/// 2. ``minInterval`` (s) has elapsed — the floor — and one of the triggers says so:
///    ``minDistance`` (m, great-circle from the last published position) or
///    ``minHeadingChange`` (°, between the last published track and this one, while moving).
///    When only ``minInterval`` is set (no trigger), every fix past the floor is published.
///
/// **The one exception to the floor**: a change of motion state (the vehicle stops or starts
/// moving, judged with ``stationarySpeed``) is published at once, even before ``minInterval``
/// has elapsed, because "stopped at 14:02:07" is the event a dispatcher needs and it happens at
/// most twice per stop. Set ``stationarySpeed`` to `nil` to disable motion detection entirely.
///
/// A fix whose time is not after the last published one is skipped as a duplicate when equal;
/// a fix *earlier* than the last published one (receiver clock reset, replay restarted) is
/// published and restarts the timing.
///
/// ``stoppedInterval`` is the heartbeat while the vehicle is stationary, for fixes and headings
/// alike (``maxInterval`` while it moves): a parked vehicle reports once an hour, not once a
/// minute.
///
/// ``trackerDefaults`` is the agent's default, chosen for a vehicle on a metered cellular link
/// in the manner of the trackers fleets run; `ReportingPolicy()` publishes every fix.
///
/// ## Stationary track hold
/// At standstill a receiver's course over ground is noise. While the speed is below
/// ``stationarySpeed`` (m/s) the published fix carries the last track seen while moving
/// (or no track, if the vehicle has not moved since start), and heading-change triggers are
/// suspended. The distance trigger stays active (a slow tow still reports).
public struct ReportingPolicy: Sendable, Equatable {
    /// Minimum time between two published fixes, seconds (the floor); `nil`: no floor.
    public var minInterval: Double?
    /// Maximum time without a published fix, seconds (heartbeat); `nil`: no heartbeat.
    public var maxInterval: Double?
    /// Distance from the last published position that triggers a report, metres.
    public var minDistance: Double?
    /// Change of track from the last published fix that triggers a report, degrees.
    public var minHeadingChange: Double?
    /// Speed below which the vehicle counts as stationary, m/s; `nil`: never stationary.
    public var stationarySpeed: Double?
    /// Maximum time without a published fix (and heading) while stationary, seconds (the
    /// heartbeat of a parked vehicle); `nil`: ``maxInterval`` applies.
    public var stoppedInterval: Double?

    /// The agent's default: at most one fix per 10 s while moving, sooner never, published
    /// after 100 m or a 15° turn, at least every 2 minutes; while stationary (below 0.5 m/s)
    /// once an hour; a stop and a start at once.
    public static let trackerDefaults = ReportingPolicy(
        minInterval: 10, maxInterval: 120, minDistance: 100, minHeadingChange: 15, stationarySpeed: 0.5,
        stoppedInterval: 3600)

    /// What the policy remembers between fixes.
    private var lastPublished: Fix?
    private var lastHeadingTime: UTCTimestamp?
    private var lastHeadingValue: Double?
    private var lastFixTime: UTCTimestamp?
    private var heldTrack: Double?
    private var wasStationary: Bool?

    /// The outcome for one fix.
    public enum Decision: Sendable, Equatable {
        /// Publish this fix (the input, with the held track while stationary). `reason` says
        /// which rule fired.
        case publish(Fix, reason: Reason)
        /// Do not publish; `reason` says which rule held it back.
        case skip(reason: SkipReason)
    }

    /// Why a fix is published.
    public enum Reason: String, Sendable, Equatable {
        /// No rule is configured: every fix goes out.
        case everyFix = "every-fix"
        /// The first fix, or the first after the receiver's clock went backwards.
        case first
        /// ``maxInterval`` elapsed.
        case heartbeat
        /// ``minInterval`` elapsed and no trigger is configured.
        case interval
        /// ``minDistance`` reached.
        case distance
        /// ``minHeadingChange`` reached.
        case headingChange = "heading-change"
        /// The vehicle stopped or started moving (with ``stationarySpeed`` set; also when every
        /// fix is published).
        case motionChange = "motion-change"
    }

    /// Why a fix is skipped.
    public enum SkipReason: String, Sendable, Equatable {
        /// Sooner than ``minInterval`` after the last published fix.
        case tooSoon = "too-soon"
        /// Past the floor, but no trigger fired.
        case noTrigger = "no-trigger"
        /// Same receiver time as the last published fix.
        case duplicate
    }

    /// A policy; every parameter `nil` (the default) publishes every fix.
    ///
    /// - Parameters:
    ///   - minInterval: seconds; the floor between published fixes.
    ///   - maxInterval: seconds; the heartbeat.
    ///   - minDistance: metres.
    ///   - minHeadingChange: degrees.
    ///   - stationarySpeed: m/s; below it the vehicle is stationary and its track is held.
    ///   - stoppedInterval: seconds; the heartbeat while stationary.
    public init(
        minInterval: Double? = nil, maxInterval: Double? = nil, minDistance: Double? = nil,
        minHeadingChange: Double? = nil, stationarySpeed: Double? = nil, stoppedInterval: Double? = nil
    ) {
        self.stoppedInterval = stoppedInterval
        self.minInterval = minInterval
        self.maxInterval = maxInterval
        self.minDistance = minDistance
        self.minHeadingChange = minHeadingChange
        self.stationarySpeed = stationarySpeed
    }

    /// Whether any rate or trigger rule is set (otherwise every fix is published).
    public var limitsRate: Bool {
        minInterval != nil || maxInterval != nil || minDistance != nil || minHeadingChange != nil || stoppedInterval != nil
    }

    /// The heartbeat that applies, moving or stationary.
    private func heartbeat(stationary: Bool) -> Double? {
        stationary ? stoppedInterval ?? maxInterval : maxInterval
    }

    /// Decides about one fix and remembers it. Fixes must come in receiver order.
    public mutating func evaluate(_ fix: Fix) -> Decision {
        lastFixTime = fix.time
        let stationary = stationarySpeed.map { threshold in (fix.speed ?? 0) < threshold } ?? false
        let motionChanged = wasStationary.map { $0 != stationary } ?? false
        wasStationary = stationarySpeed == nil ? nil : stationary
        if !stationary, let track = fix.track { heldTrack = track }
        let candidate = stationary ? Self.replacingTrack(of: fix, with: heldTrack) : fix

        guard let last = lastPublished else { return publish(candidate, .first) }
        let elapsed = fix.time.secondsSince1970 - last.time.secondsSince1970
        if elapsed == 0 { return .skip(reason: .duplicate) }
        if elapsed < 0 { return publish(candidate, .first) }
        // Every fix goes out; one where the vehicle starts or stops says so (a batched uplink
        // sends what it gathered at once).
        if !limitsRate { return publish(candidate, motionChanged ? .motionChange : .everyFix) }
        if let heartbeat = heartbeat(stationary: stationary), elapsed >= heartbeat { return publish(candidate, .heartbeat) }
        if motionChanged { return publish(candidate, .motionChange) }
        if let minInterval, elapsed < minInterval { return .skip(reason: .tooSoon) }
        if minDistance == nil, minHeadingChange == nil {
            // No trigger: a floor alone limits the rate; a heartbeat alone reports on its period.
            return minInterval != nil ? publish(candidate, .interval) : .skip(reason: .noTrigger)
        }
        if let minDistance, fix.distance(to: last) >= minDistance { return publish(candidate, .distance) }
        if let minHeadingChange, !stationary, let now = fix.track, let before = last.track,
            Self.angle(between: now, and: before) >= minHeadingChange
        {
            return publish(candidate, .headingChange)
        }
        return .skip(reason: .noTrigger)
    }

    /// Decides about one heading reading and remembers it if published.
    ///
    /// With no rule set every heading is published. Otherwise a heading is published when
    /// the heartbeat (``maxInterval``, or ``stoppedInterval`` while the last fix said the vehicle
    /// was stationary) elapsed since the last published heading, or when ``minInterval`` (if
    /// set) elapsed and, if ``minHeadingChange`` is set, it turned by at least that much.
    /// Time is the heading's own, or the latest fix's when the heading has none (HDT); a
    /// heading with no time at all is published.
    public mutating func evaluate(_ heading: Heading) -> Bool {
        let value = heading.trueHeading ?? heading.magneticHeading
        let time = heading.time ?? lastFixTime
        var publish = true
        if limitsRate, let time, let lastTime = lastHeadingTime {
            let elapsed = time.secondsSince1970 - lastTime.secondsSince1970
            if elapsed >= 0, !(heartbeat(stationary: wasStationary == true).map { elapsed >= $0 } ?? false) {
                let pastFloor = minInterval.map { elapsed >= $0 } ?? (elapsed > 0)
                let turned =
                    minHeadingChange.map { threshold in
                        guard let value, let previous = lastHeadingValue else { return true }
                        return Self.angle(between: value, and: previous) >= threshold
                    } ?? true
                publish = pastFloor && turned
            }
        }
        if publish {
            lastHeadingTime = time ?? lastHeadingTime
            lastHeadingValue = value
        }
        return publish
    }

    /// The smaller angle between two directions, degrees, 0...180.
    public static func angle(between a: Double, and b: Double) -> Double {
        let d = (a - b).truncatingRemainder(dividingBy: 360)
        let positive = d < 0 ? d + 360 : d
        return positive > 180 ? 360 - positive : positive
    }

    private mutating func publish(_ fix: Fix, _ reason: Reason) -> Decision {
        lastPublished = fix
        return .publish(fix, reason: reason)
    }

    private static func replacingTrack(of fix: Fix, with track: Double?) -> Fix {
        Fix(
            time: fix.time, latitude: fix.latitude, longitude: fix.longitude,
            altitudeHAE: fix.altitudeHAE, altitudeMSL: fix.altitudeMSL, geoidSeparation: fix.geoidSeparation,
            speed: fix.speed, track: track, magneticVariation: fix.magneticVariation, climb: fix.climb,
            mode: fix.mode, quality: fix.quality, satellitesUsed: fix.satellitesUsed,
            hdop: fix.hdop, vdop: fix.vdop, pdop: fix.pdop, eph: fix.eph, epv: fix.epv, heading: fix.heading
        )
    }
}
