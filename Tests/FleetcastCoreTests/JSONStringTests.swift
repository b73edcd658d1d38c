import FleetcastCore
import Foundation
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
        let text = "é — 日本 🚗 \u{80}\u{FFFF}"
        var bytes: [UInt8] = []
        JSONString.appendQuoted(text, to: &bytes)
        #expect(bytes == [UInt8(ascii: "\"")] + Array(text.utf8) + [UInt8(ascii: "\"")])
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
