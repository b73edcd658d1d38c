import Configuration
import EdgePublisher
import FleetProtocol
import FleetcastCore
import Logging
import MQTT
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension AgentConfiguration {
    /// The prefix of the agent's environment variables: `broker.keepAlive` is read from
    /// `FLEETCAST_BROKER_KEEP_ALIVE`.
    public static let environmentPrefix = "FLEETCAST"

    /// The accepted form of `broker.url`, for error messages.
    public static let brokerURLForm =
        "mqtt://[user@]host[:port] or mqtts://[user@]host[:port] (no password, no path); several nodes of one broker as a list or separated by commas"

    /// Every key the agent understands, in the order of the sample file.
    public static let knownKeys: [String] = [
        "vehicle", "source",
        "broker.url", "broker.username", "broker.password", "broker.passwordFile",
        "broker.caFile", "broker.certFile", "broker.keyFile",
        "broker.protocol", "broker.keepAlive", "broker.maxInflight",
        "topics.prefix", "qos.fix", "qos.heading", "messageExpiry",
        "report.everyFix", "report.minInterval", "report.maxInterval", "report.minDistance",
        "report.minHeadingChange", "report.stationarySpeed", "report.stoppedInterval",
        "outbox.syncInterval", "outbox.maxBytes", "outbox.maxAge", "outbox.drainRate", "uplink.batch", "uplink.encoding",
        "payload.fields", "fixTime.maxOffset", "fixTime.systemClock", "stateDir", "log.level",
    ]

    /// Loads and validates the configuration from three layers, each overriding the one before:
    /// the YAML file, the environment, the flags.
    ///
    /// The library never reads the process environment or the command line: the executable
    /// passes them in.
    ///
    /// - Parameters:
    ///   - filePath: the YAML file (see `config/agent.yaml`), read with libyaml
    ///     (``LibYAMLSnapshot/init(contentsOf:parsingOptions:)``: at most 1 MiB, its size
    ///     checked before it is read); `nil`: no file.
    ///   - environment: the process environment; only `FLEETCAST_…` variables are read
    ///     (`FLEETCAST_VEHICLE`, `FLEETCAST_BROKER_URL`, `FLEETCAST_BROKER_PASSWORD`…).
    ///   - flags: values given on the command line, keyed by configuration key (`"qos.fix"`),
    ///     shown in errors as flags (`--qos-fix`). A password is never accepted as a flag.
    /// - Throws: ``ConfigurationError`` listing every problem: the key, the file (or
    ///   environment variable, or flag) and the expected form; unknown keys in the file and in
    ///   `flags`; an unreadable file, or one over ``LibYAMLSnapshot/maximumBytes``.
    public static func load(
        filePath: String?, environment: [String: String], flags: [String: String]
    ) async throws(ConfigurationError) -> AgentConfiguration {
        var problems: [ConfigurationError.Problem] = []

        // Flags: only known keys, never a password.
        var flagValues: [AbsoluteConfigKey: ConfigValue] = [:]
        for (key, value) in flags.sorted(by: { $0.key < $1.key }) {
            let origin = ConfigurationOrigin.flag(flagName(key))
            if key == "broker.password" {
                problems.append(
                    .init(
                        key: key, origin: origin,
                        message:
                            "broker.password in \(origin): a password is never accepted on the command line; use broker.passwordFile or the environment variable FLEETCAST_BROKER_PASSWORD"
                    ))
            } else if !knownKeys.contains(key) {
                problems.append(.init(key: key, origin: origin, message: "unknown key \(key) in \(origin)\(suggestion(for: key))"))
            } else {
                flagValues[AbsoluteConfigKey(key.split(separator: ".").map(String.init))] = ConfigValue(.string(value), isSecret: false)
            }
        }
        let flagProvider = InMemoryProvider(name: "flags", values: flagValues)

        let passwordVariable = environmentName("broker.password")
        let environmentProvider = EnvironmentVariablesProvider(
            environmentVariables: environment.filter { $0.key.uppercased().hasPrefix(environmentPrefix + "_") },
            secretsSpecifier: .specific([passwordVariable])
        ).prefixKeys(with: ConfigKey(environmentPrefix.lowercased()))

        // The file: its keys are collected while it is parsed, to report unknown ones. Read by
        // the snapshot itself, its size checked before (FileProvider would read it whole first).
        var fileProvider: LibYAMLSnapshot?
        if let filePath {
            let collector = KeyCollector()
            do {
                fileProvider = try LibYAMLSnapshot(
                    contentsOf: filePath,
                    parsingOptions: .init(
                        secretsSpecifier: .dynamic { key, _ in
                            collector.add(key)
                            return key == "broker.password"
                        })
                )
            } catch {
                throw ConfigurationError(problems: [
                    .init(key: filePath, origin: .file(filePath), message: "cannot read configuration file \(filePath): \(error)")
                ])
            }
            for key in collector.keys where !knownKeys.contains(key) {
                problems.append(
                    .init(key: key, origin: .file(filePath), message: "unknown key \(key) in \(filePath)\(suggestion(for: key))"))
            }
            if collector.keys.contains("broker.password") {
                problems.append(
                    .init(
                        key: "broker.password", origin: .file(filePath),
                        message:
                            "broker.password in \(filePath): a password is not accepted in the configuration file; use broker.passwordFile or the environment variable \(passwordVariable)"
                    ))
            }
        }

        var sources = ConfigurationSources(
            flags: flagProvider, environment: environmentProvider, file: fileProvider, filePath: filePath
        )
        let configuration = sources.build()
        problems += sources.problems
        guard problems.isEmpty, let configuration else { throw ConfigurationError(problems: problems) }
        return configuration
    }

    /// The environment variable that sets `key`: `broker.keepAlive` → `FLEETCAST_BROKER_KEEP_ALIVE`.
    public static func environmentName(_ key: String) -> String {
        var out = environmentPrefix
        for component in key.split(separator: ".") {
            out += "_"
            var previousLower = false
            for character in component {
                if previousLower, character.isUppercase { out += "_" }
                out += character.isLetter || character.isNumber ? character.uppercased() : "_"
                previousLower = character.isLowercase
            }
        }
        return out
    }

    /// The flag that sets `key`: `broker.keepAlive` → `--broker-keep-alive`.
    public static func flagName(_ key: String) -> String {
        var out = "-"
        for component in key.split(separator: ".") {
            out += "-"
            var previousLower = false
            for character in component {
                if previousLower, character.isUppercase { out += "-" }
                out += character.lowercased()
                previousLower = character.isLowercase
            }
        }
        return out
    }

    /// `" (did you mean qos.fix?)"` when a known key is within two edits of `key`.
    static func suggestion(for key: String) -> String {
        let best = knownKeys.map { ($0, editDistance($0.lowercased(), key.lowercased())) }.min { $0.1 < $1.1 }
        guard let best, best.1 <= 2 else { return "" }
        return " (did you mean \(best.0)?)"
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.utf8), b = Array(b.utf8)
        var previous = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in stride(from: 1, through: b.count, by: 1) {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return a.isEmpty ? b.count : previous[b.count]
    }
}

