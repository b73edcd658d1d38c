import Foundation
import PostgresNIO

/// Where the track history lives: a PostgreSQL connection URL as libpq and `psql` take it,
/// `postgres://[user[:password]@]host[:port]/database[?sslmode=disable|prefer|require]`.
///
/// The password may also come from `PGPASSWORD` (what libpq reads), so it need not appear on
/// a command line; the URL's wins when both are given. The default port is 5432, the default
/// user `postgres`, the default `sslmode` `prefer` (TLS when the server offers it, as libpq).
/// ``description`` never shows the password.
public struct PostgresLocation: Sendable, Equatable, CustomStringConvertible {
    /// How to use TLS, as libpq's `sslmode`.
    public enum TLSMode: String, Sendable, Equatable {
        /// Plain TCP.
        case disable
        /// TLS when the server offers it, plain TCP otherwise.
        case prefer
        /// TLS, verifying the server's certificate against the system's trusted CAs.
        case require
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
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                guard let value = item.value, let mode = TLSMode(rawValue: value) else {
                    throw InvalidURL(reason: "sslmode must be disable, prefer or require")
                }
                tlsMode = mode
            default:
                throw InvalidURL(reason: "unknown parameter \(item.name.prefix(40)) (only sslmode is understood)")
            }
        }
        self.host = host
        self.port = port
        self.user = components.user?.removingPercentEncoding ?? "postgres"
        self.password = components.password?.removingPercentEncoding ?? environment["PGPASSWORD"]
        self.database = database
        self.tlsMode = tlsMode
    }

    /// `postgres://user@host:port/database?sslmode=…`, without the password.
    public var description: String { "postgres://\(user)@\(host):\(port)/\(database)?sslmode=\(tlsMode.rawValue)" }

    /// The postgres-nio client configuration.
    public var clientConfiguration: PostgresClient.Configuration {
        let tls: PostgresClient.Configuration.TLS =
            switch tlsMode {
            case .disable: .disable
            case .prefer: .prefer(.makeClientConfiguration())
            case .require: .require(.makeClientConfiguration())
            }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: tls)
        configuration.options.connectTimeout = .seconds(10)
        // The recorder holds one connection for its inserts; `history` and the map need one more.
        configuration.options.maximumConnections = 4
        return configuration
    }
}
