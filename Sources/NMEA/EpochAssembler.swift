import GNSS

/// Turns the sentences of each receiver cycle into one `Fix`, and the heading sentences of
/// each instant into one `Heading` (see `HeadingMerger` for how they merge).
///
/// A cycle is the run of sentences with the same UTC time of day; sentences without a
/// time (GSA, GSV, VTG, headings) belong to the cycle in progress. Rules follow gpsd's
/// NMEA driver, so that the fix of a cycle is the one gpsd reports:
/// - **Emission**: what is published for a time is gpsd's fix at gpsd's last report (TPV)
///   for that time: `GPSDCycleDetector` finds gpsd's report points sentence by sentence
///   (including the sentences the decoder does not parse), `GPSDFixModel` holds gpsd's
///   fix. The fix is emitted once, as soon as the cycle's last fix sentence arrives (the
///   sentence seen last before the time changed, with its ordinal among its kind: the 4th
///   GNGSA of a u-blox cycle), or when the time changes, or at ``finish(emit:)``; a later
///   report for the same time that changes gpsd's fix emits the corrected fix at once, with
///   the same time: consumers keep the last fix for a time. A cycle gpsd never reports is
///   not emitted.
/// - **Date**: from RMC (`ddmmyy`, years 69–99 → 19xx) or ZDA. Other sentences use the last
///   date seen; a cycle whose time of day falls more than 12 h before the date's time of day
///   is taken to be on the next day (midnight passed). As gpsd's `gpsd_utc_resolve`, a date
///   before 2017 gets 1024 weeks added (a GPS week rollover for gpsd, whose leap-second count
///   is 18), unless a `# Date:` comment put gpsd's regression-test mode on.
/// - **Mode**, and the **speed and climb derived** where the receiver sends no speed, are
///   gpsd's: every sentence goes through `GPSDFixModel`, a transcription of gpsd's NMEA
///   driver and error model (GGA/GNS altitude with ≥ 4 satellites → 3D, GSA's mode, RMC/GLL
///   keeping the last fix's, the latch on a GGA whose time does not advance, no lowering of
///   a 3D fix while an altitude is held, the fix cleared when the time of day moves).
/// - **Values**: time, position, altitude, speed, track and climb are gpsd's fix at its
///   report: speed (knots × 1852/3600 → m/s) and track from RMC/VTG (the later wins), else
///   gpsd's derived speed; altMSL and geoid separation from GGA/GNS (altMSL from PGRMZ),
///   altHAE = altMSL + separation only when the receiver gives the separation; DOPs from GGA/GNS/GSA (0.01…89.99, else
///   unknown); eph = √(σlat² + σlon²) and epv = σalt from GST (1 σ, metres); satellites
///   used from GSA (all talkers of the cycle, without duplicates), else GGA/GNS.
/// - A cycle without a usable position or a known date and time is never a `Fix`: it ends
///   with `.state(.noFix)`, emitted once when the receiver goes from fix to no fix.
struct EpochAssembler {
    /// The values of the cycle being assembled.
    struct Epoch {
        var timeOfDay: Int?
        var date: NMEADate?
        var position: NMEAPosition?
        var altitudeMSL: Double?
        var geoidSeparation: Double?
        var speed: Double?
        var track: Double?
        var magneticVariation: Double?
        var quality: FixQuality?
        var satellites: Int?
        var gsaUsed: SatelliteSet?
        var hdop: Double?, vdop: Double?, pdop: Double?
        var eph: Double?, epv: Double?
        /// A position sentence (RMC, GGA, GNS, GLL) or GSA was seen: the cycle says something.
        var hasContent = false
    }

    private(set) var epoch = Epoch()
    /// The last date the receiver gave, and the time of day it came with.
    private var date: NMEADate?
    private var dateTimeOfDay = 0
    /// A sentence of a cycle: its kind and its ordinal among that kind in the cycle
    /// (the 4th GSA of a u-blox cycle, the 2nd GGA of a GP+GN receiver).
    struct CycleEnder: Equatable {
        var kind: NMEASentenceKind
        var ordinal: Int
    }

