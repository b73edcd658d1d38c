import GNSS

/// A zone event as stored: which vehicle, and what it did at which zone (`FleetOperations`'
/// ``ZoneEvent``).
package struct StoredZoneEvent: Sendable, Equatable, Hashable {
    package var vehicle: String
    package var zone: String
    package var kind: ZoneEvent.Kind
    /// The fix that decided it (time to the millisecond, degrees).
    package var time: UTCTimestamp
    package var latitude: Double
    package var longitude: Double

    package init(vehicle: String, _ event: ZoneEvent) {
        self.init(
            vehicle: vehicle, zone: event.zone, kind: event.kind, time: event.point.time, latitude: event.point.latitude,
            longitude: event.point.longitude)
    }

    package init(vehicle: String, zone: String, kind: ZoneEvent.Kind, time: UTCTimestamp, latitude: Double, longitude: Double) {
        (self.vehicle, self.zone, self.kind, self.time, self.latitude, self.longitude) = (vehicle, zone, kind, time, latitude, longitude)
    }

    // Equal when the key is (a row's position may be read back rounded).
    package static func == (a: Self, b: Self) -> Bool {
        (a.vehicle, a.zone, a.kind, a.time) == (b.vehicle, b.zone, b.kind, b.time)
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(vehicle)
        hasher.combine(zone)
        hasher.combine(kind)
        hasher.combine(time.millisecondsSince1970)
    }
}

/// A trip or stop as listed: stored, or still open at the end of the range (derived from the
/// stored fixes; the next fixes may extend it).
package struct ListedSegment: Sendable, Equatable {
    package var segment: TripEvent
    package var open: Bool

    /// `segment`, `open` while it goes on.
    package init(segment: TripEvent, open: Bool) {
        (self.segment, self.open) = (segment, open)
    }

    package var start: UTCTimestamp {
        switch segment {
        case .trip(let trip): trip.start.time
        case .stop(let stop): stop.start
        }
    }
}
