import CMosquitto
import Logging
import MQTTCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The single owner of a `struct mosquitto *` and of the retained callback context.
///
/// `@unchecked Sendable` is safe because: the pointer is immutable after `init`; every
/// libmosquitto call made through it from several threads (publish, subscribe, unsubscribe,
/// disconnect from API callers; loop and reconnect from the loop thread) is one libmosquitto
/// makes thread-safe with `mosquitto_threaded_set(true)`; and `mosquitto_destroy` runs only
/// in `deinit`, when no other thread can hold a reference (the loop thread holds one while it
/// runs).
package final class MosquittoHandle: @unchecked Sendable {  // safe: see the doc comment above
    package let pointer: OpaquePointer
    let context: MQTTCallbackContext
    private let unmanagedContext: Unmanaged<MQTTCallbackContext>

    init(configuration: MQTTConfiguration, logger: Logger) throws(MQTTError) {
        MosquittoLibrary.ensureInitialised()
        let context = try MQTTCallbackContext(configuration: configuration, logger: logger)
        let unmanaged = Unmanaged.passRetained(context)
        let cleanStart = configuration.session == .clean
        guard let pointer = mosquitto_new(configuration.clientID, cleanStart, unmanaged.toOpaque()) else {
            unmanaged.release()
            throw .invalidConfiguration("libmosquitto refused client id '\(configuration.clientID)' (\(String(cString: strerror(errno))))")
        }
        self.pointer = pointer
        self.context = context
        self.unmanagedContext = unmanaged
        // Fully initialised: if configure throws, deinit destroys the handle and releases the context.
        try configure(configuration)
    }

    deinit {
        mosquitto_destroy(pointer)
        unmanagedContext.release()
    }

    private func check(_ rc: Int32, _ what: @autoclosure () -> String) throws(MQTTError) {
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            throw .invalidConfiguration("\(what()): \(MQTTError.libraryMessage(rc))")
        }
    }

    private func configure(_ configuration: MQTTConfiguration) throws(MQTTError) {
        let mosq = pointer
        if let problem = configuration.brokerListProblem { throw .invalidConfiguration(problem) }
        // `.auto` starts with 5; the loop sets 3.1.1 before each attempt once it has fallen back.
        let version: Int32 = configuration.protocolVersion == .v311 ? MQTT_PROTOCOL_V311 : MQTT_PROTOCOL_V5
        try check(mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, version), "protocol version")
        try check(mosquitto_threaded_set(mosq, true), "threaded mode")
        // Nagle's algorithm off: a fix PUBLISH written right after a heading PUBLISH (QoS 0, no
        // reply) would otherwise wait for the broker's delayed ACK of the heading, ~40 ms.
        try check(mosquitto_int_option(mosq, MOSQ_OPT_TCP_NODELAY, 1), "TCP no-delay")
        try check(
            mosquitto_int_option(mosq, MOSQ_OPT_SEND_MAXIMUM, Int32(clamping: max(1, configuration.maxInflightMessages))),
            "max in-flight messages")
        if let receiveMaximum = configuration.receiveMaximum {
            try check(
                mosquitto_int_option(mosq, MOSQ_OPT_RECEIVE_MAXIMUM, Int32(clamping: min(max(1, receiveMaximum), 65_535))),
                "receive maximum")
        }
        if let username = configuration.effectiveUsername {
            try check(mosquitto_username_pw_set(mosq, username, configuration.password), "user name and password")
        }
        if let will = configuration.will {
            try MQTTTopicFilter.validate(topic: will.topic)
            let rc = will.payload.withUnsafeBytes { bytes in
                mosquitto_will_set_v5(mosq, will.topic, Int32(bytes.count), bytes.baseAddress, Int32(will.qos.rawValue), will.retain, nil)
            }
            try check(rc, "will message for '\(will.topic)'")
        }
        if configuration.broker.usesTLS {
            let tls = configuration.tls ?? MQTTTLSConfiguration()
            if tls.caFile == nil {
                try check(mosquitto_int_option(mosq, MOSQ_OPT_TLS_USE_OS_CERTS, 1), "system CA certificates")
            }
            if (tls.certificateFile == nil) != (tls.keyFile == nil) {
                throw .invalidConfiguration("a client certificate needs both certificateFile and keyFile")
            }
            try check(
                mosquitto_tls_set(mosq, tls.caFile, nil, tls.certificateFile, tls.keyFile, nil),
                "TLS files (CA \(tls.caFile ?? "system"), certificate \(tls.certificateFile ?? "none"))")
            try check(mosquitto_tls_opts_set(mosq, 1, nil, nil), "TLS peer verification")
            try check(mosquitto_tls_insecure_set(mosq, false), "TLS host name verification")
        }
        installCallbacks()
    }

    private func installCallbacks() {
        let mosq = pointer
        mosquitto_connect_v5_callback_set(mosq) { mosq, obj, reasonCode, _, _ in
            MQTTCallbackContext.from(obj)?.onConnect(mosq, reasonCode: reasonCode)
        }
        mosquitto_disconnect_v5_callback_set(mosq) { _, obj, reasonCode, _ in
            MQTTCallbackContext.from(obj)?.onDisconnect(reasonCode: reasonCode)
        }
        mosquitto_publish_v5_callback_set(mosq) { _, obj, mid, reasonCode, _ in
            MQTTCallbackContext.from(obj)?.onPublish(mid: mid, reasonCode: reasonCode)
        }
        mosquitto_subscribe_v5_callback_set(mosq) { _, obj, mid, count, granted, _ in
            let codes = (0..<Int(max(count, 0))).map { granted?[$0] ?? 0x80 }
            MQTTCallbackContext.from(obj)?.onSubscribe(mid: mid, codes: codes)
        }
        mosquitto_unsubscribe_v5_callback_set(mosq) { _, obj, mid, _ in
            MQTTCallbackContext.from(obj)?.onUnsubscribe(mid: mid)
        }
        mosquitto_message_v5_callback_set(mosq) { _, obj, message, properties in
            guard let context = MQTTCallbackContext.from(obj), let message, let topicPointer = message.pointee.topic else { return }
            let length = Int(max(message.pointee.payloadlen, 0))
            if let limit = context.configuration.maximumPacketSize, length > limit {
                // MQTT 3.1.1 cannot announce the limit: drop it before copying a byte of it.
                context.onOversizeMessage(bytes: length)
                return
            }
            // Copy topic and payload now: libmosquitto frees them when the callback returns.
            let topic = String(cString: topicPointer)
            let payload: [UInt8] = message.pointee.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: length)) } ?? []
            let qos = MQTTQoS(rawValue: Int(message.pointee.qos)) ?? .atMostOnce
            let identifiers = MQTTCallbackContext.subscriptionIdentifiers(properties)
            context.onMessage(
                MQTTMessage(topic: topic, payload: payload, qos: qos, retain: message.pointee.retain), identifiers: identifiers)
        }
        setLibraryLog(true)
    }

    /// Turns libmosquitto's log on or off. libmosquitto formats every line it has (two for each
    /// packet: "sending PUBLISH", "received PUBACK") with `vsnprintf` into a fresh buffer
    /// whenever a callback is set, whatever its level: a cost per message. The log matters while
    /// connecting (it names TLS failures, see ``MQTTCallbackContext/connectError(code:errnoValue:)``),
    /// so the connection loop turns it on for each attempt and off once connected, unless the
    /// logger shows trace lines.
    func setLibraryLog(_ on: Bool) {
        guard on else {
            mosquitto_log_callback_set(pointer, nil)
            return
        }
        mosquitto_log_callback_set(pointer) { _, obj, level, line in
            guard let context = MQTTCallbackContext.from(obj), let line else { return }
            context.onLog(level: level, line: String(cString: line))
        }
    }
}
