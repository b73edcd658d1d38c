import CMosquitto
import FleetcastCore
import JSONEscaping
import Logging
import MQTTCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension MQTTClientState.Actions
where
    Ack == MQTTCompletion, Sink == AsyncThrowingStream<MQTTMessage, any Error>.Continuation,
    Observer == AsyncStream<MQTTConnectionState>.Continuation, Waiter == FleetcastCore.Waiter<Void>
{
    /// Performs the actions; call it after releasing the lock.
    func run() {
        for ack in succeed { ack.resume() }
        for (ack, error) in fail { ack.resume(throwing: error) }
        for ack in cancel { ack.resume(throwing: CancellationError()) }
        for (observer, state) in notify { observer.yield(state) }
        for observer in finishObservers { observer.finish() }
        for (sink, error) in finishStreams {
            if let error { sink.finish(throwing: error) } else { sink.finish() }
        }
        for waiter in resume { waiter.resume() }
    }
}

/// The object behind libmosquitto's `obj` pointer: shared state and the logger the C
/// callbacks need (a C callback sees no task-local logger). Passed retained with
/// `Unmanaged.passRetained`; ``MosquittoHandle`` releases it after `mosquitto_destroy`.
package final class MQTTCallbackContext: Sendable {
    /// Everything the client's threads and tasks share, under one lock: one decision sees one
    /// consistent state (the loop's "is everything handled, and must it stop?" is one reading).
    struct Shared {
        /// The connection, its publishes, subscriptions and shutdown (``MQTTClientState``).
        var client: MQTTClientLiveState
        /// What the consumer has handled, in a client that acknowledges after handling (unused
        /// in one that acknowledges on receipt).
        var deliveries = MQTTDeliveryLedger()
        /// Whether a message no stream asked for was named in the log.
        var unwantedLogged = false
        /// Messages dropped for their size (``onOversizeMessage(bytes:)``).
        var oversizeDropped = 0
        /// The bytes the broker connections have cost (``MQTTClient/traffic``).
        var traffic = MQTTTrafficMeter()
    }

    let shared: SanitizerVisibleMutex<Shared>
    let logger: Logger
    let configuration: MQTTConfiguration
    /// Whether the client acknowledges after handling (``MQTTAcknowledgement/afterHandling``).
    let acknowledgesAfterHandling: Bool
    /// Wakes the network loop: a connected client that acknowledges on receipt when it sleeps and
    /// a packet is queued from another thread (``LoopWakeup/packetQueued()``); a client that
    /// acknowledges after handling when the consumer acknowledges (its loop polls the socket and
    /// this pipe, and new requests wait for its next turn, at most
    /// `MQTTConnectionLoop.handlingPollMilliseconds`).
    let wakeup: LoopWakeup

    init(configuration: MQTTConfiguration, logger: Logger) throws(MQTTError) {
        self.configuration = configuration
        self.logger = logger
        self.shared = SanitizerVisibleMutex(
            Shared(
                client: MQTTClientLiveState(
                    protocolVersion: configuration.protocolVersion,
                    sentCredentials: configuration.effectiveUsername != nil,
                    brokerCount: configuration.brokers.count,
                    firstBroker: configuration.firstBrokerIndex
                )))
        acknowledgesAfterHandling = configuration.acknowledgement == .afterHandling
        wakeup = try LoopWakeup()
    }

    /// Recovers the context from libmosquitto's `obj` pointer without changing its retain count.
    static func from(_ pointer: UnsafeMutableRawPointer?) -> MQTTCallbackContext? {
        guard let pointer else { return nil }
        return Unmanaged<MQTTCallbackContext>.fromOpaque(pointer).takeUnretainedValue()
    }

    // MARK: callbacks (libmosquitto's thread; never block)

    func onConnect(_ mosq: OpaquePointer?, reasonCode: Int32) {
        let (restore, actions, fellBack, v5, broker, afterClose) = shared.withLock {
            let before = $0.client.connectionsAfterClose
            let answer = $0.client.connack(reasonCode: reasonCode)
            let after = $0.client.connectionsAfterClose
            return (
                answer.restore, answer.actions, answer.fellBack, $0.client.protocolVersion == .v5, $0.client.brokerIndex,
                after > before ? after : 0
            )
        }
        if afterClose > 0 {
            // Said when 3.1.1 is accepted, not at each close (a proxy in front of a broker that is
            // down closes alike); once per client, then at each reconnection at debug.
            logger.log(
                level: afterClose == 1 ? .notice : .debug,
                "MQTT broker closed the connection before answering an MQTT 5 CONNECT and accepted MQTT 3.1.1; connected with 3.1.1 (set the protocol to 3.1.1 to skip this step)",
                metadata: ["mqtt.node": "\(brokerAddress(broker))"])
        }
        if fellBack {
            // Once per client: it speaks 3.1.1 from now on.
            logger.notice(
                "MQTT broker does not speak MQTT 5; connecting with MQTT 3.1.1 (set the protocol to 3.1.1 to skip this step)",
                metadata: ["mqtt.node": "\(brokerAddress(broker))", "mqtt.reason": "\(reasonCode)"])
            actions.run()
            return
        }
        if reasonCode == 0 {
            logger.info(
                "MQTT connected",
                metadata: ["mqtt.node": "\(brokerAddress(broker))", "mqtt.protocol": "\(v5 ? "5" : "3.1.1")"])
            var sent: [(mid: Int32, filter: String)] = []
            var failed: [(filter: String, error: MQTTError)] = []
            for entry in restore {
                var mid: Int32 = 0
                let rc = sendSubscribe(
                    mosq, filters: [entry.filter], qos: entry.qos, identifier: v5 ? entry.identifier : nil, mid: &mid)
                if rc == MOSQ_ERR_SUCCESS.rawValue {
                    sent.append((mid, entry.filter))
                } else if rc == MOSQ_ERR_NO_CONN.rawValue || rc == MOSQ_ERR_CONN_LOST.rawValue {
                    // Lost again already: the next CONNACK restores it.
                    continue
                } else {
                    failed.append((entry.filter, MQTTClient.operationError(rc, operation: "restore the subscription to '\(entry.filter)'")))
                }
            }
            actions.run()
            if !restore.isEmpty {
                logger.debug("MQTT subscriptions restored", metadata: ["mqtt.filters": "\(restore.map(\.filter))"])
            }
            if !failed.isEmpty {
                // Unsendable: their streams end with the error (the subscriber must know).
                logger.info(
                    "MQTT could not restore subscriptions",
                    metadata: [
                        "mqtt.filters": "\(failed.map(\.filter))", "mqtt.error": "\(failed[0].error)",
                    ])
            }
            shared.withLock { $0.client.restoreSent(sent, failed: failed) }.run()
        } else {
            logger.info("MQTT connection refused by broker", metadata: ["mqtt.reason": "\(reasonCode)"])
            actions.run()
        }
    }

    func onDisconnect(reasonCode: Int32) {
        logger.debug("MQTT disconnected", metadata: ["mqtt.reason": "\(reasonCode)"])
    }

    func onPublish(mid: Int32, reasonCode: Int32) {
        shared.withLock { $0.client.publishAcknowledged(mid: mid, reasonCode: reasonCode) }.run()
    }

    func onSubscribe(mid: Int32, codes: [Int32]) {
        let actions = shared.withLock { $0.client.subscribeAcknowledged(mid: mid, codes: codes) }
        // A refusal nobody awaits (a restore after a reconnect): its streams end with the
        // error, and the log says why. An awaited one is the caller's to report.
        if actions.fail.isEmpty, let error = actions.finishStreams.lazy.compactMap(\.1).first {
            logger.info("MQTT broker refused a restored subscription", metadata: ["mqtt.error": "\(error)"])
        }
        actions.run()
    }

    func onUnsubscribe(mid: Int32) {
        shared.withLock { $0.client.unsubscribeAcknowledged(mid: mid) }.run()
    }

    func onMessage(_ message: MQTTMessage, identifiers: [UInt32]) {
        let (targets, streamsOpen) = shared.withLock {
            ($0.client.received(topic: message.topic, identifiers: identifiers), $0.client.hasOpenSubscription)
        }
        if targets.isEmpty {
            logger.trace("MQTT message matched no subscription", metadata: ["mqtt.topic": "\(JSONString.escaped(message.topic))"])
        }
        guard acknowledgesAfterHandling else {
            for target in targets { target.yield(message) }
            return
        }
        // Only this thread delivers: tags follow the order of the streams' elements.
        let what: MQTTDeliveryLedger.Delivery = !targets.isEmpty ? .handedOver : streamsOpen ? .unwanted : .orphaned
        var message = message
        let bytes = message.payload.count
        let now = ContinuousClock.now
        let (tag, firstUnwanted) = shared.withLock { shared in
            let tag = shared.deliveries.deliver(what, bytes: bytes, at: now)
            defer { if what == .unwanted { shared.unwantedLogged = true } }
            return (tag, what == .unwanted && !shared.unwantedLogged)
        }
        message.deliveryTag = tag
        if firstUnwanted {
            logger.info(
                "MQTT message on a topic no stream asked for (a subscription the persistent session kept): let go",
                metadata: ["mqtt.topic": "\(JSONString.escaped(message.topic))"])
        }
        var taken = targets.isEmpty
        for target in targets {
            if case .enqueued = target.yield(message) { taken = true }
        }
        // A stream that ended or dropped it: it must not be acknowledged with a later one.
        if !taken { shared.withLock { $0.deliveries.refused() } }
    }

    /// A message over ``MQTTConfiguration/maximumPacketSize`` arrived (a broker that could
    /// not be told the limit, MQTT 3.1.1): dropped unread; named once, then counted at debug.
    func onOversizeMessage(bytes: Int) {
        let count = shared.withLock { shared -> Int in
            shared.oversizeDropped += 1
            return shared.oversizeDropped
        }
        logger.log(
            level: count == 1 ? .warning : .debug, "A message larger than the maximum packet size was dropped unread",
            metadata: [
                "mqtt.bytes": "\(bytes)", "mqtt.maximumPacketSize": "\(configuration.maximumPacketSize ?? 0)", "mqtt.dropped": "\(count)",
            ])
    }

    func onLog(level: Int32, line: String) {
        // libmosquitto's lines quote topics from the wire.
        let line = JSONString.escaped(line)
        if level & Int32(MOSQ_LOG_ERR) != 0 || level & Int32(MOSQ_LOG_WARNING) != 0 {
            shared.withLock { $0.client.recordError(line) }
            logger.debug("libmosquitto error", metadata: ["mqtt.log": "\(line)"])
        } else {
            logger.trace("libmosquitto", metadata: ["mqtt.log": "\(line)"])
        }
    }

    // MARK: errors

    /// Whether a failed connect or loop step is the TLS layer's (the code, `errno` on a TLS
    /// connection, or OpenSSL in libmosquitto's recent error lines).
    func isTLSFailure(code: Int32, errnoValue: Int32) -> Bool {
        let (log, index) = shared.withLock { ($0.client.errorLog, $0.client.brokerIndex) }
        return code == MOSQ_ERR_TLS.rawValue || code == MOSQ_ERR_TLS_HANDSHAKE.rawValue
            || (brokerAddress(index).usesTLS && errnoValue == EPROTO) || log.contains(where: { $0.contains("OpenSSL") })
    }

    /// Explains a failed connect, reconnect or loop step from the libmosquitto code, `errno`
    /// and libmosquitto's recent error log lines (which name TLS verification failures).
    func connectError(code: Int32, errnoValue: Int32) -> MQTTError {
        let (log, index) = shared.withLock { ($0.client.errorLog, $0.client.brokerIndex) }
        let broker = brokerAddress(index)
        let joined = log.joined(separator: "; ")
        if isTLSFailure(code: code, errnoValue: errnoValue) {
            if log.contains(where: { $0.lowercased().contains("host name verification failed") }) {
                return .tlsHostnameMismatch(host: broker.host)
            }
            if log.contains(where: { $0.contains("certificate verify failed") }) {
                return .tlsCertificateNotTrusted(host: broker.host, detail: joined)
            }
            return .tls(host: broker.host, detail: joined.isEmpty ? MQTTError.libraryMessage(code) : joined)
        }
        switch code {
        case MOSQ_ERR_EAI.rawValue, MOSQ_ERR_LOOKUP.rawValue:
            return .hostNotFound(host: broker.host)
        case MOSQ_ERR_ERRNO.rawValue:
            if errnoValue == ECONNREFUSED { return .connectionRefused(host: broker.host, port: broker.port) }
            return .network(host: broker.host, port: broker.port, detail: String(cString: strerror(errnoValue)))
        case MOSQ_ERR_CONN_LOST.rawValue, MOSQ_ERR_NO_CONN.rawValue, MOSQ_ERR_KEEPALIVE.rawValue:
            return .connectionLost(reason: MQTTError.libraryMessage(code))
        default:
            return .library(operation: "connect", code: code, message: MQTTError.libraryMessage(code))
        }
    }

    // MARK: helpers

    /// The broker address at `index` of the configuration's list.
    func brokerAddress(_ index: Int) -> BrokerURL {
        let brokers = configuration.brokers
        return brokers[min(max(0, index), brokers.count - 1)]
    }

    /// The protocol spoken now (`.v5` or `.v311`; `.auto` has settled on one of them).
    var protocolVersion: MQTTProtocolVersion { shared.withLock { $0.client.protocolVersion } }

    /// Sends one SUBSCRIBE for `filters`; tagged with subscription `identifier` when one is
    /// given (MQTT 5 only: pass `nil` under 3.1.1).
    func sendSubscribe(_ mosq: OpaquePointer?, filters: [String], qos: MQTTQoS, identifier: UInt32?, mid: inout Int32) -> Int32 {
        var properties: OpaquePointer? = nil
        defer { mosquitto_property_free_all(&properties) }
        if let identifier {
            let rc = mosquitto_property_add_varint(&properties, Int32(MQTT_PROP_SUBSCRIPTION_IDENTIFIER.rawValue), identifier)
            guard rc == MOSQ_ERR_SUCCESS.rawValue else { return rc }
        }
        defer { wakeup.packetQueued() }
        return Self.withCStrings(filters) { pointers in
            mosquitto_subscribe_multiple(mosq, &mid, Int32(filters.count), pointers, Int32(qos.rawValue), 0, properties)
        }
    }

    /// The MQTT 5 subscription identifiers in a PUBLISH's properties.
    static func subscriptionIdentifiers(_ properties: OpaquePointer?) -> [UInt32] {
        var identifiers: [UInt32] = []
        var value: UInt32 = 0
        let key = Int32(MQTT_PROP_SUBSCRIPTION_IDENTIFIER.rawValue)
        var found = mosquitto_property_read_varint(properties, key, &value, false)
        while found != nil {
            identifiers.append(value)
            found = mosquitto_property_read_varint(found, key, &value, true)
        }
        return identifiers
    }

    /// Calls `body` with a C array of C strings for `strings`.
    static func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>?) -> R) -> R {
        let pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
        defer { for pointer in pointers { free(pointer) } }
        return pointers.withUnsafeBufferPointer { buffer in body(buffer.baseAddress) }
    }
}
