/// JSON string literals (RFC 8259 §7), the one escaper for every JSON Fleetcast writes by hand:
/// the contract payloads, fleet-watch's JSON lines and gpsd's `?WATCH` command.
///
/// Escapes `"` and `\`, every control character below U+0020 (`\n`, `\r` and `\t` in their
/// short forms, the others as `\u00XX`) and also DEL, U+007F, as `\u007f` (JSON allows it raw,
/// but a terminal or a log viewer does not show it). Everything else, non-ASCII UTF-8
/// included, is copied byte for byte.
public enum JSONString {
    /// Appends `text` as a JSON string literal, quotes included, to `bytes`.
    ///
    /// Runs of bytes that need no escape are copied in one go, so a plain string costs a scan
    /// and a copy.
    @inlinable
    public static func appendQuoted(_ text: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        var text = text  // `withUTF8` may make a bridged string native; a native one is not copied.
        text.withUTF8 { utf8 in
            var start = 0
            for index in utf8.indices where needsEscape(utf8[index]) {
                if start < index { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index])) }
                appendEscape(of: utf8[index], to: &bytes)
                start = index + 1
            }
            if start < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...])) }
        }
        bytes.append(UInt8(ascii: "\""))
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
