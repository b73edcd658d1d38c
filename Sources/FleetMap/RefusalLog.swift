import FleetCore
import FleetcastCore
import JSONEscaping
import Logging

/// Says once per kind, at info (the level a user sees by default; a library logs no higher), that
/// the server refused something, and every later time at debug: a flood of rebinding attempts, of
/// connections from one client or of sockets that never finish their headers makes one line each,
/// while one dispatcher using a name not yet allowed is still told how to allow it.
final class RefusalLog: Sendable {
    /// What was refused.
    enum Kind: Hashable, Sendable {
        /// A request for a host name not on the allow-list (421).
        case host
        /// A connection from a client that had as many open as it may.
        case connectionsPerClient
        /// A connection that sent no complete request headers within the header timeout.
        case headerTimeout
    }

    private let said = SanitizerVisibleMutex(Set<Kind>())
    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    /// Logs `message` with `metadata`: at info the first time for `kind`, at debug after.
    func say(_ kind: Kind, _ message: Logger.Message, metadata: Logger.Metadata) {
        let first = said.withLock { $0.insert(kind).inserted }
        logger.log(level: first ? .info : .debug, message, metadata: metadata)
    }

    /// A request was refused for its `Host` (escaped in the log, at most 255 characters).
    func hostRefused(_ host: String?) {
        let name = host.map { JSONString.escaped(String($0.prefix(255))) } ?? "(none)"
        say(
            .host, "Refused a request for a host name this server does not answer to; allow it with --allowed-host if it is yours",
            metadata: ["http.host": "\(name)"])
    }
}
