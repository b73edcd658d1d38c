import FleetCore
import FleetProtocol
import FleetWatch
import Logging
import MQTT
import ServiceLifecycle

/// Republishes the fleet's topics in another application's format: subscribes with a
/// ``FleetSubscriber``, turns each event into messages with a ``FleetBridgeTranslator``
/// (``HomeAssistantTranslator``, ``OwnTracksTranslator``) and publishes them through one
/// ``MQTTClient``, with up to the connection's `maxInflightMessages` awaiting the broker's
/// acknowledgement at once (one round trip per window, not per message).
///
/// One task reads and translates every event as it comes, so the subscription's buffer does
/// not fill behind a slow broker; another publishes. Between them (``BridgeQueueState``) each
/// vehicle has at most one unpublished message per topic: while one waits, a newer one for the
/// same topic replaces it (only the newest matters to a retained topic; a position older than
/// one already taken, by fix time then `seq`, is never published), and the publisher takes
/// one message per vehicle in turn, so a vehicle flooding the bridge delays another's by one
/// round at most. At most ``BridgeQueueLimits/maximumVehicles`` vehicles are bridged; the
/// events of newer ones are dropped and warned about once per episode (60 s without drops end
/// one), with a count.
///
/// ```swift
/// let bridge = FleetBridge(subscriber: subscriber, translator: try OwnTracksTranslator(user: "acme"), logger: logger)
/// try await bridge.run()
/// ```
///
/// It never feeds on its own output: it subscribes to the fleet's filters only, and a message
/// whose topic those filters match is never published (the first is logged as a
/// configuration error). A publish the broker refuses for good (its ACL) is logged and
/// skipped; the bridge goes on with the next. It ends when the subscription ends with an
/// error (which it throws), or when its task is cancelled.
///
/// It is a `Service`: under a ServiceGroup, a graceful shutdown (SIGTERM) unsubscribes first
/// (in a share group the broker then sends the next messages to the other members), takes
/// what was already on its way, publishes the newest message of each topic received and waits
/// for the broker's acknowledgements (QoS ≥ 1) before it disconnects and returns.
public struct FleetBridge<Translator: FleetBridgeTranslator>: Service {
    /// Where the fleet's events come from.
    public let subscriber: FleetSubscriber
    /// The connection the bridge publishes through.
    public let publishing: MQTTConfiguration
    /// The bounds of what waits to be published.
    public let limits: BridgeQueueLimits
    let translator: Translator
    let logger: Logger

    /// A bridge; nothing connects until ``run()``.
    ///
    /// - Parameters:
    ///   - publishing: the publishing connection; by default the subscriber's settings with
    ///     `-pub` after its client id and after its user name, if it has one
    ///     (``publishingConfiguration(for:)``).
    ///   - limits: how many vehicles are bridged, how many messages wait per vehicle.
    public init(
        subscriber: FleetSubscriber, translator: Translator, publishing: MQTTConfiguration? = nil, limits: BridgeQueueLimits = .init(),
        logger: Logger
    ) {
        self.subscriber = subscriber
        self.translator = translator
        self.limits = limits
        self.logger = logger
        if let publishing {
            self.publishing = publishing
        } else {
            self.publishing = Self.publishingConfiguration(for: subscriber.configuration)
        }
    }

    /// The default publishing connection for a subscriber connecting with `subscribing`: the
    /// same broker, password and TLS settings, with `-pub` after the client id and after the
    /// user name (`bridge+homeassistant` publishes as `bridge+homeassistant-pub`). Two
    /// connections under one client id would throw each other off the broker, and a broker
    /// that makes the client id the user name (`use_username_as_clientid`, the shipped
    /// `deploy/mosquitto` configurations) needs two user names for that; the ACL then gives the
    /// reading one the fleet's topics and the publishing one the application's.
    public static func publishingConfiguration(for subscribing: MQTTConfiguration) -> MQTTConfiguration {
        var derived = subscribing
        derived.clientID += "-pub"
        if let user = subscribing.username ?? subscribing.broker.username { derived.username = user + "-pub" }
        return derived
    }

    /// Whether the bridge would read `topic` back through its own subscription.
    public func feedsBack(_ topic: String) -> Bool {
        subscriber.filters.contains { MQTTTopicFilter.matches($0, topic: topic) }
    }

