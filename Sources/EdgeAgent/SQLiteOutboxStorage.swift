import FleetcastCore
import Foundation
import GRDB

/// The durable outbox: a SQLite database (GRDB) in the state directory, `{stateDir}/{vehicle}.outbox`.
///
/// **Schema** (version 1, created by a `DatabaseMigrator`): `event(seq INTEGER PRIMARY KEY,
/// kind INTEGER, storedAt INTEGER, payload BLOB)` with an index on `(kind, seq)`, and
/// `meta(key, value)` holding `nextSeq`, `reservedSeq` and `clean`.
///
/// **Durability.** WAL journal with `synchronous = FULL`: a commit returns once its WAL frames
/// are `fsync`ed, so a process crash (`kill -9`) or a power cut loses nothing committed. The
/// outbox commits once per sync interval (one transaction, one `fsync`), never per message.
///
/// **Numbers.** Each commit records the next `seq` and a reservation above it; the outbox hands
/// out no number at or above the reservation before the next commit. After an unclean stop the
/// next run starts at the reservation: numbers are skipped (and counted), never reused.
///
/// All database work runs on GRDB's serial writer queue (`async` calls), never on the caller's
/// thread.
final class SQLiteOutboxStorage: OutboxStorage {
    let location: String
    private let database: DatabaseQueue
    /// Stored count and bytes, kept by the commits (which run one at a time on the writer queue).
    private let totals: SanitizerVisibleMutex<(count: Int, bytes: Int)>

    /// Why a file cannot be used as the outbox, so it is moved aside.
    struct Unusable: Error, CustomStringConvertible {
        let description: String
    }

    private init(location: String, database: DatabaseQueue, count: Int, bytes: Int) {
        self.location = location
        self.database = database
        self.totals = SanitizerVisibleMutex((count, bytes))
    }

