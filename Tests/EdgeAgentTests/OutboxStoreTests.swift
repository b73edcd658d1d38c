import EdgeCore
import EdgeOutbox
import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import InMemoryLogging
import Logging
import OutboxCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The outbox store on real SQLite files: what survives a restart, how `seq` continues, and
/// what happens to a store that is broken or cannot be written.
@Suite("Outbox store")
struct OutboxStoreTests {
    private let vehicle = VehicleID("van-7")!
    private static let quiet = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    private func record(_ seq: UInt64, _ kind: OutboundMessage.Kind = .fix, at ms: Int64 = 1_000_000, bytes: Int = 100) -> OutboxRecord {
        let body = #"{"v":1,"vehicle":"van-7","seq":\#(seq),"pad":""#
        let pad = String(repeating: "x", count: max(0, bytes - body.utf8.count - 2))
        return OutboxRecord(seq: seq, kind: kind, storedAtMilliseconds: ms, payload: Array((body + pad + "\"}").utf8))
    }

    private func commit(
        _ store: OutboxStore, inserts: [OutboxRecord] = [], deletes: [UInt64] = [], next: UInt64,
        reserved: UInt64, clean: Bool = false, maxBytes: Int = 1 << 30, expiresBefore: Int64 = 0
    ) async throws -> OutboxCommitResult {
        try await store.storage.commit(
            OutboxCommit(
                inserts: inserts, deletes: deletes, nextSeq: next, reservedSeq: reserved, clean: clean,
                expiresBeforeMilliseconds: expiresBefore, maximumBytes: maxBytes))
    }

