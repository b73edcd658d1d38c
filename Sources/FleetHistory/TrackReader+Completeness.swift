import FleetCore
import FleetHistoryCore
import FleetProtocol
import Foundation
import GNSS
import Logging
import PostgresNIO

extension TrackReader {
    /// The partitions of each table that one statement of the completeness check reads at most.
    /// Each partition it reads holds a lock (and one per index it uses) to the end of its
    /// transaction, in a lock table PostgreSQL sizes at 64 per connection by default: one
    /// statement over the 4,000 partitions a fleet may have (``TrackPartitions/maximumPartitions``) failed
    /// with "out of shared memory" (SQLSTATE 53200) at about 3,000. So the check reads the
    /// partitions in spans of this many days, each span a transaction of its own, all of them
    /// in the one snapshot of the first (`pg_export_snapshot`): what a recorder writes meanwhile
    /// is in none of them, and a message stored in an earlier span while a later one is read is
    /// not reported missing.
    package static let completenessSpanPartitions = 200

    /// Which message numbers the database does not hold: per vehicle and numbering run, the
    /// `seq` ranges missing between the lowest and the highest number it holds.
    ///
    /// A vehicle numbers fixes and headings with one counter, so both tables count. With
    /// `since`/`until`, a run is checked between the lowest and highest `seq` of its fixes
    /// with `since ≤ time < until` (headings carry no time of their own where the receiver
    /// gave none). What is lost at the very end of a run, before the vehicle began a new one,
    /// cannot be told from the run's end: the vehicle's status reports its own drops.
    ///
    /// Where retention dropped old days (`fleet-watch record --retention`), what it removed is
    /// not missing: each run is checked from its first fix of the first day kept (with
    /// `since`, from the later of the two). The report says from when
    /// (``CompletenessReport/retainedFrom``).
    ///
    /// Read in spans of ``completenessSpanPartitions`` days: each gives its runs of consecutive
    /// numbers held, joined here. While schema 3's rows are being moved, every span also reads
    /// the tables they are still in (no pruning there): linear in the rows, once a span.
    package func completeness(
        vehicle: VehicleID? = nil, since: UTCTimestamp? = nil, until: UTCTimestamp? = nil
    ) async throws
        -> CompletenessReport
    {
        let scope = try await completenessScope(vehicle: vehicle, since: since, until: until)
        let setAside = try await quarantinedCount(vehicle: vehicle)
        var held = HeldNumbers()
        try await inOneSnapshot(scope) { scope, span, read in
            for try await (vehicle, run, first, last, count) in try await read(Self.islandsQuery(scope, span))
                .decode((String, Int64, Int64, Int64, Int64).self)
            {
                held.add(vehicle: vehicle, run: run, first: first, last: last, count: count)
            }
        }
        let (runs, gaps) = held.report()
        return CompletenessReport(runs: runs, gaps: gaps, retainedFrom: scope.horizon, setAside: setAside)
    }

    /// PostgreSQL's plans of the gap search, as run (`EXPLAIN (ANALYZE, BUFFERS)`), one per
    /// span of days, each under a line `-- span N of M`: what an operator checks on a big
    /// history (and `fleetcast-bench record` prints).
    package func completenessPlan(
        vehicle: VehicleID? = nil, since: UTCTimestamp? = nil, until: UTCTimestamp? = nil
    ) async throws
        -> String
    {
        let scope = try await completenessScope(vehicle: vehicle, since: since, until: until)
        var lines: [String] = []
        try await inOneSnapshot(scope) { scope, span, read in
            lines.append("-- span \(span.index + 1) of \(span.count)")
            for try await line in try await read(Self.islandsQuery(scope, span, explain: true)).decode(String.self) {
                lines.append(line)
            }
        }
        return lines.joined(separator: "\n")
    }

    /// What one completeness check reads.
    fileprivate struct CompletenessScope {
        /// The vehicle, or all.
        var vehicle: String?
        /// Whether a time window was asked for: runs are checked between their first and last
        /// fix within `[from, to)`.
        var windowed: Bool
        var from: Date
        var to: Date
        /// Without a window, the first instant retention keeps (`Date.distantPast` without one):
        /// only rows from it on count, and headings below their run's first such fix do not.
        var floor: Date
        /// The retention's first instant kept, if one was applied.
        var horizon: UTCTimestamp?
        /// The tables the check reads.
        var fixes: String
        var headings: String
        /// The days with a partition, in order.
        var days: [HistoryDay]
        /// Per run, the numbers that count (a window's or the floor's; see ``RunBounds``), once
        /// read.
        var bounds: RunBounds?
    }

    /// The range of `seq` each run is checked within: a window's lowest and highest of the
    /// fixes timed in it (of fixes and headings), or the floor's lowest (of headings).
    fileprivate struct RunBounds {
        var vehicles: [String] = []
        var runs: [Int64] = []
        var lows: [Int64] = []
        var highs: [Int64] = []
    }

