import EdgeCore
import FleetProtocol
import Logging
import MQTTCore

/// One key of the agent's configuration, declared once with what reading it needs: its name in
/// the YAML file (`broker.keepAlive`; the environment variable `FLEETCAST_BROKER_KEEP_ALIVE` and
/// the flag `--broker-keep-alive` follow from it), the form its value takes (quoted in errors),
/// how that text becomes the value, and the value when the key is not given. Every key is in
/// ``AgentConfigurationKeys``; the loader reads each one there and nowhere else.
public struct AgentConfigurationKey<Value: Sendable>: Sendable, CustomStringConvertible {
    /// The key as written in the file: `broker.keepAlive`.
    public let name: String
    /// The accepted form, for error messages: `a whole number of seconds from 5 to 65535`.
    public let expected: String
    /// The value when no layer gives the key.
    public let defaultValue: Value
    /// The value of a text, `nil` when the text has not the expected form.
    let parse: @Sendable (String) -> Value?

    /// `name` read with `parse`, `defaultValue` when not given.
    init(_ name: String, expected: String, default defaultValue: Value, parse: @escaping @Sendable (String) -> Value?) {
        (self.name, self.expected, self.defaultValue, self.parse) = (name, expected, defaultValue, parse)
    }

    /// The key's name.
    public var description: String { name }
}

/// Every key the agent understands, each declared once with its type, form and default (the
/// sample file `config/agent.yaml` explains them to users). ``AgentConfiguration/knownKeys`` is
/// their list in the sample file's order.
public enum AgentConfigurationKeys {
    // MARK: the vehicle and its source

    /// The vehicle's id in topics and payloads; required.
    public static let vehicle = text("vehicle", expected: "1 to 64 characters of A-Z, a-z, 0-9, '_' or '-'")
    /// The GNSS source URI; the simulator when not given.
    public static let source = AgentConfigurationKey(
        "source",
        expected: "a source URI such as gpsd://localhost:2947, serial:///dev/ttyUSB0, replay:/path/to/file.nmea or sim: (no password)",
        default: "sim:", parse: ConfigurationSources.sourceURI)

    // MARK: the broker

    /// The broker's address, or several nodes of one broker; `mqtt://localhost:1883` when not
    /// given. Read as a list (``AgentConfiguration/brokerURLForm``).
    public static let brokerURL = text("broker.url", expected: AgentConfiguration.brokerURLForm)
    /// The MQTT user name; the URL's when not given.
    public static let brokerUsername = text("broker.username", expected: "a user name")
    /// The password: only from the environment, never in the file or on the command line.
    public static let brokerPassword = text("broker.password", expected: "a password")
    /// A file whose first line is the password.
    public static let brokerPasswordFile = text("broker.passwordFile", expected: "a readable file holding the password")
    /// The CA certificates that check the broker's certificate (PEM).
    public static let brokerCAFile = text("broker.caFile", expected: "a readable file")
    /// The vehicle's client certificate (PEM), with ``brokerKeyFile``.
    public static let brokerCertFile = text("broker.certFile", expected: "a readable file")
    /// The client certificate's private key (PEM), with ``brokerCertFile``.
    public static let brokerKeyFile = text("broker.keyFile", expected: "a readable file")
    /// The MQTT version: `auto` (5, then 3.1.1 with a broker that refuses it), `5` or `3.1.1`.
    public static let brokerProtocol = AgentConfigurationKey(
        "broker.protocol", expected: "auto, 5 or 3.1.1", default: AgentConfiguration.ProtocolVersion.auto
    ) { AgentConfiguration.ProtocolVersion(rawValue: $0 == "5.0" ? "5" : $0.lowercased()) }
    /// The keep-alive interval, seconds.
    public static let brokerKeepAlive = integer(
        "broker.keepAlive", in: 5...65535, unit: " of seconds", default: AgentConfiguration.Broker.defaultKeepAliveSeconds)
    /// QoS 1 and 2 messages in flight at once.
    public static let brokerMaxInflight = integer("broker.maxInflight", in: 1...65535, default: 20)

    // MARK: topics and payloads

