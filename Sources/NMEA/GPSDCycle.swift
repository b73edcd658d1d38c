/// What gpsd's NMEA dispatcher (`nmea_parse`, gpsd commit 46977faa8) learns from one
/// sentence for its end-of-cycle detector: which table entry it matched, whether that
/// entry's handler ran, the time of day the handler registered, and the kind of mask it
/// returned. gpsd prints a TPV only at the report points this detector finds, so the fix
/// gpsd last reported for a time is the state at the last such point, not at the end of
/// the second.
struct GPSDPacket {
    /// gpsd's `thistag`: 1 + the index of the matched table entry with a handler; 0 for an
    /// unknown sentence, one gpsd lists without a handler, or one with too few fields.
    var tag: UInt8 = 0
    /// The handler ran: `nmea.cycle_continue` takes the entry's flag (else it keeps the
    /// previous sentence's).
    var handled = false
    /// The entry's `cycle_continue` flag (GLL, ACCURACY).
    var continues = false
    /// The time of day registered (`register_fractional_time`), ms since midnight; -1: none.
    var fracTime = -1
    /// A GSV part with more parts to come (`nmea.gsx_more`).
    var gsxMore = false
    /// The returned mask has more than `ONLINE_SET`.
    var data = false
    /// The handler forced a report (GGA or RMC without time and fix: `REPORT_IS`, and
    /// `cycle_end_reliable` cleared).
    var forcesReport = false
    /// The mask has `LATLON_SET`, `MODE_SET` or `ATTITUDE_SET`: gpsd reports it while its
    /// cycle end is not reliable.
    var changesFix = false
    /// Ericsson's `$PERC,GPavp`: the averaged (position-hold) position, which gpsd puts in
    /// the fix as latitude, longitude and altHAE.
    var averagePosition: (latitude: Double, longitude: Double, altHAE: Double)?

    init() {}

    /// A GGA: registers its time of day; forces a report without time and fix.
    init(_ s: GGASentence, _ f: NMEAFields) {
        guard handle(Self.gga, f) else { return }
        fracTime = s.timeOfDay ?? -1
        data = true
        changesFix = true
        forcesReport = s.quality == 0 && f.isEmpty(1)
    }

    /// An RMC: registers its time when valid with a date; forces a report when invalid
    /// without time or date.
    init(_ s: RMCSentence, _ f: NMEAFields) {
        guard handle(Self.rmc, f) else { return }
        if s.isValid, s.timeOfDay != nil, s.date != nil { fracTime = s.timeOfDay ?? -1 }
        data = true
        changesFix = true
        forcesReport = !s.isValid && (f.isEmpty(1) || f.isEmpty(9))
    }

    /// A GLL or GNS (`tag`): registers its time of day.
    init(positionTag tag: UInt8, timeOfDay: Int?, _ f: NMEAFields) {
        guard handle(tag, f) else { return }
        fracTime = timeOfDay ?? -1
        data = true
        changesFix = true
    }

    /// A ZDA: registers its time with a full date.
    init(_ s: ZDASentence, _ f: NMEAFields) {
        guard handle(Self.zda, f) else { return }
        if s.date != nil, let t = s.timeOfDay { fracTime = t }
        data = fracTime >= 0
    }

    /// A VTG: data when usable.
    init(_ s: VTGSentence, _ f: NMEAFields) {
        guard handle(Self.vtg, f) else { return }
        data = s.isUsable
    }

    /// A PGRMZ: data with an altitude or a mode; a mode changes the fix.
    init(_ s: PGRMZSentence, _ f: NMEAFields) {
        guard handle(Self.pgrmz, f) else { return }
        data = s.altitudeMSL != nil || s.mode != nil
        changesFix = s.mode != nil
    }

    /// GSA, GSV, GST or a heading sentence (`tag`).
    init(tag: UInt8, _ f: NMEAFields) {
        guard handle(tag, f) else { return }
        data = true
        switch tag {
        case Self.gsv:
            gsxMore = (f.int(2) ?? 0) < (f.int(1) ?? 0)
            data = !gsxMore
        case Self.gst:
            break
        default:
            changesFix = true  // GSA's mode, a heading's attitude
        }
    }

