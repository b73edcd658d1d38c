import GNSS
import JSONEscaping

/// A small append-only JSON object writer over bytes, for the contract's flat payloads.
///
/// It writes keys in the order they are added and leaves out `nil` and non-finite values
/// (the contract never sends `null`). Numbers use Swift's shortest round-trip form after
/// rounding to a fixed number of decimals, so `0.1` prints as `0.1`.
///
/// Package-visible: fleet-watch's bridges write Home Assistant and OwnTracks JSON with it, so
/// the package has one JSON string escaper and one number formatter.
package struct JSONWriter {
    private(set) var bytes: [UInt8]
    private var first = true

    package init(capacity: Int = 320) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    package mutating func finish() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    private mutating func key(_ name: StaticString) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    package mutating func string(_ name: StaticString, _ value: String?) {
        guard let value else { return }
        key(name)
        JSONString.appendQuoted(value, to: &bytes)
    }

    package mutating func raw(_ name: StaticString, _ value: StaticString) {
        key(name)
        bytes.append(UInt8(ascii: "\""))
        value.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
    }

    package mutating func int<I: BinaryInteger>(_ name: StaticString, _ value: I?) {
        guard let value else { return }
        key(name)
        if let small = Int64(exactly: value) {
            Self.appendInteger(small, to: &bytes)
        } else {
            bytes.append(contentsOf: String(value).utf8)
        }
    }

    /// Appends `value` in decimal, digit by digit (no `String` made: a fix has a dozen integers).
    package static func appendInteger(_ value: Int64, to bytes: inout [UInt8]) {
        var magnitude = value.magnitude
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: UInt64.max has 20 digits
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[23 - count] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude != 0
            bytes.append(contentsOf: buffer[(24 - count)...])
        }
    }

    package mutating func bool(_ name: StaticString, _ value: Bool?) {
        guard let value else { return }
        key(name)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    /// Writes a number rounded to `decimals` places; `nil`, NaN and infinities are left out.
    package mutating func number(_ name: StaticString, _ value: Double?, decimals: Int) {
        guard let value, value.isFinite else { return }
        key(name)
        Self.appendNumber(value, decimals: decimals, to: &bytes)
    }

    package mutating func time(_ name: StaticString, _ value: GNSSTimeWritable?) {
        guard let value else { return }
        key(name)
        bytes.append(UInt8(ascii: "\""))
        value.appendISO8601(to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    /// Writes an explicit `null`, for formats that give it a meaning (Home Assistant's
    /// discovery `"name": null`: the entity takes its device's name). The contract never does.
    package mutating func null(_ name: StaticString) {
        key(name)
        bytes.append(contentsOf: "null".utf8)
    }

    /// Writes an array of strings, each escaped; an empty array is written as `[]`.
    package mutating func strings(_ name: StaticString, _ values: [String]) {
        key(name)
        bytes.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            JSONString.appendQuoted(value, to: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// Writes `json` as the value, unchecked: text the caller made itself and knows to be
    /// JSON (GeoJSON's coordinate arrays, formatted number by number).
    package mutating func raw(_ name: StaticString, json: String) {
        key(name)
        bytes.append(contentsOf: json.utf8)
    }

    /// Writes a nested object whose members `body` adds.
    package mutating func object(_ name: StaticString, _ body: (inout JSONWriter) -> Void) {
        key(name)
        var inner = JSONWriter(capacity: 128)
        body(&inner)
        bytes.append(contentsOf: inner.finish())
    }

    static let scales: [Double] = [1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10]

    package static func appendNumber(_ value: Double, decimals: Int, to bytes: inout [UInt8]) {
        let scale = scales[min(max(decimals, 0), scales.count - 1)]
        // Near Double's limit `value * scale` overflows to infinity (which would print as
        // "inf", not JSON); such a value has no decimals to round anyway.
        let scaled = value * scale
        var rounded = scaled.isFinite ? scaled.rounded() / scale : value
        if rounded == 0 { rounded = 0 }  // no "-0.0"
        if rounded == rounded.rounded(), abs(rounded) < 1e15 {
            appendInteger(Int64(rounded), to: &bytes)
        } else if decimals > 0, scaled.isFinite, abs(scaled) < 1e15, abs(rounded) >= 1e-3 {
            appendDecimal(Int64(scaled.rounded()), decimals: min(decimals, scales.count - 1), to: &bytes)
        } else {
            bytes.append(contentsOf: rounded.description.utf8)
        }
    }

    /// Writes `units / 10^decimals` in plain decimal notation, trailing zeros dropped: what
    /// `Double.description` writes for the double nearest that quotient, without a `String`.
    /// (The same text: with |units| below 10^15 the quotient has at most 15 significant digits,
    /// and such decimals survive a round trip through `Double` (DBL_DIG is 15), so no two of them
    /// share a double; dividing two exactly representable integers is correctly rounded, so the
    /// caller's rounded value is the double nearest this decimal. This text, trailing zeros
    /// dropped, is therefore the shortest that reads back as it, which is what `description`
    /// writes; and between 10^-3 and 10^15 `description` uses no exponent. The caller keeps to
    /// those bounds; `FleetPayloadTests` compares the two.)
    static func appendDecimal(_ units: Int64, decimals: Int, to bytes: inout [UInt8]) {
        if units < 0 { bytes.append(UInt8(ascii: "-")) }
        let magnitude = units.magnitude
        let divisor = UInt64(powersOfTen[decimals])
        appendInteger(Int64(magnitude / divisor), to: &bytes)
        var fraction = magnitude % divisor
        guard fraction > 0 else { return }
        var digits = decimals
        while fraction % 10 == 0 {
            fraction /= 10
            digits -= 1
        }
        bytes.append(UInt8(ascii: "."))
        var place = UInt64(powersOfTen[digits - 1])
        while place > 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(fraction / place % 10))
            place /= 10
        }
    }

    static let powersOfTen: [Int64] = [
        1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000, 10_000_000_000,
    ]
}

package typealias GNSSTimeWritable = UTCTimestamp
