import AsyncAlgorithms
import FleetCore
import FleetHistoryCore
import FleetOperations
import FleetProtocol
import FleetWatch
import FleetcastCore
import Foundation
import GNSS
import JSONEscaping
import Logging
import PostgresNIO
import ServiceLifecycle

/// `fleet-watch record`: every fix and heading of the fleet, live and backlog, into
/// PostgreSQL (``TrackStore``), in batches.
///
/// ```swift
/// let client = PostgresClient(configuration: location.clientConfiguration, backgroundLogger: logger)
/// let recorder = FleetRecorder(subscriber: subscriber, store: TrackStore(client: client, logger: logger), logger: logger)
/// try await ServiceGroup(services: [client, recorder], gracefulShutdownSignals: [.sigterm], logger: logger).run()
/// ```
///
/// It first creates or migrates the schema, then subscribes (``FleetSubscriber/deliveries()``)
/// and writes a batch every ``Options/batchSize`` messages or ``Options/flushInterval``,
/// whichever comes first, and only once a batch is committed tells the broker it has the
/// messages. With a configuration that acknowledges after handling and a persistent
/// session (what `fleet-watch record` uses), a recorder killed at any moment loses nothing:
/// the broker sends again what it had not acknowledged, and keeps what arrives while it is
/// away. While PostgreSQL cannot be written to, the batch is retried with backoff and
/// nothing more is taken from the broker (beyond the receive maximum already sent), which
/// holds the rest in the session; the first failure and the recovery are logged once each,
/// at warning and notice.
///
/// A graceful shutdown (SIGTERM or SIGINT through the ServiceGroup) stops taking messages —
/// in a share group it unsubscribes first, so the broker sends the vehicles' messages to the
/// other recorders — and writes every message already received before it returns. Rows are
/// keyed by `(vehicle, run, seq)`, so what two recorders both wrote, or what the broker
/// delivered twice, is stored once.
public struct FleetRecorder: Service {
    /// Batching and retrying.
    public struct Options: Sendable {
        /// The most messages written in one batch.
        public var batchSize: Int
        /// The longest an event waits before its batch is written.
        public var flushInterval: Duration
        /// Delays between attempts to write a batch PostgreSQL refused or could not take.
        public var backoff: Backoff
        /// The longest one attempt may take before it counts as failed and is retried (the
        /// connection pool waits for a connection without end while the server is unreachable).
        public var attemptTimeout: Duration
        /// The most rows one write carries (one transaction, one attempt): a batch of messages
        /// is written in parts of this size, each acknowledged to the broker as it commits. A
        /// message may carry 2,048 events, so a bound in messages alone is none.
        public var maximumRowsPerWrite: Int = 10_000
        /// How long history is kept: partitions of days past it are dropped at start and then
        /// daily, and messages older than it are not stored (counted, and said once).
        public var retention: HistoryRetention = .forever
        /// Rows moved per statement from the tables of schema 3 into the partitions.
        public var moveChunk: Int = 50_000
        /// How long a write failing after a graceful stop began is still retried (8 s of the
        /// 25 s a stop may take): a blip is ridden out, an outage is not waited for (what is
        /// held stays unacknowledged, for the broker to send again at the next start).
        public var stopRetryWindow: Duration = .seconds(8)
        /// Trips, stops and zone events derived as fixes are recorded (`--zones` and the trip
        /// rules), or nothing.
        package var operations: OperationsSettings?

        /// Batches of up to 1,000 messages, written at least every 200 ms; an attempt given 5 s
        /// (a batch takes milliseconds: longer means the server is away, and the outage is
        /// named); retries from 250 ms doubling up to 10 s.
        public init(
            batchSize: Int = 1_000, flushInterval: Duration = .milliseconds(200),
            backoff: Backoff = Backoff(initial: .milliseconds(250), maximum: .seconds(10)), attemptTimeout: Duration = .seconds(5)
        ) {
            self.batchSize = max(1, batchSize)
            self.flushInterval = max(flushInterval, .milliseconds(1))
            self.backoff = backoff
            self.attemptTimeout = max(attemptTimeout, .milliseconds(100))
        }
    }

