import FleetProtocol
import MQTTCore
import OutboxCore

// The backlog drain's decisions: what to read, whether a batched uplink holds it for company,
// when the drain rate lets it go, and what a send's outcome leads to.
extension EdgeState {
    /// The drain's own state.
    struct Drain {
        /// Writes the backlog's and the batches' messages.
        let batcher: BacklogBatcher
        /// Events per batch at most: a second's worth of the drain rate (the bucket's burst); a
        /// compact batch holds up to the contract's 2,048 (a minute at 10 Hz is one message),
        /// and the bucket lets one through at once while keeping the drain's average rate.
        let fullBatch: Int
        /// The drain rate.
        var bucket: TokenBucket
        /// Payload bytes per batch; halved when the broker says a batch is too large for it.
        var byteBudget = FleetPayload.maximumBacklogBytes - 256
        /// Batched mode: the oldest record waiting for its batch, and when the drain first saw it.
        var firstSeen: (seq: UInt64, at: ContinuousClock.Instant)?
        /// The stop's last pass: no hold, no pacing, no retry.
        var final = false

        init(settings: PublisherSettings, now: ContinuousClock.Instant) {
            let compact = settings.uplinkBatch != nil && settings.uplinkEncoding == .compact
            self.batcher = BacklogBatcher(vehicle: settings.vehicle, compact: compact)
            self.fullBatch = compact ? FleetPayload.maximumBacklogEvents : max(1, settings.drainRate)
            self.bucket = TokenBucket(
                rate: Double(settings.drainRate), burst: Double(max(settings.drainRate, fullBatch)), now: now)
        }
    }

    /// A read of the backlog the drain asks for: from the store, `limit` records within
    /// `maximumBytes`, as `request` says.
    package struct DrainRead: Sendable, Equatable {
        package var request: Outbox.BacklogRequest
        package var limit: Int
        package var maximumBytes: Int
    }

    /// Records to write as one backlog (or batch) message with ``drainBatcher``, within
    /// `maximumBytes`: done outside the lock (a compact batch of 2,048 events takes a while).
    package struct DrainPack: Sendable {
        package var records: [OutboxRecord]
        package var maximumBytes: Int
    }

    /// One backlog (or batch) message to send, and the earliest instant the drain rate lets it go.
    package struct DrainBatch: Sendable {
        package var seqs: [UInt64]
        package var payload: [UInt8]
        package var notBefore: ContinuousClock.Instant?
    }

    /// What the drain does next.
    package enum DrainStep: Sendable {
        /// Read the backlog, then report ``EdgeState/drainRead(_:_:wallMilliseconds:at:)``.
        case read(DrainRead)
        /// Write the message, then report ``EdgeState/drainPacked(_:_:at:)``.
        case pack(DrainPack)
        /// Wait for the condition or the deadline, then ask ``EdgeState/drainNext()``.
        case wait(EdgeCondition, until: ContinuousClock.Instant?)
        /// Send it (not before its instant), then report ``EdgeState/drainSent(_:_:at:)``.
        case send(DrainBatch)
        /// The drain ends.
        case stop
    }

    /// Where the drain sends: `…/backlog` (not retained), or in batched mode `…/batch`
    /// (retained: a new subscriber gets the newest position with the last batch).
    package var drainTopic: (topic: String, retain: Bool) {
        settings.uplinkBatch == nil
            ? (settings.topics.backlog(settings.vehicle), false) : (settings.topics.batch(settings.vehicle), true)
    }

    /// The drain's next step: a read of the backlog, or the end once the outbox is closed (the
    /// backlog stays in the store for the next run, or for ``drainFinal()``).
    package mutating func drainNext() -> DrainStep {
        if outbox.closed, !drain.final { return .stop }
        guard let request = outbox.backlogRequest() else { return drain.final ? .stop : .wait(.outbox(.backlogReadable), until: nil) }
        // A full batch every time, paced by the bucket: reading only what the bucket holds
        // would, once a burst is spent, send a message per event or two (each with its own TLS
        // record, TCP segments and acknowledgement on the link). The stored JSON of a compact
        // batch's events is far larger than the batch: its writer applies the byte budget.
        let limit = drain.final ? FleetPayload.maximumBacklogEvents : min(drain.fullBatch, FleetPayload.maximumBacklogEvents)
        let maximumBytes = drain.batcher.compact ? Int.max : drain.final ? FleetPayload.maximumBacklogBytes - 256 : drain.byteBudget
        return .read(DrainRead(request: request, limit: limit, maximumBytes: maximumBytes))
    }

    /// A clean stop over a working link sends what the drain had not sent yet, as full batches
    /// without pacing, until the first failure (the driver bounds it in time).
    package mutating func drainFinal() {
        drain.final = true
    }

    /// Writes the drain's messages (a plain value: the driver uses it outside the lock).
    package var drainBatcher: BacklogBatcher { drain.batcher }

