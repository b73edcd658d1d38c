import EdgeConfiguration
import EdgeOutbox
import EdgePublisher
import FleetProtocol
import FleetcastCore
import GNSS
import GNSSSources
import Logging
import MQTT
import ServiceLifecycle
import TelemetryHub

/// The agent as a `Service`: GNSS source → hub → publisher → MQTT, for one vehicle.
///
/// `run()` opens the outbox store (asynchronously: a `quick_check` over days of backlog on
/// an SD card suspends the task, it blocks no thread), starts the source through a ``Hub`` (the publisher is its lossless subscriber; others
/// may subscribe for status or tests), connects to the broker with the `offline` status as the
/// last will, and publishes until the source ends (a replay) or a graceful shutdown
/// (SIGTERM/SIGINT through the `ServiceGroup`). Either way it drains the outbox, publishes
/// `offline` with reason `shutdown`, persists `seq` and disconnects, then returns.
public final class AgentService: Service {
    /// The configuration it runs with.
    public let configuration: AgentConfiguration
    /// Fixes and headings from the receiver, for other subscribers than the publisher.
    public let hub: Hub<GNSSEvent>
    private let link: MQTTLink
    private let logger: Logger
    /// A replay is a batch upload: its intake waits for room in the outbox instead of dropping
    /// the oldest fix (a live receiver must never be stalled, a file can wait).
    private let lossless: Bool
    /// A finite source (replay), read by the publisher directly; `nil` for a live receiver.
    private let finiteSource: AnyGNSSSource?
    /// What the publisher publishes and how (it is made in `run()`, over the opened store).
    private let settings: Publisher.Settings
    private let clockSynchronized: @Sendable () -> Bool
    /// systemd's notification socket, when run by systemd with `Type=notify`.
    private let notifier: SystemdNotifier?
    /// Held while the agent exists: says to `check` and to a second agent that this one runs;
    /// `nil` when the state directory cannot hold it (yet: `run()` tries again once the store
    /// has made the directory).
    private let instanceLock: AgentInstanceLock?

    /// Prepares the agent; nothing runs before `run()`, and no file but the instance lock is
    /// opened (the store is opened by `run()`).
    ///
    /// Throws when the source URI cannot be parsed or another agent runs for the vehicle, each
    /// error naming what is wrong.
    /// - Parameter notifier: systemd's notification socket (``SystemdNotifier``), when run by
    ///   systemd: `READY=1` once running, `STOPPING=1` on shutdown, `WATCHDOG=1` while alive.
    public init(
        configuration: AgentConfiguration, agentVersion: String, logger: Logger, notifier: SystemdNotifier? = nil
    ) throws {
        self.notifier = notifier
        var logger = logger
        logger[metadataKey: "vehicle"] = "\(configuration.vehicle)"
        logger[metadataKey: "gnss.source"] = "\(configuration.source)"
        self.configuration = configuration
        self.logger = logger

        let descriptor = try GNSSSourceDescriptor(parsing: configuration.source)
        let source = descriptor.makeSource(uri: configuration.source, logger: logger)
        if case .replay = descriptor {
            // A finite source is pulled by the publisher itself, which waits for room: the file
            // is read only as fast as the broker takes it (memory stays bounded), and the hub
            // is fed by hand with what was read.
            lossless = true
            finiteSource = source
            hub = Hub()
        } else {
            lossless = false
            finiteSource = nil
            hub = Hub(source: source)
        }

        if let file = configuration.broker.passwordFile, FilePermissions.isReadableByOthers(file) {
            logger.warning(
                "The broker password file can be read by every user of this machine; make it readable by the agent only (chmod 0640, group fleetcast, or 0600)",
                metadata: ["file": "\(file)"])
        }
        // Before the store is opened: a second agent must not touch the first one's store.
        // A missing state directory is made by the store; the lock is taken again after it.
        instanceLock = try Self.lock(configuration)
        let mqtt = configuration.mqttConfiguration
        var settings = configuration.publisherSettings(agentVersion: agentVersion, lossless: lossless)
        // A live receiver's fix times are checked against a synchronized system clock; a
        // replay's are a recording's own (old), the simulator's are the system clock's.
        switch descriptor {
        case .serial, .gpsd:
            settings.maximumFixClockOffset = configuration.fixTime.maxOffsetSeconds.map { .seconds($0) }
        case .replay, .simulator:
            settings.maximumFixClockOffset = nil
        }
        let clockSynchronized: @Sendable () -> Bool =
            switch configuration.fixTime.systemClock {
            case .auto: SystemClockSynchronization.isSynchronized
            case .synchronized: { true }
            }
        link = MQTTLink(configuration: mqtt, messageExpirySeconds: configuration.messageExpirySeconds, logger: logger)
        self.settings = settings
        self.clockSynchronized = clockSynchronized
    }