    /// Where the events come from.
    public let subscriber: FleetSubscriber
    /// Where they go.
    public let store: TrackStore
    /// Batching and retrying.
    public let options: Options
    let logger: Logger

    /// A recorder; nothing connects until ``run()``.
    public init(subscriber: FleetSubscriber, store: TrackStore, options: Options = Options(), logger: Logger) {
        self.subscriber = subscriber
        self.store = store
        self.options = options
        self.logger = logger
    }

    /// Migrates the schema (retrying while PostgreSQL is unreachable), then records until a
    /// graceful shutdown (returns once everything received is written, or, when PostgreSQL
    /// cannot be written to, once ``Options/stopRetryWindow`` has passed: what is held is left
    /// unacknowledged, and the summary says so), the subscription fails (throws) or the task
    /// is cancelled (throws `CancellationError`; what was not yet written stays unacknowledged).
    public func run() async throws {
        // A stop while PostgreSQL is still unreachable ends the wait: nothing was received.
        let stopped: Logger.Message = "Recorder stopped before PostgreSQL could be reached; nothing was received"
        let reached: Void?
        do {
            reached = try await reachedUnlessStopped(logger: logger, stopped: stopped) { [self] in
                // Reached first within the attempt limit (an outage is named once); the migration
                // itself may rebuild a big table's key, and gets an hour.
                try await retrying("reach PostgreSQL") { try await store.ping() }
                _ = try await retrying("migrate the track schema", limit: .seconds(3600), leavingBehind: false) {
                    try await store.migrate()
                }
                try await maintainPartitions()
            }
        } catch is StoppedUnwritten {
            logger.info(stopped)
            return
        }
        guard reached != nil else { return }
        logger.info(
            "Recording the fleet into PostgreSQL",
            metadata: [
                "mqtt.filters": "\(subscriber.filters)", "batch.size": "\(options.batchSize)", "retention": "\(options.retention)",
            ])
        try await withThrowingTaskGroup(of: Void.self) { group in
            // Beside the recording: the rows of schema 3 moved into partitions, then the daily
            // maintenance. Cancelled when the recording ends.
            group.addTask { [self] in try await moveUnpartitionedRows() }
            group.addTask { [self] in try await maintainDaily() }
            defer { group.cancelAll() }
            try await record()
        }
    }