    /// What the store gave for `read` (the records held in memory while it cannot be written
    /// are taken here): the batch to send, when; or what to wait for.
    package mutating func drainRead(
        _ read: DrainRead, _ result: Result<[OutboxRecord], any Error>, wallMilliseconds: Int64, at now: ContinuousClock.Instant
    ) -> (Actions, DrainStep) {
        var actions = Actions()
        let generation = read.request.generation
        var records: [OutboxRecord]
        switch result {
        case .failure(let error):
            if drain.final { return (actions, .stop) }
            actions.logs.append(.backlogUnreadable(error: error))
            return (actions, .wait(.outbox(.backlog(after: generation)), until: now + settings.syncInterval))
        case .success(let stored):
            records = stored
        }
        if records.isEmpty {
            let request = read.request
            records = outbox.unwrittenBacklog(
                after: request.after, limit: read.limit, maximumBytes: read.maximumBytes, excluding: request.excluding)
        }
        if records.isEmpty { return (actions, drain.final ? .stop : .wait(.outbox(.backlog(after: generation)), until: nil)) }
        if settings.uplinkBatch != nil, !drain.final, records.count < read.limit, outbox.storedPending >= read.limit,
            outbox.generation != generation
        {
            // A commit landed while the store was read: a full batch is there now, not the
            // part this read saw. Read again rather than send the part.
            return (actions, drainNext())
        }
        if !drain.final, let hold = batchHold(records, read, wallMilliseconds: wallMilliseconds, at: now) {
            return (actions, .wait(.outbox(.batchReady(flushAfter: hold.flushGeneration, stored: read.limit)), until: now + hold.left))
        }
        let budget = drain.final ? FleetPayload.maximumBacklogBytes - 256 : drain.byteBudget
        return (actions, .pack(DrainPack(records: records, maximumBytes: budget)))
    }

    /// The message written for `pack` (`nil`: not even its first record fits): it is marked in
    /// flight and goes when the drain rate lets it.
    package mutating func drainPacked(
        _ pack: DrainPack, _ batch: (seqs: [UInt64], payload: [UInt8])?, at now: ContinuousClock.Instant
    ) -> (Actions, DrainStep) {
        var actions = Actions()
        guard let (seqs, payload) = batch else {
            guard !drain.final, let first = pack.records.first else { return (actions, .stop) }
            // A record too large for any batch (not one of ours): skipped, counted as sent.
            outbox.backlogSending([first.seq])
            actions.live += outbox.backlogAcknowledged().live
            serve(&actions)
            return (actions, drainNext())
        }
        outbox.backlogSending(seqs)
        var notBefore: ContinuousClock.Instant?
        if !drain.final {
            let wait = drain.bucket.take(seqs.count, at: now)
            if wait > .zero { notBefore = now + wait }
        }
        return (actions, .send(DrainBatch(seqs: seqs, payload: payload, notBefore: notBefore)))
    }

    /// In batched mode, how much longer a batch that is not full waits for company
    /// (``BacklogBatcher/hold(_:limit:maximumBytes:window:outbox:firstSeen:now:wallMilliseconds:)``).
    private mutating func batchHold(
        _ records: [OutboxRecord], _ read: DrainRead, wallMilliseconds: Int64, at now: ContinuousClock.Instant
    )
        -> (left: Duration, flushGeneration: UInt64)?
    {
        guard settings.uplinkBatch != nil else { return nil }
        let view = BacklogBatcher.HoldView(
            flushBelow: outbox.flushBelow, flushGeneration: outbox.flushGeneration, storeFailing: outbox.storageProblem != nil,
            inStore: outbox.storedPending)
        return BacklogBatcher.hold(
            records, limit: read.limit, maximumBytes: read.maximumBytes, window: settings.uplinkBatch, outbox: view,
            firstSeen: &drain.firstSeen, now: now, wallMilliseconds: wallMilliseconds)
    }

    /// The outcome of a backlog send: acknowledged (the next batch); too large for the broker
    /// (smaller batches, or one event that can never go is dropped and counted); the backlog
    /// topic refused for good (the records stay in the store, and the drain waits five minutes
    /// or for a new connection rather than deleting days of history); or failed (retried after
    /// a back-off, or at once when the link comes back). Cancelled: the batch goes again next
    /// time.
    package mutating func drainSent(
        _ batch: DrainBatch, _ result: Result<Void, any Error>, at now: ContinuousClock.Instant
    )
        -> (Actions, DrainStep)
    {
        var actions = Actions()
        let count = UInt64(batch.seqs.count)
        let topic = drainTopic.topic
        var step: DrainStep
        switch result {
        case .success:
            actions.live += outbox.backlogAcknowledged().live
            succeeded(count: count, statuses: 0, backlog: count, &actions)
            step = drainNext()
        case .failure(let error as MQTTError) where error.isPacketTooLarge && count == 1 && !drain.final:
            // One event larger than the broker takes: it can never be sent.
            actions.live += outbox.backlogRejected().live
            refused(error, topic: topic, at: now, &actions)
            step = drainNext()
        case .failure(let error):
            actions.live += outbox.backlogFailed().live
            if error is CancellationError || drain.final {
                step = .stop
                break
            }
            switch error as? MQTTError {
            case let error? where error.isPacketTooLarge:
                drain.byteBudget = max(512, drain.byteBudget / 2)
                actions.logs.append(.batchTooLarge(bytes: drain.byteBudget))
                step = drainNext()
            case let error? where error.isPermanentPublishRefusal:
                refused(error, topic: topic, at: now, &actions)
                let wait = decisions.refusedBacklogRetryWait()
                step = .wait(.retried(since: wait.since), until: now + wait.delay)
            default:
                failed(error, topic: topic, &actions)
                let wait = decisions.retryWait(.backlog)
                step = .wait(.retried(since: wait.since), until: now + wait.delay)
            }
        }
        serve(&actions)
        return (actions, step)
    }
}
