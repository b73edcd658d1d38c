import EdgeCore
import FleetcastCore
import Logging
import NIOCore
import OutboxCore
import SQLiteNIO

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The durable outbox: a SQLite database (sqlite-nio) in the state directory,
/// `{stateDir}/{vehicle}.outbox`.
///
/// **Schema** (version 1): `event(seq INTEGER PRIMARY KEY, kind INTEGER, storedAt INTEGER,
/// payload BLOB)` with an index on `(kind, seq)`, and `meta(key, value)` holding `nextSeq`,
/// `reservedSeq` and `clean`. The applied version is a row of `grdb_migrations`, the table
/// GRDB's migrator kept when the outbox was written with GRDB: stores of earlier agents open
/// as they are, and a store written now opens in them.
///
/// **Durability.** WAL journal with `synchronous = FULL`: a commit returns once its WAL frames
/// are `fsync`ed, so a process crash (`kill -9`) or a power cut loses nothing committed. The
/// outbox commits once per sync interval (one transaction, one `fsync`), never per message.
///
/// **Numbers.** Each commit records the next `seq` and a reservation above it; the outbox hands
/// out no number at or above the reservation before the next commit. After an unclean stop the
/// next run starts at the reservation: numbers are skipped (said once in the log, never counted
/// as losses), never reused, and a new numbering run begins (`meta` key `run`), so that
/// subscribers never take the skipped numbers for lost messages. A clean stop keeps the run.
///
/// Two connections: the writer, used by the commits only (one at a time: the outbox's sync
/// loop), and the reader for the backlog, which sees committed transactions only. Both do
/// their work on NIO's thread pool, never on the caller's thread.
package final class SQLiteOutboxStorage: OutboxStorage {
    package let location: String
    private let writer: SQLiteConnection
    private let reader: SQLiteConnection
    /// Stored count and bytes, kept by the commits (which run one at a time).
    private let totals: SanitizerVisibleMutex<(count: Int, bytes: Int)>
    /// Whether the store is open, and the work under way on it.
    private let lifecycle = SanitizerVisibleMutex(Lifecycle())

    /// The store's life: open (counting the commits and reads under way), closing (waiting for
    /// them to end), closed.
    private struct Lifecycle {
        package var inFlight = 0
        package var closing = false
        package var closed = false
        /// The first ``close()``, waiting for the work under way to end.
        package var drained: Waiter<Void>?
        /// Later ``close()`` calls, waiting for the first one to finish.
        package var closedWaiters = Waiters<Waiter<Void>>()
    }

    /// Why a file cannot be used as the outbox, so it is moved aside.
    package struct Unusable: Error, CustomStringConvertible {
        package let description: String
    }

    /// A commit or read asked of a store that is closing or closed.
    package struct Closed: Error, CustomStringConvertible {
        package let location: String
        package var description: String { "\(location): the outbox store is closed" }
    }

    /// The schema versions this agent knows (rows of `grdb_migrations`).
    private static let knownVersions: Set<String> = ["v1"]

    /// The rows of a store this agent can write, in the order of `insert`'s columns.
    private static let schema = [
        "CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)",
        """
        CREATE TABLE event (
            seq INTEGER PRIMARY KEY NOT NULL,
            kind INTEGER NOT NULL,
            storedAt INTEGER NOT NULL,
            payload BLOB NOT NULL
        )
        """,
        "CREATE INDEX event_kind_seq ON event(kind, seq)",
        "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL) WITHOUT ROWID",
        "INSERT INTO grdb_migrations(identifier) VALUES ('v1')",
    ]

    /// Rows per multi-row `INSERT` or `DELETE … IN` (four or one bound values each).
    private static let chunk = 256

    private init(location: String, writer: SQLiteConnection, reader: SQLiteConnection, count: Int, bytes: Int) {
        self.location = location
        self.writer = writer
        self.reader = reader
        self.totals = SanitizerVisibleMutex((count, bytes))
    }

    deinit {
        // A store dropped without close(): the connections close on the thread pool (each
        // close holds its connection until it has run).
        if !lifecycle.withLock({ $0.closing }) {
            _ = writer.close()
            _ = reader.close()
        }
    }

    /// Closes both connections once the commits and reads under way have ended (later ones
    /// throw ``Closed``); the last close checkpoints the WAL into the database file. A second
    /// call waits for the first.
    package func close() async {
        enum Role { case closer(waitForWork: Bool), follower, done }
        let role = lifecycle.withLock { state -> Role in
            if state.closed { return .done }
            if state.closing { return .follower }
            state.closing = true
            return .closer(waitForWork: state.inFlight > 0)
        }
        switch role {
        case .done:
            return
        case .follower:
            // Not cut short by cancellation: a close begun is finished.
            await suspend { waiter in
                lifecycle.withLock { state -> Bool in
                    if !state.closed { state.closedWaiters.insert(waiter, id: waiter.id) }
                    return !state.closed
                }
            } cancel: { _ in
                nil
            }
        case .closer(let waitForWork):
            if waitForWork {
                await suspend { waiter in
                    lifecycle.withLock { state -> Bool in
                        if state.inFlight > 0 { state.drained = waiter }
                        return state.inFlight > 0
                    }
                } cancel: { _ in
                    nil
                }
            }
            try? await reader.close()
            try? await writer.close()
            let waiters = lifecycle.withLock { state -> [Waiter<Void>] in
                state.closed = true
                return state.closedWaiters.removeAll()
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Counts a commit or read as under way; throws ``Closed`` once ``close()`` has begun.
    private func enter() throws {
        let open = lifecycle.withLock { state -> Bool in
            if !state.closing { state.inFlight += 1 }
            return !state.closing
        }
        guard open else { throw Closed(location: location) }
    }

    /// Ends what ``enter()`` began; the last one lets a waiting ``close()`` go on.
    private func leave() {
        let closer = lifecycle.withLock { state -> Waiter<Void>? in
            state.inFlight -= 1
            guard state.inFlight == 0 else { return nil }
            defer { state.drained = nil }
            return state.drained
        }
        closer?.resume()
    }

    /// Opens (or creates) the store at `path`, checks it, and reserves the first numbers.
    ///
    /// SQLite opens and checks the file (`quick_check`, long over days of backlog on an SD
    /// card) on NIO's thread pool while the task is suspended: no thread is blocked.
    ///
    /// - Parameters:
    ///   - minimumNextSeq: numbers below this are never handed out (a legacy `{vehicle}.seq`
    ///     counter's value).
    ///   - reserve: how many numbers to reserve ahead of the first one.
    ///   - newRun: the identity of a numbering run begun now (the wall clock in milliseconds
    ///     since 1970), taken for a new store or after an unclean stop.
    /// - Throws: ``Unusable`` when the file is not a database, is corrupt or has another
    ///   schema (the caller moves it aside); `SQLiteError` for I/O failures (read-only
    ///   directory, full disk).
    static func open(
        path: String, minimumNextSeq: UInt64, reserve: UInt64, newRun: UInt64
    ) async throws -> (SQLiteOutboxStorage, OutboxOpening) {
        let writer = try await connect(path)
        do {
            _ = try await writer.rows("PRAGMA journal_mode = WAL")
            try await writer.run("PRAGMA synchronous = FULL")
            // sqlite-nio builds SQLite with SECURE_DELETE (deleted rows overwritten with zeros):
            // every acknowledged record would be written to the card a second time.
            try await writer.run("PRAGMA secure_delete = OFF")
            let check = try await writer.rows("PRAGMA quick_check").compactMap { $0.text(0) }
            guard check == ["ok"] else {
                throw Unusable(description: "integrity check failed: \(check.prefix(3).joined(separator: "; "))")
            }
            try await writer.run("BEGIN IMMEDIATE")
            let opening: OutboxOpening
            do {
                try await migrate(writer)
                opening = try await openInTransaction(writer, minimumNextSeq: minimumNextSeq, reserve: reserve, newRun: newRun)
                try await writer.run("COMMIT")
            } catch {
                try? await writer.run("ROLLBACK")
                throw error
            }
            // The database, its write-ahead log and index: the user's alone, whatever the umask.
            for file in [path, path + "-wal", path + "-shm"] { FilePermissions.makePrivate(file) }
            let reader = try await connect(path)
            do {
                try await reader.run("PRAGMA query_only = 1")
                // The backlog is read oldest first, once: a small page cache (256 KiB, not
                // SQLite's 2 MiB default) is enough, and a vehicle's memory is short.
                try await reader.run("PRAGMA cache_size = -256")
            } catch {
                _ = try? await reader.close()
                throw error
            }
            let storage = SQLiteOutboxStorage(
                location: path, writer: writer, reader: reader, count: opening.count, bytes: opening.bytes)
            return (storage, opening)
        } catch {
            _ = try? await writer.close()
            if let error = error as? SQLiteError, meansUnusable(error) {
                throw Unusable(description: "\(error.message) (\(error.reason))")
            }
            throw error
        }
    }

    private static func connect(_ location: String) async throws -> SQLiteConnection {
        do {
            let opening: EventLoopFuture<SQLiteConnection> = SQLiteConnection.open(
                storage: .file(path: location), threadPool: .singleton, logger: quiet,
                on: MultiThreadedEventLoopGroup.singleton.any())
            // The connection is made on sqlite-nio's thread pool and would reach this task only
            // through `get()`'s continuation, an ordering ThreadSanitizer cannot see (the
            // concurrency runtime is not instrumented): a CI run reported the task's first use
            // of it against its making. Handed over under our mutex by a callback registered
            // first (NIO runs a future's callbacks in that order, on its event loop, before
            // `get()` resumes), it is visible, as `fetch`'s rows are.
            let handedOver = SanitizerVisibleMutex<SQLiteConnection?>(nil)
            opening.whenSuccess { connection in handedOver.withLock { $0 = connection } }
            let returned = try await opening.get()
            let connection = handedOver.withLock { $0 } ?? returned
            // sqlite-nio's own busy handler retries for ever, at full speed: wait at most 5 s
            // for a lock instead (another process's WAL recovery), then fail with SQLITE_BUSY.
            do {
                try await connection.run("PRAGMA busy_timeout = 5000")
            } catch {
                _ = try? await connection.close()
                throw error
            }
            return connection
        } catch let error as SQLiteError where meansUnusable(error) {
            throw Unusable(description: "\(error.message) (\(error.reason))")
        }
    }

    /// sqlite-nio logs each statement at debug; the agent's own log says what matters.
    private static let quiet = Logger(label: "fleetcast.outbox.sqlite") { _ in SwiftLogNoOpLogHandler() }

    /// Creates the schema in a new store; refuses a store of a newer agent or of another
    /// program. Runs inside the opening transaction.
    private static func migrate(_ db: SQLiteConnection) async throws {
        let tables = Set(try await db.rows("SELECT name FROM sqlite_master WHERE type = 'table'").compactMap { $0.text(0) })
        let applied =
            tables.contains("grdb_migrations")
            ? Set(try await db.rows("SELECT identifier FROM grdb_migrations").compactMap { $0.text(0) }) : []
        if !applied.isSubset(of: knownVersions) {
            throw Unusable(description: "written by a newer agent (schema \(applied.sorted()))")
        }
        if applied.isEmpty {
            if tables.contains("event") || tables.contains("meta") {
                throw Unusable(description: "has tables of another schema")
            }
            for statement in schema { try await db.run(statement) }
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
    package static func readOnlyNumbering(path: String) async -> (nextSeq: UInt64, stored: Int)? {
        guard access(path, R_OK) == 0 else { return nil }
        let file = "file:" + uriEscaped(path)
        for location in [file + "?mode=ro", file + "?mode=ro&immutable=1"] {
            guard let db = try? await connect(location) else { continue }
            let meta = try? await db.rows("SELECT coalesce(max(value), 0) FROM meta WHERE key IN ('nextSeq', 'reservedSeq')")
                .first?.integer(0)
            let row = try? await db.rows("SELECT count(*), coalesce(max(seq), 0) FROM event").first
            _ = try? await db.close()
            guard let meta, let row, let stored = row.integer(0), let maxStored = row.integer(1) else { continue }
            return (nextSeq: UInt64(clamping: max(meta, maxStored + 1, 1)), stored: Int(stored))
        }
        return nil
    }

    /// `path` as the path of a `file:` URI: `%`, `?` and `#` escaped.
    private static func uriEscaped(_ path: String) -> String { path.escaping(["%": "%25", "?": "%3f", "#": "%23"]) }

    private static func openInTransaction(
        _ db: SQLiteConnection, minimumNextSeq: UInt64, reserve: UInt64, newRun: UInt64
    ) async throws -> OutboxOpening {
        let columns = try await db.rows("PRAGMA table_info(event)").compactMap { $0.text(1) }
        guard columns == ["seq", "kind", "storedAt", "payload"] else {
            throw Unusable(description: "table event has columns \(columns), expected seq, kind, storedAt, payload")
        }
        func meta(_ key: String) async throws -> UInt64? {
            try await db.rows("SELECT value FROM meta WHERE key = ?", [.text(key)]).first?.integer(0).map { UInt64(clamping: $0) }
        }
        let row = try await db.rows("SELECT count(*), coalesce(sum(length(payload)), 0), coalesce(max(seq), 0) FROM event").first
        let count = Int(row?.integer(0) ?? 0)
        let payloadBytes = Int(row?.integer(1) ?? 0)
        let maxStored = UInt64(clamping: row?.integer(2) ?? 0)
        let clean = try await meta("clean") ?? 1
        let isNew = try await meta("nextSeq") == nil && count == 0
        let recordedRun = try await meta("run")
        let recordedNext = try await meta("nextSeq") ?? 1
        let reserved = try await meta("reservedSeq") ?? recordedNext
        var next = max(1, minimumNextSeq, maxStored + 1)
        var skipped: UInt64 = 0
        if clean == 1 {
            next = max(next, recordedNext)
        } else {
            let resume = max(next, reserved)
            skipped = resume > max(next, recordedNext) ? resume - max(next, recordedNext) : 0
            next = resume
        }
        // A new store begins a run; so does an unclean stop (numbers were skipped), never going
        // below the last run even if the clock went back. An earlier agent's store keeps run 0.
        let run: UInt64
        if isNew {
            run = max(1, newRun)
        } else if clean == 1 {
            run = recordedRun ?? 0
        } else {
            run = max(1, newRun, (recordedRun ?? 0) &+ 1)
        }
        try await db.run(writeMeta, metaBinds(nextSeq: next, reservedSeq: next + reserve, clean: false))
        if run != recordedRun {
            try await db.run("INSERT OR REPLACE INTO meta(key, value) VALUES ('run', ?)", [.integer(SQLiteInt64(clamping: run))])
        }
        return OutboxOpening(
            count: count, bytes: payloadBytes + count * OutboxRecord.overheadBytes, nextSeq: next, uncleanSkipped: skipped,
            reservedSeq: next + reserve, run: run)
    }

    private static let writeMeta = "INSERT OR REPLACE INTO meta(key, value) VALUES ('nextSeq', ?), ('reservedSeq', ?), ('clean', ?)"

    private static func metaBinds(nextSeq: UInt64, reservedSeq: UInt64, clean: Bool) -> [SQLiteData] {
        [.integer(SQLiteInt64(clamping: nextSeq)), .integer(SQLiteInt64(clamping: reservedSeq)), .integer(clean ? 1 : 0)]
    }

    /// SQLite's answers that mean the file itself is bad, not the disk or the permissions.
    private static func meansUnusable(_ error: SQLiteError) -> Bool {
        switch error.reason {
        case .corrupt, .corruptIndex, .corruptSequenceSchema, .corruptVirtualTable, .notADatabase, .format, .schema, .mismatch:
            true
        default: false
        }
    }

    package func commit(_ batch: OutboxCommit) async throws -> OutboxCommitResult {
        try enter()
        defer { leave() }
        let (count, bytes) = totals.withLock { $0 }
        let db = writer
        let result: OutboxCommitResult
        do {
            // Inside the `do`: should a transaction ever be left open, the ROLLBACK ends it
            // and the next commit can begin again.
            _ = try await db.fetch("BEGIN IMMEDIATE")
            result = try await Self.apply(batch, to: db, count: count, bytes: bytes)
            _ = try await db.fetch("COMMIT")
        } catch {
            _ = try? await db.fetch("ROLLBACK")
            throw error
        }
        totals.withLock { $0 = (result.count, result.bytes) }
        return result
    }

    /// The statements of one commit, inside its transaction.
    private static func apply(
        _ batch: OutboxCommit, to db: SQLiteConnection, count: Int, bytes: Int
    ) async throws
        -> OutboxCommitResult
    {
        var result = OutboxCommitResult(count: count, bytes: bytes)
        // Inserts: the rows SQLite really inserted come back (a seq already stored is ignored).
        for start in stride(from: 0, to: batch.inserts.count, by: chunk) {
            let records = batch.inserts[start..<min(start + chunk, batch.inserts.count)]
            var binds: [SQLiteData] = []
            binds.reserveCapacity(records.count * 4)
            var accounted: [Int64: Int] = [:]
            for record in records {
                let seq = Int64(clamping: record.seq)
                binds += [
                    .integer(SQLiteInt64(seq)), .integer(code(record.kind)), .integer(SQLiteInt64(record.storedAtMilliseconds)),
                    .blob(ByteBuffer(bytes: record.payload)),
                ]
                accounted[seq] = record.accountedBytes
            }
            let values = Array(repeating: "(?, ?, ?, ?)", count: records.count).joined(separator: ", ")
            let inserted = try await db.fetch(
                "INSERT OR IGNORE INTO event(seq, kind, storedAt, payload) VALUES \(values) RETURNING seq", binds)
            for row in inserted {
                result.count += 1
                result.bytes += row.integer(0).flatMap { accounted[$0] } ?? 0
            }
        }
        // Acknowledged: gone, with what they accounted for.
        for start in stride(from: 0, to: batch.deletes.count, by: chunk) {
            let seqs = batch.deletes[start..<min(start + chunk, batch.deletes.count)]
            for length in try await delete(seqs.map { Int64(clamping: $0) }, from: db) {
                result.count -= 1
                result.bytes -= length + OutboxRecord.overheadBytes
            }
        }
        // Age limit: everything accepted before the cut-off but what is on its way to the broker
        // (delivered, it is no loss; it expires at the next commit if it fails).
        let protected = batch.protected.sorted()
        let unprotected =
            protected.isEmpty ? "" : " AND seq NOT IN (\(Array(repeating: "?", count: protected.count).joined(separator: ", ")))"
        let expiryBinds =
            [SQLiteData.integer(SQLiteInt64(batch.expiresBeforeMilliseconds))] + protected.map { .integer(SQLiteInt64(clamping: $0)) }
        let expired = try await db.fetch(
            "SELECT count(*), coalesce(sum(length(payload)), 0) FROM event WHERE storedAt < ?\(unprotected)", expiryBinds
        ).first
        if let n = expired?.integer(0), n > 0 {
            _ = try await db.fetch("DELETE FROM event WHERE storedAt < ?\(unprotected)", expiryBinds)
            result.expired = UInt64(n)
            result.count -= Int(n)
            result.bytes -= Int(expired?.integer(1) ?? 0) + Int(n) * OutboxRecord.overheadBytes
        }
        // Size limit: the oldest headings first, then the oldest fixes.
        for kind in [OutboundMessage.Kind.heading, .fix] where result.bytes > batch.maximumBytes {
            var after: Int64 = 0
            var doomed: [Int64] = []
            page: while result.bytes > batch.maximumBytes {
                let rows = try await db.fetch(
                    "SELECT seq, length(payload) FROM event WHERE kind = ? AND seq > ? ORDER BY seq LIMIT \(chunk)",
                    [.integer(code(kind)), .integer(SQLiteInt64(after))])
                guard !rows.isEmpty else { break }
                for row in rows {
                    guard result.bytes > batch.maximumBytes else { break page }
                    guard let seq = row.integer(0) else { continue }
                    after = seq
                    guard !batch.protected.contains(UInt64(clamping: seq)) else { continue }
                    doomed.append(seq)
                    result.bytes -= Int(row.integer(1) ?? 0) + OutboxRecord.overheadBytes
                    result.count -= 1
                    result.full += 1
                }
            }
            for start in stride(from: 0, to: doomed.count, by: chunk) {
                _ = try await delete(Array(doomed[start..<min(start + chunk, doomed.count)]), from: db)
            }
        }
        _ = try await db.fetch(writeMeta, metaBinds(nextSeq: batch.nextSeq, reservedSeq: batch.reservedSeq, clean: batch.clean))
        return result
    }

    /// Deletes `seqs`; returns the payload lengths of the rows that were there.
    private static func delete(_ seqs: [Int64], from db: SQLiteConnection) async throws -> [Int] {
        guard !seqs.isEmpty else { return [] }
        let marks = Array(repeating: "?", count: seqs.count).joined(separator: ", ")
        return try await db.fetch(
            "DELETE FROM event WHERE seq IN (\(marks)) RETURNING length(payload)", seqs.map { .integer(SQLiteInt64($0)) }
        ).map { Int($0.integer(0) ?? 0) }
    }

    package func backlog(after: UInt64, limit: Int, maximumBytes: Int, excluding: Set<UInt64>) async throws -> [OutboxRecord] {
        try enter()
        defer { leave() }
        let rows = try await reader.fetch(
            "SELECT seq, kind, storedAt, payload FROM event WHERE seq > ? ORDER BY seq LIMIT ?",
            [.integer(SQLiteInt64(clamping: after)), .integer(SQLiteInt64(limit + excluding.count))])
        var records: [OutboxRecord] = []
        var total = 0
        for row in rows where records.count < limit {
            guard let stored = row.integer(0) else { continue }
            let seq = UInt64(clamping: stored)
            if excluding.contains(seq) { continue }
            let payload = row.bytes(3)
            if !records.isEmpty, total + payload.count > maximumBytes { break }
            total += payload.count
            records.append(
                OutboxRecord(seq: seq, kind: Self.kind(row.integer(1) ?? 1), storedAtMilliseconds: row.integer(2) ?? 0, payload: payload))
        }
        return records
    }

    private static func code(_ kind: OutboundMessage.Kind) -> SQLiteInt64 {
        kind == .heading ? 2 : 1
    }

    private static func kind(_ code: Int64) -> OutboundMessage.Kind {
        code == 2 ? .heading : .fix
    }
}

extension SQLiteConnection {
    /// Runs one statement to completion (the opening only).
    fileprivate func run(_ sql: String, _ binds: [SQLiteData] = []) async throws {
        _ = try await fetch(sql, binds)
    }

    /// One statement's rows (the opening only).
    fileprivate func rows(_ sql: String, _ binds: [SQLiteData] = []) async throws -> [Row] {
        try await fetch(sql, binds)
    }
}

extension SQLiteConnection {
    /// One statement's rows, on the thread pool.
    ///
    /// Not sqlite-nio's own `query(_:_:) async -> [SQLiteRow]`: it gathers the rows in a
    /// `nonisolated(unsafe)` variable on the pool's thread and reads it on the task's after the
    /// continuation resumes, an ordering ThreadSanitizer cannot see (the concurrency runtime
    /// is not instrumented). Gathered under our mutex, the hand-over is visible to it.
    fileprivate func fetch(_ sql: String, _ binds: [SQLiteData] = []) async throws -> [Row] {
        let collected = RowCollector()
        try await query(sql, binds) { row in
            let values = row.columns.map(\.data)
            collected.rows.withLock { $0.append(values) }
        }
        return collected.rows.withLock { $0 }
    }
}

/// One result row: its columns' values in the statement's order (taken out of `SQLiteRow`
/// once, which builds its column list anew on every access).
private typealias Row = [SQLiteData]

/// Rows gathered on sqlite-nio's thread for the task that asked for them.
private final class RowCollector: Sendable {
    package let rows = SanitizerVisibleMutex<[Row]>([])
}

extension Array where Element == SQLiteData {
    /// Column `index` as an integer (`nil` for NULL, text or a blob).
    fileprivate func integer(_ index: Int) -> Int64? {
        guard index < count, case .integer(let value) = self[index] else { return nil }
        return Int64(value)
    }

    /// Column `index` as text (`nil` unless it is text).
    fileprivate func text(_ index: Int) -> String? {
        guard index < count, case .text(let value) = self[index] else { return nil }
        return value
    }

    /// Column `index` as bytes (empty unless it is a blob).
    fileprivate func bytes(_ index: Int) -> [UInt8] {
        guard index < count, case .blob(let buffer) = self[index] else { return [] }
        return [UInt8](buffer.readableBytesView)
    }
}
