import ArgumentParser
import FleetHistory
import FleetMap
import FleetProtocol
import FleetWatch
import Foundation
import GNSS
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
            recorded track over a chosen time (/api/track); the PostgreSQL password goes in the \
            URL or in PGPASSWORD.
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

    @Option(help: "Seconds without news after which a vehicle is drawn as stale.")
    var staleAfter: Double = 30

    @Option(help: "Minutes of trail drawn behind each vehicle.")
    var trailMinutes: Double = 5

    @Option(help: "The track history to draw past tracks from: postgres://[user@]host[:port]/database[?sslmode=…].")
    var postgres: String?

    func validate() throws {
        _ = try address()
        guard tiles == "none" || (tiles.hasPrefix("https://") || tiles.hasPrefix("http://")) && tiles.utf8.count <= 2048 else {
            throw ValidationError("--tiles: an http(s) URL template such as \(FleetMapServer.openStreetMapTiles), or none")
        }
        guard staleAfter.isFinite, (1...86_400).contains(staleAfter) else { throw ValidationError("--stale-after: 1 to 86400 seconds") }
        guard trailMinutes.isFinite, (0...1440).contains(trailMinutes) else { throw ValidationError("--trail-minutes: 0 to 1440") }
        if let postgres {
            do { _ = try PostgresLocation(parsing: postgres) } catch { throw ValidationError(error.description) }
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
        let options = FleetMapServer.Options(
            host: host, port: port, leafletDirectory: leafletDir, tiles: useTiles ? tiles : nil,
            attribution: attribution ?? (tiles == FleetMapServer.openStreetMapTiles ? FleetMapServer.openStreetMapAttribution : nil),
            staleAfter: .milliseconds(Int64(staleAfter * 1000)), trailWindow: .milliseconds(Int64(trailMinutes * 60_000)))
        let client = try postgres.map {
            PostgresClient(
                configuration: try PostgresLocation(parsing: $0, environment: ProcessInfo.processInfo.environment).clientConfiguration,
                backgroundLogger: logger)
        }
        let readiness = Readiness(["subscribed", "listening"])
        let server: FleetMapServer
        do {
            server = try FleetMapServer(
                subscriber: try connection.makeSubscriber(logger: logger, onSubscribed: { readiness.report("subscribed") }),
                options: options, history: client.map { RecordedTracks(store: TrackStore(client: $0, logger: logger)) }, logger: logger)
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
    let store: TrackStore

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
}
