import GNSS

/// The compact encoding of a `batch` message (`uplink.encoding: compact`, the default of a
/// batching vehicle): the same events as the JSON layout, delta-coded in varints, about a
/// tenth of the bytes. The README's "Compact batch encoding" section is its specification;
/// `deploy/decode-compact-batch.py` is a decoder of it in another language.
///
/// Layout (all integers LEB128 varints; "signed" ones zigzag-coded first):
///
///     0xFC 0x01                     magic and layout version (a JSON batch starts with '{')
///     vehicle                       one length byte (1…64), then the id's ASCII bytes
///     run                           varint (0: none)
///     count                         varint, the number of events (at most 2,048)
///     count × event:
///       kind                        one byte: 0 fix, 1 heading
///       seq                         signed varint: the difference from the previous event's seq (first: from 0)
///       changed                     varint bit mask over the kind's fields (bit i: field i)
///       per set bit, in field order: varint 0 = absent; n ≥ 1 = the field's expected value
///                                   (0 while it has none) plus the signed value of n − 1
///
/// A field's expected value is its value in the previous event of the same kind (at the start
/// of a batch: absent); for the fields marked `moving` (time, `lat`, `lon`) that value plus the
/// step it made from the event before (a vehicle at a steady speed and a receiver at a steady
/// rate cost nothing; the step is 0 when either value was absent). A field not in `changed`
/// has its expected value. Fields are integers: times in milliseconds since 1970, other
/// numbers scaled by the power of ten the JSON payload writes them with (`lat` × 10⁹,
/// `altHAE` × 10⁴, `speed` × 10³…, see ``FleetPayload/CompactField``), so a compact event
/// decodes to exactly the value its JSON form does; an integer beyond ±2⁵³ makes its event
/// invalid. Differences wrap around 2⁶⁴.
extension FleetPayload {
    /// The first two bytes of a compact batch.
    public static let compactBatchMagic: [UInt8] = [0xFC, 0x01]

    /// The MQTT 5 content type a compact batch is sent with (JSON payloads: `application/json`).
    public static let compactBatchContentType = "application/vnd.fleetcast.compact-batch"

    /// The largest magnitude of a field's integer (2⁵³, what a Double holds exactly); an event
    /// with a larger one is refused.
    public static let compactLimit: Int64 = 1 << 53

    /// One field of the compact encoding: its JSON key, the power of ten it is scaled by, and
    /// whether it is expected to go on moving by its last step.
    public struct CompactField: Sendable {
        /// The key of the field in the JSON payload.
        public let name: StaticString
        /// The field's integer is its value × 10^`decimals`.
        public let decimals: Int
        /// Expected to change by the step it made last (time, position), not to stay.
        public let moving: Bool

        init(key: StaticString, decimals: Int, moving: Bool = false) {
            self.name = key
            self.decimals = decimals
            self.moving = moving
        }

        /// The key as a string.
        public var key: String { name.description }
    }

    /// A fix's fields, in bit order. `mode`, `quality` and `sats` are integers as in JSON; the
    /// last four are the heading of the instant (bits 18–21: a batch of fixes without one never
    /// sets them, so decoders of the first 18 fields read it), `headingSource` as a heading's
    /// `source` index.
    public static let compactFixFields: [CompactField] = [
        .init(key: "time", decimals: 0, moving: true), .init(key: "lat", decimals: 9, moving: true),
        .init(key: "lon", decimals: 9, moving: true),
        .init(key: "altHAE", decimals: 4), .init(key: "altMSL", decimals: 4), .init(key: "geoidSep", decimals: 3),
        .init(key: "speed", decimals: 3), .init(key: "track", decimals: 4), .init(key: "magvar", decimals: 1),
        .init(key: "climb", decimals: 3), .init(key: "mode", decimals: 0), .init(key: "quality", decimals: 0),
        .init(key: "sats", decimals: 0), .init(key: "hdop", decimals: 2), .init(key: "vdop", decimals: 2),
        .init(key: "pdop", decimals: 2), .init(key: "eph", decimals: 3), .init(key: "epv", decimals: 3),
        .init(key: "heading", decimals: 4), .init(key: "magHeading", decimals: 4), .init(key: "deviation", decimals: 4),
        .init(key: "headingSource", decimals: 0),
    ]

