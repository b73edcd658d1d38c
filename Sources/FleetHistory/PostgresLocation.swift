import FleetCore
import Foundation
import PostgresNIO

/// Where the track history lives: a PostgreSQL connection URL as libpq and `psql` take it,
/// `postgres://[user[:password]@]host[:port]/database[?sslmode=…&sslrootcert=FILE]`.
///
/// The password may also come from `PGPASSWORD` (what libpq reads), so it need not appear on
/// a command line; the URL's wins when both are given. The default port is 5432, the default
/// user `postgres`, the default `sslmode` `prefer`. The modes mean what libpq's do: `prefer`
/// and `require` encrypt without checking the server's certificate (Debian's PostgreSQL
/// serves a self-signed one out of the box), `verify-ca` checks it against the trusted CAs,
/// `verify-full` also the host name; the trusted CAs are `sslrootcert`'s PEM file when given
/// (the CA that signed the server's certificate: what a self-run cluster needs), the
/// system's otherwise. ``description`` never shows the password.
public struct PostgresLocation: Sendable, Equatable, CustomStringConvertible {
    /// How to use TLS, as libpq's `sslmode`.
    public enum TLSMode: String, Sendable, Equatable {
        /// Plain TCP.
        case disable
        /// TLS when the server offers it (its certificate not checked), plain TCP otherwise.
        case prefer
        /// TLS, its certificate not checked: encrypted, but not proof of whom it talks to.
        case require
        /// TLS, the certificate checked against the trusted CAs, not the host name.
        case verifyCA = "verify-ca"
        /// TLS, the certificate checked against the trusted CAs and the host name.
        case verifyFull = "verify-full"
    }

    /// A URL that is not a PostgreSQL location.
    public struct InvalidURL: Error, Sendable, Equatable, CustomStringConvertible {
        /// Why, in words.
        public let reason: String
        public var description: String { "invalid PostgreSQL URL: \(reason)" }
    }

    /// Host name or address.
    public var host: String
    /// TCP port.
    public var port: Int
    /// The role to connect as.
    public var user: String
    /// The role's password, if any.
    public var password: String?
    /// The database.
    public var database: String
    /// TLS use.
    public var tlsMode: TLSMode
    /// PEM file of the CAs that sign the server's certificate (`sslrootcert`); `nil`: the
    /// system's trusted CAs.
    public var rootCertificateFile: String?

    /// Parses `url`; `environment` supplies `PGPASSWORD` when the URL has no password.
    public init(parsing url: String, environment: [String: String] = [:]) throws(InvalidURL) {
        guard let components = URLComponents(string: url) else { throw InvalidURL(reason: "not a URL") }
        guard let scheme = components.scheme?.lowercased(), scheme == "postgres" || scheme == "postgresql" else {
            throw InvalidURL(reason: "the scheme must be postgres:// or postgresql://")
        }
        guard let host = components.host, !host.isEmpty else { throw InvalidURL(reason: "no host") }
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else { throw InvalidURL(reason: "port \(port) is out of range") }
        let database = String(components.percentEncodedPath.drop(while: { $0 == "/" })).removingPercentEncoding ?? ""
        guard !database.isEmpty, !database.contains("/") else { throw InvalidURL(reason: "no database (postgres://host/DATABASE)") }
        var tlsMode = TLSMode.prefer
        var rootCertificateFile: String?
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                guard let value = item.value, let mode = TLSMode(rawValue: value) else {
                    throw InvalidURL(reason: "sslmode must be disable, prefer, require, verify-ca or verify-full")
                }
                tlsMode = mode
            case "sslrootcert":
                guard let value = item.value, !value.isEmpty else { throw InvalidURL(reason: "sslrootcert needs a file") }
                rootCertificateFile = value
            default:
                throw InvalidURL(reason: "unknown parameter \(item.name.prefix(40)) (only sslmode and sslrootcert are understood)")
            }
        }
        self.host = host
        self.port = port
        // Decoded once: `components.user` would be decoded already, and decoding it again
        // turns a password's literal "%41" into "A".
        self.user = components.percentEncodedUser?.removingPercentEncoding ?? "postgres"
        self.password = components.percentEncodedPassword?.removingPercentEncoding ?? environment["PGPASSWORD"]
        self.database = database
        self.tlsMode = tlsMode
        self.rootCertificateFile = rootCertificateFile
    }

    /// `postgres://user@host:port/database?sslmode=…`, without the password.
    public var description: String {
        "postgres://\(user)@\(host):\(port)/\(database)?sslmode=\(tlsMode.rawValue)"
            + (rootCertificateFile.map { "&sslrootcert=\($0)" } ?? "")
    }

    /// The TLS settings of ``tlsMode``: none for `disable`; no certificate check for `prefer`
    /// and `require`; the trusted CAs (``rootCertificateFile``'s, or the system's) for
    /// `verify-ca`, and the host name too for `verify-full`.
    private var tlsConfiguration: TLSConfiguration? {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let rootCertificateFile { configuration.trustRoots = .file(rootCertificateFile) }
        switch tlsMode {
        case .disable: return nil
        case .prefer, .require: configuration.certificateVerification = .none
        case .verifyCA: configuration.certificateVerification = .noHostnameVerification
        case .verifyFull: configuration.certificateVerification = .fullVerification
        }
        return configuration
    }

    /// The settings of one postgres-nio connection (no pool), for a one-off check; throws when
    /// the TLS context cannot be made.
    public func connectionConfiguration() throws -> PostgresConnection.Configuration {
        let tls: PostgresConnection.Configuration.TLS =
            switch (tlsMode, tlsConfiguration) {
            case (.prefer, let configuration?): .prefer(try NIOSSLContext(configuration: configuration))
            case (_, let configuration?): .require(try NIOSSLContext(configuration: configuration))
            case (_, nil): .disable
            }
        return PostgresConnection.Configuration(host: host, port: port, username: user, password: password, database: database, tls: tls)
    }

    /// The postgres-nio client configuration.
    public var clientConfiguration: PostgresClient.Configuration {
        let tls: PostgresClient.Configuration.TLS =
            switch (tlsMode, tlsConfiguration) {
            case (.prefer, let configuration?): .prefer(configuration)
            case (_, let configuration?): .require(configuration)
            case (_, nil): .disable
            }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: tls)
        configuration.options.connectTimeout = .seconds(10)
        // The recorder holds one connection for its inserts; `history` and the map need one more.
        configuration.options.maximumConnections = 4
        return configuration
    }
}
