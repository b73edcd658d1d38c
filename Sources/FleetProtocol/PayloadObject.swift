/// A parsed top-level JSON object of an untrusted payload: the contract's flat key/value form.
///
/// A small strict byte-level parser (RFC 8259): the top level must be an object; string,
/// number, `true`, `false` and `null` values are kept; nested objects and arrays (unknown
/// keys of a later contract version) are validated and skipped, to a depth of
/// ``maximumDepth``. Duplicate keys, invalid UTF-8, raw control characters in strings and
/// trailing bytes are refused. It never traps on any input: every index is checked.
struct PayloadObject {
    /// One value of the object. Numbers keep their text, so integers are read exactly.
    enum Value {
        case string(String)
        case number(Double, integer: UInt64?, negative: Bool)
        case bool(Bool)
        case null
        case nested
    }

    /// Deepest nesting of skipped objects/arrays accepted.
    static let maximumDepth = 16

    private(set) var members: [(key: String, value: Value)] = []

    /// The value of `key`, if present.
    subscript(key: String) -> Value? {
        for member in members where member.key == key { return member.value }
        return nil
    }

    /// Parses `bytes`; throws a short reason when they are not one JSON object.
    init(parsing bytes: [UInt8]) throws(FleetPayload.DecodingError) {
        var parser = Parser(bytes: bytes)
        members = try parser.parseTopLevelObject()
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        func fail(_ what: String) -> FleetPayload.DecodingError {
            .invalidJSON("\(what) at byte \(index)")
        }

        var current: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func expect(_ byte: UInt8, _ what: String) throws(FleetPayload.DecodingError) {
            guard current == byte else { throw fail("expected \(what)") }
            index += 1
        }

        mutating func parseTopLevelObject() throws(FleetPayload.DecodingError) -> [(key: String, value: Value)] {
            skipWhitespace()
            guard current == UInt8(ascii: "{") else { throw fail("expected an object") }
            index += 1
            var members: [(key: String, value: Value)] = []
            members.reserveCapacity(24)
            skipWhitespace()
            if current == UInt8(ascii: "}") {
                index += 1
            } else {
                while true {
                    skipWhitespace()
                    let key = try parseString()
                    if members.contains(where: { $0.key == key }) {
                        throw .invalidJSON("duplicate key \"\(key.prefix(32))\"")
                    }
                    skipWhitespace()
                    try expect(UInt8(ascii: ":"), "':'")
                    skipWhitespace()
                    let value = try parseValue(depth: 1)
                    members.append((key, value))
                    skipWhitespace()
                    if current == UInt8(ascii: ",") { index += 1; continue }
                    try expect(UInt8(ascii: "}"), "',' or '}'")
                    break
                }
            }
            skipWhitespace()
            guard index == bytes.count else { throw fail("unexpected trailing data") }
            return members
        }

        mutating func parseValue(depth: Int) throws(FleetPayload.DecodingError) -> Value {
            guard let byte = current else { throw fail("unexpected end") }
            switch byte {
            case UInt8(ascii: "\""): return .string(try parseString())
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                try skipContainer(depth: depth)
                return .nested
            default: throw fail("unexpected character")
            }
        }

        mutating func literal(_ word: StaticString) throws(FleetPayload.DecodingError) {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count else { throw fail("invalid literal") }
            let matches = word.withUTF8Buffer { w in
                (0..<count).allSatisfy { bytes[index + $0] == w[$0] }
            }
            guard matches else { throw fail("invalid literal") }
            index += count
        }

        /// Validates and skips an object or array whose opening byte is at `index`.
        mutating func skipContainer(depth: Int) throws(FleetPayload.DecodingError) {
            guard depth <= PayloadObject.maximumDepth else { throw fail("nesting too deep") }
            let isObject = current == UInt8(ascii: "{")
            let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
            index += 1
            skipWhitespace()
            if current == close { index += 1; return }
            while true {
                skipWhitespace()
                if isObject {
                    _ = try parseString()
                    skipWhitespace()
                    try expect(UInt8(ascii: ":"), "':'")
                    skipWhitespace()
                }
                _ = try parseValue(depth: depth + 1)
                skipWhitespace()
                if current == UInt8(ascii: ",") { index += 1; continue }
                try expect(close, isObject ? "',' or '}'" : "',' or ']'")
                return
            }
        }

        mutating func parseNumber() throws(FleetPayload.DecodingError) -> Value {
            let start = index
            var negative = false
            if current == UInt8(ascii: "-") { negative = true; index += 1 }
            // Integer part: 0 or [1-9][0-9]*, accumulated exactly while it fits a UInt64.
            var integer: UInt64? = 0
            guard let first = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
                throw fail("invalid number")
            }
            if first == UInt8(ascii: "0") {
                index += 1
            } else {
                while let d = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(d) {
                    if let value = integer {
                        let (m, o1) = value.multipliedReportingOverflow(by: 10)
                        let (s, o2) = m.addingReportingOverflow(UInt64(d - UInt8(ascii: "0")))
                        integer = o1 || o2 ? nil : s
                    }
                    index += 1
                }
            }
            var isInteger = true
            if current == UInt8(ascii: ".") {
                isInteger = false
                index += 1
                guard let d = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(d) else { throw fail("invalid number") }
                while let d = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(d) { index += 1 }
            }
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                isInteger = false
                index += 1
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
                guard let d = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(d) else { throw fail("invalid number") }
                while let d = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(d) { index += 1 }
            }
            if isInteger, let integer, integer < (1 << 53) {
                let magnitude = Double(integer)
                return .number(negative ? -magnitude : magnitude, integer: integer, negative: negative)
            }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            guard let double = Double(text) else { throw fail("invalid number") }
            return .number(double, integer: isInteger ? integer : nil, negative: negative)
        }

        mutating func parseString() throws(FleetPayload.DecodingError) -> String {
            guard current == UInt8(ascii: "\"") else { throw fail("expected a string") }
            index += 1
            let start = index
            // Fast path: no escapes.
            while let b = current, b != UInt8(ascii: "\""), b != UInt8(ascii: "\\") {
                guard b >= 0x20 else { throw fail("control character in string") }
                index += 1
            }
            guard let stop = current else { throw fail("unterminated string") }
            if stop == UInt8(ascii: "\"") {
                defer { index += 1 }
                return try validatedString(bytes[start..<index], start: start)
            }
            var out = Array(bytes[start..<index])
            while true {
                guard let b = current else { throw fail("unterminated string") }
                index += 1
                switch b {
                case UInt8(ascii: "\""):
                    return try validatedString(out[...], start: start)
                case UInt8(ascii: "\\"):
                    guard let e = current else { throw fail("unterminated string") }
                    index += 1
                    switch e {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        var scalar = try hex4()
                        if (0xD800..<0xDC00).contains(scalar) {
                            try expect(UInt8(ascii: "\\"), "a low surrogate")
                            try expect(UInt8(ascii: "u"), "a low surrogate")
                            let low = try hex4()
                            guard (0xDC00..<0xE000).contains(low) else { throw fail("invalid surrogate pair") }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let s = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                        out.append(contentsOf: String(Character(s)).utf8)
                    default:
                        throw fail("invalid escape")
                    }
                default:
                    guard b >= 0x20 else { throw fail("control character in string") }
                    out.append(b)
                }
            }
        }

        mutating func hex4() throws(FleetPayload.DecodingError) -> UInt32 {
            guard index + 4 <= bytes.count else { throw fail("invalid \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let b = bytes[index]
                let digit: UInt8
                switch b {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = b - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = b - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = b - UInt8(ascii: "A") + 10
                default: throw fail("invalid \\u escape")
                }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }

        func validatedString(_ slice: ArraySlice<UInt8>, start: Int) throws(FleetPayload.DecodingError) -> String {
            guard let s = String(validating: slice, as: UTF8.self) else { throw .invalidJSON("invalid UTF-8 in string at byte \(start)") }
            return s
        }
    }
}
