import FleetMap
import FleetcastTestSupport
import Foundation
import Testing

/// `fleet-watch serve`, the built executable, against a real mosquitto and real
/// `fleetcast-agent`s on the simulator (`sim:`): the page, Leaflet and the Server-Sent Events
/// fetched over real HTTP with `curl`, and the page itself driven by headless Chromium.
@Suite(.serialized) struct FleetMapServeTests {
    /// The simulated vehicles and where each starts (degrees).
    static let fleet: [(id: String, lat: Double, lon: Double)] = [("van-1", 48.851, 2.351), ("van-2", 48.861, 2.361)]

    /// A running fleet: the broker, its agents and `fleet-watch serve`.
    struct Fleet {
        let broker: TestBroker
        let agents: [TestProcess]
        let server: TestProcess
        let url: String

        func stop() async {
            await server.stop()
            for agent in agents { await agent.stop() }
        }
    }

    /// Starts one agent per vehicle (the simulator at 5 Hz) and `fleet-watch serve` on a free
    /// port, and waits until the server listens and has heard both vehicles' positions.
    static func startFleet(_ broker: TestBroker, extraArguments: [String] = []) async throws -> Fleet {
        var agents: [TestProcess] = []
        for vehicle in fleet {
            agents.append(
                try TestProcess(
                    builtProduct("fleetcast-agent"),
                    [
                        "run", "--source", "sim:?rate=5&speed=15&lat=\(vehicle.lat)&lon=\(vehicle.lon)", "--vehicle", vehicle.id,
                        "--broker", broker.url, "--state-dir", "\(broker.directory)/state-\(vehicle.id)",
                    ], directory: broker.directory, name: "agent-\(vehicle.id)", environment: agentEveryFixEnvironment))
        }
        let port = try FreePort.next()
        let server = try TestProcess(
            builtProduct("fleet-watch"),
            ["serve", "--broker", broker.url, "--listen", "127.0.0.1:\(port)", "--tiles", "none"] + extraArguments,
            directory: broker.directory, name: "serve-\(UUID().uuidString.prefix(8))")
        let running = Fleet(broker: broker, agents: agents, server: server, url: "http://127.0.0.1:\(port)")
        do {
            try await waitUntil("fleet-watch serve to listen", timeout: .seconds(20), interval: .milliseconds(50)) {
                if !server.isRunning { throw TestSupportError.processFailed(server.commandLine, status: -1, output: server.standardError) }
                return server.standardError.contains("Serving the live map")
            }
            try await waitUntil("both vehicles' positions on the server", timeout: .seconds(30), interval: .milliseconds(200)) {
                let (status, body) = try await curl(["\(running.url)/api/vehicles"], directory: broker.directory)
                guard status == 0, let vehicles = try? vehicles(in: body) else { return false }
                return fleet.allSatisfy { v in vehicles.contains { $0["id"] as? String == v.id && $0["lat"] != nil } }
            }
        } catch {
            await running.stop()
            throw error
        }
        return running
    }

    /// Runs `curl -sS` (bounded) and returns its exit status and stdout.
    static func curl(_ arguments: [String], directory: String, timeout: Duration = .seconds(20)) async throws -> (Int32, String) {
        let process = try TestProcess("/usr/bin/curl", ["-sS"] + arguments, directory: directory, name: "curl-\(UUID().uuidString)")
        defer {
            try? FileManager.default.removeItem(atPath: process.stdoutPath)
            try? FileManager.default.removeItem(atPath: process.stderrPath)
        }
        let status = try await process.waitForExit(timeout: timeout)
        return (status, process.standardOutput)
    }

    /// The `vehicles` of a batch (`/api/vehicles`, or an event's data).
    static func vehicles(in json: String) throws -> [[String: Any]] {
        let object = try #require(JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any], "\(json.prefix(300))")
        return try #require(object["vehicles"] as? [[String: Any]])
    }

