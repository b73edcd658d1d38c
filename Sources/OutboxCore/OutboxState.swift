import DequeModule
import FleetProtocol

/// Something for the outbox's live sender: the newest status, or a record for its live topic.
package enum OutboxLiveItem: Equatable, Sendable {
    case status(OutboundMessage)
    case record(OutboxRecord)
}

/// What a task waits for in the outbox.
package enum OutboxCondition: Hashable, Sendable {
    /// The live queue has room (lossless intake), or the outbox is closed.
    case liveRoom
    /// No live send is outstanding.
    case liveIdle
    /// No backlog batch is on its way to the broker (the drain's last one was acknowledged,
    /// refused or failed).
    case backlogIdle
    /// The drain may read again (``OutboxState/backlogRequest()``): no batch is on its way, and
    /// the link owes no status.
    case backlogReadable
    /// A commit should happen now (numbers reserved are running out, or closing).
    case commitDue
    /// The backlog may have records the drain has not seen (the state's generation moved
    /// past the given one), or the outbox is closed.
    case backlog(after: UInt64)
    /// Batched mode: a batch should go now: a flush asked for with
    /// ``OutboxState/requestFlush()`` has been committed (the flush generation moved past
    /// `flushAfter`), at least `stored` records wait in the store, the store cannot be
    /// written (nothing is held in memory for a batch), or the outbox is closed.
    case batchReady(flushAfter: UInt64, stored: Int)
}

