import FleetProtocol
import FleetcastCore
import GNSS
import JSONEscaping

/// Formats single ``FleetEvent``s for fleet-watch's line outputs: JSON lines (`--json`) and
/// plain text lines (stdout not a terminal).
public struct FleetEventFormatter: Sendable {
    /// The topic layout, to name the vehicle of a malformed message where its topic shows it.
    public let topics: FleetTopics

    /// A formatter for the given layout.
    public init(topics: FleetTopics = .default) {
        self.topics = topics
    }

    /// One JSON object, without a newline: the contract payload with `"kind"` (`fix`,
    /// `heading`, `status`) and `"vehicle"`; for a backlog entry the same with `"backlog":true`
    /// after `"kind"` (`{"kind":"fix","backlog":true,"v":1,"vehicle":…,"seq":…}`); or for a malformed message
    /// `{"kind":"malformed","vehicle":…,"topic":…,"reason":…}` (`vehicle` only when the topic
    /// names one).
    public func jsonLine(_ event: FleetEvent) -> String {
        let bytes: [UInt8]
        switch event {
        case .fix(let vehicle, let seq, let fix):
            bytes = FleetPayload.encode(fix, vehicle: vehicle.rawValue, seq: seq?.seq, run: seq?.run ?? 0, includeKind: true)
        case .heading(let vehicle, let seq, let heading):
            bytes = FleetPayload.encode(heading, vehicle: vehicle.rawValue, seq: seq?.seq, run: seq?.run ?? 0, includeKind: true)
        case .status(let status):
            bytes = FleetPayload.encode(status, includeKind: true)
        case .backlog(let entry):
            let payload: [UInt8]
            switch entry {
            case .fix(let d): payload = FleetPayload.encode(d.fix, vehicle: d.vehicle.rawValue, seq: d.seq, run: d.run)
            case .heading(let d): payload = FleetPayload.encode(d.heading, vehicle: d.vehicle.rawValue, seq: d.seq, run: d.run)
            }
            // `{"v":1,…}` → `{"kind":"fix","backlog":true,"v":1,…}`
            var spliced = Array(#"{"kind":""#.utf8)
            spliced.append(contentsOf: event.kind.rawValue.utf8)
            spliced.append(contentsOf: #"","backlog":true,"#.utf8)
            spliced.append(contentsOf: payload.dropFirst())
            bytes = spliced
        case .malformed(let topic, let reason):
            var text = #"{"kind":"malformed""#
            if let vehicle = topics.parse(topic)?.vehicle {
                text += #","vehicle":"# + JSONString.quoted(vehicle.rawValue)
            }
            text += #","topic":"# + JSONString.quoted(topic) + #","reason":"# + JSONString.quoted(reason) + "}"
            return text
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// One human-readable line, e.g.
    /// `fix van-7 seq=42 2020-03-18T13:28:19.600Z lat=41.574966 lon=-93.750572 speed=0.3km/h track=124.9 sats=10 mode=3D`;
    /// a backlog entry is the same line after the word `backlog`
    /// (`backlog fix van-7 seq=41 …`, `backlog heading van-7 …`).
    public func plainLine(_ event: FleetEvent) -> String {
        switch event {
        case .backlog(.fix(let d)):
            return "backlog " + plainLine(.fix(d.vehicle, seq: d.number, d.fix))
        case .backlog(.heading(let d)):
            return "backlog " + plainLine(.heading(d.vehicle, seq: d.number, d.heading))
        case .fix(let vehicle, let seq, let fix):
            var parts = ["fix", vehicle.rawValue]
            if let seq { parts.append(contentsOf: Self.numberParts(seq)) }
            parts.append(fix.time.iso8601)
            parts.append("lat=\(FleetTable.fixed(fix.latitude, 6))")
            parts.append("lon=\(FleetTable.fixed(fix.longitude, 6))")
            if let speed = fix.speed { parts.append("speed=\(FleetTable.fixed(speed * 3.6, 1))km/h") }
            if let track = fix.track { parts.append("track=\(FleetTable.fixed(track, 1))") }
            if let t = fix.heading?.trueHeading { parts.append("heading=\(FleetTable.fixed(t, 1))") }
            if let m = fix.heading?.magneticHeading { parts.append("magHeading=\(FleetTable.fixed(m, 1))") }
            if let sats = fix.satellitesUsed { parts.append("sats=\(sats)") }
            parts.append("mode=\(fix.mode == .threeD ? "3D" : "2D")")
            return parts.joined(separator: " ")
        case .heading(let vehicle, let seq, let heading):
            var parts = ["heading", vehicle.rawValue]
            if let seq { parts.append(contentsOf: Self.numberParts(seq)) }
            if let time = heading.time { parts.append(time.iso8601) }
            if let t = heading.trueHeading { parts.append("heading=\(FleetTable.fixed(t, 1))") }
            if let m = heading.magneticHeading { parts.append("magHeading=\(FleetTable.fixed(m, 1))") }
            parts.append("source=\(heading.source.rawValue)")
            return parts.joined(separator: " ")
        case .status(let status):
            var parts = ["status", status.vehicle.rawValue, status.state.rawValue]
            if let gnss = status.gnss { parts.append("gnss=\(gnss.rawValue)") }
            if let reason = status.reason { parts.append("reason=\(JSONString.quoted(reason))") }
            return parts.joined(separator: " ")
        case .malformed(let topic, let reason):
            return "malformed \(JSONString.quoted(topic)) \(JSONString.escaped(reason))"
        }
    }

    /// `seq=42`, and `run=…` after it when the number is not of run 0.
    private static func numberParts(_ number: MessageNumber) -> [String] {
        number.run == 0 ? ["seq=\(number.seq)"] : ["seq=\(number.seq)", "run=\(number.run)"]
    }
}