    /// Says what the agent is doing, and whether fix times can be checked against the clock.
    private func logStart(outboxPath: String) {
        // One line that says what the agent is doing (the source and vehicle are also in
        // every line's metadata).
        let broker = configuration.broker
        let tls = configuration.usesTLS
        var metadata: Logger.Metadata = [
            "agent.version": "\(settings.agentVersion ?? "")", "gnss.source": "\(settings.sourceURI ?? configuration.source)",
            "mqtt.broker": "\(broker.url)", "mqtt.tls": "\(tls ? "on" : "off")", "outbox.path": "\(outboxPath)",
        ]
        if let user = broker.username { metadata["mqtt.user"] = "\(user)" }
        logger.info("fleetcast-agent starting", metadata: metadata)
        if settings.maximumFixClockOffset != nil, configuration.fixTime.systemClock == .auto {
            switch SystemClockSynchronization.read() {
            case .synchronized:
                logger.debug("System clock synchronized: fixes far from it are refused")
            case .unsynchronized:
                logger.debug("System clock not synchronized: fixes pass until it is")
            case .unreadable(let reason):
                logger.warning(
                    "Cannot tell whether the system clock is synchronized; fix times are not checked against it (a ProtectClock=yes unit blocks adjtimex)",
                    metadata: ["error": "adjtimex: \(reason)"])
            }
        }
    }

    /// The agent's instance lock; `nil` when the state directory cannot hold it.
    private static func lock(_ configuration: AgentConfiguration) throws -> AgentInstanceLock? {
        switch AgentInstanceLock.acquire(directory: configuration.stateDirectory, vehicle: configuration.vehicle) {
        case .acquired(let lock): return lock
        case .heldByAnother(let path): throw AgentAlreadyRunning(vehicle: configuration.vehicle, path: path)
        case .refused(let path, let reason): throw AgentLockFileRefused(path: path, reason: reason)
        case .unavailable: return nil
        }
    }

    /// Runs until the source ends or a graceful shutdown; see the type's documentation.
    /// Throws when the broker refuses the agent for a reason retrying cannot fix (TLS trust,
    /// credentials, authorisation), after publishing what it could.
    public func run() async throws {
        let store = await OutboxStore.open(
            directory: configuration.stateDirectory, vehicle: configuration.vehicle, logger: logger)
        // Kept until the end of the run: the lock taken once the store made the directory.
        let lateLock: AgentInstanceLock?
        do {
            lateLock = instanceLock == nil ? try Self.lock(configuration) : nil
        } catch {
            await store.close()
            throw error
        }
        defer { withExtendedLifetime(lateLock) {} }
        let outboxPath =
            store.degradedReason == nil
            ? OutboxStore.path(directory: configuration.stateDirectory, vehicle: configuration.vehicle) : "memory"
        let publisher = Publisher(
            settings: settings, sender: link, store: store, logger: logger, clockSynchronized: clockSynchronized)
        // Not connected yet: nothing goes live before the first connection, its status first.
        publisher.link(connected: false)
        logStart(outboxPath: outboxPath)
        let events = FiniteOrLive(finite: finiteSource, hub: hub)
        // The configuration is loaded, the store open and the source started (the hub starts
        // it for its first subscriber): ready, as far as systemd is concerned.
        notifier?.notify("READY=1\nSTATUS=publishing \(configuration.vehicle) to \(configuration.broker.url)")
        let will = publisher.lastWill  // the retained `offline` status
        let mqttWill = MQTTWill(
            topic: will.topic, payload: will.payload, qos: will.qos, retain: will.retain)
        let failure = await runTogether(publisher: publisher, events: events, will: mqttWill)
        await stop(publisher: publisher, store: store)
        if let failure { throw failure }
    }

    /// Connects, publishes and pets the watchdog side by side, as a ServiceGroup
    /// (``BrokerLinkService``, ``PublishingService``, ``WatchdogService``), until the publisher
    /// finishes; returns what ended the run, if it was an error.
    private func runTogether(publisher: Publisher, events: FiniteOrLive, will: MQTTWill) async -> (any Error)? {
        let watchdogInterval = notifier?.watchdogInterval
        let notifier = self.notifier
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(
                service: BrokerLinkService(link: link, will: will, publisher: publisher), successTerminationBehavior: .ignore,
                failureTerminationBehavior: .gracefullyShutdownGroup),
            .init(
                service: PublishingService(
                    publisher: publisher, events: events, endEvents: { events.cancel() },
                    onShutdown: { if watchdogInterval == nil { notifier?.notify(Self.stoppingMessage) } }),
                successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup),
        ]
        if let notifier, let watchdogInterval {
            let pet: @Sendable (StopSignal) async -> Void = { stop in
                await self.petWatchdog(
                    notifier, every: watchdogInterval / 2, publisher: publisher, intake: events.subscription, until: stop)
            }
            services.append(.init(service: WatchdogService(pet: pet), successTerminationBehavior: .ignore))
        }
        do {
            try await ServiceGroup(configuration: .init(services: services, logger: logger)).run()
            return nil
        } catch is CancellationError {
            return nil
        } catch {
            return error
        }
    }

    /// Disconnects, closes the store and says what the run did.
    private func stop(publisher: Publisher, store: OutboxStore) async {
        // The publisher has already waited for its messages (drain, then `offline`, each
        // bounded by `drainTimeout`): nothing is awaited any more, so the flush is short and
        // the whole disconnect is bounded, even when the broker is gone.
        let drainTimeout = publisher.settings.drainTimeout
        if await !link.shutdown(flushTimeout: .seconds(1), timeout: drainTimeout) {
            logger.info("MQTT disconnect not finished in time")
        }
        // The publisher's last commit is made: the store's files are closed (a clean stop
        // leaves one database file, its write-ahead log checkpointed into it).
        await store.close()
        let counters = publisher.counters
        let traffic = link.traffic ?? MQTTTraffic()
        logger.info(
            "agent stopped",
            metadata: [
                "published": "\(counters.published)", "dropped": "\(counters.dropped)",
                "skipped": "\(counters.skippedByPolicy)", "implausible": "\(counters.fixesImplausible)",
                "mqtt.bytesSent": "\(traffic.sent)", "mqtt.bytesReceived": "\(traffic.received)",
            ])
    }
}

