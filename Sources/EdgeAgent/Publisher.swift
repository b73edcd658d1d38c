import FleetcastCore
import FleetProtocol
import GNSS
import Logging
import Synchronization

/// Turns a vehicle's GNSS events into MQTT messages of the public contract and sends them.
///
/// Events go in through ``publish(_:)`` (or ``run(events:lossless:)``): fixes of mode 2D/3D
/// pass the ``ReportingPolicy``, get the next `seq` from the ``SequenceStore`` and become
/// contract JSON (`v`, `vehicle`, `seq`) in the ``Outbox``; headings likewise. Two intakes:
///
/// - **Live** (``publish(_:)``, `lossless: false`): never waits, so a live receiver is never
///   stalled; when the outbox is full its oldest fixes are dropped (and counted in the status).
/// - **Lossless** (``publishWaitingForRoom(_:)``, `lossless: true`): waits for room in the
///   outbox before each fix or heading, so nothing is dropped: for finite sources (a replay
///   uploaded as a batch), where waiting only slows the reading of the file.
///
/// The sender loop inside ``run()`` leases messages from the outbox in order and hands them to
/// a ``MessageSending`` (the MQTT client) with the configured QoS, retained, keeping up to
/// ``Settings/sendWindow`` sends outstanding at once (pipelining: one round trip no longer
/// caps the rate). Sends start in queue order and reach the transport in that order (see
/// ``MessageSending``). When a send fails, its message is released back to its place, no new
/// send starts until the outstanding ones have settled, and then, after a back-off (from
/// ``Settings/initialRetryDelay`` doubling to ``Settings/maxRetryDelay``), the queue is sent
/// again in order from the first unacknowledged message; meanwhile new fixes keep filling
/// the outbox.
///
/// The retained `status` topic says `online` (with `since`, agent version, source URI, the GNSS
/// state and the dropped-fix count) at start, again whenever the GNSS state (`starting`,
/// `fixing`, `no-fix`, `source-lost`) or the dropped count changes, and `offline` with reason
/// `shutdown` after a clean ``finish()``: the outbox is drained (bounded by
/// ``Settings/drainTimeout``), the offline status sent (bounded likewise), and the sequence
/// store closed with the exact next number.
public final class Publisher: Sendable {
    /// What the publisher publishes and how.
    public struct Settings: Sendable {
        /// The vehicle the messages are about.
        public var vehicle: VehicleID
        /// The topic layout (prefix).
        public var topics: FleetTopics
        /// QoS of fix messages (0, 1 or 2).
        public var fixQoS: Int
        /// QoS of heading messages (0, 1 or 2).
        public var headingQoS: Int
        /// The GNSS source URI shown in the status (without credentials).
        public var sourceURI: String?
        /// The agent's version shown in the status.
        public var agentVersion: String?
        /// Which fixes and headings are worth sending.
        public var policy: ReportingPolicy
        /// Outbox size in messages.
        public var outboxCapacity: Int
        /// How long a clean finish waits for the outbox to drain, and then for the offline status.
        public var drainTimeout: Duration
        /// Wait after the first failed send; doubles on each further failure.
        public var initialRetryDelay: Duration
        /// Longest wait between retries.
        public var maxRetryDelay: Duration
        /// The most sends outstanding (awaiting their acknowledgement) at once, messages (at
        /// least 1). Set it to the MQTT client's maximum in-flight messages (`broker.maxInflight`):
        /// more would only wait inside libmosquitto.
        public var sendWindow: Int

        /// Settings with the contract's defaults: QoS 1 for fixes, 0 for headings, every fix,
        /// 32 sends outstanding.
        public init(
            vehicle: VehicleID, topics: FleetTopics = .default, fixQoS: Int = 1, headingQoS: Int = 0,
            sourceURI: String? = nil, agentVersion: String? = nil, policy: ReportingPolicy = ReportingPolicy(),
            outboxCapacity: Int = 1000, drainTimeout: Duration = .seconds(5),
            initialRetryDelay: Duration = .milliseconds(250), maxRetryDelay: Duration = .seconds(10),
            sendWindow: Int = 32
        ) {
            self.vehicle = vehicle
            self.topics = topics
            self.fixQoS = fixQoS
            self.headingQoS = headingQoS
            self.sourceURI = sourceURI
            self.agentVersion = agentVersion
            self.policy = policy
            self.outboxCapacity = outboxCapacity
            self.drainTimeout = drainTimeout
            self.initialRetryDelay = initialRetryDelay
            self.maxRetryDelay = maxRetryDelay
            self.sendWindow = sendWindow
        }
    }

