import GNSS
import GNSSSources
import NMEA
import Testing

@Suite struct NMEASentenceGeneratorTests {
    @Test func sentencesCarryCorrectChecksums() {
        let epoch = NMEASentenceGenerator.Epoch(
            time: UTCTimestamp(millisecondsSince1970: 1_700_000_000_250), latitude: 52.37, longitude: 4.89,
            speed: 10, track: 90, heading: 91)
        let sentences = NMEASentenceGenerator.sentences(for: epoch)
        #expect(sentences.map { String($0.dropFirst(3).prefix(3)) } == ["RMC", "GGA", "GSA", "VTG", "HDT", "GST"])
        for s in sentences {
            #expect(s.hasPrefix("$") && s.hasSuffix("\r\n"))
            let body = s.dropFirst().prefix { $0 != "*" }
            var sum: UInt8 = 0
            for b in body.utf8 { sum ^= b }
            let given = s.split(separator: "*").last.map { String($0.prefix(2)) }
            #expect(given.flatMap { UInt8($0, radix: 16) } == sum, "\(s)")
        }
        // The known-good checksum of a classic example sentence.
        #expect(NMEASentenceGenerator.sentence("GPGLL,4916.45,N,12311.12,W,225444,A") == "$GPGLL,4916.45,N,12311.12,W,225444,A*31\r\n")
    }

    @Test func outputDecodesBackToTheSamePositions() throws {
        var vehicle = SimulatedVehicle(cruiseSpeed: 20, originLatitude: -33.8688, originLongitude: 151.2093)
        var epochs: [NMEASentenceGenerator.Epoch] = []
        var bytes: [UInt8] = []
        for i in 0..<50 {
            let p = vehicle.position
            let e = NMEASentenceGenerator.Epoch(
                time: UTCTimestamp(millisecondsSince1970: 1_700_000_000_000 + Int64(i) * 200),
                latitude: p.latitude, longitude: p.longitude, speed: vehicle.speed, track: vehicle.heading,
                heading: vehicle.heading)
            epochs.append(e)
            bytes += NMEASentenceGenerator.bytes(for: e)
            vehicle.step(seconds: 0.2)
        }
        var decoder = NMEADecoder()
        let events = decoder.decode(bytes)
        #expect(decoder.statistics.badChecksums == 0)
        // One fix per epoch (the last fix of each time stamp is the cycle's).
        var byTime: [UTCTimestamp: Fix] = [:]
        for f in events.fixes { byTime[f.time] = f }
        #expect(byTime.count == epochs.count)
        for e in epochs {
            let f = try #require(byTime[e.time])
            #expect(abs(f.latitude - e.latitude) < 1e-6)
            #expect(abs(f.longitude - e.longitude) < 1e-6)
            #expect(abs((f.speed ?? -1) - e.speed) < 0.01)
            #expect(f.mode == .threeD)
            #expect(f.satellitesUsed == e.satellitesUsed)
            #expect(f.hdop == e.hdop)
        }
        let headings = events.compactMap(\.heading)
        #expect(headings.count == epochs.count)
        #expect(zip(headings, epochs).allSatisfy { abs(($0.trueHeading ?? -1) - e2h($1)) < 0.01 })
    }

    private func e2h(_ e: NMEASentenceGenerator.Epoch) -> Double { e.heading.truncatingRemainder(dividingBy: 360) }

    @Test func southernAndWesternHemispheresAndRounding() {
        #expect(NMEASentenceGenerator.angle(-12.5, degreeDigits: 2) == "1230.00000")
        #expect(NMEASentenceGenerator.angle(0.999999999, degreeDigits: 3) == "00100.00000")
        #expect(NMEASentenceGenerator.fixed(-0.0001, 2) == "0.00")
        #expect(NMEASentenceGenerator.fixed(3.14159, 3) == "3.142")
    }
}

@Suite struct SimulatedVehicleTests {
    @Test func drivesTheLoopAcceleratingAndBrakingForCorners() {
        var v = SimulatedVehicle(cruiseSpeed: 15, originLatitude: 52, originLongitude: 5)
        var maxSpeed = 0.0
        var legsSeen = Set<Int>()
        var slowedBeforeCorner = false
        var previousLeg = 0, previousSpeed = 0.0
        var positions: [(Double, Double)] = []
        for _ in 0..<4000 {  // 400 s at 10 Hz
            v.step(seconds: 0.1)
            maxSpeed = max(maxSpeed, v.speed)
            legsSeen.insert(v.leg)
            if v.leg != previousLeg, previousSpeed <= SimulatedVehicle.cornerSpeed + 0.5 { slowedBeforeCorner = true }
            previousLeg = v.leg
            previousSpeed = v.speed
            positions.append(v.position)
        }
        #expect(abs(maxSpeed - 15) < 1e-9)
        #expect(legsSeen.count == SimulatedVehicle.route.count, "went all the way round")
        #expect(slowedBeforeCorner)
        // Each 0.1 s step moves about speed × 0.1 s.
        var v2 = SimulatedVehicle(cruiseSpeed: 15, originLatitude: 52, originLongitude: 5)
        for _ in 0..<100 { v2.step(seconds: 0.1) }
        let a = v2.position
        let speed = v2.speed
        v2.step(seconds: 0.1)
        let b = v2.position
        let fa = Fix(time: UTCTimestamp(millisecondsSince1970: 0), latitude: a.latitude, longitude: a.longitude, mode: .twoD)
        let fb = Fix(time: UTCTimestamp(millisecondsSince1970: 100), latitude: b.latitude, longitude: b.longitude, mode: .twoD)
        #expect(abs(fa.distance(to: fb) - speed * 0.1) < 0.3)
    }
}
