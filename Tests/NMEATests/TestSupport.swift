import GNSS
import NMEA

/// Builds `$BODY*hh\r\n` with the right checksum.
func sentence(_ body: String, lineEnd: String = "\r\n") -> String {
    let sum = NMEAChecksum.compute(Array(body.utf8))
    let hex = String(sum, radix: 16, uppercase: true)
    return "$" + body + "*" + (hex.count == 1 ? "0" + hex : hex) + lineEnd
}

/// Decodes a string in one piece.
func decodeAll(_ text: String, options: NMEADecoder.Options = .init()) -> (events: [GNSSEvent], statistics: NMEAStatistics) {
    var decoder = NMEADecoder(options: options)
    let events = decoder.decode(Array(text.utf8))
    return (events, decoder.statistics)
}

extension GNSSEvent {
    var fix: Fix? { if case .fix(let f) = self { f } else { nil } }
    var heading: Heading? { if case .heading(let h) = self { h } else { nil } }
}

/// Runs the framer over chunks and returns the lines as strings.
func frame(_ chunks: [String]) -> (lines: [String], framingErrors: Int) {
    var framer = NMEAFramer()
    var lines: [String] = []
    for chunk in chunks {
        Array(chunk.utf8).withUnsafeBytes { raw in
            framer.append(raw) { lines.append(String(decoding: $0, as: UTF8.self)) }
        }
    }
    framer.finish { lines.append(String(decoding: $0, as: UTF8.self)) }
    return (lines, framer.framingErrors)
}
