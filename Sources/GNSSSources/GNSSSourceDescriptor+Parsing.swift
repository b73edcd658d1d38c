extension GNSSSourceDescriptor {
    /// The forms ``init(parsing:)`` accepts, for error messages and help texts.
    public static let uriForms =
        "serial:PATH?baud=N, gpsd://HOST[:PORT][?device=PATH], replay:PATH[?speed=N|max&loop=true], "
        + "sim:[?rate=HZ&speed=M_PER_S&lat=DEG&lon=DEG&timeScale=N]"

    /// Parses a source URI; throws a ``SourceURIError`` naming the bad part and the expected form.
    public init(parsing uri: String) throws(SourceURIError) {
        guard let colon = uri.firstIndex(of: ":") else {
            throw SourceURIError(uri: uri, part: "scheme", value: uri, expected: "one of \(Self.uriForms)")
        }
        let scheme = uri[..<colon].lowercased()
        let rest = uri[uri.index(after: colon)...]
        let (body, query) = try Self.splitQuery(rest, uri: uri)
        switch scheme {
        case "serial":
            try Self.allowOnly(["baud"], in: query, uri: uri)
            let path = Self.stripSlashes(body)
            guard path.hasPrefix("/") else {
                throw SourceURIError(
                    uri: uri, part: "path", value: String(body), expected: "an absolute device path, as in serial:/dev/ttyUSB0?baud=9600")
            }
            var baud = Self.defaultBaudRate
            if let text = query["baud"] {
                guard let b = Int(text), Self.standardBaudRates.contains(b) else {
                    throw SourceURIError(
                        uri: uri, part: "baud", value: text,
                        expected: "one of " + Self.standardBaudRates.map(String.init).joined(separator: ", "))
                }
                baud = b
            }
            self = .serial(path: path, baud: baud)
        case "gpsd":
            try Self.allowOnly(["device"], in: query, uri: uri)
            guard body.hasPrefix("//") else {
                throw SourceURIError(uri: uri, part: "address", value: String(body), expected: "gpsd://HOST[:PORT][?device=PATH]")
            }
            let (host, port) = try Self.hostPort(body.dropFirst(2), uri: uri)
            if let device = query["device"], !device.hasPrefix("/") {
                throw SourceURIError(
                    uri: uri, part: "device", value: device, expected: "an absolute device path, as in ?device=/dev/ttyACM0")
            }
            self = .gpsd(host: host, port: port, device: query["device"])
        case "replay":
            try Self.allowOnly(["speed", "loop"], in: query, uri: uri)
            let path = Self.stripSlashes(body)
            guard !path.isEmpty else {
                throw SourceURIError(uri: uri, part: "path", value: "", expected: "a file path, as in replay:drive.nmea?speed=max")
            }
            var speed = ReplaySpeed.factor(1)
            if let text = query["speed"] {
                if text == "max" {
                    speed = .max
                } else if let f = Double(text), f.isFinite, f > 0 {
                    speed = .factor(f)
                } else {
                    throw SourceURIError(uri: uri, part: "speed", value: text, expected: "a positive number (1 = real time) or max")
                }
            }
            let loop = try Self.bool(query["loop"], part: "loop", uri: uri) ?? false
            self = .replay(path: path, speed: speed, loop: loop)
        case "sim":
            try Self.allowOnly(["rate", "speed", "lat", "lon", "timeScale"], in: query, uri: uri)
            guard body.isEmpty || body == "//" else {
                throw SourceURIError(
                    uri: uri, part: "simulator", value: String(body), expected: "sim:[?rate=HZ&speed=M_PER_S&lat=DEG&lon=DEG&timeScale=N]")
            }
            var options = SimulatorOptions()
            if let text = query["rate"] {
                guard let r = Int(text), (1...10).contains(r) else {
                    throw SourceURIError(uri: uri, part: "rate", value: text, expected: "a whole number of fixes per second, 1...10")
                }
                options.rateHz = r
            }
            if let text = query["speed"] {
                guard let s = Double(text), s.isFinite, (0...100).contains(s) else {
                    throw SourceURIError(uri: uri, part: "speed", value: text, expected: "a cruising speed in m/s, 0...100")
                }
                options.cruiseSpeed = s
            }
            if let text = query["lat"] {
                guard let v = Double(text), v.isFinite, (-85...85).contains(v) else {
                    throw SourceURIError(uri: uri, part: "lat", value: text, expected: "a latitude in degrees, -85...85")
                }
                options.latitude = v
            }
            if let text = query["lon"] {
                guard let v = Double(text), v.isFinite, (-180...180).contains(v) else {
                    throw SourceURIError(uri: uri, part: "lon", value: text, expected: "a longitude in degrees, -180...180")
                }
                options.longitude = v
            }
            if let text = query["timeScale"] {
                guard let n = Int(text), (1...100).contains(n) else {
                    throw SourceURIError(
                        uri: uri, part: "timeScale", value: text, expected: "how many times faster than real time, 1...100")
                }
                options.timeScale = n
            }
            self = .simulator(options)
        default:
            throw SourceURIError(
                uri: uri, part: "scheme", value: String(scheme), expected: "one of serial:, gpsd://, replay:, sim: (\(Self.uriForms))")
        }
    }

    private static func splitQuery(_ rest: Substring, uri: String) throws(SourceURIError) -> (Substring, [String: String]) {
        guard let q = rest.firstIndex(of: "?") else { return (rest, [:]) }
        var query: [String: String] = [:]
        for pair in rest[rest.index(after: q)...].split(separator: "&", omittingEmptySubsequences: true) {
            guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else {
                throw SourceURIError(uri: uri, part: "query parameter", value: String(pair), expected: "NAME=VALUE pairs joined by &")
            }
            let key = String(pair[..<eq]), value = String(pair[pair.index(after: eq)...])
            guard query[key] == nil else {
                throw SourceURIError(uri: uri, part: "query parameter", value: key, expected: "each parameter at most once")
            }
            query[key] = value
        }
        return (rest[..<q], query)
    }

    private static func allowOnly(_ keys: [String], in query: [String: String], uri: String) throws(SourceURIError) {
        for key in query.keys.sorted() where !keys.contains(key) {
            throw SourceURIError(uri: uri, part: "query parameter", value: key, expected: "one of " + keys.joined(separator: ", "))
        }
    }

    private static func bool(_ text: String?, part: String, uri: String) throws(SourceURIError) -> Bool? {
        switch text {
        case nil: return nil
        case "true", "1", "yes": return true
        case "false", "0", "no": return false
        case let other?: throw SourceURIError(uri: uri, part: part, value: other, expected: "true or false")
        }
    }

    /// `serial:///dev/x` and `replay:///tmp/x` are the same as `serial:/dev/x`.
    private static func stripSlashes(_ body: Substring) -> String {
        body.hasPrefix("///") ? String(body.dropFirst(2)) : String(body)
    }

    private static func hostPort(_ authority: Substring, uri: String) throws(SourceURIError) -> (String, Int) {
        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else {
                throw SourceURIError(
                    uri: uri, part: "host", value: String(authority), expected: "an IPv6 address in brackets, as in gpsd://[::1]:2947")
            }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else {
                    throw SourceURIError(uri: uri, part: "port", value: String(after), expected: ":PORT after the host")
                }
                portText = after.dropFirst()
            }
        } else if let c = authority.firstIndex(of: ":") {
            host = authority[..<c]
            portText = authority[authority.index(after: c)...]
        } else {
            host = authority
        }
        if host.hasSuffix("/") { host = host.dropLast() }
        if host.isEmpty { host = "localhost" }
        guard !host.contains("/") else {
            throw SourceURIError(
                uri: uri, part: "host", value: String(host), expected: "a host name or address, as in gpsd://localhost:2947")
        }
        var port = defaultGPSDPort
        if var text = portText {
            if text.hasSuffix("/") { text = text.dropLast() }
            guard let p = Int(text), (1...65535).contains(p) else {
                throw SourceURIError(uri: uri, part: "port", value: String(text), expected: "a TCP port number, 1...65535")
            }
            port = p
        }
        return (String(host), port)
    }
}