/// The outbox's state machine: numbering, what is waiting to be written to the store, what goes
/// out live, what the backlog drain may read, and what each waiting task waits for
/// (``holds(_:waking:)``). A plain value, part of the ``EdgeState``: each event is a `mutating
/// func` that decides under the edge's lock and returns the live sender to resume
/// (``Resumptions``), which the publisher does after releasing the lock. Generic over that
/// continuation so tests drive it with plain values.
///
/// **Lifecycle of a record** (a fix or heading with its `seq`):
/// 1. ``accept(_:)`` puts it in `unwritten` (to be written by the next commit) and, as the newest
///    of its kind, in the live queue (in batched mode it is backlog from the start). A newer
///    record of the same kind that arrives before it was sent takes its place in the live
///    queue, unless live sending can take both now (``canGoLiveNow(_:)``): the older one
///    becomes backlog (in lossless mode, a replay, nothing is displaced: every record goes
///    live, in order).
/// 2. The live sender takes it with ``nextLive()`` (up to `liveWindow` in flight), then reports
///    ``liveAcknowledged(_:)`` or ``liveFailed(_:)`` (retried live while it is the newest of its
///    kind, else backlog).
/// 3. The sync loop's ``takeCommit(nowMilliseconds:)`` moves `unwritten` into one transaction;
///    ``committed(_:)`` or ``commitFailed(reason:)`` report how it went. An acknowledged record
///    still unwritten is never written; an acknowledged stored record is deleted by the next
///    commit.
/// 4. The backlog drain asks ``backlogRequest()`` what to read from the store (after a cursor,
///    excluding what is live or acknowledged), marks the batch with ``backlogSending(_:)`` and
///    reports ``backlogAcknowledged()`` or ``backlogFailed()``.
package struct OutboxState<LiveWaiter> {
    /// Fixed settings.
    package struct Settings {
        /// Most live sends awaiting acknowledgement at once (≥ 1).
        package var liveWindow: Int
        /// A finite source that must lose nothing: every record goes live, in order, and the
        /// intake waits for room (``Condition/liveRoom``) instead of displacing older ones.
        package var lossless: Bool
        /// Most records unwritten (not yet in the store) while the store fails; beyond it the
        /// oldest heading, then the oldest fix, is dropped (counted as `full`).
        package var memoryLimit: Int
        /// Oldest record kept, in milliseconds (the outbox's maximum age).
        package var maximumAgeMilliseconds: Int64
        /// Most accounted bytes stored.
        package var maximumBytes: Int
        /// Fewest numbers reserved ahead by a commit: the most skipped after a crash while the
        /// link is healthy (a commit is due when half of them are used).
        package var minimumReserve: UInt64 = 128
        /// Nothing goes live: every record waits in the store for the drain, which sends them
        /// in batches (cellular batching, `uplink.batch`). The status still goes live. Takes
        /// precedence over ``lossless`` (the agent's configuration never sets both).
        package var batched: Bool

        package init(
            liveWindow: Int, lossless: Bool, memoryLimit: Int, maximumAgeMilliseconds: Int64, maximumBytes: Int,
            minimumReserve: UInt64 = 128, batched: Bool = false
        ) {
            self.liveWindow = liveWindow
            self.lossless = lossless
            self.memoryLimit = memoryLimit
            self.maximumAgeMilliseconds = maximumAgeMilliseconds
            self.maximumBytes = maximumBytes
            self.minimumReserve = minimumReserve
            self.batched = batched
        }
    }

    package typealias LiveItem = OutboxLiveItem
    package typealias Condition = OutboxCondition

    /// The live sender to resume once the lock is released, with its item. (Tasks waiting for
    /// a ``Condition`` are the ``EdgeState``'s: it asks ``holds(_:waking:)`` after each event.)
    package struct Resumptions {
        package var live: [(LiveWaiter, LiveItem?)] = []
        package var isEmpty: Bool { live.isEmpty }

        package init(live: [(LiveWaiter, LiveItem?)] = []) {
            self.live = live
        }
    }

    /// What the backlog drain should read next.
    package struct BacklogRequest: Equatable {
        /// Read records with a larger `seq`.
        package var after: UInt64
        /// Skip these (live, or acknowledged and not deleted yet).
        package var excluding: Set<UInt64>
        /// The generation this request saw; wait for a later one when the read finds nothing.
        package var generation: UInt64
    }

    package let settings: Settings

    // MARK: Numbering
    /// The next `seq` to hand out.
    package private(set) var nextSeq: UInt64
    /// No record with a `seq` at or above this may be sent: the store's committed reservation
    /// (`UInt64.max` while the store is degraded: numbers are then not durable).
    package private(set) var reservedSeq: UInt64
    private var acceptedSinceCommit: UInt64 = 0

    // MARK: Persistence
    /// Accepted, not written, not acknowledged; rising `seq`.
    private var unwritten: Deque<OutboxRecord> = []
    /// The commit in progress, if any: what it writes and deletes.
    private var commitPhase = OutboxCommitPhase.idle
    /// Stored (or being stored) records acknowledged since the last commit was taken.
    private var acknowledgedStored: Set<UInt64> = []
    /// Records in the store, as of the last commit.
    package private(set) var storedCount = 0
    /// The store's last commit failed; `storageProblem` says why.
    package private(set) var storageProblem: String?
    /// The store itself is the memory fallback (numbers are not durable).
    package private(set) var memoryOnly: Bool

    // MARK: Live
    private var liveQueue: Deque<OutboxRecord> = []
    private var liveInflight: [UInt64: OutboxRecord] = [:]
    /// The live window filled up: nothing more goes live until half of it is acknowledged. A
    /// sender that keeps the window full (a replay at full speed, a link slower than the
    /// receiver) is then woken once per half window and hands its messages over together, which
    /// the network loop writes in one turn (corked: full TCP segments), instead of one message,
    /// one wake-up and one segment per PUBACK. A live fix on a link that keeps up never meets a
    /// full window, and is never held.
    private var liveRefilling = false
    private var pendingStatus: OutboundMessage?
    private var statusInflight: OutboundMessage?
    private var liveWaiter: LiveWaiter?
    /// A live back-off is in progress: nothing goes live until it ends.
    package private(set) var liveHeld = false
    /// The broker link: while it is down (lost, or not connected yet) nothing goes live, and
    /// what would have gone waits as the newest of its kind, or as backlog; once it connects,
    /// nothing goes live before the status of that connection (``linkConnected(statusFirst:)``,
    /// then ``setStatus(_:)``) has been handed out.
    package private(set) var link: OutboxLinkPhase
    /// Per kind, the newest record the broker acknowledged live: an older one that failed must
    /// not replace it as the retained message, so it is sent as backlog instead.
    private var newestLiveAcknowledged: [OutboundMessage.Kind: UInt64] = [:]

    // MARK: Backlog
    /// The drain's place in the store and its batch on the way.
    private var backlog = OutboxBacklogCursor()
    /// Rises whenever the backlog may hold records the drain has not read.
    package private(set) var generation: UInt64 = 1

    // MARK: Flushing (batched mode)
    private var flush = OutboxFlush()
    /// Records numbered below this were accepted before the last completed flush: the drain
    /// sends them without waiting for a batch to fill.
    package var flushBelow: UInt64 { flush.below }
    /// Rises when a flush has been committed (what it covers can be read from the store).
    package var flushGeneration: UInt64 { flush.generation }
    /// A commit is in progress.
    package var commitInProgress: Bool { commitPhase.inFlight != nil }

    // MARK: Counters and lifecycle
    /// Records lost, by cause, since start.
    package private(set) var drops = VehicleStatus.Drops()
    package private(set) var closed = false

    /// A state starting from what the store held; `linkDown`: nothing goes live until
    /// ``linkConnected(statusFirst:)`` (a sender that reports its connections).
    package init(settings: Settings, opening: OutboxOpening, memoryOnly: Bool, linkDown: Bool = false) {
        self.settings = settings
        self.link = linkDown ? .down(statusOwed: false) : .unreported
        self.nextSeq = opening.nextSeq
        self.memoryOnly = memoryOnly
        self.reservedSeq = memoryOnly ? .max : opening.reservedSeq
        self.storedCount = opening.count
        // Numbers skipped after an unclean stop are not losses: they were reserved, not all
        // used, and a new numbering run begins (no reader sees a gap). What the crash did lose
        // (numbered in its last sync interval, neither stored nor delivered) is not known here.
    }

    // MARK: Intake

    /// Hands out the next `seq` (the caller encodes the payload with it, outside the lock).
    /// Returns `nil` once closed. Also says whether a commit is due (numbers running out).
    package mutating func takeSeq() -> (seq: UInt64, resumptions: Resumptions)? {
        guard !closed else { return nil }
        let seq = nextSeq
        nextSeq += 1
        acceptedSinceCommit += 1
        return (seq, Resumptions())
    }

    /// Takes a record numbered by ``takeSeq()``. Returns `false` when closed (it is not kept).
    package mutating func accept(_ record: OutboxRecord) -> (accepted: Bool, resumptions: Resumptions) {
        guard !closed else { return (false, Resumptions()) }
        insertSorted(record, into: &unwritten)
        if storageProblem != nil, unwritten.count > settings.memoryLimit { _ = dropOldestUnwritten() }
        // Batched: backlog from the start; the commit that writes it moves the generation.
        guard !settings.batched else { return (true, serve()) }
        if settings.lossless || canGoLiveNow(record) {
            insertSorted(record, into: &liveQueue)
        } else {
            if let index = liveQueue.firstIndex(where: { $0.kind == record.kind }), liveQueue[index].seq < record.seq {
                demote(liveQueue.remove(at: index).seq)
            }
            if liveQueue.contains(where: { $0.kind == record.kind }) {
                demote(record.seq)  // a newer one of its kind is already waiting (concurrent intake)
            } else {
                insertSorted(record, into: &liveQueue)
            }
        }
        return (true, serve())
    }

    /// Whether `record` can go live right behind what waits: the link is known to be up (its
    /// sender reports its connections), nothing holds live sending, the window has room for
    /// everything queued, and nothing newer of its kind is queued or in flight. Then a record
    /// of its kind queued an instant before is not displaced into the backlog: it has not
    /// failed to go live, the live sender was only busy for that instant (with a status, as
    /// when a source's first fixes come in one burst). Both go, in order; the retained message
    /// ends with the newer. (Without reports of the link, a record not taken may wait on a link
    /// that is down: only the newest of its kind waits.)
    private func canGoLiveNow(_ record: OutboxRecord) -> Bool {
        guard link.isReported, !link.isDown, !liveHeld, !liveRefilling,
            liveInflight.count + liveQueue.count + (statusInflight == nil ? 0 : 1) < settings.liveWindow
        else { return false }
        return !liveQueue.contains { $0.kind == record.kind && $0.seq > record.seq }
            && !liveInflight.values.contains { $0.kind == record.kind && $0.seq > record.seq }
    }

    /// Asks for what has been accepted so far to be sent now rather than when its batch is
    /// full or old enough (batched mode: the vehicle started or stopped moving). The next
    /// commit writes it; then ``flushBelow`` covers it and ``Condition/batchReady(flushAfter:stored:)``
    /// holds.
    /// ``Condition/commitDue`` holds until a commit takes it: the sync loop is woken so that
    /// the commit is not a sync interval away.
    package mutating func requestFlush() -> Resumptions {
        flush.request()
        return Resumptions()
    }

    /// Replaces the status to send (a newer one supersedes one not yet sent).
    package mutating func setStatus(_ message: OutboundMessage) -> Resumptions {
        pendingStatus = message
        return serve()
    }

    // MARK: Live sending

    /// The live sender asks for its next item: the pending status first, then the oldest live
    /// record (within the window and the reservation). `.some(nil)`: closed and nothing left;
    /// `nil`: wait with ``setLiveWaiter(_:)``.
    package mutating func nextLive() -> LiveItem?? {
        if liveHeld || link.isDown { return closed && liveQueue.isEmpty && pendingStatus == nil ? .some(nil) : nil }
        let inflight = liveInflight.count + (statusInflight == nil ? 0 : 1)
        if inflight >= settings.liveWindow { liveRefilling = true }
        if liveRefilling, inflight > settings.liveWindow / 2 {
            return closed && liveQueue.isEmpty && pendingStatus == nil ? .some(nil) : nil
        }
        liveRefilling = false
        if let status = pendingStatus, statusInflight == nil, inflight < settings.liveWindow {
            pendingStatus = nil
            statusInflight = status
            link.statusHandedOut()
            return .some(.status(status))
        }
        if link.owesStatus { return closed && liveQueue.isEmpty && pendingStatus == nil ? .some(nil) : nil }
        if inflight < settings.liveWindow, let first = liveQueue.first, first.seq < reservedSeq {
            liveQueue.removeFirst()
            liveInflight[first.seq] = first
            return .some(.record(first))
        }
        if closed, liveQueue.isEmpty, pendingStatus == nil { return .some(nil) }
        return nil
    }

    /// Holds live sending back (a live send failed: the publisher backs off) or lets it go on.
    package mutating func holdLive(_ held: Bool) -> Resumptions {
        liveHeld = held
        return serve()
    }

    /// The broker link was lost: nothing goes live until it connects again (a message handed
    /// over now would wait inside the MQTT client and reach the next connection before its
    /// status).
    package mutating func linkLost() -> Resumptions {
        link.lost()
        return serve()
    }

    /// The broker link connected. `statusFirst`: a status of this connection is coming
    /// (``setStatus(_:)``); it supersedes one not yet sent, and goes before any record.
    package mutating func linkConnected(statusFirst: Bool) -> Resumptions {
        link.connected(statusFirst: statusFirst)
        if statusFirst { pendingStatus = nil }
        return serve()
    }

    /// Registers the waiting live sender (one at a time).
    package mutating func setLiveWaiter(_ waiter: LiveWaiter) -> Resumptions {
        liveWaiter = waiter
        return serve()
    }

    /// Takes the waiting live sender out (cancelled); resume it with `nil`.
    package mutating func removeLiveWaiter() -> LiveWaiter? {
        defer { liveWaiter = nil }
        return liveWaiter
    }

    /// The broker acknowledged the live record `seq`.
    package mutating func liveAcknowledged(_ seq: UInt64) -> Resumptions {
        if let record = liveInflight.removeValue(forKey: seq) {
            newestLiveAcknowledged[record.kind] = max(newestLiveAcknowledged[record.kind] ?? 0, seq)
        }
        acknowledge(seq)
        return serve()
    }

    /// The broker refused the live record `seq` for good: it leaves the outbox as if
    /// acknowledged (nothing behind it waits), counted as `rejected`.
    package mutating func liveRejected(_ seq: UInt64) -> Resumptions {
        if liveInflight.removeValue(forKey: seq) != nil { drops.rejected += 1 }
        acknowledge(seq)
        return serve()
    }

    /// Sending the live record `seq` failed: it is retried live while it is the newest of its
    /// kind (in lossless mode: unless a newer one was acknowledged live), otherwise it joins
    /// the backlog, so the retained message is never replaced by an older one.
    package mutating func liveFailed(_ seq: UInt64) -> Resumptions {
        guard let record = liveInflight.removeValue(forKey: seq) else { return serve() }
        let superseded =
            (newestLiveAcknowledged[record.kind] ?? 0) > seq
            || (!settings.lossless && liveQueue.contains(where: { $0.kind == record.kind && $0.seq > seq }))
        if !superseded {
            insertSorted(record, into: &liveQueue)
        } else {
            demote(seq)
        }
        return serve()
    }

    /// The status in flight was delivered (`true`) or not; an undelivered one is sent again
    /// unless a newer one is waiting.
    package mutating func statusSent(_ delivered: Bool) -> Resumptions {
        // (Not after a new connection: its own status is coming, and goes first.)
        if !delivered, pendingStatus == nil, !link.owesStatus { pendingStatus = statusInflight }
        statusInflight = nil
        return serve()
    }

    /// Live records waiting or in flight (the status not counted).
    package var liveCount: Int { liveQueue.count + liveInflight.count }

    /// A live record waits for a commit to reserve its number (the queue rises in `seq`).
    package var liveWaitsForReservation: Bool {
        liveQueue.last.map { $0.seq >= reservedSeq } ?? false
    }

    // MARK: Committing

    /// The next transaction: the unwritten records, the acknowledged stored ones to delete,
    /// the numbering; `nil` while a commit is in progress. `clean` marks the last one of a
    /// clean stop (then the next run continues at `nextSeq`).
    package mutating func takeCommit(nowMilliseconds: Int64, clean: Bool = false) -> OutboxCommit? {
        guard !commitInProgress else { return nil }
        let writing = Self.array(unwritten)
        let deleting = acknowledgedStored
        commitPhase = .writing(.init(records: writing, deleting: deleting, carriesFlush: flush.take()))
        unwritten.removeAll()
        acknowledgedStored.removeAll()
        // The stored reservation never falls below what may already have been sent.
        let durable = storageProblem == nil && !memoryOnly
        let reserved = clean ? nextSeq : max(nextSeq + max(settings.minimumReserve, 2 * acceptedSinceCommit), durable ? reservedSeq : 0)
        acceptedSinceCommit = 0
        // A trial commit after a failure: nothing numbered at or above what it reserves goes
        // out until it is known to have worked (live sending was unbounded while the store
        // failed; a crash right after this commit must not let the next run reuse a number
        // already sent). ``commitFailed(reason:)`` lifts the bound again.
        if !durable, !memoryOnly, !clean { reservedSeq = reserved }
        return OutboxCommit(
            inserts: writing, deletes: deleting.sorted(), nextSeq: nextSeq, reservedSeq: reserved, clean: clean,
            expiresBeforeMilliseconds: nowMilliseconds - settings.maximumAgeMilliseconds,
            maximumBytes: settings.maximumBytes, protected: protectedSeqs
        )
    }

    /// The commit succeeded. Returns whether the storage recovered from a failure, and what to resume.
    package mutating func committed(_ commit: OutboxCommit, _ result: OutboxCommitResult) -> (recovered: Bool, resumptions: Resumptions) {
        let done = commitPhase.end()
        let recovered = storageProblem != nil
        storageProblem = nil
        if !memoryOnly, !commit.clean { reservedSeq = commit.reservedSeq }
        storedCount = result.count
        drops.expired += result.expired
        drops.full += result.full
        if !done.records.isEmpty { generation += 1 }
        if done.carriesFlush { flush.completed(below: commit.nextSeq) }
        return (recovered, serve())
    }

    /// The commit failed (disk full, I/O error): its records go back to `unwritten` (bounded
    /// by `memoryLimit`) and are retried by the next commit; meanwhile numbers are not durable,
    /// so live sending goes on without waiting for a reservation. Returns whether this is a
    /// new problem (to log once).
    package mutating func commitFailed(reason: String) -> (newProblem: Bool, resumptions: Resumptions) {
        let failed = commitPhase.end()
        let newProblem = storageProblem == nil
        storageProblem = reason
        reservedSeq = .max
        for record in failed.records.reversed() { unwritten.prepend(record) }
        acknowledgedStored.formUnion(failed.deleting)
        while unwritten.count > settings.memoryLimit, dropOldestUnwritten() {}
        generation += 1  // the drain may now read the records held in memory
        if failed.carriesFlush { flush.completed(below: nextSeq) }  // they are readable there too
        return (newProblem, serve())
    }

    /// Whether a commit has anything to do: records to write or delete, numbers running out,
    /// or a failed store to retry. A healthy link at 10 Hz needs one only every few seconds.
    package var commitNeeded: Bool {
        !unwritten.isEmpty || !acknowledgedStored.isEmpty || storageProblem != nil || flush.requested
            || nextSeq + settings.minimumReserve / 2 >= reservedSeq
    }

    /// Records stored or waiting to be, not acknowledged: the status's `backlog`.
    package var backlogCount: Int {
        max(0, unacknowledgedCount - liveCount)
    }

    /// Records in the store (as of the last commit) not acknowledged: what the drain can read.
    package var storedPending: Int {
        max(0, storedCount - acknowledgedStored.count - commitPhase.deleting.count)
    }

    /// Records accepted and not acknowledged, live ones included.
    package var unacknowledgedCount: Int {
        storedPending + unwritten.count + commitPhase.records.count
    }

    // MARK: Backlog

    /// What the drain should read next; `nil` while a batch is in flight, or while the link
    /// owes its status: a connection's `online` goes before any backlog (batched mode included,
    /// where everything but the status is backlog), as it goes before any live record.
    package mutating func backlogRequest() -> BacklogRequest? {
        guard !link.owesStatus, let after = backlog.read() else { return nil }
        var excluding = acknowledgedStored.union(commitPhase.deleting)
        for record in liveQueue { excluding.insert(record.seq) }
        for seq in liveInflight.keys { excluding.insert(seq) }
        return BacklogRequest(after: after, excluding: excluding, generation: generation)
    }

    /// Backlog records held in memory because the store cannot be written (a full disk):
    /// up to `limit` with `seq > after`, oldest first, within `maximumBytes` (at least one),
    /// skipping `excluding`. Empty while the store works (then the drain reads the store).
    package func unwrittenBacklog(after: UInt64, limit: Int, maximumBytes: Int, excluding: Set<UInt64>) -> [OutboxRecord] {
        guard storageProblem != nil else { return [] }
        var records: [OutboxRecord] = []
        var total = 0
        // Not at or above the reservation: a trial commit after a failure holds numbering there
        // until it is known to have worked (a crash right after could reuse a number sent).
        for record in commitPhase.records + Self.array(unwritten)
        where record.seq > after && record.seq < reservedSeq && !excluding.contains(record.seq) {
            if records.count >= limit || (!records.isEmpty && total + record.payload.count > maximumBytes) { break }
            total += record.payload.count
            records.append(record)
        }
        return records
    }

    /// The drain is sending these records (rising `seq`) as one batch, read for its last
    /// ``backlogRequest()``. The cursor moves past them, but not past a record that joined the
    /// backlog since that request (it was live, so the read skipped it): that one is read next.
    package mutating func backlogSending(_ seqs: [UInt64]) {
        backlog.sending(seqs)
    }

    /// The batch in flight was acknowledged.
    package mutating func backlogAcknowledged() -> Resumptions {
        for seq in backlog.finished() { acknowledge(seq) }
        return serve()
    }

    /// The broker refused the batch in flight for good: its records leave the outbox, counted
    /// as `rejected`.
    package mutating func backlogRejected() -> Resumptions {
        let seqs = backlog.finished()
        for seq in seqs { acknowledge(seq) }
        drops.rejected += UInt64(seqs.count)
        return serve()
    }

    /// The batch in flight failed: the cursor goes back before it, to send it again.
    package mutating func backlogFailed() -> Resumptions {
        if backlog.inFlight?.first != nil { generation += 1 }
        backlog.failed()
        return serve()
    }

    // MARK: Closing and waiting

    /// Accepts no more records; the live sender finishes once its queue is empty.
    package mutating func close() -> Resumptions {
        closed = true
        return serve()
    }

    // MARK: Internals

    /// What a commit must not drop for age or size: what is live (waiting or in flight) or in a
    /// backlog batch on its way, which will be delivered.
    private var protectedSeqs: Set<UInt64> {
        var protected = Set(liveInflight.keys)
        for record in liveQueue { protected.insert(record.seq) }
        for seq in backlog.inFlight ?? [] { protected.insert(seq) }
        return protected
    }

    /// Whether `condition` holds: for a task about to wait, or (`waking`) for one waiting. A
    /// full live queue lets its waiter go once it is down to half (one window), not at the first
    /// free place: an intake that fills it (a replay at full speed) is woken once per window.
    package func holds(_ condition: Condition, waking: Bool = false) -> Bool {
        switch condition {
        case .liveRoom: closed || liveCount < (waking ? settings.liveWindow + 1 : settings.liveWindow * 2)
        case .liveIdle: liveInflight.isEmpty && statusInflight == nil
        case .backlogIdle: backlog.inFlight == nil
        case .backlogReadable: backlog.inFlight == nil && !link.owesStatus
        case .commitDue: closed || flush.requested || nextSeq + settings.minimumReserve / 2 >= reservedSeq
        case .backlog(let seen): closed || generation > seen
        case .batchReady(let seen, let stored):
            closed || flushGeneration > seen || storedPending >= stored || storageProblem != nil
        }
    }

    /// An acknowledged record leaves: never written if still unwritten, else deleted by the
    /// next commit.
    private mutating func acknowledge(_ seq: UInt64) {
        if let index = Self.index(of: seq, in: unwritten) {
            unwritten.remove(at: index)
        } else {
            acknowledgedStored.insert(seq)
        }
    }

    /// A record that will not go live joins the backlog: the drain must be able to read it.
    private mutating func demote(_ seq: UInt64) {
        backlog.rewind(before: seq)
        generation += 1
    }

    /// Drops the oldest unwritten heading, else fix, that is not in flight (live, or in a
    /// backlog batch read from memory: delivered, it would be no loss); `false` when every
    /// unwritten record is in flight (nothing can be dropped now).
    private mutating func dropOldestUnwritten() -> Bool {
        let batch = Set(backlog.inFlight ?? [])
        for kind in [OutboundMessage.Kind.heading, .fix] {
            if let index = unwritten.firstIndex(where: { $0.kind == kind && liveInflight[$0.seq] == nil && !batch.contains($0.seq) }) {
                let seq = unwritten.remove(at: index).seq
                liveQueue.removeAll { $0.seq == seq }
                drops.full += 1
                return true
            }
        }
        return false
    }

    private func insertSorted(_ record: OutboxRecord, into queue: inout Deque<OutboxRecord>) {
        if let last = queue.last, last.seq > record.seq {
            let index = queue.firstIndex { $0.seq > record.seq } ?? queue.endIndex
            queue.insert(record, at: index)
        } else {
            queue.append(record)
        }
    }

    /// `queue` as an array. An empty one is not copied: Swift 6's
    /// `ContiguousArray(unsafeUninitializedCapacity:initializingWith:)`, which `Array(deque)`
    /// inlines, stores the count 0 into the shared empty-array singleton, a write ThreadSanitizer
    /// reports as a race between two outboxes committing at once (seen in CI: benign, the
    /// stdlib's, but it hides real reports).
    private static func array(_ queue: Deque<OutboxRecord>) -> [OutboxRecord] {
        queue.isEmpty ? [] : Array(queue)
    }

    private static func index(of seq: UInt64, in queue: Deque<OutboxRecord>) -> Int? {
        if queue.first?.seq == seq { return queue.startIndex }
        var low = queue.startIndex
        var high = queue.endIndex
        while low < high {
            let mid = (low + high) / 2
            if queue[mid].seq < seq { low = mid + 1 } else { high = mid }
        }
        return low < queue.endIndex && queue[low].seq == seq ? low : nil
    }

    /// Hands the live sender its next item if it waits.
    private mutating func serve() -> Resumptions {
        var resumptions = Resumptions()
        if liveWaiter != nil, let item = nextLive() {
            resumptions.live.append((liveWaiter!, item))
            liveWaiter = nil
        }
        return resumptions
    }
}

extension OutboxState: Sendable where LiveWaiter: Sendable {}
extension OutboxState.Resumptions: Sendable where LiveWaiter: Sendable {}
extension OutboxState.BacklogRequest: Sendable {}
extension OutboxState.Settings: Sendable {}
