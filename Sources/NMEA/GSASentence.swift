/// GSA, DOP and active satellites: fix dimension, PRNs used, PDOP/HDOP/VDOP.
public struct GSASentence: Sendable, Equatable {
    /// The talker's second letter (`P` for GP, `N` for GN, `L` for GL…).
    public var talker: UInt8
    /// Fix dimension 1 (none), 2 or 3; `nil` when blank or other (Antaris `E`).
    public var mode: Int?
    /// Satellites used, as a set keyed by constellation and number.
    public var used: SatelliteSet
    /// Dilutions of precision (each kept only within 0.01...89.99, as gpsd).
    public var pdop: Double?, hdop: Double?, vdop: Double?

    init(_ f: NMEAFields, talker: UInt8) {
        self.talker = talker
        if let m = f.int(2), (1...3).contains(m) { mode = m } else { mode = nil }
        func dop(_ i: Int) -> Double? {
            guard let d = f.double(i), d >= 0.01, d <= 89.99 else { return nil }
            return d
        }
        // PRNs run from field 3 up to the first decimal number (PDOP); usually 12 fields,
        // up to 24 on some receivers. The three DOPs follow, then maybe a system id.
        var last = 3
        while last < f.count, !f[last].contains(UInt8(ascii: ".")) { last += 1 }
        let dopStart = min(last, max(3, f.count - 3))
        pdop = dop(dopStart)
        hdop = dop(dopStart + 1)
        vdop = dop(dopStart + 2)
        var system = 0
        switch talker {
        case UInt8(ascii: "L"): system = 2
        case UInt8(ascii: "A"): system = 3
        case UInt8(ascii: "B"), UInt8(ascii: "D"): system = 4
        case UInt8(ascii: "Q"), UInt8(ascii: "Z"): system = 5
        case UInt8(ascii: "I"): system = 6
        default:
            if let s = f.int(dopStart + 3), (1...6).contains(s) { system = s }
        }
        used = SatelliteSet()
        var i = 3
        while i < dopStart {
            if let prn = f.int(i), (1...600).contains(prn) { used.insert(system: system, number: prn) }
            i += 1
        }
    }
}
