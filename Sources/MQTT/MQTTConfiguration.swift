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
    /// The MQTT client identifier (unique per broker).
    public var clientID: String
    /// MQTT 5 by default.
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

    /// Creates a configuration.
    public init(
        broker: BrokerURL,
        clientID: String,
        protocolVersion: MQTTProtocolVersion = .v5,
        keepAlive: Duration = .seconds(30),
        username: String? = nil,
        password: String? = nil,
        tls: MQTTTLSConfiguration? = nil,
        will: MQTTWill? = nil,
        maxInflightMessages: Int = 20,
        reconnect: MQTTReconnectPolicy = MQTTReconnectPolicy()
    ) {
        self.broker = broker
        self.clientID = clientID
        self.protocolVersion = protocolVersion
        self.keepAlive = keepAlive
        self.username = username
        self.password = password
        self.tls = tls
        self.will = will
        self.maxInflightMessages = maxInflightMessages
        self.reconnect = reconnect
    }

    /// The user name actually sent: the explicit one, else the URL's.
    var effectiveUsername: String? { username ?? broker.username }
}
