/// TLS settings for `mqtts://` connections. The server's certificate chain and host name are
/// always verified.
public struct MQTTTLSConfiguration: Sendable, Hashable {
    /// PEM file of the CA certificate(s) that sign the broker's certificate; `nil` uses the
    /// operating system's trust store.
    public var caFile: String?
    /// PEM client certificate, for brokers that require client authentication.
    public var certificateFile: String?
    /// PEM private key of the client certificate (unencrypted).
    public var keyFile: String?

    /// Creates TLS settings.
    public init(caFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil) {
        self.caFile = caFile
        self.certificateFile = certificateFile
        self.keyFile = keyFile
    }
}

/// Everything an ``MQTTClient`` needs to connect. The password is a value the caller read
/// from a file or the environment; it is never logged and never part of `description`.
public struct MQTTConfiguration: Sendable {
    /// The broker address; `mqtts://` turns TLS on.
    public var broker: BrokerURL
    /// More addresses of the same broker service: the other nodes of a cluster. The client
    /// connects to one of ``brokers`` at a time; when a connection cannot be made or is lost, it
    /// goes on to the next, in turn, with the reconnect backoff (a first connect tries each once
    /// before it fails). All use TLS or none, and the same user name. Empty by default.
    public var otherBrokers: [BrokerURL]
    /// The MQTT client identifier (unique per broker).
    public var clientID: String
    /// `.auto` by default: MQTT 5, and 3.1.1 with a broker that refuses 5.
    public var protocolVersion: MQTTProtocolVersion
    /// The keep-alive interval (whole seconds, at least 5).
    public var keepAlive: Duration
    /// The user name; overrides the one in the URL.
    public var username: String?
    /// The password, as a value (never on a command line, never logged).
    public var password: String?
    /// TLS settings; used when `broker.usesTLS` (defaults apply when `nil`).
    public var tls: MQTTTLSConfiguration?
    /// The will message registered with the broker at each connect.
    public var will: MQTTWill?
    /// How many QoS ≥ 1 publishes may await their acknowledgement at once; more are queued
    /// inside libmosquitto and sent as acknowledgements arrive.
    public var maxInflightMessages: Int
    /// The backoff between reconnection attempts after a connection is lost.
    public var reconnect: MQTTReconnectPolicy
    /// How long a connection attempt waits for the broker's CONNACK once TCP (and TLS) is up
    /// before it is dropped and the next attempt (the next node of ``brokers``) is made: a node
    /// that accepts connections and does not answer them would otherwise hold the client for
    /// one and a half keep-alives. 10 s by default.
    public var connackTimeout: Duration = .seconds(10)
    /// The session: a clean one at every connect (the default), or one the broker keeps
    /// while the client is away, with its subscriptions and the QoS ≥ 1 messages it has not
    /// acknowledged, so that a client killed and restarted misses nothing.
    public var session: MQTTSession
    /// How many QoS ≥ 1 messages the broker may send before the client acknowledges them
    /// (MQTT 5 Receive Maximum, 1...65,535); `nil` leaves libmosquitto's default (20). Under
    /// MQTT 3.1.1 the broker's own limit applies.
    public var receiveMaximum: Int?
    /// When received QoS ≥ 1 messages are acknowledged to the broker: as they arrive (the
    /// default), or once the consumer says it has handled them (``MQTTClient/acknowledge(through:)``).
    public var acknowledgement: MQTTAcknowledgement
    /// In a client that acknowledges after handling: the payload bytes the consumer may hold
    /// unhandled before the client stops reading from the broker (TCP then holds the broker
    /// back) until it catches up; `nil`: no bound beyond ``receiveMaximum`` messages. What a
    /// consumer holds then stays under this plus one message, whatever the messages carry.
    public var receiveBudgetBytes: Int?
    /// The largest packet the client takes, in bytes (topic, properties and payload). Under
    /// MQTT 5 it is announced in CONNECT (Maximum Packet Size), so the broker never sends a
    /// larger one: a hostile or mistaken 60 MB retained message costs the client nothing.
    /// Under MQTT 3.1.1, which cannot announce it, a larger message is dropped before its
    /// payload is copied, and counted. `nil`: no limit (libmosquitto's 256 MB).
    public var maximumPacketSize: Int?
    /// How long the network loop waits for the socket at most in one turn, in milliseconds: it
    /// checks the keep-alive at least this often; a request from another thread ends the wait
    /// earlier. 1,000 (a second); tests lengthen it to show that the wake-up alone does it.
    package var turnTimeoutMilliseconds: Int32 = 1000

    /// Creates a configuration.
    public init(
        broker: BrokerURL,
        otherBrokers: [BrokerURL] = [],
        clientID: String,
        protocolVersion: MQTTProtocolVersion = .auto,
        keepAlive: Duration = .seconds(30),
        username: String? = nil,
        password: String? = nil,
        tls: MQTTTLSConfiguration? = nil,
        will: MQTTWill? = nil,
        maxInflightMessages: Int = 20,
        reconnect: MQTTReconnectPolicy = MQTTReconnectPolicy(),
        session: MQTTSession = .clean,
        receiveMaximum: Int? = nil,
        acknowledgement: MQTTAcknowledgement = .onReceipt,
        maximumPacketSize: Int? = nil
    ) {
        self.broker = broker
        self.otherBrokers = otherBrokers
        self.clientID = clientID
        self.protocolVersion = protocolVersion
        self.keepAlive = keepAlive
        self.username = username
        self.password = password
        self.tls = tls
        self.will = will
        self.maxInflightMessages = maxInflightMessages
        self.reconnect = reconnect
        self.session = session
        self.receiveMaximum = receiveMaximum
        self.acknowledgement = acknowledgement
        self.maximumPacketSize = maximumPacketSize
    }