    /// The learned last fix sentence of a cycle: after it, the cycle's fix is final.
    private(set) var cycleEnder: CycleEnder?
    /// The last fix sentence of the cycle in progress.
    private var lastFixSentence: CycleEnder?
    /// Fix sentences of each kind in the cycle in progress, 8 bits per kind.
    private var kindCounts: (UInt64, UInt64) = (0, 0)
    private var lastKind: NMEASentenceKind?
    private var lastGSATalker: UInt8 = 0
    /// GSA's satellites-used count carries over cycles (gpsd's `satellites_used`).
    private var gsaSatellites = 0
    private var inNoFixState = false
    private var pendingGST: GSTSentence?
    /// The heading sentences of the instant in progress.
    private var headingMerger = HeadingMerger()
    /// gpsd's fix, sentence by sentence: the mode, speed and climb reported (see `GPSDFixModel`).
    private var gpsd = GPSDFixModel()

    /// gpsd's end-of-cycle detector: when gpsd clears its fix and when it prints a TPV.
    private var detector = GPSDCycleDetector()
    /// gpsd's fix at its last report (its last TPV so far), not yet emitted.
    private var pending: GPSDFixModel.Snapshot?
    /// The last fix emitted, and gpsd's fix it was made of: a later report for the same
    /// time is a correction only if gpsd's fix changed.
    private var lastEmitted: Fix?
    private var emittedSnapshot: GPSDFixModel.Snapshot?
    /// gpsd's binary drivers' cycle detection (each driver keeps its own).
    private var ubxCycle = GPSDBinaryCycle(), casicCycle = GPSDBinaryCycle()
    /// What the fix of a binary report carries besides gpsd's TPV (set while it is made).
    private var binaryExtras: (satellites: Int?, eph: Double, epv: Double)?
    private var lastBinarySolution: GPSDBinaryMessage.Solution?
    /// A `# Date:` comment was seen (gpsd's regression-test mode: no WKRO correction).
    var regressionMode = false

    /// Counters kept for the decoder's statistics.
    var fixes = 0, headings = 0

    mutating func ingest(_ sentence: NMEASentence, _ packet: GPSDPacket, emit: (GNSSEvent) -> Void) {
        let kind = sentence.kind
        let tod = Self.cycleTime(of: sentence)
        if let tod {
            if let current = epoch.timeOfDay, current != tod {
                // The time changed: the last fix sentence of the cycle is its ender.
                cycleEnder = lastFixSentence
                close(emit: emit)
            }
            if epoch.timeOfDay == nil {
                epoch.timeOfDay = tod
                if let gst = pendingGST, gst.timeOfDay == tod {
                    apply(gst)
                    note(.gst)
                }
                pendingGST = nil
            }
        }
        let contributes = apply(sentence, emit: emit)
        lastKind = kind
        let step = detector.step(packet)
        if packet.handled {
            gpsd.update(sentence, time: gpsdTime(of: sentence), clear: step.clear, gsaUsed: gsaSatellites)
        } else {
            gpsd.other(clear: step.clear)
        }
        if step.report { report(emit: emit) }
        guard contributes else { return }
        let ordinal = note(kind)
        if let ender = cycleEnder, ender.kind == kind, ender.ordinal == ordinal { flush(emit: emit) }
    }

    /// A binary message (UBX, CASIC): gpsd's binary driver's cycle rule (a new time word
    /// clears the fix and teaches the ender; the ender, and UBX NAV-SOL, report; while no
    /// ender is known, CASIC reports every message that sets a position or mode), its
    /// values merged into gpsd's fix. A report emits at once: it is the binary solution of
    /// the second, with the receiver's satellites and error estimates, and no DOPs.
    mutating func binary(_ m: GPSDBinaryMessage, emit: (GNSSEvent) -> Void) {
        let step: (clear: Bool, report: Bool)
        switch m.driver {
        case .ubx:
            detector.isReliable = true
            step = ubxCycle.step(m)
        case .casic:
            detector.isReliable = casicCycle.ender != 0
            step = casicCycle.step(m)
        }
        if step.clear {
            // gpsd's last report before the clear stands: emit it if it is waiting.
            flush(emit: emit)
            lastBinarySolution = nil
        }
        if var s = m.solution, s.latitude.isFinite || s.mode != 0 {
            // gpsd's satellites-used count stands until a message sets it (NAV-PVT does not).
            if s.satellitesUsed == nil { s.satellitesUsed = lastBinarySolution?.satellitesUsed }
            lastBinarySolution = s
        }
        gpsd.binary(m.solution, clear: step.clear)
        var reports = step.report || m.forcesReport
        if !detector.isReliable, m.solution?.changesFix == true { reports = true }
        // A report without a time or position yet (NAV-SOL's, early in a UBX cycle) is one
        // gpsd makes of values the decoder does not keep: it neither publishes nor ends a fix.
        let f = gpsd.fix
        let publishable = f.mode >= 2 && f.time > 0 && f.latitude.isFinite && f.longitude.isFinite
        guard reports, publishable || f.mode == 1 else { return }
        let s = lastBinarySolution
        binaryExtras = (s?.satellitesUsed, s?.eph ?? .nan, s?.epv ?? .nan)
        report(emit: emit)
        flush(emit: emit)
        binaryExtras = nil
    }

