import EdgeCore
import FleetProtocol
import FleetcastCore
import GNSS
import Logging
import OutboxCore
import SQLiteNIO

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Opens a vehicle's outbox store in the state directory, whatever state it is in.
///
/// - A store that is not a database, is corrupt, or has another schema is **moved aside**
///   (renamed `{name}.corrupt-{UTC time}`, with its `-wal` and `-shm` files; never deleted),
///   one error naming both paths is logged, and a new store is created in its place.
/// - A state directory that cannot hold a store (read-only, full, missing and not creatable)
///   gives a ``MemoryOutboxStorage``: the agent keeps publishing, the backlog is bounded and
///   lost on restart, and the status says `storage: degraded` with the reason.
/// - A `{vehicle}.seq` counter left by an older agent is honoured: no number below it is
///   handed out.
public struct OutboxStore: Sendable {
    /// The opened storage.
    package let storage: any OutboxStorage
    /// What the store held.
    package let opening: OutboxOpening
    /// Why the store is degraded (memory only); `nil` when it is a working SQLite store.
    public let degradedReason: String?
    /// Where a corrupt store was moved, if it was.
    public let movedAsidePath: String?

    /// The store's path for `vehicle` in `directory`: `{directory}/{vehicle}.outbox`.
    public static func path(directory: String, vehicle: VehicleID) -> String {
        (directory.hasSuffix("/") ? String(directory.dropLast()) : directory) + "/\(vehicle.rawValue).outbox"
    }

    /// Records stored by earlier runs, not yet acknowledged.
    public var storedCount: Int { opening.count }
    /// The first `seq` this run hands out.
    public var nextSeq: UInt64 { opening.nextSeq }
    /// Numbers skipped because the last run did not stop cleanly.
    public var uncleanSkipped: UInt64 { opening.uncleanSkipped }
    /// The numbering run of this run's messages (the contract's `"run"`; 0 for a store of an
    /// earlier agent, whose messages then carry none).
    public var run: UInt64 { opening.run }

    /// Closes the store after its last commit: the database file then holds everything (its
    /// write-ahead log checkpointed into it), as after a clean stop.
    public func close() async {
        await storage.close()
    }

    /// A memory-only store (tests, and the fallback), starting at `nextSeq` in numbering run
    /// `run` (0: messages carry no run).
    public static func memory(nextSeq: UInt64 = 1, run: UInt64 = 0, reason: String? = nil) -> OutboxStore {
        OutboxStore(
            storage: MemoryOutboxStorage(),
            opening: OutboxOpening(count: 0, bytes: 0, nextSeq: nextSeq, uncleanSkipped: 0, run: run),
            degradedReason: reason, movedAsidePath: nil)
    }

    /// A store over `storage` (tests: a storage that fails or hangs on purpose).
    package init(storage: any OutboxStorage, opening: OutboxOpening, degradedReason: String? = nil, movedAsidePath: String? = nil) {
        self.storage = storage
        self.opening = opening
        self.degradedReason = degradedReason
        self.movedAsidePath = movedAsidePath
    }