    /// The QoS of status messages (the contract fixes it at 1, retained).
    public static let statusQoS = 1

    /// A flag raised once and the task waiting for it, kept under the publisher's lock.
    private struct Wakeup {
        var raised = false
        var waiter: CheckedContinuation<Void, Never>?

        /// Takes the waiting task out, to be resumed after the lock is released.
        mutating func takeWaiter() -> CheckedContinuation<Void, Never>? {
            defer { waiter = nil }
            return waiter
        }
    }

    /// Which ``Wakeup`` of the state a wait or a signal is about.
    private enum WakeupKind: Sendable {
        case finish, retry
    }

    private struct State {
        var policy: ReportingPolicy
        var gnss: VehicleStatus.GNSSState = .starting
        var counters = PublisherCounters()
        var statusDropped: UInt64 = 0
        /// ``finish()`` was called; ``run()`` waits on it.
        var finish = Wakeup()
        /// In an outage (a send failed; none succeeded since): logged once per outage.
        var failing = false
        /// A send failed since the sender loop last backed off: the loop must stop, let the
        /// outstanding sends settle, back off, and resend in order.
        var failurePending = false
        /// The next back-off.
        var retryDelay: Duration
        /// ``retryNow()`` was called since the last failed send: the sender loop's back-off
        /// wait ends early, or the next one is skipped.
        var retry = Wakeup()
        /// Dropping since the outbox last had room (logged once per such episode).
        var overflowing = false

        subscript(kind: WakeupKind) -> Wakeup {
            get { kind == .finish ? finish : retry }
            set { if kind == .finish { finish = newValue } else { retry = newValue } }
        }
    }

    /// The settings it was made with.
    public let settings: Settings
    /// The queue between intake and sender; its drop counters feed the status.
    public let outbox: Outbox
    private let sender: any MessageSending
    private let sequence: SequenceStore
    private let logger: Logger
    private let now: @Sendable () -> UTCTimestamp
    private let onlineSince: UTCTimestamp
    private let state: SanitizerVisibleMutex<State>

    /// A publisher; it queues the `online` status at once.
    ///
    /// - Parameters:
    ///   - sender: delivers messages (the MQTT client).
    ///   - sequence: hands out `seq` numbers; the publisher closes it on finish.
    ///   - logger: debug for start, stop and GNSS state changes; info (once per episode) for
    ///     failed sends, resumed sends, outbox overflow and an unfinished drain.
    ///   - now: the wall clock for the status `since` (UTC); only the status uses it.
    public init(
        settings: Settings, sender: any MessageSending, sequence: SequenceStore, logger: Logger,
        now: @escaping @Sendable () -> UTCTimestamp = SystemUTCClock.now
    ) {
        self.settings = settings
        self.outbox = Outbox(capacity: settings.outboxCapacity, window: settings.sendWindow)
        self.sender = sender
        self.sequence = sequence
        var logger = logger
        logger[metadataKey: "vehicle"] = "\(settings.vehicle.rawValue)"
        self.logger = logger
        self.now = now
        self.onlineSince = now()
        self.state = SanitizerVisibleMutex(State(policy: settings.policy, retryDelay: settings.initialRetryDelay))
        state.withLock { state in enqueueStatus(&state) }
    }

    /// Counters so far (received, queued, published, dropped, skipped by policy…).
    public var counters: PublisherCounters {
        let (droppedFixes, droppedHeadings) = (outbox.droppedFixes, outbox.droppedHeadings)
        var counters = state.withLock { $0.counters }
        counters.droppedFixes = droppedFixes
        counters.droppedHeadings = droppedHeadings
        return counters
    }

    /// The GNSS state the status reports now.
    public var gnssState: VehicleStatus.GNSSState { state.withLock { $0.gnss } }

    /// The retained `offline` status to register as the MQTT last will (no reason: the
    /// connection was lost).
    public var lastWill: OutboundMessage {
        let status = VehicleStatus(vehicle: settings.vehicle, state: .offline, source: settings.sourceURI)
        return OutboundMessage(
            kind: .status, topic: settings.topics.status(settings.vehicle),
            payload: FleetPayload.encode(status), qos: Self.statusQoS, retain: true
        )
    }

    // MARK: Intake

