import Configuration
import EdgeConfiguration
import EdgeCore
import EdgePublisher
import FleetcastCore
import FleetcastTestSupport
import Foundation
import Testing

@Suite("LibYAML snapshot")
struct LibYAMLSnapshotTests {
    private func snapshot(_ yaml: String, parsingOptions: LibYAMLSnapshot.ParsingOptions = .default) throws -> LibYAMLSnapshot {
        try Self.snapshot(bytes: Array(yaml.utf8), parsingOptions: parsingOptions)
    }

    private static func snapshot(
        bytes: [UInt8], parsingOptions: LibYAMLSnapshot.ParsingOptions = .default
    ) throws -> LibYAMLSnapshot {
        try LibYAMLSnapshot(data: bytes.span.bytes, providerName: "test", parsingOptions: parsingOptions)
    }

    /// The refusal of `yaml` (fails the test if it parses).
    private func failure(_ yaml: String) -> LibYAMLSnapshot.Failure? {
        do {
            _ = try snapshot(yaml)
            Issue.record("expected \(yaml.debugDescription) to be refused")
            return nil
        } catch let failure as LibYAMLSnapshot.Failure {
            return failure
        } catch {
            Issue.record("unexpected error type: \(error)")
            return nil
        }
    }

    private func value(_ snapshot: LibYAMLSnapshot, _ key: String, _ type: ConfigType) throws -> ConfigContent? {
        try snapshot.value(forKey: AbsoluteConfigKey(key.split(separator: ".").map(String.init)), type: type).value?.content
    }

