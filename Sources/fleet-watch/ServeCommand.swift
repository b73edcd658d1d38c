import ArgumentParser
import FleetMap
import FleetWatch
import Logging

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
            pushed with Server-Sent Events (/events); /api/vehicles is the fleet as JSON.
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

    func validate() throws {
        _ = try address()
        guard tiles == "none" || (tiles.hasPrefix("https://") || tiles.hasPrefix("http://")) && tiles.utf8.count <= 2048 else {
            throw ValidationError("--tiles: an http(s) URL template such as \(FleetMapServer.openStreetMapTiles), or none")
        }
        guard staleAfter.isFinite, (1...86_400).contains(staleAfter) else { throw ValidationError("--stale-after: 1 to 86400 seconds") }
        guard trailMinutes.isFinite, (0...1440).contains(trailMinutes) else { throw ValidationError("--trail-minutes: 0 to 1440") }
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
        let server: FleetMapServer
        do {
            server = try FleetMapServer(subscriber: try connection.makeSubscriber(logger: logger), options: options, logger: logger)
        } catch let error as FleetMapServer.LeafletMissing {
            throw ValidationError(error.description)
        }
        try await server.run()
    }
}