    /// Takes one event from a live GNSS source; never waits: when the outbox is full, its oldest
    /// fixes are dropped (see ``Outbox``). After ``finish()`` events are ignored.
    ///
    /// Meant to be called from one task (the hub subscription); concurrent callers are safe:
    /// the policy decision, the `seq` and the enqueueing happen under one lock, so `seq` order is
    /// queue order. The outbox may resume its waiting consumer inside that lock, which only
    /// schedules the sender task and never runs it inline.
    public func publish(_ event: GNSSEvent) {
        state.withLock { state in
            guard !state.finish.raised else { return }
            switch event {
            case .fix(let fix):
                state.counters.fixesReceived += 1
                guard fix.mode != .noFix else {
                    state.counters.fixesWithoutPosition += 1
                    changeGNSS(to: .noFix, &state)
                    return
                }
                changeGNSS(to: .fixing, &state)
                switch state.policy.evaluate(fix) {
                case .publish(let fix, _):
                    let seq = sequence.next()
                    let payload = FleetPayload.encode(fix, vehicle: settings.vehicle.rawValue, seq: seq)
                    enqueue(OutboundMessage(
                        kind: .fix, topic: settings.topics.fix(settings.vehicle), payload: payload,
                        qos: settings.fixQoS, retain: true, seq: seq
                    ), &state)
                case .skip:
                    state.counters.fixesSkippedByPolicy += 1
                }
            case .heading(let heading):
                state.counters.headingsReceived += 1
                guard state.policy.evaluate(heading) else {
                    state.counters.headingsSkippedByPolicy += 1
                    return
                }
                let seq = sequence.next()
                let payload = FleetPayload.encode(heading, vehicle: settings.vehicle.rawValue, seq: seq)
                enqueue(OutboundMessage(
                    kind: .heading, topic: settings.topics.heading(settings.vehicle), payload: payload,
                    qos: settings.headingQoS, retain: true, seq: seq
                ), &state)
            case .state(let sourceState):
                switch sourceState {
                case .connecting: break  // keeps `starting` or `source-lost` until data flows
                case .streaming: changeGNSS(to: .fixing, &state)
                case .noFix: changeGNSS(to: .noFix, &state)
                case .reconnecting: changeGNSS(to: .sourceLost, &state)
                case .ended: break  // a replay is over; `offline` (reason shutdown) follows
                }
            }
        }
    }

    /// Takes one event from a finite source that must lose nothing (a replay uploaded as a
    /// batch): before a fix or heading it waits until the outbox has room, then publishes it as
    /// ``publish(_:)`` does, so no fix is dropped for lack of room. It paces the caller to the
    /// broker's acknowledgements.
    ///
    /// Lossless only as the publisher's single intake: call it from one task, and not
    /// alongside ``publish(_:)`` (which could take the room it waited for). Returns at once
    /// after ``finish()`` (the event is ignored). Throws `CancellationError` when the task is
    /// cancelled while waiting; the event is then not published.
    public func publishWaitingForRoom(_ event: GNSSEvent) async throws {
        switch event {
        case .fix, .heading: try await outbox.waitForRoom()
        case .state: break
        }
        publish(event)
    }

