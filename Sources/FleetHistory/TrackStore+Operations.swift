import FleetCore
import FleetOperations
import FleetProtocol
import Foundation
import GNSS
import Logging
import PostgresNIO

extension TrackStore {
    /// Schema version 5: the trips and stops of each vehicle (`fleetcast_segments`, one row a
    /// trip or stop, keyed by its start) and its zone events (`fleetcast_zone_events`, keyed by
    /// the instant, zone and kind). A few rows a vehicle a day: not partitioned; retention
    /// deletes what ended before the first day kept.
    static let operationsMigration = [
        """
        CREATE TABLE fleetcast_segments (
            vehicle text NOT NULL,
            kind text NOT NULL CHECK (kind IN ('trip', 'stop')),
            start_time timestamptz NOT NULL,
            end_time timestamptz NOT NULL,
            start_lat double precision NOT NULL,
            start_lon double precision NOT NULL,
            end_lat double precision NOT NULL,
            end_lon double precision NOT NULL,
            distance_m double precision NOT NULL,
            max_speed double precision NOT NULL,
            decided_at timestamptz NOT NULL,
            PRIMARY KEY (vehicle, kind, start_time)
        )
        """,
        "CREATE INDEX fleetcast_segments_vehicle_end ON fleetcast_segments (vehicle, end_time)",
        "CREATE INDEX fleetcast_segments_vehicle_decided ON fleetcast_segments (vehicle, decided_at)",
        """
        CREATE TABLE fleetcast_zone_events (
            vehicle text NOT NULL,
            zone text NOT NULL,
            event text NOT NULL CHECK (event IN ('enter', 'exit')),
            time timestamptz NOT NULL,
            lat double precision NOT NULL,
            lon double precision NOT NULL,
            PRIMARY KEY (vehicle, time, zone, event)
        )
        """,
        "CREATE INDEX fleetcast_zone_events_time ON fleetcast_zone_events (time)",
    ]

    /// The end of `vehicle`'s stored trip decided last before `time` (by the time of the fix
    /// that closed it: fixes from `time` on cannot have changed it).
    package func settledTripEnd(vehicle: String, decidedBefore time: UTCTimestamp) async throws -> UTCTimestamp? {
        let rows = try await client.query(
            """
            SELECT end_time FROM fleetcast_segments WHERE vehicle = \(vehicle) AND kind = 'trip' AND decided_at < \(Date(time))
            ORDER BY decided_at DESC LIMIT 1
            """, logger: logger)
        var found: UTCTimestamp?
        for try await end in rows.decode(Date.self) { found = UTCTimestamp(end) }
        return found
    }

    /// Where a rebuild of `vehicle` from `from` starts when it reads at most `maximumFixes`:
    /// `from`, or the time of the newest `maximumFixes`-th fix after it (one index range of
    /// `(vehicle, time)`, newest first: the attack was a rebuild that read 1.4 million fixes
    /// inside the write).
    package func rebuildStart(vehicle: VehicleID, from: UTCTimestamp, maximumFixes: Int) async throws -> UTCTimestamp {
        let rows = try await client.query(
            """
            SELECT time FROM fleetcast_fixes WHERE vehicle = \(vehicle.rawValue) AND time >= \(Date(from))
            ORDER BY time DESC OFFSET \(Int64(max(0, maximumFixes - 1))) LIMIT 1
            """, logger: logger)
        var start = from
        for try await time in rows.decode(Date.self) { start = max(from, UTCTimestamp(time)) }
        return start
    }

    /// The zones `vehicle` was in just before `time`, by its stored events (a zone whose last
    /// event before then is an enter).
    package func zonesInside(vehicle: String, before time: UTCTimestamp) async throws -> Set<String> {
        let rows = try await client.query(
            """
            SELECT DISTINCT ON (zone) zone, event FROM fleetcast_zone_events
            WHERE vehicle = \(vehicle) AND time < \(Date(time)) ORDER BY zone, time DESC, event
            """, logger: logger)
        var inside = Set<String>()
        for try await (zone, event) in rows.decode((String, String).self) where event == "enter" { inside.insert(zone) }
        return inside
    }

