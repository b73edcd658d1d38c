import EdgeCore
import FleetProtocol
import Logging
import MQTTCore

/// Everything the edge agent needs to run, validated: which vehicle, which GNSS source, which
/// broker and how to talk to it, which topics, QoS, reporting policy, outbox size and state
/// directory.
///
/// Load it with ``load(filePath:environment:flags:)`` from a YAML file (see
/// `config/agent.yaml`), environment variables `FLEETCAST_…` and command-line flags, in that
/// order of rising priority. The description never shows the broker password.
public struct AgentConfiguration: Sendable, CustomStringConvertible {
    /// MQTT protocol version to speak.
    public enum ProtocolVersion: String, Sendable, Equatable, CaseIterable {
        /// MQTT 5, and 3.1.1 with a broker that refuses 5 (NATS, RabbitMQ, Azure IoT Hub).
        case auto
        /// MQTT 5.
        case v5 = "5"
        /// MQTT 3.1.1.
        case v311 = "3.1.1"
    }

    /// How to reach and log in to the broker, as ``load(filePath:environment:flags:)`` read it.
    public struct Broker: Sendable, Equatable {
        /// Host, port and TLS (`broker.url`; with several, the first given).
        public var url: BrokerURL
        /// The other nodes of the same broker service (`broker.url` with several addresses:
        /// a YAML list, or a comma-separated value in the environment; `--broker` given more
        /// than once). The agent connects to one and fails over to the others.
        public var otherURLs: [BrokerURL] = []
        /// Every broker address, ``url`` first.
        public var urls: [BrokerURL] { [url] + otherURLs }
        /// User name (`broker.username`, or the URL's user).
        public var username: String?
        /// Password, from `broker.passwordFile` or `FLEETCAST_BROKER_PASSWORD`; never logged.
        public var password: Secret?
        /// PEM file of the CA certificates that sign the broker's certificate (TLS).
        public var caFile: String?
        /// PEM client certificate for mutual TLS.
        public var certFile: String?
        /// PEM private key of the client certificate.
        public var keyFile: String?
        /// MQTT protocol version (`broker.protocol`, default `auto`).
        public var protocolVersion: ProtocolVersion = .auto
        /// Keep-alive interval, seconds (default ``defaultKeepAliveSeconds``).
        public var keepAliveSeconds: Int = Broker.defaultKeepAliveSeconds
        /// Most QoS 1/2 messages in flight at once (default 20).
        public var maxInflight: Int = 20
        /// The file the password was read from (`broker.passwordFile`), to check who else can
        /// read it.
        public var passwordFile: String?

        /// The default keep-alive, seconds: 4 minutes, under the idle timeout of the NATs of
        /// cellular carriers (5 minutes and more for most, so that a quiet connection stays
        /// open), and a PINGREQ, PINGRESP and their TCP acknowledgements (about 300 bytes with
        /// TLS) every 4 minutes instead of every 30 s; the broker declares a silent vehicle gone
        /// (its last will) after one and a half keep-alives, 6 minutes.
        public static let defaultKeepAliveSeconds = 240
    }

    /// The vehicle id used in topics and payloads (`vehicle`, required).
    public var vehicle: VehicleID
    /// The GNSS source URI (`source`, default `sim:`).
    public var source: String
    /// The broker (`broker.*`).
    public var broker: Broker
    /// The topic layout (`topics.prefix`, default `fleet`).
    public var topics: FleetTopics
    /// QoS of fix messages (`qos.fix`, default 1).
    public var fixQoS: MQTTQoS
    /// QoS of heading messages that go alone (`qos.heading`, default 1); a heading that rides
    /// in its fix has the fix's.
    public var headingQoS: MQTTQoS
    /// MQTT 5 message expiry of fixes and headings, seconds (`messageExpiry`); `nil`: none.
    public var messageExpirySeconds: Int?
    /// The reporting policy (`report.*`).
    public var policy: ReportingPolicy
    /// The durable outbox's limits and pace (`outbox.*`).
    public struct OutboxSettings: Sendable, Equatable {
        /// Seconds between commits to the store (`outbox.syncInterval`, default 1): at most this
        /// much unacknowledged traffic is lost on a power cut.
        public var syncIntervalSeconds: Double
        /// Most bytes stored (`outbox.maxBytes`, default 64 MiB).
        public var maxBytes: Int
        /// Oldest record kept, seconds (`outbox.maxAge`, default 7 days).
        public var maxAgeSeconds: Int
        /// Backlog events sent per second at most (`outbox.drainRate`, default 200).
        public var drainRate: Int

