/// One decoded NMEA 0183 sentence of a kind the decoder understands.
public enum NMEASentence: Sendable, Equatable {
    /// Recommended minimum data.
    case rmc(RMCSentence)
    /// Fix data.
    case gga(GGASentence)
    /// Multi-constellation fix data.
    case gns(GNSSentence)
    /// Geographic position.
    case gll(GLLSentence)
    /// DOP and active satellites.
    case gsa(GSASentence)
    /// Satellites in view (recognised; it carries nothing a `Fix` uses).
    case gsv
    /// Track and ground speed.
    case vtg(VTGSentence)
    /// Time and date.
    case zda(ZDASentence)
    /// Pseudorange noise statistics.
    case gst(GSTSentence)
    /// HDT, THS, HDG or HDM.
    case heading(NMEASentenceKind, HeadingSentence)
    /// Garmin altitude and fix dimension.
    case pgrmz(PGRMZSentence)

    /// Which kind of sentence this is.
    public var kind: NMEASentenceKind {
        switch self {
        case .rmc: .rmc
        case .gga: .gga
        case .gns: .gns
        case .gll: .gll
        case .gsa: .gsa
        case .gsv: .gsv
        case .vtg: .vtg
        case .zda: .zda
        case .gst: .gst
        case .heading(let k, _): k
        case .pgrmz: .pgrmz
        }
    }

    /// Parses a checksum-verified payload (the bytes between `$` and `*`).
    ///
    /// Any two-letter talker is accepted (GP, GN, GL, GA, GB, BD, GQ, QZ, GI, IN, HE, HC,
    /// SD, AP…). Returns `nil` for proprietary (`P…`) sentences other than Garmin's `PGRMZ`
    /// (which gpsd's NMEA driver reads for altitude and mode), unknown sentence types and a
    /// heading sentence without a usable value: the caller counts those as ignored.
    public static func parse(payload: UnsafeRawBufferPointer) -> NMEASentence? {
        NMEAFields.withFields(of: payload) { f in parse(fields: f) }
    }

    /// Parses already tokenized fields; see ``parse(payload:)``.
    public static func parse(fields f: NMEAFields) -> NMEASentence? {
        let address = f[0]
        if f.field(0, equals: "PGRMZ") {
            // gpsd's table: at least 4 fields.
            return f.count >= 4 ? .pgrmz(PGRMZSentence(f)) : nil
        }
        guard address.count == 5 else { return nil }
        let t0 = address[0], t1 = address[1]
        guard t0 != UInt8(ascii: "P"),
            (0x41...0x5A).contains(t0), (0x41...0x5A).contains(t1),
            let kind = NMEASentenceKind(type: UnsafeRawBufferPointer(rebasing: address[2...]))
        else { return nil }
        switch kind {
        case .rmc: return .rmc(RMCSentence(f))
        case .gga: return .gga(GGASentence(f))
        case .gns: return .gns(GNSSentence(f))
        case .gll: return .gll(GLLSentence(f))
        case .gsa: return .gsa(GSASentence(f, talker: t1))
        case .gsv: return .gsv
        case .vtg: return .vtg(VTGSentence(f))
        case .zda: return .zda(ZDASentence(f))
        case .gst: return .gst(GSTSentence(f))
        case .hdt, .hdg, .hdm, .ths:
            guard let h = HeadingSentence(f, kind: kind) else { return nil }
            return .heading(kind, h)
        case .pgrmz:
            return nil
        }
    }
}
