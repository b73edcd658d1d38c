import FleetcastTestSupport
import Foundation
import GNSS
import NMEA
import Testing

@Suite("Fuzz: corrupt input never crashes")
struct NMEAFuzzTests {
    /// Every fix the decoder emits must be a sane value, whatever the input.
    func checkSane(_ events: [GNSSEvent]) {
        for case .fix(let f) in events {
            #expect(abs(f.latitude) <= 90 && abs(f.longitude) <= 180 && f.mode != .noFix)
            #expect(f.latitude.isFinite && f.longitude.isFinite)
        }
    }

    @Test("random bytes, with and without sentence-like structure")
    func randomBytes() {
        var rng = SplitMix64(seed: 0xF1EE_7CA5)
        let alphabet = Array("$!*,.0123456789ABCDEFGNPRMCVWSTZ\r\n#-".utf8)
        for round in 0..<200 {
            let count = Int.random(in: 0...4096, using: &rng)
            let bytes: [UInt8] = (0..<count).map { _ in
                round % 2 == 0 ? UInt8.random(in: 0...255, using: &rng) : alphabet[Int.random(in: 0..<alphabet.count, using: &rng)]
            }
            var decoder = NMEADecoder(options: .init(acceptsMissingChecksum: round % 4 == 1))
            checkSane(decoder.decode(bytes))
        }
    }

    @Test("fixture lines with bytes flipped, dropped, duplicated and re-checksummed")
    func mutatedLines() throws {
        var rng = SplitMix64(seed: 42)
        for log in Fixtures.recordings {
            let lines = String(decoding: try Fixtures.bytes(log), as: UTF8.self)
                .split(separator: "\n").filter { $0.hasPrefix("$") }.map { Array($0.utf8) }
            var out: [UInt8] = []
            for var line in lines.prefix(400) {
                switch Int.random(in: 0..<5, using: &rng) {
                case 0 where line.count > 2:
                    line[Int.random(in: 1..<line.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                case 1 where line.count > 2:
                    line.remove(at: Int.random(in: 1..<line.count, using: &rng))
                case 2:
                    // Mutate a field but give it a valid checksum, so the parsers see it.
                    if let star = line.lastIndex(of: UInt8(ascii: "*")), star > 2 {
                        var body = Array(line[1..<star])
                        let i = Int.random(in: 0..<body.count, using: &rng)
                        body[i] = Array(",.-9AZ ".utf8)[Int.random(in: 0..<7, using: &rng)]
                        let sum = NMEAChecksum.compute(body)
                        let hex = Array("0123456789ABCDEF".utf8)
                        line = [UInt8(ascii: "$")] + body + [UInt8(ascii: "*"), hex[Int(sum >> 4)], hex[Int(sum & 15)]]
                    }
                case 3:
                    line += line
                default:
                    break
                }
                out += line + [0x0D, 0x0A]
            }
            var decoder = NMEADecoder()
            checkSane(decoder.decode(out))
        }
    }
}
