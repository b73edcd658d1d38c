import FleetCore
import Hummingbird
import HummingbirdBasicAuth

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
///   keep the server on loopback or behind an authenticating proxy. A user name not in the file
///   costs the same bcrypt as a wrong password (``MapUsers``), and failures are throttled per
///   client (``AuthenticationFailureBuckets``).
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

    /// The bcrypt costs of ``users``' hashes. A name not in the file is checked against a hash of
    /// the most common one, so that a wrong name takes as long as a wrong password; with more than
    /// one cost, the time of a 401 still tells the names of the other costs apart.
    public var userHashCosts: Set<Int> { Set(users.values.compactMap(MapUsers.cost(of:))) }

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
package struct HostAllowList: Sendable {
    package let names: Set<String>

    /// `listenHost` is the address the server listens on (its name is allowed unless it is a
    /// wildcard address, which is an IP anyway).
    package init(listenHost: String, allowed: Set<String>) {
        var names = allowed
        names.insert("localhost")
        names.insert(listenHost.lowercased())
        self.names = names
    }

    /// Whether a request with this `Host` (name or address, with or without a port) is answered.
    package func allows(_ host: String?) -> Bool {
        guard let host, let name = Self.name(of: host) else { return false }
        return names.contains(name) || Self.isIPAddress(name)
    }

    /// The name of a `Host` value: without its port and a trailing dot, lowercased; IPv6
    /// addresses without their brackets. `nil` when it is malformed.
    package static func name(of host: String) -> String? {
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
    package static func isIPAddress(_ name: String) -> Bool {
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

/// An authenticated user of the map: a user name from the users file, or `token`.
package struct MapUser: Sendable {
    package let name: String
}

/// The users file's users and how a password is checked against them: bcrypt, through the
/// verifier (hummingbird-auth's, on NIO's thread pool), for a known user against their hash and
/// for an unknown one against ``standInHash``, a hash of the same cost that no password creates.
/// Both cost one bcrypt of the same work, so a wrong name answers no sooner than a wrong password,
/// and the time of a 401 does not tell which user names exist.
package struct MapUsers: Sendable {
    /// User names and their bcrypt hashes.
    package let hashes: [String: String]
    /// What unknown users' passwords are checked against: `$2b$`, the cost most of the users'
    /// hashes have (the highest of the most common ones), a random salt and a random digest.
    package let standInHash: String
    package let verifier: Verifier

    /// Whether a password (the first argument) creates a hash (the second).
    package typealias Verifier = @Sendable (String, String) async throws -> Bool

    /// hummingbird-auth's bcrypt, on NIO's thread pool (off the request's executor).
    package static let bcrypt: Verifier = { password, hash in
        try await BcryptPasswordVerifier().verifyPassword(password, createsHash: hash)
    }

    package init(hashes: [String: String], verifier: @escaping Verifier = MapUsers.bcrypt) {
        self.hashes = hashes
        self.standInHash = Self.standInHash(cost: Self.commonCost(of: hashes.values))
        self.verifier = verifier
    }

    /// Whether `password` is `name`'s. Always one bcrypt verification, known user or not.
    package func verify(name: String, password: String) async throws -> Bool {
        let hash = hashes[name]
        let matches = try await verifier(password, hash ?? standInHash)
        return hash != nil && matches
    }

    /// The cost (log2 of the rounds) of a bcrypt hash `$2b$NN$…`, `nil` when it has none.
    package static func cost(of hash: String) -> Int? {
        let parts = hash.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count >= 4, parts[2].count == 2, let cost = Int(parts[2]), (4...31).contains(cost) else { return nil }
        return cost
    }

    /// The cost most of `hashes` have (the highest of those tied); 10 when none has one.
    package static func commonCost(of hashes: some Sequence<String>) -> Int {
        var counts: [Int: Int] = [:]
        for hash in hashes { if let cost = cost(of: hash) { counts[cost, default: 0] += 1 } }
        return counts.max { ($0.value, $0.key) < ($1.value, $1.key) }?.key ?? 10
    }

    /// A well-formed bcrypt hash of `cost`, with a random salt and a random digest: checking a
    /// password against it does all of bcrypt's work, and no known password creates it.
    package static func standInHash(cost: Int) -> String {
        let alphabet = Array("./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        var generator = SystemRandomNumberGenerator()
        let random = String((0..<53).map { _ in alphabet.randomElement(using: &generator)! })
        let cost = min(31, max(4, cost))
        return "$2b$" + (cost < 10 ? "0\(cost)" : "\(cost)") + "$" + random
    }
}

/// The bearer tokens: `Authorization: Bearer TOKEN`, compared in constant time with each token.
package struct MapTokens: Sendable {
    package let tokens: [[UInt8]]

    package init(_ tokens: [String]) {
        self.tokens = tokens.map { Array($0.utf8) }
    }

    /// Whether `given` is one of the tokens (every token compared, whichever matches).
    package func matches(_ given: String) -> Bool {
        let given = Array(given.utf8)
        var matched = false
        for token in tokens where Self.constantTimeEqual(token, given) { matched = true }
        return matched
    }

    /// Whether `a` and `b` are equal, in a time that depends on their lengths only.
    package static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}