/// Collects the keys a YAML file defines while ``LibYAMLSnapshot`` parses it (through the
/// secrets specifier, which it asks about every key).
private final class KeyCollector: Sendable {
    private let storage = SanitizerVisibleMutex<[String]>([])
    func add(_ key: String) { storage.withLock { $0.append(key) } }
    var keys: [String] { storage.withLock { $0.sorted() } }
}

/// The three layers behind one `ConfigReader`, plus what is needed to say where a value came
/// from. `build()` reads and validates every key, collecting problems.
struct ConfigurationSources {
    let reader: ConfigReader
    let layers: [(provider: any ConfigProvider, origin: (String) -> ConfigurationOrigin)]
    var problems: [ConfigurationError.Problem] = []
    var origins: [String: ConfigurationOrigin] = [:]

    init(flags: InMemoryProvider, environment: some ConfigProvider, file: LibYAMLSnapshot?, filePath: String?) {
        var providers: [any ConfigProvider] = [flags, environment]
        var layers: [(provider: any ConfigProvider, origin: (String) -> ConfigurationOrigin)] = [
            (flags, { .flag(AgentConfiguration.flagName($0)) }),
            (environment, { .environment(AgentConfiguration.environmentName($0)) }),
        ]
        if let file, let filePath {
            providers.append(file)
            layers.append((file, { _ in .file(filePath) }))
        }
        reader = ConfigReader(providers: providers)
        self.layers = layers
    }

