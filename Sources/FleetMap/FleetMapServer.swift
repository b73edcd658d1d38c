import FleetCore
import FleetProtocol
import FleetWatch
import Foundation
import Hummingbird
import HummingbirdAuth
import HummingbirdCore
import HummingbirdTLS
import Logging
import NIOCore
import ServiceLifecycle

/// `fleet-watch serve`: a live map of the fleet in the browser. Subscribes with a
/// ``FleetSubscriber``, folds the events into the fleet's state, and serves over HTTP (Hummingbird):
///
/// - `/`: the page (Leaflet, one marker per vehicle turned by its heading, trails, a side list
///   that finds and follows vehicles);
/// - `/leaflet/…`: the Leaflet library from ``Options/leafletDirectory`` (Debian's
///   `libjs-leaflet`), so the page needs no CDN;
/// - `/events`: the push channel, Server-Sent Events: a `snapshot` event (the whole fleet with
///   its trails) first on every connection, then `update` events of the vehicles that changed,
///   coalesced per browser and sent at most every ``Options/flushInterval``;
/// - `/api/vehicles[?limit=N]`: the fleet as JSON (the snapshot's format, without trails).
///
/// Why SSE and not WebSocket: the push is one-way (the server to the page), an `EventSource`
/// reconnects by itself (and each reconnection gets a fresh snapshot, so nothing needs
/// replaying), it is plain HTTP that every proxy passes, and it needs no second package: a
/// streaming Hummingbird response body is the whole transport.
///
/// A slow browser is dropped (and logged at info, the default level) instead of being buffered: see
/// ``Options/maximumPending`` and ``Options/maximumStalledFlushes``; its connection is closed. Any
/// connection whose client stops reading is closed after ``Options/writeTimeout``, one without
/// complete request headers after ``Options/headerTimeout``, an idle one after
/// ``Options/idleTimeout``; at most ``Options/maximumConnections`` are open at once, and
/// ``Options/maximumConnectionsPerClient`` from one client.
///
/// Who may use it: ``MapAccess`` (a Host allow-list against DNS rebinding, and optional basic or
/// bearer authentication, its failures throttled per client: ``Options/authenticationFailureBurst``);
/// ``Options/tls`` serves HTTPS. Every response says `X-Content-Type-Options: nosniff` and carries
/// the page's Content Security Policy (``MapSecurityHeaders``); a path holding a NUL gets 400.
///
/// It is a `Service`: under a ServiceGroup, a graceful shutdown (SIGTERM) ends every browser's
/// event stream (each `EventSource` sees its response end), stops taking connections, hands the
/// subscription over (``FleetSubscriber/events()``) and returns once the open responses are done.
public struct FleetMapServer: Service {
    /// OpenStreetMap's standard tile layer.
    public static let openStreetMapTiles = "https://tile.openstreetmap.org/{z}/{x}/{y}.png"
    /// The attribution OpenStreetMap's tile usage policy asks for.
    public static let openStreetMapAttribution = "© OpenStreetMap contributors"
    /// Where Debian's `libjs-leaflet` installs Leaflet.
    public static let debianLeafletDirectory = "/usr/share/javascript/leaflet"

