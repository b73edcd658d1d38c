import Configuration

/// A YAML configuration file as swift-configuration values, parsed with libyaml (Debian's
/// `libyaml-0-2`): use it as `FileProvider<LibYAMLSnapshot>`.
///
/// It stands in for swift-configuration's `YAMLSnapshot`, which needs Yams and with it full
/// Foundation (ICU), far too heavy for the vehicle agent. It reads the same files the same way:
/// - the top level is a mapping; nested mappings flatten to dot-separated keys
///   (`broker: {url: …}` is `broker.url`);
/// - a value is a scalar, read as a string (as written, without quotes; `""` for an empty
///   value, `~` and `null` as they are), a whole or floating-point number or a boolean (see
///   ``YAMLScalar``), or a sequence of scalars, read as an array of them;
/// - the secrets specifier of ``ParsingOptions`` is asked about every key as the file is read.
///
/// It refuses, naming the line, column and key: YAML syntax errors (in libyaml's words),
/// anchors and aliases, keys that are mappings or sequences, sequences holding mappings or
/// sequences, more than one document, mappings nested more than ``maximumDepth`` deep, and
/// files larger than ``maximumBytes``.
public struct LibYAMLSnapshot: Sendable {
    /// How to read the file: how a value becomes bytes, and which keys hold secrets.
    public struct ParsingOptions: FileParsingOptions {
        /// A decoder of bytes from a string, for `bytes` and `byteChunkArray` lookups.
        public var bytesDecoder: any ConfigBytesFromStringDecoder

        /// Which values are secret (never shown in descriptions); asked about every key, with
        /// its dot-separated form (`broker.password`), while the file is parsed.
        public var secretsSpecifier: SecretsSpecifier<String, Void>

        /// Options; by default bytes are base64 and nothing is secret.
        public init(
            bytesDecoder: some ConfigBytesFromStringDecoder = .base64,
            secretsSpecifier: SecretsSpecifier<String, Void> = .none
        ) {
            self.bytesDecoder = bytesDecoder
            self.secretsSpecifier = secretsSpecifier
        }

        /// Base64 bytes, no secrets.
        public static var `default`: Self { .init() }
    }

    /// Why a file was refused, or a value could not be read as the type asked for: what, and
    /// where when known (1-based line and column).
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// What is wrong.
        public var message: String
        /// The line (from 1) where the problem is, if known.
        public var line: Int?
        /// The column (from 1) where the problem is, if known.
        public var column: Int?

        init(_ message: String, line: Int? = nil, column: Int? = nil) {
            self.message = message
            self.line = line
            self.column = column
        }

        /// `line 3, column 7: …`, or the message alone when the place is not known.
        public var description: String {
            guard let line, let column else { return message }
            return "line \(line), column \(column): \(message)"
        }
    }

    /// The largest file read, in bytes (1 MiB; the sample file is 5 KiB).
    public static let maximumBytes = 1 << 20

    /// The deepest nesting of mappings, the top level included (32; the agent's keys have 2).
    public static let maximumDepth = 32

    /// A value as the file holds it.
    enum Value: Sendable, CustomStringConvertible {
        case scalar(YAMLScalar)
        case sequence([YAMLScalar])

        var description: String {
            switch self {
            case .scalar(let scalar): return scalar.text
            case .sequence(let items): return items.map(\.text).joined(separator: ",")
            }
        }
    }

    /// A value, whether it is secret and where it is written (1-based).
    struct Entry: Sendable {
        var value: Value
        var isSecret: Bool
        var line: Int
        var column: Int
    }

    /// The name of the provider that created this snapshot.
    public let providerName: String
    /// The values by dot-separated key.
    let values: [String: Entry]
    let bytesDecoder: any ConfigBytesFromStringDecoder
}

extension LibYAMLSnapshot: FileConfigSnapshot {
    /// Parses `data` as a YAML document whose top level is a mapping.
    ///
    /// - Throws: ``Failure``, naming the line, column and key of the problem.
    public init(data: RawSpan, providerName: String, parsingOptions: ParsingOptions) throws {
        guard data.byteCount <= Self.maximumBytes else {
            throw Failure("the file has \(data.byteCount) bytes, more than the \(Self.maximumBytes) a configuration file may have")
        }
        let secretsSpecifier = parsingOptions.secretsSpecifier
        self.values = try data.withUnsafeBytes { (input) throws(Failure) in
            try DocumentReader(input: input, secretsSpecifier: secretsSpecifier).read()
        }
        self.providerName = providerName
        self.bytesDecoder = parsingOptions.bytesDecoder
    }
}

extension LibYAMLSnapshot: ConfigSnapshot {
    /// The value of `key` (its components joined with dots) as `type`; `nil` when the file does
    /// not have the key.
    ///
    /// - Throws: ``Failure`` when the value cannot be read as `type` (a sequence read as a
    ///   string, `abc` as an int, `"5"` as an int…).
    public func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        let encodedKey = key.components.joined(separator: ".")
        guard let entry = values[encodedKey] else { return LookupResult(encodedKey: encodedKey, value: nil) }
        let content = try Self.content(of: entry, key: encodedKey, as: type, bytesDecoder: bytesDecoder)
        return LookupResult(encodedKey: encodedKey, value: ConfigValue(content, isSecret: entry.isSecret))
    }

    private static func content(
        of entry: Entry, key: String, as type: ConfigType, bytesDecoder: any ConfigBytesFromStringDecoder
    ) throws(Failure) -> ConfigContent {
        func mismatch() -> Failure {
            Failure(
                "\(key) cannot be read as \(type.rawValue): \(entry.isSecret ? "<redacted>" : "\"\(entry.value)\"")",
                line: entry.line, column: entry.column)
        }
        func items<T>(_ convert: (YAMLScalar) -> T?) throws(Failure) -> [T] {
            guard case .sequence(let items) = entry.value else { throw mismatch() }
            var converted: [T] = []
            for item in items {
                guard let value = convert(item) else { throw mismatch() }
                converted.append(value)
            }
            return converted
        }
        if case .scalar(let scalar) = entry.value {
            switch type {
            case .string: return .string(scalar.text)
            case .int: if let value = scalar.int { return .int(value) }
            case .double: if let value = scalar.double { return .double(value) }
            case .bool: if let value = scalar.bool { return .bool(value) }
            case .bytes: if let value = bytesDecoder.decode(scalar.text) { return .bytes(value) }
            default: break
            }
            throw mismatch()
        }
        switch type {
        case .stringArray: return .stringArray(try items { $0.text })
        case .intArray: return .intArray(try items(\.int))
        case .doubleArray: return .doubleArray(try items(\.double))
        case .boolArray: return .boolArray(try items(\.bool))
        case .byteChunkArray: return .byteChunkArray(try items { bytesDecoder.decode($0.text) })
        default: throw mismatch()
        }
    }
}

extension LibYAMLSnapshot: CustomStringConvertible, CustomDebugStringConvertible {
    /// The provider's name and the number of values.
    public var description: String { "\(providerName)[\(values.count) values]" }

    /// Every key and value, sorted by key; secrets show as `<REDACTED>`.
    public var debugDescription: String {
        let pairs = values.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value.isSecret ? "<REDACTED>" : "\($0.value.value)")" }
        return "\(providerName)[\(values.count) values: \(pairs.joined(separator: ", "))]"
    }
}
