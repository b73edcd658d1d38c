import JSONEscaping

/// A broker address parsed from `mqtt[s]://[user@]host[:port]`.
///
/// `mqtt` means plain TCP (default port 1883), `mqtts` TLS (default port 8883). IPv6 literals
/// go in brackets (`mqtt://[::1]:1883`). A password in the URL is refused: URLs end up on
/// command lines and in logs; give the password as a value in ``MQTTConfiguration``.
public struct BrokerURL: Sendable, Hashable, CustomStringConvertible {
    /// The host name or IP address (without brackets).
    public var host: String
    /// The TCP port.
    public var port: Int
    /// True for `mqtts://`: connect with TLS and verify the server's certificate and name.
    public var usesTLS: Bool
    /// The user name given in the URL, if any.
    public var username: String?

    /// Creates a broker address from parts.
    public init(host: String, port: Int? = nil, usesTLS: Bool = false, username: String? = nil) {
        self.host = host
        self.port = port ?? (usesTLS ? 8883 : 1883)
        self.usesTLS = usesTLS
        self.username = username
    }

    /// Parses `mqtt[s]://[user@]host[:port]`; throws ``MQTTError/invalidBrokerURL(_:reason:)``
    /// saying what is wrong.
    public init(parsing text: String) throws(MQTTError) {
        func fail(_ reason: String) -> MQTTError { .invalidBrokerURL(Self.redactingPassword(text), reason: reason) }
        let parts = text.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else {
            throw fail("expected mqtt://host[:port] or mqtts://host[:port]")
        }
        let scheme = parts[0].lowercased()
        switch scheme {
        case "mqtt", "tcp": usesTLS = false
        case "mqtts", "ssl", "tls": usesTLS = true
        default: throw fail("unsupported scheme '\(scheme)' (use mqtt or mqtts)")
        }
        var rest = parts[1]
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        if rest.contains("/") || rest.contains("?") || rest.contains("#") {
            throw fail("a broker URL has no path, query or fragment")
        }
        username = nil
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            if userInfo.contains(":") {
                throw fail("a password does not belong in the URL; give it as a value (file or environment)")
            }
            if userInfo.isEmpty { throw fail("empty user name before '@'") }
            username = String(userInfo)
            rest = rest[rest.index(after: at)...]
        }
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw fail("unclosed '[' in IPv6 address") }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw fail("unexpected text after ']'") }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            portText = rest[rest.index(after: colon)...]
        } else {
            host = String(rest)
        }
        if host.isEmpty { throw fail("missing host") }
        if let portText {
            guard let value = Int(portText), (1...65535).contains(value) else {
                throw fail("port '\(portText)' is not a number in 1...65535")
            }
            port = value
        } else {
            port = usesTLS ? 8883 : 1883
        }
    }

    /// `text` (a URL, maybe not a valid one) fit to be shown: a password written into its user
    /// information (`scheme://user:password@host`) replaced by `<redacted>`, and any control
    /// character escaped. For error messages and logs, which must never carry a secret.
    public static func redactingPassword(_ text: String) -> String {
        var shown = text
        // The user information ends at the last "@"; it starts after "://", or after the
        // first "/" run of a mangled scheme (`mqtt:/u:p@h`), or at the start (`u:p@h`).
        let start = shown.firstRange(of: "://")?.upperBound ?? shown.firstIndex(of: "/").map { shown.index(after: $0) } ?? shown.startIndex
        if let at = shown[start...].lastIndex(of: "@") {
            let userInfoStart = shown[start..<at].lastIndex(of: "/").map { shown.index(after: $0) } ?? start
            if let colon = shown[userInfoStart..<at].firstIndex(of: ":") {
                shown.replaceSubrange(shown.index(after: colon)..<at, with: "<redacted>")
            }
        }
        return JSONString.escaped(shown)
    }

    /// `mqtt[s]://[user@]host:port`.
    public var description: String {
        let user = username.map { "\($0)@" } ?? ""
        let hostPart = host.contains(":") ? "[\(host)]" : host
        return "\(usesTLS ? "mqtts" : "mqtt")://\(user)\(hostPart):\(port)"
    }
}
