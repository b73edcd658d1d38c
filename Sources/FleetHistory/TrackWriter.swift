import FleetCore
import FleetHistoryCore
import FleetProtocol
import FleetWatch
import Foundation
import GNSS
import Logging
import PostgresNIO

/// Writing into the track history: batched, idempotent inserts of fixes and headings into
/// their days' partitions, each admitted first (``TrackPartitions``). One of the four parts
/// of a ``TrackStore``.
public struct TrackWriter: Sendable {
    let database: TrackDatabase

    /// The most rows one INSERT statement carries (each column goes as one array, so this
    /// bounds a statement's size, about 150 bytes a fix, not its parameter count).
    package static let maximumRowsPerStatement = 5_000

    /// What one ``write(_:)`` did: the rows that were new, and the records not stored because
    /// of their day (by index in the records written, with why: ``HistoryAdmission``).
    public struct WriteOutcome: Sendable, Equatable {
        /// Rows stored by this write (not there before).
        public var new = 0
        /// Indices of the records refused, and why.
        public var refused: [Int: HistoryAdmission.Verdict] = [:]
    }

    /// The most days one INSERT statement writes into: each partition it touches is locked
    /// with its indexes until the statement ends, and a batch spread over a thousand days would
    /// exhaust PostgreSQL's lock table.
    package static let maximumDaysPerStatement = 8

    /// Writes `records`, in statements of at most ``maximumRowsPerStatement`` rows and
    /// ``maximumDaysPerStatement`` days; a record whose `(vehicle, run, seq)` is already stored
    /// is skipped. Returns how many rows were new. Each statement is atomic; a failure throws
    /// and the caller retries the whole batch (the rows already written are then duplicates,
    /// which cost nothing).
    ///
    /// Each record goes into its day's partition (a fix by its time; a heading by its time, or
    /// by the day it is first stored when it has none), made first when missing. A record
    /// whose day retention no longer keeps, lies more than ``TrackPartitions/maximumDaysAhead`` days ahead of
    /// the clock or further back than the horizon, would need a partition past
    /// ``TrackPartitions/maximumPartitions`` or past its vehicle's budget (``HistoryAdmission``), is not
    /// stored and is counted in ``TrackStore/refusals``.
    @discardableResult
    package func insert(_ records: some Collection<TrackRecord>) async throws -> Int {
        try await write(Array(records)).new
    }

    /// As ``insert(_:)``, saying which records were refused and why.
    package func write(_ records: [TrackRecord]) async throws -> WriteOutcome {
        let now = database.now()
        let today = HistoryDay(now)
        var days = Set<HistoryAdmission.VehicleDay>()
        for record in records { days.insert(HistoryAdmission.VehicleDay(record.vehicle, Self.day(of: record, today: today))) }
        let verdicts = try await TrackPartitions(database: database).admit(days, now: now)
        var fixes: [(day: HistoryDay, record: TrackRecord)] = []
        var headings: [(day: HistoryDay, record: TrackRecord)] = []
        var outcome = WriteOutcome()
        var refused = TrackRefusals()
        for (index, record) in records.enumerated() {
            let day = Self.day(of: record, today: today)
            let verdict = verdicts[HistoryAdmission.VehicleDay(record.vehicle, day)] ?? .noPartition
            guard verdict == .stored else {
                refused.count(verdict)
                outcome.refused[index] = verdict
                continue
            }
            switch record.payload {
            case .fix: fixes.append((day, record))
            case .heading: headings.append((day, record))
            }
        }
        let placement = Date(now)
        // While the rows of schema 3 are being moved, a message stored there is not stored
        // again here (its copy would be read twice until the move ends, and an untimed
        // heading's for ever: the two are placed apart).
        var unpartitioned = (fixes: false, headings: false)
        if !database.partitionState.state.withLock({ $0.unpartitionedGone }) {
            unpartitioned = try await TrackSchema(database: database).unpartitionedTables()
            if !unpartitioned.fixes && !unpartitioned.headings {
                database.partitionState.state.withLock { $0.unpartitionedGone = true }
            }
        }
        do {
            for part in Self.statements(fixes) {
                outcome.new += try await insertFixes(part, skipping: unpartitioned.fixes)
            }
            for part in Self.statements(headings) {
                outcome.new += try await insertHeadings(part, untimedAt: placement, skipping: unpartitioned.headings)
            }
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23514" {
            // No partition for a row: another recorder's retention dropped a day this one still
            // knew. The next attempt reads the partitions and the horizon again.
            database.partitionState.state.withLock { $0.admission.known = nil }
            throw error
        }
        // Counted once the write is done: an attempt that fails (an outage, each retry of it)
        // counts nothing, the one that succeeds counts its refusals.
        if refused.total > 0 { database.partitionState.state.withLock { $0.refusals.add(refused) } }
        return outcome
    }

