import FleetCore
import FleetProtocol
import FleetcastCore
import JSONEscaping
import Logging
import MQTT
import ServiceLifecycle

/// Subscribes to the fleet's topics and turns the messages into ``FleetEvent``s.
///
/// ```swift
/// let subscriber = try FleetSubscriber(configuration: mqtt, options: .init(vehicles: [van]), logger: logger)
/// for try await event in subscriber.events() { state.apply(event, at: now) }
/// ```
///
/// Bad messages arrive as ``FleetEvent/malformed(topic:reason:)``, never as errors. An
/// unreachable broker is named in the log and retried with the configuration's
/// ``MQTTReconnectPolicy`` backoff; after the first connection the client itself reconnects and
/// restores the subscription. A subscription the broker refuses (at first, or when it is
/// restored after a reconnect) is asked for again with backoff and said at warning, never
/// taken as subscribed. In a share group, the broker is first proven to deliver on shared
/// subscriptions (``SharedSubscriptionsNotDelivered``). Only a failure retrying cannot mend
/// (TLS, credentials, authorisation) ends the stream with an error, so a watcher is never
/// left silently deaf.
public struct FleetSubscriber: Sendable {
    /// What to subscribe to.
    public struct Options: Sendable {
        /// The topic layout (prefix, default `fleet`).
        public var topics: FleetTopics
        /// Only these vehicles' topics; empty for the whole fleet.
        public var vehicles: [VehicleID]
        /// A shared-subscription group: filters become `$share/{group}/…`, so that several
        /// fleet-watch processes in the same group split the fleet's messages between them.
        /// Brokers send no retained messages to shared subscriptions.
        public var shareGroup: String?
        /// The maximum QoS the broker delivers with.
        public var qos: MQTTQoS
        /// Events buffered for a slow consumer before the oldest are dropped (drops show up
        /// as `seq` gaps), bounding memory. Each entry of a backlog batch is one event.
        public var bufferLimit: Int
        /// The level at which dropped events are logged (the first, then every 1,000th):
        /// `debug` for a display, which only shows the newest; `warning` for a consumer that
        /// must keep every event, such as the track recorder.
        public var dropLogLevel: Logger.Level
        /// Called each time ``FleetSubscriber/events()`` has its subscription acknowledged by
        /// the broker (the moment a service is really up: an executable says `READY=1` to
        /// systemd then). Called on the subscriber's task; it must not block.
        public var onSubscribed: (@Sendable () -> Void)?
        /// How long after subscribing a subscriber that has received nothing at all says so,
        /// once, at notice (60 s).
        public var silenceNotice: Duration = .seconds(60)
        /// In a share group or a clean session, how long a graceful shutdown at most keeps
        /// taking the messages the broker had already given this subscriber, after its
        /// UNSUBSCRIBE (``MQTTClient/handOverLimit``, 10 s): keep it within the stop timeout
        /// of the service manager, less the time the consumer needs to finish.
        public var handOverLimit: Duration = MQTTClient.handOverLimit

        /// Options for the whole fleet under `fleet/`, QoS 1, 10,000 buffered events.
        public init(
            topics: FleetTopics = .default, vehicles: [VehicleID] = [], shareGroup: String? = nil,
            qos: MQTTQoS = .atLeastOnce, bufferLimit: Int = 10_000, dropLogLevel: Logger.Level = .debug,
            onSubscribed: (@Sendable () -> Void)? = nil
        ) {
            self.topics = topics
            self.vehicles = vehicles
            self.shareGroup = shareGroup
            self.qos = qos
            self.bufferLimit = max(1, bufferLimit)
            self.dropLogLevel = dropLogLevel
            self.onSubscribed = onSubscribed
        }
    }

    /// A share group name that cannot be used.
    public struct InvalidShareGroup: Error, Sendable, Equatable, CustomStringConvertible {
        /// The refused name.
        public let name: String
        public var description: String {
            "invalid share group \"\(name.prefix(80))\": expected 1 to 64 characters without '/', '+', '#' or control characters"
        }
    }

    /// The MQTT connection settings.
    public let configuration: MQTTConfiguration
    /// What is subscribed.
    public let options: Options
    let logger: Logger

