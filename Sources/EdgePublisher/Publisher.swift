import EdgeCore
import EdgeOutbox
import FleetProtocol
import FleetcastCore
import GNSS
import Logging
import MQTT
import OutboxCore

/// Turns a vehicle's GNSS events into MQTT messages of the public contract and delivers them,
/// losing nothing the store can hold.
///
/// A thin driver of the ``EdgeCore/EdgeState``, which takes every decision under one lock: the
/// reporting policy, numbering and encoding, what goes live, what the backlog drain sends and
/// when, retries, the status cadence, what is logged once. The driver carries out its actions
/// (sends, store transactions, logs, resumptions) and brings it time as events: a wait with a
/// deadline ends when the state's timer fires (``EdgeClock``).
///
/// **Three loops** run inside ``run()``, fed by ``publish(_:)`` (a live receiver; never waits)
/// or ``publishWaitingForRoom(_:)`` (a replay; waits while the live queue is full):
/// - *live*: the newest fix and heading go out at once on `{prefix}/{vehicle}/fix` and
///   `…/heading` (retained), up to ``Settings/sendWindow`` awaiting acknowledgement; one
///   superseded before it could be sent joins the backlog. The status goes first.
/// - *backlog*: the rest, from the store oldest first, on `…/backlog` (QoS 1) in batches of at
///   most 32 KiB and ``Settings/drainRate`` events per second; with a batched uplink
///   (``Settings/uplinkBatch``) everything, as retained `…/batch` messages, once the oldest
///   has waited the window, a batch is full, or the vehicle starts or stops.
/// - *sync*: once per ``Settings/syncInterval`` (sooner when numbers run out) a transaction stores the unacknowledged, deletes the rest.
///
/// A failed send is retried after a jittered back-off, or at once on a connection. The retained
/// `status` goes first on every connection (``link(connected:)``), on a GNSS or storage change,
/// and at most once per ``Settings/statusInterval`` while counts move; then `offline`.
public final class Publisher: Sendable {
    /// The QoS of status and backlog messages (the contract fixes it at 1).
    public static let statusQoS = MQTTQoS.atLeastOnce

    /// The settings it was made with.
    public let settings: Settings
    let sender: any MessageSending
    let logger: Logger
    let now: UTCTimestampSource
    private let clockSynchronized: @Sendable () -> Bool
    /// Writes the statuses (`online` since the connection, `offline`, the last will).
    private let report: StatusReport
    let storage: any OutboxStorage
    let edge: EdgeShell
    private let liveTopics: (fix: String, heading: String)  // made once: every live send names one

