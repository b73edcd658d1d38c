import FleetcastCore
import FleetProtocol
import Logging
import Synchronization

/// Hands out a vehicle's message sequence numbers (`seq`): rising by one per message, and
/// surviving restarts, so that subscribers can detect gaps and drop duplicates.
///
/// The next number is kept in `{stateDir}/{vehicle}.seq` (decimal text), replaced atomically
/// (temporary file, `fsync`, `rename`, `fsync` of the directory). To spare the SD card, the
/// store does not write on every message: it **reserves a block** ahead, persisting
/// `next + blockSize` before handing out numbers up to it. After a crash the agent starts at
/// the reserved value: numbers are skipped (a gap) but never reused. ``close()`` (clean
/// shutdown) persists the exact next value, so a clean restart continues without a gap.
///
/// The first number ever handed out is 1.
public final class SequenceStore: Sendable {
    /// Where the counter lives.
    public let path: String
    /// How many numbers are reserved per write.
    public let blockSize: UInt64

    private struct State {
        var next: UInt64
        /// The value persisted on disk: no number at or above it has been handed out.
        var reservedUpTo: UInt64
        var closed = false
        var persistFailures: UInt64 = 0
    }

    private let state: SanitizerVisibleMutex<State>
    private let logger: Logger

    /// Opens (or creates) the counter of `vehicle` in `directory`, creating the directory if
    /// missing, and reserves the first block.
    ///
    /// - Throws: ``SequenceStoreError`` naming the path when the directory or file cannot be
    ///   created, read or written, or when the file does not hold a number.
    public init(directory: String, vehicle: VehicleID, blockSize: UInt64 = 1000, logger: Logger) throws(SequenceStoreError) {
        let path = (directory.hasSuffix("/") ? String(directory.dropLast()) : directory) + "/\(vehicle.rawValue).seq"
        self.path = path
        self.blockSize = max(1, blockSize)
        var logger = logger
        logger[metadataKey: "vehicle"] = "\(vehicle.rawValue)"
        self.logger = logger
        let start: UInt64
        do {
            try AtomicFile.ensureDirectory(directory)
            if let bytes = try AtomicFile.contents(of: path) {
                let text = String(decoding: bytes, as: UTF8.self)
                let trimmed = text.filter { !$0.isWhitespace }
                guard let value = UInt64(trimmed), value >= 1, value < UInt64.max / 2 else {
                    throw SequenceStoreError.corrupt(path: path, content: String(text.prefix(40)))
                }
                start = value
            } else {
                start = 1
            }
            try AtomicFile.replace(path, with: Array("\(start + self.blockSize)\n".utf8))
        } catch let failure as AtomicFile.Failure {
            throw SequenceStoreError.io(failure.description)
        } catch let error as SequenceStoreError {
            throw error
        } catch {
            throw SequenceStoreError.io("\(path): \(error)")
        }
        state = SanitizerVisibleMutex(State(next: start, reservedUpTo: start + self.blockSize))
        logger.debug("sequence store opened", metadata: ["seq.path": "\(path)", "seq.next": "\(start)"])
    }

    /// The next number to hand out (without taking it).
    public var peekNext: UInt64 { state.withLock { $0.next } }

    /// How many block reservations could not be written (each is logged as an error).
    public var persistFailures: UInt64 { state.withLock { $0.persistFailures } }

    /// Takes the next number. Every `blockSize` numbers it persists a new reservation first;
    /// if that write fails the error is logged and counted and numbering goes on (a crash
    /// while the disk keeps failing could then reuse numbers; the log says so).
    public func next() -> UInt64 {
        state.withLock { state in
            if state.next >= state.reservedUpTo {
                let limit = state.next + blockSize
                do {
                    try AtomicFile.replace(path, with: Array("\(limit)\n".utf8))
                } catch {
                    state.persistFailures += 1
                    logger.info(
                        "cannot persist sequence reservation",
                        metadata: ["seq.path": "\(path)", "error": "\(error)"]
                    )
                }
                state.reservedUpTo = limit
            }
            defer { state.next += 1 }
            return state.next
        }
    }

    /// Persists the exact next value (clean shutdown), so a restart continues without a gap.
    /// Numbers can still be taken afterwards; they reserve a new block.
    public func close() throws(SequenceStoreError) {
        let failure = state.withLock { state -> AtomicFile.Failure? in
            do throws(AtomicFile.Failure) {
                try AtomicFile.replace(path, with: Array("\(state.next)\n".utf8))
                state.reservedUpTo = state.next
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw SequenceStoreError.io(failure.description) }
    }
}