    /// Takes the fleet's messages and writes them, until a graceful shutdown or an error.
    private func record() async throws {
        var written = 0
        var received = 0
        var skipped: [TrackRecord.Skip: Int] = [:]
        var malformed = MalformedMessageReport()
        var said = RecorderWarnings()
        var setAside = (messages: 0, rows: 0)
        /// Messages neither stored nor newly set aside (the quarantine held them already, or was full).
        var notKept = 0
        /// Rows held when a stop came during an outage: not acknowledged (``StoppedUnwritten``).
        var unwrittenRows = 0
        var operations = options.operations.map { RecorderOperations(settings: $0, store: store, logger: logger) }
        var toDerive: [TrackRecord] = []
        /// A step run once within `limit` (a rebuild: never retried).
        let bounded: (Duration, @escaping @Sendable () async throws -> [StoredZoneEvent]) async throws -> [StoredZoneEvent] = {
            limit, step in
            guard let events = try await withTimeLimit(limit, step) else { throw NoAnswer(limit: limit) }
            return events
        }
        /// Sets `delivery` aside (``TrackStore/setAside(vehicle:topic:payload:reason:rows:)``),
        /// names it once per vehicle at warning; the caller acknowledges it with its batch.
        func quarantine(_ delivery: FleetDelivery, reason: String, rows: Int) async throws {
            let vehicle = delivery.vehicle?.rawValue ?? ""
            let added: Bool
            do {
                added = try await retrying("set a message aside", poison: true) { [store] in
                    try await store.setAside(vehicle: vehicle, topic: delivery.topic, payload: delivery.payload, reason: reason, rows: rows)
                }
            } catch let stop as StoppedUnwritten {
                // Not acknowledged either: counted with what the stop left unwritten.
                unwrittenRows += rows
                throw stop
            } catch let failure as PoisonWrite {
                notKept += 1
                logger.error(
                    "A message that could not be stored could not be set aside either; it is dropped",
                    metadata: ["vehicle": "\(vehicle)", "mqtt.topic": "\(JSONString.escaped(delivery.topic))", "error": "\(failure)"])
                return
            }
            // Not added: the quarantine holds this message already, or its vehicle's share is full.
            guard added else {
                notKept += 1
                if said.first("not kept", vehicle) {
                    logger.warning(
                        "A message cannot be stored and is not set aside again: the quarantine holds it already, or holds this vehicle's most",
                        metadata: ["vehicle": "\(vehicle)", "mqtt.topic": "\(JSONString.escaped(delivery.topic))", "rows": "\(rows)"])
                }
                return
            }
            setAside.messages += 1
            setAside.rows += rows
            if said.first("set aside", vehicle) {
                logger.warning(
                    "A message cannot be stored; it is set aside in fleetcast_quarantine, and the others go on",
                    metadata: [
                        "vehicle": "\(vehicle)", "mqtt.topic": "\(JSONString.escaped(delivery.topic))",
                        "reason": "\(JSONString.escaped(reason))", "rows": "\(rows)",
                    ])
            }
        }
        /// Writes `records` (`owners[i]`: the index in `deliveries` of record i's message),
        /// retrying while PostgreSQL is unreachable; the caller then acknowledges. A write
        /// PostgreSQL refuses for another reason is tried again in two halves, cut between
        /// messages, down to one message, which is then set aside.
        func write(_ records: ArraySlice<TrackRecord>, owners: ArraySlice<Int>, of deliveries: [FleetDelivery]) async throws {
            let outcome: TrackStore.WriteOutcome
            do {
                outcome = try await retrying("write \(records.count) rows", poison: true) { [store, part = Array(records)] in
                    try await store.write(part)
                }
            } catch let failure as PoisonWrite {
                guard let first = owners.first, let last = owners.last else { return }
                guard first != last else {
                    try await quarantine(deliveries[first], reason: failure.description, rows: records.count)
                    return
                }
                // The cut between two messages nearest the middle.
                let middle = owners.startIndex + owners.count / 2
                var cut = middle
                while cut > owners.startIndex && owners[cut - 1] == owners[middle] { cut -= 1 }
                if cut == owners.startIndex {
                    cut = middle
                    while cut < owners.endIndex && owners[cut] == owners[middle] { cut += 1 }
                }
                try await write(records[..<cut], owners: owners[..<cut], of: deliveries)
                try await write(records[cut...], owners: owners[cut...], of: deliveries)
                return
            } catch let stop as StoppedUnwritten {
                // Said once, in the stop's summary.
                unwrittenRows += records.count
                throw stop
            } catch {
                // Not acknowledged: the broker sends them again to the next recorder of the session.
                logger.warning("Rows received but not written; the broker keeps them", metadata: ["rows": "\(records.count)"])
                throw error
            }
            written += outcome.new
            logger.trace("Batch written", metadata: ["rows": "\(records.count)"])
            var stored: [TrackRecord] = []
            stored.reserveCapacity(records.count - outcome.refused.count)
            var overBudget: [Int: Int] = [:]
            for (offset, record) in zip(records.indices, records) {
                guard let verdict = outcome.refused[offset - records.startIndex] else {
                    stored.append(record)
                    continue
                }
                sayRefusal(verdict, vehicle: record.vehicle.rawValue, said: &said)
                if verdict == .overVehicleBudget { overBudget[owners[offset], default: 0] += 1 }
            }
            // A vehicle's days past its budget of new partitions: kept to be replayed later.
            for (owner, rows) in overBudget.sorted(by: { $0.key < $1.key }) {
                try await quarantine(
                    deliveries[owner],
                    reason: "its vehicle made \(HistoryAdmission.newPartitionsPerVehiclePerDay) new daily partitions within a day",
                    rows: rows)
            }
            // Derived once the batch is acknowledged (``deriveOperations()``), off the write's path.
            if operations != nil { toDerive += stored }
        }
        /// Committed and acknowledged: what the fixes close is derived from what is now stored
        /// (bounded per vehicle: RecorderOperations).
        func deriveOperations() async throws {
            guard !toDerive.isEmpty else { return }
            let records = toDerive
            toDerive.removeAll(keepingCapacity: true)
            // Awaited, never left behind: what an abandoned attempt stored would go unannounced.
            try await operations?.process(records, retrying: { try await retrying($0, leavingBehind: false, $1) }, bounded: bounded)
        }
        let batches = subscriber.deliveries().chunks(ofCount: options.batchSize, or: .repeating(every: options.flushInterval))
        var unwritten: StoppedUnwritten?
        do {
            for try await deliveries in batches {
                var records: [TrackRecord] = []
                var owners: [Int] = []
                records.reserveCapacity(min(deliveries.count, options.maximumRowsPerWrite))
                // Round-robin by vehicle: one vehicle's thousand messages do not go before another's one.
                var prefix = WrittenPrefix(count: deliveries.count)
                var inWrite: [Int] = []
                for index in FairBatchOrder.roundRobin(deliveries.map { $0.vehicle?.rawValue ?? "" }) {
                    let delivery = deliveries[index]
                    inWrite.append(index)
                    // Decoded one message at a time: what is held is bytes, and one write's rows.
                    for event in delivery.events {
                        switch TrackRecord.from(event) {
                        case .success(let record):
                            records.append(record)
                            owners.append(index)
                        case .failure(.notAPosition):
                            // A malformed or implausible message is counted and named once per
                            // vehicle; a status is simply not history.
                            malformed.note(event, topics: subscriber.options.topics, logger: logger)
                        case .failure(let skip):
                            skipped[skip, default: 0] += 1
                            if skipped[skip] == 1 {
                                logger.warning(
                                    "A message cannot be recorded; such messages are counted and skipped",
                                    metadata: ["vehicle": "\(event.vehicle?.rawValue ?? "")", "reason": "\(skip)"])
                            }
                        }
                    }
                    if records.count >= options.maximumRowsPerWrite {
                        // A part of the batch, committed: the broker may forget what of the batch's
                        // start is now all written.
                        received += records.count
                        try await write(records[...], owners: owners[...], of: deliveries)
                        records.removeAll(keepingCapacity: true)
                        owners.removeAll(keepingCapacity: true)
                        if let through = prefix.markWritten(inWrite) { deliveries[through].acknowledge() }
                        inWrite.removeAll(keepingCapacity: true)
                        try await deriveOperations()
                    }
                }
                if !records.isEmpty {
                    received += records.count
                    try await write(records[...], owners: owners[...], of: deliveries)
                }
                // Committed (or nothing to keep): the broker may forget these messages now.
                deliveries.last?.acknowledge()
                try await deriveOperations()
            }
            try await operations?.finish(bounded: bounded)
        } catch let stop as StoppedUnwritten {
            // Not acknowledged: the broker sends what was held to the next start of this session.
            unwritten = stop
        }
        let refused = store.refusals.total
        var summary: Logger.Metadata = [
            "rows.received": "\(received)", "rows.new": "\(written)",
            "rows.duplicate": "\(max(0, received - written - refused - setAside.rows - unwrittenRows))", "rows.refused": "\(refused)",
            "messages.set_aside": "\(setAside.messages)", "rows.set_aside": "\(setAside.rows)",
            "messages.not_kept": "\(notKept)",
            "messages.skipped": "\(skipped.values.reduce(0, +))", "messages.malformed": "\(malformed.count)",
        ]
        if let unwritten {
            summary["rows.unwritten"] = "\(unwrittenRows)"
            summary["postgres.task"] = "\(unwritten.task)"
            logger.warning(
                "Recorder stopped while PostgreSQL could not be written to; what it held is not acknowledged, and the broker sends it again at the next start",
                metadata: summary)
        } else {
            logger.info("Recorder stopped; everything received is written", metadata: summary)
        }
        if let operations {
            logger.info(
                "Trips, stops and zone events derived",
                metadata: [
                    "segments.stored": "\(operations.stored.segments)", "zone_events.new": "\(operations.stored.zoneEvents)",
                    "vehicles.rebuilt": "\(operations.stored.rebuilds)", "fixes.not_derived": "\(operations.ignored)",
                    "zone_events.unannounced": "\(operations.unannounced)", "rebuilds.abandoned": "\(operations.abandoned)",
                ])
        }
    }

