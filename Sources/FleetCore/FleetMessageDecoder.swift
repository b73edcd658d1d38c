import FleetProtocol
import GNSS

/// Turns one received MQTT message (topic and payload bytes) into ``FleetEvent``s.
///
/// Pure and synchronous: no I/O; its clock (the consumer's, ``FleetPlausibility``'s `now`)
/// is a function it is given, read once per message. Anything that does not fit the contract — a topic
/// outside the layout, a payload the ``FleetPayload`` decoders refuse — becomes
/// ``FleetEvent/malformed(topic:reason:)``; nothing throws. A `backlog` batch becomes one
/// ``FleetEvent/backlog(_:)`` per entry, in the batch's order, with one `malformed` event in
/// place of each entry that does not decode (its reason names the entry's index): a bad entry
/// never costs the good ones. A `batch` (a vehicle gathering current fixes on a metered link)
/// is decoded the same way, but its entries are live events: ``FleetEvent/fix(_:seq:_:)`` and
/// ``FleetEvent/heading(_:seq:_:)``, as if each had come on its own topic; it is JSON or, from
/// a vehicle with `uplink.encoding: compact`, ``FleetPayload/decodeCompactBatch(_:vehicle:)``'s layout.
public struct FleetMessageDecoder: Sendable {
    /// The longest part of a bad topic kept in a `malformed` event, in UTF-8 bytes.
    public static let maximumTopicBytesKept = 200

    /// The topic layout messages are expected in.
    public let topics: FleetTopics

    /// The consumer's clock, read once per message: an event timed, or numbered, more than
    /// ``FleetPlausibility/maximumLeadMilliseconds`` ahead of it is refused.
    public let clock: @Sendable () -> UTCTimestamp

    /// A decoder for the given layout (default prefix `fleet`), judging against `clock`
    /// (this machine's wall clock by default; tests pass a virtual one).
    public init(topics: FleetTopics = .default, clock: @escaping @Sendable () -> UTCTimestamp = { .wallClockNow }) {
        self.topics = topics
        self.clock = clock
    }

    /// Decodes one message and hands its events to `body`, in order: exactly one for a `fix`,
    /// `heading` or `status` message or a malformed one; one per entry of a `backlog` or
    /// `batch` message (none for an empty one). No array is allocated for a single event.
    public func decode(topic: String, payload: [UInt8], _ body: (FleetEvent) -> Void) {
        guard let (vehicle, channel) = topics.parse(topic) else {
            if topics.isCheck(topic) { return }  // `fleetcast-agent check`'s message: no event
            body(
                .malformed(
                    topic: Self.clipped(topic), reason: "topic does not match \(topics.prefix)/{vehicle}/{fix|heading|status|backlog|batch}"
                ))
            return
        }
        guard channel == .backlog || channel == .batch else {
            body(Self.singleEvent(channel, vehicle: vehicle, topic: topic, payload: payload, now: clock()))
            return
        }
        let batch: FleetPayload.DecodedBacklog
        do {
            batch =
                channel == .batch
                ? try FleetPayload.decodeBatch(payload, vehicle: vehicle) : try FleetPayload.decodeBacklog(payload, vehicle: vehicle)
        } catch {
            body(.malformed(topic: topic, reason: error.description))
            return
        }
        // Refused whole, and cheaply: nothing of it reaches a consumer (FleetPlausibility).
        if let problem = FleetPlausibility.batchProblem(batch.events) {
            body(.malformed(topic: topic, reason: "implausible \(channel.rawValue): \(problem)"))
            return
        }
        Self.splice(batch, topic: topic, live: channel == .batch, now: clock(), body)
    }

    /// The event of a single-event message (`fix`, `heading`, `status`).
    private static func singleEvent(
        _ channel: FleetTopics.Channel, vehicle: VehicleID, topic: String, payload: [UInt8], now: UTCTimestamp
    ) -> FleetEvent {
        do {
            switch channel {
            case .fix:
                let d = try FleetPayload.decodeFix(payload, vehicle: vehicle)
                if let problem = FleetPlausibility.numberProblem(d.number, time: d.fix.time, now: now) {
                    return .malformed(topic: topic, reason: "implausible fix: \(problem)")
                }
                return .fix(d.vehicle, seq: d.number, d.fix)
            case .heading:
                let d = try FleetPayload.decodeHeading(payload, vehicle: vehicle)
                if let problem = FleetPlausibility.numberProblem(d.number, time: d.heading.time, now: now) {
                    return .malformed(topic: topic, reason: "implausible heading: \(problem)")
                }
                return .heading(d.vehicle, seq: d.number, d.heading)
            case .status:
                return .status(try FleetPayload.decodeStatus(payload, vehicle: vehicle))
            case .backlog, .batch:
                return .malformed(topic: topic, reason: "a \(channel.rawValue) message is not a single event")
            }
        } catch {
            return .malformed(topic: topic, reason: error.description)
        }
    }

    /// The events of one message (see ``decode(topic:payload:_:)``).
    public func events(topic: String, payload: [UInt8]) -> [FleetEvent] {
        var events: [FleetEvent] = []
        decode(topic: topic, payload: payload) { events.append($0) }
        return events
    }

    /// The batch's good entries and its refused ones, back in the batch's order; `live`: as
    /// live events (a `batch` message) rather than backlog ones.
    private static func splice(
        _ batch: FleetPayload.DecodedBacklog, topic: String, live: Bool, now: UTCTimestamp, _ body: (FleetEvent) -> Void
    ) {
        var good = batch.events.makeIterator()
        var refused = batch.refused.makeIterator()
        var nextRefused = refused.next()
        for index in 0..<(batch.events.count + batch.refused.count) {
            if let r = nextRefused, r.index == index {
                body(.malformed(topic: topic, reason: "\(live ? "batch" : "backlog") event \(index): \(r.error.description)"))
                nextRefused = refused.next()
            } else if let event = good.next() {
                let time: UTCTimestamp? =
                    switch event {
                    case .fix(let f): f.fix.time
                    case .heading(let h): h.heading.time
                    }
                if let problem = FleetPlausibility.numberProblem(event.number, time: time, now: now) {
                    body(.malformed(topic: topic, reason: "\(live ? "batch" : "backlog") event \(index): implausible: \(problem)"))
                    continue
                }
                switch (live, event) {
                case (false, _): body(.backlog(event))
                case (true, .fix(let d)): body(.fix(d.vehicle, seq: d.number, d.fix))
                case (true, .heading(let d)): body(.heading(d.vehicle, seq: d.number, d.heading))
                }
            }
        }
    }

    package static func clipped(_ topic: String) -> String {
        let utf8 = topic.utf8
        guard utf8.count > maximumTopicBytesKept else { return topic }
        // Cut at a character boundary: a cut inside a multi-byte character would decode as
        // U+FFFD (3 bytes) and keep more than the limit.
        var end = utf8.index(utf8.startIndex, offsetBy: maximumTopicBytesKept)
        while end > utf8.startIndex, UTF8.isContinuation(utf8[end]) {
            end = utf8.index(before: end)
        }
        return String(decoding: utf8[..<end], as: UTF8.self) + "…"
    }
}