    /// The events of an SSE stream: (name, data) per event.
    static func events(in stream: String) -> [(name: String, data: String)] {
        stream.components(separatedBy: "\n\n").compactMap { block in
            var name = "message", data: String?
            for line in block.split(separator: "\n") {
                if line.hasPrefix("event: ") { name = String(line.dropFirst(7)) }
                if line.hasPrefix("data: ") { data = String(line.dropFirst(6)) }
            }
            return data.map { (name, $0) }
        }
    }

    @Test func thePageLeafletAndTheEventStreamAreServedOverHTTP() async throws {
        try await withBroker { broker in
            let fleet = try await Self.startFleet(broker)
            do {
                let directory = broker.directory
                let (pageStatus, page) = try await Self.curl(["-f", "\(fleet.url)/"], directory: directory)
                #expect(pageStatus == 0)
                #expect(page.contains(#"<script src="/leaflet/leaflet.js"></script>"#) && page.contains(#"id="config""#))
                let (scriptStatus, script) = try await Self.curl(["-f", "\(fleet.url)/map.js"], directory: directory)
                #expect(scriptStatus == 0 && script.contains("new EventSource(\"/events\")"))
                #expect(!script.contains("innerHTML"))

                // Leaflet from Debian's libjs-leaflet, byte for byte; nothing outside its directory.
                let (leafletStatus, leaflet) = try await Self.curl(["-f", "\(fleet.url)/leaflet/leaflet.js"], directory: directory)
                #expect(leafletStatus == 0)
                #expect(leaflet == (try String(contentsOfFile: "\(FleetMapServer.debianLeafletDirectory)/leaflet.js", encoding: .utf8)))
                let (_, css) = try await Self.curl(["-f", "\(fleet.url)/leaflet/leaflet.css"], directory: directory)
                #expect(css.contains(".leaflet-container"))
                let (_, escape) = try await Self.curl(
                    ["--path-as-is", "\(fleet.url)/leaflet/../../../../etc/passwd"], directory: directory)
                #expect(!escape.contains("root:"))
                let (_, badLimit) = try await Self.curl(
                    ["-o", "/dev/null", "-w", "%{http_code}", "\(fleet.url)/api/vehicles?limit=0"], directory: directory)
                #expect(badLimit == "400")
                let (_, one) = try await Self.curl(["\(fleet.url)/api/vehicles?limit=1"], directory: directory)
                #expect(try Self.vehicles(in: one).count == 1)

                // The stream: a snapshot of both vehicles first, then updates that move them.
                let (_, stream) = try await Self.curl(["-N", "--max-time", "4", "\(fleet.url)/events"], directory: directory)
                let events = Self.events(in: stream)
                let snapshot = try #require(events.first)
                #expect(snapshot.name == "snapshot")
                let firstPaint = try Self.vehicles(in: snapshot.data)
                #expect(firstPaint.compactMap { $0["id"] as? String } == Self.fleet.map(\.id))
                #expect(firstPaint.allSatisfy { $0["state"] as? String == "online" && $0["lat"] is Double && $0["trail"] is [Double] })
                let updates = events.dropFirst()
                #expect(updates.count >= 2, "\(stream.prefix(2000))")
                #expect(updates.allSatisfy { $0.name == "update" })
                let moved = try updates.flatMap { try Self.vehicles(in: $0.data) }.contains { update in
                    firstPaint.contains {
                        $0["id"] as? String == update["id"] as? String
                            && ($0["lat"] as? Double != update["lat"] as? Double || $0["lon"] as? Double != update["lon"] as? Double)
                    }
                }
                #expect(moved)
                // Coalesced: one entry per vehicle per update at most.
                for update in updates {
                    let ids = try Self.vehicles(in: update.data).compactMap { $0["id"] as? String }
                    #expect(Set(ids).count == ids.count)
                }
                #expect(fleet.server.isRunning)
            } catch {
                await fleet.stop()
                throw error
            }
            await fleet.stop()
        }
    }