    /// A subscriber; nothing connects until ``events()`` is iterated or ``retainedSnapshot(quietPeriod:timeout:)``
    /// is called. Throws ``InvalidShareGroup`` for a share group name MQTT cannot carry.
    public init(configuration: MQTTConfiguration, options: Options = Options(), logger: Logger) throws(InvalidShareGroup) {
        if let group = options.shareGroup {
            guard (1...64).contains(group.utf8.count),
                !group.utf8.contains(where: {
                    $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") || $0 < 0x20 || $0 == 0x7F
                })
            else { throw InvalidShareGroup(name: group) }
        }
        self.configuration = configuration
        self.options = options
        self.logger = logger
    }

    /// The subscription filters: `{prefix}/+/+`, or `{prefix}/{vehicle}/+` per vehicle, each
    /// under `$share/{group}/` when a share group is set.
    public var filters: [String] {
        let plain = options.topics.filters(vehicles: options.vehicles)
        guard let group = options.shareGroup else { return plain }
        return plain.map { "$share/\(group)/\($0)" }
    }

    /// The fleet's events, live, until the consumer stops iterating (then the client
    /// disconnects) or a failure that retrying cannot mend.
    ///
    /// Under a ServiceGroup, a graceful shutdown (SIGTERM) disconnects the client and then
    /// finishes the stream after the messages already received: a consumer that writes every
    /// event (the track recorder) loses none of them, and in a share group the broker sends
    /// the next messages to the other members.
    ///
    /// A configuration that acknowledges after handling is for ``deliveries()``: this stream
    /// acknowledges nothing, so it ends at once with an error.
    public func events() -> AsyncThrowingStream<FleetEvent, any Error> {
        decodedEvents { event, _ in event }
    }

    /// An event and whether its message was a retained one (sent by the broker because of the
    /// subscription: the newest of its topic from before it, not news).
    public struct ReceivedEvent: Sendable {
        public var event: FleetEvent
        public var retained: Bool
    }

    /// As ``events()``, each event with whether it came retained: what a fleet state needs to
    /// tell a `seq` gap from the numbers sent before it subscribed
    /// (``FleetCore/FleetState/apply(_:at:retained:)``).
    public func receivedEvents() -> AsyncThrowingStream<ReceivedEvent, any Error> {
        decodedEvents { ReceivedEvent(event: $0, retained: $1) }
    }

    private func decodedEvents<Element: Sendable>(
        _ make: @escaping @Sendable (FleetEvent, _ retained: Bool) -> Element
    ) -> AsyncThrowingStream<Element, any Error> {
        guard configuration.acknowledgement == .onReceipt else {
            return AsyncThrowingStream {
                throw MQTTError.invalidConfiguration(
                    "events() acknowledges nothing: a configuration that acknowledges after handling needs deliveries()")
            }
        }
        let decoder = FleetMessageDecoder(topics: options.topics)
        let policy = AsyncThrowingStream<MQTTMessage, any Error>.Continuation.BufferingPolicy.bufferingNewest(options.bufferLimit)
        return stream(of: Element.self, .bufferingNewest(options.bufferLimit), subscription: policy) { [options, logger] continuation in
            var dropped: UInt64 = 0
            return { message, _ in
                decoder.decode(topic: message.topic, payload: message.payload) { event in
                    if case .dropped = continuation.yield(make(event, message.retain)) {
                        dropped &+= 1
                        if dropped.isMultiple(of: 1000) || dropped == 1 {
                            logger.log(
                                level: options.dropLogLevel, "Events dropped for a slow consumer",
                                metadata: ["events.dropped": "\(dropped)"])
                        }
                    }
                }
            }
        }
    }

    /// The fleet's messages, each with its events and a receipt to acknowledge once they
    /// are kept: for a consumer that must lose nothing, not even when it is killed.
    ///
    /// With a configuration that acknowledges after handling
    /// (`MQTTAcknowledgement.afterHandling`) and a persistent session, the broker learns
    /// that a message arrived only from ``FleetDelivery/acknowledge()`` (of it or a later
    /// one): what the consumer had not acknowledged when it died is sent again when it
    /// connects next. Nothing is dropped here: the broker sends at most the configuration's
    /// `receiveMaximum` messages ahead of the acknowledgements, which bounds the memory; a
    /// consumer that cannot go on (its database is down) stops the flow instead.
    ///
    /// A graceful shutdown ends the stream as for ``events()``, after everything received;
    /// the connection closes once those deliveries are acknowledged. In a persistent session
    /// without a share group the subscription is kept, so the broker keeps what arrives
    /// while the consumer is away.
    public func deliveries() -> AsyncThrowingStream<FleetDelivery, any Error> {
        let decoder = FleetMessageDecoder(topics: options.topics)
        return stream(of: FleetDelivery.self, .unbounded, subscription: .unbounded) { continuation in
            { message, client in
                // Not decoded here: a compact batch of 2,048 fixes is 6 KB as bytes and hundreds
                // of KB as events; the consumer decodes each as it handles it.
                continuation.yield(FleetDelivery(message: message, decoder: decoder, client: client))
            }
        }
    }