    /// `rows` cut into statements of at most ``maximumRowsPerStatement`` rows and
    /// ``maximumDaysPerStatement`` days, in day order (a batch is mostly one or two days: one
    /// statement, in the batch's order).
    static func statements(_ rows: [(day: HistoryDay, record: TrackRecord)]) -> [ArraySlice<TrackRecord>] {
        var sorted = rows
        if zip(rows, rows.dropFirst()).contains(where: { $0.day > $1.day }) { sorted.sort { $0.day < $1.day } }
        var parts: [ArraySlice<TrackRecord>] = []
        let records = sorted.map(\.record)
        var start = 0
        var days = 0
        for index in sorted.indices {
            let newDay = index == 0 || sorted[index].day != sorted[index - 1].day
            if index > start && (index - start == maximumRowsPerStatement || (newDay && days == maximumDaysPerStatement)) {
                parts.append(records[start..<index])
                start = index
                days = 0
            }
            if newDay || days == 0 { days += 1 }
        }
        if start < records.count { parts.append(records[start...]) }
        return parts
    }

    /// `AND NOT EXISTS` the message in `table` (the rows of schema 3 not yet moved), or nothing.
    private static func notIn(_ table: String, _ skipping: Bool) -> String {
        skipping
            ? "AND NOT EXISTS (SELECT 1 FROM \(table) u WHERE u.vehicle = batch.vehicle AND u.run = batch.run AND u.seq = batch.seq)"
            : ""
    }

    /// The day a record is stored under.
    static func day(of record: TrackRecord, today: HistoryDay) -> HistoryDay {
        switch record.payload {
        case .fix(let fix): HistoryDay(fix.time)
        case .heading(let heading): heading.time.map(HistoryDay.init) ?? today
        }
    }

    private func insertFixes(_ rows: ArraySlice<TrackRecord>, skipping unpartitioned: Bool) async throws -> Int {
        // One array per column, unnested into rows by the server: 20 parameters whatever the
        // batch size, where a VALUES list needs 20 a row (and PostgreSQL parses each). Arrays
        // carry no NULLs here: NaN stands for an unknown number and −1 for unknown
        // satellites, turned back into NULL by NULLIF (neither is a value a fix can have).
        var vehicles: [String] = [], runs: [Int64] = [], seqs: [Int64] = [], times: [Date] = [], lats: [Double] = []
        var lons: [Double] = [], altHAE: [Double] = [], altMSL: [Double] = [], speeds: [Double] = [], tracks: [Double] = [],
            climbs: [Double] = []
        var modes: [Int16] = [], sats: [Int16] = [], hdops: [Double] = [], ephs: [Double] = [], epvs: [Double] = []
        var headings: [Double] = [], magnetic: [Double] = [], sources: [String] = []
        var backlogs: [Bool] = []
        for record in rows {
            guard case .fix(let fix) = record.payload else { continue }
            vehicles.append(record.vehicle.rawValue)
            runs.append(Int64(record.run))
            seqs.append(Int64(record.seq))
            times.append(Date(fix.time))
            lats.append(fix.latitude)
            lons.append(fix.longitude)
            altHAE.append(fix.altitudeHAE ?? .nan)
            altMSL.append(fix.altitudeMSL ?? .nan)
            speeds.append(fix.speed ?? .nan)
            tracks.append(fix.track ?? .nan)
            climbs.append(fix.climb ?? .nan)
            modes.append(Int16(fix.mode.rawValue))
            sats.append(fix.satellitesUsed.map { Int16(clamping: max(0, $0)) } ?? -1)
            hdops.append(fix.hdop ?? .nan)
            ephs.append(fix.eph ?? .nan)
            epvs.append(fix.epv ?? .nan)
            headings.append(fix.heading?.trueHeading ?? .nan)
            magnetic.append(fix.heading?.magneticHeading ?? .nan)
            sources.append(fix.heading?.source.rawValue ?? "")
            backlogs.append(record.backlog)
        }
        guard sources.contains(where: { !$0.isEmpty }) else {
            // No fix of the batch carries a heading (a fleet without compasses): the three
            // columns are left to their NULL default, 10 % faster than sending them empty.
            let query: PostgresQuery = """
                WITH inserted AS (INSERT INTO fleetcast_fixes (vehicle, run, seq, time, lat, lon, alt_hae, alt_msl, speed, track, climb, mode, sats, hdop, eph, epv, backlog)
                SELECT vehicle, run, seq, time, lat, lon, NULLIF(alt_hae, 'NaN'), NULLIF(alt_msl, 'NaN'), NULLIF(speed, 'NaN'),
                    NULLIF(track, 'NaN'), NULLIF(climb, 'NaN'), mode, NULLIF(sats, -1), NULLIF(hdop, 'NaN'), NULLIF(eph, 'NaN'),
                    NULLIF(epv, 'NaN'), backlog
                FROM unnest(\(vehicles), \(runs), \(seqs), \(times), \(lats), \(lons), \(altHAE), \(altMSL), \(speeds),
                    \(tracks), \(climbs), \(modes), \(sats), \(hdops), \(ephs), \(epvs), \(backlogs))
                    AS batch (vehicle, run, seq, time, lat, lon, alt_hae, alt_msl, speed, track, climb, mode, sats, hdop, eph, epv, backlog)
                WHERE true \(unescaped: Self.notIn("fleetcast_fixes_unpartitioned", unpartitioned))
                ON CONFLICT (vehicle, run, seq, time) DO NOTHING RETURNING 1)
                SELECT count(*) FROM inserted
                """
            return try await countRows(query)
        }
        let query: PostgresQuery = """
            WITH inserted AS (INSERT INTO fleetcast_fixes (vehicle, run, seq, time, lat, lon, alt_hae, alt_msl, speed, track, climb, mode, sats, hdop, eph, epv, heading, mag_heading, heading_source, backlog)
            SELECT vehicle, run, seq, time, lat, lon, NULLIF(alt_hae, 'NaN'), NULLIF(alt_msl, 'NaN'), NULLIF(speed, 'NaN'),
                NULLIF(track, 'NaN'), NULLIF(climb, 'NaN'), mode, NULLIF(sats, -1), NULLIF(hdop, 'NaN'), NULLIF(eph, 'NaN'),
                NULLIF(epv, 'NaN'), NULLIF(heading, 'NaN'), NULLIF(mag_heading, 'NaN'), NULLIF(heading_source, ''), backlog
            FROM unnest(\(vehicles), \(runs), \(seqs), \(times), \(lats), \(lons), \(altHAE), \(altMSL), \(speeds),
                \(tracks), \(climbs), \(modes), \(sats), \(hdops), \(ephs), \(epvs), \(headings), \(magnetic), \(sources), \(backlogs))
                AS batch (vehicle, run, seq, time, lat, lon, alt_hae, alt_msl, speed, track, climb, mode, sats, hdop, eph, epv,
                    heading, mag_heading, heading_source, backlog)
            WHERE true \(unescaped: Self.notIn("fleetcast_fixes_unpartitioned", unpartitioned))
            ON CONFLICT (vehicle, run, seq, time) DO NOTHING RETURNING 1)
            SELECT count(*) FROM inserted
            """
        return try await countRows(query)
    }

