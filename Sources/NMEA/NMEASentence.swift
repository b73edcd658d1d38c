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
    indirect case gsa(GSASentence)
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
        var packet = GPSDPacket()
        return parse(fields: f, packet: &packet)
    }

    /// Parses fields and says what gpsd's dispatcher learns from the sentence (see
    /// `GPSDPacket`), taken from each sentence's values before they go into the enum.
    static func parse(fields f: NMEAFields, packet: inout GPSDPacket) -> NMEASentence? {
        let address = f[0]
        if f.field(0, equals: "PGRMZ") {
            // gpsd's table: at least 4 fields.
            guard f.count >= 4 else {
                packet = GPSDPacket(unparsed: f)
                return nil
            }
            let s = PGRMZSentence(f)
            packet = GPSDPacket(s, f)
            return .pgrmz(s)
        }
        guard address.count == 5 else {
            packet = GPSDPacket(unparsed: f)
            return nil
        }
        let t0 = address[0], t1 = address[1]
        guard t0 != UInt8(ascii: "P"),
            (0x41...0x5A).contains(t0), (0x41...0x5A).contains(t1),
            let kind = NMEASentenceKind(type: UnsafeRawBufferPointer(rebasing: address[2...]))
        else {
            packet = GPSDPacket(unparsed: f)
            return nil
        }
        switch kind {
        case .rmc:
            let s = RMCSentence(f)
            packet = GPSDPacket(s, f)
            return .rmc(s)
        case .gga:
            let s = GGASentence(f)
            packet = GPSDPacket(s, f)
            return .gga(s)
        case .gns:
            let s = GNSSentence(f)
            packet = GPSDPacket(positionTag: GPSDPacket.gns, timeOfDay: s.timeOfDay, f)
            return .gns(s)
        case .gll:
            let s = GLLSentence(f)
            packet = GPSDPacket(positionTag: GPSDPacket.gll, timeOfDay: s.timeOfDay, f)
            return .gll(s)
        case .gsa:
            packet = GPSDPacket(tag: GPSDPacket.gsa, f)
            return .gsa(GSASentence(f, talker: t1))
        case .gsv:
            packet = GPSDPacket(tag: GPSDPacket.gsv, f)
            return .gsv
        case .vtg:
            let s = VTGSentence(f)
            packet = GPSDPacket(s, f)
            return .vtg(s)
        case .zda:
            let s = ZDASentence(f)
            packet = GPSDPacket(s, f)
            return .zda(s)
        case .gst:
            packet = GPSDPacket(tag: GPSDPacket.gst, f)
            return .gst(GSTSentence(f))
        case .hdt, .hdg, .hdm, .ths:
            guard let h = HeadingSentence(f, kind: kind) else {
                packet = GPSDPacket(unparsed: f)
                return nil
            }
            let tag: UInt8 =
                switch kind {
                case .hdt: GPSDPacket.hdt
                case .hdg: GPSDPacket.hdg
                case .hdm: GPSDPacket.hdm
                default: GPSDPacket.ths
                }
            packet = GPSDPacket(tag: tag, f)
            return .heading(kind, h)
        case .pgrmz:
            packet = GPSDPacket(unparsed: f)
            return nil
        }
    }
}
