import CMosquitto

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

    /// The failure with its details; internal, so that it can grow.
    enum Failure: Sendable, Hashable {
        /// The broker URL could not be parsed.
        case invalidBrokerURL(String, reason: String)
        /// A topic or topic filter is not valid MQTT.
        case invalidTopic(String, reason: String)
        /// A configuration value libmosquitto refused (file not found, bad value…).
        case invalidConfiguration(String)
        /// Nothing accepts connections at host:port (TCP connection refused).
        case connectionRefused(host: String, port: Int)
        /// The host name could not be resolved (DNS failure).
        case hostNotFound(host: String)
        /// Another network failure while connecting (unreachable, timed out…).
        case network(host: String, port: Int, detail: String)
        /// TLS: the server's certificate is not signed by a trusted CA (or is expired/invalid).
        case tlsCertificateNotTrusted(host: String, detail: String)
        /// TLS: the server's certificate does not name the host we connected to.
        case tlsHostnameMismatch(host: String)
        /// Another TLS failure (protocol, client certificate or key file…).
        case tls(host: String, detail: String)
        /// The broker refused the user name or password (CONNACK 0x86 / 3.1.1 code 4, or "not
        /// authorized" in answer to a CONNECT that carried credentials, as mosquitto sends).
        case badUserNameOrPassword(reasonCode: Int)
        /// The broker refused the connection as not authorized (CONNACK 0x87 / 3.1.1 code 5).
        case notAuthorized(reasonCode: Int)
        /// The broker refused the connection for another reason (CONNACK reason code).
        case connectionRejected(reasonCode: Int, reason: String)
        /// The operation needs a connection and there is none.
        case notConnected
        /// The connection was lost before the operation completed.
        case connectionLost(reason: String)
        /// The broker answered a publish with a failure reason code (MQTT 5).
        case publishRejected(topic: String, reasonCode: Int, reason: String)
        /// The broker refused a subscription (SUBACK failure).
        case subscribeRejected(filters: [String], reasonCode: Int, reason: String)
        /// The client has been shut down.
        case shutdown
        /// Another libmosquitto error.
        case library(operation: String, code: Int32, message: String)
    }

    let failure: Failure

    init(_ failure: Failure) {
        self.failure = failure
    }

    /// A sentence saying what happened, for logs and command-line errors.
    public var description: String {
        switch failure {
        case .invalidBrokerURL(let url, let reason): "invalid broker URL '\(url)': \(reason)"
        case .invalidTopic(let topic, let reason): "invalid topic '\(topic)': \(reason)"
        case .invalidConfiguration(let detail): "invalid MQTT configuration: \(detail)"
        case .connectionRefused(let host, let port): "connection refused by \(host):\(port) (is the broker running?)"
        case .hostNotFound(let host): "broker host '\(host)' not found (DNS lookup failed)"
        case .network(let host, let port, let detail): "cannot reach \(host):\(port): \(detail)"
        case .tlsCertificateNotTrusted(let host, let detail):
            "TLS: the certificate of \(host) is not trusted (not signed by the configured CA): \(detail)"
        case .tlsHostnameMismatch(let host): "TLS: the broker's certificate does not match the host name '\(host)'"
        case .tls(let host, let detail): "TLS failure with \(host): \(detail)"
        case .badUserNameOrPassword(let code): "bad user name or password (broker reason code \(Self.hex(code)))"
        case .notAuthorized(let code): "not authorized by the broker (reason code \(Self.hex(code)))"
        case .connectionRejected(let code, let reason): "connection rejected by the broker: \(reason) (reason code \(Self.hex(code)))"
        case .notConnected: "not connected to the broker"
        case .connectionLost(let reason): "connection to the broker lost: \(reason)"
        case .publishRejected(let topic, let code, let reason):
            "publish to '\(topic)' rejected by the broker: \(reason) (reason code \(Self.hex(code)))"
        case .subscribeRejected(let filters, let code, let reason):
            "subscription to \(filters) rejected by the broker: \(reason) (reason code \(Self.hex(code)))"
                + (code == 0x87 || code == 0x80 ? "; check the broker's ACL for this user and these topics" : "")
        case .shutdown: "the MQTT client has been shut down"
        case .library(let operation, let code, let message): "\(operation) failed: \(message) (libmosquitto error \(code))"
        }
    }

    // MARK: what a caller inspects

    /// What kind of failure it is.
    public var code: Code {
        switch failure {
        case .invalidBrokerURL: .invalidBrokerURL
        case .invalidTopic: .invalidTopic
        case .invalidConfiguration: .invalidConfiguration
        case .connectionRefused: .connectionRefused
        case .hostNotFound: .hostNotFound
        case .network: .network
        case .tlsCertificateNotTrusted: .tlsCertificateNotTrusted
        case .tlsHostnameMismatch: .tlsHostnameMismatch
        case .tls: .tls
        case .badUserNameOrPassword: .badUserNameOrPassword
        case .notAuthorized: .notAuthorized
        case .connectionRejected: .connectionRejected
        case .notConnected: .notConnected
        case .connectionLost: .connectionLost
        case .publishRejected: .publishRejected
        case .subscribeRejected: .subscribeRejected
        case .shutdown: .shutdown
        case .library: .library
        }
    }

    /// The broker's host, for connection and TLS failures.
    public var host: String? {
        switch failure {
        case .connectionRefused(let host, _), .hostNotFound(let host), .network(let host, _, _),
            .tlsCertificateNotTrusted(let host, _), .tlsHostnameMismatch(let host), .tls(let host, _):
            host
        default: nil
        }
    }

    /// The broker's port, for `connectionRefused` and `network`.
    public var port: Int? {
        switch failure {
        case .connectionRefused(_, let port), .network(_, let port, _): port
        default: nil
        }
    }

    /// The MQTT reason code the broker answered with (CONNACK, PUBACK, SUBACK), if any.
    public var reasonCode: Int? {
        switch failure {
        case .badUserNameOrPassword(let code), .notAuthorized(let code), .connectionRejected(let code, _),
            .publishRejected(_, let code, _), .subscribeRejected(_, let code, _):
            code
        default: nil
        }
    }

    /// The topic of a refused publish, the invalid topic or filter, or the invalid broker URL.
    public var topic: String? {
        switch failure {
        case .publishRejected(let topic, _, _), .invalidTopic(let topic, _), .invalidBrokerURL(let topic, _): topic
        default: nil
        }
    }

    /// The filters of a refused subscription (empty otherwise).
    public var filters: [String] {
        if case .subscribeRejected(let filters, _, _) = failure { return filters }
        return []
    }

    /// The free-text part: why a URL, topic or configuration is invalid, the broker's reason,
    /// the network or TLS detail, libmosquitto's message. Empty when the code says it all.
    public var detail: String {
        switch failure {
        case .invalidBrokerURL(_, let text), .invalidTopic(_, let text), .invalidConfiguration(let text),
            .network(_, _, let text), .tlsCertificateNotTrusted(_, let text), .tls(_, let text),
            .connectionRejected(_, let text), .connectionLost(let text), .publishRejected(_, _, let text),
            .subscribeRejected(_, _, let text), .library(_, _, let text):
            text
        case .connectionRefused, .hostNotFound, .tlsHostnameMismatch, .badUserNameOrPassword, .notAuthorized,
            .notConnected, .shutdown:
            ""
        }
    }

    // MARK: making one

    /// The broker URL `url` could not be parsed, because of `reason`.
    public static func invalidBrokerURL(_ url: String, reason: String) -> MQTTError { MQTTError(.invalidBrokerURL(url, reason: reason)) }
    /// `topic` is not a valid MQTT topic or filter, because of `reason`.
    public static func invalidTopic(_ topic: String, reason: String) -> MQTTError { MQTTError(.invalidTopic(topic, reason: reason)) }
    /// libmosquitto refused a setting.
    public static func invalidConfiguration(_ detail: String) -> MQTTError { MQTTError(.invalidConfiguration(detail)) }
    /// TCP connection refused at `host`:`port`.
    public static func connectionRefused(host: String, port: Int) -> MQTTError { MQTTError(.connectionRefused(host: host, port: port)) }
    /// `host` could not be resolved.
    public static func hostNotFound(host: String) -> MQTTError { MQTTError(.hostNotFound(host: host)) }
    /// Another network failure while connecting.
    public static func network(host: String, port: Int, detail: String) -> MQTTError {
        MQTTError(.network(host: host, port: port, detail: detail))
    }
    /// The server's certificate is not trusted.
    public static func tlsCertificateNotTrusted(host: String, detail: String) -> MQTTError {
        MQTTError(.tlsCertificateNotTrusted(host: host, detail: detail))
    }
    /// The server's certificate does not name `host`.
    public static func tlsHostnameMismatch(host: String) -> MQTTError { MQTTError(.tlsHostnameMismatch(host: host)) }
    /// Another TLS failure.
    public static func tls(host: String, detail: String) -> MQTTError { MQTTError(.tls(host: host, detail: detail)) }
    /// The broker refused the user name or password.
    public static func badUserNameOrPassword(reasonCode: Int) -> MQTTError { MQTTError(.badUserNameOrPassword(reasonCode: reasonCode)) }
    /// The broker refused the connection as not authorized.
    public static func notAuthorized(reasonCode: Int) -> MQTTError { MQTTError(.notAuthorized(reasonCode: reasonCode)) }
    /// The broker refused the connection for another reason.
    public static func connectionRejected(reasonCode: Int, reason: String) -> MQTTError {
        MQTTError(.connectionRejected(reasonCode: reasonCode, reason: reason))
    }
    /// The operation needs a connection and there is none.
    public static let notConnected = MQTTError(.notConnected)
    /// The connection was lost before the operation completed.
    public static func connectionLost(reason: String) -> MQTTError { MQTTError(.connectionLost(reason: reason)) }
    /// The broker refused a publish to `topic`.
    public static func publishRejected(topic: String, reasonCode: Int, reason: String) -> MQTTError {
        MQTTError(.publishRejected(topic: topic, reasonCode: reasonCode, reason: reason))
    }
    /// The broker refused a subscription to `filters`.
    public static func subscribeRejected(filters: [String], reasonCode: Int, reason: String) -> MQTTError {
        MQTTError(.subscribeRejected(filters: filters, reasonCode: reasonCode, reason: reason))
    }
    /// The client has been shut down.
    public static let shutdown = MQTTError(.shutdown)
    /// Another libmosquitto error in `operation` (`code` is its `MOSQ_ERR_*` value).
    public static func library(operation: String, code: Int32, message: String) -> MQTTError {
        MQTTError(.library(operation: operation, code: code, message: message))
    }

    private static func hex(_ code: Int) -> String {
        "0x" + String(code, radix: 16, uppercase: true)
    }
}

