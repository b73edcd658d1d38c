import FleetCore
import FleetHistoryCore
import FleetProtocol
import FleetcastCore
import Foundation
import GNSS
import Logging
import PostgresNIO

/// What a ``TrackStore`` and its copies know of the daily partitions, under one lock: the
/// days that have one, the first day retention keeps and the vehicles' budgets
/// (``HistoryAdmission``), and what was refused.
final class TrackPartitionState: Sendable {
    struct State {
        /// The days known, the first day kept and the budgets.
        var admission = HistoryAdmission()
        var refusals = TrackRefusals()
        /// Whether the tables of schema 3 are known gone (they never come back).
        var unpartitionedGone = false
        /// Per table of schema 3: its days have their partitions, and the page the move is at.
        var moveReady: Set<String> = []
        var movePage: [String: Int64] = [:]
    }

    let state = SanitizerVisibleMutex(State())
}

/// The daily partitions of the track history and its retention: which days have one, making
/// those a batch needs (``HistoryAdmission``'s verdicts), the days made ahead, and dropping
/// the days retention no longer keeps. One of the four parts of a ``TrackStore``.
public struct TrackPartitions: Sendable {
    let database: TrackDatabase
    var client: PostgresClient { database.client }
    var logger: Logger { database.logger }
    var partitionState: TrackPartitionState { database.partitionState }

    /// The most days after the recorder's clock a message may be timed and still get its day's
    /// partition (``HistoryAdmission/maximumDaysAhead``).
    package static let maximumDaysAhead = Int(HistoryAdmission.maximumDaysAhead)

    /// The most daily partitions of each table this store creates
    /// (``HistoryAdmission/maximumPartitions``).
    package static let maximumPartitions = HistoryAdmission.maximumPartitions

    /// The most days made in one transaction: each takes about ten locks (two tables, their
    /// indexes, the parents), and PostgreSQL's default lock table holds 64 a transaction on
    /// average; a batch spread over a thousand days once exhausted it ("out of shared memory").
    package static let partitionsPerTransaction = 4

    /// The days created ahead at start and at each maintenance: today and the next three, so
    /// that midnight never waits for a partition.
    package static let partitionsAhead = 3

    /// A constant key for the advisory lock held while partitions are made (for the
    /// transaction) or dropped (for the session: a concurrent detach runs outside any
    /// transaction) (ASCII "fleetpar").
    static let partitionLockKey: Int64 = 0x666c_6565_7470_6172

    /// The two partitioned tables and the column each is partitioned by.
    static let partitionedTables: [(table: String, key: String)] = [("fleetcast_fixes", "time"), ("fleetcast_headings", "placed_at")]

    /// The name of `table`'s partition for `day`.
    static func partitionName(_ table: String, _ day: HistoryDay) -> String { "\(table)_p\(day.compact)" }

    /// What was refused so far (see ``TrackRefusals``).
    package var refusals: TrackRefusals { partitionState.state.withLock { $0.refusals } }

    /// The first day kept by the retention this store last applied, if any.
    package var keptFrom: HistoryDay? { partitionState.state.withLock { $0.admission.keptFrom } }

    /// The days that have a partition of `fleetcast_fixes` (attached), from the catalog.
    package func partitionDays() async throws -> Set<HistoryDay> {
        var days = Set<HistoryDay>()
        let rows = try await client.query(
            """
            SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = 'fleetcast_fixes'::regclass AND NOT i.inhdetachpending
            """, logger: logger)
        for try await name in rows.decode(String.self) {
            if let day = HistoryDay(compact: name.split(separator: "_p").last ?? "") { days.insert(day) }
        }
        return days
    }

    /// The verdict on each vehicle's day of a batch, making the partitions it needs (see
    /// ``HistoryAdmission``); `force` (the days ahead, the move of rows already stored) ignores
    /// the clock, the partition limit and the vehicles' budgets, never retention.
    func admit(
        _ days: Set<HistoryAdmission.VehicleDay>, now: UTCTimestamp, force: Bool = false
    ) async throws -> [HistoryAdmission.VehicleDay: HistoryAdmission.Verdict] {
        if partitionState.state.withLock({ $0.admission.known == nil }) {
            // Read again from the catalog (at first, and after a write found a day without its
            // partition: another recorder's retention dropped it), with the database's horizon.
            let found = try await partitionDays()
            let horizon = try await retentionHorizon().map(HistoryDay.init)
            let spent = try await partitionsMadeLately()
            partitionState.state.withLock { state in
                state.admission.known = found
                if let horizon { state.admission.keptFrom = max(state.admission.keptFrom ?? horizon, horizon) }
                for (vehicle, count, at) in spent { state.admission.spent(count, by: vehicle, at: at) }
            }
        }
        let (verdicts, missing, charges) = partitionState.state.withLock { state in
            let (verdicts, missing) = state.admission.admit(days, now: now, force: force)
            return (verdicts, missing, state.admission.charges)
        }
        if !missing.isEmpty { try await createPartitions(missing, charges: charges) }
        return verdicts
    }

