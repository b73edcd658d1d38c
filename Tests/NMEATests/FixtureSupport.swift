import Foundation
import GNSS
import NMEA

/// Access to the gpsd recordings in `Fixtures/gpsd`.
enum Fixtures {
    static var gpsdFolder: URL {
        if let url = Bundle.module.url(forResource: "Fixtures", withExtension: nil) {
            return url.appendingPathComponent("gpsd")
        }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/gpsd")
    }

    /// Every `*.log` recording, sorted by name.
    static var recordings: [URL] {
        let files = (try? FileManager.default.contentsOfDirectory(at: gpsdFolder, includingPropertiesForKeys: nil)) ?? []
        return files.filter { $0.pathExtension == "log" }.sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    static func bytes(_ url: URL) throws -> [UInt8] {
        Array(try Data(contentsOf: url))
    }

    /// Decodes `bytes` in chunks of the given sizes (cycled), then finishes.
    static func decode(_ bytes: [UInt8], chunks: [Int], options: NMEADecoder.Options = .init()) -> ([GNSSEvent], NMEAStatistics) {
        var decoder = NMEADecoder(options: options)
        var events: [GNSSEvent] = []
        var offset = 0
        var k = 0
        bytes.withUnsafeBytes { raw in
            while offset < raw.count {
                let n = min(max(1, chunks[k % chunks.count]), raw.count - offset)
                decoder.decode(UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + n)])) { events.append($0) }
                offset += n
                k += 1
            }
        }
        decoder.finish { events.append($0) }
        return (events, decoder.statistics)
    }
}
