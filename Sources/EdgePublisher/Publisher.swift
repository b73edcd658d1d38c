import EdgeCore
import EdgeOutbox
import FleetProtocol
import FleetcastCore
import GNSS
import Logging
import MQTT
import Synchronization

/// Turns a vehicle's GNSS events into MQTT messages of the public contract and delivers them,
/// losing nothing the store can hold.
///
/// **Intake.** ``publish(_:)`` (a live receiver; never waits) or ``publishWaitingForRoom(_:)``
/// (a finite source such as a replay; waits while the live queue is full): fixes of mode 2D/3D
/// pass the ``ReportingPolicy``, get the next `seq` from the ``Outbox`` and become contract JSON
/// (`v`, `vehicle`, `seq`); headings likewise. The policy decision is taken under the
/// publisher's lock; encoding and everything else happen outside it.
///
/// **Three loops** run inside ``run()``:
/// - *live*: the newest fix and heading go out at once on `{prefix}/{vehicle}/fix` and
///   `…/heading` (retained), with up to ``Settings/sendWindow`` awaiting acknowledgement;
///   a record superseded before it could be sent joins the backlog. The status goes first.
/// - *backlog*: what could not go live is read from the store oldest first and sent on
///   `{prefix}/{vehicle}/backlog` (QoS 1, not retained) in batches of at most 32 KiB,
///   at most ``Settings/drainRate`` events per second. Live messages never wait behind it.
/// - *sync*: once per ``Settings/syncInterval`` (sooner when the reserved `seq` numbers run
///   out) one transaction writes what is unacknowledged and deletes what was acknowledged.
///
/// **Batched uplink** (``Settings/uplinkBatch``, for a metered link): nothing but the status
/// goes live. Every fix and heading waits in the outbox, and the backlog loop sends them as
/// retained `{prefix}/{vehicle}/batch` messages (compact, or the backlog's JSON) once the oldest has
/// waited the batch window, at once when a batch is full or when the vehicle starts or stops
/// (the policy's first fix and motion changes), and, at a clean finish over a working link,
/// what is left. A backlog after an outage goes out the same way, in full batches.
///
/// A failed send is retried after a jittered ``FleetcastCore/Backoff`` (from
/// ``Settings/initialRetryDelay`` up to ``Settings/maxRetryDelay``), or at once when
/// ``retryNow()`` says the link is back.
///
/// **Status.** The retained `status` says `online` with the GNSS state, `dropped` (all causes)
/// and by cause, `backlog` and `storage`; it is sent at start, whenever the GNSS or storage
/// state changes, and while a backlog drains or losses grow no more than once every
/// ``Settings/statusInterval``. ``finish()`` stops the intake, sends what is live and, over a
/// working link, what the backlog still holds (together bounded by ``Settings/drainTimeout``),
/// commits the rest to the store with the exact next `seq`, and publishes `offline` with
/// reason `shutdown`.
public final class Publisher: Sendable {
    /// The QoS of status and backlog messages (the contract fixes it at 1).
    public static let statusQoS = MQTTQoS.atLeastOnce

    typealias State = PublisherState<Waiter<Void>>

    /// The settings it was made with.
    public let settings: Settings
    let outbox: Outbox
    let sender: any MessageSending
    let logger: Logger
    let now: UTCTimestampSource
    private let clockSynchronized: @Sendable () -> Bool
    /// Writes the statuses (`online` since this run's start, `offline`, the last will).
    private let report: StatusReport
    /// Writes the backlog's and the batches' messages.
    let batcher: BacklogBatcher
    let state: SanitizerVisibleMutex<State>
    /// Serializes the intake's three producers (an event, the tick that lets a held fix go, the
    /// finish): a decision and the numbering of what it lets go happen together, so numbers
    /// follow the decisions' order and nothing is let go after the outbox closed. Held while
    /// encoding; the outbox's resumptions run after it is released, and nothing is logged under it.
    private let producing = SanitizerVisibleMutex(())
    private let degradedAtOpen: String?
    /// The numbering run written into every fix and heading (0: none written).
    private let run: UInt64

