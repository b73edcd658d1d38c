/// JSON string literals (RFC 8259 §7), the one escaper for every JSON Fleetcast writes by hand:
/// the contract payloads, fleet-watch's JSON lines and gpsd's `?WATCH` command; and, without
/// the quotes (``escaped(_:)``), for text from the wire printed on a terminal or logged.
///
/// Escapes `"` and `\`, every control character below U+0020 (`\n`, `\r` and `\t` in their
/// short forms, the others as `\u00XX`), DEL, U+007F, and the C1 controls U+0080–U+009F (JSON
/// allows those raw, but a terminal acts on them: ESC, BEL and CSI start escape sequences).
/// Everything else, other non-ASCII UTF-8 included, is copied byte for byte.
public enum JSONString {
    /// Appends `text` as a JSON string literal, quotes included, to `bytes`.
    ///
    /// Runs of bytes that need no escape are copied in one go, so a plain string costs a scan
    /// and a copy.
    @inlinable
    public static func appendQuoted(_ text: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        appendEscaped(text, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends `text` escaped as inside a JSON string literal, without the quotes.
    @inlinable
    public static func appendEscaped(_ text: String, to bytes: inout [UInt8]) {
        var text = text  // `withUTF8` may make a bridged string native; a native one is not copied.
        text.withUTF8 { utf8 in
            var start = 0
            var index = 0
            while index < utf8.count {
                let byte = utf8[index]
                if needsEscape(byte) {
                    if start < index { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index])) }
                    appendEscape(of: byte, to: &bytes)
                    index += 1
                    start = index
                } else if byte == 0xC2, index + 1 < utf8.count, utf8[index + 1] >= 0x80, utf8[index + 1] <= 0x9F {
                    // A C1 control (U+0080–U+009F), two bytes in UTF-8.
                    if start < index { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index])) }
                    appendEscape(of: utf8[index + 1], to: &bytes)
                    index += 2
                    start = index
                } else {
                    index += 1
                }
            }
            if start < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...])) }
        }
    }

    /// `text` escaped as inside a JSON string, without the quotes: fit for a terminal or a log
    /// line whatever it came from (no control character left raw).
    public static func escaped(_ text: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        appendEscaped(text, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `text` as a JSON string literal, quotes included.
    public static func quoted(_ text: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count + 2)
        appendQuoted(text, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether the UTF-8 byte `byte` must be escaped: `"`, `\`, a control character or DEL.
    /// (Bytes of multi-byte sequences are all ≥ 0x80: they never match.)
    @inlinable
    static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == 0x7F
    }

    @inlinable
    static func appendEscape(of byte: UInt8, to bytes: inout [UInt8]) {
        let backslash = UInt8(ascii: "\\")
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(backslash); bytes.append(byte)
        case 0x0A: bytes.append(backslash); bytes.append(UInt8(ascii: "n"))
        case 0x0D: bytes.append(backslash); bytes.append(UInt8(ascii: "r"))
        case 0x09: bytes.append(backslash); bytes.append(UInt8(ascii: "t"))
        default:
            bytes.append(backslash)
            bytes.append(UInt8(ascii: "u"))
            bytes.append(UInt8(ascii: "0"))
            bytes.append(UInt8(ascii: "0"))
            bytes.append(hexDigit(byte >> 4))
            bytes.append(hexDigit(byte & 0xF))
        }
    }

    @inlinable
    static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
