import ArgumentParser
import CMalloc
import FleetHistory
import FleetMap
import FleetOperations
import FleetProtocol
import FleetWatch
import FleetcastCore
import Foundation
import GNSS
import HummingbirdTLS
import JSONEscaping
import Logging
import PostgresNIO
import ServiceLifecycle

/// `fleet-watch serve --listen HOST:PORT`: the fleet on a live map in the browser. All the logic
/// is in the FleetMap library (``FleetMapServer``).
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serves a live map of the fleet to web browsers.",
        discussion: """
            Open http://HOST:PORT/ in a browser. Leaflet is served from --leaflet-dir (Debian's \
            libjs-leaflet), so the page needs no CDN; tiles come from --tiles (OpenStreetMap's \
            standard layer by default; "none" for a plain background with a scale). Updates are \
            pushed with Server-Sent Events (/events); /api/vehicles is the fleet as JSON. With \
            --postgres (the database `fleet-watch record` writes), a vehicle's details offer its \
            recorded track over a chosen time (/api/track); the PostgreSQL password comes from \
            --postgres-password-file, PGPASSWORD or a libpq password file (PGPASSFILE), never \
            the URL.

            Who may use it: requests are answered only for a Host that is an IP address, \
            localhost, the --listen name or an --allowed-host (a web page elsewhere cannot rebind \
            its name to this server). Without --users-file or --token-file anyone who reaches the \
            port sees where every vehicle is: keep --listen on loopback, or give users (htpasswd -B \
            -c FILE NAME; the browser asks for the password) and tokens for scripts (Authorization: \
            Bearer). --tls-certificate and --tls-key serve HTTPS. Wrong credentials are throttled per \
            client address (2 a second, 5 in a row, then 429 with Retry-After), each address may hold \
            --max-connections-per-client connections, and a connection that sends no complete request \
            headers within 10 s is closed.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "The address to listen on: HOST:PORT (port 0: any free port).")
    var listen: String = "127.0.0.1:8080"

    @Option(help: "The tile URL template ({z}/{x}/{y}), or none.")
    var tiles: String = FleetMapServer.openStreetMapTiles

    @Option(help: "The attribution shown for the tiles (default: OpenStreetMap's, for its tiles).")
    var attribution: String?

    @Option(help: "The directory holding leaflet.js and leaflet.css.")
    var leafletDir: String = FleetMapServer.debianLeafletDirectory

    @Option(help: "Seconds without news after which a moving vehicle is drawn as stale (a parked one never is).")
    var staleAfter: Double = 150

    @Option(help: "Minutes of trail drawn behind each vehicle.")
    var trailMinutes: Double = 5

    @Option(help: "The track history to draw past tracks from: postgres://[user@]host[:port]/database[?sslmode=…] (no password).")
    var postgres: String?

    @OptionGroup var postgresPassword: PostgresPasswordOptions

    @OptionGroup var tripRules: TripRuleOptions

    @OptionGroup var zoneOptions: ZoneOptions

    @Option(
        name: .customLong("allowed-host"),
        help: ArgumentHelp("A host name browsers use to reach the map (repeatable).", valueName: "name"))
    var allowedHosts: [String] = []

    @Option(help: ArgumentHelp("Users who may see the map: an htpasswd file of bcrypt hashes (htpasswd -B).", valueName: "file"))
    var usersFile: String?

    @Option(help: ArgumentHelp("Bearer tokens that may use the map, one a line (for scripts).", valueName: "file"))
    var tokenFile: String?

    @Option(help: ArgumentHelp("Serve HTTPS with this certificate chain (PEM); needs --tls-key.", valueName: "file"))
    var tlsCertificate: String?

    @Option(help: ArgumentHelp("The private key (PEM) of --tls-certificate.", valueName: "file"))
    var tlsKey: String?

    @Option(help: "The most connections open at once (browsers, page loads and API calls).")
    var maxConnections: Int = 1_024

    @Option(
        help: """
            The most connections one client (an IPv4 address, or an IPv6 /64) may have open at once (default: a quarter of \
            --max-connections, at least 2; behind a reverse proxy every connection is the proxy's: give --max-connections).
            """)
    var maxConnectionsPerClient: Int?

    func validate() throws {
        guard (1...100_000).contains(maxConnections) else { throw ValidationError("--max-connections: 1 to 100000") }
        if let maxConnectionsPerClient, !(1...100_000).contains(maxConnectionsPerClient) {
            throw ValidationError("--max-connections-per-client: 1 to 100000")
        }
        guard (tlsCertificate == nil) == (tlsKey == nil) else {
            throw ValidationError("--tls-certificate and --tls-key go together")
        }
        for name in allowedHosts {
            guard HostAllowListName.isValid(name) else {
                throw ValidationError("--allowed-host: a host name such as fleet.example.com, without scheme or port")
            }
        }
        _ = try address()
        guard tiles == "none" || (tiles.hasPrefix("https://") || tiles.hasPrefix("http://")) && tiles.utf8.count <= 2048 else {
            throw ValidationError("--tiles: an http(s) URL template such as \(FleetMapServer.openStreetMapTiles), or none")
        }
        guard staleAfter.isFinite, (1...86_400).contains(staleAfter) else { throw ValidationError("--stale-after: 1 to 86400 seconds") }
        guard trailMinutes.isFinite, (0...1440).contains(trailMinutes) else { throw ValidationError("--trail-minutes: 0 to 1440") }
        if let postgres { try PostgresPasswordOptions.check(url: postgres) }
        if postgres == nil, postgresPassword.postgresPasswordFile != nil {
            throw ValidationError("--postgres-password-file goes with --postgres")
        }
    }

    /// `--listen` as host and port.
    func address() throws -> (host: String, port: Int) {
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]), (0...65535).contains(port)
        else { throw ValidationError("--listen: HOST:PORT, such as 127.0.0.1:8080") }
        var host = String(listen[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ValidationError("--listen: HOST:PORT, such as 127.0.0.1:8080") }
        return (host, port)
    }

    func run() async throws {
        let logger = connection.makeLogger()
        let (host, port) = try address()
        let useTiles = tiles != "none"
        // Each browser's snapshot is one buffer of megabytes (the whole fleet with its trails),
        // freed once written or when the browser is dropped. glibc raises its mmap threshold to
        // the largest block freed, after which such buffers come from the heap and their pages
        // stay with the process: a burst of browsers would leave serve hundreds of megabytes
        // bigger for good. A fixed threshold keeps every buffer above 256 KiB in its own mapping,
        // returned to the system when freed.
        _ = fleetcast_set_mmap_threshold(256 * 1024)
        let options = FleetMapServer.Options(
            host: host, port: port, leafletDirectory: leafletDir, tiles: useTiles ? tiles : nil,
            attribution: attribution ?? (tiles == FleetMapServer.openStreetMapTiles ? FleetMapServer.openStreetMapAttribution : nil),
            staleAfter: .milliseconds(Int64(staleAfter * 1000)), trailWindow: .milliseconds(Int64(trailMinutes * 60_000)),
            maximumConnections: maxConnections, maximumConnectionsPerClient: maxConnectionsPerClient, access: try access(logger: logger),
            tls: try tls())
        if !options.access.requiresAuthentication && !Self.isLoopback(host) {
            logger.warning(
                "Serving the map without authentication on a non-loopback address: anyone who reaches it sees where every vehicle is (--users-file, --token-file)",
                metadata: ["http.listen": "\(listen)"])
        }
        let client = try postgres.map {
            PostgresClient(
                configuration: try postgresPassword.location(url: $0, environment: ProcessInfo.processInfo.environment, logger: logger)
                    .clientConfiguration,
                backgroundLogger: logger)
        }
        let readiness = Readiness(["subscribed", "listening"])
        let server: FleetMapServer
        do {
            server = try FleetMapServer(
                subscriber: try connection.makeSubscriber(logger: logger, onSubscribed: { readiness.report("subscribed") }),
                options: options,
                history: client.map { RecordedTracks(store: TrackStore(client: $0, logger: logger), rules: tripRules.rules) },
                zones: try zoneOptions.load()?.mapJSON, logger: logger)
        } catch let error as FleetMapServer.LeafletMissing {
            throw ValidationError(error.description)
        }
        // SIGTERM or SIGINT: every browser's event stream ends, no new connections, the
        // subscription is handed over, exit 0. The history's client shuts down last.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = client.map { [.init(service: $0)] } ?? []
        services.append(
            .init(service: ListeningMapServer(server: server, readiness: readiness), successTerminationBehavior: .gracefullyShutdownGroup))
        try await FleetWatchServices.run(
            services, readiness: readiness, status: "serving the live map on \(listen)", logger: logger)
    }
}

extension ServeCommand {
    /// The Host allow-list and the credentials, read from their files; an unusable file is a
    /// usage error naming the file and line (never a secret).
    func access(logger: Logger) throws -> MapAccess {
        var access = MapAccess(allowedHosts: Set(allowedHosts))
        do {
            try readCredentials(into: &access, logger: logger)
        } catch let error as MapAccess.InvalidCredentials {
            throw ValidationError(error.description)
        }
        return access
    }

    private func readCredentials(into access: inout MapAccess, logger: Logger) throws {
        if let usersFile {
            access.users = try MapAccess.users(htpasswd: try Self.read(usersFile, option: "--users-file"), file: usersFile)
            Self.warnIfReadableByOthers(usersFile, logger: logger)
            if access.userHashCosts.count > 1 {
                logger.warning(
                    "The users file's bcrypt hashes have different costs: the time of a refusal tells which cost a user name has; give every user the same (htpasswd -B -C)",
                    metadata: ["file": "\(usersFile)", "bcrypt.costs": "\(access.userHashCosts.sorted())"])
            }
        }
        if let tokenFile {
            access.tokens = try MapAccess.tokens(text: try Self.read(tokenFile, option: "--token-file"), file: tokenFile)
            Self.warnIfReadableByOthers(tokenFile, logger: logger)
        }
    }

    /// The HTTPS configuration of `--tls-certificate` and `--tls-key`, `nil` without them.
    func tls() throws -> TLSConfiguration? {
        guard let tlsCertificate, let tlsKey else { return nil }
        let failure = "--tls-certificate/--tls-key: cannot load \(tlsCertificate) and \(tlsKey)"
        do {
            let chain = try NIOSSLCertificate.fromPEMFile(tlsCertificate)
            guard !chain.isEmpty else { throw ValidationError("\(failure): no PEM certificate in \(tlsCertificate)") }
            let key = try NIOSSLPrivateKey(file: tlsKey, format: .pem)
            return TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        } catch let error as ValidationError {
            throw error
        } catch {
            throw ValidationError("\(failure): \(error)")
        }
    }

    static func read(_ path: String, option: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path), data.count <= 1 << 20 else {
            throw ValidationError("\(option): cannot read \(path) (or it is over 1 MiB)")
        }
        return String(decoding: data, as: UTF8.self)
    }

    static func warnIfReadableByOthers(_ path: String, logger: Logger) {
        if FilePermissions.isReadableByOthers(path) {
            logger.warning(
                "A credentials file is readable by every user of this machine; chmod o-r it", metadata: ["file": "\(path)"])
        }
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }
}

/// What `--allowed-host` accepts: a DNS name (letters, digits, `-`, `.`), no scheme, no port.
enum HostAllowListName {
    static func isValid(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 253
            && name.utf8.allSatisfy {
                $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0)
                    || (0x61...0x7A).contains($0)
            }
    }
}

/// The map server, reporting `listening` to ``Readiness`` once its socket is bound.
private struct ListeningMapServer: Service {
    let server: FleetMapServer
    let readiness: Readiness

    func run() async throws {
        try await server.run(onListening: { [readiness] _ in readiness.report("listening") })
    }
}

/// The map's past tracks from the track history in PostgreSQL.
struct RecordedTracks: MapTrackSource {
    /// The most fixes one `/api/trips` request derives its open segments from: 50,000.
    static let maximumDerivedFixes = 50_000

    let store: TrackStore
    /// The rules of the trip still open (the recorder's, when they are not the defaults).
    var rules = TripRules()

    /// A failed read, described for the log without the query's values.
    struct Unavailable: Error, CustomStringConvertible {
        let description: String
    }

    func track(vehicle: VehicleID, since: UTCTimestamp, until: UTCTimestamp, limit: Int) async throws -> [MapTrackPoint] {
        var points: [MapTrackPoint] = []
        do {
            try await store.track(vehicle: vehicle, since: since, until: until, limit: limit) {
                points.append(MapTrackPoint(latitude: $0.latitude, longitude: $0.longitude, time: $0.time))
            }
        } catch {
            throw Unavailable(description: describePostgresError(error))
        }
        return points
    }

    func trips(vehicle: VehicleID, since: UTCTimestamp, until: UTCTimestamp) async throws -> [UInt8] {
        do {
            // A tenth of `trips`' bound per request (about 14 hours at 1 Hz): the map is public.
            let listed = try await store.listSegments(
                vehicle: vehicle, since: since, until: until, rules: rules, maximumFixes: Self.maximumDerivedFixes)
            return Array(("[" + OperationsOutput.trips(vehicle: vehicle.rawValue, listed, format: .json).joined(separator: ",") + "]").utf8)
        } catch {
            throw Unavailable(description: describePostgresError(error))
        }
    }
}

extension ZoneSet {
    /// The zones as the map draws them (`/api/zones`): `[{"name":…,"circle":[lat,lon,radius]}`
    /// or `{"name":…,"polygon":[[[lat,lon],…],…]}]`, degrees and metres.
    var mapJSON: [UInt8] {
        func number(_ value: Double) -> String { String(format: "%.7f", value) }
        let items = zones.map { zone -> String in
            switch zone.shape {
            case .circle(let centre, let radius):
                return
                    "{\"name\":\(JSONString.quoted(zone.name)),\"circle\":[\(number(centre.latitude)),\(number(centre.longitude)),\(number(radius))]}"
            case .polygon(let rings):
                let text = rings.map { ring in
                    "[" + ring.map { "[\(number($0.latitude)),\(number($0.longitude))]" }.joined(separator: ",") + "]"
                }
                return "{\"name\":\(JSONString.quoted(zone.name)),\"polygon\":[\(text.joined(separator: ","))]}"
            }
        }
        return Array(("[" + items.joined(separator: ",") + "]").utf8)
    }
}
