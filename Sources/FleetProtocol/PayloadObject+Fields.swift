import GNSS

/// Typed, range-checked reads of contract keys. Each throws a ``FleetPayload/DecodingError``
/// naming the key; optional reads return `nil` only when the key is absent (a `null` value is
/// refused: the contract leaves unknown values out rather than sending `null`).
extension PayloadObject {
    func requireVersion() throws(FleetPayload.DecodingError) {
        guard let v = try unsigned("v") else { throw .missingKey("v") }
        guard v == UInt64(FleetPayload.version) else { throw .unsupportedVersion(v) }
    }

    /// The vehicle of the message: the topic's, checked against the payload's `"vehicle"`.
    func vehicle(topic: VehicleID?) throws(FleetPayload.DecodingError) -> VehicleID {
        let inPayload = try string("vehicle")
        switch (topic, inPayload) {
        case (let topic?, nil):
            return topic
        case (let topic?, let text?):
            guard text == topic.rawValue else { throw .vehicleMismatch(topic: topic.rawValue, payload: text) }
            return topic
        case (nil, let text?):
            guard let id = VehicleID(text) else {
                throw .invalidValue(key: "vehicle", detail: "is not a valid vehicle id")
            }
            return id
        case (nil, nil):
            throw .missingKey("vehicle")
        }
    }

    func string(_ key: StaticString, maxBytes: Int = 256) throws(FleetPayload.DecodingError) -> String? {
        guard let value = self[key] else { return nil }
        guard case .string(let s) = value else { throw .wrongType(key: key.description, expected: "a string") }
        guard s.utf8.count <= maxBytes else { throw .invalidValue(key: key.description, detail: "is longer than \(maxBytes) bytes") }
        return s
    }

    func number(_ key: StaticString, in range: ClosedRange<Double>? = nil) throws(FleetPayload.DecodingError) -> Double? {
        guard let value = self[key] else { return nil }
        guard case .number(let d, _, _) = value else { throw .wrongType(key: key.description, expected: "a number") }
        guard d.isFinite else { throw .invalidValue(key: key.description, detail: "is not finite") }
        if let range, !range.contains(d) {
            throw .invalidValue(
                key: key.description, detail: "is outside \(Self.format(range.lowerBound))...\(Self.format(range.upperBound))")
        }
        return d
    }

    func requiredNumber(_ key: StaticString, in range: ClosedRange<Double>) throws(FleetPayload.DecodingError) -> Double {
        guard let d = try number(key, in: range) else { throw .missingKey(key.description) }
        return d
    }

    func unsigned(_ key: StaticString) throws(FleetPayload.DecodingError) -> UInt64? {
        guard let value = self[key] else { return nil }
        guard case .number(_, let integer, let negative) = value else { throw .wrongType(key: key.description, expected: "an integer") }
        guard let integer else { throw .wrongType(key: key.description, expected: "an integer") }
        guard !negative || integer == 0 else { throw .invalidValue(key: key.description, detail: "is negative") }
        return integer
    }

    func int(_ key: StaticString, in range: ClosedRange<Int>) throws(FleetPayload.DecodingError) -> Int? {
        guard let u = try unsigned(key) else { return nil }
        guard u <= UInt64(range.upperBound), range.contains(Int(u)) else {
            throw .invalidValue(key: key.description, detail: "is outside \(range.lowerBound)...\(range.upperBound)")
        }
        return Int(u)
    }

    func time(_ key: StaticString) throws(FleetPayload.DecodingError) -> UTCTimestamp? {
        guard let text = try string(key, maxBytes: 40) else { return nil }
        guard let t = UTCTimestamp(iso8601: text) else {
            throw .invalidValue(key: key.description, detail: "is not an ISO 8601 UTC time (YYYY-MM-DDTHH:MM:SS.sssZ)")
        }
        return t
    }

    private static func format(_ d: Double) -> String {
        d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
    }
}