    /// Names each kind of refusal the first time it happens to each vehicle (a warning: these
    /// messages are not stored; see ``RecorderWarnings``), and counts the rest into the final
    /// summary.
    private func sayRefusal(_ verdict: HistoryAdmission.Verdict, vehicle: String, said: inout RecorderWarnings) {
        let message: String
        switch verdict {
        case .stored: return
        case .olderThanRetention: message = "Messages older than the retention keeps are not stored; such messages are counted"
        case .olderThanHorizon:
            message =
                "Messages timed more than 3650 days before this recorder's clock are not stored while history is kept for ever; such messages are counted"
        case .aheadOfClock: message = "Messages timed days ahead of this recorder's clock are not stored; such messages are counted"
        case .noPartition: message = "Messages of a day that can have no partition are not stored; such messages are counted"
        case .overVehicleBudget:
            message = "A vehicle made its new daily partitions of the day; its messages of further days are set aside"
        }
        guard said.first("\(verdict)", vehicle) else { return }
        logger.warning(
            "\(message)",
            metadata: [
                "vehicle": "\(vehicle)", "retention": "\(options.retention)",
                "retention.kept_from": "\(store.keptFrom.map(\.description) ?? "-")",
                "partitions.maximum": "\(TrackStore.maximumPartitions)",
                "partitions.per_vehicle_per_day": "\(HistoryAdmission.newPartitionsPerVehiclePerDay)",
            ])
    }