    /// A publisher over an opened store; it queues the `online` status at once.
    ///
    /// - Parameters:
    ///   - sender: delivers messages (the MQTT client).
    ///   - store: the vehicle's outbox store (``OutboxStore/open(directory:vehicle:logger:now:)``).
    ///   - logger: debug for start, stop and GNSS state changes; info once per outage for
    ///     failed and resumed sends; error once for a store that cannot be written.
    ///   - now: the wall clock (UTC) for the status `since`, the records' storage time and the
    ///     check of fix times.
    ///   - clockSynchronized: whether that clock is synchronized now (the check of fix times
    ///     refuses only against a synchronized clock).
    public init(
        settings: Settings, sender: any MessageSending, store: OutboxStore, logger: Logger,
        now: @escaping @Sendable () -> UTCTimestamp = SystemUTCClock.now,
        clockSynchronized: @escaping @Sendable () -> Bool = SystemClockSynchronization.isSynchronized
    ) {
        self.settings = settings
        self.sender = sender
        var logger = logger
        logger[metadataKey: "vehicle"] = "\(settings.vehicle.rawValue)"
        self.logger = logger
        self.now = now
        self.clockSynchronized = clockSynchronized
        self.report = StatusReport(settings: settings, onlineSince: now())
        self.batcher = BacklogBatcher(
            vehicle: settings.vehicle, compact: settings.uplinkBatch != nil && settings.uplinkEncoding == .compact)
        self.degradedAtOpen = store.degradedReason
        self.run = store.run
        let maxAge = settings.maxAge.components
        self.outbox = Outbox(
            settings: .init(
                liveWindow: settings.sendWindow, lossless: settings.lossless, memoryLimit: settings.memoryLimit,
                maximumAgeMilliseconds: maxAge.seconds * 1000 + maxAge.attoseconds / 1_000_000_000_000_000,
                maximumBytes: settings.maxBytes, batched: settings.uplinkBatch != nil),
            storage: store.storage, opening: store.opening, memoryOnly: store.degradedReason != nil)
        self.state = SanitizerVisibleMutex(
            State(
                settings: .init(
                    statusInterval: settings.statusInterval, initialRetryDelay: settings.initialRetryDelay,
                    maxRetryDelay: settings.maxRetryDelay, maximumFixClockOffset: settings.maximumFixClockOffset,
                    degradedAtOpen: store.degradedReason != nil, backlogTriggersStatus: settings.uplinkBatch == nil,
                    minimumFlushGap: settings.uplinkBatch.map { min($0 / 2, .seconds(30)) }),
                policy: settings.policy, now: .now))
        let first = statusMessage(
            gnss: .starting, backlog: store.storedCount, drops: VehicleStatus.Drops(unclean: store.uncleanSkipped),
            storage: store.degradedReason, implausible: 0)
        outbox.transition { $0.setStatus(first) }
    }

    /// Counters so far (received, queued, published, dropped, skipped by policy…).
    public var counters: PublisherCounters {
        var counters = state.withLock { $0.counters }
        counters.drops = outbox.read { $0.drops }
        return counters
    }

    /// When the publisher's sync loop last ran: it runs at least once per
    /// ``Settings/syncInterval`` while the publisher works (systemd's watchdog checks it).
    public var lastActivity: ContinuousClock.Instant { state.withLock { $0.syncLoopActivity } }

    /// Whether ``finish()`` was called (a shutdown is under way).
    public var isFinishing: Bool { state.withLock { $0.finishing } }

    /// The GNSS state the status reports now.
    public var gnssState: VehicleStatus.GNSSState { state.withLock { $0.gnss } }

    /// Fixes and headings stored or waiting to be, not yet acknowledged (the status's `backlog`).
    public var backlogCount: Int { outbox.read { $0.backlogCount } }

    /// Why the store is degraded now, or `nil` when it works.
    public var storageProblem: String? { outbox.read { $0.storageProblem } ?? degradedAtOpen }