    /// A stream fed by ``run(bufferingPolicy:_:)`` with what `makeEmit` makes of each message;
    /// finished when the subscription ends (with its error, if one), cancelled with it.
    private func stream<Element: Sendable>(
        of: Element.Type, _ policy: AsyncThrowingStream<Element, any Error>.Continuation.BufferingPolicy,
        subscription: AsyncThrowingStream<MQTTMessage, any Error>.Continuation.BufferingPolicy,
        _ makeEmit: @escaping @Sendable (AsyncThrowingStream<Element, any Error>.Continuation) -> (MQTTMessage, MQTTClient) -> Void
    ) -> AsyncThrowingStream<Element, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Element.self, bufferingPolicy: policy)
        let task = Task { [self] in
            do {
                try await run(bufferingPolicy: subscription, makeEmit(continuation))
                continuation.finish()
            } catch is CancellationError {
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    private func run(
        bufferingPolicy: AsyncThrowingStream<MQTTMessage, any Error>.Continuation.BufferingPolicy,
        _ emit: (MQTTMessage, MQTTClient) -> Void
    ) async throws {
        // A broker that grants shared subscriptions and delivers nothing on them (NATS) must
        // not leave a member of a share group silently deaf.
        if let group = options.shareGroup { try await probeSharedSubscriptions(group: group) }
        // A graceful stop while the broker is still unreachable ends the wait (the stream then
        // finishes, empty), instead of waiting for the group's time limit.
        let client = try await cancelWhenGracefulShutdown { [configuration, logger] in
            try await MQTTClient.connectRetrying(configuration: configuration, logger: logger)
        }
        // A share group hands the next messages to its other members; a clean session has
        // nothing to keep. A persistent session of its own keeps its subscription, so the
        // broker holds what arrives until the consumer is back.
        let handingOver = options.shareGroup != nil || configuration.session == .clean
        do {
            guard let first = try await subscribeRetrying(client, bufferingPolicy: bufferingPolicy) else {
                await client.shutdown(flushTimeout: .zero)
                return
            }
            logger.info("Subscribed to the fleet", metadata: ["mqtt.broker": "\(configuration.brokerList)", "mqtt.filters": "\(filters)"])
            options.onSubscribed?()
            let heardAnything = Flag()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await logConnectionChanges(client) }
                group.addTask { [self] in await noticeSilence(unless: heardAnything) }
                group.addTask { [logger] in
                    // Not a cancellation of the loop below, which would drop what the
                    // subscription holds: the client's shutdown finishes its stream after them.
                    guard (try? await gracefulShutdown()) != nil else { return }
                    logger.debug("Graceful shutdown: disconnecting, then passing on what was received")
                    await client.shutdown(flushTimeout: .zero, handingOver: handingOver, handOverLimit: options.handOverLimit)
                }
                var subscription: MQTTSubscription? = first
                var heard = false
                while let current = subscription {
                    do {
                        for try await message in current {
                            emit(message, client)
                            if !heard {
                                heard = heardAnything.raise()
                            }
                        }
                        subscription = nil
                    } catch let error as MQTTError
                        where error.code == .subscribeRejected && [0x80, 0x83, 0x97].contains(error.reasonCode ?? 0)
                    {
                        // Refused when restored after a reconnect (a cluster node whose streams
                        // are moving answers 0x80 for seconds): subscribe again, with backoff.
                        logger.info(
                            "The broker refused the restored subscription; subscribing again",
                            metadata: ["mqtt.broker": "\(configuration.brokerList)", "mqtt.error": "\(error)"])
                        subscription = try await subscribeRetrying(client, bufferingPolicy: bufferingPolicy)
                    }
                }
                group.cancelAll()
            }
        } catch {
            await client.shutdown(flushTimeout: .zero)
            throw error
        }
        await client.shutdown(flushTimeout: .zero)
    }

    /// Says once, at notice, when nothing at all has arrived ``Options/silenceNotice`` after subscribing:
    /// a broker that takes the subscription and then denies every delivery (mosquitto does so for
    /// a user its ACL has no block for) looks like an idle fleet otherwise.
    private func noticeSilence(unless heardAnything: Flag) async {
        guard (try? await Task.sleep(for: options.silenceNotice)) != nil, !heardAnything.isRaised else { return }
        logger.notice(
            "Nothing received since subscribing: check that vehicles publish, and that the broker's ACL lets this user read these filters",
            metadata: [
                "mqtt.broker": "\(configuration.brokerList)",
                "mqtt.user": "\(configuration.username ?? configuration.broker.username ?? "(anonymous)")",
                "mqtt.filters": "\(filters)", "seconds": "\(options.silenceNotice.components.seconds)",
            ])
    }

    /// Follows the client's reconnections after the first connection, at debug: the MQTT
    /// client already logs each loss and each reconnection once, at info, with its cause. A
    /// session another client takes over (``SessionTakeover``: two consumers under one client
    /// id) is named once, at error, with the id and the remedy.
    private func logConnectionChanges(_ client: MQTTClient) async {
        let clock = ContinuousClock()
        let start = clock.now
        func milliseconds() -> Int64 {
            let elapsed = start.duration(to: clock.now).components
            return elapsed.seconds * 1_000 + elapsed.attoseconds / 1_000_000_000_000_000
        }
        var takeover = SessionTakeover()
        _ = takeover.observe(.connected, at: milliseconds())
        for await state in client.connectionStates() {
            switch state {
            case .disconnected(let reason):
                logger.debug("MQTT connection lost", metadata: ["mqtt.broker": "\(configuration.brokerList)", "error": "\(reason)"])
                if takeover.observe(.disconnected(reason: reason), at: milliseconds()) {
                    logger.error(
                        "Another MQTT client takes this client's session over: two consumers share one client id, and each throws the other out",
                        metadata: [
                            "mqtt.broker": "\(configuration.brokerList)", "mqtt.client_id": "\(JSONString.escaped(configuration.clientID))",
                            "error": "\(reason)",
                            "remedy":
                                "give each consumer its own --client-id (fleet-watch record takes a distinct one per instance from its --state-dir), or its own user where the broker makes the client id the user name (docs/broker.md)",
                        ])
                }
            case .reconnecting(let attempt, let delay):
                logger.debug(
                    "MQTT reconnecting",
                    metadata: [
                        "mqtt.broker": "\(configuration.brokerList)", "retry.attempt": "\(attempt)", "retry.delay": "\(delay)",
                    ])
            case .connected:
                logger.debug("MQTT connected", metadata: ["mqtt.broker": "\(configuration.brokerList)"])
                _ = takeover.observe(.connected, at: milliseconds())
            case .idle, .connecting, .closed:
                break
            }
            if Task.isCancelled { return }
        }
    }
}