    /// Makes the partitions of the days ahead and applies the retention, saying what it
    /// dropped, once.
    private func maintainPartitions() async throws {
        try await retrying("make partitions") { try await store.preparePartitions(now: store.now()) }
        let dropped = try await retrying("apply the retention", limit: .seconds(600)) {
            try await store.applyRetention(options.retention, now: store.now())
        }
        if let keptFrom = store.keptFrom {
            // Trips, stops and zone events go with the days of fixes they came from.
            _ = try await retrying("apply the retention to trips and zone events", limit: .seconds(600)) {
                try await store.deleteOperations(before: keptFrom.start)
            }
        }
        if let first = dropped.first, let last = dropped.last {
            logger.notice(
                "Retention dropped old history, whole days",
                metadata: [
                    "retention": "\(options.retention)", "retention.kept_from": "\(store.keptFrom.map(\.description) ?? "-")",
                    "days.dropped": "\(dropped.count)", "days.first": "\(first)", "days.last": "\(last)",
                ])
        }
    }

    /// Moves the rows the migration to schema 4 left unpartitioned, a few chunks an attempt
    /// (each attempt gets the usual time limit; an outage is retried, and the move goes on where
    /// it was), saying when it begins and when it is done.
    private func moveUnpartitionedRows() async throws {
        let present = try await retrying("look for rows to move") { try await store.unpartitionedTables() }
        guard present.fixes || present.headings else { return }
        logger.notice(
            "Moving the history of schema 3 into daily partitions while recording",
            metadata: ["tables.fixes": "\(present.fixes)", "tables.headings": "\(present.headings)"])
        let clock = ContinuousClock()
        let start = clock.now
        let chunk = options.moveChunk
        var total = TrackStore.RowsMoved()
        // The first attempt also reads the whole table once for its days: an hour for that.
        var limit = Duration.seconds(3600)
        while let moved = try await retrying(
            "move rows into partitions", limit: limit,
            { try await store.moveUnpartitionedRows(chunk: chunk, now: store.now(), maximumChunks: 8) })
        {
            total.moved += moved.moved
            total.discarded += moved.discarded
            limit = .seconds(600)
        }
        logger.notice(
            "History of schema 3 moved into daily partitions",
            metadata: [
                "rows.moved": "\(total.moved)", "rows.discarded": "\(total.discarded)", "duration": "\(clock.now - start)",
            ])
    }