    /// Per vehicle, the partitions its messages made within the last day and when the last was
    /// (`fleetcast_partition_makers`).
    private func partitionsMadeLately() async throws -> [(VehicleID, Int, Int64)] {
        var spent: [(VehicleID, Int, Int64)] = []
        let rows = try await client.query(
            """
            SELECT vehicle, count(*), (extract(epoch FROM max(made_at)) * 1000)::bigint FROM fleetcast_partition_makers
            WHERE made_at > now() - interval '1 day' GROUP BY vehicle
            """, logger: logger)
        for try await (vehicle, count, at) in rows.decode((String, Int64, Int64).self) {
            if let id = VehicleID(vehicle) { spent.append((id, Int(count), at)) }
        }
        return spent
    }

    /// Makes `days`' partitions in both tables, ``partitionsPerTransaction`` days a
    /// transaction (each day known as soon as its transaction commits: an interrupted call goes
    /// on where it was), each one made apart and then attached (which locks the parent only
    /// against other attaches and drops, never against writes or reads), under an advisory
    /// lock so that two recorders never make the same one.
    func createPartitions(_ days: [HistoryDay], charges: [HistoryDay: VehicleID] = [:]) async throws {
        var start = 0
        while start < days.count {
            let part = Array(days[start..<min(start + Self.partitionsPerTransaction, days.count)])
            try await createPartitionsInOneTransaction(part, charges: charges)
            partitionState.state.withLock { state in state.admission.made(part) }
            start += part.count
        }
        logger.debug("Partitions made", metadata: ["days": "\(days.map(\.description).joined(separator: " "))"])
    }