    /// A heading's fields, in bit order. `source` is the index of its name in
    /// ``compactHeadingSources``.
    public static let compactHeadingFields: [CompactField] = [
        .init(key: "time", decimals: 0, moving: true), .init(key: "heading", decimals: 4), .init(key: "magHeading", decimals: 4),
        .init(key: "deviation", decimals: 4), .init(key: "magvar", decimals: 4), .init(key: "source", decimals: 0),
    ]

    /// The heading sources by their compact index.
    public static let compactHeadingSources: [HeadingSource] = [.hdt, .ths, .hdg, .hdm, .gpsd]

    /// Builds one compact batch, event by event; the counterpart of ``BacklogWriter``.
    public struct CompactBatchWriter: Sendable {
        private var header: [UInt8]
        private var events: [UInt8] = []
        private var previousSeq: UInt64 = 0
        private var fixState = CompactState(FleetPayload.compactFixFields)
        private var headingState = CompactState(FleetPayload.compactHeadingFields)
        /// How many events it holds.
        public private(set) var count = 0
        /// The numbering run every event of the batch belongs to.
        public let run: UInt64
        /// The most bytes the finished batch may have.
        public let maximumBytes: Int

        /// An empty batch of `vehicle`'s events of numbering run `run`.
        public init(vehicle: VehicleID, run: UInt64, maximumBytes: Int = FleetPayload.maximumBacklogBytes) {
            header = FleetPayload.compactBatchMagic
            header.append(UInt8(vehicle.rawValue.utf8.count))
            header.append(contentsOf: vehicle.rawValue.utf8)
            Varint.append(run, to: &header)
            self.run = run
            self.maximumBytes = maximumBytes
        }

        /// Appends a fix numbered `seq`; `false` (nothing appended) when the batch would
        /// exceed ``maximumBytes``.
        public mutating func append(_ fix: Fix, seq: UInt64) -> Bool {
            let values: [Int64?] =
                [
                    fix.time.millisecondsSince1970, Self.scaled(fix.latitude, 9), Self.scaled(fix.longitude, 9),
                    Self.scaled(fix.altitudeHAE, 4), Self.scaled(fix.altitudeMSL, 4),
                    Self.scaled(fix.geoidSeparation.within(Bounds.geoidSeparation), 3), Self.scaled(fix.speed.within(Bounds.speed), 3),
                    Self.scaled(fix.track.within(Bounds.degrees), 4),
                    Self.scaled((fix.magneticVariation ?? fix.heading?.magneticVariation).within(Bounds.signedDegrees), 1),
                    Self.scaled(fix.climb, 3), Int64(fix.mode.rawValue), fix.quality.map { Int64($0.rawValue) },
                    fix.satellitesUsed.within(Bounds.satellites).map(Int64.init), Self.scaled(fix.hdop.within(Bounds.dilution), 2),
                    Self.scaled(fix.vdop.within(Bounds.dilution), 2), Self.scaled(fix.pdop.within(Bounds.dilution), 2),
                    Self.scaled(fix.eph.within(Bounds.errorEstimate), 3), Self.scaled(fix.epv.within(Bounds.errorEstimate), 3),
                ] + Self.headingValues(of: fix)
            return append(kind: 0, seq: seq, values: values)
        }

        /// Appends a heading numbered `seq`; `false` (nothing appended) when the batch would
        /// exceed ``maximumBytes``.
        public mutating func append(_ heading: Heading, seq: UInt64) -> Bool {
            let source = FleetPayload.compactHeadingSources.firstIndex(of: heading.source).map(Int64.init)
            let values: [Int64?] = [
                heading.time?.millisecondsSince1970, Self.scaled(heading.trueHeading.within(Bounds.degrees), 4),
                Self.scaled(heading.magneticHeading.within(Bounds.degrees), 4),
                Self.scaled(heading.magneticDeviation.within(Bounds.signedDegrees), 4),
                Self.scaled(heading.magneticVariation.within(Bounds.signedDegrees), 4), source,
            ]
            return append(kind: 1, seq: seq, values: values)
        }