    /// A sentence the decoder does not parse.
    init(unparsed f: NMEAFields) {
        unparsed(f)
    }

    /// Sets the tag when the sentence has the fields gpsd's entry requires.
    private mutating func handle(_ entry: UInt8, _ f: NMEAFields) -> Bool {
        guard f.count >= Self.table[Int(entry) - 1].minimumFields else { return false }
        tag = entry
        handled = true
        continues = Self.table[Int(entry) - 1].continues
        return true
    }

    /// A sentence the decoder does not parse: gpsd's table entry, if it has a handler, and
    /// the time of day it registers for the few timed ones (GBS, PASHR, PSRFEPE, PSTI).
    private mutating func unparsed(_ f: NMEAFields) {
        let found = Self.lookup(f)
        guard found != 0, handle(found, f) else { return }
        data = true
        switch found {
        case Self.gga, Self.gll, Self.gns, Self.rmc, Self.gsa, Self.hdt, Self.hdg, Self.hdm, Self.ths, Self.pashr:
            // One the decoder does not parse (odd talker, no usable value): gpsd's handler
            // still sets a mode, position or attitude.
            changesFix = true
        case Self.gsv:
            gsxMore = (f.int(2) ?? 0) < (f.int(1) ?? 0)
            data = !gsxMore
        case Self.gbs, Self.psrfepe:
            fracTime = f.timeOfDay(1) ?? -1
        case Self.pashr:
            fracTime = f.timeOfDay(4) ?? -1
        case Self.psti030:
            if f.character(3) == UInt8(ascii: "A"), !f.isEmpty(12) { fracTime = f.timeOfDay(2) ?? -1 }
        case Self.percAveragePosition:
            if let lat = f.angle(2, hemisphere: 3, isLatitude: true),
                let lon = f.angle(4, hemisphere: 5, isLatitude: false)
            {
                averagePosition = (lat, lon, f.double(6) ?? 0)
                changesFix = true
            }
        case Self.psti032, Self.psti033, Self.psti035, Self.psti036:
            if !f.isEmpty(3) { fracTime = f.timeOfDay(2) ?? -1 }
        default:
            break
        }
    }

    /// The tag of the table entry a sentence's address (and subtype) matches, or 0. No two
    /// entries can match one address, so the order of the search does not matter.
    private static func lookup(_ f: NMEAFields) -> UInt8 {
        let address = f[0]
        let n = address.count
        if n == 5 {
            // Three-letter types follow any two-character talker (PQGSV is a GSV).
            let tag = lookup(name: UnsafeRawBufferPointer(rebasing: address[2...]), f)
            if tag != 0 { return tag }
        }
        guard n > 3 else { return 0 }
        return lookup(name: address, f)
    }

    /// The tag of the entry named exactly `name` whose subtype, if it has one, is field 1;
    /// or 0. A binary search of ``byPrefix`` for the name's first eight bytes, then a check
    /// of each entry that shares them (PERC and PSTI by subtype, PQTMCFG… by length).
    private static func lookup(name: UnsafeRawBufferPointer, _ f: NMEAFields) -> UInt8 {
        let key = packed(name)
        var low = 0
        var high = byPrefix.count
        while low < high {
            let mid = (low + high) / 2
            if byPrefix[mid].prefix < key { low = mid + 1 } else { high = mid }
        }
        while low < byPrefix.count, byPrefix[low].prefix == key {
            let tag = byPrefix[low].tag
            low += 1
            if table[Int(tag) - 1].matches(name, f) { return tag }
        }
        return 0
    }

    /// The first eight bytes of a name, zero-padded, as one integer.
    private static func packed(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var v: UInt64 = 0
        for k in 0..<min(8, bytes.count) { v |= UInt64(bytes[k]) << UInt64(8 * k) }
        return v
    }

    /// The tags of ``table``, sorted by the first eight bytes of their names (``packed(_:)``),
    /// entries sharing a prefix in table order.
    private static let byPrefix: [(prefix: UInt64, tag: UInt8)] = table.indices
        .map { i in (prefix: table[i].name.withUTF8Buffer { packed(UnsafeRawBufferPointer($0)) }, tag: UInt8(i + 1)) }
        .sorted { ($0.prefix, $0.tag) < ($1.prefix, $1.tag) }