    /// The retained `offline` status to register as the MQTT last will (no reason: the
    /// connection was lost).
    public var lastWill: OutboundMessage { report.lastWill }

    // MARK: Intake

    /// Takes one event from a GNSS source; never waits. After ``finish()`` events are ignored.
    public func publish(_ event: GNSSEvent) {
        // The clocks are read before the lock: a fix's time is checked against them inside.
        var clocks: (wall: UTCTimestamp, synchronized: Bool)?
        if case .fix(let fix) = event, fix.mode != .noFix, settings.maximumFixClockOffset != nil {
            clocks = (now(), clockSynchronized())
        }
        let instant = ContinuousClock.now
        let (intake, resumptions) = producing.withLock { _ in
            let intake = state.withLock { $0.receive(event, clocks: clocks, at: instant) }
            return (intake, number(intake.publish, flush: intake.flush))
        }
        outbox.resume(resumptions)
        if let report = intake.sourceReport { log(report) }
        if let report = intake.fixTimeLog {
            FixTimeCheck.log(report, to: logger, maximumOffset: settings.maximumFixClockOffset)
        }
        if let change = intake.gnssChange {
            logger.debug("GNSS state changed", metadata: ["gnss.to": "\(change.rawValue)"])
            queueStatus(force: true)
        }
    }

    /// Numbers, encodes and queues what passed, oldest first; returns the outbox's resumptions,
    /// to run once `producing` is released. Called under `producing`.
    private func number(_ decisions: [State.Publish], flush: Bool = false) -> [Outbox.State.Resumptions] {
        var resumptions: [Outbox.State.Resumptions] = []
        var queued = 0
        let vehicle = settings.vehicle.rawValue
        for decision in decisions {
            let accepted = outbox.accept(deferring: &resumptions) { seq in
                let kind: OutboundMessage.Kind
                let payload: [UInt8]
                switch decision {
                case .fix(let fix):
                    (kind, payload) = (.fix, FleetPayload.encode(fix, vehicle: vehicle, seq: seq, run: run, fields: settings.fields))
                case .heading(let heading):
                    (kind, payload) = (
                        .heading, FleetPayload.encode(heading, vehicle: vehicle, seq: seq, run: run, fields: settings.fields)
                    )
                }
                return OutboxRecord(seq: seq, kind: kind, storedAtMilliseconds: now().millisecondsSince1970, payload: payload)
            }
            guard accepted else { break }
            queued += 1
        }
        guard queued > 0 else { return resumptions }
        state.withLock { $0.queued(queued) }
        if flush { outbox.transition(deferring: &resumptions) { $0.requestFlush() } }
        return resumptions
    }

    /// Takes one event from a finite source that must lose nothing (a replay uploaded as a
    /// batch): before a fix or heading it waits until the live queue has room, then publishes
    /// it as ``publish(_:)`` does. Returns at once after ``finish()``. Throws
    /// `CancellationError` when the task is cancelled while waiting.
    public func publishWaitingForRoom(_ event: GNSSEvent) async throws {
        switch event {
        case .fix, .heading:
            await outbox.wait(for: .liveRoom)
            try Task.checkCancellation()
        case .state: break
        }
        publish(event)
    }