    private func completenessScope(vehicle: VehicleID?, since: UTCTimestamp?, until: UTCTimestamp?) async throws -> CompletenessScope {
        let horizon = try await TrackPartitions(database: database).retentionHorizon()
        let windowed = since != nil || until != nil
        // The rows of schema 3 not yet moved are read beside the partitions.
        let unpartitioned = try await unpartitionedTables()
        return CompletenessScope(
            vehicle: vehicle?.rawValue, windowed: windowed,
            from: Date((windowed ? horizon.map { max($0, since ?? $0) } ?? since : since) ?? UTCTimestamp(Date.distantPast)),
            to: until.map(Date.init) ?? Date.distantFuture,
            floor: (windowed ? nil : horizon).map(Date.init) ?? Date.distantPast, horizon: horizon,
            fixes: unpartitioned.fixes
                ? "(SELECT vehicle, run, seq, time FROM fleetcast_fixes UNION ALL SELECT vehicle, run, seq, time FROM fleetcast_fixes_unpartitioned)"
                : "fleetcast_fixes",
            headings: unpartitioned.headings
                ? "(SELECT vehicle, run, seq, placed_at FROM fleetcast_headings UNION ALL SELECT vehicle, run, seq, coalesce(time, received_at) AS placed_at FROM fleetcast_headings_unpartitioned)"
                : "fleetcast_headings",
            days: try await TrackPartitions(database: database).partitionDays().sorted())
    }

    /// Runs `body` for each span the check reads, each in a read-only transaction of its own in
    /// the snapshot of one held open beside them; first reads the runs' bounds the same way,
    /// where the scope has some. `read` runs one statement in the span's transaction.
    private func inOneSnapshot(
        _ scope: CompletenessScope,
        _ body: (CompletenessScope, CompletenessSpan, _ read: (PostgresQuery) async throws -> PostgresRowSequence) async throws -> Void
    ) async throws {
        try await client.withConnection { holder in
            try await holder.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: logger)
            do {
                var snapshot = ""
                for try await id in try await holder.query("SELECT pg_export_snapshot()", logger: logger).decode(String.self) {
                    snapshot = id
                }
                // An identifier such as 00000003-0000001B-1, spliced into SET (which takes no
                // parameter): checked to be only that.
                guard !snapshot.isEmpty, snapshot.allSatisfy({ $0.isHexDigit || $0 == "-" }) else {
                    throw CompletenessCheckError(description: "pg_export_snapshot() gave '\(snapshot)', not a snapshot's identifier")
                }
                var scope = scope
                nonisolated(nonsending) func eachSpan(
                    from lower: Date, to upper: Date, _ body: (CompletenessSpan, PostgresConnection) async throws -> Void
                ) async throws {
                    let spans = CompletenessSpan.cut(
                        scope.days, into: Self.completenessSpanPartitions, from: UTCTimestamp(lower), to: UTCTimestamp(upper))
                    for span in spans {
                        try await client.withTransaction(logger: logger) { connection in
                            try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: logger)
                            try await connection.query("SET TRANSACTION SNAPSHOT '\(unescaped: snapshot)'", logger: logger)
                            try await body(span, connection)
                        }
                    }
                }
                if scope.windowed || scope.floor != Date.distantPast {
                    // The bounds: of the fixes timed in the window, or from the floor on.
                    let (lower, upper) = scope.windowed ? (scope.from, scope.to) : (scope.floor, Date.distantFuture)
                    var bounds: [String: [Int64: (low: Int64, high: Int64)]] = [:]
                    try await eachSpan(from: lower, to: upper) { span, connection in
                        for try await (vehicle, run, low, high) in try await connection.query(Self.boundsQuery(scope, span), logger: logger)
                            .decode((String, Int64, Int64, Int64).self)
                        {
                            let known = bounds[vehicle]?[run]
                            bounds[vehicle, default: [:]][run] = (min(known?.low ?? low, low), max(known?.high ?? high, high))
                        }
                    }
                    var runBounds = RunBounds()
                    for (vehicle, runs) in bounds {
                        for (run, bound) in runs {
                            runBounds.vehicles.append(vehicle)
                            runBounds.runs.append(run)
                            runBounds.lows.append(bound.low)
                            runBounds.highs.append(scope.windowed ? bound.high : Int64.max)
                        }
                    }
                    scope.bounds = runBounds
                    if runBounds.runs.isEmpty {
                        try await holder.query("COMMIT", logger: logger)
                        return
                    }
                }
                // A window's runs hold numbers outside it in time (a backlog, a receiver's jump):
                // every span counts. From the floor, only what is timed from it on.
                let (lower, upper) =
                    scope.windowed || scope.floor == Date.distantPast
                    ? (Date.distantPast, Date.distantFuture) : (scope.floor, Date.distantFuture)
                let bounded = scope
                try await eachSpan(from: lower, to: upper) { span, connection in
                    try await body(bounded, span) { query in try await connection.query(query, logger: logger) }
                }
                try await holder.query("COMMIT", logger: logger)
            } catch {
                _ = try? await holder.query("ROLLBACK", logger: logger)
                throw error
            }
        }
    }
}