extension AgentService {
    static let stoppingMessage = "STOPPING=1\nSTATUS=stopping: sending what is live, then offline"

    /// Sends `WATCHDOG=1` every `period` while the pipeline is alive (``PipelineProbe``), until
    /// `stop` is signalled, the task is cancelled or the publisher finishes, then `STOPPING=1`;
    /// a stall is logged once as a warning (systemd restarts the agent if it lasts
    /// `WatchdogSec`), and its end as a notice.
    private func petWatchdog(
        _ notifier: SystemdNotifier, every period: Duration, publisher: Publisher, intake: HubSubscription<GNSSEvent>?,
        until stop: StopSignal
    ) async {
        var probe = PipelineProbe()
        var stalled: String?
        while !Task.isCancelled, !publisher.isFinishing, !stop.isStopped {
            let problem = probe.check(
                now: .now, publisherActivity: publisher.lastActivity, syncInterval: publisher.settings.syncInterval,
                watchdogInterval: period * 2,
                intake: intake?.statistics, sourceRunning: intake == nil || hub.statistics.isSourceRunning)
            if let problem {
                if stalled == nil {
                    logger.warning(
                        "pipeline stalled; not answering systemd's watchdog, which restarts the agent if it lasts",
                        metadata: [
                            "watchdog.problem": "\(problem)"
                        ])
                }
            } else {
                if stalled != nil { logger.notice("pipeline moving again; answering systemd's watchdog") }
                notifier.notify("WATCHDOG=1")
            }
            stalled = problem
            if await withTimeLimit(period, { await stop.wait() }) != nil { break }
        }
        notifier.notify(Self.stoppingMessage)
    }
}

/// A one-way signal: ``stop()`` once, and every ``wait()`` returns (at once after it).
final class StopSignal: Sendable {
    private struct State {
        var stopped = false
        var waiters = Waiters<Waiter<Void>>()
    }
    private let state = SanitizerVisibleMutex(State())

    /// Whether ``stop()`` was called.
    var isStopped: Bool { state.withLock { $0.stopped } }

    /// Signals; idempotent.
    func stop() {
        let waiters = state.withLock { state in
            state.stopped = true
            return state.waiters.removeAll()
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once stopped, or when the task is cancelled.
    func wait() async {
        await suspend { waiter in
            state.withLock { state in
                if state.stopped || Task.isCancelled { return false }
                state.waiters.insert(waiter, id: waiter.id)
                return true
            }
        } cancel: { id in
            state.withLock { $0.waiters.remove(id: id) }
        }
    }
}

/// The publisher's event stream: a finite source read directly (its events also fed to the
/// hand-fed hub for other subscribers), or the hub's subscription of a live source.
private struct FiniteOrLive: AsyncSequence, Sendable {
    typealias Element = GNSSEvent
    let finite: AnyGNSSSource?
    let hub: Hub<GNSSEvent>
    let subscription: HubSubscription<GNSSEvent>?

    init(finite: AnyGNSSSource?, hub: Hub<GNSSEvent>) {
        self.finite = finite
        self.hub = hub
        self.subscription = finite == nil ? hub.subscribe(bufferingPolicy: .unbounded) : nil
    }

    /// Ends the stream (graceful shutdown); a finite source stops when its reader is cancelled.
    func cancel() {
        subscription?.cancel()
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        var finite: GNSSEventIterator?
        var live: HubSubscription<GNSSEvent>.Iterator?
        let hub: Hub<GNSSEvent>

        mutating func next() async throws -> GNSSEvent? {
            if finite != nil {
                guard let event = await finite!.next() else { return nil }
                hub.yield(event)
                return event
            }
            return try await live?.next()
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(finite: finite?.makeAsyncIterator(), live: subscription?.makeAsyncIterator(), hub: hub)
    }
}