    /// How the map is served.
    public struct Options: Sendable {
        /// The address to listen on (a host name or IP address).
        public var host: String
        /// The TCP port to listen on; 0 lets the system choose (``run(onListening:)`` says which).
        public var port: Int
        /// The directory holding `leaflet.js`, `leaflet.css` and `images/`.
        public var leafletDirectory: String
        /// The tile URL template (`{z}/{x}/{y}`, Leaflet's syntax); `nil` for no tiles (a plain
        /// background with a scale).
        public var tiles: String?
        /// The attribution shown for the tiles.
        public var attribution: String?
        /// After how long without news a vehicle is drawn as stale.
        public var staleAfter: Duration
        /// How far back (by fix time) a vehicle's trail reaches.
        public var trailWindow: Duration
        /// The shortest time between two updates sent to one browser.
        public var flushInterval: Duration
        /// The most vehicles queued for a browser still writing its previous update at a flush;
        /// beyond it the browser is dropped.
        public var maximumPending: Int
        /// How many flushes in a row a browser may miss (still writing) before it is dropped.
        public var maximumStalledFlushes: Int
        /// The most vehicles kept (the one heard from least recently is forgotten beyond it).
        public var maximumVehicles: Int
        /// The most browsers connected at once; the next gets 503 (and its `EventSource`
        /// retries) until one leaves.
        public var maximumBrowsers: Int
        /// The most TCP connections open at once (browsers' event streams, page loads and API
        /// calls together); beyond it new connections wait in the listen queue until one closes.
        public var maximumConnections: Int
        /// The most connections one client (an IPv4 address, or an IPv6 /64) may have open at
        /// once; a connection beyond it is closed at once, so one client cannot take every place of
        /// ``maximumConnections``. Behind a reverse proxy every connection is the proxy's: raise it
        /// to ``maximumConnections`` there.
        public var maximumConnectionsPerClient: Int
        /// How long a connection has to send a request's complete headers, from opening and from
        /// its last response's end (a keep-alive connection waiting for its next request); then it
        /// is closed. Against sockets that never finish their headers, holding places.
        public var headerTimeout: Duration
        /// How many failed authentications per second a client (an IPv4 address, or an IPv6 /64)
        /// earns back; beyond ``authenticationFailureBurst`` its credentials are refused with 429,
        /// unchecked, until it has earned one back.
        public var authenticationFailuresPerSecond: Double
        /// How many failed authentications a client may make in a row before being throttled.
        public var authenticationFailureBurst: Int
        /// The most clients whose failed authentications are remembered (the one whose last
        /// failure is oldest is forgotten beyond it): the memory a flood of addresses can take.
        public var maximumThrottledClients: Int
        /// How long a connection may stay unable to take more of its response (its client not
        /// reading) before it is closed.
        public var writeTimeout: Duration
        /// How long a connection may stay open with no request in progress.
        public var idleTimeout: Duration
        /// The Host names answered and the credentials asked for.
        public var access: MapAccess
        /// The server's certificate and key for HTTPS; `nil` for plain HTTP.
        public var tls: TLSConfiguration?

        /// Options for `127.0.0.1:8080`, OpenStreetMap tiles, Debian's Leaflet, vehicles stale
        /// after 150 s (never when parked), 5-minute trails, updates every 250 ms, a slow browser dropped after
        /// 10,000 queued vehicles or 40 missed flushes (10 s), at most 1,000 browsers and 1,024
        /// connections at once, a quarter of them (at least 2) per client unless
        /// `maximumConnectionsPerClient` says otherwise, a connection closed after 30 s without its
        /// client reading, 10 s without complete request headers or 60 s idle, 2 failed
        /// authentications a second per client with a burst of 5 (4,096 clients remembered), no
        /// authentication, plain HTTP.
        public init(
            host: String = "127.0.0.1", port: Int = 8080, leafletDirectory: String = FleetMapServer.debianLeafletDirectory,
            tiles: String? = FleetMapServer.openStreetMapTiles, attribution: String? = FleetMapServer.openStreetMapAttribution,
            staleAfter: Duration = .seconds(150), trailWindow: Duration = .seconds(300), flushInterval: Duration = .milliseconds(250),
            maximumPending: Int = 10_000, maximumStalledFlushes: Int = 40, maximumVehicles: Int = FleetState.defaultMaximumVehicles,
            maximumBrowsers: Int = 1_000, maximumConnections: Int = 1_024, maximumConnectionsPerClient: Int? = nil,
            headerTimeout: Duration = .seconds(10), authenticationFailuresPerSecond: Double = 2, authenticationFailureBurst: Int = 5,
            maximumThrottledClients: Int = 4_096, writeTimeout: Duration = .seconds(30), idleTimeout: Duration = .seconds(60),
            access: MapAccess = MapAccess(), tls: TLSConfiguration? = nil
        ) {
            self.host = host
            self.port = port
            self.leafletDirectory = leafletDirectory
            self.tiles = tiles
            self.attribution = attribution
            self.staleAfter = staleAfter
            self.trailWindow = trailWindow
            self.flushInterval = flushInterval
            self.maximumPending = maximumPending
            self.maximumStalledFlushes = maximumStalledFlushes
            self.maximumVehicles = maximumVehicles
            self.maximumBrowsers = maximumBrowsers
            self.maximumConnections = max(1, maximumConnections)
            self.maximumConnectionsPerClient = max(1, maximumConnectionsPerClient ?? max(2, maximumConnections / 4))
            self.headerTimeout = headerTimeout
            self.authenticationFailuresPerSecond = authenticationFailuresPerSecond
            self.authenticationFailureBurst = authenticationFailureBurst
            self.maximumThrottledClients = maximumThrottledClients
            self.writeTimeout = writeTimeout
            self.idleTimeout = idleTimeout
            self.access = access
            self.tls = tls
        }
    }

