import CMosquitto
import FleetcastCore
import JSONEscaping
import Logging
import MQTTCore

/// An async MQTT 5 (or 3.1.1) client over libmosquitto.
///
/// ```swift
/// let client = try MQTTClient(configuration: config, logger: logger)
/// try await client.connect()
/// let fixes = try await client.subscribe(["fleet/+/fix"])
/// try await client.publish(topic: "fleet/van-1/fix", payload: bytes, qos: .atLeastOnce, retain: true)
/// await client.shutdown()
/// ```
///
/// After the first successful `connect()`, a lost connection is re-established with
/// exponential backoff and jitter (``MQTTReconnectPolicy``); subscriptions are restored and
/// QoS ≥ 1 publishes still awaiting their acknowledgement are resent by libmosquitto. Watch
/// ``connectionStates()`` to follow it. A client connects once: after `shutdown()` or a failed
/// `connect()`, make a new one.
public final class MQTTClient: Sendable {
    package let handle: MosquittoHandle
    package var context: MQTTCallbackContext { handle.context }

    /// Creates a client; nothing is sent until ``connect()``. Throws
    /// ``MQTTError/invalidConfiguration(_:)`` when libmosquitto refuses a setting (for example
    /// a TLS file that cannot be read).
    public init(configuration: MQTTConfiguration, logger: Logger) throws(MQTTError) {
        var logger = logger
        logger[metadataKey: "mqtt.broker"] = "\(configuration.brokerList)"
        handle = try MosquittoHandle(configuration: configuration, logger: logger)
    }

    deinit {
        let (running, actions) = context.shared.withLock { $0.client.requestStop() }
        actions.run()
        // Wake the loop thread; it ends, drops its reference and the handle is destroyed.
        if running {
            MQTTConnectionLoop.uncorkForStop(handle)
            _ = mosquitto_disconnect_v5(handle.pointer, 0, nil)
            context.wakeup.packetQueued()
        }
    }

    /// The configuration the client was made with.
    public var configuration: MQTTConfiguration { context.configuration }

    /// What the broker connections have cost on the network so far (bytes on the wire, TLS and
    /// TCP/IP headers included), as of the network loop's last reading, at most a second old.
    public var traffic: MQTTTraffic { context.shared.withLock { $0.traffic.total } }

    /// The protocol the client speaks now: `.v5` or `.v311` (a client configured `.auto`
    /// speaks 5 until a broker refuses it, then 3.1.1).
    public var protocolVersion: MQTTProtocolVersion { context.protocolVersion }

    /// The current connection state.
    public var connectionState: MQTTConnectionState {
        context.shared.withLock { $0.client.connectionState }
    }

