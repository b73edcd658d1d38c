import Configuration
import EdgeCore
import FleetProtocol
import FleetcastCore
import Logging
import MQTTCore
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

    /// Every key the agent understands, in the order of the sample file (``AgentConfigurationKeys``).
    public static var knownKeys: [String] { AgentConfigurationKeys.names }

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
            if key == AgentConfigurationKeys.brokerPassword.name {
                problems.append(
                    .init(
                        key: key, origin: origin,
                        message:
                            "\(key) in \(origin): a password is never accepted on the command line; use \(AgentConfigurationKeys.brokerPasswordFile) or the environment variable \(environmentName(key))"
                    ))
            } else if !knownKeys.contains(key) {
                problems.append(.init(key: key, origin: origin, message: "unknown key \(key) in \(origin)\(suggestion(for: key))"))
            } else {
                flagValues[AbsoluteConfigKey(key.split(separator: ".").map(String.init))] = ConfigValue(.string(value), isSecret: false)
            }
        }
        let flagProvider = InMemoryProvider(name: "flags", values: flagValues)

        let passwordKey = AgentConfigurationKeys.brokerPassword.name
        let passwordVariable = environmentName(passwordKey)
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
                            return key == passwordKey
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
            if collector.keys.contains(passwordKey) {
                problems.append(
                    .init(
                        key: passwordKey, origin: .file(filePath),
                        message:
                            "\(passwordKey) in \(filePath): a password is not accepted in the configuration file; use \(AgentConfigurationKeys.brokerPasswordFile) or the environment variable \(passwordVariable)"
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
    typealias Keys = AgentConfigurationKeys
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

    /// `key`'s value from the highest layer that gives it, its default when none does (or when
    /// the text has not its form: then a problem is recorded too).
    mutating func read<Value>(_ key: AgentConfigurationKey<Value>) -> Value {
        value(key.name, expected: key.expected, key.parse) ?? key.defaultValue
    }

    /// A number as a person writes it: `30`, `2.5`.
    static func show(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
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
        let source = read(Keys.source)

        let broker = brokerSettings()
        let topics = read(Keys.topicsPrefix)
        let fixQoS = read(Keys.qosFix)
        let headingQoS = read(Keys.qosHeading)
        let expiry = read(Keys.messageExpiry)
        let policy = reportingPolicy()
        let outbox = outboxSettings()
        let uplinkBatch = read(Keys.uplinkBatch)
        let uplinkEncoding = read(Keys.uplinkEncoding)
        let payloadFields = read(Keys.payloadFields)
        let fixTime = fixTimeSettings()
        let stateDirectory = read(Keys.stateDir)
        let logLevel = read(Keys.logLevel)

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
        let key = Keys.vehicle.name
        if let (text, origin) = text(key) {
            do {
                vehicle = try VehicleID(validating: text)
                if let problem = vehicle?.portabilityProblem {
                    problems.append(.init(key: key, origin: origin, message: "\(key) in \(origin): \(problem)"))
                    vehicle = nil
                }
            } catch {
                problems.append(.invalid(key, origin, expected: Keys.vehicle.expected, got: text))
            }
        } else {
            problems.append(
                .init(
                    key: key, origin: .defaultValue,
                    message:
                        "\(key) is required: set it in the configuration file, the environment variable \(AgentConfiguration.environmentName(key)) or the flag \(AgentConfiguration.flagName(key))"
                ))
        }
        return vehicle
    }

    /// `broker.*`; `nil` when the URL is unusable.
    private mutating func brokerSettings() -> AgentConfiguration.Broker? {
        let urls = brokerURLs()
        let url = urls?.first
        let username = text(Keys.brokerUsername.name)?.0 ?? url?.username
        var password: Secret?
        var passwordFile: String?
        let (passwordKey, fileKey) = (Keys.brokerPassword.name, Keys.brokerPasswordFile.name)
        let passwordFromEnvironment = text(passwordKey, secret: true)
        if let (path, origin) = text(fileKey) {
            if passwordFromEnvironment != nil {
                problems.append(
                    .init(
                        key: fileKey, origin: origin,
                        message:
                            "\(fileKey) in \(origin): give either \(fileKey) or \(AgentConfiguration.environmentName(passwordKey)), not both"
                    ))
            }
            do {
                guard let secret = try PasswordFile.read(path) else {
                    throw AtomicFile.Failure(operation: "open", path: path, errno: ENOENT)
                }
                if secret.isEmpty {
                    problems.append(
                        .invalid(
                            fileKey, origin, expected: "a file whose first line is the password (it is empty)", got: path))
                }
                password = Secret(secret)
                passwordFile = path
            } catch {
                problems.append(
                    .invalid(fileKey, origin, expected: "\(Keys.brokerPasswordFile.expected) (\(error))", got: path))
            }
        } else if let (secret, _) = passwordFromEnvironment {
            password = Secret(secret)
        }
        let tlsKeys = [Keys.brokerCAFile.name, Keys.brokerCertFile.name, Keys.brokerKeyFile.name]
        let caFile = readableFile(tlsKeys[0])
        let certFile = readableFile(tlsKeys[1])
        let keyFile = readableFile(tlsKeys[2])
        if (certFile == nil) != (keyFile == nil), let key = certFile == nil ? tlsKeys[2] : tlsKeys[1] as String?,
            let origin = origins[key]
        {
            problems.append(
                .init(
                    key: key, origin: origin,
                    message: "\(key) in \(origin): \(tlsKeys[1]) and \(tlsKeys[2]) go together; give both or neither"))
        }
        if let url, !url.usesTLS {
            for key in tlsKeys {
                if let origin = origins[key] {
                    problems.append(
                        .init(
                            key: key, origin: origin,
                            message: "\(key) in \(origin): TLS files need a broker.url starting with mqtts://, got \"\(url)\""))
                }
            }
        }
        let protocolVersion = read(Keys.brokerProtocol)
        let keepAlive = read(Keys.brokerKeepAlive)
        let maxInflight = read(Keys.brokerMaxInflight)
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
        let key = Keys.brokerURL.name
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
        let everyFix = read(Keys.reportEveryFix)
        var minInterval = read(Keys.reportMinInterval)
        let maxInterval = read(Keys.reportMaxInterval)
        let (maxKey, minKey) = (Keys.reportMaxInterval.name, Keys.reportMinInterval.name)
        if let floor = minInterval, let maxInterval, maxInterval < floor {
            if let origin = origins[maxKey], origins[minKey] != nil {
                problems.append(
                    .invalid(maxKey, origin, expected: "at least \(minKey) (\(Self.show(floor)) s)", got: Self.show(maxInterval)))
            } else {
                minInterval = maxInterval  // a heartbeat set below the default floor lowers it
            }
        }
        let minDistance = read(Keys.reportMinDistance)
        let minHeadingChange = read(Keys.reportMinHeadingChange)
        let stoppedInterval = read(Keys.reportStoppedInterval)
        let stationarySpeed = read(Keys.reportStationarySpeed)
        let hold = stationarySpeed > 0 ? stationarySpeed : nil
        if everyFix { return ReportingPolicy(stationarySpeed: hold) }
        return ReportingPolicy(
            minInterval: minInterval, maxInterval: maxInterval, minDistance: minDistance,
            minHeadingChange: minHeadingChange, stationarySpeed: hold, stoppedInterval: stoppedInterval
        )
    }

    /// `outbox.*`.
    private mutating func outboxSettings() -> AgentConfiguration.OutboxSettings {
        let syncInterval = read(Keys.outboxSyncInterval)
        let maxBytes = read(Keys.outboxMaxBytes)
        let maxAge = read(Keys.outboxMaxAge)
        let drainRate = read(Keys.outboxDrainRate)
        return .init(syncIntervalSeconds: syncInterval, maxBytes: maxBytes, maxAgeSeconds: maxAge, drainRate: drainRate)
    }

    /// `fixTime.*`.
    private mutating func fixTimeSettings() -> AgentConfiguration.FixTimeSettings {
        let fixTimeMaxOffset = read(Keys.fixTimeMaxOffset)
        let systemClock = read(Keys.fixTimeSystemClock)
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
