import AsyncAlgorithms
import FleetProtocol
import FleetWatch
import FleetcastCore
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
/// It first creates or migrates the schema, then subscribes and writes a batch every
/// ``Options/batchSize`` events or ``Options/flushInterval``, whichever comes first. While
/// PostgreSQL cannot be written to, events wait in the subscriber's bounded buffer
/// (``FleetSubscriber/Options/bufferLimit``) and the batch is retried with backoff; the first
/// failure and the recovery are logged once each, at warning and notice.
///
/// A graceful shutdown (SIGTERM or SIGINT through the ServiceGroup) disconnects from the
/// broker first — in a share group the broker then sends the vehicles' messages to the other
/// recorders — and writes every event already received before it returns. Rows are keyed
/// by `(vehicle, seq)`, so what two recorders both wrote is stored once.
public struct FleetRecorder: Service {
    /// Batching and retrying.
    public struct Options: Sendable {
        /// The most events written in one batch.
        public var batchSize: Int
        /// The longest an event waits before its batch is written.
        public var flushInterval: Duration
        /// Delays between attempts to write a batch PostgreSQL refused or could not take.
        public var backoff: Backoff
        /// The longest one attempt may take before it counts as failed and is retried (the
        /// connection pool waits for a connection without end while the server is unreachable).
        public var attemptTimeout: Duration

        /// Batches of up to 1,000 events, written at least every 200 ms; retries from 250 ms
        /// doubling up to 10 s.
        public init(
            batchSize: Int = 1_000, flushInterval: Duration = .milliseconds(200),
            backoff: Backoff = Backoff(initial: .milliseconds(250), maximum: .seconds(10)), attemptTimeout: Duration = .seconds(15)
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
    /// graceful shutdown (returns once everything received is written), the subscription
    /// fails (throws) or the task is cancelled (throws `CancellationError`; what was received
    /// and not yet written is lost, and logged).
    public func run() async throws {
        do {
            // A stop while PostgreSQL is still unreachable ends the wait: nothing was received.
            try await cancelWhenGracefulShutdown { [self] in
                try await retrying("migrate the track schema") { try await store.migrate() }
            }
        } catch is CancellationError where Task.isShuttingDownGracefully {
            logger.info("Recorder stopped before PostgreSQL could be reached; nothing was received")
            return
        }
        logger.info(
            "Recording the fleet into PostgreSQL",
            metadata: ["mqtt.filters": "\(subscriber.filters)", "batch.size": "\(options.batchSize)"])
        var written = 0
        var received = 0
        var skipped: [TrackRecord.Skip: Int] = [:]
        var malformed = 0
        let batches = subscriber.events().chunks(ofCount: options.batchSize, or: .repeating(every: options.flushInterval))
        for try await events in batches {
            var records: [TrackRecord] = []
            records.reserveCapacity(events.count)
            for event in events {
                switch TrackRecord.from(event) {
                case .success(let record): records.append(record)
                case .failure(.notAPosition):
                    // A malformed message is counted and named once; a status is simply not history.
                    guard case .malformed(let topic, let reason) = event else { break }
                    malformed += 1
                    if malformed == 1 {
                        logger.warning(
                            "A malformed message cannot be recorded; such messages are counted and skipped",
                            metadata: ["mqtt.topic": "\(topic)", "reason": "\(reason)"])
                    }
                case .failure(let skip):
                    skipped[skip, default: 0] += 1
                    if skipped[skip] == 1 {
                        logger.warning(
                            "A message cannot be recorded; such messages are counted and skipped",
                            metadata: ["vehicle": "\(event.vehicle?.rawValue ?? "")", "reason": "\(skip)"])
                    }
                }
            }
            guard !records.isEmpty else { continue }
            received += records.count
            do {
                written += try await retrying("write \(records.count) rows") { [records] in try await store.insert(records) }
            } catch {
                // The failure itself is the caller's to report (the task was cancelled).
                logger.warning("Rows received but not written", metadata: ["rows": "\(records.count)"])
                throw error
            }
            logger.trace("Batch written", metadata: ["rows": "\(records.count)"])
        }
        logger.info(
            "Recorder stopped; everything received is written",
            metadata: [
                "rows.received": "\(received)", "rows.new": "\(written)", "rows.duplicate": "\(received - written)",
                "messages.skipped": "\(skipped.values.reduce(0, +))", "messages.malformed": "\(malformed)",
            ])
    }

    /// Runs `operation` until it succeeds, waiting ``Options/backoff`` between attempts;
    /// logs the first failure (warning) and the recovery (notice), each once. Throws
    /// `CancellationError` when the task is cancelled, and ``TrackStore/NewerSchema`` at once
    /// (retrying cannot mend it).
    private func retrying<T: Sendable>(_ what: String, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        var backoff = options.backoff
        var failures = 0
        while true {
            do {
                guard let value = try await withTimeLimit(options.attemptTimeout, operation) else {
                    throw NoAnswer(limit: options.attemptTimeout)
                }
                if failures > 0 {
                    logger.notice("PostgreSQL is back", metadata: ["attempts": "\(failures + 1)", "postgres.task": "\(what)"])
                }
                return value
            } catch let error as TrackStore.NewerSchema {
                throw error
            } catch {
                try Task.checkCancellation()
                failures += 1
                if failures == 1 {
                    logger.warning(
                        "PostgreSQL cannot be written to; retrying, and events wait in memory",
                        metadata: ["postgres.task": "\(what)", "error": "\(describePostgresError(error))"])
                }
                try await Task.sleep(for: backoff.next())
            }
        }
    }
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
    guard let error = error as? PSQLError else { return "\(error)" }
    var parts = ["\(error.code)"]
    if let state = error.serverInfo?[.sqlState] { parts.append("SQLSTATE \(state)") }
    if let message = error.serverInfo?[.message] { parts.append(message) }
    if let underlying = error.underlying { parts.append("\(underlying)") }
    return parts.joined(separator: ": ")
}