    private func insertHeadings(
        _ rows: ArraySlice<TrackRecord>, untimedAt placement: Date, skipping unpartitioned: Bool
    ) async throws -> Int {
        // As for fixes; a heading's time and source may be unknown: the epoch's first
        // instant and "" stand for them (no heading is from 1970, no source is empty). A
        // heading without a time is placed at `placement` (now): stored once whatever day it
        // is delivered again, because it is inserted only when no partition holds its number
        // (a probe of each partition's key, for these rare headings only).
        var vehicles: [String] = [], runs: [Int64] = [], seqs: [Int64] = [], times: [Date] = [], headings: [Double] = []
        var magnetic: [Double] = []
        var sources: [String] = [], backlogs: [Bool] = []
        for record in rows {
            guard case .heading(let heading) = record.payload else { continue }
            vehicles.append(record.vehicle.rawValue)
            runs.append(Int64(record.run))
            seqs.append(Int64(record.seq))
            times.append(heading.time.map(Date.init) ?? Date(timeIntervalSince1970: 0))
            headings.append(heading.trueHeading ?? .nan)
            magnetic.append(heading.magneticHeading ?? .nan)
            sources.append(heading.source.rawValue)
            backlogs.append(record.backlog)
        }
        let query: PostgresQuery = """
            WITH inserted AS (INSERT INTO fleetcast_headings (vehicle, run, seq, placed_at, time, heading, mag_heading, source, backlog)
            SELECT vehicle, run, seq, CASE WHEN time = 'epoch' THEN \(placement) ELSE time END, NULLIF(time, 'epoch'),
                NULLIF(heading, 'NaN'), NULLIF(mag_heading, 'NaN'), NULLIF(source, ''), backlog
            FROM unnest(\(vehicles), \(runs), \(seqs), \(times), \(headings), \(magnetic), \(sources), \(backlogs))
                AS batch (vehicle, run, seq, time, heading, mag_heading, source, backlog)
            WHERE (batch.time <> 'epoch' OR NOT EXISTS (
                SELECT 1 FROM fleetcast_headings h WHERE h.vehicle = batch.vehicle AND h.run = batch.run AND h.seq = batch.seq))
                \(unescaped: Self.notIn("fleetcast_headings_unpartitioned", unpartitioned))
            ON CONFLICT (vehicle, run, seq, placed_at) DO NOTHING RETURNING 1)
            SELECT count(*) FROM inserted
            """
        return try await countRows(query)
    }

    /// Runs an insert whose result is one row, the count of new rows.
    private func countRows(_ query: PostgresQuery) async throws -> Int {
        var count = 0
        let rows = try await database.client.query(query, logger: database.logger)
        for try await inserted in rows.decode(Int64.self) { count = Int(inserted) }
        return count
    }
}
