/// A vehicle's identity in topics and payloads: 1–64 characters of `[A-Za-z0-9._-]`.
///
/// The restriction guarantees that no `+`, `#`, `/`, empty level or control character can ever
/// reach an MQTT topic built from it. Anything else is refused with ``VehicleID/ValidationError``.
public struct VehicleID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The id as it appears in topics and the `"vehicle"` key.
    public let rawValue: String

    /// Why a text is not a vehicle id.
    public struct ValidationError: Error, Sendable, Equatable, CustomStringConvertible {
        /// The refused text.
        public let text: String
        public var description: String {
            "invalid vehicle id \"\(text.prefix(80))\": expected 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' or '-'"
        }
    }

    /// Validates `text`; throws ``ValidationError`` naming the text and the expected form.
    public init(validating text: String) throws(ValidationError) {
        guard Self.isValid(text.utf8) else { throw ValidationError(text: text) }
        rawValue = text
    }

    /// `nil` when `text` is not a valid id.
    public init?(_ text: String) {
        guard Self.isValid(text.utf8) else { return nil }
        rawValue = text
    }

    /// Whether bytes form a valid vehicle id, without building a `String`.
    public static func isValid<C: Collection<UInt8>>(_ bytes: C) -> Bool {
        guard (1...64).contains(bytes.count) else { return false }
        for b in bytes {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                continue
            default:
                return false
            }
        }
        return true
    }

    public var description: String { rawValue }

    /// Whether every broker carries topics with this id: not when it holds a `.`, which NATS
    /// (whose subjects it separates) refuses in a topic by closing the connection. The agent and
    /// fleet-watch refuse such an id in their configuration (``portabilityProblem``); readers
    /// still take one from a broker that carried it.
    public var isPortable: Bool { !rawValue.utf8.contains(UInt8(ascii: ".")) }

    /// Why this id cannot be configured (it holds a `.`), or `nil`.
    public var portabilityProblem: String? {
        isPortable
            ? nil
            : "vehicle id \"\(rawValue)\" holds a '.': some brokers (NATS) treat it as a separator and close the connection of a client that publishes it; use '-' or '_' instead"
    }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}