    /// The raw text of `key` from the highest layer that has it, with its origin; empty text,
    /// `~` and `null` count as not set. A value of the wrong shape (a YAML list or mapping) is
    /// a problem.
    mutating func text(_ key: String, secret: Bool = false) -> (String, ConfigurationOrigin)? {
        let configKey = ConfigKey(key.split(separator: ".").map(String.init))
        let absolute = AbsoluteConfigKey(configKey.components)
        guard let value = reader.string(forKey: configKey, isSecret: secret) else {
            for layer in layers {
                if case .failure = Result(catching: { try layer.provider.value(forKey: absolute, type: .string) }) {
                    problems.append(.invalid(key, layer.origin(key), expected: "a single value", got: nil))
                    return nil
                }
            }
            return nil
        }
        let origin =
            layers.first { layer in
                (try? layer.provider.value(forKey: absolute, type: .string).value) != nil
            }?.origin(key) ?? .defaultValue
        let trimmed = value.trimmingWhitespace()
        if trimmed.isEmpty || trimmed == "~" || trimmed == "null" { return nil }
        origins[key] = origin
        return (trimmed, origin)
    }

    /// A value parsed by `parse`; a problem naming `expected` when it returns `nil`.
    /// The value of `key`, parsed; a problem naming what was expected when it does not parse.
    /// `shown` is what the problem quotes of the text (a URL's password redacted).
    mutating func value<T>(
        _ key: String, expected: String, shown: (String) -> String = { $0 }, _ parse: (String) -> T?
    ) -> T? {
        guard let (text, origin) = text(key) else { return nil }
        guard let value = parse(text) else {
            problems.append(.invalid(key, origin, expected: expected, got: shown(text)))
            return nil
        }
        return value
    }

    /// A number as a person writes it: `30`, `2.5`.
    static func show(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
    }

    mutating func integer(_ key: String, in range: ClosedRange<Int>, unit: String = "") -> Int? {
        value(key, expected: "a whole number\(unit) from \(range.lowerBound) to \(range.upperBound)") { text in
            Int(text).flatMap { range.contains($0) ? $0 : nil }
        }
    }

    mutating func number(_ key: String, expected: String, _ accept: (Double) -> Bool) -> Double? {
        value(key, expected: expected) { text in
            Double(text).flatMap { $0.isFinite && accept($0) ? $0 : nil }
        }
    }