    /// A publisher over an opened store; it queues the `online` status at once.
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
        self.storage = store.storage
        self.liveTopics = (settings.topics.fix(settings.vehicle), settings.topics.heading(settings.vehicle))
        let report = self.report
        self.edge = EdgeShell(
            EdgeShell.Edge(settings: settings, opening: store.opening, run: store.run, degraded: store.degradedReason, now: .now),
            logger: logger, outboxPath: store.storage.location,
            writeStatus: { [sender] in report.online(.init($0, traffic: sender.traffic)) })
        let first = report.online(edge.read { [traffic = sender.traffic] in $0.statusFigures(traffic: traffic) })
        edge.act { $0.setStatus(first) }
    }

    /// Counters so far (received, queued, published, dropped, skipped by policy…).
    public var counters: PublisherCounters { edge.read { $0.counters } }

    /// When the publisher's sync loop last ran: it runs at least once per
    /// ``Settings/syncInterval`` while the publisher works (systemd's watchdog checks it).
    public var lastActivity: ContinuousClock.Instant { edge.read { $0.decisions.syncLoopActivity } }

    /// Whether ``finish()`` was called (a shutdown is under way).
    public var isFinishing: Bool { edge.read { $0.decisions.finishing } }

    /// The GNSS state the status reports now.
    public var gnssState: VehicleStatus.GNSSState { edge.read { $0.decisions.gnss } }

    /// Fixes and headings stored or waiting to be, not yet acknowledged (the status's `backlog`).
    public var backlogCount: Int { edge.read { $0.outbox.backlogCount } }

    /// Why the store is degraded now, or `nil` when it works.
    public var storageProblem: String? { edge.read { $0.storageProblem } }

    /// The retained `offline` status to register as the MQTT last will (no reason: the
    /// connection was lost).
    public var lastWill: OutboundMessage { report.lastWill }

    // MARK: Intake

    /// Takes one event from a GNSS source; never waits. After ``finish()`` events are ignored.
    public func publish(_ event: GNSSEvent) { _ = publish(event, ifRoom: false) }

    /// ``publish(_:)``; or, `ifRoom` and the live queue full, nothing (false). One lock either way.
    private func publish(_ event: GNSSEvent, ifRoom: Bool) -> Bool {
        // The clocks are read before the lock: a fix's time is checked against them inside.
        var clocks: (wall: UTCTimestamp, synchronized: Bool)?
        if case .fix(let fix) = event, fix.mode != .noFix, settings.maximumFixClockOffset != nil {
            clocks = (now(), clockSynchronized())
        }
        let (wall, instant) = (now().millisecondsSince1970, ContinuousClock.now)
        return edge.act { state in
            if ifRoom, !state.holds(.outbox(.liveRoom)) { return (.init(), false) }
            return (state.receive(event, clocks: clocks, wallMilliseconds: wall, at: instant), true)
        }
    }

    /// Takes one event from a finite source that must lose nothing (a replay uploaded as a
    /// batch): a fix or heading waits until the live queue has room, then is published as
    /// ``publish(_:)`` does. Returns at once after ``finish()``. Throws `CancellationError` for a
    /// fix or heading when the task is cancelled (before it publishes it).
    public func publishWaitingForRoom(_ event: GNSSEvent) async throws {
        if case .state = event { return publish(event) }
        try Task.checkCancellation()
        while !publish(event, ifRoom: true) {
            await edge.wait(for: .outbox(.liveRoom))
            try Task.checkCancellation()
        }
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
                    if isFinishing { break }
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
        if edge.update({ $0.intakeStarted(stop: { intake.cancel() }) }) { intake.cancel() }
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
        logger.debug("publisher started", metadata: ["mqtt.topic": "\(liveTopics.fix)", "outbox.path": "\(storage.location)"])
        var stopping = ContinuousClock.now
        let drained = await withTaskGroup(of: Void.self, returning: Bool.self) { group in
            group.addTask { await self.syncLoop() }
            group.addTask { await self.drainLoop() }
            let live = Task { await self.liveLoop() }
            await edge.wait(for: .finished)
            finish()  // the outbox closes (already, unless this task was cancelled)
            stopping = .now
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
                logger.info("live messages not sent before shutdown; kept in the outbox", metadata: ["outbox.path": "\(storage.location)"])
            }
            await live.value
            // A backlog batch on its way to the broker is left to be acknowledged, in what is
            // left of the drain timeout: cancelled, it would count as failed, and the stop would
            // send it a second time below. The drain then ends by itself (the outbox is closed).
            if drained { await edge.wait(for: .outbox(.backlogIdle), until: stopping.advanced(by: settings.drainTimeout)) }
            group.cancelAll()
            return drained
        }
        // The drain has ended: nothing of the backlog is in flight (a batch whose acknowledgement
        // did not come in time counts as failed and goes again). What it had not sent goes now,
        // within what is left of the drain timeout (the stop's bound does not grow).
        if drained { await sendRemainingBacklog(until: stopping.advanced(by: settings.drainTimeout)) }
        await commit(clean: true)
        let backlog = edge.read { $0.outbox.unacknowledgedCount }
        if backlog > 0 {
            logger.info("backlog kept for the next run", metadata: ["outbox.backlog": "\(backlog)", "outbox.path": "\(storage.location)"])
        }
        await sendOffline()
        edge.stop()
        let counters = self.counters
        let figures = ["published": counters.published, "dropped": counters.dropped, "skipped": counters.skippedByPolicy]
        logger.debug("publisher stopped", metadata: figures.mapValues { "\($0)" })
    }

    /// Asks ``run()`` to finish; returns at once. Idempotent.
    public func finish() {
        let (wall, instant) = (now().millisecondsSince1970, ContinuousClock.now)
        edge.act { $0.finish(wallMilliseconds: wall, at: instant) }
    }

    /// Says the broker link connected (the first time or again, to any broker: an `online`
    /// status `since` now goes first, then what waits, with no back-off) or was lost (or is
    /// not connected yet): nothing goes live while it is down.
    public func link(connected: Bool) {
        let (since, instant) = (now(), ContinuousClock.now)
        edge.act { connected ? $0.linkConnected(since: since, at: instant) : $0.linkLost() }
    }

    /// Says the transport is usable now (a sender that does not report its connections):
    /// back-offs in progress end at once, so what waits goes out without waiting out a delay
    /// meant for an unreachable broker.
    public func retryNow() {
        edge.act { $0.retryNow() }
    }

    // MARK: Live

    private func liveLoop() async {
        // Each item is handed to the transport before `sendLive` returns: live sends reach the
        // wire in `seq` order. While a live back-off holds, the state hands out nothing.
        while let item = await edge.nextLive() { sendLive(item) }
        // Closed and nothing left to start: what is still awaiting its acknowledgement settles
        // (or the stop's time limit cancels this wait; unacknowledged records stay stored).
        await edge.wait(for: .outbox(.liveIdle))
    }

    /// Sends one live item; its outcome goes to the state from the transport's callback.
    private func sendLive(_ item: OutboxLiveItem) {
        let (topic, payload, qos): (String, [UInt8], MQTTQoS)
        switch item {
        case .status(let message):
            (topic, payload, qos) = (message.topic, message.payload, message.qos)
        case .record(let record):
            topic = record.kind == .fix ? liveTopics.fix : liveTopics.heading
            (payload, qos) = (record.payload, record.kind == .fix ? settings.fixQoS : settings.headingQoS)
        }
        sender.send(topic: topic, payload: payload, qos: qos, retain: true) { result in
            self.edge.act { [instant = ContinuousClock.now] in $0.liveSent(item, topic: topic, result, at: instant) }
        }
    }

    // MARK: Sync

    private func syncLoop() async {
        while !Task.isCancelled {
            let (wall, instant) = (now().millisecondsSince1970, ContinuousClock.now)
            switch edge.act({ $0.tick(wallMilliseconds: wall, at: instant) }) {
            case .idle: break
            case .commit(let commit): await write(commit)
            case .stop(let commit):
                // No number is handed out any more: one commit reserves every one the live
                // drain still has to send (else it would wait out the whole drain timeout).
                if let commit { await write(commit) }
                return
            }
            await edge.wait(for: .outbox(.commitDue), until: .now + settings.syncInterval)
        }
    }

    /// One transaction now (`clean`: the stop's last).
    func commit(clean: Bool) async {
        let wall = now().millisecondsSince1970
        guard let commit = edge.update({ $0.takeCommit(clean: clean, wallMilliseconds: wall) }) else { return }
        await write(commit)
    }

    /// Writes one transaction: what is unacknowledged, the deletion of what was acknowledged,
    /// the numbers reserved.
    private func write(_ commit: OutboxCommit) async {
        let storage = self.storage
        do {
            // Not cancelled with the sync loop at shutdown: a transaction begun is finished
            // (an interrupted one would throw, which would look like a storage failure).
            let result = try await Task { try await storage.commit(commit) }.value
            edge.act { [instant = ContinuousClock.now] in $0.committed(commit, result, at: instant) }
        } catch {
            edge.act { [instant = ContinuousClock.now] in $0.commitFailed(error, location: storage.location, at: instant) }
        }
    }

    // MARK: Status

    private func sendOffline() async {
        let status = report.offline(at: now(), edge.read { [traffic = sender.traffic] in $0.statusFigures(traffic: traffic) })
        let (topic, payload) = (status.topic, status.payload)
        let sent =
            await withTimeLimit(settings.drainTimeout) { [sender] in
                (try? await sender.send(topic: topic, payload: payload, qos: Self.statusQoS, retain: true)) != nil
            } ?? false
        if sent { edge.act { $0.offlineSent() } } else { logger.info("offline status not sent", metadata: ["mqtt.topic": "\(topic)"]) }
    }
}
