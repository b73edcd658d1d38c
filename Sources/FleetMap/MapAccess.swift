import FleetcastCore
import HTTPTypes
import Hummingbird
import HummingbirdAuth
import HummingbirdBasicAuth
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Who may use the live map: the Host names it answers to, and the credentials it asks for.
///
/// The map shows where every vehicle is, and with a track history where each has been for a
/// month. Two things keep it from leaking:
///
/// - **The Host allow-list** defeats DNS rebinding: a page on any site a dispatcher visits can
///   point its own name at 127.0.0.1 and have the browser read the map, but the browser then
///   sends that site's name as `Host`. A request is answered only when its `Host` is an IP
///   address (a rebinding page cannot make the browser send one), `localhost`, the name the
///   server listens on, or one of ``allowedHosts``; anything else gets 421 (Misdirected Request).
/// - **Authentication**, when configured: HTTP basic authentication against bcrypt hashes in
///   htpasswd's format (what a browser asks for by itself, and sends again with each request,
///   `EventSource` included), and bearer tokens (for scripts and monitoring). Every route asks,
///   the page and Leaflet included. Without either, anyone who reaches the port sees the fleet:
///   keep the server on loopback or behind an authenticating proxy.
public struct MapAccess: Sendable {
    /// Host names answered besides IP addresses, `localhost` and the listen address's own name,
    /// lowercased, without a port.
    public var allowedHosts: Set<String>
    /// User names and their bcrypt hashes (`$2a$`, `$2b$` or `$2y$`), as in an htpasswd file.
    public var users: [String: String]
    /// Bearer tokens accepted in `Authorization: Bearer …`.
    public var tokens: [String]

    /// No extra host names and no authentication.
    public init(allowedHosts: Set<String> = [], users: [String: String] = [:], tokens: [String] = []) {
        self.allowedHosts = Set(allowedHosts.map { $0.lowercased() })
        self.users = users
        self.tokens = tokens
    }

    /// Whether requests must authenticate.
    public var requiresAuthentication: Bool { !users.isEmpty || !tokens.isEmpty }

    /// The shortest bearer token accepted: a guessable one is a password with no hash.
    public static let minimumTokenLength = 16

    /// An unusable credentials file, named with the line at fault (never its content).
    public struct InvalidCredentials: Error, Sendable, Equatable, CustomStringConvertible {
        /// What is wrong, and where.
        public let description: String
    }

    /// Users from an htpasswd file's text: `name:hash` lines, the hash bcrypt (`htpasswd -B`);
    /// blank lines and `#` comments are skipped. Anything else is refused (MD5 and SHA-1 hashes
    /// too: they are fast to guess).
    public static func users(htpasswd text: String, file: String) throws(InvalidCredentials) -> [String: String] {
        var users: [String: String] = [:]
        for (number, line) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            if line.allSatisfy({ $0 == " " || $0 == "\t" }) || line.hasPrefix("#") { continue }
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
                throw InvalidCredentials(description: "\(file), line \(number + 1): not name:hash")
            }
            let hash = line[line.index(after: colon)...]
            guard ["$2a$", "$2b$", "$2y$"].contains(where: { hash.hasPrefix($0) }), hash.utf8.count == 60 else {
                throw InvalidCredentials(
                    description: "\(file), line \(number + 1): not a bcrypt hash (create the file with htpasswd -B)")
            }
            // htpasswd -B writes `$2y$`, the same algorithm as `$2b$` (PHP's name for the fixed
            // crypt_blowfish), which OpenBSD's bcrypt that hummingbird-auth carries knows by `$2b$`.
            users[String(line[..<colon])] = hash.hasPrefix("$2y$") ? "$2b$" + hash.dropFirst(4) : String(hash)
        }
        guard !users.isEmpty else { throw InvalidCredentials(description: "\(file): no user") }
        return users
    }

    /// Bearer tokens from a file's text: one a line; blank lines and `#` comments skipped; each
    /// at least ``minimumTokenLength`` characters of visible ASCII.
    public static func tokens(text: String, file: String) throws(InvalidCredentials) -> [String] {
        var tokens: [String] = []
        for (number, line) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let token = line.trimmingWhitespace
            if token.isEmpty || token.hasPrefix("#") { continue }
            guard token.utf8.count >= minimumTokenLength, token.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw InvalidCredentials(
                    description:
                        "\(file), line \(number + 1): a token is at least \(minimumTokenLength) visible ASCII characters (try: openssl rand -hex 32)"
                )
            }
            tokens.append(String(token))
        }
        guard !tokens.isEmpty else { throw InvalidCredentials(description: "\(file): no token") }
        return tokens
    }
}

extension Substring {
    fileprivate var trimmingWhitespace: Substring {
        var s = self
        while let c = s.first, c == " " || c == "\t" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" { s = s.dropLast() }
        return s
    }
}

/// The Host names a server answers to: IP literals, `localhost`, its own listen name and the
/// allowed ones (see ``MapAccess``). Pure, so the rule is tested without a server.
struct HostAllowList: Sendable {
    let names: Set<String>