    /// Connects and returns once the broker has accepted the connection (CONNACK success).
    ///
    /// Throws an ``MQTTError`` that says what happened: `connectionRefused`, `hostNotFound`,
    /// `tlsCertificateNotTrusted`, `tlsHostnameMismatch`, `badUserNameOrPassword`,
    /// `notAuthorized`, `connectionRejected`…
    ///
    /// Cancelling the task ends the wait with `CancellationError` and shuts the client down
    /// (a client connects once); a TCP connect under way ends by itself in the background.
    public func connect() async throws {
        let handle = self.handle
        let context = self.context
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (action, actions) = context.shared.withLock {
                    $0.client.startConnect(.continuation(continuation), cancelled: Task.isCancelled)
                }
                actions.run()
                switch action {
                case .refuse(let error):
                    continuation.resume(throwing: error)
                case .cancelled:
                    break
                case .startLoop:
                    context.logger.debug("MQTT connecting")
                    MQTTConnectionLoop.start(handle)
                }
            }
        } onCancel: {
            context.shared.withLock { $0.client.cancelConnect() }.run()
        }
    }

    /// Publishes `payload` to `topic` and returns when it is done: for QoS 1 when the broker
    /// sent PUBACK, for QoS 2 PUBCOMP, for QoS 0 when libmosquitto has written it to the socket.
    ///
    /// Many publishes may be awaited at once; at most `maxInflightMessages` QoS ≥ 1 messages
    /// are on the wire, the rest wait inside libmosquitto. While reconnecting, QoS ≥ 1
    /// publishes are queued and sent after the reconnect; QoS 0 ones throw `notConnected`.
    /// `properties` are sent on MQTT 5 only.
    ///
    /// Cancellation: cancelling the task ends the *wait* for the acknowledgement at once with
    /// `CancellationError` — so a caller can bound it, even when the broker has gone away.
    /// The message itself is not taken back: libmosquitto has it and may still deliver it
    /// (after a reconnect, for QoS ≥ 1) until the client shuts down, so a cancelled publish
    /// means "outcome unknown", and an at-least-once receiver may see it later. Its late
    /// acknowledgement is ignored and never completes another publish. A task cancelled
    /// before the call still hands the message over (see the ordering guarantee) and then
    /// throws `CancellationError` unless the acknowledgement is already known.
    ///
    /// Ordering guarantee: everything before the acknowledgement wait is synchronous — the
    /// topic is validated, the state checked under its lock and the message handed to
    /// libmosquitto (`mosquitto_publish_v5`, which queues it for the wire in call order) —
    /// and the first suspension point is the wait itself. So publishes started one after the
    /// other as immediate tasks (`TaskGroup.addImmediateTask`, SE-0472), which run
    /// synchronously up to their first suspension, go out in the order they were started,
    /// while all of them are awaited at once.
    public func publish(
        topic: String,
        payload: [UInt8],
        qos: MQTTQoS = .atLeastOnce,
        retain: Bool = false,
        properties: MQTTPublishProperties = .none
    ) async throws {
        let context = self.context
        let (mid, epoch, token) = try handOver(topic: topic, payload: payload, qos: qos, retain: retain, properties: properties)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                context.shared.withLock {
                    // Read under the lock: a cancellation handler that already ran found no
                    // registered wait, so this registration must see the cancellation.
                    $0.client.publishSent(
                        mid: mid, topic: topic, qos: qos, epoch: epoch, token: token, cancelled: Task.isCancelled,
                        ack: .continuation(continuation))
                }.run()
            }
        } onCancel: {
            context.shared.withLock { $0.client.cancelPublish(mid: mid, token: token) }.run()
        }
    }

    /// Publishes as ``publish(topic:payload:qos:retain:properties:)`` does, without a task:
    /// hands the message to libmosquitto before it returns (throwing what that step refuses),
    /// and calls `completion` once with the outcome that the other waits for: success when the
    /// acknowledgement its QoS asks for arrived, or the error. For a sender of many messages (the
    /// agent's live sends): no task and no continuation per message, no thread hop to learn of
    /// a PUBACK. `completion` runs on libmosquitto's network thread (or at once, on this one,
    /// when the outcome is already known), outside every lock: it must be quick and never block.
    public func publish(
        topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false,
        properties: MQTTPublishProperties = .none, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) throws {
        let (mid, epoch, token) = try handOver(topic: topic, payload: payload, qos: qos, retain: retain, properties: properties)
        context.shared.withLock {
            $0.client.publishSent(
                mid: mid, topic: topic, qos: qos, epoch: epoch, token: token, cancelled: false, ack: .callback(completion))
        }.run()
    }

    /// The synchronous part of a publish: the topic checked, the state asked, the message
    /// handed to libmosquitto. Returns its `mid` and the state's epoch and token for the wait.
    private func handOver(
        topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTPublishProperties
    ) throws -> (mid: Int32, epoch: UInt64, token: UInt64) {
        try MQTTTopicFilter.validate(topic: topic)
        let (epoch, token) = try context.shared.withLock { $0.client.beginPublish() }.get()
        var mid: Int32 = 0
        let rc = try withPublishProperties(properties) { props in
            payload.withUnsafeBytes { bytes in
                mosquitto_publish_v5(
                    handle.pointer, &mid, topic, Int32(bytes.count), bytes.baseAddress, Int32(qos.rawValue), retain, props)
            }
        }
        context.wakeup.packetQueued()
        // While the connection is down libmosquitto answers NO_CONN, but it has already put a
        // QoS ≥ 1 message in its outgoing queue (only the write failed) and sends it after the
        // reconnect; its PUBACK/PUBCOMP then arrives under `mid`. A QoS 0 message is dropped.
        let queuedWhileDown = rc == MOSQ_ERR_NO_CONN.rawValue && qos != .atMostOnce
        guard rc == MOSQ_ERR_SUCCESS.rawValue || queuedWhileDown else {
            throw Self.operationError(rc, operation: "publish to '\(topic)'")
        }
        let sentMid = mid
        context.logger.trace("MQTT publish sent", metadata: ["mqtt.topic": "\(topic)", "mqtt.mid": "\(sentMid)"])
        return (mid, epoch, token)
    }

    /// Publishes a UTF-8 string; see ``publish(topic:payload:qos:retain:properties:)``.
    public func publish(
        topic: String, string: String, qos: MQTTQoS = .atLeastOnce, retain: Bool = false,
        properties: MQTTPublishProperties = .none
    ) async throws {
        try await publish(topic: topic, payload: Array(string.utf8), qos: qos, retain: retain, properties: properties)
    }

    private func withPublishProperties<R>(
        _ properties: MQTTPublishProperties, _ body: (OpaquePointer?) -> R
    ) throws(MQTTError) -> R {
        guard properties != .none, context.protocolVersion == .v5 else { return body(nil) }
        var list: OpaquePointer? = nil
        defer { mosquitto_property_free_all(&list) }
        if let contentType = properties.contentType {
            let rc = mosquitto_property_add_string(&list, Int32(MQTT_PROP_CONTENT_TYPE.rawValue), contentType)
            guard rc == MOSQ_ERR_SUCCESS.rawValue else {
                throw .invalidConfiguration("content type '\(contentType)': \(MQTTError.libraryMessage(rc))")
            }
        }
        if let expiry = properties.messageExpirySeconds {
            let rc = mosquitto_property_add_int32(&list, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), expiry)
            guard rc == MOSQ_ERR_SUCCESS.rawValue else {
                throw .invalidConfiguration("message expiry: \(MQTTError.libraryMessage(rc))")
            }
        }
        return body(list)
    }

    /// Subscribes to `filters` (`+`, `#` and `$share/group/filter` allowed) and returns once
    /// the broker has acknowledged (SUBACK) — messages published after that are delivered.
    ///
    /// Every SUBSCRIBE goes out before any SUBACK is awaited, so many filters cost one round
    /// trip (on MQTT 5 each filter is its own SUBSCRIBE, tagged with its subscription
    /// identifier). Throws `subscribeRejected` when the broker refuses a filter. While
    /// reconnecting, the subscription is registered and sent after the reconnect.
    ///
    /// The stream ends with an ``MQTTError`` when the subscription is lost for good: the broker
    /// refuses it when it is restored after a reconnect (its ACL changed), or it cannot be sent
    /// again. It ends without an error when the client shuts down. A subscriber that must keep
    /// listening subscribes again or gives up; it is never left silently deaf.
    ///
    /// Cancelling the task ends the wait with `CancellationError` and ends the subscription
    /// (its filters are unsubscribed).
    /// - Parameters:
    ///   - qos: the maximum QoS the broker delivers with.
    ///   - bufferingPolicy: what to keep when the consumer is slower than the broker.
    public func subscribe(
        _ filters: [String],
        qos: MQTTQoS = .atLeastOnce,
        bufferingPolicy: AsyncThrowingStream<MQTTMessage, any Error>.Continuation.BufferingPolicy = .unbounded
    ) async throws -> MQTTSubscription {
        guard !filters.isEmpty else { throw MQTTError.invalidTopic("", reason: "no filters given") }
        for filter in filters { try MQTTTopicFilter.validate(filter: filter) }
        let context = self.context
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: MQTTMessage.self, bufferingPolicy: bufferingPolicy)
        let id = context.shared.withLock { $0.client.makeID() }
        continuation.onTermination = { [weak handle] _ in
            handle?.unsubscribe(subscriptionID: id)
        }
        let identifiers: [UInt32]
        let epoch: UInt64
        // Acknowledging after handling: nothing read from now until the SUBSCRIBEs are written
        // (begun before the stream is there to take messages; see MQTTDeliveryLedger).
        let gated = context.acknowledgesAfterHandling
        if gated { context.shared.withLock { $0.deliveries.beginSubscribe() } }
        var queueing = gated
        defer { if queueing { context.shared.withLock { $0.deliveries.endSubscribe() } } }
        switch context.shared.withLock({ $0.client.addSubscription(id: id, filters: filters, qos: qos, sink: continuation) }) {
        case .failure(let refusal):
            continuation.finish()
            throw refusal
        case .success(let added):
            (identifiers, epoch) = added
        }
        let subscription = MQTTSubscription(filters: filters, stream: stream)
        // MQTT 5: one SUBSCRIBE per filter, each with its own subscription identifier (see
        // `MQTTClientState.route`). MQTT 3.1.1: one SUBSCRIBE for all.
        let v5 = context.protocolVersion == .v5
        let batches: [(filters: [String], identifier: UInt32?)] = v5 ? zip(filters, identifiers).map { ([$0], $1) } : [(filters, nil)]
        var sent: [(mid: Int32, filters: [String])] = []
        sent.reserveCapacity(batches.count)
        for batch in batches {
            var mid: Int32 = 0
            let rc = context.sendSubscribe(handle.pointer, filters: batch.filters, qos: qos, identifier: batch.identifier, mid: &mid)
            if rc == MOSQ_ERR_SUCCESS.rawValue {
                sent.append((mid, batch.filters))
                continue
            }
            // Nobody awaits what went out; a refusal of it still ends the stream.
            context.shared.withLock { $0.client.subscribeSent(id: id, sent, epoch: epoch, ack: nil) }.run()
            if rc == MOSQ_ERR_NO_CONN.rawValue {
                context.logger.debug("MQTT subscription deferred until reconnected", metadata: ["mqtt.filters": "\(filters)"])
                return subscription
            }
            continuation.finish()
            throw Self.operationError(rc, operation: "subscribe to \(filters)")
        }
        if queueing {
            context.shared.withLock { $0.deliveries.endSubscribe() }
            queueing = false
        }
        let sentBatches = sent
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (ack: CheckedContinuation<Void, any Error>) in
                context.shared.withLock {
                    $0.client.subscribeSent(id: id, sentBatches, epoch: epoch, cancelled: Task.isCancelled, ack: .continuation(ack))
                }.run()
            }
        } onCancel: {
            context.shared.withLock { $0.client.cancelSubscribe(id: id) }.run()
        }
        context.logger.debug("MQTT subscribed", metadata: ["mqtt.filters": "\(filters)"])
        return subscription
    }

    /// A stream of connection states, starting with the current one and ending after `.closed`.
    public func connectionStates() -> AsyncStream<MQTTConnectionState> {
        let (stream, continuation) = AsyncStream.makeStream(of: MQTTConnectionState.self, bufferingPolicy: .unbounded)
        let context = self.context
        let (id, current) = context.shared.withLock { ($0.client.makeID(), $0.client.connectionState) }
        continuation.onTermination = { [weak context] _ in
            context?.shared.withLock { $0.client.observerRemoved(id) }
        }
        // Each state is yielded outside the lock, and the observer is stored only once the
        // state it was last given is still the current one: no later state can overtake it.
        var seen = current
        continuation.yield(seen)
        registering: while true {
            switch context.shared.withLock({ $0.client.addObserver(id, continuation, seen: seen) }) {
            case .stored:
                break registering
            case .changed(let state):
                continuation.yield(state)
                seen = state
            case .finish(let last):
                if let last { continuation.yield(last) }
                continuation.finish()
                break registering
            }
        }
        return stream
    }

    /// Shuts down cleanly: refuses new work, waits up to `flushTimeout` for publishes still
    /// awaiting their acknowledgement, sends DISCONNECT (so no will is published), stops the
    /// network thread and finishes every stream. Publishes still unacknowledged then fail
    /// with ``MQTTError/shutdown``. Safe to call more than once. Publishes whose wait was
    /// cancelled are not waited for (nobody awaits their outcome); libmosquitto drops what it
    /// still holds of them when the network thread stops.
    ///
    /// Before the DISCONNECT it waits, at most ``closeGrace``, for the broker to acknowledge
    /// UNSUBSCRIBEs still on their way (a stream that ended just before). Closing a socket
    /// with an unread UNSUBACK in it makes the kernel reset the connection, and the broker
    /// then counts it as lost, not closed — so it would publish the will.
    ///
    /// With `handingOver`, it first UNSUBSCRIBEs every filter still subscribed and keeps
    /// passing on what arrives until the connection closes: in a shared subscription the
    /// broker then sends the next messages to the group's other members, while those it had
    /// already given this client — in flight, or queued behind its in-flight window — still
    /// come. The DISCONNECT waits, after the UNSUBACK, until no message has arrived (and,
    /// acknowledging after handling, every one is handled) for `handOverQuiet` (default
    /// ``handOverQuiet``), at most `handOverLimit` (default ``handOverLimit``; zero: no
    /// wait): the broker has no signal for "queue empty". What is still queued for a
    /// persistent session when it ends stays in that session (mosquitto does not resend it to
    /// another member): a client connecting with the same client id gets it, the rest of the
    /// group does not; a clean session's is dropped. The outcome is logged once, with what
    /// arrived meanwhile: at info when done, and when cut short by the limit or by the task's
    /// cancellation at warning (persistent session) or notice (clean). The streams then
    /// finish normally, after everything received.
    ///
    /// Cancelling the task cuts the flush short. The round trips of a clean close (the
    /// UNSUBACKs, the DISCONNECT written and the network thread ended) are still waited for,
    /// but at most ``closeGrace`` each; a thread stuck in a TCP connect to an unreachable
    /// host then ends by itself, later.
    public func shutdown(
        flushTimeout: Duration = .seconds(5), handingOver: Bool = false, handOverLimit: Duration = MQTTClient.handOverLimit,
        handOverQuiet: Duration = MQTTClient.handOverQuiet
    ) async {
        let context = self.context
        let (mustDrain, loopRunning, actions) = context.shared.withLock { $0.client.beginShutdown() }
        actions.run()
        guard loopRunning else { return }
        if handingOver { handle.unsubscribeForHandOver() }
        if mustDrain {
            _ = await withTimeLimit(flushTimeout) {
                await suspend { waiter in
                    let actions = context.shared.withLock { $0.client.awaitDrain(id: waiter.id, cancelled: Task.isCancelled, waiter) }
                    actions.run()
                    return true  // kept, or resumed by the actions
                } cancel: { id in
                    context.shared.withLock { $0.client.stopWaiting(id: id) }
                }
            }
        }
        await Self.wait(context, bound: Self.closeGrace) { $0.awaitUnsubacks(id: $1, $2) }
        if handingOver { await Self.handOver(context, limit: handOverLimit, quiet: handOverQuiet) }
        if context.shared.withLock({ $0.client.stopAfterDrain() }) {
            // The last reading of the link's counters, while its socket is still open.
            let reading = MQTTTrafficMeter.read(socket: mosquitto_socket(handle.pointer))
            context.shared.withLock { $0.traffic.update(reading) }
            MQTTConnectionLoop.uncorkForStop(handle)
            _ = mosquitto_disconnect_v5(handle.pointer, 0, nil)
            context.wakeup.packetQueued()
        }
        await Self.wait(context, bound: nil) { $0.awaitLoopEnd(id: $1, $2) }
        context.logger.debug("MQTT client shut down")
    }

    /// How long `shutdown()` waits for each step of a clean close that needs the broker or
    /// the network thread (UNSUBACKs; the thread's end once the task is cancelled).
    public static let closeGrace: Duration = .seconds(1)

    /// A shutdown handing over disconnects once no message has arrived for this long after
    /// its UNSUBACK: longer than the pauses of a queue drained through the in-flight window
    /// over a slow link.
    public static let handOverQuiet: Duration = .milliseconds(500)
    /// The longest a shutdown handing over waits for the messages still coming, unless its
    /// caller gives its own limit (one that must end within a service manager's stop timeout).
    public static let handOverLimit: Duration = .seconds(10)

    /// Waits until no message has arrived, and the consumer has handled every one, for
    /// `quiet`; at most `limit`, or until the task is cancelled. A poll of a counter:
    /// libmosquitto gives no event for "nothing more is coming".
    ///
    /// In a client that acknowledges after handling, a pause while the consumer has not yet
    /// handled what it was given is not quiet: the broker is only waiting for the
    /// acknowledgements (its in-flight window is full), and has more queued for this session.
    private static func handOver(_ context: MQTTCallbackContext, limit: Duration, quiet: Duration) async {
        guard limit > .zero else { return }
        let clock = ContinuousClock()
        let start = clock.now
        let deadline = start.advanced(by: limit)
        let first = context.shared.withLock { $0.client.messagesReceived }
        var seen = first
        var outcome = HandOverOutcome.cutShort(arriving: true)
        while clock.now < deadline {
            // Quiet is judged over a whole `quiet` only; the last, shorter nap just ends the wait.
            let nap = min(quiet, clock.now.duration(to: deadline))
            do { try await Task.sleep(for: nap) } catch {
                outcome = .cancelled
                break
            }
            let (now, settled) = context.shared.withLock { ($0.client.messagesReceived, $0.deliveries.isSettled) }
            if nap == quiet && now == seen && settled {
                outcome = .done
                break
            }
            outcome = .cutShort(arriving: now != seen)
            seen = now
        }
        seen = context.shared.withLock { $0.client.messagesReceived }
        let elapsed = (clock.now - start).components
        outcome.log(
            to: context.logger, persistent: context.configuration.session != .clean,
            metadata: [
                "mqtt.client": "\(JSONString.escaped(context.configuration.clientID))", "mqtt.handedOver": "\(seen &- first)",
                "mqtt.handOverMilliseconds": "\(elapsed.seconds * 1000 + elapsed.attoseconds / 1_000_000_000_000_000)",
            ])
    }

    /// Waits until the state machine resumes the waiter that `register` stores (it returns
    /// false when there is nothing to wait for) — at most `bound` when given, and at most
    /// ``closeGrace`` once the task is cancelled.
    private static func wait(
        _ context: MQTTCallbackContext, bound: Duration?,
        register: (inout MQTTClientLiveState, UInt64, Waiter<Void>) -> Bool
    ) async {
        @Sendable func expire(_ id: UInt64, after delay: Duration) {
            // Not a child task: a cancelled caller's children would wake at once.
            Task {
                try? await Task.sleep(for: delay)
                context.shared.withLock { $0.client.stopWaiting(id: id) }?.resume()
            }
        }
        await suspend { waiter in
            guard context.shared.withLock({ register(&$0.client, waiter.id, waiter) }) else { return false }
            if let bound {
                expire(waiter.id, after: Task.isCancelled ? min(bound, closeGrace) : bound)
            } else if Task.isCancelled {
                expire(waiter.id, after: closeGrace)
            }
            return true
        } cancel: { id in
            // Not resumed at once: the step is still waited for, at most ``closeGrace``.
            expire(id, after: closeGrace)
            return nil
        }
    }

    /// Maps a libmosquitto return code from publish/subscribe to an error.
    static func operationError(_ rc: Int32, operation: String) -> MQTTError {
        switch rc {
        case MOSQ_ERR_NO_CONN.rawValue: .notConnected
        case MOSQ_ERR_CONN_LOST.rawValue: .connectionLost(reason: MQTTError.libraryMessage(rc))
        default: .library(operation: operation, code: rc, message: MQTTError.libraryMessage(rc))
        }
    }
}

