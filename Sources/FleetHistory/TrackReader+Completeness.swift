import FleetCore
import FleetHistoryCore
import FleetProtocol
import Foundation
import GNSS
import Logging
import PostgresNIO

extension TrackReader {
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
    /// Two statements over both tables' partitions (and the rows of schema 3 not yet moved
    /// into them), linear in the rows checked.
    package func completeness(
        vehicle: VehicleID? = nil, since: UTCTimestamp? = nil, until: UTCTimestamp? = nil
    ) async throws
        -> CompletenessReport
    {
        let scope = try await completenessScope(vehicle: vehicle, since: since, until: until)
        var runs: [SequenceRunSummary] = []
        let summaryRows = try await client.query(
            Self.completenessQuery(
                "SELECT vehicle, run, min(seq), max(seq), count(*) FROM numbered GROUP BY vehicle, run ORDER BY vehicle, run", scope),
            logger: logger)
        for try await (vehicle, run, first, last, held) in summaryRows.decode((String, Int64, Int64, Int64, Int64).self) {
            runs.append(
                SequenceRunSummary(
                    vehicle: vehicle, run: UInt64(clamping: run), first: UInt64(clamping: first), last: UInt64(clamping: last),
                    held: UInt64(clamping: held)))
        }
        var gaps: [SequenceGap] = []
        let setAside = try await quarantinedCount(vehicle: vehicle)
        guard runs.contains(where: { $0.missing > 0 }) else {
            return CompletenessReport(runs: runs, gaps: gaps, retainedFrom: scope.horizon, setAside: setAside)
        }
        let gapRows = try await client.query(Self.completenessQuery(Self.gapsSelect, scope), logger: logger)
        for try await (vehicle, run, first, last) in gapRows.decode((String, Int64, Int64, Int64).self) {
            gaps.append(
                SequenceGap(vehicle: vehicle, run: UInt64(clamping: run), first: UInt64(clamping: first), last: UInt64(clamping: last)))
        }
        return CompletenessReport(runs: runs, gaps: gaps, retainedFrom: scope.horizon, setAside: setAside)
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
        /// The tables `numbered` reads.
        var fixes: String
        var headings: String
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
                ? "(SELECT vehicle, run, seq, placed_at FROM fleetcast_headings UNION ALL SELECT vehicle, run, seq, coalesce(time, received_at) FROM fleetcast_headings_unpartitioned)"
                : "fleetcast_headings")
    }

    /// PostgreSQL's plan of the gap search, as run (`EXPLAIN (ANALYZE, BUFFERS)`): what an
    /// operator checks on a big history (and `fleetcast-bench record` prints).
    package func completenessPlan(
        vehicle: VehicleID? = nil, since: UTCTimestamp? = nil, until: UTCTimestamp? = nil
    ) async throws
        -> String
    {
        let scope = try await completenessScope(vehicle: vehicle, since: since, until: until)
        var lines: [String] = []
        for try await line in try await client.query(Self.completenessQuery(Self.gapsSelect, scope, explain: true), logger: logger)
            .decode(String.self)
        {
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }

    /// The holes: each number held whose predecessor in its run is not held.
    fileprivate static let gapsSelect = """
        SELECT vehicle, run, previous + 1, seq - 1 FROM (
            SELECT vehicle, run, seq, lag(seq) OVER (PARTITION BY vehicle, run ORDER BY seq) AS previous FROM numbered
        ) ordered
        WHERE seq > previous + 1
        ORDER BY vehicle, run, seq
        """

    /// `numbered (vehicle, run, seq)`: every message number held, of fixes and headings, of
    /// the scope's vehicle (or all); windowed, only within each run's range of `seq` of fixes
    /// timed in the window; otherwise from the retention's floor on, when there is one. Only
    /// the branches the scope needs are in the text (one constant text per kind of scope, the
    /// values bound): a branch guarded by a bound boolean is still planned over every
    /// partition, which at thousands of partitions exhausts PostgreSQL's lock table
    /// (SQLSTATE 53200), and a time bound in each branch lets the planner prune the others.
    fileprivate static func numberedCTE(_ scope: CompletenessScope, _ bindings: inout PostgresBindings) -> String {
        var count = 0
        func bind(_ date: Date) -> String {
            bindings.append(date)
            count += 1
            return "$\(count)"
        }
        var vehicleParameter: String?
        if let vehicle = scope.vehicle {
            bindings.append(vehicle)
            count += 1
            vehicleParameter = "$\(count)"
        }
        func ofVehicle(_ alias: String) -> String { vehicleParameter.map { " AND \(alias).vehicle = \($0)" } ?? "" }
        let (fixes, headings) = (scope.fixes, scope.headings)
        if scope.windowed {
            let (from, to) = (bind(scope.from), bind(scope.to))
            return """
                bounds AS (
                    SELECT fb.vehicle, fb.run, min(fb.seq) AS low, max(fb.seq) AS high FROM \(fixes) fb
                    WHERE fb.time >= \(from) AND fb.time < \(to)\(ofVehicle("fb"))
                    GROUP BY fb.vehicle, fb.run
                ),
                numbered AS (
                    SELECT f.vehicle, f.run, f.seq FROM \(fixes) f JOIN bounds b USING (vehicle, run)
                    WHERE f.seq BETWEEN b.low AND b.high\(ofVehicle("f"))
                    UNION ALL
                    SELECT h.vehicle, h.run, h.seq FROM \(headings) h JOIN bounds b USING (vehicle, run)
                    WHERE h.seq BETWEEN b.low AND b.high\(ofVehicle("h"))
                )
                """
        }
        guard scope.floor != Date.distantPast else {
            return """
                numbered AS (
                    SELECT fa.vehicle, fa.run, fa.seq FROM \(fixes) fa WHERE true\(ofVehicle("fa"))
                    UNION ALL
                    SELECT ha.vehicle, ha.run, ha.seq FROM \(headings) ha WHERE true\(ofVehicle("ha"))
                )
                """
        }
        let floor = bind(scope.floor)
        return """
            lows AS (
                SELECT fl.vehicle, fl.run, min(fl.seq) AS low FROM \(fixes) fl
                WHERE fl.time >= \(floor)\(ofVehicle("fl"))
                GROUP BY fl.vehicle, fl.run
            ),
            numbered AS (
                SELECT fa.vehicle, fa.run, fa.seq FROM \(fixes) fa WHERE fa.time >= \(floor)\(ofVehicle("fa"))
                UNION ALL
                SELECT ha.vehicle, ha.run, ha.seq FROM \(headings) ha JOIN lows l USING (vehicle, run)
                WHERE ha.placed_at >= \(floor) AND ha.seq >= l.low\(ofVehicle("ha"))
            )
            """
    }

    /// `WITH numbered … ` + `select`, its values bound: a constant text per kind of scope (but
    /// for the tables read).
    fileprivate static func completenessQuery(_ select: String, _ scope: CompletenessScope, explain: Bool = false) -> PostgresQuery {
        var bindings = PostgresBindings(capacity: 3)
        let cte = numberedCTE(scope, &bindings)
        return PostgresQuery(unsafeSQL: (explain ? "EXPLAIN (ANALYZE, BUFFERS) " : "") + "WITH " + cte + "\n" + select, binds: bindings)
    }
}