    /// `65536`, `64KiB`, `64MiB`, `1GiB` (also `KB`/`MB`/`GB` as binary units) → bytes.
    static func parseSize(_ text: String) -> Int? {
        let units: [(String, Int)] = [
            ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40),
            ("KB", 1 << 10), ("MB", 1 << 20), ("GB", 1 << 30), ("TB", 1 << 40), ("B", 1),
        ]
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            let number = text.dropLast(suffix.count).trimmingWhitespace()
            guard let n = Int(number), n >= 0 else { return nil }
            let (product, overflow) = n.multipliedReportingOverflow(by: factor)
            return overflow ? nil : product
        }
        return Int(text)
    }

    /// `3600`, `90s`, `30m`, `12h`, `7d` → seconds.
    static func parseSeconds(_ text: String) -> Int? {
        let units: [(Character, Int)] = [("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]
        if let last = text.last, let factor = units.first(where: { $0.0 == last })?.1 {
            guard let n = Int(text.dropLast().trimmingWhitespace()), n >= 0 else { return nil }
            let (product, overflow) = n.multipliedReportingOverflow(by: factor)
            return overflow ? nil : product
        }
        return Int(text)
    }

    mutating func readableFile(_ key: String) -> String? {
        guard let (path, origin) = text(key) else { return nil }
        guard access(path, R_OK) == 0 else {
            problems.append(.invalid(key, origin, expected: "a readable file (\(String(cString: strerror(errno))))", got: path))
            return nil
        }
        return path
    }

    mutating func build() -> AgentConfiguration? {
        let vehicle = vehicleID()
        let source =
            value(
                "source",
                expected:
                    "a source URI such as gpsd://localhost:2947, serial:///dev/ttyUSB0, replay:/path/to/file.nmea or sim: (no password)"
            ) { text -> String? in Self.sourceURI(text) } ?? "sim:"

        let broker = brokerSettings()
        let topics =
            value(
                "topics.prefix",
                expected:
                    "one or more non-empty topic levels separated by '/', without '+', '#', a leading '$', or the '.', ' ', '*' and '>' some brokers (NATS) treat specially (e.g. fleet or acme/fleet)"
            ) { try? FleetTopics(prefix: $0) } ?? .default
        let fixQoS = value("qos.fix", expected: "0, 1 or 2") { Int($0).flatMap(MQTTQoS.init(rawValue:)) } ?? .atLeastOnce
        let headingQoS = value("qos.heading", expected: "0, 1 or 2") { Int($0).flatMap(MQTTQoS.init(rawValue:)) } ?? .atLeastOnce
        let expiry = integer("messageExpiry", in: 1...4_294_967_295, unit: " of seconds")
        let policy = reportingPolicy()
        let outbox = outboxSettings()
        let uplinkBatch =
            value("uplink.batch", expected: "a duration from 1s to 1h, in seconds or with s, m, h (e.g. 60), or off") {
                (text: String) -> Int?? in
                if text == "off" || text == "0" { return .some(nil) }
                guard let seconds = Self.parseSeconds(text), (1...3600).contains(seconds) else { return nil }
                return .some(seconds)
            } ?? nil
        let uplinkEncoding = value("uplink.encoding", expected: "compact or json") { BatchEncoding(rawValue: $0.lowercased()) } ?? .compact
        let payloadFields =
            value("payload.fields", expected: "standard or full") { FleetPayload.FieldSet(rawValue: $0.lowercased()) } ?? .standard
        let fixTime = fixTimeSettings()
        let stateDirectory = value("stateDir", expected: "a directory path") { $0.contains("\0") ? nil : $0 } ?? "/var/lib/fleetcast"
        let logLevel =
            value("log.level", expected: "trace, debug, info, notice, warning, error or critical") {
                Logger.Level(rawValue: $0.lowercased())
            } ?? .info

        guard problems.isEmpty, let vehicle, let broker else { return nil }
        var configuration = AgentConfiguration(
            vehicle: vehicle, source: source, broker: broker, topics: topics, fixQoS: fixQoS, headingQoS: headingQoS,
            messageExpirySeconds: expiry, policy: policy, outbox: outbox, fixTime: fixTime, stateDirectory: stateDirectory,
            logLevel: logLevel, origins: origins
        )
        configuration.uplinkBatchSeconds = uplinkBatch
        configuration.uplinkEncoding = uplinkEncoding
        configuration.payloadFields = payloadFields
        return configuration
    }

    /// `vehicle`, required.
    private mutating func vehicleID() -> VehicleID? {
        var vehicle: VehicleID?
        if let (text, origin) = text("vehicle") {
            do {
                vehicle = try VehicleID(validating: text)
                if let problem = vehicle?.portabilityProblem {
                    problems.append(.init(key: "vehicle", origin: origin, message: "vehicle in \(origin): \(problem)"))
                    vehicle = nil
                }
            } catch {
                problems.append(.invalid("vehicle", origin, expected: "1 to 64 characters of A-Z, a-z, 0-9, '_' or '-'", got: text))
            }
        } else {
            problems.append(
                .init(
                    key: "vehicle", origin: .defaultValue,
                    message:
                        "vehicle is required: set it in the configuration file, the environment variable \(AgentConfiguration.environmentName("vehicle")) or the flag \(AgentConfiguration.flagName("vehicle"))"
                ))
        }
        return vehicle
    }

    /// `broker.*`; `nil` when the URL is unusable.
    private mutating func brokerSettings() -> AgentConfiguration.Broker? {
        let urls = brokerURLs()
        let url = urls?.first
        let username = text("broker.username")?.0 ?? url?.username
        var password: Secret?
        var passwordFile: String?
        let passwordFromEnvironment = text("broker.password", secret: true)
        if let (path, origin) = text("broker.passwordFile") {
            if passwordFromEnvironment != nil {
                problems.append(
                    .init(
                        key: "broker.passwordFile", origin: origin,
                        message:
                            "broker.passwordFile in \(origin): give either broker.passwordFile or \(AgentConfiguration.environmentName("broker.password")), not both"
                    ))
            }
            do {
                guard let secret = try PasswordFile.read(path) else {
                    throw AtomicFile.Failure(operation: "open", path: path, errno: ENOENT)
                }
                if secret.isEmpty {
                    problems.append(
                        .invalid(
                            "broker.passwordFile", origin, expected: "a file whose first line is the password (it is empty)", got: path))
                }
                password = Secret(secret)
                passwordFile = path
            } catch {
                problems.append(
                    .invalid("broker.passwordFile", origin, expected: "a readable file holding the password (\(error))", got: path))
            }
        } else if let (secret, _) = passwordFromEnvironment {
            password = Secret(secret)
        }
        let caFile = readableFile("broker.caFile")
        let certFile = readableFile("broker.certFile")
        let keyFile = readableFile("broker.keyFile")
        if (certFile == nil) != (keyFile == nil), let key = certFile == nil ? "broker.keyFile" : "broker.certFile" as String?,
            let origin = origins[key]
        {
            problems.append(
                .init(
                    key: key, origin: origin,
                    message: "\(key) in \(origin): broker.certFile and broker.keyFile go together; give both or neither"))
        }
        if let url, !url.usesTLS {
            for key in ["broker.caFile", "broker.certFile", "broker.keyFile"] {
                if let origin = origins[key] {
                    problems.append(
                        .init(
                            key: key, origin: origin,
                            message: "\(key) in \(origin): TLS files need a broker.url starting with mqtts://, got \"\(url)\""))
                }
            }
        }
        let protocolVersion =
            value("broker.protocol", expected: "auto, 5 or 3.1.1") { text in
                AgentConfiguration.ProtocolVersion(rawValue: text == "5.0" ? "5" : text.lowercased())
            } ?? .auto
        let keepAlive = integer("broker.keepAlive", in: 5...65535, unit: " of seconds") ?? AgentConfiguration.Broker.defaultKeepAliveSeconds
        let maxInflight = integer("broker.maxInflight", in: 1...65535) ?? 20
        guard let url else { return nil }
        var broker = AgentConfiguration.Broker(
            url: url, username: username, password: password, caFile: caFile, certFile: certFile, keyFile: keyFile,
            protocolVersion: protocolVersion, keepAliveSeconds: keepAlive, maxInflight: maxInflight
        )
        broker.passwordFile = passwordFile
        broker.otherURLs = Array((urls ?? []).dropFirst())
        return broker
    }

    /// `broker.url`: one address or several (a YAML list; commas in any layer), all with TLS
    /// or none; `[mqtt://localhost:1883]` when not given; `nil` when one is unusable.
    private mutating func brokerURLs() -> [BrokerURL]? {
        let key = "broker.url"
        let absolute = AbsoluteConfigKey(key.split(separator: ".").map(String.init))
        var given: ([String], ConfigurationOrigin)?
        for layer in layers {
            if let value = try? layer.provider.value(forKey: absolute, type: .string).value, case .string(let text) = value.content {
                given = (text.split(separator: ",").map { $0.trimmingWhitespace() }, layer.origin(key))
            } else if let value = try? layer.provider.value(forKey: absolute, type: .stringArray).value,
                case .stringArray(let items) = value.content
            {
                given = (items.map { $0.trimmingWhitespace() }, layer.origin(key))
            }
            if given != nil { break }
        }
        guard let (texts, origin) = given else { return [BrokerURL(host: "localhost")] }
        let items = texts.filter { !$0.isEmpty && $0 != "~" && $0 != "null" }
        guard !items.isEmpty else { return [BrokerURL(host: "localhost")] }
        origins[key] = origin
        var urls: [BrokerURL] = []
        for item in items {
            guard let url = try? BrokerURL(parsing: item) else {
                problems.append(.invalid(key, origin, expected: AgentConfiguration.brokerURLForm, got: BrokerURL.redactingPassword(item)))
                return nil
            }
            urls.append(url)
        }
        if urls.count > 64 {
            problems.append(.invalid(key, origin, expected: "at most 64 broker addresses", got: "\(urls.count)"))
            return nil
        }
        if let first = urls.first, let mixed = urls.first(where: { $0.usesTLS != first.usesTLS }) {
            problems.append(
                .init(
                    key: key, origin: origin,
                    message: "\(key) in \(origin): \(first) and \(mixed) mix mqtt:// and mqtts://; the nodes of one broker take one scheme")
            )
            return nil
        }
        return urls
    }

    /// `report.*`.
    private mutating func reportingPolicy() -> ReportingPolicy {
        let defaults = ReportingPolicy.trackerDefaults
        let everyFix =
            value("report.everyFix", expected: "true or false") { text -> Bool? in
                switch text.lowercased() {
                case "true", "yes", "on", "1": true
                case "false", "no", "off", "0": false
                default: nil
                }
            } ?? false
        var minInterval = rule("report.minInterval", "a number of seconds, 0 or more", defaults.minInterval) { $0 >= 0 }
        let maxInterval = rule("report.maxInterval", "a number of seconds, more than 0", defaults.maxInterval) { $0 > 0 }
        if let floor = minInterval, let maxInterval, maxInterval < floor {
            if let origin = origins["report.maxInterval"], origins["report.minInterval"] != nil {
                problems.append(
                    .invalid(
                        "report.maxInterval", origin, expected: "at least report.minInterval (\(Self.show(floor)) s)",
                        got: Self.show(maxInterval)))
            } else {
                minInterval = maxInterval  // a heartbeat set below the default floor lowers it
            }
        }
        let minDistance = rule("report.minDistance", "a number of metres, more than 0", defaults.minDistance) { $0 > 0 }
        let minHeadingChange = rule(
            "report.minHeadingChange", "a number of degrees, more than 0 and at most 180", defaults.minHeadingChange
        ) { $0 > 0 && $0 <= 180 }
        let stoppedInterval = rule("report.stoppedInterval", "a number of seconds, more than 0", defaults.stoppedInterval) {
            $0 > 0
        }
        let stationarySpeed =
            number("report.stationarySpeed", expected: "a speed in m/s, 0 or more (0 turns the track hold off)") { $0 >= 0 } ?? 0.5
        let hold = stationarySpeed > 0 ? stationarySpeed : nil
        if everyFix { return ReportingPolicy(stationarySpeed: hold) }
        return ReportingPolicy(
            minInterval: minInterval, maxInterval: maxInterval, minDistance: minDistance,
            minHeadingChange: minHeadingChange, stationarySpeed: hold, stoppedInterval: stoppedInterval
        )
    }

    /// A reporting rule: its number, `off` for none, or `fallback` when not given.
    private mutating func rule(_ key: String, _ expected: String, _ fallback: Double?, _ accept: (Double) -> Bool) -> Double? {
        let given = value(key, expected: "\(expected), or off") { text -> Double?? in
            if text.lowercased() == "off" { return .some(nil) }
            return Double(text).flatMap { $0.isFinite && accept($0) ? .some($0) : nil }
        }
        return given ?? fallback
    }

    /// `outbox.*`.
    private mutating func outboxSettings() -> AgentConfiguration.OutboxSettings {
        let syncInterval = number("outbox.syncInterval", expected: "a number of seconds from 0.05 to 60") { $0 >= 0.05 && $0 <= 60 } ?? 1
        let maxBytes =
            value("outbox.maxBytes", expected: "a size from 1MiB to 1TiB, in bytes or with KiB, MiB, GiB (e.g. 64MiB)") {
                Self.parseSize($0).flatMap { (1 << 20...1 << 40).contains($0) ? $0 : nil }
            } ?? 64 << 20
        let maxAge =
            value("outbox.maxAge", expected: "a duration from 1m to 365d, in seconds or with s, m, h, d (e.g. 7d)") {
                Self.parseSeconds($0).flatMap { (60...365 * 86_400).contains($0) ? $0 : nil }
            } ?? 7 * 86_400
        let drainRate = integer("outbox.drainRate", in: 1...100_000, unit: " of events per second") ?? 200
        return .init(syncIntervalSeconds: syncInterval, maxBytes: maxBytes, maxAgeSeconds: maxAge, drainRate: drainRate)
    }

    /// `fixTime.*`.
    private mutating func fixTimeSettings() -> AgentConfiguration.FixTimeSettings {
        let fixTimeMaxOffset =
            value("fixTime.maxOffset", expected: "a duration from 1m to 365d, in seconds or with s, m, h, d (e.g. 15m), or off") {
                (text: String) -> Int?? in
                if text == "off" { return .some(nil) }
                guard let seconds = Self.parseSeconds(text), (60...365 * 86_400).contains(seconds) else { return nil }
                return .some(seconds)
            } ?? AgentConfiguration.defaultFixTimeMaxOffsetSeconds
        let systemClock =
            value("fixTime.systemClock", expected: "auto or synchronized") { AgentConfiguration.SystemClock(rawValue: $0) } ?? .auto
        var fixTime = AgentConfiguration.FixTimeSettings()
        fixTime.maxOffsetSeconds = fixTimeMaxOffset
        fixTime.systemClock = systemClock
        return fixTime
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces, tabs and line breaks.
    func trimmingWhitespace() -> String {
        var slice = Substring(self)
        while let first = slice.first, first.isWhitespace { slice.removeFirst() }
        while let last = slice.last, last.isWhitespace { slice.removeLast() }
        return String(slice)
    }
}

extension ConfigurationSources {
    /// `text` when it is a source URI: a scheme (a letter, then letters, digits, `+`, `-`,
    /// `.`), a colon, no control characters or spaces, and no `user:password@` (which would end
    /// up in the status); `nil` otherwise.
    static func sourceURI(_ text: String) -> String? {
        guard let colon = text.firstIndex(of: ":"), colon != text.startIndex, text.first?.isLetter == true else { return nil }
        let schemeOK = text[..<colon].allSatisfy { (c: Character) -> Bool in
            c.isLetter || c.isNumber || c == "+" || c == "-" || c == "."
        }
        let printable = !text.unicodeScalars.contains { (u: Unicode.Scalar) -> Bool in u.value < 0x20 || u == " " }
        guard schemeOK, printable else { return nil }
        // A user:password@ part would end up in the status: refuse it.
        if let authority = text.firstRange(of: "://") {
            let rest = text[authority.upperBound...]
            if let at = rest.firstIndex(of: "@"), rest[..<at].contains(":") { return nil }
        }
        return text
    }
}