    /// One entry of gpsd's `nmea_phrase[]` that has a handler, in gpsd's order.
    struct Entry {
        var name: StaticString
        var subtype: StaticString?
        var minimumFields: Int
        var continues: Bool
        init(_ name: StaticString, _ minimumFields: Int, _ continues: Bool = false) {
            self.name = name
            self.subtype = nil
            self.minimumFields = minimumFields
            self.continues = continues
        }
        init(_ name: StaticString, _ subtype: StaticString, _ minimumFields: Int) {
            self.name = name
            self.subtype = subtype
            self.minimumFields = minimumFields
            self.continues = false
        }

        /// Whether a sentence is this entry: its address (or type) `name` is the entry's
        /// name and field 1 the entry's subtype, if it has one.
        func matches(_ name: UnsafeRawBufferPointer, _ f: NMEAFields) -> Bool {
            guard name.count == self.name.utf8CodeUnitCount else { return false }
            let own = self.name.utf8Start
            for k in 0..<name.count where name[k] != own[k] { return false }
            if let subtype, !f.field(1, equals: subtype) { return false }
            return true
        }
    }

    /// gpsd's table entries with a handler (names, `name1`, `nf`, `cycle_continue`), in its
    /// order: the first that matches wins. Entries without a handler act as unknown ones.
    static let table: [Entry] = [
        Entry("PGLOR", 2), Entry("PERC", "FWsts", 6), Entry("PERC", "GPavp", 6), Entry("PERC", "GPctr", 6),
        Entry("PERC", "GPdbg", 19), Entry("PERC", "GPppf", 5), Entry("PERC", "GPppr", 6),
        Entry("PERC", "GPreh", 2), Entry("PERC", "GPsts", 4), Entry("PERC", "GPver", 4),
        Entry("PGRME", 7), Entry("PGRMF", 15), Entry("PGRMM", 2), Entry("PGRMT", 10), Entry("PGRMV", 4),
        Entry("PGRMZ", 4), Entry("ACCURACY", 1, true), Entry("BWC", 12), Entry("DBT", 7), Entry("DPT", 4),
        Entry("DTM", 2), Entry("GBS", 7), Entry("GGA", 13), Entry("GLL", 7, true), Entry("GNS", 13),
        Entry("GRS", 4), Entry("GSA", 18), Entry("GST", 8), Entry("GSV", 4), Entry("GYOACC", 14),
        Entry("INFO", 14), Entry("HDG", 0), Entry("HDM", 3), Entry("HDT", 1), Entry("MTW", 3), Entry("MWD", 0),
        Entry("MWV", 0), Entry("PASHR", 3), Entry("PAIR001", 3), Entry("PAIR010", 5), Entry("PDTINFO", 6),
        Entry("PGPSP", 18), Entry("PMGNST", 8), Entry("PMTK001", 3), Entry("PMTK424", 3), Entry("PMTK705", 4),
        Entry("PQTMCFGEINSMSGERROR", 1), Entry("PQTMCFGEINSMSGOK", 1), Entry("PQTMCFGORIENTATIONERROR", 1),
        Entry("PQTMCFGORIENTATIONOK", 1), Entry("PQTMCFGWHEELTICKERROR", 1), Entry("PQTMCFGWHEELTICKOK", 1),
        Entry("PQTMGPS", 14), Entry("PQTMIMU", 10), Entry("PQTMINS", 11), Entry("PQTMQMPTERROR", 1),
        Entry("PQTMVER", 4), Entry("PQVERNO", 5), Entry("PSRFEPE", 7), Entry("PSTI", "030", 16),
        Entry("PSTI", "032", 16), Entry("PSTI", "033", 27), Entry("PSTI", "035", 8), Entry("PSTI", "036", 2),
        Entry("PSTMCPU", 4), Entry("PSTMANTENNASTATUS", 4), Entry("PSTMVER", 1), Entry("PTNLRBA", 2),
        Entry("PTNLRNM", 1), Entry("PTNLRTP", 3), Entry("PTNLRXO", 2), Entry("PTNTA", 8), Entry("PTNTHTM", 9),
        Entry("RMC", 8), Entry("ROT", 3), Entry("SNRSTAT", 5), Entry("THS", 0), Entry("TXT", 5), Entry("VTG", 5),
        Entry("XDR", 5), Entry("ZDA", 4),
    ]