    /// Debian's Chromium.
    static let chromium = "/usr/bin/chromium"

    /// The page as headless Chromium has it once loaded (`--dump-dom`); the browser and
    /// everything it started are stopped afterwards.
    static func dumpDOM(_ url: String, directory: String) async throws -> String {
        let name = "chromium-\(UUID().uuidString.prefix(8))"
        let process = try TestProcess(
            chromium,
            [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=\(directory)/\(name)-profile",
                "--timeout=10000", "--dump-dom", url,
            ], directory: directory, name: name)
        _ = try await process.waitForExitOrStop(timeout: .seconds(60), grace: .seconds(1))
        // The renderer and zygote processes of its group, if any outlived it.
        await process.stop(grace: .seconds(1))
        defer { try? FileManager.default.removeItem(atPath: "\(directory)/\(name)-profile") }
        return process.standardOutput
    }

    /// The value of `name="…"` in the first tag of `html` (the page only writes attribute
    /// values without quotes or ampersands here: ids match `[A-Za-z0-9._-]`, numbers, words).
    static func attribute(_ name: String, in tag: Substring) -> String? {
        guard let start = tag.range(of: " \(name)=\"")?.upperBound, let end = tag[start...].firstIndex(of: "\"") else { return nil }
        return String(tag[start..<end])
    }

    /// The opening tags in `html` that start with `prefix`.
    static func tags(_ prefix: String, in html: String) -> [Substring] {
        html.components(separatedBy: prefix).dropFirst().map { $0.prefix { $0 != ">" } }.map { Substring(" " + $0) }
    }

    /// What a dump shows: the body's state, the list's entries and the markers' positions.
    struct PageState {
        var snapshots = 0
        var listed: [String: String] = [:]  // vehicle → status
        var markers: [String: (lat: Double, lon: Double)] = [:]

        init(_ html: String) {
            if let body = FleetMapServeTests.tags("<body", in: html).first {
                snapshots = Int(FleetMapServeTests.attribute("data-snapshots", in: body) ?? "") ?? 0
            }
            for entry in FleetMapServeTests.tags("<li ", in: html) {
                if let id = FleetMapServeTests.attribute("data-vehicle", in: entry) {
                    listed[id] = FleetMapServeTests.attribute("data-status", in: entry) ?? ""
                }
            }
            for marker in FleetMapServeTests.tags("<div class=\"leaflet-marker-icon", in: html) {
                if let id = FleetMapServeTests.attribute("data-vehicle", in: marker),
                    let lat = FleetMapServeTests.attribute("data-lat", in: marker).flatMap(Double.init),
                    let lon = FleetMapServeTests.attribute("data-lon", in: marker).flatMap(Double.init)
                {
                    markers[id] = (lat, lon)
                }
            }
        }
    }