    /// The topics' prefix (`{prefix}/{vehicle}/fix`).
    public static let topicsPrefix = AgentConfigurationKey(
        "topics.prefix",
        expected:
            "one or more non-empty topic levels separated by '/', without '+', '#', a leading '$', or the '.', ' ', '*' and '>' some brokers (NATS) treat specially (e.g. fleet or acme/fleet)",
        default: FleetTopics.default
    ) { try? FleetTopics(prefix: $0) }
    /// The QoS of fix messages.
    public static let qosFix = qos("qos.fix")
    /// The QoS of heading messages.
    public static let qosHeading = qos("qos.heading")
    /// MQTT 5's message expiry of live messages, seconds; none when not given.
    public static let messageExpiry = AgentConfigurationKey<Int?>(
        "messageExpiry", expected: "a whole number of seconds from 1 to 4294967295", default: nil
    ) { text -> Int?? in
        // (An optional value: a text that does not parse is `nil`, one that does is `.some`.)
        Int(text).flatMap { (1...4_294_967_295).contains($0) ? .some($0) : nil }
    }
    /// Which members a fix carries: `standard` or `full`.
    public static let payloadFields = AgentConfigurationKey(
        "payload.fields", expected: "standard or full", default: FleetPayload.FieldSet.standard
    ) { FleetPayload.FieldSet(rawValue: $0.lowercased()) }

    // MARK: the reporting policy (defaults: ReportingPolicy.trackerDefaults)

    /// Every fix goes out (the rules below are off).
    public static let reportEveryFix = AgentConfigurationKey("report.everyFix", expected: "true or false", default: false) {
        switch $0.lowercased() {
        case "true", "yes", "on", "1": true
        case "false", "no", "off", "0": false
        default: nil
        }
    }
    /// The shortest time between two fixes, seconds.
    public static let reportMinInterval = rule(
        "report.minInterval", "a number of seconds, 0 or more", ReportingPolicy.trackerDefaults.minInterval
    ) { $0 >= 0 }
    /// The longest time without a fix while moving (the heartbeat), seconds.
    public static let reportMaxInterval = rule(
        "report.maxInterval", "a number of seconds, more than 0", ReportingPolicy.trackerDefaults.maxInterval
    ) { $0 > 0 }
    /// A fix goes out once the vehicle moved this far, metres.
    public static let reportMinDistance = rule(
        "report.minDistance", "a number of metres, more than 0", ReportingPolicy.trackerDefaults.minDistance
    ) { $0 > 0 }
    /// A fix goes out once the course turned this far, degrees.
    public static let reportMinHeadingChange = rule(
        "report.minHeadingChange", "a number of degrees, more than 0 and at most 180",
        ReportingPolicy.trackerDefaults.minHeadingChange
    ) { $0 > 0 && $0 <= 180 }
    /// Below this speed the position is held (the track hold), m/s; 0 turns it off.
    public static let reportStationarySpeed = AgentConfigurationKey(
        "report.stationarySpeed", expected: "a speed in m/s, 0 or more (0 turns the track hold off)", default: 0.5
    ) { Double($0).flatMap { $0.isFinite && $0 >= 0 ? $0 : nil } }
    /// The heartbeat of a parked vehicle, seconds.
    public static let reportStoppedInterval = rule(
        "report.stoppedInterval", "a number of seconds, more than 0", ReportingPolicy.trackerDefaults.stoppedInterval
    ) { $0 > 0 }

    // MARK: the outbox and the uplink

    /// How often the outbox commits (one transaction, one fsync), seconds.
    public static let outboxSyncInterval = AgentConfigurationKey(
        "outbox.syncInterval", expected: "a number of seconds from 0.05 to 60", default: 1.0
    ) { Double($0).flatMap { $0.isFinite && $0 >= 0.05 && $0 <= 60 ? $0 : nil } }
    /// The outbox's size limit, bytes (the oldest records go first beyond it).
    public static let outboxMaxBytes = AgentConfigurationKey(
        "outbox.maxBytes", expected: "a size from 1MiB to 1TiB, in bytes or with KiB, MiB, GiB (e.g. 64MiB)", default: 64 << 20
    ) { ConfigurationSources.parseSize($0).flatMap { (1 << 20...1 << 40).contains($0) ? $0 : nil } }
    /// The age beyond which records are dropped, seconds.
    public static let outboxMaxAge = AgentConfigurationKey(
        "outbox.maxAge", expected: "a duration from 1m to 365d, in seconds or with s, m, h, d (e.g. 7d)", default: 7 * 86_400
    ) { ConfigurationSources.parseSeconds($0).flatMap { (60...365 * 86_400).contains($0) ? $0 : nil } }
    /// The backlog's drain rate, events per second.
    public static let outboxDrainRate = integer("outbox.drainRate", in: 1...100_000, unit: " of events per second", default: 200)
    /// Batched uplink: the batch window, seconds; `nil` (`off`): every fix goes live.
    public static let uplinkBatch = AgentConfigurationKey<Int?>(
        "uplink.batch", expected: "a duration from 1s to 1h, in seconds or with s, m, h (e.g. 60), or off", default: nil
    ) { text -> Int?? in
        if text == "off" || text == "0" { return .some(nil) }
        guard let seconds = ConfigurationSources.parseSeconds(text), (1...3600).contains(seconds) else { return nil }
        return .some(seconds)
    }
    /// How batches are written: `compact` or `json`.
    public static let uplinkEncoding = AgentConfigurationKey("uplink.encoding", expected: "compact or json", default: BatchEncoding.compact)
    {
        BatchEncoding(rawValue: $0.lowercased())
    }