    @Test("records and the next seq survive closing and reopening; a clean stop continues without a gap")
    func survivesRestart() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let first = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: Self.quiet)
        #expect(first.degradedReason == nil)
        #expect(first.nextSeq == 1)
        _ = try await commit(first, inserts: (1...5).map { record($0) }, next: 6, reserved: 100)
        _ = try await commit(first, deletes: [1, 2], next: 8, reserved: 8, clean: true)

        let second = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: Self.quiet)
        #expect(second.storedCount == 3)
        #expect(second.nextSeq == 8, "a clean stop records the exact next number")
        #expect(second.uncleanSkipped == 0)
        let backlog = try await second.storage.backlog(after: 0, limit: 10, maximumBytes: 1 << 20, excluding: [])
        #expect(backlog.map(\.seq) == [3, 4, 5])
        #expect(backlog.first == record(3), "payload, kind and time come back as stored")
    }

    @Test("after an unclean stop numbering resumes past the reservation (the skip is said at open, never counted as a loss)")
    func uncleanStopSkipsReservation() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let first = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: Self.quiet)
        _ = try await commit(first, inserts: [record(1), record(2)], next: 3, reserved: 67)
        #expect(first.opening.reservedSeq == 1 + 128, "opening reserves ahead before anything is sent")
        // No clean commit: as after kill -9 or a power cut.
        let second = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: Self.quiet)
        #expect(second.nextSeq == 67, "never a number that may have been sent before the crash")
        #expect(second.uncleanSkipped == 64)
        #expect(second.storedCount == 2, "nothing committed is lost")
    }

    @Test("a numbering run: a new store begins one, a clean stop keeps it, an unclean stop or a lost store begins another")
    func numberingRuns() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        func open(at ms: Int64) async -> OutboxStore {
            await OutboxStore.open(
                directory: dir.path, vehicle: vehicle, logger: Self.quiet, now: { UTCTimestamp(millisecondsSince1970: ms) })
        }
        let first = await open(at: 1_000)
        #expect(first.run == 1_000, "a new store: the run is its opening time")
        _ = try await commit(first, inserts: [record(1), record(2)], next: 3, reserved: 3, clean: true)
        await first.close()
        let second = await open(at: 2_000)
        #expect(second.run == 1_000, "after a clean stop the numbering goes on in the same run")
        #expect(second.nextSeq == 3)
        await second.close()
        // No clean commit after the second opening: numbers were skipped, so a new run.
        let third = await open(at: 500)
        #expect(third.run == 1_001, "never below the last run, even with the clock set back")
        #expect(third.nextSeq > 3)
        await third.close()
        // The store lost (unreadable): moved aside, a new store and a new run from 1.
        let path = OutboxStore.path(directory: dir.path, vehicle: vehicle)
        try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: path))
        let fourth = await open(at: 9_000)
        #expect(fourth.movedAsidePath != nil)
        #expect(fourth.run == 9_000)
        #expect(fourth.nextSeq == 1)
        await fourth.close()
    }

    @Test("the state directory and the store are the agent user's alone, whatever the umask; an older 0755 directory is tightened")
    func privateFiles() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let state = dir.path + "/state"
        let old = umask(0o022)
        defer { umask(old) }
        func mode(_ path: String) -> mode_t {
            var info = stat()
            return stat(path, &info) == 0 ? info.st_mode & 0o777 : 0
        }
        let store = await OutboxStore.open(directory: state, vehicle: vehicle, logger: Self.quiet)
        _ = try await commit(store, inserts: [record(1)], next: 2, reserved: 2)
        #expect(mode(state) == 0o700)
        let path = OutboxStore.path(directory: state, vehicle: vehicle)
        for file in [path, path + "-wal", path + "-shm"] where access(file, F_OK) == 0 {
            #expect(mode(file) & 0o077 == 0, "\(file): \(String(mode(file), radix: 8))")
        }
        await store.close()
        chmod(state, 0o755)
        let again = await OutboxStore.open(directory: state, vehicle: vehicle, logger: Self.quiet)
        #expect(mode(state) == 0o700)
        await again.close()
    }

    @Test("an older agent's seq counter is honoured")
    func legacyCounter() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        _ = try dir.createFile("van-7.seq", "4242\n")
        let store = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: Self.quiet)
        #expect(store.nextSeq == 4242)
    }

    @Test("the byte limit drops the oldest headings first, then the oldest fixes; the age limit drops expired ones")
    func limits() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: Self.quiet)
        let records = (1...10).map { record(UInt64($0), $0.isMultiple(of: 2) ? .heading : .fix, at: Int64($0) * 1000) }
        let perRecord = records[0].accountedBytes
        let full = try await commit(store, inserts: records, next: 11, reserved: 100, maxBytes: perRecord * 4)
        #expect(full.full == 6)
        #expect(full.count == 4)
        let left = try await store.storage.backlog(after: 0, limit: 20, maximumBytes: 1 << 20, excluding: []).map(\.seq)
        #expect(left == [3, 5, 7, 9], "the 5 headings went first, then the oldest fix")
        let expired = try await commit(store, next: 11, reserved: 100, expiresBefore: 8000)
        #expect(expired.expired == 3)
        let after = try await store.storage.backlog(after: 0, limit: 20, maximumBytes: 1 << 20, excluding: []).map(\.seq)
        #expect(after == [9])
    }

    @Test(
        "the age limit keeps what is on its way to the broker (a backlog batch in flight): delivered, it is no loss, and counted as none",
        arguments: [false, true])
    func expiryKeepsWhatIsBeingSent(memory: Bool) async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = memory ? OutboxStore.memory() : await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: Self.quiet)
        _ = try await commit(store, inserts: (1...4).map { record(UInt64($0), at: Int64($0) * 1000) }, next: 5, reserved: 100)
        var aged = OutboxCommit(nextSeq: 5, reservedSeq: 100, expiresBeforeMilliseconds: 10_000, maximumBytes: 1 << 30)
        aged.protected = [1, 2]
        let result = try await store.storage.commit(aged)
        #expect(result.expired == 2, "only the two not being sent expire")
        let left = try await store.storage.backlog(after: 0, limit: 20, maximumBytes: 1 << 20, excluding: []).map(\.seq)
        #expect(left == [1, 2])
    }

    @Test("a record stored again (the same seq) is not counted twice")
    func reinsertCountsOnce() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: Self.quiet)
        let records = (1...300).map { record($0) }
        let first = try await commit(store, inserts: records, next: 301, reserved: 400)
        #expect(first.count == 300)
        #expect(first.bytes == records.reduce(0) { $0 + $1.accountedBytes })
        let again = try await commit(store, inserts: Array(records[250...]) + [record(301)], next: 302, reserved: 400)
        #expect(again.count == 301, "only seq 301 is new")
        #expect(again.bytes == first.bytes + record(301).accountedBytes)
        await store.close()
        let reopened = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: Self.quiet)
        #expect(reopened.storedCount == 301)
        #expect(reopened.opening.bytes == again.bytes, "what the commits counted is what the store holds")
        await reopened.close()
    }

    @Test("the byte limit over many pages of one kind keeps the records being sent, on both sides of a page boundary")
    func limitAcrossPages() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: Self.quiet)
        let records = (1...1000).map { record(UInt64($0)) }
        let perRecord = records[0].accountedBytes
        // Room for 100: 900 go, the oldest first, except the protected ones.
        let protected: Set<UInt64> = [1, 256, 257, 513, 899]
        let result = try await store.storage.commit(
            OutboxCommit(
                inserts: records, deletes: [], nextSeq: 1001, reservedSeq: 1100, expiresBeforeMilliseconds: 0,
                maximumBytes: perRecord * 100, protected: protected))
        #expect(result.full == 900)
        #expect(result.count == 100)
        #expect(result.bytes == perRecord * 100)
        let left = try await store.storage.backlog(after: 0, limit: 2000, maximumBytes: 1 << 30, excluding: []).map(\.seq)
        #expect(left == protected.sorted() + Array(906...1000), "the protected five, then the newest 95")
        await store.close()
    }

    @Test("close(): work under way finishes, later commits and reads throw, a second close waits for the first")
    func closeWhileWorking() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: Self.quiet)
        let records = (1...5000).map { record($0) }
        let committing = Task { try await commit(store, inserts: records, next: 5001, reserved: 6000) }
        async let firstClose: Void = store.close()
        async let secondClose: Void = store.close()
        _ = await (firstClose, secondClose)
        let outcome = await committing.result
        await #expect(throws: SQLiteOutboxStorage.Closed.self) {
            try await store.storage.backlog(after: 0, limit: 1, maximumBytes: 1 << 20, excluding: [])
        }
        await #expect(throws: SQLiteOutboxStorage.Closed.self) {
            try await commit(store, next: 5001, reserved: 6000)
        }
        // The commit either ran whole (it began before the close) or not at all.
        let reopened = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: Self.quiet)
        switch outcome {
        case .success(let result):
            #expect(result.count == 5000)
            #expect(reopened.storedCount == 5000)
        case .failure(let error):
            #expect(error is SQLiteOutboxStorage.Closed, "\(error)")
            #expect(reopened.storedCount == 0)
        }
        await reopened.close()
    }

    @Test("backlog reads are oldest first, bounded by count and bytes, and skip excluded records")
    func backlogReads() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: Self.quiet)
        _ = try await commit(store, inserts: (1...50).map { record($0, bytes: 200) }, next: 51, reserved: 200)
        let batch = try await store.storage.backlog(after: 10, limit: 100, maximumBytes: 1000, excluding: [12])
        #expect(batch.map(\.seq) == [11, 13, 14, 15, 16])
        let one = try await store.storage.backlog(after: 0, limit: 100, maximumBytes: 10, excluding: [])
        #expect(one.map(\.seq) == [1], "at least one record, even over the byte bound")
    }

    /// Writes 400 records into a store and closes it.
    private func fill(dir: TemporaryDirectory) async throws {
        let good = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: Self.quiet)
        _ = try await commit(good, inserts: (1...400).map { record($0, bytes: 300) }, next: 401, reserved: 500, clean: true)
        await good.close()
    }

    static let brokenStores: [(String, [UInt8])] = [
        (
            "garbage",
            Array("this is not a database, it is what a power cut can leave behind\n".utf8)
                + (0..<4000).map { UInt8(truncatingIfNeeded: $0 &* 131) }
        ),
        ("zero bytes", []),
    ]

    @Test(
        "a store that is garbage, truncated or of another schema is moved aside (never deleted) and replaced",
        arguments: ["garbage", "truncated", "wrong schema", "zero bytes"])
    func brokenStoreMovedAside(kind: String) async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = OutboxStore.path(directory: dir.path, vehicle: vehicle)
        switch kind {
        case "garbage":
            try Data(Self.brokenStores[0].1).write(to: URL(fileURLWithPath: path))
        case "zero bytes":
            try Data().write(to: URL(fileURLWithPath: path))
        case "truncated":
            try await fill(dir: dir)  // closed again: checkpointed into the main file
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            try? FileManager.default.removeItem(atPath: path + "-wal")
            try? FileManager.default.removeItem(atPath: path + "-shm")
            try bytes.prefix(bytes.count / 3).write(to: URL(fileURLWithPath: path))
        default:
            try sqlite3(path, "CREATE TABLE event(id TEXT, body TEXT); INSERT INTO event VALUES ('a', 'b');")
        }
        let capture = InMemoryLogHandler()
        let logger = Logger(label: "test") { _ in capture }
        let store = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: logger)
        if kind == "zero bytes" {
            // SQLite reads an empty file as an empty database: nothing to move aside, nothing lost.
            #expect(store.degradedReason == nil)
            #expect(store.movedAsidePath == nil)
        } else {
            #expect(store.degradedReason == nil, "a fresh store replaces it")
            let aside = try #require(store.movedAsidePath)
            #expect(FileManager.default.fileExists(atPath: aside), "the broken store is kept for inspection")
            let errors = capture.entries.filter { $0.level == .error }
            #expect(errors.count == 1, "one error")
            #expect(errors.first?.metadata["outbox.path"]?.description == path, "naming the path")
            #expect(errors.first?.metadata["outbox.movedTo"]?.description == aside)
        }
        _ = try await commit(store, inserts: [record(store.nextSeq)], next: store.nextSeq + 1, reserved: store.nextSeq + 64)
        #expect(store.storage.location == path, "the new store is usable at the same path")
    }

    /// Runs `sql` on the database at `path` with the sqlite3 command-line shell (another
    /// program than the agent, as an earlier agent's file or a user's edit would be).
    /// Returns what it printed.
    @discardableResult
    private func sqlite3(_ path: String, _ sql: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [path, sql]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let printed = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "sqlite3 \(sql)")
        return String(decoding: printed, as: UTF8.self)
    }

    /// The tables an earlier agent made with GRDB's migrator (schema v1 and GRDB's own table of
    /// applied migrations).
    private static let earlierAgentSchema = """
        CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
        CREATE TABLE event (seq INTEGER PRIMARY KEY NOT NULL, kind INTEGER NOT NULL, storedAt INTEGER NOT NULL, payload BLOB NOT NULL);
        CREATE INDEX event_kind_seq ON event(kind, seq);
        CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL) WITHOUT ROWID;
        """

    @Test("a store an earlier agent wrote (GRDB's migration table) opens as it is: its backlog is sent, numbering continues")
    func earlierAgentsStore() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = OutboxStore.path(directory: dir.path, vehicle: vehicle)
        try sqlite3(
            path,
            Self.earlierAgentSchema + """
                INSERT INTO grdb_migrations VALUES ('v1');
                INSERT INTO event VALUES (7, 1, 1000, CAST('{"seq":7}' AS BLOB)), (8, 2, 1000, CAST('{"seq":8}' AS BLOB));
                INSERT INTO meta VALUES ('nextSeq', 9), ('reservedSeq', 40), ('clean', 1);
                """)
        let store = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: Self.quiet)
        #expect(store.degradedReason == nil)
        #expect(store.movedAsidePath == nil, "nothing moved aside")
        #expect(store.storedCount == 2)
        #expect(store.nextSeq == 9, "a clean stop: no gap")
        #expect(store.run == 0, "its numbering goes on as before, without a run in the messages")
        let backlog = try await store.storage.backlog(after: 0, limit: 10, maximumBytes: 1 << 20, excluding: [])
        #expect(backlog.map(\.seq) == [7, 8])
        #expect(backlog.map(\.kind) == [.fix, .heading])
        #expect(backlog.map { String(decoding: $0.payload, as: UTF8.self) } == [#"{"seq":7}"#, #"{"seq":8}"#])
        await store.close()
    }

    @Test("a store written now has exactly the tables and index an earlier agent's GRDB migration made, so it opens there too")
    func schemaIsEarlierAgents() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: Self.quiet)
        #expect(store.degradedReason == nil)
        let earlier = dir.path + "/earlier.db"
        try sqlite3(earlier, Self.earlierAgentSchema)
        func schema(_ path: String) throws -> [String] {
            let output = try sqlite3(path, "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name")
            // One statement per entry, without its whitespace (line breaks and indentation differ).
            return output.split(separator: "CREATE").map { $0.filter { !$0.isWhitespace } }
        }
        let written = try schema(OutboxStore.path(directory: dir.path, vehicle: vehicle))
        #expect(written.count == 4)
        #expect(written == (try schema(earlier)))
    }

    @Test("a store a newer agent wrote (an unknown schema version) is moved aside, not written")
    func newerAgentsStore() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = OutboxStore.path(directory: dir.path, vehicle: vehicle)
        try sqlite3(path, Self.earlierAgentSchema + "INSERT INTO grdb_migrations VALUES ('v1'), ('v2');")
        let capture = InMemoryLogHandler()
        let store = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: Logger(label: "t") { _ in capture })
        let aside = try #require(store.movedAsidePath)
        #expect(FileManager.default.fileExists(atPath: aside))
        let error = capture.entries.first { $0.level == .error }
        #expect(error?.metadata["error"]?.description.contains("newer agent") == true, "\(String(describing: error))")
        await store.close()
    }

    @Test("a state directory that cannot hold a store gives a memory store, marked degraded with the path")
    func unusableDirectory() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let file = try dir.createFile("not-a-directory", "x")
        let capture = InMemoryLogHandler()
        let store = await OutboxStore.open(directory: file + "/state", vehicle: vehicle, logger: Logger(label: "t") { _ in capture })
        let reason = try #require(store.degradedReason)
        #expect(reason.contains(file), "names the path: \(reason)")
        #expect(store.storage.location == "memory")
        #expect(capture.entries.filter { $0.level == .error }.count == 1)
    }
}