        /// The compact values of a fix's heading fields, as its JSON form writes them.
        private static func headingValues(of fix: Fix) -> [Int64?] {
            let degrees = scaled(fix.heading?.trueHeading.within(Bounds.degrees), 4)
            let magnetic = scaled(fix.heading?.magneticHeading.within(Bounds.degrees), 4)
            guard let heading = fix.heading, degrees != nil || magnetic != nil else { return [nil, nil, nil, nil] }
            return [
                degrees, magnetic,
                scaled(heading.magneticDeviation.within(Bounds.signedDegrees), 4),
                FleetPayload.compactHeadingSources.firstIndex(of: heading.source).map(Int64.init),
            ]
        }

        /// The finished batch.
        public func finish() -> [UInt8] {
            var bytes = header
            Varint.append(UInt64(count), to: &bytes)
            return bytes + events
        }

        private mutating func append(kind: UInt8, seq: UInt64, values: [Int64?]) -> Bool {
            guard count < FleetPayload.maximumBacklogEvents else { return false }
            var state = kind == 0 ? fixState : headingState
            var event: [UInt8] = [kind]
            Varint.append(Varint.zigzag(Int64(bitPattern: seq &- previousSeq)), to: &event)
            var changed: UInt64 = 0
            for (index, value) in values.enumerated() where value != state.expected(index) { changed |= 1 << UInt64(index) }
            Varint.append(changed, to: &event)
            for (index, value) in values.enumerated() where changed & (1 << UInt64(index)) != 0 {
                if let value {
                    Varint.append(Varint.zigzag(value &- (state.expected(index) ?? 0)) &+ 1, to: &event)
                } else {
                    event.append(0)
                }
            }
            state.advance(to: values)
            // The count's varint grows by at most 2 bytes up to 2,048 events.
            guard header.count + 3 + events.count + event.count <= maximumBytes else { return false }
            events += event
            if kind == 0 { fixState = state } else { headingState = state }
            previousSeq = seq
            count += 1
            return true
        }

        /// `value` × 10^`decimals`, rounded as the JSON writer rounds it; `nil` for an unknown
        /// value or one beyond ±2⁵³ (no GNSS value comes near; the decoder refuses such).
        private static func scaled(_ value: Double?, _ decimals: Int) -> Int64? {
            guard let value else { return nil }
            let scaled = (value * JSONWriter.scales[decimals]).rounded()
            guard scaled.isFinite, abs(scaled) <= Double(FleetPayload.compactLimit) else { return nil }
            return Int64(scaled)
        }
    }

    /// Decodes a `batch` message, compact (its first byte is 0xFC) or JSON (it starts with `{`,
    /// as ``decodeBacklog(_:vehicle:)`` reads it).
    public static func decodeBatch(_ payload: [UInt8], vehicle: VehicleID?) throws(DecodingError) -> DecodedBacklog {
        payload.first == compactBatchMagic[0]
            ? try decodeCompactBatch(payload, vehicle: vehicle) : try decodeBacklog(payload, vehicle: vehicle)
    }

