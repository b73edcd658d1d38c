// Shared by every harness: compiled into each harness module (see deploy/fuzz.sh).
import FleetProtocol
import GNSS

/// Fails the run (a libFuzzer finding) with `message` when `condition` is false.
///
/// `precondition` is kept in optimised builds; the message names the broken invariant.
@inline(__always)
func check(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) {
    precondition(condition(), message(), file: file, line: line)
}

/// `b` is `a` written with `decimals` decimal places and read back.
func roundedEqual(_ a: Double?, _ b: Double?, decimals: Int) -> Bool {
    switch (a, b) {
    case (nil, nil): return true
    case (let a?, let b?):
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        return abs(a - b) <= 0.5 / scale * (1 + 1e-9) + abs(a) * 1e-15
    default: return false
    }
}

/// `value` when it lies in the contract's documented range (README), otherwise `nil`: the
/// encoders leave such a value out.
func documented<T: Comparable>(_ value: T?, _ range: ClosedRange<T>) -> T? {
    value.flatMap { range.contains($0) ? $0 : nil }
}

/// `decode(payload)` for a payload the encoder wrote: it must decode (a failure stops the run).
func decodedOwn<Decoded>(_ kind: String, _ payload: [UInt8], _ decode: ([UInt8]) throws -> Decoded) -> Decoded {
    do {
        return try decode(payload)
    } catch {
        check(false, "an encoded \(kind) does not decode: \(error) in \(String(decoding: payload, as: UTF8.self))")
        fatalError()
    }
}

/// A fix written as a contract payload and read back (`FleetPayload.encode` then `decodeFix`)
/// is the same fix, to the payload's precision, and writing the read-back fix again gives
/// the same bytes. Every fix a decoder hands on must pass: the agent publishes it this way.
@discardableResult
func checkFixRoundTrip(_ fix: Fix, vehicle: VehicleID, seq: UInt64?) -> DecodedFix {
    let first = FleetPayload.encode(fix, vehicle: vehicle.rawValue, seq: seq)
    let back = decodedOwn("fix", first) { try FleetPayload.decodeFix($0, vehicle: vehicle) }
    let f = back.fix
    check(back.vehicle == vehicle && back.seq == seq, "vehicle or seq changed in a round trip")
    check(f.time == fix.time && f.mode == fix.mode && f.quality == fix.quality
          && f.satellitesUsed == documented(fix.satellitesUsed, 0...1024),
          "time, mode, quality or sats changed in a round trip: \(fix) → \(f)")
    check(roundedEqual(fix.latitude, f.latitude, decimals: 9) && roundedEqual(fix.longitude, f.longitude, decimals: 9)
          && roundedEqual(fix.altitudeHAE, f.altitudeHAE, decimals: 4) && roundedEqual(fix.altitudeMSL, f.altitudeMSL, decimals: 4)
          && roundedEqual(documented(fix.geoidSeparation, -1000...1000), f.geoidSeparation, decimals: 3)
          && roundedEqual(documented(fix.speed, 0...100_000), f.speed, decimals: 3)
          && roundedEqual(documented(fix.track, 0...360), f.track, decimals: 4)
          && roundedEqual(documented(fix.magneticVariation, -180...180), f.magneticVariation, decimals: 1)
          && roundedEqual(fix.climb, f.climb, decimals: 3)
          && roundedEqual(documented(fix.hdop, 0...100_000), f.hdop, decimals: 2)
          && roundedEqual(documented(fix.vdop, 0...100_000), f.vdop, decimals: 2)
          && roundedEqual(documented(fix.pdop, 0...100_000), f.pdop, decimals: 2)
          && roundedEqual(documented(fix.eph, 0...100_000_000), f.eph, decimals: 3)
          && roundedEqual(documented(fix.epv, 0...100_000_000), f.epv, decimals: 3),
          "a number changed beyond its decimals in a round trip: \(fix) → \(f)")
    let second = FleetPayload.encode(f, vehicle: vehicle.rawValue, seq: seq)
    check(second == first, "re-encoding a decoded fix changed its bytes: \(String(decoding: first, as: UTF8.self)) → \(String(decoding: second, as: UTF8.self))")
    return back
}

