import GNSS

/// The payload JSON of the public contract (version ``FleetPayload/version``): how a `Fix`
/// and a `Heading` look on the wire.
///
/// Keys and units follow gpsd's TPV so that gpsd users read them at sight: degrees for
/// `lat`, `lon`, `track`, `heading`; metres for `altHAE`, `altMSL`, `geoidSep`, `eph`, `epv`;
/// metres per second for `speed` and `climb`; `time` is ISO 8601 UTC with milliseconds.
/// A value that is not known is left out, never sent as `null`; so is a value outside the
/// contract's range (`FleetPayload.Bounds`), which a subscriber would refuse.
public enum FleetPayload {
    /// The contract version, the `"v"` key of every payload.
    public static let version = 1

    /// Which of a fix's and a heading's values a payload carries.
    ///
    /// Every key but `v` and the position is optional in the contract (a value that is not known
    /// is left out), so both sets read the same everywhere. `standard`, the agent's default for
    /// a metered link, sends what a fleet's map, history and bridges use and leaves out what
    /// another key or the topic already says or few readers need: `vehicle` (the topic names it),
    /// `altHAE` and `geoidSep` (`altMSL` is sent; `altHAE` only when `altMSL` is not known),
    /// `climb`, `quality`, `vdop`, `pdop`, `epv`, `hdop` when `eph` is known, `magvar` and
    /// `deviation`: about 110 bytes of a fix message's 300. `full` sends every value known (gpsd's
    /// TPV), as the `decode` command and fleet-watch's JSON lines write it.
    public enum FieldSet: String, Sendable, CaseIterable {
        case standard, full
    }

    /// What kind of payload a `"kind"` key names, in the decoder's JSON lines and
    /// fleet-watch's output.
    public enum Kind: String, Sendable {
        case fix, heading, status, malformed
    }

    /// Encodes a fix as contract JSON; with the heading of its instant (``GNSS/Fix/heading``)
    /// as `heading`, `magHeading`, `deviation` (degrees) and `headingSource`, each where known,
    /// and the compass's magnetic variation in `magvar` when the receiver gave none.
    ///
    /// - Parameters:
    ///   - vehicle: the vehicle id; left out when `nil` (the `decode` command).
    ///   - seq: the per-vehicle message sequence number; left out when `nil`.
    ///   - run: the numbering run `seq` belongs to (``MessageNumber/run``); left out when 0.
    ///   - includeKind: adds `"kind":"fix"` (JSON-lines output of `decode` and fleet-watch).
    ///   - fields: which values to write (``FieldSet``); `vehicle` only with `full`.
    public static func encode(
        _ fix: Fix, vehicle: String? = nil, seq: UInt64? = nil, run: UInt64 = 0, includeKind: Bool = false,
        fields: FieldSet = .full
    ) -> [UInt8] {
        let full = fields == .full
        var w = JSONWriter()
        if includeKind { w.raw("kind", "fix") }
        w.int("v", version)
        if full { w.string("vehicle", vehicle) }
        w.int("seq", seq)
        if run != 0 { w.int("run", run) }
        w.time("time", fix.time)
        w.number("lat", fix.latitude, decimals: 9)
        w.number("lon", fix.longitude, decimals: 9)
        if full || fix.altitudeMSL == nil { w.number("altHAE", fix.altitudeHAE, decimals: 4) }
        w.number("altMSL", fix.altitudeMSL, decimals: 4)
        if full { w.number("geoidSep", fix.geoidSeparation.within(Bounds.geoidSeparation), decimals: 3) }
        w.number("speed", fix.speed.within(Bounds.speed), decimals: 3)
        w.number("track", fix.track.within(Bounds.degrees), decimals: 4)
        if full {
            // One magnetic variation per instant: the receiver's (RMC), else the compass's (HDG).
            w.number(
                "magvar", (fix.magneticVariation ?? fix.heading?.magneticVariation).within(Bounds.signedDegrees), decimals: 1)
            w.number("climb", fix.climb, decimals: 3)
        }
        w.int("mode", fix.mode.rawValue)
        if full { w.int("quality", fix.quality?.rawValue) }
        w.int("sats", fix.satellitesUsed.within(Bounds.satellites))
        let eph = fix.eph.within(Bounds.errorEstimate)
        if full || eph == nil { w.number("hdop", fix.hdop.within(Bounds.dilution), decimals: 2) }
        if full {
            w.number("vdop", fix.vdop.within(Bounds.dilution), decimals: 2)
            w.number("pdop", fix.pdop.within(Bounds.dilution), decimals: 2)
        }
        w.number("eph", eph, decimals: 3)
        if full { w.number("epv", fix.epv.within(Bounds.errorEstimate), decimals: 3) }
        // Checked as written: a heading out of range is left out, and its source with it.
        let degrees = fix.heading?.trueHeading.within(Bounds.degrees)
        let magnetic = fix.heading?.magneticHeading.within(Bounds.degrees)
        if let heading = fix.heading, degrees != nil || magnetic != nil {
            w.number("heading", degrees, decimals: 4)
            w.number("magHeading", magnetic, decimals: 4)
            if full { w.number("deviation", heading.magneticDeviation.within(Bounds.signedDegrees), decimals: 4) }
            w.string("headingSource", heading.source.rawValue)
        }
        return w.finish()
    }

    /// Encodes a heading as contract JSON: `heading` (true), `magHeading`, `deviation`,
    /// `magvar` (degrees) and `source`, each only where known.
    ///
    /// With the `standard` ``FieldSet``: no `vehicle`, `deviation` or `magvar`.
    public static func encode(
        _ heading: Heading, vehicle: String? = nil, seq: UInt64? = nil, run: UInt64 = 0, includeKind: Bool = false,
        fields: FieldSet = .full
    ) -> [UInt8] {
        let full = fields == .full
        var w = JSONWriter(capacity: 160)
        if includeKind { w.raw("kind", "heading") }
        w.int("v", version)
        if full { w.string("vehicle", vehicle) }
        w.int("seq", seq)
        if run != 0 { w.int("run", run) }
        w.time("time", heading.time)
        w.number("heading", heading.trueHeading.within(Bounds.degrees), decimals: 4)
        w.number("magHeading", heading.magneticHeading.within(Bounds.degrees), decimals: 4)
        if full {
            w.number("deviation", heading.magneticDeviation.within(Bounds.signedDegrees), decimals: 4)
            w.number("magvar", heading.magneticVariation.within(Bounds.signedDegrees), decimals: 4)
        }
        w.string("source", heading.source.rawValue)
        return w.finish()
    }
}