    /// The user name actually sent: the explicit one, else the URL's.
    package var effectiveUsername: String? { username ?? broker.username }

    /// Every broker address: ``broker``, then ``otherBrokers``.
    public var brokers: [BrokerURL] { [broker] + otherBrokers }

    /// The broker of ``brokers`` that a first connect tries first: chosen from the client id
    /// (FNV-1a, so the same at every start), so that a fleet whose vehicles are all given the
    /// same list spreads over the nodes instead of all crowding the first.
    public var firstBrokerIndex: Int {
        let count = 1 + otherBrokers.count
        guard count > 1 else { return 0 }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in clientID.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return Int(hash % UInt64(count))
    }

    /// The brokers as one line for logs and errors: `mqtt://a:1883` or
    /// `mqtt://a:1883,mqtt://b:1883`.
    public var brokerList: String { brokers.map(\.description).joined(separator: ",") }

    /// Why the broker list cannot be used (a mix of TLS and plain TCP, or of user names), or
    /// `nil`.
    package var brokerListProblem: String? {
        for other in otherBrokers {
            if other.usesTLS != broker.usesTLS {
                return "the brokers \(broker) and \(other) mix mqtt:// and mqtts://; give the nodes of one broker service the same scheme"
            }
            if username == nil, other.username != broker.username {
                return "the brokers \(broker) and \(other) name different users; one client logs in as one user"
            }
        }
        return nil
    }
}

extension MQTTConfiguration: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The settings for logs, with the password redacted.
    public var description: String {
        var parts = [
            "broker: \(brokerList)", "clientID: \(clientID)", "protocol: \(protocolVersion)",
            "keepAlive: \(keepAlive)", "maxInflightMessages: \(maxInflightMessages)", "session: \(session)",
        ]
        if let receiveMaximum { parts.append("receiveMaximum: \(receiveMaximum)") }
        if acknowledgement != .onReceipt { parts.append("acknowledgement: \(acknowledgement)") }
        if let maximumPacketSize { parts.append("maximumPacketSize: \(maximumPacketSize)") }
        if let username = effectiveUsername { parts.append("username: \(username)") }
        if password != nil { parts.append("password: <redacted>") }
        if let tls { parts.append("tls: \(tls)") }
        if let will { parts.append("will: \(will.topic)") }
        return "MQTTConfiguration(\(parts.joined(separator: ", ")))"
    }

    /// Same as `description`: the password never appears.
    public var debugDescription: String { description }

    /// A mirror without the password, so `dump` and reflection don't print it either.
    public var customMirror: Mirror {
        Mirror(self, children: ["description": description], displayStyle: .struct)
    }
}

/// The MQTT session a client asks the broker for.
public enum MQTTSession: Sendable, Hashable, CustomStringConvertible {
    /// A new session at every connect (Clean Start); nothing is kept while the client is away.
    case clean
    /// The broker keeps the session while the client is away, for `expiry` (MQTT 5 Session
    /// Expiry Interval, whole seconds up to 2³²−2; under MQTT 3.1.1 until the broker's own
    /// `persistent_client_expiration`): its subscriptions, and the QoS ≥ 1 messages that
    /// arrive meanwhile or were not acknowledged, which it sends on the next connect. Needs a
    /// client id that stays the same across restarts.
    case persistent(expiry: Duration)

    public var description: String {
        switch self {
        case .clean: "clean"
        case .persistent(let expiry): "persistent(expiry: \(expiry.components.seconds) s)"
        }
    }

    /// The Session Expiry Interval sent in CONNECT, in seconds (nil: none sent).
    package var expirySeconds: UInt32? {
        guard case .persistent(let expiry) = self else { return nil }
        return UInt32(clamping: max(1, min(expiry.components.seconds, Int64(UInt32.max - 1))))
    }
}

/// When a client acknowledges the QoS ≥ 1 messages it receives.
public enum MQTTAcknowledgement: Sendable, Hashable, CustomStringConvertible {
    /// When they arrive, before the consumer has seen them (libmosquitto's way).
    case onReceipt
    /// Once the consumer has handled them and called ``MQTTClient/acknowledge(through:)``
    /// with their ``MQTTMessage/deliveryTag``: until then nothing is written to the broker
    /// (no acknowledgement, no new request), so a client killed before it acknowledges gets
    /// the messages again from its persistent session. The broker sends at most
    /// ``MQTTConfiguration/receiveMaximum`` messages ahead of the acknowledgements, which bounds
    /// what the client holds. For one consumer, which handles the messages in order.
    case afterHandling

    public var description: String {
        switch self {
        case .onReceipt: "on receipt"
        case .afterHandling: "after handling"
        }
    }
}
