import CMosquitto

/// What went wrong in the MQTT client, in words a user can act on.
public enum MQTTError: Error, Sendable, Hashable, CustomStringConvertible {
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

    /// A sentence saying what happened, for logs and command-line errors.
    public var description: String {
        switch self {
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
