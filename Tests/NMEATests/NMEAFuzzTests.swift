import FleetProtocol
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

    /// Found by `deploy/fuzz.sh` (target nmea, crashing input inlined): a VTG track of 3239°
    /// went into the fix, and the agent's payload for it was refused whole by every subscriber
    /// (`track` outside 0...360). The encoder now leaves the out-of-range track out.
    @Test("fuzz finding: a fix with an out-of-range VTG track still publishes a decodable payload")
    func fuzzFindingOutOfRangeTrack() throws {
        let input = """
            $GPRMC,112300.00,A,3844.23935,N,00908.43815,W,0.1,339.2,220312,5.6,E,A*20
            $GPVTG,3239,T.,333.6,M,0.1,N,0.2,K,A*2E
            $GPZDA,112300.00,22,03,2012,,*65
            $GPGRS,112300.00,1,0.0,-0.5,0.0,,,,,,,,,*49
            $G@GSA,A,2,10,13,23,,,,,,,,,,10.5,10.5,*1F
            $GPGSA,A,2,10,13,23,,,,,,,,,,10.5,10.5,*1F
            $GPGSV,5,1,17,02,46,305,,04,74,2]40,,05,14,290,,07,46,134,*74
            $GPGSV,5,2,17,08,22,167,,10,65,329,44,13,62,040,43,17,06,199,*7E
            $GPGSV,5,3,17,20,11,098,,23,31,049,44,33,45,190,,35,26,238,*76
            $GPGSV,5,4,17,37,16,112,,39,33,133,,44,04,102,,49,33,133,*7C
            $GPGSV,5,5,17,50,45,190,*43
            """
        // The GSA (uncorrupted, after the fuzzed copy) is what makes gpsd report the cycle
        // after the VTG: it sets a mode while gpsd has not yet learned a cycle ender.
        var decoder = NMEADecoder()
        let fixes = decoder.decode(Array(input.utf8)).compactMap { event -> Fix? in
            if case .fix(let f) = event { return f } else { return nil }
        }
        #expect(fixes.contains { $0.track == 3239 })
        let van = VehicleID("van-7")!
        for fix in fixes {
            let back = try FleetPayload.decodeFix(FleetPayload.encode(fix, vehicle: van.rawValue, seq: 41), vehicle: van)
            #expect(abs(back.fix.latitude - fix.latitude) <= 5e-10 && abs(back.fix.longitude - fix.longitude) <= 5e-10)
            if let track = fix.track, !(0...360).contains(track) { #expect(back.fix.track == nil) }
        }
    }
}