extension TrackReader {
    /// `numbered (vehicle, run, seq)`: the message numbers held, of fixes and headings timed in
    /// the span, of the scope's vehicle (or all), within each run's bounds where the scope has
    /// them. Every branch has the span's time bound, so the planner reads only its partitions;
    /// only the conditions the scope needs are in the text (a branch guarded by a bound
    /// boolean is still planned over every partition).
    fileprivate static func numberedCTE(_ scope: CompletenessScope, _ span: CompletenessSpan, _ bindings: inout PostgresBindings) -> String
    {
        bindings.append(Date(span.lower))
        bindings.append(Date(span.upper))
        var count = 2
        var vehicleParameter: String?
        if let vehicle = scope.vehicle {
            bindings.append(vehicle)
            count += 1
            vehicleParameter = "$\(count)"
        }
        func ofVehicle(_ alias: String) -> String { vehicleParameter.map { " AND \(alias).vehicle = \($0)" } ?? "" }
        let (fixes, headings) = (scope.fixes, scope.headings)
        guard let bounds = scope.bounds else {
            return """
                numbered AS (
                    SELECT f.vehicle, f.run, f.seq FROM \(fixes) f WHERE f.time >= $1 AND f.time < $2\(ofVehicle("f"))
                    UNION ALL
                    SELECT h.vehicle, h.run, h.seq FROM \(headings) h WHERE h.placed_at >= $1 AND h.placed_at < $2\(ofVehicle("h"))
                )
                """
        }
        bindings.append(bounds.vehicles)
        bindings.append(bounds.runs)
        bindings.append(bounds.lows)
        bindings.append(bounds.highs)
        let (v, r, l, h) = ("$\(count + 1)", "$\(count + 2)", "$\(count + 3)", "$\(count + 4)")
        // A window bounds fixes and headings by the window's fixes; the floor bounds headings
        // from their run's first fix from it on, and fixes by their time alone.
        let fixCondition = scope.windowed ? " JOIN b USING (vehicle, run) WHERE f.seq BETWEEN b.low AND b.high AND" : " WHERE"
        return """
            b AS (SELECT * FROM unnest(\(v)::text[], \(r)::int8[], \(l)::int8[], \(h)::int8[]) AS b (vehicle, run, low, high)),
            numbered AS (
                SELECT f.vehicle, f.run, f.seq FROM \(fixes) f\(fixCondition) f.time >= $1 AND f.time < $2\(ofVehicle("f"))
                UNION ALL
                SELECT h.vehicle, h.run, h.seq FROM \(headings) h JOIN b USING (vehicle, run)
                WHERE h.seq BETWEEN b.low AND b.high AND h.placed_at >= $1 AND h.placed_at < $2\(ofVehicle("h"))
            )
            """
    }

    /// The span's runs of consecutive numbers held (`seq` less its rank among the distinct
    /// numbers of its run is constant along one): vehicle, run, first, last, rows.
    fileprivate static func islandsQuery(_ scope: CompletenessScope, _ span: CompletenessSpan, explain: Bool = false) -> PostgresQuery {
        var bindings = PostgresBindings(capacity: 7)
        let cte = numberedCTE(scope, span, &bindings)
        return PostgresQuery(
            unsafeSQL: (explain ? "EXPLAIN (ANALYZE, BUFFERS) " : "") + "WITH " + cte + """

                SELECT vehicle, run, min(seq), max(seq), count(*) FROM (
                    SELECT vehicle, run, seq, seq - dense_rank() OVER (PARTITION BY vehicle, run ORDER BY seq) AS island FROM numbered
                ) held
                GROUP BY vehicle, run, island
                """, binds: bindings)
    }

    /// Per run, the lowest and highest `seq` of its fixes timed in the span: vehicle, run,
    /// low, high.
    fileprivate static func boundsQuery(_ scope: CompletenessScope, _ span: CompletenessSpan) -> PostgresQuery {
        var bindings = PostgresBindings(capacity: 3)
        bindings.append(Date(span.lower))
        bindings.append(Date(span.upper))
        var vehicle = ""
        if let name = scope.vehicle {
            bindings.append(name)
            vehicle = " AND f.vehicle = $3"
        }
        return PostgresQuery(
            unsafeSQL: """
                SELECT f.vehicle, f.run, min(f.seq), max(f.seq) FROM \(scope.fixes) f
                WHERE f.time >= $1 AND f.time < $2\(vehicle)
                GROUP BY f.vehicle, f.run
                """, binds: bindings)
    }
}

/// A completeness check that PostgreSQL answered with what it should not.
struct CompletenessCheckError: Error, CustomStringConvertible {
    var description: String
}
