import FleetProtocol

/// Turns one received MQTT message (topic and payload bytes) into a ``FleetEvent``.
///
/// Pure and synchronous: no I/O, no clock. Anything that does not fit the contract — a topic
/// outside the layout, a payload the ``FleetPayload`` decoders refuse — becomes
/// ``FleetEvent/malformed(topic:reason:)``; nothing throws.
public struct FleetMessageDecoder: Sendable {
    /// The longest part of a bad topic kept in a `malformed` event, in UTF-8 bytes.
    public static let maximumTopicBytesKept = 200

    /// The topic layout messages are expected in.
    public let topics: FleetTopics

    /// A decoder for the given layout (default prefix `fleet`).
    public init(topics: FleetTopics = .default) {
        self.topics = topics
    }

    /// Decodes one message.
    public func event(topic: String, payload: [UInt8]) -> FleetEvent {
        guard let (vehicle, channel) = topics.parse(topic) else {
            return .malformed(topic: Self.clipped(topic), reason: "topic does not match \(topics.prefix)/{vehicle}/{fix|heading|status}")
        }
        do {
            switch channel {
            case .fix:
                let d = try FleetPayload.decodeFix(payload, vehicle: vehicle)
                return .fix(d.vehicle, seq: d.seq, d.fix)
            case .heading:
                let d = try FleetPayload.decodeHeading(payload, vehicle: vehicle)
                return .heading(d.vehicle, seq: d.seq, d.heading)
            case .status:
                return .status(try FleetPayload.decodeStatus(payload, vehicle: vehicle))
            case .backlog:
                // Decoded by the backlog-aware fleet-watch (in progress); until then counted.
                _ = try FleetPayload.decodeBacklog(payload, vehicle: vehicle)
                return .malformed(topic: topic, reason: "backlog batches are not shown yet")
            }
        } catch {
            return .malformed(topic: topic, reason: error.description)
        }
    }

    static func clipped(_ topic: String) -> String {
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