    /// Stores what `vehicle`'s operations closed, in one transaction, and returns the zone
    /// events that were not stored before (oldest first: the ones to announce).
    ///
    /// With `from` (a rebuild from that instant), what was derived from then on is replaced:
    /// the trips and stops that end after it are deleted first, and the zone events at or
    /// after it that the rebuild did not find again.
    package func storeOperations(
        vehicle: String, closed: [VehicleOperations.Closed], zoneEvents: [ZoneEvent], replacingFrom from: UTCTimestamp? = nil
    ) async throws -> [StoredZoneEvent] {
        let logger = self.logger
        let events = zoneEvents.map { StoredZoneEvent(vehicle: vehicle, $0) }
        return try await client.withTransaction(logger: logger) { connection in
            var known = Set<StoredZoneEvent>()
            if let from {
                try await connection.query(
                    "DELETE FROM fleetcast_segments WHERE vehicle = \(vehicle) AND end_time > \(Date(from))", logger: logger)
                let wanted = Set(events)
                let rows = try await connection.query(
                    "SELECT zone, event, time FROM fleetcast_zone_events WHERE vehicle = \(vehicle) AND time >= \(Date(from))",
                    logger: logger)
                var stale: [(String, String, Date)] = []
                for try await (zone, event, time) in rows.decode((String, String, Date).self) {
                    guard let kind = ZoneEvent.Kind(rawValue: event) else { continue }
                    let stored = StoredZoneEvent(
                        vehicle: vehicle, zone: zone, kind: kind, time: UTCTimestamp(time), latitude: 0, longitude: 0)
                    if wanted.contains(stored) { known.insert(stored) } else { stale.append((zone, event, time)) }
                }
                for (zone, event, time) in stale {
                    try await connection.query(
                        """
                        DELETE FROM fleetcast_zone_events WHERE vehicle = \(vehicle) AND zone = \(zone) AND event = \(event) AND time = \(time)
                        """, logger: logger)
                }
            }
            for closed in closed {
                let row = SegmentRow(closed.segment)
                try await connection.query(
                    """
                    INSERT INTO fleetcast_segments
                        (vehicle, kind, start_time, end_time, start_lat, start_lon, end_lat, end_lon, distance_m, max_speed, decided_at)
                    VALUES (\(vehicle), \(row.kind), \(Date(row.start.time)), \(Date(row.end.time)), \(row.start.latitude),
                        \(row.start.longitude), \(row.end.latitude), \(row.end.longitude), \(row.distance), \(row.maximumSpeed),
                        \(Date(closed.decidedAt)))
                    ON CONFLICT (vehicle, kind, start_time) DO UPDATE SET end_time = excluded.end_time,
                        start_lat = excluded.start_lat, start_lon = excluded.start_lon, end_lat = excluded.end_lat,
                        end_lon = excluded.end_lon, distance_m = excluded.distance_m, max_speed = excluded.max_speed,
                        decided_at = excluded.decided_at
                    """, logger: logger)
            }
            var new: [StoredZoneEvent] = []
            for event in events where !known.contains(event) {
                let rows = try await connection.query(
                    """
                    INSERT INTO fleetcast_zone_events (vehicle, zone, event, time, lat, lon)
                    VALUES (\(vehicle), \(event.zone), \(event.kind.rawValue), \(Date(event.time)), \(event.latitude), \(event.longitude))
                    ON CONFLICT DO NOTHING RETURNING 1
                    """, logger: logger)
                var inserted = false
                for try await _ in rows.decode(Int32.self) { inserted = true }
                if inserted { new.append(event) }
            }
            return new
        }
    }

    /// `vehicle`'s stored trips and stops that began in `[since, until)`, in time order.
    package func segments(vehicle: String, since: UTCTimestamp, until: UTCTimestamp) async throws -> [TripEvent] {
        let rows = try await client.query(
            """
            SELECT kind, start_time, end_time, start_lat, start_lon, end_lat, end_lon, distance_m, max_speed
            FROM fleetcast_segments WHERE vehicle = \(vehicle) AND start_time >= \(Date(since)) AND start_time < \(Date(until))
            ORDER BY start_time, kind DESC
            """, logger: logger)
        var segments: [TripEvent] = []
        for try await (kind, start, end, startLat, startLon, endLat, endLon, distance, maximumSpeed) in rows.decode(
            (String, Date, Date, Double, Double, Double, Double, Double, Double).self)
        {
            let first = TripPoint(time: UTCTimestamp(start), latitude: startLat, longitude: startLon)
            let last = TripPoint(time: UTCTimestamp(end), latitude: endLat, longitude: endLon)
            if kind == "trip" {
                segments.append(.trip(Trip(start: first, end: last, distanceMetres: distance, maximumSpeed: maximumSpeed)))
            } else {
                segments.append(.stop(Stop(position: first, end: last)))
            }
        }
        return segments
    }