    /// Leaflet is not where ``Options/leafletDirectory`` says.
    public struct LeafletMissing: Error, Sendable, Equatable, CustomStringConvertible {
        /// The directory searched.
        public let directory: String
        public var description: String {
            "Leaflet not found: \(directory) has no leaflet.js and leaflet.css (install Debian's libjs-leaflet, or pass --leaflet-dir)"
        }
    }

    /// The most entries `/api/vehicles?limit=` returns.
    public static let maximumLimit = 100_000

    /// Where the fleet's events come from.
    public let subscriber: FleetSubscriber
    /// How the map is served.
    public let options: Options
    /// Where past tracks come from (`/api/track`, and the page's "show the track"), if anywhere.
    public let history: (any MapTrackSource)?
    /// The fleet's zones to draw (`/api/zones`: a JSON array, each `{"name":…}` with
    /// `"circle":[lat,lon,radius_m]` or `"polygon":[[[lat,lon],…],…]`), if any.
    public let zones: [UInt8]?
    let logger: Logger

    /// A server; nothing listens until ``run(onListening:)``. Throws ``LeafletMissing`` when
    /// the Leaflet directory lacks `leaflet.js` or `leaflet.css`.
    public init(
        subscriber: FleetSubscriber, options: Options = Options(), history: (any MapTrackSource)? = nil, zones: [UInt8]? = nil,
        logger: Logger
    ) throws(LeafletMissing) {
        let files = ["leaflet.js", "leaflet.css"].map { "\(options.leafletDirectory)/\($0)" }
        guard files.allSatisfy({ FileManager.default.isReadableFile(atPath: $0) }) else {
            throw LeafletMissing(directory: options.leafletDirectory)
        }
        self.subscriber = subscriber
        self.options = options
        self.history = history
        self.zones = zones
        self.logger = logger
    }

    /// Subscribes and serves until a graceful shutdown (then returns), the task is cancelled,
    /// or the subscription fails (thrown).
    public func run() async throws {
        try await run(onListening: { _ in })
    }

