import GNSS

/// Decoding of received contract payloads, for untrusted input.
///
/// Every decoder refuses, with a ``FleetPayload/DecodingError`` naming the key: a payload over
/// ``FleetPayload/maximumPayloadBytes``, anything that is not one JSON object, a missing
/// required key, a value of the wrong type, `"v"` other than ``FleetPayload/version``, a
/// `"vehicle"` that disagrees with the topic's vehicle, `null` values, and numbers that are
/// non-finite or out of range. Unknown keys are ignored (a later contract version may add
/// some). No input makes a decoder trap.
extension FleetPayload {
    /// The largest payload the decoders read, in bytes (64 KiB); a contract payload is < 1 KiB.
    public static let maximumPayloadBytes = 65_536

    /// The largest MQTT packet a Fleetcast client takes by default: the largest payload, and
    /// 1 KiB for the topic, properties and header (announced as MQTT 5 Maximum Packet Size).
    public static let maximumPacketBytes = maximumPayloadBytes + 1_024

    /// Decodes a `fix` payload.
    ///
    /// Required keys: `v`, `time`, `lat`, `lon`, `mode` (2 or 3: a fix is never mode 1), and
    /// `vehicle` when `vehicle` is `nil`. Ranges: `lat` −90...90, `lon` −180...180, `track`
    /// 0...360, `magvar` −180...180 (degrees); `speed` ≥ 0 (m/s); `hdop`, `vdop`, `pdop`, `eph`,
    /// `epv` ≥ 0; `quality` 0...8; `sats` 0...1024.
    ///
    /// The heading of the instant, when the fix carries one: `heading`, `magHeading` (0...360)
    /// and `deviation` (−180...180) in degrees, with `headingSource` (as a heading's `source`),
    /// required once either heading is there. It becomes ``GNSS/Fix/heading``, with the fix's
    /// time, and `magvar` as its variation when its source is HDG (the one sentence with one).
    /// A heading that fails these checks is left out and the fix kept: readers of version 1
    /// ignored these keys, and a position must not be lost for them.
    ///
    /// - Parameters:
    ///   - payload: the message bytes.
    ///   - vehicle: the vehicle of the topic it arrived on; the payload's `"vehicle"`, when
    ///     present, must equal it.
    public static func decodeFix(_ payload: [UInt8], vehicle: VehicleID?) throws(DecodingError) -> DecodedFix {
        let o = try object(payload)
        try o.requireVersion()
        let id = try o.vehicle(topic: vehicle)
        let seq = try o.unsigned("seq")
        let run = try o.unsigned("run") ?? 0
        guard let time = try o.time("time") else { throw .missingKey("time") }
        let lat = try o.requiredNumber("lat", in: Bounds.latitude)
        let lon = try o.requiredNumber("lon", in: Bounds.longitude)
        guard let modeNumber = try o.int("mode", in: 2...3), let mode = FixMode(rawValue: modeNumber) else {
            if o["mode"] == nil { throw .missingKey("mode") }
            throw .invalidValue(key: "mode", detail: "is outside 2...3")
        }
        let quality = try o.int("quality", in: 0...8).flatMap(FixQuality.init(rawValue:))
        let fix = Fix(
            time: time, latitude: lat, longitude: lon,
            altitudeHAE: try o.number("altHAE"), altitudeMSL: try o.number("altMSL"),
            geoidSeparation: try o.number("geoidSep", in: Bounds.geoidSeparation),
            speed: try o.number("speed", in: Bounds.speed), track: try o.number("track", in: Bounds.degrees),
            magneticVariation: try o.number("magvar", in: Bounds.signedDegrees), climb: try o.number("climb"),
            mode: mode, quality: quality, satellitesUsed: try o.int("sats", in: Bounds.satellites),
            hdop: try o.number("hdop", in: Bounds.dilution), vdop: try o.number("vdop", in: Bounds.dilution),
            pdop: try o.number("pdop", in: Bounds.dilution),
            eph: try o.number("eph", in: Bounds.errorEstimate), epv: try o.number("epv", in: Bounds.errorEstimate),
            // A heading that fails its checks is left out; the position still counts.
            heading: try? o.instantHeading(time: time)
        )
        return DecodedFix(vehicle: id, seq: seq, run: run, fix: fix)
    }

    /// Decodes a `heading` payload.
    ///
    /// Required keys: `v`, `source` (`HDT`, `THS`, `HDG`, `HDM`, `gpsd`), at least one of
    /// `heading` and `magHeading` (degrees, 0...360), and `vehicle` when `vehicle` is `nil`.
    /// `time` is optional (HDT carries none); `deviation` and `magvar` are −180...180 degrees.
    public static func decodeHeading(_ payload: [UInt8], vehicle: VehicleID?) throws(DecodingError) -> DecodedHeading {
        let o = try object(payload)
        try o.requireVersion()
        let id = try o.vehicle(topic: vehicle)
        let seq = try o.unsigned("seq")
        let run = try o.unsigned("run") ?? 0
        guard let source = try o.headingSource("source") else { throw .missingKey("source") }
        let trueHeading = try o.number("heading", in: Bounds.degrees)
        let magnetic = try o.number("magHeading", in: Bounds.degrees)
        guard trueHeading != nil || magnetic != nil else { throw .missingKey("heading") }
        let heading = Heading(
            time: try o.time("time"), trueHeading: trueHeading, magneticHeading: magnetic,
            magneticDeviation: try o.number("deviation", in: Bounds.signedDegrees),
            magneticVariation: try o.number("magvar", in: Bounds.signedDegrees), source: source
        )
        return DecodedHeading(vehicle: id, seq: seq, run: run, heading: heading)
    }