    /// Decodes a compact batch (see the layout above) into the events it holds, as
    /// ``decodeBacklog(_:vehicle:)`` does a JSON one.
    ///
    /// The batch is refused whole when it is not one: a wrong magic, a vehicle that is not a
    /// valid id or not the topic's, a truncated or over-long varint, more than
    /// ``maximumBacklogEvents`` events, an unknown event kind, a bit set for a field the kind
    /// does not have, bytes left over. Each event is then checked as its JSON form would be
    /// (``decodeFix(_:vehicle:)``, ``decodeHeading(_:vehicle:)``: required fields, ranges): one
    /// that fails is listed in ``DecodedBacklog/refused`` and the others are kept. Linear in
    /// the payload's length; no input makes it trap.
    public static func decodeCompactBatch(_ payload: [UInt8], vehicle: VehicleID?) throws(DecodingError) -> DecodedBacklog {
        guard payload.count <= maximumPayloadBytes else { throw .tooLarge(byteCount: payload.count) }
        var reader = CompactReader(bytes: payload)
        guard reader.take(2) == compactBatchMagic else { throw .invalidValue(key: "batch", detail: "is not a compact batch (magic)") }
        guard let length = reader.byte(), (1...64).contains(length), let idBytes = reader.take(Int(length)) else {
            throw .invalidValue(key: "vehicle", detail: "is not 1 to 64 bytes")
        }
        let name = String(decoding: idBytes, as: UTF8.self)
        guard let id = VehicleID(name) else { throw .invalidValue(key: "vehicle", detail: "is not a valid vehicle id") }
        if let vehicle, vehicle != id { throw .vehicleMismatch(topic: vehicle.rawValue, payload: name) }
        let run = try reader.varint("run")
        let count = try reader.varint("count")
        guard count <= UInt64(maximumBacklogEvents) else {
            throw .invalidValue(key: "events", detail: "has more than \(maximumBacklogEvents) events")
        }
        var seq: UInt64 = 0
        var fixState = CompactState(compactFixFields)
        var headingState = CompactState(compactHeadingFields)
        var events: [BacklogEvent] = []
        var refused: [(index: Int, error: DecodingError)] = []
        // Each kind's last times, to refuse a batch denser than a receiver as soon as it shows,
        // before the costly part (each event's JSON form) is done for the rest.
        var density = [DensityWindow(), DensityWindow()]
        for index in 0..<Int(count) {
            guard let kind = reader.byte(), kind <= 1 else { throw .invalidValue(key: "kind", detail: "of event \(index) is not 0 or 1") }
            seq = seq &+ UInt64(bitPattern: Varint.unzigzag(try reader.varint("seq")))
            let fields = kind == 0 ? compactFixFields : compactHeadingFields
            let changed = try reader.varint("changed")
            guard changed >> UInt64(fields.count) == 0 else {
                throw .invalidValue(
                    key: "changed", detail: "of event \(index) names a field a \(kind == 0 ? "fix" : "heading") does not have")
            }
            var state = kind == 0 ? fixState : headingState
            var values = fields.indices.map { state.expected($0) }
            for field in 0..<fields.count where changed & (1 << UInt64(field)) != 0 {
                let coded = try reader.varint(fields[field].key)
                values[field] = coded == 0 ? nil : (values[field] ?? 0) &+ Varint.unzigzag(coded &- 1)
            }
            state.advance(to: values)
            if let time = values[0], density[Int(kind)].isOverfull(adding: time) {
                throw .invalidValue(
                    key: "events",
                    detail:
                        "is implausible: more than \(maximumEventsPerSecond) \(kind == 0 ? "fixes" : "headings") within one second of their own time (a 20 Hz receiver at most)"
                )
            }
            let json = eventJSON(kind: kind, fields: fields, values: values, vehicle: id, seq: seq, run: run)
            do throws(DecodingError) {
                if kind == 0 {
                    fixState = state
                    events.append(.fix(try decodeFix(json, vehicle: id)))
                } else {
                    headingState = state
                    events.append(.heading(try decodeHeading(json, vehicle: id)))
                }
            } catch {
                refused.append((index, error))
            }
        }
        guard reader.isAtEnd else { throw .invalidValue(key: "batch", detail: "has bytes after its last event") }
        return DecodedBacklog(vehicle: id, events: events, refused: refused)
    }