extension MQTTError {
    /// Maps a refused CONNACK to an error. MQTT 5 codes are ≥ 0x80, 3.1.1 codes 1...5.
    static func connack(reasonCode: Int32, version: MQTTProtocolVersion, sentCredentials: Bool) -> MQTTError {
        let code = Int(reasonCode)
        switch (version, code) {
        case (.v5, 0x86), (.v311, 4):
            return .badUserNameOrPassword(reasonCode: code)
        case (.v5, 0x87), (.v311, 5), (.v5, 0x8C):
            return sentCredentials ? .badUserNameOrPassword(reasonCode: code) : .notAuthorized(reasonCode: code)
        case (.v5, _):
            return .connectionRejected(reasonCode: code, reason: Self.reasonString(reasonCode))
        case (.v311, _):
            return .connectionRejected(reasonCode: code, reason: String(cString: mosquitto_connack_string(reasonCode)))
        }
    }

    /// libmosquitto's text for an MQTT 5 reason code.
    static func reasonString(_ code: Int32) -> String {
        String(cString: mosquitto_reason_string(code))
    }

    /// libmosquitto's text for one of its `MOSQ_ERR_*` codes.
    static func libraryMessage(_ code: Int32) -> String {
        String(cString: mosquitto_strerror(code))
    }
}
