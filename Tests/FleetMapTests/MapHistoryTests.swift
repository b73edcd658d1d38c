import FleetHistory
import FleetHistoryCore
import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import Logging
import PostgresNIO
import Testing

/// `fleet-watch serve --postgres`: a vehicle's recorded track, read from a real PostgreSQL that
/// holds what `fleet-watch record` writes, over `/api/track` and drawn by the page in headless
/// Chromium when the user picks a time range.
@Suite(.serialized) struct MapHistoryTests {
    /// A new database with the track schema, holding the records `makeRecords` makes from the
    /// time once the database exists (milliseconds since 1970).
    static func trackDatabase(
        _ postgres: TestPostgres, holding makeRecords: (_ now: Int64) -> [TrackRecord]
    ) async throws -> String {
        let database = try await postgres.createDatabase()
        let location = try PostgresLocation(parsing: postgres.url(database: database) + "?sslmode=disable")
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let client = PostgresClient(configuration: location.clientConfiguration, backgroundLogger: logger)
        let records = makeRecords(Int64(Date().timeIntervalSince1970) * 1000)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            let store = TrackStore(client: client, logger: logger)
            try await store.migrate()
            try await store.insert(records)
        }
        return database
    }

    /// A database with the track schema and 50 fixes of van-1, one a second, the last a minute ago.
    static func recordedTrack(_ postgres: TestPostgres) async throws -> (database: String, first: UTCTimestamp) {
        var first = UTCTimestamp(millisecondsSince1970: 0)
        let database = try await trackDatabase(postgres) { now in
            first = UTCTimestamp(millisecondsSince1970: now - 110_000)
            return (0..<50).map { i in
                TrackRecord(
                    vehicle: VehicleID("van-1")!, seq: UInt64(i + 1),
                    payload: .fix(
                        Fix(
                            time: UTCTimestamp(millisecondsSince1970: first.millisecondsSince1970 + Int64(i) * 1000),
                            latitude: 48.80 + Double(i) * 0.0001, longitude: 2.30, mode: .threeD)))
            }
        }
        return (database, first)
    }

    /// `fleet-watch serve` reading the history in `database` (the password in a file of the
    /// server's own: a URL with it is refused, `ps` shows it) with `extraArguments`, for `body`;
    /// stopped after it, whether it throws or not.
    static func withHistoryServer(
        _ broker: TestBroker, postgres: TestPostgres, database: String, extraArguments: [String] = [],
        sourceLocation: SourceLocation = #_sourceLocation, _ body: (FleetMapServeTests.Fleet) async throws -> Void
    ) async throws {
        let passwordFile = "\(broker.directory)/postgres.password"
        #expect(
            FileManager.default.createFile(
                atPath: passwordFile, contents: Data((postgres.password ?? "").utf8), attributes: [.posixPermissions: 0o600]),
            sourceLocation: sourceLocation)
        let fleet = try await FleetMapServeTests.startFleet(
            broker,
            extraArguments: [
                "--postgres", "postgres://\(postgres.user)@127.0.0.1:\(postgres.port)/\(database)?sslmode=disable",
                "--postgres-password-file", passwordFile,
            ] + extraArguments)
        do {
            try await body(fleet)
        } catch {
            await fleet.stop()
            throw error
        }
        await fleet.stop()
    }

    /// `/api/<api>` of `fleet` asked for van-1 from `until` back to `since`: a 400.
    static func expectReversedRangeRefused(
        _ fleet: FleetMapServeTests.Fleet, api: String, since: String, until: String, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let (_, code) = try await FleetMapServeTests.curl(
            ["-o", "/dev/null", "-w", "%{http_code}", "\(fleet.url)/api/\(api)?vehicle=van-1&since=\(until)&until=\(since)"],
            directory: fleet.broker.directory)
        #expect(code == "400", sourceLocation: sourceLocation)
    }

    /// `fleet`'s page in headless Chromium, once van-1 is listed with its history form: van-1
    /// selected and the form's button `button` clicked, then `body`, then no script error;
    /// Chromium stopped after it, whether it throws or not.
    static func withHistoryPage(
        _ fleet: FleetMapServeTests.Fleet, broker: TestBroker, clicking button: String,
        sourceLocation: SourceLocation = #_sourceLocation, _ body: (DevToolsPage) async throws -> Void
    ) async throws {
        let (chrome, page) = try await FleetMapServeTests.openLivePage(fleet, broker: broker)
        do {
            try await waitUntil("van-1 listed with its history form", timeout: .seconds(60), interval: .milliseconds(100)) {
                (try? page.evaluate(
                    """
                    (() => { const li = document.querySelector('#list li[data-vehicle="van-1"]');
                      if (!li || document.getElementById("history").hidden) return "no";
                      li.click(); document.getElementById("\(button)").click(); return "yes"; })()
                    """)) == "yes"
            }
            try await body(page)
            let scriptErrors = try page.scriptErrors()
            #expect(scriptErrors.isEmpty, "the page's script reported errors: \(scriptErrors)", sourceLocation: sourceLocation)
        } catch {
            page.recordScriptErrors(sourceLocation: sourceLocation)
            await chrome.stop(grace: .seconds(1))
            throw error
        }
        await chrome.stop(grace: .seconds(1))
    }

    @Test(
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: FleetMapServeTests.chromium),
            "Debian's chromium is not installed (deploy/test.sh installs it)"))
    func theMapDrawsAVehiclesRecordedTrackOverTheChosenTime() async throws {
        try await withPostgres { postgres in
            let (database, first) = try await Self.recordedTrack(postgres)
            try await withBroker { broker in
                try await Self.withHistoryServer(broker, postgres: postgres, database: database) { fleet in
                    // Over HTTP: the fixes of the range, oldest first, flat; a bad query is a 400.
                    let since = UTCTimestamp(millisecondsSince1970: first.millisecondsSince1970 + 10_000).iso8601
                    let until = UTCTimestamp(millisecondsSince1970: first.millisecondsSince1970 + 20_000).iso8601
                    let (status, body) = try await FleetMapServeTests.curl(
                        ["\(fleet.url)/api/track?vehicle=van-1&since=\(since)&until=\(until)"], directory: broker.directory)
                    #expect(status == 0)
                    let track = try #require(JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any], "\(body)")
                    let points = try #require(track["points"] as? [Double])
                    #expect(points.count == 10 * 3, "seconds 10 to 19")
                    #expect(points.first == 48.801 && points[2] == Double(first.millisecondsSince1970 + 10_000))
                    #expect(track["truncated"] as? Bool == false)
                    try await Self.expectReversedRangeRefused(fleet, api: "track", since: since, until: until)

                    // In the page: select van-1, show its track over the default range (the last two hours).
                    try await Self.withHistoryPage(fleet, broker: broker, clicking: "history-show") { page in
                        try await waitUntil("the recorded track drawn", timeout: .seconds(30), interval: .milliseconds(100)) {
                            try page.evaluate(#"document.body.getAttribute("data-history-points") || """#) == "50"
                        }
                        #expect(try page.evaluate(#"document.body.getAttribute("data-history-vehicle")"#) == "van-1")
                        #expect(try page.evaluate(#"document.getElementById("history-status").textContent"#) == "50 fixes")
                        _ = try page.evaluate(#"(() => { document.getElementById("history-clear").click(); return ""; })()"#)
                        #expect(try page.evaluate(#"String(document.body.hasAttribute("data-history-points"))"#) == "false")
                    }
                }
            }
        }
    }

    @Test func historyReadsAnswer503AtTheirDeadlineWhilePostgreSQLIsFrozenAndTheCapHolds() async throws {
        try await withPostgres { postgres in
            let (database, first) = try await Self.recordedTrack(postgres)
            try await withBroker { broker in
                try await Self.withHistoryServer(broker, postgres: postgres, database: database) { fleet in
                    let until = UTCTimestamp(millisecondsSince1970: first.millisecondsSince1970 + 60_000).iso8601
                    let url = "\(fleet.url)/api/track?vehicle=van-1&since=\(first.iso8601)&until=\(until)"
                    /// The status and the body of one request; curl gives up after 40 s ("000").
                    @Sendable func ask() async throws -> (code: String, body: String) {
                        let (_, out) = try await FleetMapServeTests.curl(
                            ["--max-time", "40", "-w", "\n%{http_code}", url], directory: broker.directory, timeout: .seconds(60))
                        return (String(out.split(separator: "\n").last ?? ""), out)
                    }
                    #expect(try await ask().code == "200")

                    // Frozen, as a hung host is: no query is answered, none is refused.
                    postgres.pause()
                    defer { postgres.resume() }
                    // Five at once: four reads get their deadline (10 s), then 503; the fifth is
                    // refused at once. Before, the four waited as long as the server did.
                    let answers = try await withThrowingTaskGroup(of: (code: String, body: String).self) { group in
                        for _ in 0..<5 { group.addTask { try await ask() } }
                        return try await group.reduce(into: []) { $0.append($1) }
                    }
                    #expect(answers.map(\.code) == Array(repeating: "503", count: 5), "\(answers)")
                    #expect(answers.filter { $0.body.contains("did not answer in time") }.count == 4, "\(answers)")
                    #expect(answers.filter { $0.body.contains("too many history reads") }.count == 1, "\(answers)")
                    // Still frozen: the next read is answered too (its own deadline, or the cap
                    // while queries given up on are still held), never left hanging.
                    let meanwhile = try await ask()
                    #expect(meanwhile.code == "503", "\(meanwhile)")

                    postgres.resume()
                    try await waitUntil("the track served again", timeout: .seconds(60), interval: .milliseconds(500)) {
                        try await ask().code == "200"
                    }
                }
            }
        }
    }

    /// A database holding the generated 29-minute drive (issue 34) as van-1's fixes, begun 90
    /// minutes ago, and nothing derived yet: `/api/trips` derives it from the fixes.
    static func recordedDrive(_ postgres: TestPostgres) async throws -> String {
        try await trackDatabase(postgres) { now in
            let drive = GeneratedDrive.threeLegs(start: UTCTimestamp(millisecondsSince1970: now - now % 1000 - 90 * 60_000))
            return drive.samples.enumerated().map { index, sample in
                TrackRecord(
                    vehicle: VehicleID("van-1")!, seq: UInt64(index + 1),
                    payload: .fix(
                        Fix(
                            time: sample.time, latitude: sample.latitude, longitude: sample.longitude, speed: sample.speed,
                            mode: .threeD)))
            }
        }
    }

    @Test(
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: FleetMapServeTests.chromium),
            "Debian's chromium is not installed (deploy/test.sh installs it)"))
    func theMapListsADaysTripsAndStopsDrawsTheZonesAndPlaysATripBack() async throws {
        try await withPostgres { postgres in
            let database = try await Self.recordedDrive(postgres)
            try await withBroker { broker in
                let zonesFile = "\(broker.directory)/zones.geojson"
                try GeneratedDrive.depotAndCustomerZones.write(toFile: zonesFile, atomically: true, encoding: .utf8)
                try await Self.withHistoryServer(
                    broker, postgres: postgres, database: database, extraArguments: ["--zones", zonesFile]
                ) { fleet in
                    // Over HTTP: the drive's five segments, the last trip open; the zones.
                    let since = UTCTimestamp(millisecondsSince1970: Int64(Date().timeIntervalSince1970 * 1000) - 3 * 3_600_000).iso8601
                    let until = UTCTimestamp.wallClockNow.iso8601
                    let (status, body) = try await FleetMapServeTests.curl(
                        ["\(fleet.url)/api/trips?vehicle=van-1&since=\(since)&until=\(until)"], directory: broker.directory)
                    #expect(status == 0)
                    let segments = try #require(JSONSerialization.jsonObject(with: Data(body.utf8)) as? [[String: Any]], "\(body)")
                    #expect(segments.map { $0["kind"] as? String ?? "?" } == ["trip", "stop", "trip", "stop", "trip"], "\(body)")
                    let (_, zones) = try await FleetMapServeTests.curl(["\(fleet.url)/api/zones"], directory: broker.directory)
                    #expect(zones.contains(#""name":"Depot","polygon":"#) && zones.contains(#""name":"Customer","circle":"#), "\(zones)")
                    try await Self.expectReversedRangeRefused(fleet, api: "trips", since: since, until: until)

                    // In the page: van-1's trips of the last two hours, listed and marked; the
                    // zones drawn; the first trip played.
                    try await Self.withHistoryPage(fleet, broker: broker, clicking: "history-trips") { page in
                        try await waitUntil("the trips listed", timeout: .seconds(30), interval: .milliseconds(100)) {
                            try page.evaluate(#"document.body.getAttribute("data-trips") || """#) == "3"
                        }
                        #expect(try page.evaluate(#"document.body.getAttribute("data-stops")"#) == "2")
                        #expect(try page.evaluate(##"String(document.querySelectorAll("#trips li").length)"##) == "5")
                        #expect(try page.evaluate(#"document.body.getAttribute("data-zones") || """#) == "2")
                        #expect(try page.evaluate(##"document.querySelector("#trips li").textContent"##).contains("4.49 km"))
                        _ = try page.evaluate(##"(() => { document.querySelector('#trips li[data-kind="trip"]').click(); return ""; })()"##)
                        try await waitUntil("the first trip loaded for playback", timeout: .seconds(30), interval: .milliseconds(100)) {
                            Int(try page.evaluate(#"document.body.getAttribute("data-playback-points") || "0""#)) ?? 0 >= 290
                        }
                        #expect(try page.evaluate(#"document.body.getAttribute("data-playback-index")"#) == "0")
                        _ = try page.evaluate(#"(() => { document.getElementById("playback-play").click(); return ""; })()"#)
                        try await waitUntil("the marker moving along the trip", timeout: .seconds(30), interval: .milliseconds(100)) {
                            Int(try page.evaluate(#"document.body.getAttribute("data-playback-index") || "0""#)) ?? 0 >= 100
                        }
                        #expect(try page.evaluate(#"document.body.getAttribute("data-playback-state")"#) == "playing")
                        // The time slider moves the marker too.
                        _ = try page.evaluate(
                            #"(() => { const s = document.getElementById("playback-play"); s.click(); const r = document.getElementById("playback-time"); r.value = "42"; r.dispatchEvent(new Event("input")); return ""; })()"#
                        )
                        #expect(try page.evaluate(#"document.body.getAttribute("data-playback-state")"#) == "paused")
                        #expect(try page.evaluate(#"document.body.getAttribute("data-playback-index")"#) == "42")
                        // A picture of it: FLEETCAST_SCREENSHOT names where to keep it (docs/images).
                        let (answer, _) = try page.call("Page.captureScreenshot", ["format": "png"])
                        let encoded = try #require((answer["result"] as? [String: Any])?["data"] as? String)
                        let png = try #require(Data(base64Encoded: encoded))
                        #expect(png.count > 10_000 && png.prefix(4) == Data([0x89, 0x50, 0x4E, 0x47]))
                        if let path = ProcessInfo.processInfo.environment["FLEETCAST_SCREENSHOT"] {
                            try png.write(to: URL(fileURLWithPath: path))
                        }
                    }
                }
            }
        }
    }
}
