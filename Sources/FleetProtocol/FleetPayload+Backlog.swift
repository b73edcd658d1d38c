import GNSS

/// The `backlog` topic's payload: fixes and headings that could not be delivered live, sent
/// later, oldest first, in batches.
///
/// JSON: `{"v":1,"vehicle":"van-7","events":[{"kind":"fix","v":1,"vehicle":"van-7","seq":41,…},
/// {"kind":"heading",…}]}`. Each event is the contract's fix or heading payload, with its
/// original `seq` and `time`, and a `"kind"` key. A batch is at most
/// ``FleetPayload/maximumBacklogBytes`` long and its events rise in `seq`.
extension FleetPayload {
    /// The largest backlog batch an agent sends, in bytes (32 KiB).
    public static let maximumBacklogBytes = 32_768

    /// Builds one backlog batch from already encoded fix and heading payloads, without
    /// re-encoding them: each payload (a contract JSON object starting `{"v":…`) gets its
    /// `"kind"` key spliced in front.
    public struct BacklogWriter: Sendable {
        /// The batch so far, without its closing `]}`.
        private var bytes: [UInt8]
        /// How many events it holds.
        public private(set) var count = 0
        /// The most bytes the finished batch may have.
        public let maximumBytes: Int

        /// An empty batch for `vehicle`, at most `maximumBytes` long when finished.
        public init(vehicle: VehicleID, maximumBytes: Int = FleetPayload.maximumBacklogBytes) {
            var w = JSONWriter(capacity: min(maximumBytes, 4096))
            w.int("v", FleetPayload.version)
            w.string("vehicle", vehicle.rawValue)
            bytes = w.bytes
            bytes.append(contentsOf: #","events":["#.utf8)
            self.maximumBytes = maximumBytes
        }

        /// The size the batch would have with an event of `payloadBytes` added.
        public func size(adding payloadBytes: Int, kind: Kind) -> Int {
            // ,{"kind":"heading",  + payload without its "{"  + "]}"
            bytes.count + (count > 0 ? 1 : 0) + 10 + kind.rawValue.utf8.count + 2 + payloadBytes - 1 + 2
        }

        /// Appends an event when it fits; returns `false` (and appends nothing) when the batch
        /// would exceed ``maximumBytes``, or when `payload` is not a JSON object. A first event
        /// that is larger than the limit on its own is refused as well.
        @discardableResult
        public mutating func append(kind: Kind, payload: [UInt8]) -> Bool {
            guard kind == .fix || kind == .heading, payload.count >= 2, payload.first == UInt8(ascii: "{"),
                payload.last == UInt8(ascii: "}"), size(adding: payload.count, kind: kind) <= maximumBytes
            else { return false }
            if count > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: #"{"kind":""#.utf8)
            bytes.append(contentsOf: kind.rawValue.utf8)
            bytes.append(UInt8(ascii: "\""))
            if payload.count > 2 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: payload[1...])
            count += 1
            return true
        }

        /// The finished batch.
        public func finish() -> [UInt8] {
            bytes + Array("]}".utf8)
        }
    }

    /// One event of a received backlog batch.
    public enum BacklogEvent: Sendable, Equatable {
        case fix(DecodedFix)
        case heading(DecodedHeading)

        /// The event's `seq`, if it carried one.
        public var seq: UInt64? {
            switch self {
            case .fix(let f): f.seq
            case .heading(let h): h.seq
            }
        }

        /// The event's number (run and `seq`), if it carried a `seq`.
        public var number: MessageNumber? {
            switch self {
            case .fix(let f): f.number
            case .heading(let h): h.number
            }
        }
    }

    /// A received backlog batch: the events that decoded, in the batch's order, and why the
    /// others did not (one entry per refused event, with its index).
    public struct DecodedBacklog: Sendable, Equatable {
        /// The vehicle of the topic (and of the batch's and every event's `"vehicle"`).
        public let vehicle: VehicleID
        /// The events that decoded, oldest first as sent.
        public let events: [BacklogEvent]
        /// Events of the batch that did not decode: their position and the reason.
        public let refused: [(index: Int, error: DecodingError)]

        public static func == (a: Self, b: Self) -> Bool {
            a.vehicle == b.vehicle && a.events == b.events
                && a.refused.map(\.index) == b.refused.map(\.index) && a.refused.map(\.error) == b.refused.map(\.error)
        }
    }

    /// The most events a batch may carry (a 64 KiB payload of tiny objects cannot make a
    /// decoder allocate without bound).
    public static let maximumBacklogEvents = 2_048

    /// The most events of one kind (fixes, or headings) a batch may carry within any one second
    /// of their own time: a 20 Hz receiver (the fastest common ones), with half as much again
    /// for jitter in its time stamps. A compact batch denser than this is refused as soon as
    /// it shows; consumers judge every batch by it (FleetWatch's `FleetPlausibility`).
    public static let maximumEventsPerSecond = 30

    /// Decodes a `backlog` batch.
    ///
    /// The batch must be a JSON object with `v`, `events` (an array), and `vehicle` when
    /// `vehicle` is `nil`; a batch that is not is refused whole. Each event is decoded on its
    /// own, as ``decodeFix(_:vehicle:)`` or ``decodeHeading(_:vehicle:)`` according to its
    /// `"kind"`, against the batch's vehicle; an event that does not decode is listed in
    /// ``DecodedBacklog/refused`` and the others are kept, so one bad event loses nothing else.
    public static func decodeBacklog(_ payload: [UInt8], vehicle: VehicleID?) throws(DecodingError) -> DecodedBacklog {
        guard payload.count <= maximumPayloadBytes else { throw .tooLarge(byteCount: payload.count) }
        let o = try PayloadObject(parsing: payload)
        try o.requireVersion()
        let id = try o.vehicle(topic: vehicle)
        guard let value = o["events"] else { throw .missingKey("events") }
        guard case .array(let ranges) = value else { throw .wrongType(key: "events", expected: "an array") }
        guard ranges.count <= maximumBacklogEvents else {
            throw .invalidValue(key: "events", detail: "has more than \(maximumBacklogEvents) events")
        }
        var events: [BacklogEvent] = []
        events.reserveCapacity(ranges.count)
        var refused: [(index: Int, error: DecodingError)] = []
        for (index, range) in ranges.enumerated() {
            let element = Array(payload[range])
            do throws(DecodingError) {
                let kind = try PayloadObject(parsing: element).string("kind", maxBytes: 16)
                switch kind {
                case "fix": events.append(.fix(try decodeFix(element, vehicle: id)))
                case "heading": events.append(.heading(try decodeHeading(element, vehicle: id)))
                case nil: throw .missingKey("kind")
                default: throw .invalidValue(key: "kind", detail: "is not fix or heading")
                }
            } catch {
                refused.append((index, error))
            }
        }
        return DecodedBacklog(vehicle: id, events: events, refused: refused)
    }
}