    /// The shipped `config/agent.yaml`.
    private static func sampleBytes() throws -> [UInt8] {
        let path = RepositoryPath.of("config/agent.yaml")
        return Array(try #require(FileManager.default.contents(atPath: path)))
    }

    @Test("nested mappings flatten to dot-separated keys")
    func nestedKeys() throws {
        let yaml = """
            vehicle: van-7
            broker:
              url: mqtt://broker:1883
              tls:
                caFile: /etc/ca.pem
            """
        let snapshot = try snapshot(yaml)
        #expect(try value(snapshot, "vehicle", .string) == .string("van-7"))
        #expect(try value(snapshot, "broker.url", .string) == .string("mqtt://broker:1883"))
        #expect(try value(snapshot, "broker.tls.caFile", .string) == .string("/etc/ca.pem"))
        #expect(try value(snapshot, "broker", .string) == nil, "a mapping is not a value")
        #expect(try value(snapshot, "colour", .string) == nil)
        #expect(snapshot.description == "test[3 values]")
        #expect(try snapshot.value(forKey: AbsoluteConfigKey(["broker", "url"]), type: .string).encodedKey == "broker.url")
    }

    @Test("a sequence of scalars is an array value, block or flow")
    func arrays() throws {
        let yaml = """
            hosts:
              - a.example
              - "b.example"
            ports: [1883, 8883]
            ratios: [0.5, 1, .inf]
            flags: [yes, off]
            none: []
            """
        let snapshot = try snapshot(yaml)
        #expect(try value(snapshot, "hosts", .stringArray) == .stringArray(["a.example", "b.example"]))
        #expect(try value(snapshot, "ports", .intArray) == .intArray([1883, 8883]))
        #expect(try value(snapshot, "ports", .stringArray) == .stringArray(["1883", "8883"]))
        #expect(try value(snapshot, "ratios", .doubleArray) == .doubleArray([0.5, 1, .infinity]))
        #expect(try value(snapshot, "flags", .boolArray) == .boolArray([true, false]))
        #expect(try value(snapshot, "none", .stringArray) == .stringArray([]))
        #expect(throws: LibYAMLSnapshot.Failure.self) { try value(snapshot, "hosts", .string) }
        #expect(throws: LibYAMLSnapshot.Failure.self) { try value(snapshot, "hosts", .intArray) }
        #expect(throws: LibYAMLSnapshot.Failure.self) { try value(snapshot, "ports", .int) }
    }

    @Test("quoted and block scalars stay strings: no number, no boolean")
    func quotedStrings() throws {
        let yaml = """
            vehicle: "007"
            plain: 007
            single: 'yes'
            tagged: !!str 5
            block: |
              42
            after: x
            """
        let snapshot = try snapshot(yaml)
        #expect(try value(snapshot, "vehicle", .string) == .string("007"))
        #expect(throws: LibYAMLSnapshot.Failure.self) { try value(snapshot, "vehicle", .int) }
        #expect(try value(snapshot, "plain", .string) == .string("007"))
        #expect(try value(snapshot, "plain", .int) == .int(7), "a leading zero is octal in YAML 1.1, as Yams read it")
        #expect(try value(snapshot, "single", .string) == .string("yes"))
        #expect(throws: LibYAMLSnapshot.Failure.self) { try value(snapshot, "single", .bool) }
        #expect(try value(snapshot, "tagged", .string) == .string("5"))
        #expect(throws: LibYAMLSnapshot.Failure.self) { try value(snapshot, "tagged", .int) }
        #expect(try value(snapshot, "block", .string) == .string("42\n"))
        #expect(throws: LibYAMLSnapshot.Failure.self) { try value(snapshot, "block", .int) }
    }

    @Test("YAML 1.1 booleans, whole and floating-point numbers")
    func scalarTypes() throws {
        let booleans: [(String, Bool)] = [
            ("true", true), ("True", true), ("TRUE", true), ("yes", true), ("Yes", true), ("YES", true), ("on", true), ("On", true),
            ("ON", true), ("false", false), ("False", false), ("FALSE", false), ("no", false), ("No", false), ("NO", false),
            ("off", false), ("Off", false), ("OFF", false),
        ]
        for (text, expected) in booleans {
            #expect(try value(snapshot("b: \(text)"), "b", .bool) == .bool(expected), "\(text)")
            #expect(try value(snapshot("b: \(text)"), "b", .string) == .string(text))
        }
        for text in ["yEs", "y", "1", "enabled", "\"true\""] {
            #expect(throws: LibYAMLSnapshot.Failure.self, "\(text)") { try value(snapshot("b: \(text)"), "b", .bool) }
        }
        let ints: [(String, Int)] = [
            ("42", 42), ("-7", -7), ("+3", 3), ("0", 0), ("-0", 0), ("1_000", 1000), ("0x1F", 31), ("0b101", 5), ("0o17", 15), ("017", 15),
            ("4294967295", 4_294_967_295),
        ]
        for (text, expected) in ints {
            #expect(try value(snapshot("i: \(text)"), "i", .int) == .int(expected), "\(text)")
        }
        for text in ["2.5", "abc", "64MiB", "0x", "0x-5", "09", "1e3", "", "+"] {
            #expect(throws: LibYAMLSnapshot.Failure.self, "\(text)") { try value(snapshot("i: \(text)"), "i", .int) }
        }
        let doubles: [(String, Double)] = [
            ("2.5", 2.5), ("30", 30), ("-1e3", -1000), ("1_000.5", 1000.5), ("0.05", 0.05), (".inf", .infinity), ("-.Inf", -.infinity),
        ]
        for (text, expected) in doubles {
            #expect(try value(snapshot("d: \(text)"), "d", .double) == .double(expected), "\(text)")
        }
        guard case .double(let nan) = try value(snapshot("d: .NaN"), "d", .double) else {
            Issue.record(".NaN is not a double")
            return
        }
        #expect(nan.isNaN)
        for text in ["abc", "'2.5'", "1.5.2", ""] {
            #expect(throws: LibYAMLSnapshot.Failure.self, "\(text)") { try value(snapshot("d: \(text)"), "d", .double) }
        }
    }

    @Test("~, null and an empty value are read as written, and the agent takes them as not set")
    func nullValues() async throws {
        let snapshot = try snapshot("a: ~\nb: null\nc:\nd: ''\n")
        #expect(try value(snapshot, "a", .string) == .string("~"))
        #expect(try value(snapshot, "b", .string) == .string("null"))
        #expect(try value(snapshot, "c", .string) == .string(""))
        #expect(try value(snapshot, "d", .string) == .string(""))
        #expect(throws: LibYAMLSnapshot.Failure.self) { try value(snapshot, "a", .int) }

        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = try dir.createFile(
            "agent.yaml", "vehicle: van-7\nmessageExpiry: ~\nreport:\n  minInterval: null\ntopics:\n  prefix:\nstateDir: ''\n")
        let config = try await AgentConfiguration.load(filePath: path, environment: [:], flags: [:])
        #expect(config.messageExpirySeconds == nil)
        #expect(config.policy.minInterval == ReportingPolicy.trackerDefaults.minInterval, "not set: the default")
        #expect(config.topics.prefix == "fleet")
        #expect(config.stateDirectory == "/var/lib/fleetcast")
        #expect(Set(config.origins.keys) == ["vehicle"])
    }

    @Test("the secrets specifier is asked about every key, and secrets are redacted")
    func secrets() throws {
        let asked = KeyRecorder()
        let options = LibYAMLSnapshot.ParsingOptions(
            secretsSpecifier: .dynamic { key, _ in
                asked.add(key)
                return key == "broker.password"
            })
        let snapshot = try snapshot("vehicle: van-7\nbroker:\n  password: hunter2\n  hosts: [a, b]\n", parsingOptions: options)
        #expect(asked.keys == ["broker.hosts", "broker.password", "vehicle"])
        #expect(try snapshot.value(forKey: AbsoluteConfigKey(["broker", "password"]), type: .string).value?.isSecret == true)
        #expect(try snapshot.value(forKey: AbsoluteConfigKey(["vehicle"]), type: .string).value?.isSecret == false)
        #expect(!snapshot.debugDescription.contains("hunter2"))
        #expect(snapshot.debugDescription.contains("broker.password=<REDACTED>"))
        #expect(snapshot.debugDescription.contains("vehicle=van-7"))
        do {
            _ = try value(snapshot, "broker.password", .int)
            Issue.record("a password is not an int")
        } catch {
            #expect(!"\(error)".contains("hunter2"))
        }
    }

    @Test("a syntax error says what libyaml found, and the line and column")
    func syntaxError() throws {
        let bad = failure("vehicle: van-7\nbroker:\n  url: mqtt://x\n  keepAlive: 30: 40\n")
        #expect(bad?.line == 4)
        #expect(bad?.column == 16)
        #expect(
            bad?.description.hasPrefix("line 4, column 16: YAML syntax error: mapping values are not allowed") == true,
            "\(String(describing: bad))")

        let unclosed = failure("vehicle: van-7\nhosts: [a, b\n")
        #expect(unclosed?.line == 3)
        #expect(unclosed?.column == 1)
        #expect(unclosed?.message.hasPrefix("YAML syntax error: did not find expected ',' or ']'") == true)
        #expect(
            unclosed?.description.contains("while parsing a flow sequence (line 2, column 8)") == true, "\(String(describing: unclosed))")