    /// `listenHost` is the address the server listens on (its name is allowed unless it is a
    /// wildcard address, which is an IP anyway).
    init(listenHost: String, allowed: Set<String>) {
        var names = allowed
        names.insert("localhost")
        names.insert(listenHost.lowercased())
        self.names = names
    }

    /// Whether a request with this `Host` (name or address, with or without a port) is answered.
    func allows(_ host: String?) -> Bool {
        guard let host, let name = Self.name(of: host) else { return false }
        return names.contains(name) || Self.isIPAddress(name)
    }

    /// The name of a `Host` value: without its port and a trailing dot, lowercased; IPv6
    /// addresses without their brackets. `nil` when it is malformed.
    static func name(of host: String) -> String? {
        guard !host.isEmpty, host.utf8.count <= 255 else { return nil }
        var name: Substring
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            name = host[host.index(after: host.startIndex)..<close]
            let rest = host[host.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && rest.dropFirst().allSatisfy(\.isASCIIDigit)) else { return nil }
        } else {
            let parts = host.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2 else { return nil }
            if parts.count == 2 { guard !parts[1].isEmpty, parts[1].allSatisfy(\.isASCIIDigit) else { return nil } }
            name = parts[0]
            if name.hasSuffix(".") { name = name.dropLast() }
        }
        guard !name.isEmpty else { return nil }
        return name.lowercased()
    }

    /// Whether `name` is an IPv4 or IPv6 address (not a name a DNS answer could rebind).
    static func isIPAddress(_ name: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, name, &v4) == 1 || inet_pton(AF_INET6, name, &v6) == 1
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}

/// Answers 421 (Misdirected Request) to a request whose `Host` is not on the allow-list, and
/// says once in the log (escaped, at info) which name was refused and how to allow it.
struct HostCheckMiddleware<Context: RequestContext>: RouterMiddleware {
    let allowList: HostAllowList
    let refusal: RefusalLog

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let host = request.head.authority
        guard allowList.allows(host) else {
            refusal.hostRefused(host)
            return Response(
                status: .misdirectedRequest, headers: [.contentType: "text/plain; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: "This server does not answer to this host name.\n")))
        }
        return try await next(request, context)
    }
}

/// Says once, at info (the level a user sees by default; a library logs no higher), that a
/// request was refused for its `Host`: a flood of rebinding attempts, or a dispatcher using a
/// name not yet allowed, makes one line. Later refusals are logged at debug.
final class RefusalLog: Sendable {
    private let said = SanitizerVisibleMutex(false)
    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    func hostRefused(_ host: String?) {
        let first = said.withLock { said in
            defer { said = true }
            return !said
        }
        let name = host.map { JSONString.escaped(String($0.prefix(255))) } ?? "(none)"
        logger.log(
            level: first ? .info : .debug,
            "Refused a request for a host name this server does not answer to; allow it with --allowed-host if it is yours",
            metadata: ["http.host": "\(name)"])
    }
}

/// An authenticated user of the map: a user name from the users file, or `token`.
struct MapUser: PasswordAuthenticatable, Sendable {
    let name: String
    let passwordHash: String?
}

/// The users file as hummingbird-auth's repository for its `BasicAuthenticator`.
struct MapUsers: UserPasswordRepository {
    let users: [String: String]

    func getUser(named username: String, context: UserRepositoryContext) async throws -> MapUser? {
        users[username].map { MapUser(name: username, passwordHash: $0) }
    }
}

/// Bearer tokens: `Authorization: Bearer TOKEN`, compared in constant time with each token.
struct BearerTokenAuthenticator<Context: AuthRequestContext<MapUser>>: AuthenticatorMiddleware {
    typealias Identity = MapUser
    let tokens: [[UInt8]]

    func authenticate(request: Request, context: Context) async throws -> MapUser? {
        guard let given = request.headers.bearer.map({ Array($0.token.utf8) }) else { return nil }
        var matched = false
        for token in tokens where Self.constantTimeEqual(token, given) { matched = true }
        return matched ? MapUser(name: "token", passwordHash: nil) : nil
    }

    /// Whether `a` and `b` are equal, in a time that depends on their lengths only.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}

/// Lets a request through once an authenticator has named its user; otherwise 401 with the
/// challenges a browser (basic) and a script (bearer) understand.
struct RequireAuthenticationMiddleware<Context: AuthRequestContext<MapUser>>: RouterMiddleware {
    let basic: Bool
    let bearer: Bool

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard context.identity == nil else { return try await next(request, context) }
        var headers: HTTPFields = [.contentType: "text/plain; charset=utf-8"]
        if basic { headers.append(HTTPField(name: .wwwAuthenticate, value: #"Basic realm="fleet-watch", charset="UTF-8""#)) }
        if bearer { headers.append(HTTPField(name: .wwwAuthenticate, value: #"Bearer realm="fleet-watch""#)) }
        return Response(
            status: .unauthorized, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: "Authentication required.\n")))
    }
}
