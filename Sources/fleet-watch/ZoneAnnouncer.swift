import FleetHistory
import FleetOperations
import FleetWatch
import FleetcastCore
import Logging
import MQTT
import ServiceLifecycle

/// Publishes the zone events `record` stores, as they happen: one message an event on
/// `{topic}/{vehicle}`, QoS 1, not retained, the payload `zone-events`' JSON line with `v`
/// (docs/operations.md). Its own connection (the recorder's user with `-pub`, as a bridge's),
/// so that the recorder's persistent session only reads. The events are in PostgreSQL already:
/// one the broker refuses or that cannot wait (more than 10,000 waiting) is logged, not retried.
/// Stopped after the recorder: it sends what the recorder's last batch announced first.
final class ZoneAnnouncer: Service, Sendable {
    let configuration: MQTTConfiguration
    let topic: String
    let logger: Logger
    private let events: AsyncStream<StoredZoneEvent>
    private let intake: AsyncStream<StoredZoneEvent>.Continuation
    /// Events waiting, and whether this episode of drops (until the queue is empty) was said.
    private let backlog = SanitizerVisibleMutex((waiting: 0, dropsSaid: false))

    init(subscribing: MQTTConfiguration, topic: String, logger: Logger) {
        var publishing = subscribing
        publishing.clientID += "-pub"
        if let user = subscribing.username ?? subscribing.broker.username { publishing.username = user + "-pub" }
        // Only publishes: none of the recorder's receiving (a persistent session acknowledged
        // after handling, whose unhandled-bytes budget would hold this client's reading back).
        publishing.session = .clean
        publishing.receiveMaximum = nil
        publishing.acknowledgement = .onReceipt
        publishing.receiveBudgetBytes = nil
        configuration = publishing
        self.topic = topic
        self.logger = logger
        (events, intake) = AsyncStream.makeStream(of: StoredZoneEvent.self, bufferingPolicy: .bufferingNewest(10_000))
    }

    /// Queues `new` for publishing (never waits). Drops are said once per episode (until the
    /// queue has emptied), with how many there were so far.
    func announce(_ new: [StoredZoneEvent]) {
        var dropped = 0
        for event in new {
            if case .dropped = intake.yield(event) { dropped += 1 }
        }
        let say = backlog.withLock { state in
            state.waiting += new.count - dropped
            guard dropped > 0, !state.dropsSaid else { return false }
            state.dropsSaid = true
            return true
        }
        if say {
            logger.warning(
                "Zone events come faster than the broker takes them; the oldest waiting are not published (said once until the queue empties)",
                metadata: ["events.dropped": "\(dropped)"])
        }
    }

    func run() async throws {
        let client: MQTTClient
        do {
            guard
                let reached = try await reachedUnlessStopped(
                    logger: logger, stopped: "Zone events not published: the recorder stopped before the broker could be reached",
                    { [configuration, logger] in try await MQTTClient.connectRetrying(configuration: configuration, logger: logger) })
            else { return }
            client = reached
        } catch {
            logger.error(
                "Zone events cannot be published (the recorder goes on; they are stored): check the broker's ACL and the -pub user",
                metadata: ["mqtt.topic": "\(topic)/+", "error": "\(error)"])
            return
        }
        logger.info("Publishing zone events", metadata: ["mqtt.topic": "\(topic)/+"])
        var published = 0
        var unconfirmed = 0
        var failuresSaid = false
        await withGracefulShutdownHandler {
            for await event in events {
                backlog.withLock { state in
                    state.waiting = max(0, state.waiting - 1)
                    if state.waiting == 0 { state.dropsSaid = false }
                }
                let topic = "\(self.topic)/\(event.vehicle)"
                do {
                    // A stop does not wait for a broker that is away: the message is handed to
                    // libmosquitto, and the shutdown below flushes what it can for 2 s.
                    try await cancelWhenGracefulShutdown {
                        try await client.publish(
                            topic: topic, string: OperationsOutput.zoneEventJSON(event, version: true), qos: .atLeastOnce)
                    }
                    published += 1
                } catch is CancellationError {
                    // Stopping: handed to libmosquitto, flushed by the shutdown below if it can be.
                    unconfirmed += 1
                } catch {
                    if !failuresSaid {
                        logger.warning(
                            "A zone event could not be published (it is stored); such failures are not said again",
                            metadata: ["mqtt.topic": "\(topic)", "error": "\(error)"])
                        failuresSaid = true
                    }
                }
            }
        } onGracefulShutdown: { [intake] in
            intake.finish()
        }
        await client.shutdown(flushTimeout: .seconds(2))
        logger.info("Zone events published", metadata: ["events": "\(published)", "events.unconfirmed": "\(unconfirmed)"])
    }
}