    /// The current schema's migrations.
    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE event (
                        seq INTEGER PRIMARY KEY NOT NULL,
                        kind INTEGER NOT NULL,
                        storedAt INTEGER NOT NULL,
                        payload BLOB NOT NULL
                    );
                    CREATE INDEX event_kind_seq ON event(kind, seq);
                    CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL) WITHOUT ROWID;
                    """)
        }
        return migrator
    }

    /// Opens (or creates) the store at `path`, checks it, and reserves the first numbers.
    ///
    /// - Parameters:
    ///   - minimumNextSeq: numbers below this are never handed out (a legacy `{vehicle}.seq`
    ///     counter's value).
    ///   - reserve: how many numbers to reserve ahead of the first one.
    /// - Throws: ``Unusable`` when the file is not a database, is corrupt or has another
    ///   schema (the caller moves it aside); GRDB's `DatabaseError` for I/O failures (read-only
    ///   directory, full disk).
    static func open(path: String, minimumNextSeq: UInt64, reserve: UInt64) throws -> (SQLiteOutboxStorage, OutboxOpening) {
        var configuration = Configuration()
        configuration.label = "fleetcast.outbox"
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        let database: DatabaseQueue
        do {
            database = try DatabaseQueue(path: path, configuration: configuration)
        } catch let error as DatabaseError where Self.meansUnusable(error) {
            throw Unusable(description: "\(error.message ?? "not a database") (\(error.resultCode))")
        }
        do {
            try database.write { db in
                let check = try String.fetchAll(db, sql: "PRAGMA quick_check")
                guard check == ["ok"] else {
                    throw Unusable(description: "integrity check failed: \(check.prefix(3).joined(separator: "; "))")
                }
                let migrator = Self.migrator
                if try migrator.hasBeenSuperseded(db) {
                    throw Unusable(description: "written by a newer agent (schema \(try migrator.appliedIdentifiers(db).sorted()))")
                }
                if try migrator.appliedIdentifiers(db).isEmpty, try db.tableExists("event") || db.tableExists("meta") {
                    throw Unusable(description: "has tables of another schema")
                }
            }
            try Self.migrator.migrate(database)
            let opening = try database.write { db in
                try Self.openInTransaction(db, minimumNextSeq: minimumNextSeq, reserve: reserve)
            }
            let storage = SQLiteOutboxStorage(location: path, database: database, count: opening.count, bytes: opening.bytes)
            return (storage, opening)
        } catch let error as DatabaseError where Self.meansUnusable(error) {
            throw Unusable(description: "\(error.message ?? "corrupt") (\(error.resultCode))")
        }
    }

    /// What a store that cannot be opened for writing (a card remounted read-only, an I/O
    /// error) says about numbering, read without writing: the first `seq` above everything it
    /// stored or reserved, and how many records wait in it. `nil` when it cannot be read
    /// either (then nothing durable is known, and numbering starts at the legacy counter).
    ///
    /// A read-only open sees what a crash left in the WAL, but needs the WAL's index file,
    /// which a clean stop removes and a read-only directory cannot recreate; then the file is
    /// read as `immutable` (after a clean stop everything is in the database file itself).
    static func readOnlyNumbering(path: String) -> (nextSeq: UInt64, stored: Int)? {
        guard access(path, R_OK) == 0 else { return nil }
        var configuration = Configuration()
        configuration.readonly = true
        configuration.label = "fleetcast.outbox.readonly"
        for location in [path, "file:\(path)?immutable=1"] {
            guard let database = try? DatabaseQueue(path: location, configuration: configuration) else { continue }
            defer { try? database.close() }
            let numbering = try? database.read { db -> (nextSeq: UInt64, stored: Int) in
                let meta =
                    try Int64.fetchOne(
                        db, sql: "SELECT max(value) FROM meta WHERE key IN ('nextSeq', 'reservedSeq')") ?? 0
                let row = try Row.fetchOne(db, sql: "SELECT count(*), coalesce(max(seq), 0) FROM event")
                let maxStored: Int64 = row?[1] ?? 0
                return (nextSeq: UInt64(clamping: max(meta, maxStored + 1, 1)), stored: row?[0] ?? 0)
            }
            if let numbering { return numbering }
        }
        return nil
    }

    private static func openInTransaction(_ db: Database, minimumNextSeq: UInt64, reserve: UInt64) throws -> OutboxOpening {
        let columns = try db.columns(in: "event").map(\.name)
        guard columns == ["seq", "kind", "storedAt", "payload"] else {
            throw Unusable(description: "table event has columns \(columns), expected seq, kind, storedAt, payload")
        }
        func meta(_ key: String) throws -> UInt64? {
            try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [key]).map { UInt64(clamping: $0) }
        }
        let row = try Row.fetchOne(db, sql: "SELECT count(*), coalesce(sum(length(payload)), 0), coalesce(max(seq), 0) FROM event")
        let count: Int = row?[0] ?? 0
        let payloadBytes: Int = row?[1] ?? 0
        let maxStored = UInt64(clamping: (row?[2] as Int64?) ?? 0)
        let clean = try meta("clean") ?? 1
        let recordedNext = try meta("nextSeq") ?? 1
        let reserved = try meta("reservedSeq") ?? recordedNext
        var next = max(1, minimumNextSeq, maxStored + 1)
        var skipped: UInt64 = 0
        if clean == 1 {
            next = max(next, recordedNext)
        } else {
            let resume = max(next, reserved)
            skipped = resume > max(next, recordedNext) ? resume - max(next, recordedNext) : 0
            next = resume
        }
        try Self.writeMeta(db, nextSeq: next, reservedSeq: next + reserve, clean: false)
        return OutboxOpening(
            count: count, bytes: payloadBytes + count * OutboxRecord.overheadBytes, nextSeq: next, uncleanSkipped: skipped,
            reservedSeq: next + reserve)
    }

    private static func writeMeta(_ db: Database, nextSeq: UInt64, reservedSeq: UInt64, clean: Bool) throws {
        let statement = try db.cachedStatement(sql: "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)")
        try statement.execute(arguments: ["nextSeq", Int64(clamping: nextSeq)])
        try statement.execute(arguments: ["reservedSeq", Int64(clamping: reservedSeq)])
        try statement.execute(arguments: ["clean", clean ? 1 : 0])
    }

    /// SQLite's answers that mean the file itself is bad, not the disk or the permissions.
    private static func meansUnusable(_ error: DatabaseError) -> Bool {
        switch error.resultCode {
        case .SQLITE_CORRUPT, .SQLITE_NOTADB, .SQLITE_FORMAT, .SQLITE_SCHEMA, .SQLITE_MISMATCH: true
        default: false
        }
    }

    func commit(_ batch: OutboxCommit) async throws -> OutboxCommitResult {
        let (count, bytes) = totals.withLock { $0 }
        let result = try await database.write { db -> OutboxCommitResult in
            var count = count
            var bytes = bytes
            let insert = try db.cachedStatement(
                sql: "INSERT OR IGNORE INTO event(seq, kind, storedAt, payload) VALUES (?, ?, ?, ?)")
            for record in batch.inserts {
                try insert.execute(arguments: [
                    Int64(clamping: record.seq), Self.code(record.kind), record.storedAtMilliseconds, Data(record.payload),
                ])
                if db.changesCount > 0 {
                    count += 1
                    bytes += record.accountedBytes
                }
            }
            if !batch.deletes.isEmpty {
                let delete = try db.cachedStatement(sql: "DELETE FROM event WHERE seq = ? RETURNING length(payload)")
                for seq in batch.deletes {
                    if let length = try Int.fetchOne(delete, arguments: [Int64(clamping: seq)]) {
                        count -= 1
                        bytes -= length + OutboxRecord.overheadBytes
                    }
                }
            }
            var result = OutboxCommitResult(count: count, bytes: bytes)
            // Age limit: everything accepted before the cut-off.
            let expired = try Row.fetchOne(
                db, sql: "SELECT count(*), coalesce(sum(length(payload)), 0) FROM event WHERE storedAt < ?",
                arguments: [batch.expiresBeforeMilliseconds])
            if let n: Int = expired?[0], n > 0 {
                try db.execute(sql: "DELETE FROM event WHERE storedAt < ?", arguments: [batch.expiresBeforeMilliseconds])
                result.expired = UInt64(n)
                result.count -= n
                result.bytes -= (expired?[1] ?? 0) + n * OutboxRecord.overheadBytes
            }
            // Size limit: the oldest headings first, then the oldest fixes.
            for kind in [OutboundMessage.Kind.heading, .fix] where result.bytes > batch.maximumBytes {
                let victims = try Row.fetchCursor(
                    db, sql: "SELECT seq, length(payload) FROM event WHERE kind = ? ORDER BY seq", arguments: [Self.code(kind)])
                var doomed: [Int64] = []
                while result.bytes > batch.maximumBytes, let row = try victims.next() {
                    let seq: Int64 = row[0]
                    guard !batch.protected.contains(UInt64(clamping: seq)) else { continue }
                    doomed.append(seq)
                    result.bytes -= (row[1] as Int) + OutboxRecord.overheadBytes
                    result.count -= 1
                    result.full += 1
                }
                let delete = try db.cachedStatement(sql: "DELETE FROM event WHERE seq = ?")
                for seq in doomed { try delete.execute(arguments: [seq]) }
            }
            try Self.writeMeta(db, nextSeq: batch.nextSeq, reservedSeq: batch.reservedSeq, clean: batch.clean)
            return result
        }
        totals.withLock { $0 = (result.count, result.bytes) }
        return result
    }

    func backlog(after: UInt64, limit: Int, maximumBytes: Int, excluding: Set<UInt64>) async throws -> [OutboxRecord] {
        try await database.read { db in
            let rows = try Row.fetchCursor(
                db, sql: "SELECT seq, kind, storedAt, payload FROM event WHERE seq > ? ORDER BY seq LIMIT ?",
                arguments: [Int64(clamping: after), limit + excluding.count])
            var records: [OutboxRecord] = []
            var total = 0
            while records.count < limit, let row = try rows.next() {
                let seq = UInt64(clamping: row[0] as Int64)
                if excluding.contains(seq) { continue }
                let payload = [UInt8](row[3] as Data)
                if !records.isEmpty, total + payload.count > maximumBytes { break }
                total += payload.count
                records.append(
                    OutboxRecord(
                        seq: seq, kind: Self.kind(row[1]), storedAtMilliseconds: row[2], payload: payload))
            }
            return records
        }
    }

    private static func code(_ kind: OutboundMessage.Kind) -> Int {
        kind == .heading ? 2 : 1
    }

    private static func kind(_ code: Int) -> OutboundMessage.Kind {
        code == 2 ? .heading : .fix
    }
}
