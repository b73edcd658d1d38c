/// A parsed top-level JSON object of an untrusted payload: the contract's flat key/value form.
///
/// A small strict byte-level parser (RFC 8259): the top level must be an object; string,
/// number, `true`, `false` and `null` values are kept; nested objects and arrays (unknown
/// keys of a later contract version) are validated and skipped, to a depth of
/// ``maximumDepth``. Duplicate keys, more than ``maximumMembers`` members, invalid UTF-8, raw
/// control characters in strings and trailing bytes are refused. It never traps on any input:
/// every index is checked.
///
/// Linear time: every byte is looked at a bounded number of times, and the duplicate-key check
/// compares each new key with at most ``maximumMembers`` before it: short keys (every contract
/// key) byte for byte, long ones by hash first (SipHash, seeded per process, so no payload can
/// be made to collide) and by bytes only when hashes agree. A payload of thousands of distinct
/// keys is refused at the first one past the cap instead of costing a quadratic check.
struct PayloadObject {
    /// One value of the object. Numbers keep their text, so integers are read exactly.
    enum Value {
        case string(String)
        case number(Double, integer: UInt64?, negative: Bool)
        case bool(Bool)
        case null
        case nested
        /// A top-level array: the byte range of each element in the parsed payload (elements
        /// are validated, not decoded; the backlog batch's `events`).
        case array([Range<Int>])
    }

    /// Deepest nesting of skipped objects/arrays accepted.
    static let maximumDepth = 16

    /// The most members of the top-level object (a contract payload has at most 27; the rest
    /// is room for later contract versions).
    static let maximumMembers = 64

    /// The keys' UTF-8 bytes (unescaped), one after the other; `members` point into it.
    private var keyBytes: [UInt8] = []
    private var members: [(key: Range<Int>, value: Value)] = []

    /// The value of `key`, if present.
    subscript(key: StaticString) -> Value? {
        key.withUTF8Buffer { wanted in
            for member in members where member.key.count == wanted.count {
                var equal = true
                var j = member.key.lowerBound
                for b in wanted {
                    if keyBytes[j] != b { equal = false; break }
                    j += 1
                }
                if equal { return member.value }
            }
            return nil
        }
    }

    /// Parses `bytes`; throws a short reason when they are not one JSON object.
    init(parsing bytes: [UInt8]) throws(FleetPayload.DecodingError) {
        var parser = Parser(bytes: bytes)
        try parser.parseTopLevelObject()
        keyBytes = parser.keyBytes
        members = parser.members
    }

