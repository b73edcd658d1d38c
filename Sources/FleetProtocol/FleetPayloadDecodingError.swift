extension FleetPayload {
    /// Why a received payload is not a valid contract message. Its ``description`` is a short
    /// reason for logs and fleet-watch's `malformed` events; it never quotes more than a few
    /// dozen bytes of the payload.
    public enum DecodingError: Error, Sendable, Equatable, CustomStringConvertible {
        /// The payload is larger than ``FleetPayload/maximumPayloadBytes``.
        case tooLarge(byteCount: Int)
        /// The payload is not one JSON object (syntax, invalid UTF-8, duplicate key…).
        case invalidJSON(String)
        /// A key the contract requires is absent.
        case missingKey(String)
        /// A key has a value of the wrong JSON type (`expected` names the type).
        case wrongType(key: String, expected: String)
        /// The `"v"` key names a contract version this decoder does not read.
        case unsupportedVersion(UInt64)
        /// The payload's `"vehicle"` differs from the vehicle of its topic (or is not a valid id).
        case vehicleMismatch(topic: String, payload: String)
        /// A number is non-finite or outside the range its key allows, or a text value is not
        /// one the contract defines (`detail` says what is allowed).
        case invalidValue(key: String, detail: String)

        public var description: String {
            switch self {
            case .tooLarge(let n): "payload of \(n) bytes exceeds \(FleetPayload.maximumPayloadBytes) bytes"
            case .invalidJSON(let why): "invalid JSON: \(why)"
            case .missingKey(let key): "missing key \"\(key)\""
            case .wrongType(let key, let expected): "key \"\(key)\" is not \(expected)"
            case .unsupportedVersion(let v): "unsupported contract version \(v) (expected \(FleetPayload.version))"
            case .vehicleMismatch(let topic, let payload):
                "vehicle \"\(payload.prefix(64))\" in payload differs from topic vehicle \"\(topic)\""
            case .invalidValue(let key, let detail): "key \"\(key)\" \(detail)"
            }
        }
    }
}
