/// Where the MQTT broker is: `mqtt://[user@]host[:port]` (plain, port 1883 by default) or
/// `mqtts://[user@]host[:port]` (TLS, port 8883). IPv6 hosts go in brackets
/// (`mqtt://[::1]:1883`). A password is never part of it (see `broker.passwordFile`).
public struct BrokerURL: Sendable, Equatable, CustomStringConvertible {
    /// Whether the connection uses TLS (`mqtts`).
    public let usesTLS: Bool
    /// The host name or address (IPv6 without brackets).
    public let host: String
    /// The TCP port.
    public let port: Int
    /// The user name given in the URL, if any.
    public let username: String?

    /// The accepted form, for error messages.
    public static let expectedForm = "mqtt://[user@]host[:port] or mqtts://[user@]host[:port] (no password, no path)"

    /// Parses the text; `nil` when it is not of the accepted form.
    public init?(_ text: String) {
        let scheme: Substring
        guard let separator = text.range(of: "://") else { return nil }
        scheme = text[..<separator.lowerBound]
        switch scheme.lowercased() {
        case "mqtt": usesTLS = false
        case "mqtts": usesTLS = true
        default: return nil
        }
        var rest = text[separator.upperBound...]
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.isEmpty, !rest.contains("/"), !rest.contains("?"), !rest.contains("#") else { return nil }
        if let at = rest.lastIndex(of: "@") {
            let user = rest[..<at]
            guard !user.isEmpty, !user.contains(":"), !user.contains("@") else { return nil }
            username = String(user)
            rest = rest[rest.index(after: at)...]
        } else {
            username = nil
        }
        var hostPart: Substring
        var portPart: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return nil }
            hostPart = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portPart = after.dropFirst()
            }
            guard hostPart.contains(":") else { return nil }
        } else {
            if let colon = rest.firstIndex(of: ":") {
                hostPart = rest[..<colon]
                portPart = rest[rest.index(after: colon)...]
            } else {
                hostPart = rest
            }
            guard hostPart.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_" }) else { return nil }
        }
        guard !hostPart.isEmpty, hostPart.utf8.count <= 253 else { return nil }
        host = String(hostPart)
        if let portPart {
            guard let value = Int(portPart), (1...65535).contains(value) else { return nil }
            port = value
        } else {
            port = usesTLS ? 8883 : 1883
        }
    }

    /// The URL in canonical form (user included, never a password).
    public var description: String {
        let hostText = host.contains(":") ? "[\(host)]" : host
        return "\(usesTLS ? "mqtts" : "mqtt")://\(username.map { "\($0)@" } ?? "")\(hostText):\(port)"
    }
}
