import FleetProtocol
import FleetWatch
import Logging
import MQTT
import ServiceLifecycle

/// Republishes the fleet's topics in another application's format: subscribes with a
/// ``FleetSubscriber``, turns each event into messages with a ``FleetBridgeTranslator``
/// (``HomeAssistantTranslator``, ``OwnTracksTranslator``) and publishes them through one
/// ``MQTTClient``, in order, with up to the connection's `maxInflightMessages` awaiting the
/// broker's acknowledgement at once (one round trip per window, not per message).
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
/// what was already on its way, publishes everything received and waits for the broker's
/// acknowledgements (QoS ≥ 1) before it disconnects and returns.
public struct FleetBridge<Translator: FleetBridgeTranslator>: Service {
    /// Where the fleet's events come from.
    public let subscriber: FleetSubscriber
    /// The connection the bridge publishes through.
    public let publishing: MQTTConfiguration
    let translator: Translator
    let logger: Logger

    /// A bridge; nothing connects until ``run()``.
    ///
    /// - Parameters:
    ///   - publishing: the publishing connection; by default the subscriber's settings with
    ///     `-pub` after its client id and after its user name, if it has one
    ///     (``publishingConfiguration(for:)``).
    public init(subscriber: FleetSubscriber, translator: Translator, publishing: MQTTConfiguration? = nil, logger: Logger) {
        self.subscriber = subscriber
        self.translator = translator
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
    /// graceful shutdown (returns once every message received is published and acknowledged),
    /// the subscription fails (thrown) or the task is cancelled; the client then shuts down,
    /// flushing what is still unacknowledged for up to 2 s.
    public func run() async throws {
        let client: MQTTClient
        do {
            // A stop while the broker is still unreachable ends the wait: nothing was received.
            client = try await cancelWhenGracefulShutdown { [publishing, logger] in
                try await MQTTClient.connectRetrying(configuration: publishing, logger: logger)
            }
        } catch is CancellationError where Task.isShuttingDownGracefully {
            logger.info("Bridge stopped before the broker could be reached; nothing was received")
            return
        }
        logger.info(
            "Bridging the fleet",
            metadata: [
                "mqtt.broker": "\(publishing.broker)", "bridge.translator": "\(Translator.self)",
            ])
        let published: Int
        do {
            published = try await bridge(subscriber.events(), through: client)
        } catch {
            await client.shutdown(flushTimeout: .seconds(2))
            throw error
        }
        await client.shutdown(flushTimeout: .seconds(2))
        logger.info("Bridge stopped; everything received is published", metadata: ["bridge.published": "\(published)"])
    }

    /// Publishes the messages of `events` until the stream ends, then waits for every
    /// acknowledgement still awaited; returns how many messages were published.
    private func bridge(_ events: AsyncThrowingStream<FleetEvent, any Error>, through client: MQTTClient) async throws -> Int {
        var translator = self.translator
        var refusedFeedback = false
        let window = max(1, publishing.maxInflightMessages)
        let logger = self.logger
        return try await withThrowingTaskGroup(of: Void.self) { group in
            var inFlight = 0
            var published = 0
            for try await event in events {
                for message in translator.messages(for: event) {
                    if feedsBack(message.topic) {
                        if !refusedFeedback {
                            logger.error(
                                "Bridge output would be read back by its own subscription; not published",
                                metadata: [
                                    "mqtt.topic": "\(message.topic)", "mqtt.filters": "\(subscriber.filters)",
                                ])
                            refusedFeedback = true
                        }
                        continue
                    }
                    if inFlight >= window {
                        try await group.next()
                        inFlight -= 1
                    }
                    // An immediate task runs synchronously up to its first suspension, by which
                    // point libmosquitto holds the message: publishes leave in the events' order
                    // (a retained position is never overwritten by an older one) while up to
                    // `window` acknowledgements are awaited at once.
                    group.addImmediateTask {
                        do {
                            try await client.publish(
                                topic: message.topic, payload: message.payload, qos: message.qos, retain: message.retain,
                                properties: .json)
                            logger.trace("Bridge published", metadata: ["mqtt.topic": "\(message.topic)"])
                        } catch let error as MQTTError where error.isPermanentPublishRefusal {
                            logger.error(
                                "Broker refused a bridge message; check its ACL",
                                metadata: ["mqtt.topic": "\(message.topic)", "error": "\(error)"])
                        }
                    }
                    inFlight += 1
                    published += 1
                }
            }
            try await group.waitForAll()
            return published
        }
    }
}