    /// Subscribes and serves until a graceful shutdown (then returns), the task is cancelled,
    /// or the subscription fails (thrown). `onListening` is called once with the port listened on.
    public func run(onListening: @escaping @Sendable (Int) async -> Void) async throws {
        let feed = MapFeed(
            topics: subscriber.options.topics, maximumVehicles: options.maximumVehicles, trailWindow: options.trailWindow,
            limits: BrowserQueueLimits(
                maximumPending: options.maximumPending, maximumStalledFlushes: options.maximumStalledFlushes,
                maximumBrowsers: options.maximumBrowsers),
            logger: logger)
        defer { feed.finish() }
        let logger = self.logger
        let host = options.host.contains(":") ? "[\(options.host)]" : options.host
        let scheme = options.tls == nil ? "http" : "https"
        // Hummingbird's own messages ("Server started…", each request) only at debug and below:
        // at the default level the user sees the address once, from us.
        var httpLogger = logger
        if httpLogger.logLevel > .debug { httpLogger.logLevel = .warning }
        // Per connection: closed when its client stops reading, when its client has too many open
        // or when it sends no complete headers in time; every response with the security headers.
        let refusals = RefusalLog(logger: logger)
        let connections = ConnectionGuard(
            maximumPerClient: options.maximumConnectionsPerClient, headerTimeout: options.headerTimeout, refusals: refusals)
        let policy = MapSecurityHeaders.contentSecurityPolicy(tiles: options.tiles)
        let http = HTTP1Channel.Configuration(
            additionalChannelHandlers: [
                StalledWriteHandler(timeout: .init(options.writeTimeout), logger: logger),
                ConnectionGuardHandler(shared: connections),
                SecurityHeadersHandler(contentSecurityPolicy: policy),
            ],
            idleTimeout: .init(options.idleTimeout))
        let app = Application(
            router: makeRouter(feed, refusals: refusals, logger: httpLogger),
            server: try options.tls.map { try .tls(.http1(configuration: http), tlsConfiguration: $0) } ?? .http1(configuration: http),
            configuration: ApplicationConfiguration(
                address: .hostname(options.host, port: options.port), serverName: "fleet-watch",
                availableConnectionsDelegate: MaximumAvailableConnections(options.maximumConnections, logger: httpLogger)),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                logger.info("Serving the live map", metadata: ["http.address": "\(scheme)://\(host):\(port)/"])
                await onListening(port)
            },
            logger: httpLogger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                // Ends after a graceful shutdown's hand-over, or throws when the subscription fails.
                var malformed = MalformedMessageReport()
                for try await event in subscriber.events() {
                    malformed.note(event, topics: subscriber.options.topics, logger: logger)
                    feed.apply(event, at: .wallClockNow)
                }
            }
            group.addTask { [interval = options.flushInterval] in
                // Until a graceful shutdown; then every browser's stream ends, because the
                // server's own graceful shutdown waits for the open responses to finish.
                try? await cancelWhenGracefulShutdown {
                    while true {
                        try await Task.sleep(for: interval)
                        feed.flush(now: .wallClockNow)
                    }
                }
                feed.finish()
            }
            // Stops taking connections on a graceful shutdown and returns once the open
            // responses are done.
            group.addTask { try await app.run() }
            // A failure (the subscription refused) or a cancellation ends all parts at once; a
            // graceful shutdown lets each finish.
            defer { group.cancelAll() }
            while try await group.next() != nil {}
        }
    }

    func makeRouter(_ feed: MapFeed, refusals: RefusalLog, logger: Logger) -> Router<MapRequestContext> {
        let router = Router(context: MapRequestContext.self)
        // Every route, files included, behind the path check, the Host check and the authentication.
        router.add(middleware: RequestPathCheckMiddleware<MapRequestContext>())
        router.add(
            middleware: HostCheckMiddleware(
                allowList: HostAllowList(listenHost: options.host, allowed: options.access.allowedHosts), refusal: refusals))
        let access = options.access
        if access.requiresAuthentication {
            router.add(
                middleware: MapAuthenticationMiddleware(
                    users: access.users.isEmpty ? nil : MapUsers(hashes: access.users),
                    tokens: access.tokens.isEmpty ? nil : MapTokens(access.tokens),
                    throttle: AuthenticationThrottle(
                        limits: .init(
                            failuresPerSecond: options.authenticationFailuresPerSecond, burst: options.authenticationFailureBurst,
                            maximumClients: options.maximumThrottledClients)),
                    logger: self.logger))
        }
        router.add(
            middleware: FileMiddleware(
                options.leafletDirectory, urlBasePath: "/leaflet",
                searchForIndexHtml: false, logger: logger))
        let page = MapPage.html(
            configuration: MapJSON.pageConfiguration(
                tiles: options.tiles, attribution: options.tiles == nil ? nil : options.attribution, staleAfter: options.staleAfter,
                trailWindow: options.trailWindow, flushInterval: options.flushInterval, history: history != nil,
                zones: zones != nil))
        router.get("/") { _, _ in Self.response(page, type: "text/html; charset=utf-8") }
        router.get("/map.js") { _, _ in Self.response(MapPage.script, type: "text/javascript; charset=utf-8") }
        router.get("/map.css") { _, _ in Self.response(MapPage.style, type: "text/css; charset=utf-8") }
        router.get("/api/vehicles") { request, _ in
            let limit = try Self.limit(request.uri.queryParameters.get("limit"))
            let (fleet, _) = feed.fleet()
            let bytes = MapJSON.batch(Array(fleet.vehicles.prefix(limit)), now: .wallClockNow)
            return Self.response(bytes, type: "application/json")
        }
        router.get("/events") { _, context in
            Self.events(feed, peer: context.peer, close: { [channel = context.channel] in channel.close(promise: nil) })
        }
        if let history {
            let gate = HistoryReadGate()
            router.get("/api/track") { request, _ in try await Self.track(request, from: history, gate: gate, logger: logger) }
            router.get("/api/trips") { request, _ in try await Self.trips(request, from: history, gate: gate, logger: logger) }
        }
        if let zones {
            router.get("/api/zones") { _, _ in Self.response(zones, type: "application/json") }
        }
        return router
    }

    /// `/api/track?vehicle=V&since=T1&until=T2`: the vehicle's recorded fixes in that range
    /// (``MapTrackRequest``); 400 for a bad query, 503 (logged) when the history cannot be read,
    /// and 503 past the ``HistoryReadGate``'s bounds (reads at once, deadline).
    static func track(_ request: Request, from history: any MapTrackSource, gate: HistoryReadGate, logger: Logger) async throws -> Response
    {
        let query = request.uri.queryParameters
        let wanted: MapTrackRequest
        do {
            wanted = try MapTrackRequest(
                vehicle: query.get("vehicle"), since: query.get("since"), until: query.get("until"))
        } catch {
            throw HTTPError(.badRequest, message: error.reason)
        }
        let points: [MapTrackPoint]
        do {
            points = try await gate.run {
                try await history.track(
                    vehicle: wanted.vehicle, since: wanted.since, until: wanted.until, limit: MapTrackRequest.maximumPoints + 1)
            }
        } catch let refusal as HTTPError {
            throw refusal
        } catch {
            logger.warning("Cannot read a track from the history", metadata: ["vehicle": "\(wanted.vehicle)", "error": "\(error)"])
            throw HTTPError(.serviceUnavailable, message: "the track history cannot be read now")
        }
        return response(MapTrackRequest.json(vehicle: wanted.vehicle, points: points), type: "application/json")
    }

    /// `/api/trips?vehicle=V&since=T1&until=T2`: the vehicle's trips and stops that began in
    /// that range, checked as `/api/track`'s query; 400 for a bad query, 503 (logged) when the
    /// history cannot be read.
    static func trips(_ request: Request, from history: any MapTrackSource, gate: HistoryReadGate, logger: Logger) async throws -> Response
    {
        let query = request.uri.queryParameters
        let wanted: MapTrackRequest
        do {
            wanted = try MapTrackRequest(vehicle: query.get("vehicle"), since: query.get("since"), until: query.get("until"))
        } catch {
            throw HTTPError(.badRequest, message: error.reason)
        }
        do {
            let trips = try await gate.run { try await history.trips(vehicle: wanted.vehicle, since: wanted.since, until: wanted.until) }
            return response(trips, type: "application/json")
        } catch let refusal as HTTPError {
            throw refusal
        } catch {
            logger.warning("Cannot read trips from the history", metadata: ["vehicle": "\(wanted.vehicle)", "error": "\(error)"])
            throw HTTPError(.serviceUnavailable, message: "the trips cannot be read now")
        }
    }

    /// `limit` as given: absent is the maximum; anything but an integer in 1…``maximumLimit``
    /// is a 400.
    package static func limit(_ text: String?) throws -> Int {
        guard let text else { return maximumLimit }
        guard text.utf8.count <= 6, let n = Int(text), (1...maximumLimit).contains(n) else {
            throw HTTPError(.badRequest, message: "limit: an integer from 1 to \(maximumLimit)")
        }
        return n
    }

    static func response(_ text: String, type: String) -> Response {
        response(Array(text.utf8), type: type)
    }

    static func response(_ bytes: [UInt8], type: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = type
        headers[.cacheControl] = "no-cache"
        // X-Content-Type-Options and the Content Security Policy: SecurityHeadersHandler, on
        // every response.
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// The SSE stream of one browser: its snapshot, then its coalesced updates until it is
    /// dropped (then `close` closes its connection), disconnects, or the server stops.
    static func events(_ feed: MapFeed, peer: String, close: @escaping @Sendable () -> Void) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        // A reverse proxy (nginx) must pass each event on at once.
        headers[.init("X-Accel-Buffering")!] = "no"
        guard let snapshot = feed.connect(now: .wallClockNow, peer: peer, close: close) else {
            return Response(status: .serviceUnavailable)
        }
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                defer { feed.disconnect(snapshot.id) }
                // `retry`: the EventSource reconnects 2 s after a loss (and gets a new snapshot).
                var first = Array("retry: 2000\n\n".utf8)
                first += MapJSON.event(
                    "snapshot", data: MapJSON.batch(snapshot.fleet.vehicles, trails: snapshot.trails, now: snapshot.now))
                try await writer.write(ByteBuffer(bytes: first))
                while let batch = await feed.next(snapshot.id) {
                    guard !batch.vehicles.isEmpty else { continue }
                    try await writer.write(ByteBuffer(bytes: MapJSON.event("update", data: MapJSON.batch(batch.vehicles, now: batch.now))))
                }
                try await writer.finish(nil)
            })
    }
}

/// The request context of the map's routes: Hummingbird's basic one, plus the client's address
/// (`ip:port`), which the log names when a slow browser is dropped, the client its failed
/// authentications count against (``PeerAddress``), its connection (closed when it is), and the
/// user the request authenticated as.
package struct MapRequestContext: AuthRequestContext {
    package var coreContext: CoreRequestContextStorage
    /// The client's address, `-` when unknown.
    package let peer: String
    /// The client as the per-client limits count it: its IPv4 address or IPv6 /64.
    package let client: String
    /// The request's connection.
    package let channel: any Channel
    /// Who the request authenticated as (``MapAccess``); `nil` before or without authentication.
    package var identity: MapUser?

    package init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
        let address = source.channel.remoteAddress
        peer = address.map { "\($0.ipAddress ?? "?"):\($0.port ?? 0)" } ?? "-"
        client = PeerAddress.key(address)
    }
}