    /// Decodes a `status` payload.
    ///
    /// Required keys: `v`, `state` (`online` or `offline`), and `vehicle` when `vehicle` is
    /// `nil`. Optional: `since` (time), `agent`, `source` (≤ 1024 bytes), `reason` (text ≤ 256
    /// bytes), `gnss` (`fixing`, `no-fix`, `source-lost`, `starting`), `dropped`, `droppedFull`,
    /// `droppedExpired`, `droppedUnclean`, `rejected`, `implausible`, `backlog` (counts ≥ 0), `storage` (`ok`, `degraded`),
    /// `storageReason` (text ≤ 512 bytes), `bytesSent`, `bytesReceived` (counts ≥ 0).
    public static func decodeStatus(_ payload: [UInt8], vehicle: VehicleID?) throws(DecodingError) -> VehicleStatus {
        let o = try object(payload)
        try o.requireVersion()
        let id = try o.vehicle(topic: vehicle)
        guard let stateText = try o.string("state", maxBytes: 16) else { throw .missingKey("state") }
        guard let state = VehicleStatus.State(rawValue: stateText) else {
            throw .invalidValue(key: "state", detail: "is not online or offline")
        }
        var gnss: VehicleStatus.GNSSState?
        if let text = try o.string("gnss", maxBytes: 16) {
            guard let g = VehicleStatus.GNSSState(rawValue: text) else {
                throw .invalidValue(key: "gnss", detail: "is not fixing, no-fix, source-lost or starting")
            }
            gnss = g
        }
        var storage: VehicleStatus.StorageState?
        if let text = try o.string("storage", maxBytes: 16) {
            guard let s = VehicleStatus.StorageState(rawValue: text) else {
                throw .invalidValue(key: "storage", detail: "is not ok or degraded")
            }
            storage = s
        }
        var drops: VehicleStatus.Drops?
        let (full, expired, unclean) = (try o.unsigned("droppedFull"), try o.unsigned("droppedExpired"), try o.unsigned("droppedUnclean"))
        let rejected = try o.unsigned("rejected")
        if full != nil || expired != nil || unclean != nil || rejected != nil {
            drops = VehicleStatus.Drops(full: full ?? 0, expired: expired ?? 0, unclean: unclean ?? 0, rejected: rejected ?? 0)
        }
        return VehicleStatus(
            vehicle: id, state: state, since: try o.time("since"), agentVersion: try o.string("agent"),
            source: try o.string("source", maxBytes: 1024), gnss: gnss, droppedFixes: try o.unsigned("dropped"),
            reason: try o.string("reason"), drops: drops, backlog: try o.unsigned("backlog"), storage: storage,
            storageReason: try o.string("storageReason", maxBytes: 512), implausibleFixes: try o.unsigned("implausible"),
            bytesSent: try o.unsigned("bytesSent"), bytesReceived: try o.unsigned("bytesReceived")
        )
    }

    private static func object(_ payload: [UInt8]) throws(DecodingError) -> PayloadObject {
        guard payload.count <= maximumPayloadBytes else { throw .tooLarge(byteCount: payload.count) }
        let o = try PayloadObject(parsing: payload)
        return o
    }
}

extension PayloadObject {
    /// A heading source named by `key` (`HDT`, `THS`, `HDG`, `HDM`, `gpsd`), `nil` when absent.
    fileprivate func headingSource(_ key: StaticString) throws(FleetPayload.DecodingError) -> HeadingSource? {
        guard let text = try string(key, maxBytes: 16) else { return nil }
        guard let source = HeadingSource(rawValue: text) else {
            throw .invalidValue(key: key.description, detail: "is not one of HDT, THS, HDG, HDM, gpsd")
        }
        return source
    }

    /// The heading members of a fix payload, as the heading of the fix's instant.
    fileprivate func instantHeading(time: UTCTimestamp) throws(FleetPayload.DecodingError) -> Heading? {
        let trueHeading = try number("heading", in: FleetPayload.Bounds.degrees)
        let magnetic = try number("magHeading", in: FleetPayload.Bounds.degrees)
        let deviation = try number("deviation", in: FleetPayload.Bounds.signedDegrees)
        let source = try headingSource("headingSource")
        guard trueHeading != nil || magnetic != nil else {
            if deviation != nil || source != nil { throw .missingKey("heading") }
            return nil
        }
        guard let source else { throw .missingKey("headingSource") }
        return Heading(
            time: time, trueHeading: trueHeading, magneticHeading: magnetic, magneticDeviation: deviation,
            magneticVariation: source == .hdg ? try number("magvar", in: FleetPayload.Bounds.signedDegrees) : nil,
            source: source)
    }
}

extension FleetPayload {
    /// The comparisons the duplicate-key check of the top-level object of `payload` makes:
    /// bounded by the member cap whatever the payload (the fuzzer checks it).
    package static func duplicateKeyCheckComparisons(_ payload: [UInt8]) -> Int {
        PayloadObject.duplicateCheckComparisons(payload)
    }
}