    /// Counts a fix sentence of the cycle; returns its ordinal among its kind (1, 2…).
    @discardableResult
    private mutating func note(_ kind: NMEASentenceKind) -> Int {
        let shift = UInt64(kind.rawValue % 8) * 8
        let ordinal: Int
        if kind.rawValue < 8 {
            ordinal = Int((kindCounts.0 >> shift) & 0xFF) + 1
            if ordinal < 255 { kindCounts.0 &+= 1 << shift }
        } else {
            ordinal = Int((kindCounts.1 >> shift) & 0xFF) + 1
            if ordinal < 255 { kindCounts.1 &+= 1 << shift }
        }
        lastFixSentence = CycleEnder(kind: kind, ordinal: ordinal)
        return ordinal
    }

    /// A sentence the decoder does not use (proprietary, unknown type): gpsd parses it too,
    /// and it ends a run of GSA there.
    mutating func ignored(_ packet: GPSDPacket, emit: (GNSSEvent) -> Void) {
        let step = detector.step(packet)
        gpsd.other(clear: step.clear, averagePosition: packet.averagePosition)
        if step.report { report(emit: emit) }
    }

    /// The instant gpsd gives a sentence (`TIME_SET`): a time of day once a date is known
    /// (RMC valid with its date, ZDA with a full date, GGA/GLL/GNS after either).
    private func gpsdTime(of sentence: NMEASentence) -> Int64? {
        let tod: Int?
        switch sentence {
        case .gga(let s): tod = s.timeOfDay
        case .gll(let s): tod = s.timeOfDay
        case .gns(let s): tod = s.timeOfDay
        case .rmc(let s): tod = s.isValid && s.date != nil ? s.timeOfDay : nil
        case .zda(let s): tod = s.date != nil ? s.timeOfDay : nil
        default: tod = nil
        }
        guard let tod, epoch.date != nil || date != nil else { return nil }
        return timestamp(timeOfDay: tod)?.millisecondsSince1970
    }

    /// Emits the cycle in progress, if it has not been emitted.
    mutating func finish(emit: (GNSSEvent) -> Void) {
        close(emit: emit)
    }

    /// The time of day a sentence registers for cycle detection (gpsd's "fractional time"):
    /// GGA, GLL, GNS with a time, RMC valid with a time and date, ZDA with a full date.
    static func cycleTime(of sentence: NMEASentence) -> Int? {
        switch sentence {
        case .gga(let s): return s.timeOfDay
        case .gll(let s): return s.timeOfDay
        case .gns(let s): return s.timeOfDay
        case .rmc(let s): return s.isValid && s.date != nil ? s.timeOfDay : nil
        case .zda(let s): return s.date != nil ? s.timeOfDay : nil
        default: return nil
        }
    }

    private mutating func close(emit: (GNSSEvent) -> Void) {
        endHeading(emit: emit)
        flush(emit: emit)
        epoch = Epoch()
        kindCounts = (0, 0)
        lastFixSentence = nil
    }

    /// One of gpsd's report points (a TPV): its fix becomes the cycle's, emitted when the
    /// cycle ends (see `flush`), or at once if the cycle was already emitted and it differs
    /// (a correction, same time). A TPV without a publishable fix ends the fix.
    private mutating func report(emit: (GNSSEvent) -> Void) {
        if gpsd.fix.mode >= 2, gpsd.fix.time > 0, gpsd.fix.latitude.isFinite, gpsd.fix.longitude.isFinite {
            pending = gpsd.fix
            if let last = emittedSnapshot, last.time == gpsd.fix.time, !last.isSame(as: gpsd.fix) { flush(emit: emit) }
        } else if gpsd.fix.mode < 2 || !gpsd.fix.latitude.isFinite {
            // A TPV without a fix (not one merely without a date yet).
            pending = nil
            if epoch.hasContent, !inNoFixState {
                inNoFixState = true
                emit(.state(.noFix))
            }
        }
    }

