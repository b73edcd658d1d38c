import EdgeCore
import FleetcastTestSupport
import GNSS
import Testing

@Suite("Reporting policy")
struct ReportingPolicyTests {
    /// Runs fixes through a policy; returns the seconds (since the test start) of the published ones.
    private func published(_ policy: ReportingPolicy, _ fixes: [Fix]) -> [Double] {
        var policy = policy
        return fixes.compactMap { fix in
            if case .publish(let out, _) = policy.evaluate(fix) {
                return Double(out.time.millisecondsSince1970 - Fixes.time(0).millisecondsSince1970) / 1000
            }
            return nil
        }
    }

    /// A van driving east at 12.5 m/s, one fix per second for `count` seconds.
    private func drive(_ count: Int, speed: Double = 12.5) -> [Fix] {
        (0..<count).map { Fixes.fix(at: Double($0), east: Double($0) * speed, speed: speed, track: 90) }
    }

    @Test("publishes every fix by default")
    func everyFixByDefault() {
        #expect(published(ReportingPolicy(), drive(5)) == [0, 1, 2, 3, 4])
    }

    @Test("every fix: the ones where the vehicle stops and starts again say so (motion change), the others are every-fix")
    func everyFixNamesMotionChanges() {
        var policy = ReportingPolicy(stationarySpeed: 0.5)
        let speeds: [Double] = [5, 5, 0, 0, 0, 4, 4]
        let reasons = speeds.enumerated().map { second, speed -> ReportingPolicy.Reason? in
            if case .publish(_, let reason) = policy.evaluate(Fixes.fix(at: Double(second), speed: speed, track: 90)) { return reason }
            return nil
        }
        #expect(reasons == [.first, .everyFix, .motionChange, .everyFix, .everyFix, .motionChange, .everyFix])
    }

    @Test("min interval is a floor: nothing sooner")
    func minIntervalFloor() {
        #expect(published(ReportingPolicy(minInterval: 5), drive(12)) == [0, 5, 10])
    }

    @Test("max interval forces a heartbeat while parked")
    func heartbeat() {
        let parked = (0..<125).map { Fixes.fix(at: Double($0), speed: 0, track: nil) }
        #expect(published(ReportingPolicy(maxInterval: 60, minDistance: 100), parked) == [0, 60, 120])
    }

    @Test("min distance reports every 95 m at 12.5 m/s: every 8 s (100 m)")
    func minDistance() {
        #expect(published(ReportingPolicy(minDistance: 95), drive(25)) == [0, 8, 16, 24])
    }

    @Test("min heading change reports a turn, respecting the floor")
    func headingChange() {
        // Straight east for 5 s, then a 90° right turn south over 3 s, then straight.
        let tracks: [Double] = [90, 90, 90, 90, 90, 110, 150, 180, 180, 180]
        let fixes = tracks.enumerated().map { Fixes.fix(at: Double($0.offset), east: Double($0.offset) * 10, speed: 10, track: $0.element) }
        #expect(published(ReportingPolicy(minHeadingChange: 30), fixes) == [0, 6, 7])
        #expect(published(ReportingPolicy(minInterval: 2, minHeadingChange: 30), fixes) == [0, 6, 8])
    }

    @Test("the angle between tracks wraps around north")
    func angleWraps() {
        #expect(ReportingPolicy.angle(between: 350, and: 10) == 20)
        #expect(ReportingPolicy.angle(between: 10, and: 350) == 20)
        #expect(ReportingPolicy.angle(between: 0, and: 180) == 180)
        #expect(ReportingPolicy.angle(between: 90, and: 90) == 0)
    }

    @Test("a turn across north is a small change, not 340°")
    func turnAcrossNorth() {
        let fixes = [Fixes.fix(at: 0, speed: 10, track: 355), Fixes.fix(at: 1, north: 10, speed: 10, track: 5)]
        #expect(published(ReportingPolicy(minHeadingChange: 30), fixes) == [0])
    }

    @Test("stopping and starting are reported at once, even inside the floor")
    func motionChangeBypassesFloor() {
        var fixes = (0..<3).map { Fixes.fix(at: Double($0), east: Double($0) * 5, speed: 5, track: 90) }
        fixes.append(Fixes.fix(at: 3, east: 12, speed: 0.2, track: 250))  // stops
        fixes.append(Fixes.fix(at: 4, east: 12, speed: 0.1, track: 17))
        fixes.append(Fixes.fix(at: 5, east: 13, speed: 4, track: 92))  // drives off
        let policy = ReportingPolicy(minInterval: 30, stationarySpeed: 0.5)
        #expect(published(policy, fixes) == [0, 3, 5])
    }

