import FleetOperations
import FleetcastTestSupport
import GNSS
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The trip detector on generated drives: legs of known length, stops of known duration, a
/// parked receiver's jitter.
@Suite("Trips and stops")
struct TripDetectorTests {
    private func detect(_ points: [TripPoint], rules: TripRules = TripRules()) -> [TripEvent] {
        var detector = TripDetector(rules: rules)
        return points.flatMap { detector.add($0) } + detector.finish()
    }

    private func trips(_ events: [TripEvent]) -> [Trip] {
        events.compactMap { if case .trip(let trip) = $0 { trip } else { nil } }
    }

    private func stops(_ events: [TripEvent]) -> [Stop] {
        events.compactMap { if case .stop(let stop) = $0 { stop } else { nil } }
    }

    @Test(
        "29 minutes: three legs of 4.5, 3.6 and 1.2 km with stops of 7 and 10 minutes give three trips within 5 % and two stops within 60 s"
    )
    func threeLegsTwoStops() {
        let drive = GeneratedDrive([
            .leg(bearing: 0, metres: 4_500, speed: 15), .stop(seconds: 420),
            .leg(bearing: 90, metres: 3_600, speed: 12), .stop(seconds: 600),
            .leg(bearing: 200, metres: 1_200, speed: 10),
        ])
        #expect(drive.points.count == 1_740, "29 minutes at 1 Hz")
        let events = detect(drive.points)
        let found = trips(events)
        #expect(found.count == 3, "\(events)")
        for (trip, metres) in zip(found, [4_500.0, 3_600, 1_200]) {
            #expect(abs(trip.distanceMetres - metres) <= metres * 0.05, "\(trip.distanceMetres) m for a \(metres) m leg")
        }
        let parked = stops(events)
        #expect(parked.count == 2, "\(events)")
        for (stop, seconds) in zip(parked, [420.0, 600]) {
            #expect(abs(stop.durationSeconds - seconds) <= 60, "\(stop.durationSeconds) s for a \(seconds) s stop")
        }
        #expect(events.map { if case .trip = $0 { "trip" } else { "stop" } } == ["trip", "stop", "trip", "stop", "trip"], "in order")
        #expect(found.first.map { abs($0.maximumSpeed - 15) < 0.01 } == true)
        #expect(found.first.map { abs($0.averageSpeed - 15) < 1 } == true, "4.5 km in 300 s")
    }

    @Test("a parked vehicle's jitter is no distance: an hour parked with 5 m of noise is one stop and no trip")
    func jitterIsNoTrip() {
        let drive = GeneratedDrive([.stop(seconds: 3_600)], jitter: 5)
        let events = detect(drive.points)
        #expect(trips(events).isEmpty, "\(events)")
        #expect(stops(events).count == 1)
    }

    @Test("a short move between two stops (a car park) is no trip: the stops merge")
    func shortMoveMerges() {
        let drive = GeneratedDrive([
            .leg(bearing: 0, metres: 2_000, speed: 12), .stop(seconds: 400),
            .leg(bearing: 90, metres: 200, speed: 3), .stop(seconds: 400),
            .leg(bearing: 0, metres: 2_000, speed: 12),
        ])
        let events = detect(drive.points)
        #expect(trips(events).count == 2, "\(events)")
        let merged = stops(events)
        #expect(merged.count == 1)
        #expect(merged.first.map { $0.durationSeconds > 800 } == true, "one stop from the first arrival to the last departure")
    }

    @Test("a gap longer than the limit ends a trip at its last fix; parked through a gap, the stop goes on")
    func gaps() {
        var points = GeneratedDrive([.leg(bearing: 0, metres: 3_000, speed: 15)]).points
        let resumed = points.last!
        points.append(
            TripPoint(
                time: UTCTimestamp(millisecondsSince1970: resumed.time.millisecondsSince1970 + 3_600_000),
                latitude: resumed.latitude + 0.1, longitude: resumed.longitude, speed: 15))
        let events = detect(points)
        #expect(trips(events).count == 1)
        #expect(trips(events).first?.end == resumed, "ended at the last fix before the gap")

        var parked = GeneratedDrive([.leg(bearing: 0, metres: 1_000, speed: 10), .stop(seconds: 400)]).points
        let before = parked.last!
        parked.append(
            TripPoint(
                time: UTCTimestamp(millisecondsSince1970: before.time.millisecondsSince1970 + 8 * 3_600_000),
                latitude: before.latitude, longitude: before.longitude, speed: 0))
        let night = stops(detect(parked))
        #expect(night.count == 1)
        #expect(night.first.map { $0.durationSeconds > 8 * 3_600 } == true, "parked overnight: one stop")
    }
}