    /// Emits the fix of gpsd's last report, if it is new: when the learned last sentence
    /// of the cycle has arrived, when the time changes, and at the end of the input.
    private mutating func flush(emit: (GNSSEvent) -> Void) {
        guard let g = pending else { return }
        pending = nil
        if let e = emittedSnapshot, e.isSame(as: g) { return }
        guard let fix = makeFix(g) else { return }
        emittedSnapshot = g
        guard fix != lastEmitted else { return }
        lastEmitted = fix
        inNoFixState = false
        fixes += 1
        emit(.fix(fix))
    }

    /// The UTC instant of a time of day, on the cycle's date or the last known one.
    func timestamp(timeOfDay tod: Int) -> UTCTimestamp? {
        var day: Int64
        if let d = epoch.date {
            guard let t = UTCTimestamp(year: d.year, month: d.month, day: d.day, hour: 0, minute: 0, second: 0)
            else { return nil }
            day = t.millisecondsSince1970
        } else if let d = date {
            guard let t = UTCTimestamp(year: d.year, month: d.month, day: d.day, hour: 0, minute: 0, second: 0)
            else { return nil }
            day = t.millisecondsSince1970
            if dateTimeOfDay - tod > 43_200_000 { day += 86_400_000 }
        } else {
            return nil
        }
        var ms = day + Int64(tod)
        // gpsd_utc_resolve: a UTC date before 2017 while the leap-second count is above 17
        // (gpsd's build-time 18) is a GPS week rollover: 1024 weeks are added. gpsd skips
        // this only in its regression-test mode, set by a `# Date:` comment in the input.
        if !regressionMode, ms < 1_483_228_800_000 { ms += 619_315_200_000 }
        return UTCTimestamp(millisecondsSince1970: ms)
    }

    /// gpsd's fix (time, position, altitude, speed, track, mode, climb: its TPV) with the
    /// cycle's other values (quality, DOPs, GST errors, satellites, variation: gpsd's SKY
    /// and GST, taken as they stand when the fix is emitted); `nil` unless it has a time,
    /// a position and a 2D or 3D mode.
    private func makeFix(_ g: GPSDFixModel.Snapshot) -> Fix? {
        guard g.time > 0, g.latitude.isFinite, g.longitude.isFinite, let mode = FixMode(rawValue: g.mode),
            mode != .noFix
        else { return nil }
        let e = epoch
        let msl: Double? = g.altMSL.isFinite ? g.altMSL : nil
        let sep: Double? = msl != nil && g.geoidSeparation.isFinite ? g.geoidSeparation : nil
        if let b = binaryExtras {
            return Fix(
                time: UTCTimestamp(millisecondsSince1970: g.time), latitude: g.latitude, longitude: g.longitude,
                altitudeHAE: g.altHAE.isFinite ? g.altHAE : nil, altitudeMSL: msl, geoidSeparation: sep,
                speed: g.speed.isFinite ? g.speed : nil, track: g.track.isFinite ? g.track : nil,
                magneticVariation: e.magneticVariation, climb: g.climb.isFinite ? g.climb : nil,
                mode: mode, quality: nil, satellitesUsed: b.satellites.flatMap { $0 > 0 ? $0 : nil },
                hdop: nil, vdop: nil, pdop: nil, eph: b.eph.isFinite ? b.eph : nil, epv: b.epv.isFinite ? b.epv : nil
            )
        }
        return Fix(
            time: UTCTimestamp(millisecondsSince1970: g.time), latitude: g.latitude, longitude: g.longitude,
            altitudeHAE: g.altHAE.isFinite ? g.altHAE : nil, altitudeMSL: msl, geoidSeparation: sep,
            speed: g.speed.isFinite ? g.speed : nil, track: g.track.isFinite ? g.track : nil,
            magneticVariation: e.magneticVariation, climb: g.climb.isFinite ? g.climb : nil,
            mode: mode, quality: e.quality,
            satellitesUsed: e.gsaUsed.map(\.count).flatMap { $0 > 0 ? $0 : nil } ?? e.satellites,
            hdop: e.hdop, vdop: e.vdop, pdop: e.pdop, eph: e.eph, epv: e.epv
        )
    }

    private mutating func setPosition(_ p: NMEAPosition) {
        epoch.position = p
    }