/// One message of the fleet as ``FleetSubscriber/deliveries()`` gives it: its events (a
/// backlog batch has many, a fix or heading one, a malformed message one ``FleetEvent/malformed(topic:reason:)``)
/// and the receipt that tells the broker it is kept.
public struct FleetDelivery: Sendable {
    let message: MQTTMessage
    let decoder: FleetMessageDecoder
    let client: MQTTClient
    var tag: UInt64 { message.deliveryTag }

    /// The message's events, in order, decoded from its bytes at each call: a consumer that
    /// holds many deliveries holds their bytes (a compact batch is about 3 bytes a fix), and
    /// the events only of the one it handles.
    public var events: [FleetEvent] { decoder.events(topic: message.topic, payload: message.payload) }

    /// The vehicle of the message's topic, without decoding its payload; `nil` for a topic
    /// outside the fleet's layout.
    public var vehicle: VehicleID? { decoder.topics.parse(message.topic)?.vehicle }

    /// The size of the message's payload, in bytes.
    public var payloadBytes: Int { message.payload.count }

    /// The message's topic, as received.
    public var topic: String { message.topic }

    /// The message's payload, as received (what a consumer sets aside to replay later).
    public var payload: [UInt8] { message.payload }

    /// Tells the broker that this message and every earlier one are handled (written
    /// durably): it then forgets them, and sends more. Call it in order; calling it for a
    /// later delivery covers the earlier ones.
    public func acknowledge() {
        client.acknowledge(through: tag)
    }
}

/// A flag one task raises and another reads (a class, so tasks can share it).
final class Flag: Sendable {
    private let raised = SanitizerVisibleMutex(false)
    /// Raises it; returns true.
    func raise() -> Bool { raised.withLock { $0 = true }; return true }
    /// Whether it was raised.
    var isRaised: Bool { raised.withLock { $0 } }
}
