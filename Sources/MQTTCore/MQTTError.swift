/// What went wrong in the MQTT client, in words a user can act on.
///
/// A struct with a ``code``, not an enum, so that new kinds of failure can be added without
/// breaking code that inspects it (as swift-service-lifecycle's `ServiceGroupError` does):
/// compare ``code`` (`error.code == .connectionRefused`), read the details that code documents
/// (``host``, ``reasonCode``, ``topic``…), and let anything else fall through. Errors are made
/// with the static functions named after their code (`.connectionRefused(host:port:)`), and
/// compare equal when code and details are equal, so `#expect(throws: MQTTError.shutdown)`
/// works.
public struct MQTTError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure it is. New codes may be added in any release.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        fileprivate let name: String
        fileprivate init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The broker URL could not be parsed (``detail``: why; ``topic``: the URL).
        public static let invalidBrokerURL = Code("invalidBrokerURL")
        /// A topic or topic filter is not valid MQTT (``topic``; ``detail``: why).
        public static let invalidTopic = Code("invalidTopic")
        /// A configuration value libmosquitto refused (``detail``).
        public static let invalidConfiguration = Code("invalidConfiguration")
        /// Nothing accepts connections at ``host``:``port`` (TCP connection refused).
        public static let connectionRefused = Code("connectionRefused")
        /// ``host`` could not be resolved (DNS failure).
        public static let hostNotFound = Code("hostNotFound")
        /// Another network failure while connecting to ``host``:``port`` (``detail``).
        public static let network = Code("network")
        /// TLS: ``host``'s certificate is not signed by a trusted CA, or is expired or invalid.
        public static let tlsCertificateNotTrusted = Code("tlsCertificateNotTrusted")
        /// TLS: the server's certificate does not name ``host``.
        public static let tlsHostnameMismatch = Code("tlsHostnameMismatch")
        /// Another TLS failure with ``host`` (``detail``).
        public static let tls = Code("tls")
        /// The broker refused the user name or password (``reasonCode``).
        public static let badUserNameOrPassword = Code("badUserNameOrPassword")
        /// The broker refused the connection as not authorized (``reasonCode``).
        public static let notAuthorized = Code("notAuthorized")
        /// The broker refused the connection for another reason (``reasonCode``, ``detail``).
        public static let connectionRejected = Code("connectionRejected")
        /// The operation needs a connection and there is none.
        public static let notConnected = Code("notConnected")
        /// The connection was lost before the operation completed (``detail``).
        public static let connectionLost = Code("connectionLost")
        /// The broker answered a publish to ``topic`` with a failure ``reasonCode`` (MQTT 5).
        public static let publishRejected = Code("publishRejected")
        /// The broker refused a subscription to ``filters`` (SUBACK ``reasonCode``).
        public static let subscribeRejected = Code("subscribeRejected")
        /// The client has been shut down.
        public static let shutdown = Code("shutdown")
        /// Another libmosquitto error (``detail``: the operation and libmosquitto's message).
        public static let library = Code("library")
    }

    /// What kind of failure it is.
    public let code: Code
    /// A sentence saying what happened, for logs and command-line errors.
    public let description: String
    /// The broker's host, for connection and TLS failures.
    public let host: String?
    /// The broker's port, for `connectionRefused` and `network`.
    public let port: Int?
    /// The MQTT reason code the broker answered with (CONNACK, PUBACK, SUBACK), if any.
    public let reasonCode: Int?
    /// The topic of a refused publish, the invalid topic or filter, or the invalid broker URL.
    public let topic: String?
    /// The filters of a refused subscription (empty otherwise).
    public let filters: [String]
    /// The free-text part: why a URL, topic or configuration is invalid, the broker's reason,
    /// the network or TLS detail, libmosquitto's message. Empty when the code says it all.
    public let detail: String

    /// Each kind of failure is made in one place, its static function below, with its sentence.
    private init(
        _ code: Code, _ description: String, host: String? = nil, port: Int? = nil, reasonCode: Int? = nil,
        topic: String? = nil, filters: [String] = [], detail: String = ""
    ) {
        self.code = code
        self.description = description
        self.host = host
        self.port = port
        self.reasonCode = reasonCode
        self.topic = topic
        self.filters = filters
        self.detail = detail
    }

    // MARK: making one

    /// The broker URL `url` could not be parsed, because of `reason`.
    public static func invalidBrokerURL(_ url: String, reason: String) -> MQTTError {
        MQTTError(.invalidBrokerURL, "invalid broker URL '\(url)': \(reason)", topic: url, detail: reason)
    }
    /// `topic` is not a valid MQTT topic or filter, because of `reason`.
    public static func invalidTopic(_ topic: String, reason: String) -> MQTTError {
        MQTTError(.invalidTopic, "invalid topic '\(topic)': \(reason)", topic: topic, detail: reason)
    }
    /// libmosquitto refused a setting (file not found, bad value…).
    public static func invalidConfiguration(_ detail: String) -> MQTTError {
        MQTTError(.invalidConfiguration, "invalid MQTT configuration: \(detail)", detail: detail)
    }
    /// TCP connection refused at `host`:`port`.
    public static func connectionRefused(host: String, port: Int) -> MQTTError {
        MQTTError(.connectionRefused, "connection refused by \(host):\(port) (is the broker running?)", host: host, port: port)
    }
    /// `host` could not be resolved (DNS failure).
    public static func hostNotFound(host: String) -> MQTTError {
        MQTTError(.hostNotFound, "broker host '\(host)' not found (DNS lookup failed)", host: host)
    }
    /// Another network failure while connecting (unreachable, timed out…).
    public static func network(host: String, port: Int, detail: String) -> MQTTError {
        MQTTError(.network, "cannot reach \(host):\(port): \(detail)", host: host, port: port, detail: detail)
    }
    /// The server's certificate is not signed by a trusted CA (or is expired or invalid).
    public static func tlsCertificateNotTrusted(host: String, detail: String) -> MQTTError {
        MQTTError(
            .tlsCertificateNotTrusted, "TLS: the certificate of \(host) is not trusted (not signed by the configured CA): \(detail)",
            host: host, detail: detail)
    }
    /// The server's certificate does not name `host`, the host we connected to.
    public static func tlsHostnameMismatch(host: String) -> MQTTError {
        MQTTError(.tlsHostnameMismatch, "TLS: the broker's certificate does not match the host name '\(host)'", host: host)
    }
    /// Another TLS failure (protocol, client certificate or key file…).
    public static func tls(host: String, detail: String) -> MQTTError {
        MQTTError(.tls, "TLS failure with \(host): \(detail)", host: host, detail: detail)
    }
    /// The broker refused the user name or password (CONNACK 0x86 / 3.1.1 code 4, or "not
    /// authorized" in answer to a CONNECT that carried credentials, as mosquitto sends).
    public static func badUserNameOrPassword(reasonCode: Int) -> MQTTError {
        MQTTError(.badUserNameOrPassword, "bad user name or password (broker reason code \(hex(reasonCode)))", reasonCode: reasonCode)
    }
    /// The broker refused the connection as not authorized (CONNACK 0x87 / 3.1.1 code 5).
    public static func notAuthorized(reasonCode: Int) -> MQTTError {
        MQTTError(.notAuthorized, "not authorized by the broker (reason code \(hex(reasonCode)))", reasonCode: reasonCode)
    }
    /// The broker refused the connection for another reason (CONNACK reason code).
    public static func connectionRejected(reasonCode: Int, reason: String) -> MQTTError {
        MQTTError(
            .connectionRejected, "connection rejected by the broker: \(reason) (reason code \(hex(reasonCode)))",
            reasonCode: reasonCode, detail: reason)
    }
    /// The operation needs a connection and there is none.
    public static let notConnected = MQTTError(.notConnected, "not connected to the broker")
    /// The connection was lost before the operation completed.
    public static func connectionLost(reason: String) -> MQTTError {
        MQTTError(.connectionLost, "connection to the broker lost: \(reason)", detail: reason)
    }
    /// The broker answered a publish to `topic` with a failure reason code (MQTT 5).
    public static func publishRejected(topic: String, reasonCode: Int, reason: String) -> MQTTError {
        MQTTError(
            .publishRejected, "publish to '\(topic)' rejected by the broker: \(reason) (reason code \(hex(reasonCode)))",
            reasonCode: reasonCode, topic: topic, detail: reason)
    }
    /// The broker refused a subscription to `filters` (SUBACK failure).
    public static func subscribeRejected(filters: [String], reasonCode: Int, reason: String) -> MQTTError {
        let hint = reasonCode == 0x87 || reasonCode == 0x80 ? "; check the broker's ACL for this user and these topics" : ""
        return MQTTError(
            .subscribeRejected, "subscription to \(filters) rejected by the broker: \(reason) (reason code \(hex(reasonCode)))\(hint)",
            reasonCode: reasonCode, filters: filters, detail: reason)
    }
    /// The client has been shut down.
    public static let shutdown = MQTTError(.shutdown, "the MQTT client has been shut down")
    /// Another libmosquitto error in `operation` (`code` is its `MOSQ_ERR_*` value).
    public static func library(operation: String, code: Int32, message: String) -> MQTTError {
        MQTTError(.library, "\(operation) failed: \(message) (libmosquitto error \(code))", detail: message)
    }

    private static func hex(_ code: Int) -> String {
        "0x" + String(code, radix: 16, uppercase: true)
    }
}