    @Test(
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: FleetMapServeTests.chromium),
            "Debian's chromium is not installed (deploy/test.sh installs it)"))
    func headlessChromiumListsTheVehiclesAndAMarkerMoves() async throws {
        try await withBroker { broker in
            let fleet = try await Self.startFleet(broker)
            do {
                let ids = Set(Self.fleet.map(\.id))
                var first: PageState?
                try await waitUntil(
                    "the page to list both vehicles with their markers", timeout: .seconds(90), interval: .milliseconds(100)
                ) {
                    let page = PageState(try await Self.dumpDOM(fleet.url + "/", directory: broker.directory))
                    guard page.snapshots >= 1, Set(page.listed.keys) == ids, Set(page.markers.keys) == ids else { return false }
                    first = page
                    return true
                }
                let before = try #require(first)
                #expect(before.listed.values.allSatisfy { $0 == "online" }, "\(before.listed)")
                for vehicle in Self.fleet {
                    let marker = try #require(before.markers[vehicle.id])
                    // The simulator starts there and drives at 15 m/s: within a few hundred metres.
                    #expect(abs(marker.lat - vehicle.lat) < 0.05 && abs(marker.lon - vehicle.lon) < 0.05, "\(vehicle.id): \(marker)")
                }
                try await waitUntil("a marker to move on the page", timeout: .seconds(90), interval: .milliseconds(100)) {
                    let page = PageState(try await Self.dumpDOM(fleet.url + "/", directory: broker.directory))
                    return Self.fleet.contains { vehicle in
                        guard let old = before.markers[vehicle.id], let new = page.markers[vehicle.id] else { return false }
                        return old.lat != new.lat || old.lon != new.lon
                    }
                }
                #expect(fleet.server.isRunning)
            } catch {
                await fleet.stop()
                throw error
            }
            await fleet.stop()
        }
    }

    /// The page's state as the DevTools protocol reads it: connection, events received, list
    /// entries (id, status, hidden) and markers (id, lat, lon).
    static let pageStateScript = """
        JSON.stringify({
          connection: document.body.dataset.connection,
          snapshots: +document.body.dataset.snapshots,
          updates: +document.body.dataset.updates,
          listed: Array.from(document.querySelectorAll("#list li")).map(li => [li.dataset.vehicle, li.dataset.status, li.hidden]),
          markers: Array.from(document.querySelectorAll(".leaflet-marker-icon")).map(m => [m.dataset.vehicle, +m.dataset.lat, +m.dataset.lon])
        })
        """

    struct LivePageState {
        var connection = ""
        var snapshots = 0
        var updates = 0
        var listed: [String: (status: String, hidden: Bool)] = [:]
        var markers: [String: (lat: Double, lon: Double)] = [:]

        init(_ json: String) throws {
            // A plain error, not #require: a page still loading is retried, not an issue.
            guard let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else {
                throw DevToolsPage.Failure(description: "not a JSON object: \(json.prefix(200))")
            }
            connection = object["connection"] as? String ?? ""
            snapshots = object["snapshots"] as? Int ?? 0
            updates = object["updates"] as? Int ?? 0
            for entry in object["listed"] as? [[Any]] ?? [] {
                if let id = entry[0] as? String { listed[id] = (entry[1] as? String ?? "", entry[2] as? Bool ?? false) }
            }
            for marker in object["markers"] as? [[Any]] ?? [] {
                if let id = marker[0] as? String, let lat = marker[1] as? Double, let lon = marker[2] as? Double {
                    markers[id] = (lat, lon)
                }
            }
        }
    }

    @Test(
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: FleetMapServeTests.chromium),
            "Debian's chromium is not installed (deploy/test.sh installs it)"))
    func inOneLivePageMarkersMoveTheListFindsAVehicleAndFollowKeepsItCentred() async throws {
        try await withBroker { broker in
            let fleet = try await Self.startFleet(broker)
            let (chrome, page) = try await Self.openLivePage(fleet, broker: broker)
            do {
                let ids = Set(Self.fleet.map(\.id))

                // The first paint: both vehicles listed, online, with their markers.
                var first: LivePageState?
                try await waitUntil(
                    "the page to list both vehicles with their markers", timeout: .seconds(30), interval: .milliseconds(100)
                ) {
                    // While the page is still loading (no body, or its context replaced by the
                    // navigation) an evaluation may fail: not yet.
                    guard let json = try? page.evaluate(Self.pageStateScript), let state = try? LivePageState(json),
                        state.snapshots >= 1, Set(state.listed.keys) == ids, Set(state.markers.keys) == ids
                    else { return false }
                    first = state
                    return true
                }
                let before = try #require(first)
                #expect(before.connection == "open")
                #expect(before.listed.values.allSatisfy { $0.status == "online" && !$0.hidden }, "\(before.listed)")

                // Updates move a marker in the same page, with no reload and no new snapshot.
                try await waitUntil("a marker to move with the pushed updates", timeout: .seconds(30), interval: .milliseconds(100)) {
                    let state = try LivePageState(try page.evaluate(Self.pageStateScript))
                    return state.updates > 0
                        && Self.fleet.contains { vehicle in
                            guard let old = before.markers[vehicle.id], let new = state.markers[vehicle.id] else { return false }
                            return old.lat != new.lat || old.lon != new.lon
                        }
                }
                #expect(try LivePageState(try page.evaluate(Self.pageStateScript)).snapshots == before.snapshots)

                // The side list finds a vehicle as one types.
                let shown = try page.evaluate(
                    """
                    (() => {
                      const filter = document.getElementById("filter");
                      filter.value = "VAN-2";
                      filter.dispatchEvent(new Event("input"));
                      return JSON.stringify(Array.from(document.querySelectorAll("#list li")).filter(li => !li.hidden).map(li => li.dataset.vehicle));
                    })()
                    """)
                #expect(shown == #"["van-2"]"#)

                // Clicking it shows what fleet-watch knows about it.
                let detailsJSON = try page.evaluate(
                    """
                    (() => {
                      document.querySelector('#list li[data-vehicle="van-2"]').click();
                      return JSON.stringify({
                        hidden: document.getElementById("details").hidden,
                        title: document.getElementById("details-title").textContent,
                        rows: Object.fromEntries(Array.from(document.querySelectorAll("#details-list dt")).map(dt => [dt.textContent, dt.nextElementSibling.textContent]))
                      });
                    })()
                    """)
                let details = try #require(JSONSerialization.jsonObject(with: Data(detailsJSON.utf8)) as? [String: Any])
                #expect(details["hidden"] as? Bool == false && details["title"] as? String == "van-2")
                let rows = try #require(details["rows"] as? [String: String])
                #expect(rows["State"] == "online" && rows["Fix mode"] == "3D", "\(rows)")
                // What FleetState counts (a QoS 0 heading lost on the way counts too): a number.
                #expect(rows["Seq gaps"].flatMap(UInt64.init) != nil, "\(rows)")
                #expect(rows["Speed"]?.hasSuffix("m/s)") == true && rows["Satellites"].flatMap(Int.init) != nil, "\(rows)")
                #expect(rows["Age"]?.hasSuffix(" s") == true, "\(rows)")

                // Follow keeps it centred while it drives on. Zoomed in to a few metres per
                // pixel first (the click centred it), where 15 m/s would carry it tens of pixels
                // off centre within a second if the map stayed put.
                try await waitUntil("the map zoomed in to a 20 m scale or less", timeout: .seconds(30), interval: .milliseconds(300)) {
                    let scale = try page.evaluate(
                        """
                        (() => { document.querySelector(".leaflet-control-zoom-in").click(); return document.querySelector(".leaflet-control-scale-line").textContent; })()
                        """)
                    return ["1 m", "2 m", "3 m", "5 m", "10 m", "20 m"].contains(scale)
                }
                _ = try page.evaluate(
                    """
                    (() => { const f = document.getElementById("follow"); f.checked = true; f.dispatchEvent(new Event("change")); return ""; })()
                    """)
                let offCentre = """
                    (() => {
                      const marker = document.querySelector('.leaflet-marker-icon[data-vehicle="van-2"]').getBoundingClientRect();
                      const map = document.getElementById("map").getBoundingClientRect();
                      return String(Math.hypot(marker.x + marker.width / 2 - (map.x + map.width / 2), marker.y + marker.height / 2 - (map.y + map.height / 2)));
                    })()
                    """
                let updatesWhenFollowed = try LivePageState(try page.evaluate(Self.pageStateScript)).updates
                try await waitUntil("more updates", timeout: .seconds(30), interval: .milliseconds(100)) {
                    try LivePageState(try page.evaluate(Self.pageStateScript)).updates >= updatesWhenFollowed + 8
                }
                let distance = try #require(Double(try page.evaluate(offCentre)))
                #expect(distance < 3, "van-2 is \(distance) px off the map's centre")
                #expect(fleet.server.isRunning)
                let scriptErrors = try page.scriptErrors()
                #expect(scriptErrors.isEmpty, "the page's script reported errors: \(scriptErrors)")
            } catch {
                page.recordScriptErrors()
                await chrome.stop(grace: .seconds(1))
                await fleet.stop()
                throw error
            }
            await chrome.stop(grace: .seconds(1))
            await fleet.stop()
        }
    }

    /// Starts headless Chromium on `fleet`'s page with its DevTools endpoint on a free port,
    /// and connects to the page; the caller stops `chrome`.
    static func openLivePage(_ fleet: Fleet, broker: TestBroker) async throws -> (chrome: TestProcess, page: DevToolsPage) {
        let debugPort = try FreePort.next()
        let profile = "\(broker.directory)/chromium-live-profile-\(UUID().uuidString.prefix(8))"
        let chrome = try TestProcess(
            Self.chromium,
            [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=\(profile)",
                "--window-size=1200,800", "--remote-debugging-port=\(debugPort)", fleet.url + "/",
            ], directory: broker.directory, name: "chromium-live-\(UUID().uuidString.prefix(8))")
        do {
            var path: String?
            try await waitUntil("Chromium's DevTools endpoint listing the page", timeout: .seconds(60), interval: .milliseconds(100)) {
                if !chrome.isRunning {
                    throw TestSupportError.processFailed(chrome.commandLine, status: -1, output: chrome.standardError)
                }
                let (status, list) = try await Self.curl(["http://127.0.0.1:\(debugPort)/json/list"], directory: broker.directory)
                guard status == 0, let pages = try? JSONSerialization.jsonObject(with: Data(list.utf8)) as? [[String: Any]] else {
                    return false
                }
                let page = pages.first { $0["type"] as? String == "page" && ($0["url"] as? String)?.hasPrefix(fleet.url) == true }
                path = (page?["webSocketDebuggerUrl"] as? String).flatMap { URL(string: $0)?.path }
                return path != nil
            }
            let page = try DevToolsPage(port: debugPort, path: try #require(path))
            try page.watchScriptErrors()
            return (chrome, page)
        } catch {
            await chrome.stop(grace: .seconds(1))
            throw error
        }
    }

    @Test func aMissingLeafletDirectoryIsRefusedAtStartUp() async throws {
        let directory = try makeTemporaryDirectory(prefix: "fleet-watch-serve")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let process = try TestProcess(
            builtProduct("fleet-watch"), ["serve", "--broker", "mqtt://127.0.0.1:1", "--leaflet-dir", "\(directory)/nowhere"],
            directory: directory, name: "serve-no-leaflet")
        let status = try await process.waitForExit(timeout: .seconds(30))
        #expect(status != 0)
        #expect(process.standardError.contains("Leaflet not found: \(directory)/nowhere"), "\(process.standardError)")
    }

    @Test func badServeArgumentsAreRefusedWithAReason() async throws {
        let directory = try makeTemporaryDirectory(prefix: "fleet-watch-serve")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cases: [([String], String)] = [
            (["--listen", "8080"], "--listen"),
            (["--listen", "127.0.0.1:99999"], "--listen"),
            (["--tiles", "javascript:alert(1)"], "--tiles"),
            (["--stale-after", "0"], "--stale-after"),
        ]
        for (arguments, reason) in cases {
            let process = try TestProcess(
                builtProduct("fleet-watch"), ["serve", "--broker", "mqtt://x"] + arguments, directory: directory,
                name: "serve-args-\(UUID().uuidString.prefix(8))")
            let status = try await process.waitForExit(timeout: .seconds(30))
            #expect(status != 0, "\(arguments)")
            #expect(process.standardError.contains(reason), "\(arguments): \(process.standardError)")
        }
    }
}
