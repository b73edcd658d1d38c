import FleetcastTestSupport
import Foundation
import GNSS
import NMEA
import Testing

@Suite("NMEADecoder over the recordings")
struct NMEADecoderTests {
    @Test(
        "one byte at a time and random chunk sizes give the same events as one buffer",
        arguments: Fixtures.recordings)
    func chunking(_ log: URL) throws {
        let bytes = try Fixtures.bytes(log)
        let (whole, wholeStats) = Fixtures.decode(bytes, chunks: [bytes.count])
        let (single, singleStats) = Fixtures.decode(bytes, chunks: [1])
        #expect(firstDifference(single, whole) == nil, "byte at a time")
        #expect(singleStats == wholeStats)
        var rng = SystemRandomNumberGenerator()
        let sizes = (0..<64).map { _ in Int.random(in: 1...300, using: &rng) }
        let (random, randomStats) = Fixtures.decode(bytes, chunks: sizes)
        #expect(firstDifference(random, whole) == nil, "chunk sizes \(sizes)")
        #expect(randomStats == wholeStats)
    }

    /// A short description of where two event lists first differ, or nil when equal.
    func firstDifference(_ a: [GNSSEvent], _ b: [GNSSEvent]) -> String? {
        for i in 0..<min(a.count, b.count) where a[i] != b[i] {
            return "event \(i): \(a[i]) != \(b[i])"
        }
        return a.count == b.count ? nil : "\(a.count) events != \(b.count)"
    }

    @Test("well-behaved receivers give exactly one fix per cycle")
    func oneFixPerCycle() throws {
        for name in ["ublox-zed-f9p-nmea", "ublox-f9p-hpnmea", "nmea-rtk", "polarx2", "unicore-um621", "quectelLC79D"] {
            let url = Fixtures.gpsdFolder.appendingPathComponent(name + ".log")
            let fixes = Fixtures.decode(try Fixtures.bytes(url), chunks: [4096]).0.compactMap(\.fix)
            #expect(!fixes.isEmpty, "\(name)")
            #expect(Set(fixes.map(\.time)).count == fixes.count, "\(name): a cycle emitted twice")
        }
    }

    @Test("statistics add up: hp58534a has no checksums, accepted only when asked")
    func noChecksumReceiver() throws {
        let bytes = try Fixtures.bytes(Fixtures.gpsdFolder.appendingPathComponent("hp58534a.log"))
        let (strict, s) = Fixtures.decode(bytes, chunks: [bytes.count])
        #expect(strict.isEmpty && s.sentences == 0 && s.missingChecksums > 0)
        let (lenient, l) = Fixtures.decode(bytes, chunks: [bytes.count], options: .init(acceptsMissingChecksum: true))
        #expect(l.sentences == s.missingChecksums)
        // hp58534a's one ZDA becomes gpsd's cycle ender and never comes again, so gpsd would
        // report nothing from it; a regular receiver without checksums gives fixes.
        let plain = withoutChecksums(try Fixtures.bytes(Fixtures.gpsdFolder.appendingPathComponent("magellan-ec10.log")))
        let (noSums, _) = Fixtures.decode(plain, chunks: [plain.count], options: .init(acceptsMissingChecksum: true))
        #expect(noSums.contains { $0.fix != nil })
    }

    @Test("decodeStream reads through a reused buffer and equals decoding the whole")
    func stream() throws {
        let bytes = try Fixtures.bytes(Fixtures.gpsdFolder.appendingPathComponent("ublox-zed-f9p-nmea.log"))
        var expected = NMEADecoder()
        let whole = expected.decode(bytes)
        var decoder = NMEADecoder()
        var offset = 0
        var events: [GNSSEvent] = []
        try decoder.decodeStream(
            chunkSize: 777,
            read: { buffer in
                let n = min(buffer.count, bytes.count - offset)
                bytes.withUnsafeBytes { buffer.baseAddress?.copyMemory(from: $0.baseAddress! + offset, byteCount: n) }
                offset += n
                return n
            }, emit: { events.append($0) })
        #expect(events == whole)
        #expect(decoder.statistics == expected.statistics)
    }

    struct ReadFailure: Error {}

    @Test("a read error ends the stream, is rethrown, and the events before it are kept")
    func streamError() throws {
        var decoder = NMEADecoder()
        var events: [GNSSEvent] = []
        var calls = 0
        let first = Array(
            (sentence("GPZDA,120000.00,19,11,2024,,") + sentence("GPGGA,120000.00,4807.038,N,01131.324,E,1,08,0.9,,,,,,")
                + sentence("GPGGA,120001.00,4807.038,N,01131.324,E,1,08,0.9,,,,,,")).utf8)
        #expect(throws: ReadFailure.self) {
            try decoder.decodeStream(
                read: { buffer in
                    calls += 1
                    if calls > 1 { throw ReadFailure() }
                    first.withUnsafeBytes { buffer.copyMemory(from: $0) }
                    return first.count
                }, emit: { events.append($0) })
        }
        // The second cycle completes on its GGA (the learned cycle ender), before the error.
        #expect(events.compactMap(\.fix).map(\.time.iso8601) == ["2024-11-19T12:00:00.000Z", "2024-11-19T12:00:01.000Z"])
        #expect(decoder.statistics.sentences == 3)
    }
}