    /// Applies a sentence to the cycle; returns whether it is a fix sentence of this
    /// cycle (one that can end it): not GSV, headings, or a GST of another cycle.
    @discardableResult
    private mutating func apply(_ sentence: NMEASentence, emit: (GNSSEvent) -> Void) -> Bool {
        switch sentence {
        case .rmc(let s):
            epoch.hasContent = true
            if let d = s.date, s.isValid, s.timeOfDay != nil {
                date = d
                dateTimeOfDay = s.timeOfDay ?? 0
                epoch.date = d
            }
            guard s.isValid, let p = s.position else { return true }
            setPosition(p)
            if let k = s.speedKnots { epoch.speed = k * 1852 / 3600 }
            if let t = s.trackDegrees { epoch.track = t }
            if let v = s.magneticVariation { epoch.magneticVariation = v }
        case .gga(let s):
            epoch.hasContent = true
            if let q = s.quality { epoch.quality = FixQuality(rawValue: q) }
            if s.satellitesUsed > 0 { epoch.satellites = s.satellitesUsed }
            if let h = s.hdop { epoch.hdop = h }
            guard let p = s.position, s.quality != 0 else { return true }
            setPosition(p)
            if let alt = s.altitudeMSL {
                epoch.altitudeMSL = alt
                epoch.geoidSeparation = s.geoidSeparation
            }
        case .gns(let s):
            epoch.hasContent = true
            guard let m = s.mode, m != UInt8(ascii: "N") else { return true }
            if s.navigationStatus == UInt8(ascii: "U") || s.navigationStatus == UInt8(ascii: "V") { return true }
            if s.satellitesUsed > 0 { epoch.satellites = s.satellitesUsed }
            guard let p = s.position else { return true }
            setPosition(p)
            if let h = s.hdop { epoch.hdop = h }
            if let alt = s.altitudeMSL {
                epoch.altitudeMSL = alt
                if let sep = s.geoidSeparation { epoch.geoidSeparation = sep }
            }
        case .gll(let s):
            epoch.hasContent = true
            guard s.status == UInt8(ascii: "A"), s.faaMode != UInt8(ascii: "N"), let p = s.position else {
                return true
            }
            setPosition(p)
        case .gsa(let s):
            epoch.hasContent = true
            let continuing =
                lastKind == .gsa
                && (s.talker != lastGSATalker || s.talker == UInt8(ascii: "N") || s.talker == UInt8(ascii: "Q"))
            if continuing, var used = epoch.gsaUsed {
                used.formUnion(s.used)
                epoch.gsaUsed = used
            } else {
                epoch.gsaUsed = s.used
            }
            gsaSatellites = epoch.gsaUsed?.count ?? 0
            lastGSATalker = s.talker
            if let v = s.pdop { epoch.pdop = v }
            if let v = s.hdop { epoch.hdop = v }
            if let v = s.vdop { epoch.vdop = v }
        case .gsv:
            return false
        case .vtg(let s):
            guard s.isUsable, let t = s.trackDegrees, let k = s.speedKnots else { return true }
            epoch.track = t
            epoch.speed = k * 1852 / 3600
        case .zda(let s):
            if let d = s.date, let tod = s.timeOfDay {
                date = d
                dateTimeOfDay = tod
                epoch.date = d
            }
        case .gst(let s):
            guard s.timeOfDay == nil || s.timeOfDay == epoch.timeOfDay else {
                pendingGST = s
                return false
            }
            apply(s)
        case .pgrmz(let s):
            if let alt = s.altitudeMSL { epoch.altitudeMSL = alt }
        case .heading(let kind, let h):
            if headingMerger.isRepeat(kind) { endHeading(emit: emit) }
            headingMerger.add(kind, h)
            if headingMerger.isComplete { emitHeading(emit: emit) }
            return false
        }
        return true
    }

    /// Emits the merged heading of the current instant if it says something new.
    private mutating func emitHeading(emit: (GNSSEvent) -> Void) {
        if let heading = headingMerger.take(time: epoch.timeOfDay.flatMap { timestamp(timeOfDay: $0) }) {
            headings += 1
            emit(.heading(heading))
        }
    }

    /// Ends the heading instant in progress, emitting it if it was not.
    private mutating func endHeading(emit: (GNSSEvent) -> Void) {
        emitHeading(emit: emit)
        headingMerger.end()
    }

    private mutating func apply(_ s: GSTSentence) {
        if let a = s.latitudeSigma, let b = s.longitudeSigma { epoch.eph = (a * a + b * b).squareRoot() }
        if let v = s.altitudeSigma { epoch.epv = v }
    }
}