    /// The work of parsing `bytes`, counted: key comparisons (hashes and bytes) of the
    /// duplicate check. The fuzzer checks that it stays within a constant of the cap, whatever
    /// the payload.
    package static func duplicateCheckComparisons(_ bytes: [UInt8]) -> Int {
        var parser = Parser(bytes: bytes)
        _ = try? parser.parseTopLevelObject()
        return parser.comparisons
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0
        var keyBytes: [UInt8] = []
        var members: [(key: Range<Int>, value: Value)] = []
        /// Each member's key hash, for the duplicate check.
        var keyHashes: [Int] = []
        /// Comparisons the duplicate check made (``duplicateCheckComparisons(_:)``).
        var comparisons = 0

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

        mutating func parseTopLevelObject() throws(FleetPayload.DecodingError) {
            skipWhitespace()
            guard current == UInt8(ascii: "{") else { throw fail("expected an object") }
            index += 1
            members.reserveCapacity(24)
            keyHashes.reserveCapacity(24)
            keyBytes.reserveCapacity(160)
            skipWhitespace()
            if current == UInt8(ascii: "}") {
                index += 1
            } else {
                while true {
                    skipWhitespace()
                    guard members.count < PayloadObject.maximumMembers else {
                        throw .invalidJSON("more than \(PayloadObject.maximumMembers) members")
                    }
                    let key = try parseKey()
                    try checkUnique(key)
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
        }

        /// Keys up to this long (every contract key) are compared byte for byte; longer ones by
        /// hash first.
        static let shortKeyBytes = 16

        /// Refuses a key that is already a member. A short key is compared with the short keys
        /// of its length (at most ``shortKeyBytes`` bytes each); a long one by hash, and by
        /// bytes only when the hashes agree.
        mutating func checkUnique(_ key: Range<Int>) throws(FleetPayload.DecodingError) {
            var hash = 0
            if key.count > Self.shortKeyBytes {
                var hasher = Hasher()
                keyBytes.withUnsafeBytes { hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: $0[key])) }
                hash = hasher.finalize()
            }
            for (i, other) in keyHashes.enumerated() {
                comparisons += 1
                let existing = members[i].key
                guard existing.count == key.count, other == hash else { continue }
                comparisons += key.count
                if keyBytes[existing] == keyBytes[key] {
                    throw .invalidJSON("duplicate key \"\(String(decoding: keyBytes[key].prefix(32), as: UTF8.self))\"")
                }
            }
            keyHashes.append(hash)
        }

        /// Parses a member name into `keyBytes` and returns its range there.
        mutating func parseKey() throws(FleetPayload.DecodingError) -> Range<Int> {
            guard current == UInt8(ascii: "\"") else { throw fail("expected a string") }
            let start = keyBytes.count
            // Fast path: a plain ASCII name without escapes (every contract key).
            var i = index + 1
            while i < bytes.count, bytes[i] >= 0x20, bytes[i] < 0x80, bytes[i] != UInt8(ascii: "\""), bytes[i] != UInt8(ascii: "\\") {
                i += 1
            }
            if i < bytes.count, bytes[i] == UInt8(ascii: "\"") {
                keyBytes.append(contentsOf: bytes[(index + 1)..<i])
                index = i + 1
            } else {
                keyBytes.append(contentsOf: try parseString().utf8)
            }
            return start..<keyBytes.count
        }

        mutating func parseValue(depth: Int) throws(FleetPayload.DecodingError) -> Value {
            guard let byte = current else { throw fail("unexpected end") }
            switch byte {
            case UInt8(ascii: "\""): return .string(try parseString())
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "[") where depth == 1:
                return .array(try parseTopLevelArray())
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

        /// Validates a member's array whose `[` is at `index`; returns each element's byte range.
        mutating func parseTopLevelArray() throws(FleetPayload.DecodingError) -> [Range<Int>] {
            index += 1
            var elements: [Range<Int>] = []
            skipWhitespace()
            if current == UInt8(ascii: "]") { index += 1; return elements }
            while true {
                skipWhitespace()
                let start = index
                _ = try parseValue(depth: 2)
                elements.append(start..<index)
                skipWhitespace()
                if current == UInt8(ascii: ",") { index += 1; continue }
                try expect(UInt8(ascii: "]"), "',' or ']'")
                return elements
            }
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

        static let powersOfTen: [Double] = (0...22).map { n in
            var p = 1.0
            for _ in 0..<n { p *= 10 }
            return p
        }

        static func isDigit(_ b: UInt8?) -> Bool {
            guard let b else { return false }
            return b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")
        }

        mutating func parseNumber() throws(FleetPayload.DecodingError) -> Value {
            let start = index
            var negative = false
            if current == UInt8(ascii: "-") { negative = true; index += 1 }
            // All digits (integer and fraction) as one significand while it fits 19 digits.
            var significand: UInt64 = 0
            var digits = 0
            guard let first = current, Self.isDigit(first) else { throw fail("invalid number") }
            if first == UInt8(ascii: "0") {
                index += 1
                digits = 1
            } else {
                while let d = current, Self.isDigit(d) {
                    if digits < 19 { significand = significand &* 10 &+ UInt64(d &- UInt8(ascii: "0")) }
                    digits += 1
                    index += 1
                }
            }
            let integerDigits = digits
            var fractionDigits = 0
            if current == UInt8(ascii: ".") {
                index += 1
                guard Self.isDigit(current) else { throw fail("invalid number") }
                while let d = current, Self.isDigit(d) {
                    if digits < 19 { significand = significand &* 10 &+ UInt64(d &- UInt8(ascii: "0")) }
                    digits += 1
                    fractionDigits += 1
                    index += 1
                }
            }
            var hasExponent = false
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                hasExponent = true
                index += 1
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
                guard Self.isDigit(current) else { throw fail("invalid number") }
                while Self.isDigit(current) { index += 1 }
            }
            let isInteger = fractionDigits == 0 && !hasExponent
            if isInteger && integerDigits <= 19 {
                // Exact; 19 digits always fit a UInt64.
                let magnitude = Double(significand)
                return .number(negative ? -magnitude : magnitude, integer: significand, negative: negative)
            }
            if !hasExponent && digits <= 15 && fractionDigits <= 22 {
                // Clinger's fast path: significand and power of ten are exact doubles, so one
                // division is correctly rounded.
                let magnitude = Double(significand) / Self.powersOfTen[fractionDigits]
                return .number(negative ? -magnitude : magnitude, integer: nil, negative: negative)
            }
            var integer: UInt64?
            if isInteger {
                // 20 or more digits: exact when it still fits a UInt64.
                var value: UInt64 = 0
                var fits = true
                for b in bytes[(start + (negative ? 1 : 0))..<index] {
                    let (m, o1) = value.multipliedReportingOverflow(by: 10)
                    let (sum, o2) = m.addingReportingOverflow(UInt64(b &- UInt8(ascii: "0")))
                    if o1 || o2 { fits = false; break }
                    value = sum
                }
                integer = fits ? value : nil
            }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            guard let double = Double(text) else { throw fail("invalid number") }
            return .number(double, integer: integer, negative: negative)
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
