/// The broker link as the outbox sees it: what ``OutboxState/linkConnected(statusFirst:)`` and
/// ``OutboxState/linkLost()`` report, and whether this connection's status has gone out yet.
/// One value where there were three flags (link down, link reported, status first), so that a
/// link both down and up, or a status owed by a link never reported, cannot be written.
package enum OutboxLinkPhase: Equatable, Sendable {
    /// The sender does not report its connections: the link is taken to be up.
    case unreported
    /// Lost, or not connected yet: nothing goes live. `statusOwed`: the connection before the
    /// loss had not handed out its status yet (a reconnect that brings none still owes it).
    case down(statusOwed: Bool)
    /// Connected; nothing goes live before this connection's status has been handed out.
    case awaitingStatus
    /// Connected, its status handed out (or none due).
    case up

    /// Nothing goes live.
    package var isDown: Bool { if case .down = self { true } else { false } }

    /// The sender reports its connections: the link's state is known.
    package var isReported: Bool { self != .unreported }

    /// A status of this connection must go before any record.
    package var owesStatus: Bool { self == .awaitingStatus || self == .down(statusOwed: true) }

    /// The link was lost.
    package mutating func lost() {
        self = .down(statusOwed: owesStatus)
    }

    /// The link connected; `statusFirst`: a status of this connection is coming.
    package mutating func connected(statusFirst: Bool) {
        self = statusFirst || owesStatus ? .awaitingStatus : .up
    }

    /// A status was handed out to the live sender.
    package mutating func statusHandedOut() {
        if self == .awaitingStatus { self = .up }
    }
}

/// The store's commit, as the outbox sees it: none in progress, or one writing these records
/// and deleting these acknowledged ones. One value where there were a flag, two collections and
/// a second flag (the commit carries a flush), so that a commit's records cannot outlive it.
package enum OutboxCommitPhase: Sendable {
    /// What one commit in progress carries.
    package struct InFlight: Sendable {
        /// The records it writes (restored to the unwritten ones if it fails).
        package var records: [OutboxRecord]
        /// The acknowledged stored records it deletes.
        package var deleting: Set<UInt64>
        /// It carries a flush asked for with ``OutboxState/requestFlush()``.
        package var carriesFlush: Bool

        package init(records: [OutboxRecord], deleting: Set<UInt64>, carriesFlush: Bool) {
            (self.records, self.deleting, self.carriesFlush) = (records, deleting, carriesFlush)
        }
    }

    case idle
    case writing(InFlight)

    /// The commit in progress, if any.
    package var inFlight: InFlight? { if case .writing(let c) = self { c } else { nil } }

    /// The records being written (none when idle).
    package var records: [OutboxRecord] { inFlight?.records ?? [] }

    /// The deletions being written (none when idle).
    package var deleting: Set<UInt64> { inFlight?.deleting ?? [] }

    /// Ends the commit in progress and returns what it carried.
    package mutating func end() -> InFlight {
        defer { self = .idle }
        return inFlight ?? InFlight(records: [], deleting: [], carriesFlush: false)
    }
}

/// Batched mode's flushes: a flush asked for, taken by the next commit, readable once that
/// commit is over. Numbers and generations only; the ``OutboxState`` owns the commit.
package struct OutboxFlush: Equatable, Sendable {
    /// A flush was asked for and no commit has taken it yet.
    package private(set) var requested = false
    /// Records numbered below this were accepted before the last completed flush: the drain
    /// sends them without waiting for a batch to fill.
    package private(set) var below: UInt64 = 0
    /// Rises when a flush has been committed (what it covers can be read from the store).
    package private(set) var generation: UInt64 = 0

    package init() {}

    /// A flush is asked for.
    package mutating func request() { requested = true }

    /// A commit starts: whether it carries the flush asked for (then no longer asked for).
    package mutating func take() -> Bool {
        defer { requested = false }
        return requested
    }

    /// A commit that carried a flush is over: what was numbered below `seq` is readable.
    package mutating func completed(below seq: UInt64) {
        below = max(below, seq)
        generation += 1
    }
}

/// The backlog drain's place in the store: the highest `seq` it has read past, the batch on its
/// way, and the lowest place it was sent back to since its last read (a record that joined the
/// backlog while the drain was reading it was live then, so the read skipped it).
package struct OutboxBacklogCursor: Equatable, Sendable {
    /// Read records with a larger `seq` next.
    package private(set) var position: UInt64 = 0
    /// The batch on its way to the broker (rising `seq`), if any.
    package private(set) var inFlight: [UInt64]?
    private var rewoundSinceRequest: UInt64?

    package init() {}

    /// The drain reads: where from, or `nil` while a batch is on its way.
    package mutating func read() -> UInt64? {
        guard inFlight == nil else { return nil }
        rewoundSinceRequest = nil
        return position
    }

    /// The drain sends these records (rising `seq`), read after its last ``read()``: the
    /// cursor moves past them, but not past a record sent back since that read.
    package mutating func sending(_ seqs: [UInt64]) {
        inFlight = seqs
        if let last = seqs.last { position = max(position, last) }
        if let rewound = rewoundSinceRequest { position = min(position, rewound) }
        rewoundSinceRequest = nil
    }

    /// The batch on its way is over (acknowledged, refused): returns its records.
    package mutating func finished() -> [UInt64] {
        defer { inFlight = nil }
        return inFlight ?? []
    }

    /// The batch on its way failed: the cursor goes back before it, to send it again.
    package mutating func failed() {
        if let first = inFlight?.first { rewind(before: first) }
        inFlight = nil
    }

    /// The record `seq` joined the backlog: the next read must reach it.
    package mutating func rewind(before seq: UInt64) {
        let target = seq &- 1
        position = min(position, target)
        rewoundSinceRequest = min(rewoundSinceRequest ?? target, target)
    }
}