/// The same for a heading.
@discardableResult
func checkHeadingRoundTrip(_ heading: Heading, vehicle: VehicleID, seq: UInt64?) -> DecodedHeading {
    let first = FleetPayload.encode(heading, vehicle: vehicle.rawValue, seq: seq)
    let back = decodedOwn("heading", first) { try FleetPayload.decodeHeading($0, vehicle: vehicle) }
    let h = back.heading
    check(back.vehicle == vehicle && back.seq == seq && h.time == heading.time && h.source == heading.source,
          "vehicle, seq, time or source changed in a round trip: \(heading) → \(h)")
    check(roundedEqual(documented(heading.trueHeading, 0...360), h.trueHeading, decimals: 4)
          && roundedEqual(documented(heading.magneticHeading, 0...360), h.magneticHeading, decimals: 4)
          && roundedEqual(documented(heading.magneticDeviation, -180...180), h.magneticDeviation, decimals: 4)
          && roundedEqual(documented(heading.magneticVariation, -180...180), h.magneticVariation, decimals: 4),
          "a number changed beyond its decimals in a round trip: \(heading) → \(h)")
    let second = FleetPayload.encode(h, vehicle: vehicle.rawValue, seq: seq)
    check(second == first, "re-encoding a decoded heading changed its bytes: \(String(decoding: first, as: UTF8.self)) → \(String(decoding: second, as: UTF8.self))")
    return back
}

/// A fix any source emits: a position on the globe, mode 2D or 3D, finite numbers.
func checkSaneFix(_ f: Fix) {
    check(f.latitude.isFinite && f.longitude.isFinite && abs(f.latitude) <= 90 && abs(f.longitude) <= 180,
          "fix outside the globe: \(f)")
    check(f.mode != .noFix, "a fix with mode noFix: \(f)")
    for (name, value) in [("altHAE", f.altitudeHAE), ("altMSL", f.altitudeMSL), ("geoidSep", f.geoidSeparation),
                          ("speed", f.speed), ("track", f.track), ("magvar", f.magneticVariation), ("climb", f.climb),
                          ("hdop", f.hdop), ("vdop", f.vdop), ("pdop", f.pdop), ("eph", f.eph), ("epv", f.epv)] {
        if let value { check(value.isFinite, "\(name) is not finite: \(f)") }
    }
}

/// A heading any source emits: degrees in 0...360 where known, at least one of true and magnetic.
func checkSaneHeading(_ h: Heading) {
    check(h.trueHeading != nil || h.magneticHeading != nil, "a heading with neither true nor magnetic: \(h)")
    for value in [h.trueHeading, h.magneticHeading].compactMap({ $0 }) {
        check(value.isFinite && (0...360).contains(value), "heading outside 0...360: \(h)")
    }
    for value in [h.magneticDeviation, h.magneticVariation].compactMap({ $0 }) {
        check(value.isFinite, "deviation/variation not finite: \(h)")
    }
}

/// The vehicle the harnesses publish as.
let fuzzVehicle = VehicleID("van-7")!

/// Every event a decoder hands on is sane and survives the contract's payload round trip, as
/// the agent publishes it (fixes numbered `fixSeq`, headings `headingSeq`).
func checkEvents(_ events: [GNSSEvent], fixSeq: UInt64, headingSeq: UInt64) {
    for event in events {
        switch event {
        case .fix(let fix):
            checkSaneFix(fix)
            checkFixRoundTrip(fix, vehicle: fuzzVehicle, seq: fixSeq)
        case .heading(let heading):
            checkSaneHeading(heading)
            checkHeadingRoundTrip(heading, vehicle: fuzzVehicle, seq: headingSeq)
        case .state:
            break
        }
    }
}