        let tab = failure("broker:\n\turl: x\n")
        #expect(tab?.line == 2)
        #expect(tab?.column == 1)

        let control = failure("vehicle: van-7\nsource: sim:\u{7}\n")
        #expect(
            control?.description == "line 2, column 13: unreadable text at byte 27: control characters are not allowed (0x7)",
            "\(String(describing: control))")
        do {
            _ = try Self.snapshot(bytes: Array("vehicle: ".utf8) + [0xFF, 0x0A])
            Issue.record("invalid UTF-8 must be refused")
        } catch {
            #expect("\(error)" == "line 1, column 10: unreadable text at byte 9: invalid leading UTF-8 octet (0xFF)")
        }
    }

    @Test("anchors and aliases are refused, naming the key")
    func aliases() throws {
        let anchored = failure("base: &b mqtt://x\nbroker:\n  url: *b\n")
        #expect(anchored?.line == 1)
        #expect(anchored?.message.hasPrefix("an anchor (&b) at base: anchors and aliases are not supported") == true)
        let alias = failure("broker:\n  url: *b\n")
        #expect(
            alias?.description
                == "line 2, column 8: an alias (*b) at broker.url: anchors and aliases are not supported; write each value out")
        let inList = failure("hosts: [a, *b]\n")
        #expect(inList?.message.hasPrefix("an alias (*b) at hosts:") == true)
        let anchoredMapping = failure("broker: &defaults\n  url: x\n")
        #expect(anchoredMapping?.message.hasPrefix("an anchor (&defaults) at broker:") == true)
    }

    @Test("what the configuration cannot hold is refused with its key and place")
    func unsupportedShapes() throws {
        #expect(failure("? [a, b]\n: x\n")?.message == "a key in the top level is a mapping or a list; keys must be single values")
        #expect(failure("broker:\n  ? {a: 1}\n  : x\n")?.message.hasPrefix("a key in broker is a mapping") == true)
        let nested = failure("broker:\n  hosts:\n    - a\n    - url: x\n")
        #expect(nested?.line == 4)
        #expect(nested?.message.hasPrefix("item 2 of the list broker.hosts is a mapping or a list") == true)
        #expect(failure("hosts: [[a]]\n")?.message.hasPrefix("item 1 of the list hosts") == true)
        #expect(failure("- just\n- a list\n")?.message == "the top level is not a mapping of keys to values")
        #expect(failure("just text\n")?.message == "the top level is not a mapping of keys to values")
        #expect(failure("")?.message.hasPrefix("the file is empty") == true)
        #expect(failure("# only a comment\n\n")?.message.hasPrefix("the file holds no YAML") == true)
        let second = failure("vehicle: a\n---\nvehicle: b\n")
        #expect(second?.line == 2)
        #expect(second?.message == "a second YAML document; the file must hold one")
    }

    @Test("nesting depth and file size are bounded")
    func limits() throws {
        let depth = LibYAMLSnapshot.maximumDepth
        func nested(_ levels: Int) -> String {
            (0..<levels).map { String(repeating: "  ", count: $0) + "k\($0):" }.joined(separator: "\n") + " x\n"
        }
        let deepest = try snapshot(nested(depth))
        #expect(try value(deepest, (0..<depth).map { "k\($0)" }.joined(separator: "."), .string) == .string("x"))
        let tooDeep = failure(nested(depth + 1))
        #expect(tooDeep?.message.hasSuffix("is nested more than \(depth) mappings deep") == true, "\(String(describing: tooDeep))")
        let flowDeep = failure(String(repeating: "{a: ", count: 10_000) + String(repeating: "}", count: 10_000))
        #expect(flowDeep?.message.contains("nested more than") == true)

        let big = "vehicle: van-7\n" + String(repeating: "#", count: LibYAMLSnapshot.maximumBytes)
        #expect(failure(big)?.message.hasPrefix("the file has \(big.utf8.count) bytes, more than the") == true)
    }

    @Test("a key given twice keeps its last value, as with Yams")
    func duplicateKeys() throws {
        let snapshot = try snapshot("broker:\n  url: a\nbroker:\n  keepAlive: 5\nvehicle: x\nvehicle: y\n")
        #expect(try value(snapshot, "broker.url", .string) == .string("a"))
        #expect(try value(snapshot, "broker.keepAlive", .int) == .int(5))
        #expect(try value(snapshot, "vehicle", .string) == .string("y"))
    }

    @Test("the shipped config/agent.yaml is read, with only known keys")
    func shippedFile() throws {
        let bytes = try Self.sampleBytes()
        let snapshot = try Self.snapshot(bytes: bytes)
        #expect(try value(snapshot, "vehicle", .string) == .string("van-7"))
        #expect(try value(snapshot, "broker.url", .string) == .string("mqtts://broker.example.net:8883"))
        #expect(try value(snapshot, "broker.protocol", .string) == .string("auto"))
        #expect(try value(snapshot, "broker.keepAlive", .int) == .int(240))
        #expect(try value(snapshot, "report.stationarySpeed", .double) == .double(0.5))
        #expect(try value(snapshot, "outbox.maxBytes", .string) == .string("64MiB"))
        #expect(try value(snapshot, "broker.certFile", .string) == nil, "commented out")
        #expect(try value(snapshot, "fixTime.maxOffset", .string) == .string("15m"))
        #expect(try value(snapshot, "fixTime.systemClock", .string) == .string("auto"))
        #expect(try value(snapshot, "uplink.batch", .string) == .string("off"))
        #expect(try value(snapshot, "payload.fields", .string) == .string("standard"))

        let keys = KeyRecorder()
        _ = try Self.snapshot(bytes: bytes, parsingOptions: .init(secretsSpecifier: .dynamic { key, _ in keys.add(key) }))
        #expect(keys.keys.count == 30)
        #expect(keys.keys.filter { !AgentConfiguration.knownKeys.contains($0) } == [])
    }

    @Test("truncated and garbled versions of config/agent.yaml never crash the parser")
    func garbledSample() throws {
        let original = try Self.sampleBytes()
        var parsed = 0
        var refused = 0
        func attempt(_ bytes: [UInt8]) {
            do {
                _ = try Self.snapshot(bytes: bytes)
                parsed += 1
            } catch is LibYAMLSnapshot.Failure {
                refused += 1
            } catch {
                Issue.record("unexpected error type: \(error)")
            }
        }
        // Every prefix.
        for length in 0...original.count { attempt(Array(original[..<length])) }
        // Bytes replaced, inserted and removed at pseudo-random places (a fixed seed: the same
        // cases every run), with the characters YAML gives meaning to.
        let special = Array("{}[]&*!|>'\"%@`:-?#,\t\n \\\u{0}".utf8) + [0xFF, 0xC3, 0xFE, 0xEF, 0xBB]
        var random = SplitMix64(seed: 0x5EED_F1EE_7CA5)
        for _ in 0..<3000 {
            var bytes = original
            for _ in 0...random.next(below: 4) {
                let at = random.next(below: bytes.count)
                let byte = random.next(below: 3) == 0 ? UInt8(random.next(below: 256)) : special[random.next(below: special.count)]
                switch random.next(below: 3) {
                case 0: bytes[at] = byte
                case 1: bytes.insert(byte, at: at)
                default: bytes.remove(at: at)
                }
            }
            attempt(bytes)
        }
        #expect(parsed > 0)
        #expect(refused > 0)
    }
}

/// The keys a secrets specifier was asked about, sorted; answers "not secret" (`add`'s result).
private final class KeyRecorder: Sendable {
    private let storage = SanitizerVisibleMutex<[String]>([])
    @discardableResult func add(_ key: String) -> Bool {
        storage.withLock { $0.append(key) }
        return false
    }
    var keys: [String] { storage.withLock { $0.sorted() } }
}

/// A deterministic pseudo-random generator (SplitMix64), so the garbled cases are the same
/// every run.
private struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next(below bound: Int) -> Int {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int((z ^ (z >> 31)) % UInt64(bound))
    }
}
