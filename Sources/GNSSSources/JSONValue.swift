#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Any JSON value, decoded without a schema so that gpsd objects can be read defensively
/// (a key with an unexpected type is treated as missing, not as a failure of the object).
enum JSONValue: Decodable, Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let d = try? c.decode(Double.self) {
            self = .number(d)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([JSONValue].self) {
            self = .array(a)
        } else {
            self = .object(try c.decode([String: JSONValue].self))
        }
    }

    /// Parses one JSON text; `nil` when it is not valid JSON.
    static func parse(_ bytes: some Collection<UInt8>) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
    }

    /// The member `key` of an object, `nil` for a missing key or a non-object.
    subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    /// The value as a finite number, or `nil`.
    var double: Double? {
        if case .number(let d) = self, d.isFinite { return d }
        return nil
    }

    /// The value as an integer (a JSON number without fraction), or `nil`.
    var int: Int? {
        guard let d = double, d == d.rounded(), abs(d) < 1e15 else { return nil }
        return Int(d)
    }

    /// The value as a string, or `nil`.
    var string: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The value as an array, or `nil`.
    var array: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }
}