    /// Opens (or creates) `vehicle`'s store in `directory`; never throws (see the type). SQLite
    /// opens and checks the file on NIO's thread pool: the task suspends, no thread blocks.
    ///
    /// - Parameters:
    ///   - now: names a moved-aside file, and a numbering run begun now.
    ///   - logger: one error for a store moved aside, one for a store that cannot be used.
    public static func open(
        directory: String, vehicle: VehicleID, logger: Logger, now: UTCTimestampSource = SystemUTCClock.now
    ) async -> OutboxStore {
        let path = path(directory: directory, vehicle: vehicle)
        let legacy = legacySequence(directory: directory, vehicle: vehicle)
        let newRun = UInt64(clamping: now().millisecondsSince1970)
        do {
            try AtomicFile.ensureDirectory(directory)
        } catch {
            return await degraded(path: path, reason: "\(error)", nextSeq: legacy, run: newRun, logger: logger)
        }
        var movedAside: String?
        for attempt in 0..<2 {
            do {
                let (storage, opening) = try await SQLiteOutboxStorage.open(
                    path: path, minimumNextSeq: legacy, reserve: 128, newRun: newRun)
                if opening.count > 0 || opening.uncleanSkipped > 0 {
                    logger.notice(
                        "outbox opened with a backlog",
                        metadata: [
                            "outbox.path": "\(path)", "outbox.backlog": "\(opening.count)",
                            "outbox.uncleanSkipped": "\(opening.uncleanSkipped)", "seq.next": "\(opening.nextSeq)",
                            "seq.run": "\(opening.run)",
                        ])
                }
                return OutboxStore(storage: storage, opening: opening, degradedReason: nil, movedAsidePath: movedAside)
            } catch let unusable as SQLiteOutboxStorage.Unusable where attempt == 0 {
                let aside = "\(path).corrupt-\(compactTime(now()))"
                if let failure = moveAside(path, to: aside) {
                    return await degraded(
                        path: path, reason: "unusable (\(unusable)) and cannot be moved aside: \(failure)", nextSeq: legacy, run: newRun,
                        logger: logger)
                }
                movedAside = aside
                logger.error(
                    "outbox store unusable, moved aside; starting an empty one",
                    metadata: [
                        "outbox.path": "\(path)", "outbox.movedTo": "\(aside)", "error": "\(unusable)",
                    ])
            } catch {
                return await degraded(path: path, reason: describe(error), nextSeq: legacy, run: newRun, logger: logger)
            }
        }
        return await degraded(path: path, reason: "cannot be recreated", nextSeq: legacy, run: newRun, logger: logger)
    }

    /// The memory fallback. An existing store that can still be read gives the numbering a
    /// floor (no number it stored or reserved is handed out again); its records stay in it
    /// for a run that can write it. Nothing of the numbering lasts beyond this run, so it is a
    /// numbering run of its own (`run`).
    private static func degraded(
        path: String, reason: String, nextSeq: UInt64, run: UInt64, logger: Logger
    ) async -> OutboxStore {
        let text = "\(path): \(reason)"
        var metadata: Logger.Metadata = ["outbox.path": "\(path)", "error": "\(reason)"]
        var next = nextSeq
        if let existing = await SQLiteOutboxStorage.readOnlyNumbering(path: path) {
            next = max(next, existing.nextSeq)
            metadata["outbox.kept"] = "\(existing.stored)"
            metadata["seq.next"] = "\(next)"
        }
        logger.error("outbox store cannot be used; keeping messages in memory only (lost on restart)", metadata: metadata)
        return .memory(nextSeq: next, run: max(1, run), reason: text)
    }

    private static func describe(_ error: any Error) -> String {
        if let error = error as? SQLiteError {
            return "\(error.message) (\(error.reason))"
        }
        return "\(error)"
    }

    /// The value of an older agent's `{vehicle}.seq` counter, or 1.
    private static func legacySequence(directory: String, vehicle: VehicleID) -> UInt64 {
        let file = (directory.hasSuffix("/") ? String(directory.dropLast()) : directory) + "/\(vehicle.rawValue).seq"
        guard let bytes = try? AtomicFile.contents(of: file),
            let value = UInt64(String(decoding: bytes, as: UTF8.self).filter { !$0.isWhitespace })
        else { return 1 }
        return max(1, value)
    }

    /// Renames the store and its WAL and shared-memory files; returns the error text on failure.
    private static func moveAside(_ path: String, to aside: String) -> String? {
        for suffix in ["-wal", "-shm"] where access(path + suffix, F_OK) == 0 {
            _ = rename(path + suffix, aside + suffix)
        }
        guard rename(path, aside) == 0 else { return String(cString: strerror(errno)) }
        return nil
    }

    private static func compactTime(_ time: UTCTimestamp) -> String {
        let c = time.components
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(c.year)\(two(c.month))\(two(c.day))T\(two(c.hour))\(two(c.minute))\(two(c.second))Z"
    }
}

/// A wall clock returning UTC time (``SystemUTCClock/now()`` in production).
public typealias UTCTimestampSource = @Sendable () -> UTCTimestamp