    /// Consumes `events` until they end, running the publisher meanwhile, then finishes
    /// cleanly (live sends, commit, `offline`). If the sequence throws, the GNSS state becomes
    /// `source-lost`, the publisher finishes all the same and the error is rethrown. After
    /// ``finish()`` (a graceful shutdown) it stops taking events. Events go through
    /// ``publishWaitingForRoom(_:)`` when ``Settings/lossless`` is set, else ``publish(_:)``.
    public func run<Events: AsyncSequence & Sendable>(events: Events) async throws where Events.Element == GNSSEvent {
        // The events are read in a task of their own, which ``finish()`` cancels: a source
        // waiting for its next event (a paced replay) stops at once instead of at that event.
        let intake = Task { () -> (any Error)? in
            do {
                for try await event in events {
                    if settings.lossless { try await publishWaitingForRoom(event) } else { publish(event) }
                    if state.withLock({ $0.finishing }) { break }
                }
            } catch is CancellationError where Task.isCancelled {
                // Stopped by finish() or the caller: ends as a cancelled event stream does.
            } catch {
                logger.debug("GNSS event stream failed", metadata: ["error": "\(error)"])
                publish(.state(.reconnecting(reason: "\(error)", delay: .zero)))
                return error
            }
            return nil
        }
        let finishing = state.withLock { $0.intakeStarted(stop: { intake.cancel() }) }
        if finishing { intake.cancel() }
        var failure: (any Error)?
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.run() }
            failure = await withTaskCancellationHandler {
                await intake.value
            } onCancel: {
                intake.cancel()
            }
            finish()
            await group.waitForAll()
        }
        if let failure { throw failure }
    }

    // MARK: Lifecycle

    /// Runs the live, backlog and sync loops until ``finish()`` (or cancellation), then sends
    /// what is live and, over a working link, what the backlog still holds (together at most
    /// ``Settings/drainTimeout``), commits what is left with the exact next `seq`, and sends
    /// the `offline` status (at most as long again). Call it once.
    public func run() async {
        logger.debug(
            "publisher started",
            metadata: [
                "mqtt.topic": "\(settings.topics.fix(settings.vehicle))", "outbox.path": "\(outbox.storage.location)",
            ])
        if let degradedAtOpen { outbox.transition { $0.commitFailed(reason: degradedAtOpen).resumptions } }
        var stopping = ContinuousClock.now
        let drained = await withTaskGroup(of: Void.self, returning: Bool.self) { group in
            group.addTask { await self.syncLoop() }
            group.addTask { await self.backlogLoop() }
            let live = Task { await self.liveLoop() }
            await waitForFinish()
            stopping = .now
            outbox.transition { $0.close() }
            // The live queue drains (bounded); the backlog goes next, in what time is left.
            // (Awaiting `live.value` does not pass cancellation on: the handler cancels the task.)
            let drained =
                await withTimeLimit(settings.drainTimeout) {
                    await withTaskCancellationHandler {
                        await live.value
                    } onCancel: {
                        live.cancel()
                    }
                } != nil
            if !drained {
                logger.info(
                    "live messages not sent before shutdown; kept in the outbox",
                    metadata: [
                        "outbox.path": "\(outbox.storage.location)"
                    ])
            }
            await live.value
            // A backlog batch on its way to the broker is left to be acknowledged, in what is
            // left of the drain timeout: cancelled, it would count as failed, and the stop would
            // send it a second time below. The drain then ends by itself (the outbox is closed).
            let left = stopping.advanced(by: settings.drainTimeout) - .now
            if drained && left > .zero { await outbox.wait(for: .backlogIdle, upTo: left) }
            group.cancelAll()
            return drained
        }
        // The drain has ended: nothing of the backlog is in flight (a batch whose acknowledgement
        // did not come in time counts as failed and goes again). What it had not sent goes now,
        // within what is left of the drain timeout (the stop's bound does not grow).
        if drained { await sendRemainingBacklog(until: stopping.advanced(by: settings.drainTimeout)) }
        await commit(clean: true)
        let backlog = outbox.read { $0.unacknowledgedCount }
        if backlog > 0 {
            logger.info(
                "backlog kept for the next run",
                metadata: [
                    "outbox.backlog": "\(backlog)", "outbox.path": "\(outbox.storage.location)",
                ])
        }
        await sendOffline()
        let counters = self.counters
        logger.debug(
            "publisher stopped",
            metadata: [
                "published": "\(counters.published)", "dropped": "\(counters.dropped)",
                "skipped": "\(counters.skippedByPolicy)",
            ])
    }

    /// Asks ``run()`` to finish; returns at once. Idempotent.
    public func finish() {
        let instant = ContinuousClock.now
        let (actions, resumptions) = producing.withLock { _ in
            let actions = state.withLock { $0.finish(at: instant) }
            var resumptions = number(actions.last)
            outbox.transition(deferring: &resumptions) { $0.close() }
            return (actions, resumptions)
        }
        outbox.resume(resumptions)
        actions.waiter?.resume()
        actions.stopIntake?()
    }

    /// Says the transport is usable now (the agent calls it when its MQTT link has connected):
    /// back-offs in progress end at once, so what waits goes out without waiting out a delay
    /// meant for an unreachable broker.
    public func retryNow() {
        let waiters = state.withLock { $0.retryNow() }
        for waiter in waiters { waiter.resume() }
    }

    // MARK: Live

    private func liveLoop() async {
        while let item = await outbox.nextLive() {
            if let retry = state.withLock({ $0.liveRetryWait() }) {
                // A send failed: put this one back, let the others settle, back off, and go
                // on from the newest of each kind (older live records have become backlog).
                outbox.liveSent(item, acknowledged: false)
                await outbox.wait(for: .liveIdle)
                await backOff(retry)
                if Task.isCancelled { return }
                state.withLock { $0.liveRetried() }
                continue
            }
            // Handed to the transport before this returns: live sends reach the wire in `seq`
            // order. Their acknowledgements come back through `liveSent`.
            sendLive(item)
        }
        // Closed and nothing left to start: what is still awaiting its acknowledgement settles
        // (or the stop's time limit cancels this wait; unacknowledged records stay stored).
        await outbox.wait(for: .liveIdle)
    }

    /// Sends one live item; its outcome arrives in ``liveSent(_:topic:_:)``.
    private func sendLive(_ item: OutboxLiveItem) {
        let topic: String
        let payload: [UInt8]
        let qos: MQTTQoS
        switch item {
        case .status(let message):
            (topic, payload, qos) = (message.topic, message.payload, message.qos)
        case .record(let record):
            topic = record.kind == .fix ? settings.topics.fix(settings.vehicle) : settings.topics.heading(settings.vehicle)
            (payload, qos) = (record.payload, record.kind == .fix ? settings.fixQoS : settings.headingQoS)
        }
        sender.send(topic: topic, payload: payload, qos: qos, retain: true) { result in
            self.liveSent(item, topic: topic, result)
        }
    }

    /// The outcome of a live send: acknowledged, refused for good (dropped and counted, nothing
    /// behind it waits), or failed (retried after a back-off).
    private func liveSent(_ item: OutboxLiveItem, topic: String, _ result: Result<Void, any Error>) {
        switch result {
        case .success:
            outbox.liveSent(item, acknowledged: true)
            noteSuccess(count: item.isStatus ? 0 : 1, statuses: item.isStatus ? 1 : 0)
        case .failure(let error as MQTTError) where error.isPermanentPublishRefusal:
            outbox.liveSent(item, acknowledged: nil)
            noteRefusal(error, topic: topic)
        case .failure(let error):
            // Said before the record goes back: the live loop, woken by it, must back off first.
            state.withLock { $0.liveSendFailed() }
            outbox.liveSent(item, acknowledged: false)
            noteFailure(error, topic: topic)
        }
    }

    // MARK: Sync

    private func syncLoop() async {
        while !Task.isCancelled {
            let instant = ContinuousClock.now
            state.withLock { $0.syncLoopRan(at: instant) }
            await outbox.wait(for: .commitDue, upTo: settings.syncInterval)
            if Task.isCancelled { return }
            let (closed, waiting) = outbox.read { ($0.closed, $0.liveWaitsForReservation) }
            if closed {
                // No number is handed out any more: one commit reserves every one the live
                // drain still has to send (else it would wait out the whole drain timeout).
                if waiting { await commit(clean: false) }
                return
            }
            let released = producing.withLock { _ in
                let overdue = state.withLock { $0.releaseOverdue(at: .now) }
                return number(overdue.publish, flush: overdue.flush)
            }
            outbox.resume(released)
            if outbox.read({ $0.commitNeeded }) { await commit(clean: false) }
            queueStatus(force: false)
        }
    }

    /// One transaction: writes what is unacknowledged, deletes what was acknowledged, reserves
    /// numbers; a failure is logged once as an error and reported as `storage: degraded`.
    func commit(clean: Bool) async {
        let nowMilliseconds = now().millisecondsSince1970
        guard
            let batch = outbox.transition({ state -> (OutboxCommit?, Outbox.State.Resumptions) in
                (state.takeCommit(nowMilliseconds: nowMilliseconds, clean: clean), .init())
            })
        else { return }
        do {
            // Not cancelled with the sync loop at shutdown: a transaction begun is finished
            // (an interrupted one would throw, which would look like a storage failure).
            let storage = outbox.storage
            let result = try await Task { try await storage.commit(batch) }.value
            let recovered = outbox.transition { $0.committed(batch, result) }
            let announced = state.withLock { $0.committed(recovered: recovered) }
            if announced {
                logger.notice("outbox store writable again", metadata: ["outbox.path": "\(outbox.storage.location)"])
                queueStatus(force: true)
            }
            if result.full > 0 || result.expired > 0 {
                logger.warning(
                    "outbox limit reached, oldest records dropped",
                    metadata: [
                        "outbox.droppedFull": "\(result.full)", "outbox.droppedExpired": "\(result.expired)",
                        "outbox.maxBytes": "\(settings.maxBytes)",
                    ])
            }
        } catch {
            let reason = "\(outbox.storage.location): \(error)"
            let newProblem = outbox.transition { $0.commitFailed(reason: reason) }
            // Once, and again at most every 5 minutes while the store flaps (on a full disk a
            // commit that only deletes can succeed): never a flood of errors and statuses.
            let clock = ContinuousClock.now
            let announce = state.withLock { $0.commitFailed(newProblem: newProblem, at: clock) }
            if announce {
                logger.error(
                    "cannot write the outbox store; keeping messages in memory until it works again",
                    metadata: [
                        "outbox.path": "\(outbox.storage.location)", "error": "\(error)",
                    ])
                queueStatus(force: true)
            }
        }
    }

    // MARK: Status

    /// Queues an `online` status if something it reports changed: at once when `force` (GNSS
    /// or storage state), else at most once per ``Settings/statusInterval`` when the backlog
    /// or the loss counts moved.
    private func queueStatus(force: Bool) {
        let clock = ContinuousClock.now
        let (backlog, drops, problem) = outbox.read { ($0.backlogCount, $0.drops, $0.storageProblem) }
        let storage = problem ?? degradedAtOpen
        guard
            let content = state.withLock({
                $0.status(force: force, backlog: backlog, drops: drops, storage: storage, at: clock)
            })
        else { return }
        let message = statusMessage(
            gnss: content.gnss, backlog: content.backlog, drops: content.drops, storage: content.storage,
            implausible: content.implausible)
        outbox.transition { $0.setStatus(message) }
    }

    /// `implausible`: fixes refused for their time, reported only where fix times are checked.
    private func statusMessage(
        gnss: VehicleStatus.GNSSState, backlog: Int, drops: VehicleStatus.Drops, storage: String?, implausible: UInt64
    ) -> OutboundMessage {
        report.online(
            .init(gnss: gnss, backlog: backlog, drops: drops, storage: storage, implausible: implausible, traffic: sender.traffic))
    }

    private func sendOffline() async {
        let (backlog, drops, problem) = outbox.read { ($0.backlogCount, $0.drops, $0.storageProblem) }
        let status = report.offline(
            at: now(),
            .init(
                gnss: gnssState, backlog: backlog, drops: drops, storage: problem ?? degradedAtOpen,
                implausible: counters.fixesImplausible, traffic: sender.traffic))
        let (topic, payload) = (status.topic, status.payload)
        let sender = self.sender
        let sent =
            await withTimeLimit(settings.drainTimeout) {
                do {
                    try await sender.send(topic: topic, payload: payload, qos: Self.statusQoS, retain: true)
                    return true
                } catch {
                    return false
                }
            } ?? false
        if sent {
            state.withLock { $0.offlineSent() }
        } else {
            logger.info("offline status not sent", metadata: ["mqtt.topic": "\(topic)"])
        }
    }

    // MARK: Helpers

    private func log(_ report: SourceHealth.Report) {
        func seconds(_ duration: Duration) -> String { "\(duration.components.seconds) s" }
        switch report {
        case .failing(let reason):
            logger.warning("GNSS source failing, retrying", metadata: ["error": "\(reason)"])
        case .stillFailing(let reason, let attempts, let duration):
            logger.warning(
                "GNSS source still failing, retrying",
                metadata: [
                    "error": "\(reason)", "gnss.attempts": "\(attempts)", "gnss.failingFor": "\(seconds(duration))",
                ])
        case .recovered(let attempts, let duration):
            logger.notice(
                "GNSS source working again",
                metadata: [
                    "gnss.attempts": "\(attempts)", "gnss.failedFor": "\(seconds(duration))",
                ])
        }
    }

    func noteFailure(_ error: any Error, topic: String) {
        // A connection not made yet, or lost: the MQTT client reports that itself, once;
        // saying it again here (and "resumed" after it) would log one event twice.
        var level = Logger.Level.info
        if let error = error as? MQTTError, error.code == .notConnected || error.code == .connectionLost { level = .debug }
        // Sends still awaiting their acknowledgement when the client stops: the stop says it.
        if let error = error as? MQTTError, error.code == .shutdown { return }
        let first = state.withLock { $0.sendFailed(level: level) }
        if first != nil, !Task.isCancelled {
            logger.log(
                level: level, "send failed, keeping messages in the outbox",
                metadata: [
                    "mqtt.topic": "\(topic)", "error": "\(error)",
                ])
        }
    }

    /// A publish the broker refused for good: one error per topic until the link has been
    /// lost and regained (a new connection may come with a corrected ACL), naming the topic,
    /// the user and what to check.
    func noteRefusal(_ error: MQTTError, topic: String) {
        let first = state.withLock { $0.refused(topic: topic) }
        guard first else { return }
        queueStatus(force: true)
        var metadata: Logger.Metadata = ["mqtt.topic": "\(topic)", "error": "\(error)"]
        if let user = settings.brokerUser { metadata["mqtt.user"] = "\(user)" }
        let consequence =
            topic == settings.topics.backlog(settings.vehicle) && !error.isPacketTooLarge
            ? "the backlog stays in the store until the broker takes it"
            : "refused messages are dropped and counted as rejected in the status"
        logger.error(
            "the broker refused a publish: check that its ACL allows this vehicle's topics and that the vehicle id is right; \(consequence)",
            metadata: metadata)
    }

    func noteSuccess(count: UInt64, statuses: UInt64, backlog: UInt64 = 0) {
        let recovered = state.withLock {
            $0.sendSucceeded(count: count, statuses: statuses, backlog: backlog)
        }
        if let recovered {
            logger.log(level: recovered, "sending resumed", metadata: ["outbox.backlog": "\(backlogCount)"])
        }
    }

    private func waitForFinish() async {
        await suspend { waiter in
            state.withLock { $0.awaitFinish(cancelled: Task.isCancelled, waiter) } == nil
        } cancel: { _ in
            state.withLock { $0.cancelFinishWait() }
        }
    }

    /// Waits `retry.delay`, or less if ``retryNow()`` is called meanwhile (or was since the
    /// wait was decided).
    func backOff(_ retry: State.RetryWait) async {
        _ = await withTimeLimit(retry.delay) { await self.waitForRetry(since: retry.since) }
    }

    private func waitForRetry(since: UInt64) async {
        await suspend { waiter in
            state.withLock { $0.awaitRetry(id: waiter.id, since: since, cancelled: Task.isCancelled, waiter) } == nil
        } cancel: { id in
            state.withLock { $0.cancelRetryWait(id: id) }
        }
    }
}

extension OutboxLiveItem {
    var isStatus: Bool {
        if case .status = self { true } else { false }
    }
}