    /// Connects the publishing client (retrying an unreachable broker), then bridges until a
    /// graceful shutdown (returns once the newest message of each topic received is published
    /// and acknowledged),
    /// the subscription fails (thrown) or the task is cancelled; the client then shuts down,
    /// flushing what is still unacknowledged for up to 2 s.
    public func run() async throws {
        // A stop while the broker is still unreachable ends the wait: nothing was received.
        guard
            let client = try await reachedUnlessStopped(
                logger: logger, stopped: "Bridge stopped before the broker could be reached; nothing was received",
                { [publishing, logger] in try await MQTTClient.connectRetrying(configuration: publishing, logger: logger) })
        else { return }
        logger.info(
            "Bridging the fleet",
            metadata: [
                "mqtt.broker": "\(publishing.broker)", "bridge.translator": "\(Translator.self)",
            ])
        let totals: Totals
        do {
            totals = try await bridge(subscriber.events(), through: client)
        } catch {
            await client.shutdown(flushTimeout: .seconds(2))
            throw error
        }
        await client.shutdown(flushTimeout: .seconds(2))
        logger.info(
            "Bridge stopped; everything received is published",
            metadata: [
                "bridge.published": "\(totals.published)", "bridge.coalesced": "\(totals.coalesced)",
                "bridge.stale": "\(totals.stale)", "bridge.dropped": "\(totals.dropped)",
            ])
    }

    /// What a run did, in messages: published; replaced by a newer one before they could be;
    /// discarded as older than one already taken; dropped for lack of room.
    private struct Totals {
        var published: Int
        var coalesced: UInt64
        var stale: UInt64
        var dropped: UInt64
    }

    /// Publishes the messages of `events` until the stream ends, then waits for every
    /// acknowledgement still awaited.
    private func bridge(_ events: AsyncThrowingStream<FleetEvent, any Error>, through client: MQTTClient) async throws -> Totals {
        let queue = BridgeQueue(limits: limits, logger: logger)
        let published = try await withThrowingTaskGroup(of: Int.self) { group in
            group.addTask {
                // Whatever ends the reading (the stream's end, its error, a cancellation), the
                // publisher must learn that nothing more will come.
                defer { queue.finish() }
                try await read(events, into: queue)
                return 0
            }
            group.addTask { try await publish(from: queue, through: client) }
            var published = 0
            while let count = try await group.next() { published += count }
            return published
        }
        let counts = queue.counts
        return Totals(published: published, coalesced: counts.coalesced, stale: counts.stale, dropped: counts.dropped)
    }

    /// Translates every event of `events` as it arrives and queues the messages; never waits
    /// for the broker.
    private func read(_ events: AsyncThrowingStream<FleetEvent, any Error>, into queue: BridgeQueue) async throws {
        var translator = self.translator
        var refusedFeedback = false
        let clock = ContinuousClock()
        let start = clock.now
        var malformed = MalformedMessageReport()
        for try await event in events {
            malformed.note(event, topics: subscriber.options.topics, logger: logger)
            let now = clock.now - start
            // A new vehicle beyond the limit is refused before the translator remembers it.
            if let vehicle = event.vehicle, !event.isBacklog, !queue.admit(vehicle, at: now) { continue }
            for output in translator.outputs(for: event, at: now) {
                if feedsBack(output.message.topic) {
                    if !refusedFeedback {
                        logger.error(
                            "Bridge output would be read back by its own subscription; not published",
                            metadata: [
                                "vehicle": "\(output.vehicle)", "mqtt.topic": "\(output.message.topic)",
                                "mqtt.filters": "\(subscriber.filters)",
                            ])
                        refusedFeedback = true
                    }
                    continue
                }
                queue.enqueue(output, at: now)
            }
        }
    }

    /// Publishes what `queue` hands out until it ends, with up to the connection's
    /// `maxInflightMessages` acknowledgements awaited at once; returns how many were published.
    private func publish(from queue: BridgeQueue, through client: MQTTClient) async throws -> Int {
        let window = max(1, publishing.maxInflightMessages)
        let logger = self.logger
        return try await withThrowingTaskGroup(of: Void.self) { group in
            var inFlight = 0
            var published = 0
            while true {
                // The window first, then the message: what waits meanwhile can still be replaced
                // by a newer one.
                if inFlight >= window {
                    try await group.next()
                    inFlight -= 1
                }
                guard let output = await queue.next() else { break }
                let message = output.message
                // An immediate task runs synchronously up to its first suspension, by which
                // point libmosquitto holds the message: publishes leave in the queue's order (a
                // retained position is never overwritten by an older one) while up to `window`
                // acknowledgements are awaited at once.
                group.addImmediateTask {
                    do {
                        try await client.publish(
                            topic: message.topic, payload: message.payload, qos: message.qos, retain: message.retain,
                            properties: .json)
                        logger.trace("Bridge published", metadata: ["vehicle": "\(output.vehicle)", "mqtt.topic": "\(message.topic)"])
                    } catch let error as MQTTError where error.isPermanentPublishRefusal {
                        logger.error(
                            "Broker refused a bridge message; check its ACL",
                            metadata: ["vehicle": "\(output.vehicle)", "mqtt.topic": "\(message.topic)", "error": "\(error)"])
                    }
                }
                inFlight += 1
                published += 1
            }
            try await group.waitForAll()
            return published
        }
    }
}
