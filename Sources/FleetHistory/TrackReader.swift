import FleetCore
import FleetHistoryCore
import FleetProtocol
import FleetWatch
import Foundation
import GNSS
import Logging
import PostgresNIO

/// Reading the track history: a vehicle's fixes between two times, page by page, PostgreSQL's
/// plan of it, the vehicles stored, and which message numbers are missing (``completeness(vehicle:since:until:)``).
/// One of the four parts of a ``TrackStore``.
public struct TrackReader: Sendable {
    let database: TrackDatabase
    var client: PostgresClient { database.client }
    var logger: Logger { database.logger }

    /// Whether the rows of schema 3 not yet moved are to be read beside the partitions.
    func unpartitionedTables() async throws -> (fixes: Bool, headings: Bool) {
        try await TrackSchema(database: database).unpartitionedTables()
    }

    /// The vehicle's fixes with `since ≤ time < until`, in time order (then `seq`), at most
    /// `limit` of them when given, handed to `body` one at a time as they arrive from the
    /// server (a year of 1 Hz fixes is never held in memory at once).
    ///
    /// The points come in pages of `pageSize` (one round trip each).
    package func track(
        vehicle: VehicleID, since: UTCTimestamp, until: UTCTimestamp, limit: Int? = nil, pageSize: Int = trackChunk,
        _ body: (TrackPoint) throws -> Void
    ) async throws {
        // Pages of ``trackChunk`` points, each one row of column arrays, the next page after
        // the last point of the one before (keyset paging along the `(vehicle, time)` index):
        // decoding one row per point costs postgres-nio about 4 µs, an array element a few ns,
        // and no page sorts more than its own points. NaN and −1 stand for NULL, as on the way in.
        let unpartitioned = try await unpartitionedTables().fixes
        var remaining = max(0, limit ?? Int.max)
        var after: (time: String, seq: Int64)?
        while remaining > 0 {
            let page = min(remaining, max(1, pageSize))
            let rows = try await client.query(
                Self.trackQuery(vehicle: vehicle, since: since, until: until, after: after, page: page, unpartitioned: unpartitioned),
                logger: logger)
            var count = 0
            for try await (seqs, millis, lats, lons, altitudes, speeds, tracks, modes, sats, ephs, headings, backlogs, last) in rows.decode(
                (
                    [Int64]?, [Int64]?, [Double]?, [Double]?, [Double]?, [Double]?, [Double]?, [Int16]?, [Int16]?, [Double]?, [Double]?,
                    [Bool]?, String?
                ).self)
            {
                guard let seqs, let millis, let lats, let lons, let altitudes, let speeds, let tracks, let modes, let sats, let ephs,
                    let headings, let backlogs, let last
                else { break }  // no point left: array_agg of nothing is NULL
                count = seqs.count
                guard
                    [millis.count, lats.count, lons.count, altitudes.count, speeds.count, tracks.count, modes.count, sats.count]
                        .allSatisfy({ $0 == count }), ephs.count == count, headings.count == count, backlogs.count == count, count > 0
                else { throw TrackReadError.ragged }
                func known(_ value: Double) -> Double? { value.isNaN ? nil : value }
                // array_agg keeps the order rows reach it, which PostgreSQL does not promise: put
                // back in (time, seq) order if it is not.
                var order = Array(0..<count)
                if zip(order, order.dropFirst()).contains(where: { (millis[$0], seqs[$0]) > (millis[$1], seqs[$1]) }) {
                    order.sort { (millis[$0], seqs[$0]) < (millis[$1], seqs[$1]) }
                }
                for i in order {
                    try body(
                        TrackPoint(
                            seq: UInt64(clamping: seqs[i]),
                            time: UTCTimestamp(millisecondsSince1970: millis[i]),
                            latitude: lats[i], longitude: lons[i], altitudeMSL: known(altitudes[i]), speed: known(speeds[i]),
                            track: known(tracks[i]), mode: Int(modes[i]), satellites: sats[i] < 0 ? nil : Int(sats[i]),
                            eph: known(ephs[i]), heading: known(headings[i]), backlog: backlogs[i]))
                }
                // The next page starts after this one's last point: its time exactly (as text, to
                // the microsecond; the milliseconds above are rounded) and its seq.
                after = (last, seqs[order[count - 1]])
            }
            remaining -= count
            if count < page { break }
        }
    }

