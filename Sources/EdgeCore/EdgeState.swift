import FleetProtocol
import FleetcastCore
import GNSS
import Logging
import MQTTCore
import OutboxCore

/// What a task of the edge waits for, besides (or instead of) a deadline.
package enum EdgeCondition: Hashable, Sendable {
    /// Something of the outbox (``OutboxCondition``).
    case outbox(OutboxCondition)
    /// A ``EdgeState/retryNow()`` since the given retry generation: the link is back.
    case retried(since: UInt64)
    /// ``EdgeState/finish(at:)`` was called.
    case finished
    /// Nothing: only the wait's deadline ends it.
    case deadline
}

/// Something the edge's driver writes to the log. What to say, and how often (once per outage,
/// per refused topic and connection, per five minutes for a failing store), is decided in the
/// ``EdgeState``; the words are the driver's.
package enum EdgeLog: Sendable {
    case source(SourceHealth.Report)
    case fixTime(FixTimeCheck.LogAction)
    case gnssChanged(VehicleStatus.GNSSState)
    /// The first failed send of an outage.
    case sendFailed(level: Logger.Level, topic: String, error: any Error)
    /// The first successful send after one; `backlog`: what is still waiting.
    case sendingResumed(level: Logger.Level, backlog: Int)
    /// The broker refused a publish to `topic` for good (once per topic and connection).
    case refused(topic: String, error: MQTTError, backlogKept: Bool)
    case storeFailed(error: any Error)
    case storeWritable
    case outboxLimit(full: UInt64, expired: UInt64)
    /// A backlog batch was too large for the broker; the drain now writes batches of `bytes`.
    case batchTooLarge(bytes: Int)
    case backlogUnreadable(error: any Error)
}

/// What one event of the ``EdgeState`` asks its driver to do once the lock is released: the one
/// action type of the edge.
package struct EdgeActions<LiveWaiter, Signal> {
    /// The live sender to resume, with its next item (`nil`: stop).
    package var live: [(LiveWaiter, OutboxLiveItem?)] = []
    /// Tasks whose condition holds or whose deadline passed.
    package var signals: [Signal] = []
    /// What to log, in order.
    package var logs: [EdgeLog] = []
    /// An `online` status is due saying this: the driver writes it (with the link's traffic,
    /// which only it can read) and queues it with ``EdgeState/setStatus(_:)``.
    package var status: PublisherState.StatusContent?
    /// Time as an action: call ``EdgeState/timerFired(at:)`` at this instant (an earlier one
    /// replaces a later one; a later one is asked for again when the earlier fires).
    package var schedule: ContinuousClock.Instant?
    /// Stops the task reading the source's events (the finish).
    package var stopIntake: (@Sendable () -> Void)?

    package init() {}
}

/// A task of the edge that can wait: it has an id by which a cancellation finds it.
package protocol EdgeWaiter {
    /// Unique among the waiters of one state.
    var id: UInt64 { get }
}

extension Waiter: EdgeWaiter {}