        /// The defaults: 1 s, 64 MiB, 7 days, 200 events/s.
        public init(syncIntervalSeconds: Double = 1, maxBytes: Int = 64 << 20, maxAgeSeconds: Int = 7 * 86_400, drainRate: Int = 200) {
            self.syncIntervalSeconds = syncIntervalSeconds
            self.maxBytes = maxBytes
            self.maxAgeSeconds = maxAgeSeconds
            self.drainRate = drainRate
        }
    }

    /// The durable outbox (`outbox.*`).
    public var outbox: OutboxSettings

    /// Whether the system clock is taken as synchronized (`fixTime.systemClock`).
    public enum SystemClock: String, Sendable, Equatable, CaseIterable {
        /// As the kernel says (adjtimex(2): ``SystemClockSynchronization``), the default.
        case auto
        /// Always: a clock kept by something that does not tell the kernel (PTP hardware, a
        /// GNSS-disciplined clock of its own).
        case synchronized
    }

    /// The check of a live receiver's fix times (``FixTimeCheck``).
    public struct FixTimeSettings: Sendable, Equatable {
        /// Fixes stamped further than this from a synchronized system clock are refused,
        /// seconds (`fixTime.maxOffset`, default 900: 15 minutes); `nil` (`off`): not checked.
        public var maxOffsetSeconds: Int? = AgentConfiguration.defaultFixTimeMaxOffsetSeconds
        /// Whether the system clock is synchronized (`fixTime.systemClock`, default `auto`).
        public var systemClock: SystemClock = .auto

        /// The defaults: 15 minutes, the kernel's word on the clock.
        public init() {}
    }

    /// The default `fixTime.maxOffset`, seconds: ``FixTimeCheck/defaultMaximumOffset``.
    public static let defaultFixTimeMaxOffsetSeconds: Int? = Int(FixTimeCheck.defaultMaximumOffset.components.seconds)

    /// The check of fix times (`fixTime.*`).
    public var fixTime = FixTimeSettings()
    /// Cellular batching, seconds (`uplink.batch`, default off: `nil`): fixes and headings are
    /// gathered for up to this long and sent as one retained message on `…/batch` instead of
    /// one message each (``PublisherSettings/uplinkBatch``).
    public var uplinkBatchSeconds: Int?
    /// How batches are written (`uplink.encoding`, default compact).
    public var uplinkEncoding: BatchEncoding = .compact
    /// Which values fix and heading messages carry (`payload.fields`, default standard).
    public var payloadFields: FleetPayload.FieldSet = .standard
    /// Directory of the agent's state (the outbox store, `{vehicle}.outbox`) (`stateDir`,
    /// default `/var/lib/fleetcast`).
    public var stateDirectory: String
    /// Log level (`log.level`, default `info`).
    public var logLevel: Logger.Level
    /// Where each key's value came from (keys not listed took their default).
    public var origins: [String: ConfigurationOrigin]

    /// The publisher settings this configuration implies.
    ///
    /// - Parameter lossless: a finite source (a replay) that must lose nothing.
    /// A finite source uploads every fix unless a `report.*` rule is configured: the default
    /// policy is for live vehicles. It ignores `uplink.batch` (it is a batch upload already).
    public func publisherSettings(agentVersion: String?, lossless: Bool = false) -> PublisherSettings {
        let configured = origins.keys.contains { $0.hasPrefix("report.") && $0 != AgentConfigurationKeys.reportStationarySpeed.name }
        let policy = lossless && !configured ? ReportingPolicy(stationarySpeed: policy.stationarySpeed) : policy
        var settings = PublisherSettings(vehicle: vehicle)
        settings.topics = topics
        settings.fixQoS = fixQoS
        settings.headingQoS = headingQoS
        settings.sourceURI = source
        settings.agentVersion = agentVersion
        settings.policy = policy
        settings.lossless = lossless
        settings.sendWindow = broker.maxInflight  // as many awaiting acknowledgement as the broker link allows
        settings.syncInterval = .milliseconds(Int64((outbox.syncIntervalSeconds * 1000).rounded()))
        settings.maxBytes = outbox.maxBytes
        settings.maxAge = .seconds(outbox.maxAgeSeconds)
        settings.drainRate = outbox.drainRate
        settings.brokerUser = broker.username
        // A replay is an upload of its own: every record live, in order, as fast as the link takes.
        settings.uplinkBatch = lossless ? nil : uplinkBatchSeconds.map { .seconds($0) }
        settings.uplinkEncoding = uplinkEncoding
        settings.fields = payloadFields
        return settings
    }