    /// Once a day, a minute after midnight UTC: the partitions of the days ahead, and the
    /// retention. Runs until cancelled.
    private func maintainDaily() async throws {
        while true {
            let now = store.now().millisecondsSince1970
            let next = HistoryDay(store.now()).adding(1).start.millisecondsSince1970 + 60_000
            try await Task.sleep(for: .milliseconds(max(1_000, next - now)))
            try await maintainPartitions()
        }
    }

    /// Runs `operation` until it succeeds, waiting ``Options/backoff`` between attempts;
    /// logs the first failure (warning) and the recovery (notice), each once. Throws
    /// `CancellationError` when the task is cancelled, ``StoppedUnwritten`` when it still fails
    /// ``Options/stopRetryWindow`` into a graceful shutdown (a stop does not wait out an outage), and
    /// ``TrackStore/NewerSchema`` at once (retrying cannot mend it).
    ///
    /// With `poison`, a failure that is not PostgreSQL being unreachable or unable to work
    /// (``isUnavailable(_:)``: a refusal of these rows, which another attempt would meet again)
    /// throws ``PoisonWrite`` at once.
    /// An attempt is given up at its limit even while PostgreSQL holds it unanswered, unless
    /// `leavingBehind` is false (work whose late finish is not harmless: then it is awaited).
    private func retrying<T: Sendable>(
        _ what: String, limit: Duration? = nil, poison: Bool = false, leavingBehind: Bool = true,
        _ operation: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let limit = limit ?? options.attemptTimeout
        var backoff = options.backoff
        var failures = 0
        /// When a failure was first met after a graceful stop began.
        var stoppingSince: ContinuousClock.Instant?
        while true {
            do {
                // A query to a server that stopped answering is not cancelled in flight: it is left
                // behind, and the attempt ends at its limit all the same. Every write is idempotent
                // (what the abandoned attempt still commits, the next finds), and a stop ends the wait.
                let attempt =
                    leavingBehind ? try await withTimeLimitLeavingBehind(limit, operation) : try await withTimeLimit(limit, operation)
                guard let value = attempt else {
                    throw NoAnswer(limit: limit)
                }
                if failures > 0 {
                    logger.notice("PostgreSQL is back", metadata: ["attempts": "\(failures + 1)", "postgres.task": "\(what)"])
                }
                return value
            } catch let error as TrackStore.NewerSchema {
                throw error
            } catch {
                try Task.checkCancellation()
                if poison && !isUnavailable(error) {
                    if failures > 0 {
                        logger.notice("PostgreSQL is back", metadata: ["attempts": "\(failures + 1)", "postgres.task": "\(what)"])
                    }
                    throw PoisonWrite(error: describePostgresError(error))
                }
                failures += 1
                if failures == 1 {
                    logger.warning(
                        "PostgreSQL cannot be written to; retrying, and events wait in memory",
                        metadata: ["postgres.task": "\(what)", "error": "\(describePostgresError(error))"])
                }
                // A stop does not wait for an outage to end: past ``Options/stopRetryWindow`` what
                // is held, never acknowledged, is left for the broker to send at the next start.
                let delay = backoff.next()
                if Task.isShuttingDownGracefully {
                    let since = stoppingSince ?? .now
                    stoppingSince = since
                    guard ContinuousClock.now + delay < since + options.stopRetryWindow else { throw StoppedUnwritten(task: what) }
                    try await Task.sleep(for: delay)
                } else {
                    // The wait ends early at a stop; the next attempt is then within the window.
                    _ = try? await cancelWhenGracefulShutdown { try await Task.sleep(for: delay) }
                    try Task.checkCancellation()
                }
            }
        }
    }
}