    @Test("while stationary the last good track is held, not jittered")
    func stationaryHoldsTrack() {
        var policy = ReportingPolicy(stationarySpeed: 0.5)
        var tracks: [Double?] = []
        let input: [(Double, Double?)] = [(8, 91.5), (0.3, 212), (0.1, 17), (0.2, 301), (6, 93)]
        for (index, (speed, track)) in input.enumerated() {
            if case .publish(let fix, _) = policy.evaluate(Fixes.fix(at: Double(index), speed: speed, track: track)) {
                tracks.append(fix.track)
                #expect(fix.speed == speed, "the speed itself is not altered")
            }
        }
        #expect(tracks == [91.5, 91.5, 91.5, 91.5, 93])
    }

    @Test("a vehicle parked since start publishes no track at all")
    func noTrackBeforeMoving() {
        var policy = ReportingPolicy(stationarySpeed: 0.5)
        guard case .publish(let fix, _) = policy.evaluate(Fixes.fix(at: 0, speed: 0.2, track: 143)) else {
            Issue.record("the first fix must be published")
            return
        }
        #expect(fix.track == nil)
    }

    @Test("heading changes while stationary do not trigger a report")
    func stationaryHeadingNoise() {
        let fixes =
            [Fixes.fix(at: 0, speed: 0.1, track: 0)]
            + (1..<10).map {
                Fixes.fix(at: Double($0), speed: 0.1, track: Double($0 * 40 % 360))
            }
        #expect(published(ReportingPolicy(minHeadingChange: 20, stationarySpeed: 0.5), fixes) == [0])
    }

    @Test("a repeated receiver time is a duplicate; a clock jump back restarts timing")
    func timeOrdering() {
        var policy = ReportingPolicy(minInterval: 10)
        _ = policy.evaluate(Fixes.fix(at: 100))
        #expect(policy.evaluate(Fixes.fix(at: 100)) == .skip(reason: .duplicate))
        #expect(policy.evaluate(Fixes.fix(at: 104)) == .skip(reason: .tooSoon))
        guard case .publish(_, let reason) = policy.evaluate(Fixes.fix(at: 50)) else {
            Issue.record("a fix earlier than the last published one must be published")
            return
        }
        #expect(reason == .first)
    }

    @Test("reasons name the rule that fired")
    func reasons() {
        var policy = ReportingPolicy(minInterval: 1, maxInterval: 30, minDistance: 100)
        var reasons: [ReportingPolicy.Reason] = []
        for fix in [Fixes.fix(at: 0, speed: 1), Fixes.fix(at: 2, east: 150, speed: 1), Fixes.fix(at: 40, east: 160, speed: 1)] {
            if case .publish(_, let reason) = policy.evaluate(fix) { reasons.append(reason) }
        }
        #expect(reasons == [.first, .distance, .heartbeat])
    }

    @Test("headings: every one by default, at most one per floor otherwise, turns go out")
    func headings() {
        var all = ReportingPolicy()
        #expect((0..<5).allSatisfy { all.evaluate(Heading(time: Fixes.time(Double($0) / 10), trueHeading: 90, source: .hdt)) })

        var limited = ReportingPolicy(minInterval: 1, minHeadingChange: 10)
        let readings: [(Double, Double)] = [(0, 90), (0.5, 120), (1.0, 92), (1.5, 95), (2.0, 130)]
        let decisions = readings.map { limited.evaluate(Heading(time: Fixes.time($0.0), trueHeading: $0.1, source: .ths)) }
        #expect(decisions == [true, false, false, false, true])
    }

    @Test(
        "the tracker defaults: a parked vehicle reports once an hour (fixes and headings), a moving one every 100 m, a stop and a start at once"
    )
    func trackerDefaults() {
        let parked = (0..<7_300).map { Fixes.fix(at: Double($0), speed: 0, track: nil) }
        #expect(published(.trackerDefaults, parked) == [0, 3600, 7200])
        var policy = ReportingPolicy.trackerDefaults
        _ = policy.evaluate(Fixes.fix(at: 0, speed: 0, track: nil))
        let headings = (0..<600).filter { policy.evaluate(Heading(time: Fixes.time(Double($0)), trueHeading: 90, source: .hdt)) }
        #expect(headings == [0], "a parked vehicle's steady heading waits for the stationary heartbeat: \(headings)")
        // Driving east at 12.5 m/s for 60 s: every 100 m (8 s apart, past the 10 s floor: 10 s).
        #expect(published(.trackerDefaults, drive(60)) == [0, 10, 20, 30, 40, 50])
        // Stops at 20 s, parked to 100 s, drives off at 100 s: both at once.
        let driving: [Fix] = (0..<20).map { Fixes.fix(at: Double($0), east: Double($0) * 12.5, speed: 12.5, track: 90) }
        let stopped: [Fix] = (20..<100).map { Fixes.fix(at: Double($0), east: 250, speed: 0, track: nil) }
        let off: [Fix] = (100..<105).map { Fixes.fix(at: Double($0), east: 250 + Double($0 - 100) * 12.5, speed: 12.5, track: 90) }
        let stopAndGo = driving + stopped + off
        #expect(published(.trackerDefaults, stopAndGo) == [0, 10, 20, 100])
    }
}
