/// HDT, THS, HDG or HDM: which way the vessel or vehicle points.
public struct HeadingSentence: Sendable, Equatable {
    /// Heading from true north, degrees (HDT, THS; HDG when variation is known).
    public var trueHeading: Double?
    /// Heading from magnetic north, degrees (HDG with deviation applied, HDM).
    public var magneticHeading: Double?
    /// Magnetic deviation, degrees, positive east (HDG).
    public var deviation: Double?
    /// Magnetic variation, degrees, positive east (HDG).
    public var variation: Double?

    init?(_ f: NMEAFields, kind: NMEASentenceKind) {
        guard let h = f.double(1), h >= 0, h <= 360 else { return nil }
        switch kind {
        case .hdt:
            trueHeading = h
        case .ths:
            // Mode A autonomous, E estimated, M manual, S simulator; V is invalid.
            guard let mode = f.character(2), mode != UInt8(ascii: "V") else { return nil }
            trueHeading = h
        case .hdm:
            magneticHeading = h
        case .hdg:
            // Sensor heading + deviation = magnetic; magnetic + variation = true.
            func signed(_ i: Int) -> Double? {
                guard let v = f.double(i) else { return nil }
                switch f.character(i + 1) {
                case UInt8(ascii: "E"): return v
                case UInt8(ascii: "W"): return -v
                default: return nil
                }
            }
            deviation = signed(2)
            variation = signed(4)
            let magnetic = Self.normalised(h + (deviation ?? 0))
            magneticHeading = magnetic
            if let variation { trueHeading = Self.normalised(magnetic + variation) }
        default:
            return nil
        }
    }

    static func normalised(_ degrees: Double) -> Double {
        var d = degrees.truncatingRemainder(dividingBy: 360)
        if d < 0 { d += 360 }
        return d
    }
}