extension MQTTError {
    /// Maps a refused CONNACK to an error. MQTT 5 codes are ≥ 0x80, 3.1.1 codes 1...5.
    package static func connack(reasonCode: Int32, version: MQTTProtocolVersion, sentCredentials: Bool) -> MQTTError {
        let code = Int(reasonCode)
        // `.auto` is MQTT 5 until the broker refuses it; the state passes the version spoken.
        switch (version == .v311 ? MQTTProtocolVersion.v311 : .v5, code) {
        case (.v5, 0x86), (.v311, 4):
            return .badUserNameOrPassword(reasonCode: code)
        case (.v5, 0x87), (.v311, 5), (.v5, 0x8C):
            return sentCredentials ? .badUserNameOrPassword(reasonCode: code) : .notAuthorized(reasonCode: code)
        case (.v5, _), (.auto, _):
            return .connectionRejected(reasonCode: code, reason: Self.reasonString(reasonCode))
        case (.v311, _):
            return .connectionRejected(reasonCode: code, reason: Self.connackString(reasonCode))
        }
    }

    /// The MQTT 5 specification's name of a reason code (its table 2.4, as libmosquitto words it).
    package static func reasonString(_ code: Int32) -> String {
        reasonNames[code] ?? "Unknown reason"
    }

    /// The MQTT 3.1.1 CONNACK return code's meaning (§3.2.2.3).
    package static func connackString(_ code: Int32) -> String {
        switch code {
        case 0: "Connection Accepted."
        case 1: "Connection Refused: unacceptable protocol version."
        case 2: "Connection Refused: identifier rejected."
        case 3: "Connection Refused: broker unavailable."
        case 4: "Connection Refused: bad user name or password."
        case 5: "Connection Refused: not authorised."
        default: "Connection Refused: unknown reason."
        }
    }

