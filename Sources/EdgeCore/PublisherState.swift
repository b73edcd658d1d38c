import FleetProtocol
import FleetcastCore
import GNSS
import Logging

/// The publisher's decisions as a plain value: what an event from the source leads to, when a
/// failed send is retried and after how long, what is logged once, when a status is due, and
/// whether a retry came or the finish began.
///
/// Each event is a `mutating func` that the ``EdgeState`` calls under its lock; what it returns
/// (a log level, a status to queue) is acted on after the lock is released. No clocks are read
/// here: instants come in as arguments. The tasks waiting on it are the ``EdgeState``'s.
package struct PublisherState {
    /// Fixed settings.
    package struct Settings {
        /// Shortest time between two statuses re-published for backlog or loss counts.
        var statusInterval: Duration
        /// Wait after the first failed send; grows (with jitter) on each further failure.
        var initialRetryDelay: Duration
        /// Longest wait between retries.
        var maxRetryDelay: Duration
        /// Fraction of each retry delay randomised away (0...1).
        var retryJitter: Double
        /// Fixes stamped further than this from a synchronized clock are refused (`nil`: not checked).
        var maximumFixClockOffset: Duration?
        /// The store was degraded when opened (its problem is reported from the start: a later
        /// failure to write it is not announced again).
        var degradedAtOpen = false
        /// Whether a moving backlog count is worth a new status. Not in batched mode, where
        /// every record waits in the outbox for its batch: the count moves all the time, and a
        /// status every ``statusInterval`` would cost more than the batches.
        var backlogTriggersStatus = true
        /// Batched mode: the shortest time between two flushes for a start or a stop (a
        /// receiver's speed noise around the stationary threshold, or stop-and-go traffic,
        /// must not turn every few seconds into a batch); `nil`: not batched.
        var minimumFlushGap: Duration?

        /// The publisher's timing and modes; the rest at their defaults.
        package init(
            statusInterval: Duration, initialRetryDelay: Duration, maxRetryDelay: Duration, retryJitter: Double = 0.2,
            maximumFixClockOffset: Duration?, degradedAtOpen: Bool = false, backlogTriggersStatus: Bool = true,
            minimumFlushGap: Duration? = nil
        ) {
            (self.statusInterval, self.initialRetryDelay, self.maxRetryDelay) = (statusInterval, initialRetryDelay, maxRetryDelay)
            self.retryJitter = retryJitter
            (self.maximumFixClockOffset, self.degradedAtOpen) = (maximumFixClockOffset, degradedAtOpen)
            (self.backlogTriggersStatus, self.minimumFlushGap) = (backlogTriggersStatus, minimumFlushGap)
        }
    }

    /// One of the publisher's sending loops, each with its own back-off.
    package enum Loop: Sendable {
        case live
        case backlog
    }

    /// What to publish for an event that passed: a fix (carrying its instant's heading when
    /// the ``InstantJoiner`` joined one), or a heading alone.
    package enum Publish: Sendable, Equatable {
        case fix(Fix)
        case heading(Heading)
    }

    /// What an event from the source leads to.
    package struct Intake {
        /// The fixes and headings to number and queue, oldest first: what passed the policy of
        /// the event and of what the joiner let go with it.
        package var publish: [Publish] = []
        /// The GNSS state the status reports, when it changed (a status is then due).
        package var gnssChange: VehicleStatus.GNSSState?
        /// What to log about the source's health.
        package var sourceReport: SourceHealth.Report?
        /// What to log about fix times.
        package var fixTimeLog: FixTimeCheck.LogAction?
        /// The fix marks a start or a stop (the first fix, the vehicle starting or stopping):
        /// a batched uplink sends what it gathered at once.
        package var flush = false
    }

    /// A back-off before a retry: how long, and the retry generation it began in (a
    /// ``retryNow()`` after it ends the wait).
    package struct RetryWait: Sendable, Equatable {
        package var delay: Duration
        package var since: UInt64

        package init(delay: Duration, since: UInt64) { (self.delay, self.since) = (delay, since) }
    }

    /// What an `online` status says, besides what is fixed.
    package struct StatusContent: Sendable, Equatable {
        package var gnss: VehicleStatus.GNSSState
        package var backlog: Int
        package var drops: VehicleStatus.Drops
        package var storage: String?
        package var implausible: UInt64
        /// When the broker connection was made (`nil`: not yet connected).
        package var since: UTCTimestamp?

        package init(
            gnss: VehicleStatus.GNSSState, backlog: Int, drops: VehicleStatus.Drops, storage: String?, implausible: UInt64,
            since: UTCTimestamp? = nil
        ) {
            (self.gnss, self.backlog, self.drops, self.storage, self.implausible) = (gnss, backlog, drops, storage, implausible)
            self.since = since
        }
    }

    /// What ``finish()`` must do outside the lock.
    package struct FinishActions {
        /// Stops the task reading the events of ``Publisher/run(events:)``.
        package var stopIntake: (@Sendable () -> Void)?
        /// What the joiner held, to queue before the outbox closes.
        package var last: [Publish] = []
    }

    /// A drain refused for good (the backlog topic missing from the broker's ACL) waits this
    /// long, or until a new connection.
    package static var refusedBacklogWait: Duration { .seconds(300) }
    /// A failing store is announced again at most this often.
    package static var storageErrorInterval: Duration { .seconds(300) }

    package let settings: Settings
    package private(set) var counters = PublisherCounters()
    /// The GNSS state the status reports.
    package private(set) var gnss: VehicleStatus.GNSSState = .starting
    /// ``finish()`` was called.
    package private(set) var finishing = false
    /// When the sync loop last ran (systemd's watchdog asks).
    package private(set) var syncLoopActivity: ContinuousClock.Instant

    private var policy: ReportingPolicy
    /// Joins each instant's heading into its fix.
    private(set) var joiner = InstantJoiner()
    /// When a start or stop last asked for a flush (batched mode).
    private var lastFlush: ContinuousClock.Instant?
    private var sourceHealth = SourceHealth()
    private var fixTimes: FixTimeCheck?
    private var stopIntake: (@Sendable () -> Void)?
    /// When the broker link last connected: the `since` of the statuses (`nil`: not yet).
    package private(set) var connectedSince: UTCTimestamp?
    /// Raised by ``retryNow()``; waiting back-offs end early.
    package private(set) var retryGeneration: UInt64 = 0
    /// In an outage (a send failed; none succeeded since): logged once per outage.
    private var failing = false
    /// The level the outage's first failure was logged at; its end is logged at the same.
    private var failureLevel = Logger.Level.info
    /// A live send failed since the live loop last backed off.
    private(set) var liveFailurePending = false
    /// The retry generation of the first of those failures: a ``retryNow()`` after it (the
    /// link came back before the live loop got to its back-off) ends that back-off at once.
    private var liveFailureGeneration: UInt64 = 0
    /// Sends that succeeded (a back-off starts over after one).
    private var successes: UInt64 = 0
    private var backoffs: [Loop: (backoff: Backoff, successes: UInt64)]
    /// What the last status said about backlog, losses and storage, and when.
    private var lastStatus: StatusContent?
    private var lastStatusAt: ContinuousClock.Instant?
    /// When a failing store was last logged as an error.
    private var lastStorageError: ContinuousClock.Instant?
    /// That error was logged and its recovery not yet (the notice pairs with it).
    private var storageErrorAnnounced = false
    /// Topics whose refusal by the broker was logged (once per topic and connection).
    private var refusedTopics: Set<String> = []

    package init(settings: Settings, policy: ReportingPolicy, now: ContinuousClock.Instant) {
        self.settings = settings
        self.policy = policy
        self.syncLoopActivity = now
        self.fixTimes = settings.maximumFixClockOffset.map { FixTimeCheck(maximumOffset: $0) }
        let backoff = Backoff(initial: settings.initialRetryDelay, maximum: settings.maxRetryDelay, jitter: settings.retryJitter)
        self.backoffs = [.live: (backoff, 0), .backlog: (backoff, 0)]
    }

    // MARK: Intake

    /// An event from the GNSS source. After ``finish()`` it is ignored.
    ///
    /// - Parameters:
    ///   - clocks: the wall clock and whether it is synchronized, read for a fix with a
    ///     position when fix times are checked.
    ///   - now: now, on a monotonic clock (for rate-limited logs).
    package mutating func receive(
        _ event: GNSSEvent, clocks: (wall: UTCTimestamp, synchronized: Bool)?, at now: ContinuousClock.Instant
    ) -> Intake {
        var intake = Intake()
        guard !finishing else { return intake }
        let supersededBefore = joiner.superseded
        defer {
            counters.headingsJoined = joiner.joined
            counters.fixesSkippedByPolicy += joiner.superseded - supersededBefore
        }
        switch event {
        case .fix, .heading, .state(.streaming):
            if sourceHealth.isFailing { intake.sourceReport = sourceHealth.working(at: now) }
        case .state(.reconnecting(let reason, _)):
            intake.sourceReport = sourceHealth.failed(reason: reason, at: now)
        case .state: break
        }
        switch event {
        case .fix(let fix):
            counters.fixesReceived += 1
            guard fix.mode != .noFix else {
                counters.fixesWithoutPosition += 1
                decide(joiner.release(), at: now, &intake)
                setGNSS(.noFix, &intake)
                return intake
            }
            if let clocks,
                let verdict = fixTimes?.evaluate(
                    fixTime: fix.time, clock: clocks.wall, clockSynchronized: clocks.synchronized, at: now)
            {
                intake.fixTimeLog = verdict.log
                guard verdict.accept else {
                    counters.fixesImplausible += 1
                    return intake
                }
            }
            setGNSS(.fixing, &intake)
            decide(joiner.fix(fix, at: now), at: now, &intake)
        case .heading(let heading):
            counters.headingsReceived += 1
            decide(joiner.heading(heading, at: now), at: now, &intake)
        case .state(let sourceState):
            // A source that stops delivering lets go of what waits for its partner; one that
            // says it delivers (`streaming`, which comes before the first fix, after a heading
            // that came first) or is connecting does not: the partner may still come.
            switch sourceState {
            case .streaming, .connecting: break
            case .noFix, .reconnecting, .ended: decide(joiner.release(), at: now, &intake)
            }
            switch sourceState {
            case .connecting, .ended: break  // keeps `starting`/`source-lost`; a replay's end is followed by offline
            case .streaming: setGNSS(.fixing, &intake)
            case .noFix: setGNSS(.noFix, &intake)
            case .reconnecting: setGNSS(.sourceLost, &intake)
            }
        }
        return intake
    }

    /// The publisher's tick: what has waited for its instant's partner ``InstantJoiner/maximumHold``
    /// goes alone.
    package mutating func releaseOverdue(at now: ContinuousClock.Instant) -> Intake {
        var intake = Intake()
        guard !finishing else { return intake }
        decide(joiner.releaseOverdue(at: now), at: now, &intake)
        return intake
    }

    /// The policy's verdict on what the joiner let go: a fix passes with its heading; the
    /// heading of a fix the policy skipped goes alone if it passes on its own.
    private mutating func decide(_ outputs: [InstantJoiner.Output], at now: ContinuousClock.Instant, _ intake: inout Intake) {
        for output in outputs {
            switch output {
            case .fix(let fix):
                let headingPasses = fix.heading.map { policy.evaluate($0) }
                switch policy.evaluate(fix) {
                case .publish(let fix, let reason):
                    intake.publish.append(.fix(fix))
                    // The first fix always goes at once; starts and stops at most once per gap.
                    if reason == .first { intake.flush = settings.minimumFlushGap != nil }
                    if reason == .motionChange { intake.flush = flushAllowed(at: now) }
                case .skip:
                    counters.fixesSkippedByPolicy += 1
                    if let heading = fix.heading {
                        if headingPasses == true {
                            intake.publish.append(.heading(heading))
                        } else {
                            counters.headingsSkippedByPolicy += 1
                        }
                    }
                }
            case .heading(let heading):
                if policy.evaluate(heading) {
                    intake.publish.append(.heading(heading))
                } else {
                    counters.headingsSkippedByPolicy += 1
                }
            }
        }
    }

    private mutating func setGNSS(_ new: VehicleStatus.GNSSState, _ intake: inout Intake) {
        if gnss != new {
            gnss = new
            intake.gnssChange = new
        }
    }

    /// A record was accepted by the outbox.
    package mutating func queued(_ count: Int = 1) {
        counters.queued += UInt64(count)
    }

    // MARK: Sends

    /// A send failed with an error that deserves `level`: the level to log it at when it
    /// starts an outage (else `nil`: said once per outage).
    package mutating func sendFailed(level: Logger.Level) -> Logger.Level? {
        counters.sendFailures += 1
        defer { failing = true }
        guard !failing else { return nil }
        failureLevel = level
        return level
    }

    /// A send succeeded (`count` fixes and headings, of which `backlog` in a batch, and
    /// `statuses`): the level to log "sending resumed" at when it ends an outage.
    package mutating func sendSucceeded(count: UInt64, statuses: UInt64, backlog: UInt64 = 0) -> Logger.Level? {
        counters.published += count
        counters.backlogPublished += backlog
        counters.statusesPublished += statuses
        successes += 1
        guard failing else { return nil }
        failing = false
        refusedTopics.removeAll()  // a new connection
        return failureLevel
    }

    /// The broker refused a publish to `topic` for good: whether to say so (once per topic
    /// and connection).
    package mutating func refused(topic: String) -> Bool {
        refusedTopics.insert(topic).inserted
    }

    /// The offline status was delivered.
    package mutating func offlineSent() {
        counters.statusesPublished += 1
    }

    /// A live send failed: the live loop backs off before its next item.
    package mutating func liveSendFailed() {
        if !liveFailurePending { liveFailureGeneration = retryGeneration }
        liveFailurePending = true
    }

    /// Asked by the live loop before each item: `nil` to send it, else the back-off to wait
    /// (a send failed since the last one).
    package mutating func liveRetryWait() -> RetryWait? {
        guard liveFailurePending else { return nil }
        var wait = retryWait(.live)
        wait.since = liveFailureGeneration
        return wait
    }

    /// The live loop waited out its back-off.
    package mutating func liveRetried() {
        liveFailurePending = false
    }

    /// The back-off of `loop` after a failure: it starts over when a send succeeded since the
    /// loop's last back-off, else grows.
    package mutating func retryWait(_ loop: Loop) -> RetryWait {
        var (backoff, successesThen) = backoffs[loop]!
        if successes != successesThen { backoff.reset() }
        successesThen = successes
        let delay = backoff.next()
        backoffs[loop] = (backoff, successesThen)
        return RetryWait(delay: delay, since: retryGeneration)
    }

    /// The wait after the backlog topic was refused for good.
    package func refusedBacklogRetryWait() -> RetryWait {
        RetryWait(delay: Self.refusedBacklogWait, since: retryGeneration)
    }

    /// The broker link connected at `since` (its first connection or a later one): the
    /// statuses say so, and back-offs end (``retryNow()``).
    package mutating func connected(since: UTCTimestamp) {
        connectedSince = since
        retryNow()
    }

    /// The transport is usable again: back-offs begun before end (their retry generation
    /// moved), and a refusal is worth saying again.
    package mutating func retryNow() {
        retryGeneration += 1
        refusedTopics.removeAll()
    }

    // MARK: Store

    /// The sync loop ran.
    package mutating func syncLoopRan(at now: ContinuousClock.Instant) {
        syncLoopActivity = now
    }

    /// A commit succeeded; `recovered`: the store had failed before. Returns whether to say
    /// it is writable again (its failure was announced).
    package mutating func committed(recovered: Bool) -> Bool {
        counters.commits += 1
        defer { storageErrorAnnounced = false }
        return recovered && storageErrorAnnounced
    }

    /// A commit failed; `newProblem`: the store worked before. Returns whether to announce it
    /// (an error and a status): once, and again at most every ``storageErrorInterval`` while
    /// the store flaps; never for a store degraded from the start.
    package mutating func commitFailed(newProblem: Bool, at now: ContinuousClock.Instant) -> Bool {
        guard newProblem, !settings.degradedAtOpen else { return false }
        if let last = lastStorageError, last.duration(to: now) < Self.storageErrorInterval { return false }
        lastStorageError = now
        storageErrorAnnounced = true
        return true
    }

    // MARK: Status

    /// Whether an `online` status is due, and what it says: at once when `force` (GNSS or
    /// storage state), else when the backlog, losses, storage or refused fixes moved and at
    /// most once per ``Settings/statusInterval``. None after ``finish()``.
    package mutating func status(
        force: Bool, backlog: Int, drops: VehicleStatus.Drops, storage: String?, at now: ContinuousClock.Instant
    ) -> StatusContent? {
        guard !finishing else { return nil }
        let content = StatusContent(
            gnss: gnss, backlog: backlog, drops: drops, storage: storage, implausible: counters.fixesImplausible,
            since: connectedSince)
        if !force {
            guard let last = lastStatus,
                (settings.backlogTriggersStatus && last.backlog != backlog) || last.drops != drops || last.storage != storage
                    || last.implausible != content.implausible
            else { return nil }
            if let at = lastStatusAt, at.duration(to: now) < settings.statusInterval { return nil }
        }
        lastStatus = content
        lastStatusAt = now
        return content
    }

    /// Whether a start or stop may flush now (at most one per ``Settings/minimumFlushGap``).
    private mutating func flushAllowed(at now: ContinuousClock.Instant) -> Bool {
        guard let gap = settings.minimumFlushGap else { return false }
        if let lastFlush, lastFlush.duration(to: now) < gap { return false }
        lastFlush = now
        return true
    }

    // MARK: Lifecycle

    /// The task reading events started; returns whether the publisher is finishing already
    /// (then stop it at once), else keeps `stop` for ``finish()``.
    package mutating func intakeStarted(stop: @escaping @Sendable () -> Void) -> Bool {
        stopIntake = stop
        return finishing
    }

    /// Stop taking events and finish. Idempotent.
    package mutating func finish(at now: ContinuousClock.Instant) -> FinishActions {
        // What waits for its partner goes now, before the intake closes.
        var last = Intake()
        if !finishing { decide(joiner.release(), at: now, &last) }
        finishing = true
        defer { stopIntake = nil }
        return FinishActions(stopIntake: stopIntake, last: last.publish)
    }
}

extension PublisherState: Sendable {}
extension PublisherState.FinishActions: Sendable {}
