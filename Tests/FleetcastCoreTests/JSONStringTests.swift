import FleetcastCore
import Foundation
import JSONEscaping
import Testing

@Suite struct JSONStringTests {
    @Test func quotesAndBackslashesAreEscaped() {
        #expect(JSONString.quoted(#"a"b\c"#) == #""a\"b\\c""#)
        #expect(JSONString.quoted(#"""#) == #""\"""#)
        #expect(JSONString.quoted(#"\\"#) == #""\\\\""#)
    }

    @Test func everyControlCharacterIsEscaped() {
        let short: [UInt8: String] = [0x09: #"\t"#, 0x0A: #"\n"#, 0x0D: #"\r"#]
        for value in UInt8(0)..<0x20 {
            let text = String(decoding: [UInt8(ascii: "a"), value, UInt8(ascii: "b")], as: UTF8.self)
            let hex = String(value, radix: 16)
            let expected = short[value] ?? #"\u00"# + (hex.count == 1 ? "0" + hex : hex)
            #expect(JSONString.quoted(text) == "\"a" + expected + "b\"", "0x\(hex)")
        }
    }

    @Test func deleteIsEscaped() {
        #expect(JSONString.quoted("a\u{7F}b") == #""a\u007fb""#)
    }

    @Test func nonASCIIPassesThroughByteForByte() {
        let text = "é — 日本 🚗 \u{A0}\u{FFFF}"
        var bytes: [UInt8] = []
        JSONString.appendQuoted(text, to: &bytes)
        #expect(bytes == [UInt8(ascii: "\"")] + Array(text.utf8) + [UInt8(ascii: "\"")])
    }

    @Test func c1ControlsAreEscapedForTerminalsAndEscapedHasNoQuotes() {
        // U+009B is CSI, U+0085 NEL: a terminal acts on them as on ESC [ and a newline.
        #expect(JSONString.quoted("a\u{9B}31mb\u{85}\u{80}\u{9F}\u{A0}") == #""a\u009b31mb\u0085\u0080\u009f\#u{A0}""#)
        #expect(JSONString.escaped("x\u{1B}]0;t\u{07}\"") == #"x\u001b]0;t\u0007\""#)
        #expect(JSONString.escaped("\u{C2}") == "\u{C2}", "Â (C3 82 in UTF-8) is no control")
    }

    @Test func appendsAfterWhatTheBufferHolds() {
        var bytes = Array("{\"k\":".utf8)
        JSONString.appendQuoted("", to: &bytes)
        JSONString.appendQuoted("x\ny", to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"k":"""x\ny""#)
    }

    @Test func everyASCIIScalarRoundTripsThroughAJSONParser() throws {
        var text = (0..<0x80).map { String(UnicodeScalar(UInt8($0))) }.joined()
        text += "é🚗"
        let quoted = JSONString.quoted(text)
        #expect(!quoted.utf8.contains { $0 < 0x20 || $0 == 0x7F }, "no raw control or DEL in the output")
        let parsed = try JSONSerialization.jsonObject(with: Data("[\(quoted)]".utf8)) as? [String]
        #expect(parsed == [text])
    }
}