    /// Points per page of ``track(vehicle:since:until:limit:pageSize:_:)``: 8,192, about 700 kB.
    package static let trackChunk = 8_192

    /// A track result whose column arrays differ in length (never from this store's query).
    enum TrackReadError: Error { case ragged }

    /// PostgreSQL's plan of the first page of ``track(vehicle:since:until:limit:pageSize:_:)``, as run
    /// (`EXPLAIN (ANALYZE, BUFFERS)`): only the partitions of the days asked for, read by their
    /// `(vehicle, time)` index.
    package func trackPlan(vehicle: VehicleID, since: UTCTimestamp, until: UTCTimestamp) async throws -> String {
        var lines: [String] = []
        let query = Self.trackQuery(
            vehicle: vehicle, since: since, until: until, after: nil, page: Self.trackChunk,
            unpartitioned: try await unpartitionedTables().fixes, explain: true)
        for try await line in try await client.query(query, logger: logger).decode(String.self) { lines.append(line) }
        return lines.joined(separator: "\n")
    }

    /// One page of `vehicle`'s fixes in `[since, until)` after `after` (time, as PostgreSQL
    /// writes it, and seq) in (time, seq) order, as one row of column arrays and the page's last
    /// time; the rows of schema 3 not yet moved into partitions are read beside them.
    private static func trackQuery(
        vehicle: VehicleID, since: UTCTimestamp, until: UTCTimestamp, after: (time: String, seq: Int64)?, page: Int,
        unpartitioned: Bool, explain: Bool = false
    ) -> PostgresQuery {
        let columns = "seq, time, lat, lon, alt_msl, speed, track, mode, sats, eph, heading, backlog"
        let table =
            unpartitioned
            ? "(SELECT \(columns), vehicle FROM fleetcast_fixes UNION ALL SELECT \(columns), vehicle FROM fleetcast_fixes_unpartitioned) f"
            : "fleetcast_fixes"
        var bindings = PostgresBindings(capacity: 6)
        bindings.append(vehicle.rawValue)
        bindings.append(Date(since))
        bindings.append(Date(until))
        bindings.append(after?.time ?? "-infinity")
        bindings.append(after?.seq ?? Int64.min)
        bindings.append(Int64(page))
        return PostgresQuery(
            unsafeSQL: (explain ? "EXPLAIN (ANALYZE, BUFFERS) " : "") + """
                SELECT array_agg(seq), array_agg(round(date_part('epoch', time) * 1000)::bigint), array_agg(lat), array_agg(lon),
                    array_agg(coalesce(alt_msl, 'NaN')), array_agg(coalesce(speed, 'NaN')), array_agg(coalesce(track, 'NaN')),
                    array_agg(mode), array_agg(coalesce(sats, -1::smallint)), array_agg(coalesce(eph, 'NaN')),
                    array_agg(coalesce(heading, 'NaN')), array_agg(backlog), max(time)::text
                FROM (
                    SELECT \(columns) FROM \(table)
                    WHERE vehicle = $1 AND time >= $2 AND time < $3
                        AND (time, seq) > ($4::timestamptz, $5)
                    ORDER BY time, seq LIMIT $6
                ) page
                """, binds: bindings)
    }

    /// The vehicles with at least one stored fix, sorted.
    package func vehicles() async throws -> [String] {
        var vehicles: [String] = []
        let query =
            try await unpartitionedTables().fixes
            ? "SELECT vehicle FROM fleetcast_fixes UNION SELECT vehicle FROM fleetcast_fixes_unpartitioned ORDER BY vehicle"
            : "SELECT DISTINCT vehicle FROM fleetcast_fixes ORDER BY vehicle"
        for try await vehicle in try await client.query(PostgresQuery(unsafeSQL: query), logger: logger).decode(String.self) {
            vehicles.append(vehicle)
        }
        return vehicles
    }
}