    /// Consumes `events` until they end, running the sender loop meanwhile, then finishes
    /// cleanly (drain, `offline`). If the sequence throws, the GNSS state becomes
    /// `source-lost`, the publisher finishes all the same and the error is rethrown.
    /// Cancelling the task stops at once: nothing more is sent, the sequence store is closed.
    /// After ``finish()`` (a graceful shutdown) it stops taking events, drains and returns.
    ///
    /// - Parameter lossless: `false` for a live receiver: events go through ``publish(_:)``,
    ///   which never waits (the oldest fixes are dropped when the outbox is full). `true` for a
    ///   finite source such as a replay at full speed: events go through
    ///   ``publishWaitingForRoom(_:)``, which waits for room, so every fix is published.
    public func run<Events: AsyncSequence>(events: Events, lossless: Bool = false) async throws
    where Events.Element == GNSSEvent {
        var failure: (any Error)?
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.run() }
            do {
                for try await event in events {
                    if lossless { try await publishWaitingForRoom(event) } else { publish(event) }
                    // After finish() no more events are taken (a lossless intake waiting for
                    // room returns once finish() closes the outbox).
                    if state.withLock({ $0.finish.raised }) { break }
                }
            } catch is CancellationError where Task.isCancelled {
                // Cancelled while waiting for room: stop as a cancelled event stream does.
            } catch {
                failure = error
                logger.debug("GNSS event stream failed", metadata: ["error": "\(error)"])
                publish(.state(.reconnecting(reason: "\(error)", delay: .zero)))
            }
            finish()
            await group.waitForAll()
        }
        if let failure { throw failure }
    }

    // MARK: Lifecycle

    /// Runs the sender loop until ``finish()`` is called (or the task is cancelled), then drains
    /// the outbox (at most ``Settings/drainTimeout``), sends the `offline` status (at most as
    /// long again) and closes the sequence store (persisting the exact next `seq`). Call it once.
    ///
    /// Bounded even when the broker is gone: at each timeout the sends still awaiting their
    /// acknowledgement are cancelled, which ends their wait at once (the ``MessageSending``
    /// contract; the MQTT client may still deliver them later), their messages go back to the
    /// outbox, and the number left undelivered is logged.
    public func run() async {
        logger.debug("publisher started", metadata: [
            "mqtt.topic": "\(settings.topics.fix(settings.vehicle))",
            "outbox.capacity": "\(outbox.capacity)",
        ])
        let drained = await withTaskGroup(of: Bool.self) { group in
            group.addTask { await self.senderLoop() }
            await wait(for: .finish)
            outbox.close()
            group.addTask {
                try? await Task.sleep(for: self.settings.drainTimeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        if !drained {
            // Every send has settled (the group awaited them): the cancelled ones were released.
            logger.info("outbox not drained at shutdown", metadata: ["outbox.unsent": "\(outbox.count)"])
        }
        await sendOffline()
        do {
            try sequence.close()
            logger.debug("sequence number persisted", metadata: ["seq.next": "\(sequence.peekNext)"])
        } catch {
            logger.info("cannot persist sequence number", metadata: ["error": "\(error)"])
        }
        let counters = self.counters
        logger.debug("publisher stopped", metadata: [
            "published": "\(counters.published)", "dropped": "\(counters.dropped)",
            "skipped": "\(counters.skippedByPolicy)",
        ])
    }

    /// Asks ``run()`` to finish: no more events are taken, the outbox is drained, then `offline`
    /// is published. Returns at once; ``run()`` returns when it is done. Idempotent.
    public func finish() {
        let waiter = raise(.finish)
        outbox.close()
        waiter?.resume()
    }

    /// Says the transport is usable now (the agent calls it when its MQTT link has connected):
    /// a retry back-off in progress ends at once, or the next one is skipped if no send has
    /// failed since, so queued messages go out without waiting out a delay meant for an
    /// unreachable broker. (At start-up the first send usually fails with "not connected"
    /// a millisecond before the connection is made; without this the whole outbox then waited
    /// the initial retry delay, and up to the maximum one after a long outage.)
    public func retryNow() {
        raise(.retry)?.resume()
    }

    // MARK: Internals

    /// Raises the flag of `kind` and returns the task waiting for it, to be resumed after the
    /// lock is released.
    private func raise(_ kind: WakeupKind) -> CheckedContinuation<Void, Never>? {
        state.withLock { state in
            state[kind].raised = true
            return state[kind].takeWaiter()
        }
    }

    /// Returns once the flag of `kind` is raised (at once if it already is) or the task is
    /// cancelled.
    private func wait(for kind: WakeupKind) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let already = state.withLock { state -> Bool in
                    if state[kind].raised || Task.isCancelled { return true }
                    state[kind].waiter = continuation
                    return false
                }
                if already { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0[kind].takeWaiter() }?.resume()
        }
    }

    /// Sends the outbox's messages in order with up to ``Settings/sendWindow`` outstanding,
    /// retrying failures in order; returns `true` once the outbox is closed and empty, `false`
    /// when cancelled.
    private func senderLoop() async -> Bool {
        await withDiscardingTaskGroup(returning: Bool.self) { group in
            while true {
                let next: OutboxEntry?
                do { next = try await outbox.next() } catch {
                    group.cancelAll()
                    return false
                }
                guard let entry = next else { return true }
                if let delay = takeBackOffIfFailed() {
                    // A send failed: put this one back, let the outstanding sends settle (each
                    // acknowledged or released), back off, then resend from the first
                    // unacknowledged message, in order.
                    outbox.release(entry.id)
                    await outbox.waitUntilNoneLeased()
                    guard await backOff(delay) else {
                        group.cancelAll()
                        return false
                    }
                    state.withLock { $0.failurePending = false }
                    continue
                }
                // Runs synchronously up to the sender's first suspension, by which point the
                // message is with the transport: sends reach the wire in loop order.
                group.addImmediateTask { await self.send(entry) }
            }
        }
    }

    /// Waits `delay`, or less if ``retryNow()`` is called meanwhile (or was since the last
    /// failure); returns `false` when the task is cancelled.
    private func backOff(_ delay: Duration) async -> Bool {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: delay) }
            group.addTask { await self.wait(for: .retry) }
            await group.next()
            group.cancelAll()
        }
        return !Task.isCancelled
    }

    /// The back-off to wait when a send failed since the last one (doubling it for next
    /// time), or `nil` when sending may go on.
    private func takeBackOffIfFailed() -> Duration? {
        state.withLock { state -> Duration? in
            guard state.failurePending else { return nil }
            let delay = state.retryDelay
            state.retryDelay = min(delay * 2, settings.maxRetryDelay)
            return delay
        }
    }

    /// Sends one leased message; acknowledges it on success, releases it on failure (after
    /// marking the failure, so the loop backs off before handing it out again).
    private func send(_ entry: OutboxEntry) async {
        let message = entry.message
        do {
            try await sender.send(topic: message.topic, payload: message.payload, qos: message.qos, retain: message.retain)
        } catch {
            let firstFailure = state.withLock { state -> Bool in
                state.counters.sendFailures += 1
                state.failurePending = true
                state.retry.raised = false
                defer { state.failing = true }
                return !state.failing
            }
            outbox.release(entry.id)
            if firstFailure, !Task.isCancelled {
                logger.info("send failed, retrying", metadata: [
                    "mqtt.topic": "\(message.topic)", "error": "\(error)",
                ])
            }
            return
        }
        outbox.acknowledge(entry.id)
        let hasRoom = outbox.count < outbox.capacity / 2
        let recovered = state.withLock { state -> Bool in
            if hasRoom { state.overflowing = false }
            if message.kind == .status { state.counters.statusesPublished += 1 } else { state.counters.published += 1 }
            state.retryDelay = settings.initialRetryDelay
            defer { state.failing = false }
            return state.failing
        }
        if recovered { logger.info("sending resumed", metadata: ["outbox.queued": "\(outbox.count)"]) }
    }

    private func sendOffline() async {
        let status = VehicleStatus(
            vehicle: settings.vehicle, state: .offline, since: now(), agentVersion: settings.agentVersion,
            source: settings.sourceURI, gnss: gnssState, droppedFixes: outbox.droppedFixes, reason: "shutdown"
        )
        let topic = settings.topics.status(settings.vehicle)
        let payload = FleetPayload.encode(status)
        let sender = self.sender
        let sent = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                do {
                    try await sender.send(topic: topic, payload: payload, qos: Self.statusQoS, retain: true)
                    return true
                } catch {
                    return false
                }
            }
            group.addTask {
                try? await Task.sleep(for: self.settings.drainTimeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        if sent {
            state.withLock { $0.counters.statusesPublished += 1 }
        } else {
            logger.info("offline status not sent", metadata: ["mqtt.topic": "\(topic)"])
        }
    }

    private func changeGNSS(to new: VehicleStatus.GNSSState, _ state: inout State) {
        guard state.gnss != new else { return }
        logger.debug("GNSS state changed", metadata: ["gnss.from": "\(state.gnss.rawValue)", "gnss.to": "\(new.rawValue)"])
        state.gnss = new
        enqueueStatus(&state)
    }

    private func enqueue(_ message: OutboundMessage, _ state: inout State) {
        switch outbox.enqueue(message) {
        case .queued:
            state.counters.queued += 1
        case .queuedDroppingOldest(let kind, let seq):
            state.counters.queued += 1
            if kind == .fix {
                logger.debug("outbox full, oldest fix dropped", metadata: ["seq": "\(seq.map(String.init) ?? "-")"])
            }
        case .droppedIncoming, .superseded, .refusedClosed:
            break
        }
        let dropped = outbox.droppedFixes
        if dropped != state.statusDropped {
            if !state.overflowing {
                state.overflowing = true
                logger.info("outbox full, dropping oldest fixes", metadata: ["outbox.capacity": "\(outbox.capacity)"])
            }
            enqueueStatus(&state)
        }
    }

    private func enqueueStatus(_ state: inout State) {
        let dropped = outbox.droppedFixes
        state.statusDropped = dropped
        let status = VehicleStatus(
            vehicle: settings.vehicle, state: .online, since: onlineSince, agentVersion: settings.agentVersion,
            source: settings.sourceURI, gnss: state.gnss, droppedFixes: dropped
        )
        outbox.enqueue(OutboundMessage(
            kind: .status, topic: settings.topics.status(settings.vehicle),
            payload: FleetPayload.encode(status), qos: Self.statusQoS, retain: true
        ))
    }
}
