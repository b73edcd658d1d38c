/// Where the outbox keeps fixes and headings until the broker acknowledges them: a SQLite
/// database in the state directory (``SQLiteOutboxStorage``), or, when none can be used, a
/// bounded memory buffer (``MemoryOutboxStorage``).
///
/// One writer (the outbox's sync loop) calls ``commit(_:)``; the backlog drain reads with
/// ``backlog(after:limit:maximumBytes:excluding:)`` concurrently. The SQLite store does its I/O
/// (an `fsync` on an SD card can take hundreds of milliseconds) on its own serial queue, not
/// on the caller's thread; never call one under a lock.
package protocol OutboxStorage: Sendable {
    /// A short name for logs and the status (`/var/lib/fleetcast/van-7.outbox`, `memory`).
    var location: String { get }

    /// Applies one batch as one transaction (one `fsync`): inserts, deletes, the `seq`
    /// reservation; then enforces the age and size limits. Returns the state after it.
    func commit(_ batch: OutboxCommit) async throws -> OutboxCommitResult

    /// Up to `limit` stored records with `seq > after`, oldest first, whose payloads add up to
    /// at most `maximumBytes` (at least one record when any is there), skipping `excluding`.
    func backlog(after: UInt64, limit: Int, maximumBytes: Int, excluding: Set<UInt64>) async throws -> [OutboxRecord]

    /// Releases the store's files after the last commit (the SQLite store checkpoints its WAL
    /// into the database file). A store dropped without it is closed in the background.
    func close() async
}

extension OutboxStorage {
    /// Nothing to release (memory).
    package func close() async {}
}

/// What an outbox found in its store when it opened it.
package struct OutboxOpening: Sendable, Equatable {
    /// Records stored (the backlog left by the last run).
    package var count: Int
    /// Their accounted bytes.
    package var bytes: Int
    /// The first `seq` this run may hand out: never one handed out before.
    package var nextSeq: UInt64
    /// `seq` numbers skipped because the last run did not stop cleanly (0 after a clean stop).
    package var uncleanSkipped: UInt64
    /// The reservation stored at opening: no number at or above it may be sent before the
    /// next commit.
    package var reservedSeq: UInt64 = .max
    /// The numbering run this run's messages belong to (`FleetProtocol.MessageNumber.run`):
    /// kept from the last run after a clean stop, a new one (the opening time, milliseconds
    /// since 1970) for a new store, after an unclean stop (numbers were skipped) and for memory
    /// only; 0 for a store of an earlier agent that never recorded one.
    package var run: UInt64 = 0

    /// What a store holds at opening.
    package init(
        count: Int, bytes: Int, nextSeq: UInt64, uncleanSkipped: UInt64, reservedSeq: UInt64 = .max, run: UInt64 = 0
    ) {
        (self.count, self.bytes, self.nextSeq, self.uncleanSkipped) = (count, bytes, nextSeq, uncleanSkipped)
        (self.reservedSeq, self.run) = (reservedSeq, run)
    }
}

/// One transaction's worth of changes to the store.
package struct OutboxCommit: Sendable {
    /// Records to insert (accepted since the last commit and not acknowledged yet).
    package var inserts: [OutboxRecord] = []
    /// Stored records the broker acknowledged since the last commit.
    package var deletes: [UInt64] = []
    /// The next `seq` to hand out, as of this batch: every lower number is either in the store,
    /// in `inserts`, or acknowledged.
    package var nextSeq: UInt64
    /// No `seq` at or above this is handed out before the next commit (the reservation that
    /// keeps numbers from being reused after a crash).
    package var reservedSeq: UInt64
    /// Set on the last commit of a clean stop: the next run starts at `nextSeq`, without a gap.
    package var clean = false
    /// Records older than this (milliseconds since 1970) are dropped as expired.
    package var expiresBeforeMilliseconds: Int64
    /// Records whose accounted bytes exceed this are dropped, oldest headings first, then the
    /// oldest fixes.
    package var maximumBytes: Int
    /// Records not to drop for size (being sent right now).
    package var protected: Set<UInt64> = []

    package init(
        inserts: [OutboxRecord] = [], deletes: [UInt64] = [], nextSeq: UInt64, reservedSeq: UInt64, clean: Bool = false,
        expiresBeforeMilliseconds: Int64, maximumBytes: Int, protected: Set<UInt64> = []
    ) {
        (self.inserts, self.deletes, self.nextSeq, self.reservedSeq, self.clean) = (inserts, deletes, nextSeq, reservedSeq, clean)
        (self.expiresBeforeMilliseconds, self.maximumBytes, self.protected) = (expiresBeforeMilliseconds, maximumBytes, protected)
    }
}

/// The store after a commit.
package struct OutboxCommitResult: Sendable, Equatable {
    /// Records stored.
    package var count: Int
    /// Their accounted bytes.
    package var bytes: Int
    /// Records dropped by this commit because they were older than the maximum age.
    package var expired: UInt64 = 0
    /// Records dropped by this commit because the store was over its byte limit.
    package var full: UInt64 = 0

    /// `count` records of `bytes` stored, nothing dropped yet.
    package init(count: Int, bytes: Int) {
        (self.count, self.bytes) = (count, bytes)
    }
}