    /// One `key = value  (origin)` line per setting; the password shows as `<redacted>`.
    public var description: String {
        typealias Keys = AgentConfigurationKeys
        func line<Value>(_ key: AgentConfigurationKey<Value>, _ value: String?) -> String {
            "\(key.name) = \(value ?? "-")  (\(origins[key.name]?.description ?? "default"))"
        }
        func number(_ value: Double?) -> String? { value.map { "\($0)" } }
        return [
            line(Keys.vehicle, vehicle.rawValue),
            line(Keys.source, source),
            line(Keys.brokerURL, broker.urls.map(\.description).joined(separator: ",")),
            line(Keys.brokerUsername, broker.username),
            line(origins[Keys.brokerPassword.name] != nil ? Keys.brokerPassword : Keys.brokerPasswordFile, broker.password?.description),
            line(Keys.brokerCAFile, broker.caFile),
            line(Keys.brokerCertFile, broker.certFile),
            line(Keys.brokerKeyFile, broker.keyFile),
            line(Keys.brokerProtocol, broker.protocolVersion.rawValue),
            line(Keys.brokerKeepAlive, "\(broker.keepAliveSeconds)"),
            line(Keys.brokerMaxInflight, "\(broker.maxInflight)"),
            line(Keys.topicsPrefix, topics.prefix),
            line(Keys.qosFix, "\(fixQoS.rawValue)"),
            line(Keys.qosHeading, "\(headingQoS.rawValue)"),
            line(Keys.messageExpiry, messageExpirySeconds.map { "\($0)" }),
            line(Keys.reportEveryFix, policy.limitsRate ? "false" : "true"),
            line(Keys.reportMinInterval, number(policy.minInterval)),
            line(Keys.reportMaxInterval, number(policy.maxInterval)),
            line(Keys.reportMinDistance, number(policy.minDistance)),
            line(Keys.reportMinHeadingChange, number(policy.minHeadingChange)),
            line(Keys.reportStationarySpeed, number(policy.stationarySpeed)),
            line(Keys.reportStoppedInterval, number(policy.stoppedInterval)),
            line(Keys.outboxSyncInterval, number(outbox.syncIntervalSeconds)),
            line(Keys.outboxMaxBytes, "\(outbox.maxBytes)"),
            line(Keys.outboxMaxAge, "\(outbox.maxAgeSeconds)"),
            line(Keys.outboxDrainRate, "\(outbox.drainRate)"),
            line(Keys.uplinkBatch, uplinkBatchSeconds.map { "\($0)" } ?? "off"),
            line(Keys.uplinkEncoding, uplinkEncoding.rawValue),
            line(Keys.payloadFields, payloadFields.rawValue),
            line(Keys.fixTimeMaxOffset, fixTime.maxOffsetSeconds.map { "\($0)" } ?? "off"),
            line(Keys.fixTimeSystemClock, fixTime.systemClock.rawValue),
            line(Keys.stateDir, stateDirectory),
            line(Keys.logLevel, logLevel.rawValue),
        ].joined(separator: "\n")
    }
}

extension AgentConfiguration {
    /// The MQTT client's settings for this vehicle: broker, client id the vehicle id (what a
    /// broker that binds the client id to the user name, `use_username_as_clientid` in the
    /// shipped configurations, makes of it anyway: the vehicle's user name is its id), protocol,
    /// credentials, and TLS when the URL is `mqtts:` or a CA or client certificate is configured.
    public var mqttConfiguration: MQTTConfiguration {
        var mqtt = MQTTConfiguration(
            broker: broker.url,
            otherBrokers: broker.otherURLs,
            clientID: vehicle.rawValue,
            protocolVersion: broker.protocolVersion.mqtt,
            keepAlive: .seconds(broker.keepAliveSeconds),
            username: broker.username,
            password: broker.password?.value,
            maxInflightMessages: broker.maxInflight
        )
        // The agent subscribes to nothing: any packet past the contract's size is hostile.
        mqtt.maximumPacketSize = FleetPayload.maximumPacketBytes
        if usesTLS {
            mqtt.tls = MQTTTLSConfiguration(caFile: broker.caFile, certificateFile: broker.certFile, keyFile: broker.keyFile)
        }
        return mqtt
    }

    /// Whether the broker connection uses TLS.
    public var usesTLS: Bool {
        broker.url.usesTLS || broker.caFile != nil || broker.certFile != nil
    }
}

extension AgentConfiguration.ProtocolVersion {
    /// The MQTT client's setting.
    public var mqtt: MQTTProtocolVersion {
        switch self {
        case .auto: .auto
        case .v5: .v5
        case .v311: .v311
        }
    }
}