    // MARK: fix times, files, logging

    /// Fixes stamped further than this from a synchronized clock are refused, seconds; `nil`:
    /// not checked.
    public static let fixTimeMaxOffset = AgentConfigurationKey<Int?>(
        "fixTime.maxOffset", expected: "a duration from 1m to 365d, in seconds or with s, m, h, d (e.g. 15m), or off",
        default: AgentConfiguration.defaultFixTimeMaxOffsetSeconds
    ) { text -> Int?? in
        if text == "off" { return .some(nil) }
        guard let seconds = ConfigurationSources.parseSeconds(text), (60...365 * 86_400).contains(seconds) else { return nil }
        return .some(seconds)
    }
    /// Whether the system clock counts as synchronized: as the kernel says, or always.
    public static let fixTimeSystemClock = AgentConfigurationKey(
        "fixTime.systemClock", expected: "auto or synchronized", default: AgentConfiguration.SystemClock.auto
    ) { AgentConfiguration.SystemClock(rawValue: $0) }
    /// The directory of the outbox store and the instance lock.
    public static let stateDir = AgentConfigurationKey("stateDir", expected: "a directory path", default: "/var/lib/fleetcast") {
        $0.contains("\0") ? nil : $0
    }
    /// The lowest level logged.
    public static let logLevel = AgentConfigurationKey(
        "log.level", expected: "trace, debug, info, notice, warning, error or critical", default: Logger.Level.info
    ) { Logger.Level(rawValue: $0.lowercased()) }

    /// Every key's name, in the order of the sample file.
    public static let names: [String] = [
        vehicle.name, source.name,
        brokerURL.name, brokerUsername.name, brokerPassword.name, brokerPasswordFile.name,
        brokerCAFile.name, brokerCertFile.name, brokerKeyFile.name,
        brokerProtocol.name, brokerKeepAlive.name, brokerMaxInflight.name,
        topicsPrefix.name, qosFix.name, qosHeading.name, messageExpiry.name,
        reportEveryFix.name, reportMinInterval.name, reportMaxInterval.name, reportMinDistance.name,
        reportMinHeadingChange.name, reportStationarySpeed.name, reportStoppedInterval.name,
        outboxSyncInterval.name, outboxMaxBytes.name, outboxMaxAge.name, outboxDrainRate.name, uplinkBatch.name,
        uplinkEncoding.name, payloadFields.name, fixTimeMaxOffset.name, fixTimeSystemClock.name, stateDir.name,
        logLevel.name,
    ]

    // MARK: kinds of keys

    /// A key whose value is its text (checked by the loader); `nil` when not given.
    private static func text(_ name: String, expected: String) -> AgentConfigurationKey<String?> {
        AgentConfigurationKey(name, expected: expected, default: nil) { $0 }
    }

    private static func integer(
        _ name: String, in range: ClosedRange<Int>, unit: String = "", default value: Int
    ) -> AgentConfigurationKey<Int> {
        AgentConfigurationKey(name, expected: "a whole number\(unit) from \(range.lowerBound) to \(range.upperBound)", default: value) {
            Int($0).flatMap { range.contains($0) ? $0 : nil }
        }
    }

    private static func qos(_ name: String) -> AgentConfigurationKey<MQTTQoS> {
        AgentConfigurationKey(name, expected: "0, 1 or 2", default: .atLeastOnce) { Int($0).flatMap(MQTTQoS.init(rawValue:)) }
    }

    /// A reporting rule: a number `accept` takes, `off` for none, `fallback` when not given.
    private static func rule(
        _ name: String, _ expected: String, _ fallback: Double?, _ accept: @escaping @Sendable (Double) -> Bool
    ) -> AgentConfigurationKey<Double?> {
        AgentConfigurationKey(name, expected: "\(expected), or off", default: fallback) { text -> Double?? in
            if text.lowercased() == "off" { return .some(nil) }
            return Double(text).flatMap { $0.isFinite && accept($0) ? .some($0) : nil }
        }
    }
}