    private func createPartitionsInOneTransaction(_ days: [HistoryDay], charges: [HistoryDay: VehicleID]) async throws {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(Self.partitionLockKey))", logger: logger)
            // Who made them, for a restarted recorder's budgets (two days kept).
            let charged = days.compactMap { day in charges[day].map { (Date(day.start), $0.rawValue) } }
            if !charged.isEmpty {
                try await connection.query(
                    """
                    INSERT INTO fleetcast_partition_makers (day, vehicle)
                    SELECT (d AT TIME ZONE 'UTC')::date, v FROM unnest(\(charged.map(\.0)), \(charged.map(\.1))) AS made (d, v)
                    ON CONFLICT (day) DO NOTHING
                    """, logger: logger)
                try await connection.query(
                    "DELETE FROM fleetcast_partition_makers WHERE made_at < now() - interval '2 days'", logger: logger)
            }
            // Never a day retention has dropped (this recorder's view of it may be a day late).
            var keptFrom: Date?
            for try await kept in try await connection.query("SELECT kept_from FROM fleetcast_retention", logger: logger).decode(Date.self)
            {
                keptFrom = kept
            }
            for day in days where keptFrom.map({ Date(day.start) >= $0 }) ?? true {
                for (table, _) in Self.partitionedTables {
                    let name = Self.partitionName(table, day)
                    var attached = false
                    for try await _ in try await connection.query(
                        "SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(\(name)) AND NOT inhdetachpending", logger: logger
                    ).decode(Int32.self) { attached = true }
                    if attached { continue }
                    let from = day.start.millisecondsSince1970 / 1000
                    let to = day.adding(1).start.millisecondsSince1970 / 1000
                    try await connection.query(
                        PostgresQuery(
                            unsafeSQL:
                                "CREATE TABLE IF NOT EXISTS \(name) (LIKE \(table) INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)"
                        ),
                        logger: logger)
                    try await connection.query(
                        PostgresQuery(
                            unsafeSQL:
                                "ALTER TABLE \(table) ATTACH PARTITION \(name) FOR VALUES FROM (to_timestamp(\(from))) TO (to_timestamp(\(to)))"
                        ), logger: logger)
                }
            }
        }
    }

    /// `day` of no vehicle in particular (the days made ahead, the move of schema 3's rows:
    /// forced, never charged to a vehicle).
    static func anyVehicle(_ day: HistoryDay) -> HistoryAdmission.VehicleDay { HistoryAdmission.VehicleDay(VehicleID("-")!, day) }

    /// Makes the partitions of yesterday, today and the next ``partitionsAhead`` days that are
    /// missing (a message timed at 23:59:59.9 on a receiver a little behind, and the days to come).
    package func preparePartitions(now: UTCTimestamp) async throws {
        let today = HistoryDay(now)
        _ = try await admit(Set((-1...Int64(Self.partitionsAhead)).map { Self.anyVehicle(today.adding($0)) }), now: now, force: true)
    }

    /// Applies `retention` at `now`: records the first day kept (``keptFrom``, and in
    /// `fleetcast_retention`, which `gaps` reads), from then on refuses messages older than it,
    /// and drops the partitions of the days before it, whole: each detached without blocking
    /// writes (`DETACH PARTITION … CONCURRENTLY`), then dropped. Returns the days dropped.
    @discardableResult
    package func applyRetention(_ retention: HistoryRetention, now: UTCTimestamp) async throws -> [HistoryDay] {
        guard let keptFrom = retention.keptFrom(now: now) else { return [] }
        partitionState.state.withLock { state in state.admission.keptFrom = max(state.admission.keptFrom ?? keptFrom, keptFrom) }
        // One connection, under the partitions' advisory lock for the session (a concurrent
        // detach cannot run in a transaction): no other recorder makes or drops a partition
        // meanwhile, nor attaches again a table detached here and not yet dropped.
        let dropped = try await client.withConnection { connection in
            try await connection.query("SELECT pg_advisory_lock(\(Self.partitionLockKey))", logger: logger)
            do {
                let dropped = try await dropPartitions(before: keptFrom, connection)
                try await connection.query("SELECT pg_advisory_unlock(\(Self.partitionLockKey))", logger: logger)
                return dropped
            } catch {
                // The connection may go back to the pool: never with the lock held.
                _ = try? await connection.query("SELECT pg_advisory_unlock(\(Self.partitionLockKey))", logger: logger)
                throw error
            }
        }
        partitionState.state.withLock { state in state.admission.known?.subtract(dropped) }
        return dropped
    }

    private func dropPartitions(before keptFrom: HistoryDay, _ connection: PostgresConnection) async throws -> [HistoryDay] {
        try await connection.query(
            """
            INSERT INTO fleetcast_retention (id, kept_from) VALUES (true, \(Date(keptFrom.start)))
            ON CONFLICT (id) DO UPDATE SET kept_from = greatest(fleetcast_retention.kept_from, excluded.kept_from), applied_at = now()
            """, logger: logger)
        // Attached partitions, half-detached ones (a detach interrupted), and ones detached and
        // not yet dropped.
        var expired: [(name: String, parent: String?, pending: Bool, day: HistoryDay)] = []
        let rows = try await connection.query(
            """
            SELECT c.relname, p.relname, coalesce(i.inhdetachpending, false) FROM pg_class c
            LEFT JOIN pg_inherits i ON i.inhrelid = c.oid LEFT JOIN pg_class p ON p.oid = i.inhparent
            WHERE c.relkind = 'r' AND pg_table_is_visible(c.oid) AND c.relname ~ '^fleetcast_(fixes|headings)_p[0-9]{8}$'
            """, logger: logger)
        for try await (name, parent, pending) in rows.decode((String, String?, Bool).self) {
            guard let day = HistoryDay(compact: name.split(separator: "_p").last ?? ""), day < keptFrom else { continue }
            // The names come from the catalog but match the pattern above: letters, digits, `_`.
            guard parent.map({ Self.partitionedTables.map(\.table).contains($0) }) ?? true else { continue }
            expired.append((name, parent, pending, day))
        }
        for partition in expired.sorted(by: { $0.name < $1.name }) {
            if let parent = partition.parent {
                let how = partition.pending ? "FINALIZE" : "CONCURRENTLY"
                try await connection.query(
                    PostgresQuery(unsafeSQL: "ALTER TABLE \(parent) DETACH PARTITION \(partition.name) \(how)"), logger: logger)
            }
            try await connection.query(PostgresQuery(unsafeSQL: "DROP TABLE IF EXISTS \(partition.name)"), logger: logger)
        }
        return Set(expired.map(\.day)).sorted()
    }

    /// The first instant retention keeps, as recorded by the last recorder that applied one;
    /// `nil` when none did.
    package func retentionHorizon() async throws -> UTCTimestamp? {
        var horizon: UTCTimestamp?
        for try await keptFrom in try await client.query("SELECT kept_from FROM fleetcast_retention", logger: logger).decode(Date.self) {
            horizon = UTCTimestamp(keptFrom)
        }
        return horizon
    }
}