    /// Tags (1 + table index) of the entries the decoder parses or times.
    static let percAveragePosition: UInt8 = 3
    static let pgrmz: UInt8 = 16, gbs: UInt8 = 22, gga: UInt8 = 23, gll: UInt8 = 24, gns: UInt8 = 25
    static let gsa: UInt8 = 27, gst: UInt8 = 28, gsv: UInt8 = 29, hdg: UInt8 = 32, hdm: UInt8 = 33
    static let hdt: UInt8 = 34, pashr: UInt8 = 38, psrfepe: UInt8 = 59, psti030: UInt8 = 60
    static let psti032: UInt8 = 61, psti033: UInt8 = 62, psti035: UInt8 = 63, psti036: UInt8 = 64
    static let rmc: UInt8 = 74, ths: UInt8 = 77, vtg: UInt8 = 79, zda: UInt8 = 81
}

/// gpsd's end-of-cycle detector (the end of `nmea_parse`, and `all_reports` in `gpsd.c`
/// for a cycle end not yet reliable): for each sentence, whether it starts a reporting
/// cycle (`CLEAR_IS`: the fix is cleared before the sentence is merged) and whether gpsd
/// prints a TPV after merging it (`REPORT_IS`).
///
/// A timed sentence whose time of day moves by more than 10 ms starts a cycle and tags
/// the last timed sentence before it (`lasttag`) as a cycle ender, unless it continues the
/// cycle itself (GLL). An ender reports when it arrives; an untimed sentence with data
/// right after an ender reports too. A continuing sentence (GLL) hands the ender over to
/// the next sentence (including one without a handler, which then reports, as gpsd's
/// `cycle_continue` is left as it was). Until an ender is learned, or after a GGA/RMC
/// without time and fix, every sentence that sets a position, mode or attitude reports.
struct GPSDCycleDetector {
    private var enders: (UInt64, UInt64) = (0, 0)
    private var lastTag: UInt8 = 0
    private var thisFrac = 0, lastFrac = 0
    private var cycleContinue = false
    private var reliable = false

    private func isEnder(_ tag: UInt8) -> Bool {
        tag < 64 ? enders.0 & (1 << UInt64(tag)) != 0 : enders.1 & (1 << UInt64(tag - 64)) != 0
    }

    private mutating func setEnder(_ tag: UInt8, _ on: Bool) {
        if tag < 64 {
            if on { enders.0 |= 1 << UInt64(tag) } else { enders.0 &= ~(1 << UInt64(tag)) }
        } else {
            if on { enders.1 |= 1 << UInt64(tag - 64) } else { enders.1 &= ~(1 << UInt64(tag - 64)) }
        }
    }

    /// Runs one sentence through the detector: (starts a cycle, gpsd reports after it).
    /// gpsd's session-wide `cycle_end_reliable`, which binary drivers set too.
    var isReliable: Bool {
        get { reliable }
        set { reliable = newValue }
    }

    mutating func step(_ p: GPSDPacket) -> (clear: Bool, report: Bool) {
        var clear = false, report = false
        if p.handled { cycleContinue = p.continues }
        if p.forcesReport {
            reliable = false
            report = true
        }
        let latched = p.fracTime >= 0
        if latched {
            lastFrac = thisFrac
            thisFrac = p.fracTime
        }
        if p.gsxMore {
            // More parts to come: not a cycle boundary.
        } else if latched {
            if abs(thisFrac - lastFrac) > 10 {
                clear = true
                if lastTag > 0, !isEnder(lastTag), !cycleContinue {
                    setEnder(lastTag, true)
                    reliable = true
                }
            }
        } else {
            if isEnder(lastTag), p.data { report = true }
            if cycleContinue {
                setEnder(lastTag, false)
                setEnder(p.tag, true)
                reliable = true
            }
        }
        if latched || cycleContinue, isEnder(p.tag), !p.gsxMore { report = true }
        if latched { lastTag = p.tag }
        if !reliable, p.changesFix { report = true }
        return (clear, report)
    }
}
