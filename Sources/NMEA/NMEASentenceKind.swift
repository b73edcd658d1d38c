/// The sentence types the decoder understands (the three letters after the talker).
public enum NMEASentenceKind: UInt8, Sendable, CaseIterable {
    /// RMC, GGA, GNS, GLL: position sentences.
    case rmc, gga, gns, gll
    /// GSA, GSV: satellites used and in view.
    case gsa, gsv
    /// VTG, ZDA, GST: speed and track, date, error statistics.
    case vtg, zda, gst
    /// HDT, HDG, HDM, THS: headings.
    case hdt, hdg, hdm, ths
    /// Garmin's proprietary PGRMZ: altitude and fix dimension (gpsd reads it).
    case pgrmz

    /// Recognises the three-letter type at the start of `bytes`.
    init?(type bytes: UnsafeRawBufferPointer) {
        guard bytes.count == 3 else { return nil }
        let code = UInt32(bytes[0]) << 16 | UInt32(bytes[1]) << 8 | UInt32(bytes[2])
        switch code {
        case 0x524D43: self = .rmc  // RMC
        case 0x474741: self = .gga  // GGA
        case 0x474E53: self = .gns  // GNS
        case 0x474C4C: self = .gll  // GLL
        case 0x475341: self = .gsa  // GSA
        case 0x475356: self = .gsv  // GSV
        case 0x565447: self = .vtg  // VTG
        case 0x5A4441: self = .zda  // ZDA
        case 0x475354: self = .gst  // GST
        case 0x484454: self = .hdt  // HDT
        case 0x484447: self = .hdg  // HDG
        case 0x48444D: self = .hdm  // HDM
        case 0x544853: self = .ths  // THS
        default: return nil
        }
    }

    /// A one-bit mask for sets of kinds.
    var bit: UInt32 { 1 << UInt32(rawValue) }
}