    /// An event's JSON form, which the JSON decoders then check.
    private static func eventJSON(
        kind: UInt8, fields: [CompactField], values: [Int64?], vehicle: VehicleID, seq: UInt64, run: UInt64
    ) -> [UInt8] {
        var w = JSONWriter(capacity: 320)
        w.int("v", version)
        w.string("vehicle", vehicle.rawValue)
        w.int("seq", seq)
        if run != 0 { w.int("run", run) }
        for (field, value) in zip(fields, values) {
            guard let value else { continue }
            guard (-compactLimit...compactLimit).contains(value) else {
                w.string(field.name, "out of range")  // refused by the JSON form's check
                continue
            }
            switch field.key {
            case "time":
                // Years 0000 to 9999, what the JSON form can say; other times fail its check.
                if (-62_167_219_200_000...253_402_300_799_999).contains(value) {
                    w.time("time", UTCTimestamp(millisecondsSince1970: value))
                } else {
                    w.string("time", "out of range")
                }
            case "source", "headingSource":
                let index = Int(clamping: value)
                w.string(field.name, compactHeadingSources.indices.contains(index) ? compactHeadingSources[index].rawValue : "#\(value)")
            case _ where field.decimals == 0: w.int(field.name, value)
            default: w.number(field.name, Double(value) / JSONWriter.scales[field.decimals], decimals: field.decimals)
            }
        }
        return w.finish()
    }
}

/// The last ``FleetPayload/maximumEventsPerSecond`` times of one kind of event in a batch (a
/// ring): whether one more makes more than that many within one second. Exact for events in
/// time order, as agents send them; after a time that goes back it says no more (the batch's
/// whole check, on its decoded events, judges such a batch).
struct DensityWindow: Sendable {
    private var times: [Int64] = []
    private var next = 0
    private var ordered = true

    /// Records `time` (ms); true when it and the ``FleetPayload/maximumEventsPerSecond`` before it
    /// lie within one second.
    mutating func isOverfull(adding time: Int64) -> Bool {
        let limit = FleetPayload.maximumEventsPerSecond
        if let last = times.isEmpty ? nil : times[(next + times.count - 1) % times.count], time < last { ordered = false }
        if times.count < limit {
            times.append(time)
            next = times.count % limit
            return false
        }
        let oldest = times[next]
        times[next] = time
        next = (next + 1) % limit
        return ordered && time &- oldest < 1_000
    }
}

/// What a compact batch remembers of one kind's fields from event to event: each field's last
/// value, and for a moving field the step it made last.
struct CompactState: Sendable {
    private let moving: [Bool]
    private var values: [Int64?]
    private var steps: [Int64]

    init(_ fields: [FleetPayload.CompactField]) {
        moving = fields.map(\.moving)
        values = Array(repeating: nil, count: fields.count)
        steps = Array(repeating: 0, count: fields.count)
    }

    /// The value field `index` is expected to have in the next event.
    func expected(_ index: Int) -> Int64? {
        values[index].map { moving[index] ? $0 &+ steps[index] : $0 }
    }

    /// The next event had `next`.
    mutating func advance(to next: [Int64?]) {
        for index in values.indices {
            if moving[index], let old = values[index], let new = next[index] {
                steps[index] = new &- old
            } else {
                steps[index] = 0
            }
            values[index] = next[index]
        }
    }
}

/// LEB128 varints and zigzag coding, as protobuf writes them.
enum Varint {
    static func append(_ value: UInt64, to bytes: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    static func zigzag(_ value: Int64) -> UInt64 { UInt64(bitPattern: (value << 1) ^ (value >> 63)) }
    static func unzigzag(_ value: UInt64) -> Int64 { Int64(bitPattern: value >> 1) ^ -Int64(bitPattern: value & 1) }
}

/// Reads a compact batch front to back; every read checks the bounds.
private struct CompactReader {
    let bytes: [UInt8]
    var offset = 0

    var isAtEnd: Bool { offset == bytes.count }

    mutating func byte() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func take(_ count: Int) -> [UInt8]? {
        guard count >= 0, bytes.count - offset >= count else { return nil }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    /// A varint of at most 10 bytes whose value fits 64 bits; `key` names it in errors.
    mutating func varint(_ key: String) throws(FleetPayload.DecodingError) -> UInt64 {
        var value: UInt64 = 0
        for shift in stride(from: UInt64(0), to: 70, by: 7) {
            guard let byte = byte() else { throw .invalidValue(key: key, detail: "is cut off (the batch ends inside it)") }
            guard shift < 63 || byte <= 1 else { throw .invalidValue(key: key, detail: "is larger than 64 bits") }
            value |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return value }
        }
        throw .invalidValue(key: key, detail: "is larger than 64 bits")
    }
}
