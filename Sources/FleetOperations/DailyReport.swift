import GNSS

/// What one vehicle did in a day, from its trips, stops and zone events: the summary
/// `fleet-watch report` gives per vehicle (distance in metres, times in seconds, speed in m/s).
package struct DailyReport: Sendable, Equatable {
    package var trips = 0
    package var distanceMetres = 0.0
    package var drivingSeconds = 0.0
    package var stoppedSeconds = 0.0
    package var maximumSpeed = 0.0
    /// The zones entered, in the order first entered.
    package var zonesVisited: [String] = []

    /// The report of the trips, stops and zone events that began on the day from `start` to
    /// `end` (UTC, `end` excluded). A trip or stop counts on the day it began, whole.
    package init(trips: [Trip], stops: [Stop], zoneEvents: [ZoneEvent], from start: UTCTimestamp, to end: UTCTimestamp) {
        func onTheDay(_ time: UTCTimestamp) -> Bool { time >= start && time < end }
        for trip in trips where onTheDay(trip.start.time) {
            self.trips += 1
            distanceMetres += trip.distanceMetres
            drivingSeconds += trip.durationSeconds
            maximumSpeed = max(maximumSpeed, trip.maximumSpeed)
        }
        for stop in stops where onTheDay(stop.start) { stoppedSeconds += stop.durationSeconds }
        for event in zoneEvents where event.kind == .enter && onTheDay(event.point.time) && !zonesVisited.contains(event.zone) {
            zonesVisited.append(event.zone)
        }
    }
}