extension MosquittoHandle {
    /// A subscription stream ended: forget it and UNSUBSCRIBE the filters nobody else uses.
    func unsubscribe(subscriptionID: UInt64) {
        let (filters, epoch) = context.shared.withLock { $0.client.removeSubscription(id: subscriptionID) }
        sendUnsubscribe(filters, epoch: epoch)
    }

    /// A shutdown handing over: UNSUBSCRIBE every filter of the streams still open, which
    /// keep receiving until the connection closes.
    func unsubscribeForHandOver() {
        let (filters, epoch) = context.shared.withLock { $0.client.filtersToHandOver() }
        sendUnsubscribe(filters, epoch: epoch)
    }

    private func sendUnsubscribe(_ filters: [String], epoch: UInt64) {
        guard !filters.isEmpty else { return }
        var mid: Int32 = 0
        let rc = MQTTCallbackContext.withCStrings(filters) { pointers in
            mosquitto_unsubscribe_multiple(pointer, &mid, Int32(filters.count), pointers, nil)
        }
        context.wakeup.packetQueued()
        if rc == MOSQ_ERR_SUCCESS.rawValue {
            context.shared.withLock { $0.client.unsubscribeSent(mid: mid, epoch: epoch) }.run()
        }
        context.logger.debug("MQTT unsubscribed", metadata: ["mqtt.filters": "\(filters)", "mqtt.rc": "\(rc)"])
    }
}

