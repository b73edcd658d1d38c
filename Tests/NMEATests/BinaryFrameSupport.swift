/// A UBX frame: `B5 62`, class, id, length, payload, 8-bit Fletcher checksum.
func ubxFrame(_ cls: UInt8, _ id: UInt8, _ payload: [UInt8]) -> [UInt8] {
    let body = [cls, id, UInt8(payload.count & 0xFF), UInt8(payload.count >> 8)] + payload
    var a: UInt8 = 0, b: UInt8 = 0
    for x in body {
        a &+= x
        b &+= a
    }
    return [0xB5, 0x62] + body + [a, b]
}

/// A CASIC frame: `BA CE`, length, class, id, payload, 32-bit sum of little-endian words.
func casicFrame(_ cls: UInt8, _ id: UInt8, _ payload: [UInt8]) -> [UInt8] {
    let body = [UInt8(payload.count & 0xFF), UInt8(payload.count >> 8), cls, id] + payload
    var sum: UInt32 = 0
    var k = 0
    while k < body.count {
        sum &+= UInt32(body[k]) | UInt32(body[k + 1]) << 8 | UInt32(body[k + 2]) << 16 | UInt32(body[k + 3]) << 24
        k += 4
    }
    return [0xBA, 0xCE] + body + le(sum)
}

func le<T: FixedWidthInteger>(_ v: T) -> [UInt8] { withUnsafeBytes(of: v.littleEndian) { Array($0) } }

/// A payload of `count` zero bytes with values written at offsets.
struct Payload {
    var bytes: [UInt8]
    init(_ count: Int) { bytes = Array(repeating: 0, count: count) }
    mutating func put(_ offset: Int, _ value: [UInt8]) { bytes.replaceSubrange(offset..<(offset + value.count), with: value) }
}

/// A sentence's bytes as the framer delivers them (no line end).
func line(_ body: String) -> [UInt8] { Array(sentence(body, lineEnd: "").utf8) }

/// UBX NAV-TIMEGPS (16 bytes): only its iTOW matters here.
func navTimeGPS(iTOW: UInt32) -> [UInt8] {
    var p = Payload(16)
    p.put(0, le(iTOW))
    return ubxFrame(0x01, 0x20, p.bytes)
}

/// CASIC NAV-GPSINFO with no satellites: the last message of a cycle.
func casicGPSInfo(runTime: UInt32) -> [UInt8] {
    var p = Payload(8)
    p.put(0, le(runTime))
    return casicFrame(0x01, 0x20, p.bytes)
}