/// A graceful stop that came while PostgreSQL could not be written to: what the recorder held
/// is left unacknowledged, for the broker to send again at the next start.
struct StoppedUnwritten: Error, CustomStringConvertible {
    /// What was being retried.
    let task: String
    var description: String { "stopped while PostgreSQL could not \(task)" }
}

/// A write PostgreSQL refused for a reason of its rows (not its being unreachable): tried
/// again in smaller parts, and what still fails is set aside.
struct PoisonWrite: Error, CustomStringConvertible {
    let error: String
    var description: String { error }
}

/// Whether `error` is PostgreSQL being unreachable or unable to work now (wait and try again:
/// nothing is set aside for that), rather than a refusal of what was written. Without a
/// SQLSTATE (no connection, no answer in time, a closed connection) it is; with one, the
/// classes of the server's condition are: connection exceptions (08), insufficient resources
/// (53) but the lock table (53200, which a statement too wide exhausts), operator intervention
/// (57: a shutdown, a restart), system errors (58), transaction rollbacks (40: serialization,
/// deadlock), objects in use or locked (55), configuration (F0), internal errors (XX), a
/// read-only standby (25006), and missing privileges or tables (42501, 42P01: a database being
/// set up).
func isUnavailable(_ error: any Error) -> Bool {
    if let error = error as? PostgresTransactionError {
        guard let inner = error.closureError ?? error.beginError ?? error.commitError ?? error.rollbackError else { return true }
        return isUnavailable(inner)
    }
    guard let error = error as? PSQLError, let state = error.serverInfo?[.sqlState] else { return true }
    if state.hasPrefix("53") { return state != "53200" }
    return ["08", "57", "58", "40", "55", "F0", "XX"].contains(where: { state.hasPrefix($0) })
        || ["25006", "42501", "42P01"].contains(state)
}

/// An attempt PostgreSQL did not answer in time (unreachable: the pool is still trying to
/// connect; or overloaded).
struct NoAnswer: Error, CustomStringConvertible {
    let limit: Duration
    var description: String { "no answer from PostgreSQL within \(limit) (unreachable, or too slow)" }
}

/// A PostgreSQL error in one line for the log: its code, SQLSTATE, the server's message and
/// the underlying cause. postgres-nio's own `description` says nothing (so as never to leak
/// data), and its `String(reflecting:)` includes the whole query with its bound values — a
/// batch's thousands of rows.
public func describePostgresError(_ error: any Error) -> String {
    if let error = error as? PostgresTransactionError,
        let inner = error.closureError ?? error.beginError ?? error.commitError ?? error.rollbackError
    {
        return describePostgresError(inner)
    }
    guard let error = error as? PSQLError else { return "\(error)" }
    var parts = ["\(error.code)"]
    if let state = error.serverInfo?[.sqlState] { parts.append("SQLSTATE \(state)") }
    if let message = error.serverInfo?[.message] { parts.append(message) }
    if let underlying = error.underlying { parts.append("\(underlying)") }
    return parts.joined(separator: ": ")
}