    /// The zone events of `vehicle` (every vehicle when nil) in `[since, until)`, in time order.
    package func zoneEvents(vehicle: String?, since: UTCTimestamp, until: UTCTimestamp) async throws -> [StoredZoneEvent] {
        let rows = try await client.query(
            """
            SELECT vehicle, zone, event, time, lat, lon FROM fleetcast_zone_events
            WHERE (\(vehicle)::text IS NULL OR vehicle = \(vehicle)) AND time >= \(Date(since)) AND time < \(Date(until))
            ORDER BY time, vehicle, zone, event
            """, logger: logger)
        var events: [StoredZoneEvent] = []
        for try await (vehicle, zone, event, time, latitude, longitude) in rows.decode((String, String, String, Date, Double, Double).self)
        {
            guard let kind = ZoneEvent.Kind(rawValue: event) else { continue }
            events.append(
                StoredZoneEvent(
                    vehicle: vehicle, zone: zone, kind: kind, time: UTCTimestamp(time), latitude: latitude, longitude: longitude))
        }
        return events
    }

    /// Deletes the trips and stops that ended, and the zone events, before `keptFrom` (the
    /// retention's first day kept); returns how many rows went.
    package func deleteOperations(before keptFrom: UTCTimestamp) async throws -> Int {
        var count = 0
        for statement: PostgresQuery in [
            "DELETE FROM fleetcast_segments WHERE end_time < \(Date(keptFrom)) RETURNING 1",
            "DELETE FROM fleetcast_zone_events WHERE time < \(Date(keptFrom)) RETURNING 1",
        ] {
            for try await _ in try await client.query(statement, logger: logger).decode(Int32.self) { count += 1 }
        }
        return count
    }
}

/// A trip or stop as one row of `fleetcast_segments`.
private struct SegmentRow {
    var kind: String
    var start: TripPoint
    var end: TripPoint
    var distance: Double
    var maximumSpeed: Double

    init(_ segment: TripEvent) {
        switch segment {
        case .trip(let trip):
            (kind, start, end, distance, maximumSpeed) = ("trip", trip.start, trip.end, trip.distanceMetres, trip.maximumSpeed)
        case .stop(let stop):
            var position = stop.position
            position.time = stop.start
            (kind, start, end, distance, maximumSpeed) = ("stop", position, stop.end, 0, 0)
        }
    }
}

extension TrackStore {
    /// `vehicle`'s trips and stops that began in `[since, until)`, in time order: those stored
    /// up to its last trip's end before `until`, and after it what its stored fixes up to
    /// `until` make under `rules`, the last one open (a trip or stop in progress, as far as the
    /// last fix). Whether the recorder has caught up or not, the listing is the same.
    package func listSegments(
        vehicle: VehicleID, since: UTCTimestamp, until: UTCTimestamp, rules: TripRules, maximumFixes: Int = maximumDerivedFixes
    ) async throws
        -> [ListedSegment]
    {
        let tripEnd = try await settledTripEnd(vehicle: vehicle.rawValue, decidedBefore: until)
        let from = VehicleOperations.resumePoint(after: tripEnd, reaching: until)
        var listed = try await segments(vehicle: vehicle.rawValue, since: since, until: min(until, from))
            .map { ListedSegment(segment: $0, open: false) }
        var operations = VehicleOperations(rules: rules, zones: nil)
        var derived: [TripEvent] = []
        // Bounded: a vehicle that made no trip for days, at 20 Hz, is not read whole per request.
        try await track(vehicle: vehicle, since: from, until: until, limit: maximumFixes) { point in
            derived += operations.replay(
                TripPoint(time: point.time, latitude: point.latitude, longitude: point.longitude, speed: point.speed)
            ).0.map(\.segment)
        }
        listed += derived.map { ListedSegment(segment: $0, open: false) }
        // What finishing the open segment closes: a stop still held back, then the open one.
        let closing = operations.open()
        listed += closing.enumerated().map { ListedSegment(segment: $1, open: $0 == closing.count - 1) }
        return listed.filter { $0.start >= since && $0.start < until }
    }

    /// The most fixes one listing derives its open segments from (after the last stored trip):
    /// about six days at 1 Hz. Past it, what is open is derived as far as that.
    package static let maximumDerivedFixes = 500_000

    /// The vehicles with a fix stored in `[since, until)`, by id.
    package func vehicles(since: UTCTimestamp, until: UTCTimestamp) async throws -> [String] {
        var vehicles: [String] = []
        let rows = try await client.query(
            "SELECT DISTINCT vehicle FROM fleetcast_fixes WHERE time >= \(Date(since)) AND time < \(Date(until)) ORDER BY vehicle",
            logger: logger)
        for try await vehicle in rows.decode(String.self) { vehicles.append(vehicle) }
        return vehicles
    }
}