extension MQTTClient {
    /// Says that every message up to the one with `tag` (its ``MQTTMessage/deliveryTag``) is
    /// handled, in a client that acknowledges after handling
    /// (``MQTTAcknowledgement/afterHandling``): their acknowledgements may now go to the
    /// broker, which then sends more. Tags rise in delivery order; acknowledging a tag
    /// acknowledges every earlier one. Does nothing in a client that acknowledges on receipt.
    public func acknowledge(through tag: UInt64) {
        let context = self.context
        guard context.acknowledgesAfterHandling else { return }
        if context.shared.withLock({ $0.deliveries.acknowledge(through: tag) }) { context.wakeup.wake() }
    }
}

/// How a shutdown's hand-over ended, and what the log says of it.
private enum HandOverOutcome {
    /// Quiet: everything the broker had given this client arrived before the DISCONNECT.
    case done
    /// The limit came first: messages were still `arriving`, or the consumer had not yet
    /// handled what it was given.
    case cutShort(arriving: Bool)
    /// The task was cancelled (its caller's time to stop ran out).
    case cancelled

    func log(to logger: Logger, persistent: Bool, metadata: Logger.Metadata) {
        let rest =
            persistent
            ? "what the broker still had for this client stays in its session until a client with its id connects"
            : "the broker drops what it still had for this client with its clean session"
        switch self {
        case .done:
            logger.info(
                "MQTT hand-over done: everything the broker had given this client arrived before the DISCONNECT", metadata: metadata)
        case .cutShort(let arriving):
            let why = arriving ? "messages were still arriving" : "the consumer had not handled what it was given"
            logger.log(
                level: persistent ? .warning : .notice, "MQTT hand-over cut short at its limit (\(why)): \(rest)", metadata: metadata)
        case .cancelled:
            logger.log(level: persistent ? .warning : .notice, "MQTT hand-over cancelled: \(rest)", metadata: metadata)
        }
    }
}
