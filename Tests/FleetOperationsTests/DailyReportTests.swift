import FleetOperations
import FleetcastTestSupport
import GNSS
import Testing

/// The day's summary of the drive.
@Suite("Daily report")
struct DailyReportTests {
    @Test("the drive's day: three trips, their distance and driving time, the stops' time, the fastest speed, both zones")
    func theDrivesDay() throws {
        var detector = TripDetector()
        var tracker = ZoneTracker(zones: try ZoneSet.parse(Array(ZoneTests.zonesFile.utf8)))
        var events: [TripEvent] = []
        var zoneEvents: [ZoneEvent] = []
        for point in ZoneTests.drive.points {
            events += detector.add(point)
            zoneEvents += tracker.add(point)
        }
        events += detector.finish()
        let trips = events.compactMap { if case .trip(let trip) = $0 { trip } else { nil } }
        let stops = events.compactMap { if case .stop(let stop) = $0 { stop } else { nil } }
        let day = Fixes.time(0)
        let report = DailyReport(
            trips: trips, stops: stops, zoneEvents: zoneEvents, from: day,
            to: UTCTimestamp(millisecondsSince1970: day.millisecondsSince1970 + 86_400_000))
        #expect(report.trips == 3)
        #expect(abs(report.distanceMetres - 9_300) <= 9_300 * 0.02, "\(report.distanceMetres) m of 9,300")
        #expect(abs(report.drivingSeconds - 720) <= 30, "\(report.drivingSeconds) s of 720")
        #expect(abs(report.stoppedSeconds - 1_020) <= 60, "\(report.stoppedSeconds) s of 1,020")
        #expect(abs(report.maximumSpeed - 15) < 0.01)
        #expect(report.zonesVisited == ["Depot", "Customer"])

        let nextDay = DailyReport(
            trips: trips, stops: stops, zoneEvents: zoneEvents,
            from: UTCTimestamp(millisecondsSince1970: day.millisecondsSince1970 + 86_400_000),
            to: UTCTimestamp(millisecondsSince1970: day.millisecondsSince1970 + 2 * 86_400_000))
        #expect(nextDay == DailyReport(trips: [], stops: [], zoneEvents: [], from: day, to: day), "nothing the next day")
    }
}