/// The vehicle's edge as one value: the outbox (numbering, live queue, commits, backlog) and
/// the publisher's decisions (reporting policy, retries, status cadence, what is logged once),
/// under one lock, with time as events.
///
/// Each event is a `mutating func` that decides under ``Publisher``'s lock and returns
/// ``EdgeActions``: continuations to resume, logs to write, a status to queue, and when to wake
/// it next. No clock is read: instants come in as arguments, and waiting out a delay is a wait
/// with a deadline that ``timerFired(at:)`` ends, so tests run the edge's scenarios (an outage,
/// a backlog drained at its rate, back-offs, the status cadence, batching) on a virtual clock.
/// Generic over its continuations so those tests use plain values.
///
/// A fix or heading that passes the policy is numbered, encoded and accepted by the outbox in
/// the same event: numbers follow the decisions' order, and nothing is let go after the outbox
/// closed.
package struct EdgeState<LiveWaiter, Signal: EdgeWaiter> {
    package typealias Actions = EdgeActions<LiveWaiter, Signal>
    package typealias Outbox = OutboxState<LiveWaiter>

    /// The publisher's settings.
    package let settings: PublisherSettings
    /// The outbox's state.
    package internal(set) var outbox: Outbox
    /// The publisher's decisions.
    package internal(set) var decisions: PublisherState
    /// The store's problem when it was opened (reported from the start).
    package let degradedAtOpen: String?
    /// The numbering run written into every fix and heading (0: none).
    let run: UInt64
    /// The backlog drain's state (``EdgeState+Drain``).
    var drain: Drain
    /// The tasks waiting on the state (a handful: the publisher's loops), in the order they
    /// began to wait. An array: every event looks through it, and it is never long.
    private var waiters: [(condition: EdgeCondition, deadline: ContinuousClock.Instant?, signal: Signal)] = []
    /// The instant the driver was last asked to wake the state at, until it does.
    private var scheduledAt: ContinuousClock.Instant?
    /// A live back-off: live sending holds until the deadline has passed (or a retry came since
    /// the failure) and nothing live is in flight.
    private var liveHold: (until: ContinuousClock.Instant, since: UInt64, expired: Bool)?

    /// The edge of a store opened with `opening` (`degraded`: the reason it fell back to memory).
    /// `awaitingLink`: the sender reports its connections (``linkConnected(since:at:)``,
    /// ``linkLost()``), and nothing goes live before the first.
    package init(
        settings: PublisherSettings, opening: OutboxOpening, run: UInt64, degraded: String?, now: ContinuousClock.Instant,
        awaitingLink: Bool = false
    ) {
        self.settings = settings
        self.run = run
        self.degradedAtOpen = degraded
        let maxAge = settings.maxAge.components
        self.outbox = Outbox(
            settings: .init(
                liveWindow: settings.sendWindow, lossless: settings.lossless, memoryLimit: settings.memoryLimit,
                maximumAgeMilliseconds: maxAge.seconds * 1000 + maxAge.attoseconds / 1_000_000_000_000_000,
                maximumBytes: settings.maxBytes, batched: settings.uplinkBatch != nil),
            opening: opening, memoryOnly: degraded != nil, linkDown: awaitingLink)
        self.decisions = PublisherState(
            settings: .init(
                statusInterval: settings.statusInterval, initialRetryDelay: settings.initialRetryDelay,
                maxRetryDelay: settings.maxRetryDelay, maximumFixClockOffset: settings.maximumFixClockOffset,
                degradedAtOpen: degraded != nil, backlogTriggersStatus: settings.uplinkBatch == nil,
                minimumFlushGap: settings.uplinkBatch.map { min($0 / 2, .seconds(30)) }),
            policy: settings.policy, now: now)
        self.drain = Drain(settings: settings, now: now)
        if let degraded { _ = outbox.commitFailed(reason: degraded) }
    }

    /// Why the store is degraded now, or `nil` when it works.
    package var storageProblem: String? { outbox.storageProblem ?? degradedAtOpen }

    /// What a status says now (`online` or `offline`), with the link's `traffic`.
    package func statusFigures(traffic: MQTTTraffic?) -> StatusReport.Figures {
        StatusReport.Figures(
            gnss: decisions.gnss, backlog: outbox.backlogCount, drops: outbox.drops, storage: storageProblem,
            implausible: decisions.counters.fixesImplausible, traffic: traffic, since: decisions.connectedSince)
    }

    /// Counters so far, the outbox's losses included.
    package var counters: PublisherCounters {
        var counters = decisions.counters
        counters.drops = outbox.drops
        return counters
    }

    // MARK: Intake

    /// An event from the GNSS source: what passes the policy is numbered, encoded with its
    /// `seq` and accepted by the outbox. After ``finish(at:)`` it is ignored.
    ///
    /// - Parameters:
    ///   - clocks: the wall clock and whether it is synchronized, read for a fix with a
    ///     position when fix times are checked.
    ///   - wallMilliseconds: the wall clock now (the records' storage time).
    ///   - now: now, on the monotonic clock.
    @_specialize(exported:true,where LiveWaiter == Waiter<OutboxLiveItem?>, Signal == Waiter<Void>)
    package mutating func receive(
        _ event: GNSSEvent, clocks: (wall: UTCTimestamp, synchronized: Bool)?, wallMilliseconds: Int64,
        at now: ContinuousClock.Instant
    ) -> Actions {
        var actions = Actions()
        let intake = decisions.receive(event, clocks: clocks, at: now)
        number(intake.publish, flush: intake.flush, wallMilliseconds: wallMilliseconds, &actions)
        if let report = intake.sourceReport { actions.logs.append(.source(report)) }
        if let log = intake.fixTimeLog { actions.logs.append(.fixTime(log)) }
        if let change = intake.gnssChange {
            actions.logs.append(.gnssChanged(change))
            queueStatus(force: true, at: now, &actions)
        }
        serve(&actions)
        return actions
    }

    /// Numbers, encodes and accepts what passed, oldest first.
    private mutating func number(
        _ decisions: [PublisherState.Publish], flush: Bool, wallMilliseconds: Int64, _ actions: inout Actions
    ) {
        var queued = 0
        let vehicle = settings.vehicle.rawValue
        for decision in decisions {
            guard let (seq, _) = outbox.takeSeq() else { break }
            let record: OutboxRecord
            switch decision {
            case .fix(let fix):
                let payload = FleetPayload.encode(fix, vehicle: vehicle, seq: seq, run: run, fields: settings.fields)
                record = OutboxRecord(seq: seq, kind: .fix, storedAtMilliseconds: wallMilliseconds, payload: payload)
            case .heading(let heading):
                let payload = FleetPayload.encode(heading, vehicle: vehicle, seq: seq, run: run, fields: settings.fields)
                record = OutboxRecord(seq: seq, kind: .heading, storedAtMilliseconds: wallMilliseconds, payload: payload)
            }
            let (accepted, resumptions) = outbox.accept(record)
            actions.live += resumptions.live
            guard accepted else { break }
            queued += 1
        }
        guard queued > 0 else { return }
        self.decisions.queued(queued)
        if flush { actions.live += outbox.requestFlush().live }
    }

    /// Replaces the status to send next (written by the driver for ``EdgeActions/status``).
    @_specialize(exported:true,where LiveWaiter == Waiter<OutboxLiveItem?>, Signal == Waiter<Void>)
    package mutating func setStatus(_ message: OutboundMessage) -> Actions {
        var actions = Actions()
        actions.live += outbox.setStatus(message).live
        return actions
    }

    // MARK: Live

    /// The live sender's next item, or `nil`: wait with ``setLiveWaiter(_:)`` (`.some(nil)`:
    /// stop).
    @_specialize(exported:true,where LiveWaiter == Waiter<OutboxLiveItem?>, Signal == Waiter<Void>)
    package mutating func nextLive() -> OutboxLiveItem?? { outbox.nextLive() }

    /// Registers the waiting live sender; its item may be ready at once.
    @_specialize(exported:true,where LiveWaiter == Waiter<OutboxLiveItem?>, Signal == Waiter<Void>)
    package mutating func setLiveWaiter(_ waiter: LiveWaiter) -> Actions {
        var actions = Actions()
        actions.live += outbox.setLiveWaiter(waiter).live
        return actions
    }

    /// The live sender's wait was cancelled: its waiter, to resume with `nil`, if kept.
    package mutating func removeLiveWaiter() -> LiveWaiter? { outbox.removeLiveWaiter() }

    /// The outcome of a live send: acknowledged; refused for good (dropped and counted, nothing
    /// behind it waits); or failed, and live sending backs off (from the first failure's retry
    /// generation, so a ``retryNow()`` that came since ends it) while the others in flight
    /// settle, then goes on from the newest of each kind.
    @_specialize(exported:true,where LiveWaiter == Waiter<OutboxLiveItem?>, Signal == Waiter<Void>)
    package mutating func liveSent(
        _ item: OutboxLiveItem, topic: String, _ result: Result<Void, any Error>, at now: ContinuousClock.Instant
    )
        -> Actions
    {
        var actions = Actions()
        let statuses: UInt64 = item.isStatus ? 1 : 0
        switch result {
        case .success:
            actions.live += liveOutcome(item, acknowledged: true)
            succeeded(count: 1 - statuses, statuses: statuses, &actions)
        case .failure(let error as MQTTError) where error.isPermanentPublishRefusal:
            actions.live += liveOutcome(item, acknowledged: nil)
            refused(error, topic: topic, at: now, &actions)
        case .failure(let error):
            decisions.liveSendFailed()
            if liveHold == nil, let wait = decisions.liveRetryWait() {
                liveHold = (now + wait.delay, wait.since, false)
                actions.live += outbox.holdLive(true).live
                schedule(&actions)
            }
            actions.live += liveOutcome(item, acknowledged: false)
            failed(error, topic: topic, &actions)
        }
        serve(&actions)
        return actions
    }

    private mutating func liveOutcome(_ item: OutboxLiveItem, acknowledged: Bool?) -> [(LiveWaiter, OutboxLiveItem?)] {
        switch (item, acknowledged) {
        case (.status, let acknowledged): outbox.statusSent(acknowledged != false).live
        case (.record(let record), true): outbox.liveAcknowledged(record.seq).live
        case (.record(let record), nil): outbox.liveRejected(record.seq).live
        case (.record(let record), false): outbox.liveFailed(record.seq).live
        }
    }

    // MARK: Sync and store

    /// What the sync loop does on its tick.
    package enum SyncStep {
        /// Write this transaction, then report ``committed(_:_:at:)`` or ``commitFailed(_:at:)``.
        case commit(OutboxCommit)
        /// Nothing to write.
        case idle
        /// Closed: the loop ends (after the commit, if one is given: the live drain waits for
        /// the numbers it reserves).
        case stop(OutboxCommit?)
    }

    /// The sync loop's tick (once per sync interval, or when a commit is due): what waited too
    /// long for its instant's partner goes alone, a commit is taken if one is needed, and a
    /// status is queued if the backlog or the losses moved.
    package mutating func tick(wallMilliseconds: Int64, at now: ContinuousClock.Instant) -> (Actions, SyncStep) {
        var actions = Actions()
        decisions.syncLoopRan(at: now)
        if outbox.closed {
            let commit = outbox.liveWaitsForReservation ? outbox.takeCommit(nowMilliseconds: wallMilliseconds) : nil
            serve(&actions)
            return (actions, .stop(commit))
        }
        let overdue = decisions.releaseOverdue(at: now)
        number(overdue.publish, flush: overdue.flush, wallMilliseconds: wallMilliseconds, &actions)
        let commit = outbox.commitNeeded ? outbox.takeCommit(nowMilliseconds: wallMilliseconds) : nil
        // A status with moved counts goes after the commit, which may move them (drops).
        if commit == nil { queueStatus(force: false, at: now, &actions) }
        serve(&actions)
        return (actions, commit.map { .commit($0) } ?? .idle)
    }

    /// A transaction for the stop (`clean`: the last, with the exact next `seq`); `nil` while
    /// one is in progress.
    package mutating func takeCommit(clean: Bool, wallMilliseconds: Int64) -> OutboxCommit? {
        outbox.takeCommit(nowMilliseconds: wallMilliseconds, clean: clean)
    }

    /// The transaction was written: a store that had failed is said to work again (once after
    /// its failure was announced), and losses to the outbox's limits are warned about.
    package mutating func committed(_ commit: OutboxCommit, _ result: OutboxCommitResult, at now: ContinuousClock.Instant) -> Actions {
        var actions = Actions()
        let (recovered, resumptions) = outbox.committed(commit, result)
        actions.live += resumptions.live
        if decisions.committed(recovered: recovered) {
            actions.logs.append(.storeWritable)
            queueStatus(force: true, at: now, &actions)
        }
        if result.full > 0 || result.expired > 0 { actions.logs.append(.outboxLimit(full: result.full, expired: result.expired)) }
        queueStatus(force: false, at: now, &actions)
        serve(&actions)
        return actions
    }

    /// The transaction failed: its records stay in memory; the failure is announced once, and
    /// again at most every five minutes while the store flaps.
    package mutating func commitFailed(_ error: any Error, location: String, at now: ContinuousClock.Instant) -> Actions {
        var actions = Actions()
        let (newProblem, resumptions) = outbox.commitFailed(reason: "\(location): \(error)")
        actions.live += resumptions.live
        if decisions.commitFailed(newProblem: newProblem, at: now) {
            actions.logs.append(.storeFailed(error: error))
            queueStatus(force: true, at: now, &actions)
        }
        queueStatus(force: false, at: now, &actions)
        serve(&actions)
        return actions
    }

    // MARK: Status and outcomes

    /// Asks for an `online` status if one is due (``PublisherState/status(force:backlog:drops:storage:at:)``).
    private mutating func queueStatus(force: Bool, at now: ContinuousClock.Instant, _ actions: inout Actions) {
        if let content = decisions.status(
            force: force, backlog: outbox.backlogCount, drops: outbox.drops, storage: storageProblem, at: now)
        {
            actions.status = content
        }
    }

    mutating func succeeded(count: UInt64, statuses: UInt64, backlog: UInt64 = 0, _ actions: inout Actions) {
        if let level = decisions.sendSucceeded(count: count, statuses: statuses, backlog: backlog) {
            actions.logs.append(.sendingResumed(level: level, backlog: outbox.backlogCount))
        }
    }

    mutating func failed(_ error: any Error, topic: String, _ actions: inout Actions) {
        guard let error = error as? MQTTError else {
            if let level = decisions.sendFailed(level: .info) {
                actions.logs.append(.sendFailed(level: level, topic: topic, error: error))
            }
            return
        }
        // Sends still awaiting their acknowledgement when the client stops: the stop says it.
        if error.code == .shutdown { return }
        // A connection not made yet, or lost: the MQTT client says that itself, once.
        let quiet = error.code == .notConnected || error.code == .connectionLost
        if let level = decisions.sendFailed(level: quiet ? .debug : .info) {
            actions.logs.append(.sendFailed(level: level, topic: topic, error: error))
        }
    }

    mutating func refused(_ error: MQTTError, topic: String, at now: ContinuousClock.Instant, _ actions: inout Actions) {
        guard decisions.refused(topic: topic) else { return }
        queueStatus(force: true, at: now, &actions)
        let backlogKept = topic == settings.topics.backlog(settings.vehicle) && !error.isPacketTooLarge
        actions.logs.append(.refused(topic: topic, error: error, backlogKept: backlogKept))
    }

    /// The offline status was delivered.
    package mutating func offlineSent() -> Actions {
        decisions.offlineSent()
        return Actions()
    }

    // MARK: Lifecycle

    /// The task reading events started; returns whether the edge is finishing already (then
    /// stop it at once), else keeps `stop` for ``finish(at:)``.
    package mutating func intakeStarted(stop: @escaping @Sendable () -> Void) -> Bool {
        decisions.intakeStarted(stop: stop)
    }

    /// Stop taking events: what the joiner held is numbered, the outbox closes, the run waiting
    /// for the finish goes on. Idempotent.
    package mutating func finish(wallMilliseconds: Int64, at now: ContinuousClock.Instant) -> Actions {
        var actions = Actions()
        let finish = decisions.finish(at: now)
        number(finish.last, flush: false, wallMilliseconds: wallMilliseconds, &actions)
        actions.live += outbox.close().live
        actions.stopIntake = finish.stopIntake
        serve(&actions)
        return actions
    }

    // MARK: The broker link

    /// The broker link connected at `since` (wall clock), the first time or again after any
    /// loss, to any broker of its list: back-offs end at once, and an `online` status saying
    /// `since` this connection is due. Nothing else goes live on the connection before it (but
    /// what the MQTT session itself sends again: messages in flight when the link was lost).
    /// After ``finish(wallMilliseconds:at:)`` no status is due (`offline` follows).
    package mutating func linkConnected(since: UTCTimestamp, at now: ContinuousClock.Instant) -> Actions {
        var actions = Actions()
        decisions.connected(since: since)
        queueStatus(force: true, at: now, &actions)
        actions.live += outbox.linkConnected(statusFirst: actions.status != nil).live
        serve(&actions)
        return actions
    }

    /// The broker link was lost: nothing goes live until it connects again; records wait as
    /// the newest of their kind, or as backlog.
    package mutating func linkLost() -> Actions {
        var actions = Actions()
        actions.live += outbox.linkLost().live
        serve(&actions)
        return actions
    }

    /// The transport is usable again: back-offs end at once, the live one included.
    package mutating func retryNow() -> Actions {
        var actions = Actions()
        decisions.retryNow()
        serve(&actions)
        return actions
    }

    // MARK: Waiting and time

    /// Whether `condition` holds now (a task about to wait need not).
    @_specialize(exported:true,where LiveWaiter == Waiter<OutboxLiveItem?>, Signal == Waiter<Void>)
    package func holds(_ condition: EdgeCondition, waking: Bool = false) -> Bool {
        switch condition {
        case .outbox(let condition): outbox.holds(condition, waking: waking)
        case .retried(let since): decisions.retryGeneration != since
        case .finished: decisions.finishing
        case .deadline: false
        }
    }

    /// Registers a task waiting for `condition` until `deadline` (`nil`: no limit); `false` if
    /// the condition holds or the deadline has passed already (do not wait).
    package mutating func wait(
        _ signal: Signal, for condition: EdgeCondition, until deadline: ContinuousClock.Instant?, now: ContinuousClock.Instant
    ) -> (waits: Bool, actions: Actions) {
        var actions = Actions()
        if holds(condition) || deadline.map({ $0 <= now }) == true { return (false, actions) }
        waiters.append((condition, deadline, signal))
        schedule(&actions)
        return (true, actions)
    }

    /// The wait `id` was cancelled: its signal, to resume, if kept.
    package mutating func cancelWait(_ id: UInt64) -> Signal? {
        guard let index = waiters.firstIndex(where: { $0.signal.id == id }) else { return nil }
        return waiters.remove(at: index).signal
    }

    /// Time as an event: an instant asked for with ``EdgeActions/schedule`` has come. Waits
    /// whose deadline passed end, a live back-off whose delay passed ends once nothing live is
    /// in flight, and the earliest instant still waited for is asked for again (whatever the
    /// timer fired for: the driver's clock keeps the earliest it was asked).
    package mutating func timerFired(at now: ContinuousClock.Instant) -> Actions {
        var actions = Actions()
        scheduledAt = nil
        for waiter in waiters where waiter.deadline.map({ $0 <= now }) == true {
            actions.signals.append(waiter.signal)
        }
        removeWaiters(signalledIn: actions, from: 0)
        if let hold = liveHold, hold.until <= now { liveHold?.expired = true }
        serve(&actions)
        schedule(&actions)
        return actions
    }

    /// After every event: ends the live back-off when it is over, and resumes the tasks whose
    /// condition holds. (A wait that ends only makes the next instant later: the timer fires
    /// early for it, harmlessly, and asks again.)
    mutating func serve(_ actions: inout Actions) {
        if let hold = liveHold, hold.expired || decisions.retryGeneration != hold.since, outbox.holds(.liveIdle) {
            liveHold = nil
            decisions.liveRetried()
            actions.live += outbox.holdLive(false).live
        }
        // A look first, then a change only if some wait ends (most events end none).
        let before = actions.signals.count
        for waiter in waiters where holds(waiter.condition, waking: true) {
            actions.signals.append(waiter.signal)
        }
        removeWaiters(signalledIn: actions, from: before)
    }

    /// Forgets the waiters whose signals `actions` lets go from index `start` on. (Iterating
    /// `waiters` and removing by id afterwards: reading the array by index here, in a mutating
    /// event, made the optimizer copy each element with the state's outlined copies, a tenth of
    /// the agent's CPU on a replay at full speed.)
    private mutating func removeWaiters(signalledIn actions: Actions, from start: Int) {
        guard actions.signals.count > start else { return }
        let ended = actions.signals[start...].map { $0.id }
        waiters.removeAll { ended.contains($0.signal.id) }
    }

    /// Asks for the earliest instant waited for, if earlier than the one asked for: after a
    /// wait with a deadline began, a live back-off began, or the timer fired.
    private mutating func schedule(_ actions: inout Actions) {
        var earliest = liveHold.flatMap { $0.expired ? nil : $0.until }
        for waiter in waiters {
            if let deadline = waiter.deadline, earliest.map({ deadline < $0 }) ?? true { earliest = deadline }
        }
        guard let earliest, scheduledAt.map({ earliest < $0 }) ?? true else { return }
        scheduledAt = earliest
        actions.schedule = earliest
    }
}

extension OutboxLiveItem {
    /// Whether this is the status.
    package var isStatus: Bool {
        if case .status = self { true } else { false }
    }
}

extension EdgeState: Sendable where LiveWaiter: Sendable, Signal: Sendable {}
extension EdgeActions: Sendable where LiveWaiter: Sendable, Signal: Sendable {}