    private static let reasonNames: [Int32: String] = [
        0x00: "Success", 0x01: "Granted QoS 1", 0x02: "Granted QoS 2", 0x04: "Disconnect with Will Message",
        0x10: "No matching subscribers", 0x11: "No subscription existed", 0x18: "Continue authentication",
        0x19: "Re-authenticate", 0x80: "Unspecified error", 0x81: "Malformed Packet", 0x82: "Protocol Error",
        0x83: "Implementation specific error", 0x84: "Unsupported Protocol Version", 0x85: "Client Identifier not valid",
        0x86: "Bad User Name or Password", 0x87: "Not authorized", 0x88: "Server unavailable", 0x89: "Server busy",
        0x8A: "Banned", 0x8B: "Server shutting down", 0x8C: "Bad authentication method", 0x8D: "Keep Alive timeout",
        0x8E: "Session taken over", 0x8F: "Topic Filter invalid", 0x90: "Topic Name invalid",
        0x91: "Packet Identifier in use", 0x92: "Packet Identifier not found", 0x93: "Receive Maximum exceeded",
        0x94: "Topic Alias invalid", 0x95: "Packet too large", 0x96: "Message rate too high", 0x97: "Quota exceeded",
        0x98: "Administrative action", 0x99: "Payload format invalid", 0x9A: "Retain not supported",
        0x9B: "QoS not supported", 0x9C: "Use another server", 0x9D: "Server moved",
        0x9E: "Shared Subscriptions not supported", 0x9F: "Connection rate exceeded", 0xA0: "Maximum connect time",
        0xA1: "Subscription identifiers not supported", 0xA2: "Wildcard Subscriptions not supported",
    ]
}
