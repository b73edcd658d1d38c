import FleetCore
import FleetMap
import FleetProtocol
import FleetWatch
import FleetcastTestSupport
import Foundation
import GNSS
import InMemoryLogging
import Logging
import Testing

/// The JSON the map page receives, parsed back with Foundation's parser (not the writer under
/// test), and the feed that produces it.
struct MapJSONTests {
    /// 2026-01-02T03:04:05Z.
    let time = UTCTimestamp(year: 2026, month: 1, day: 2, hour: 3, minute: 4, second: 5)!

    func later(_ seconds: Int64) -> UTCTimestamp {
        UTCTimestamp(millisecondsSince1970: time.millisecondsSince1970 + seconds * 1000)
    }

    func fix(lat: Double, lon: Double = -3.25, at time: UTCTimestamp, track: Double? = nil) -> Fix {
        Fix(time: time, latitude: lat, longitude: lon, speed: 12.5, track: track, mode: .threeD, satellitesUsed: 9)
    }

    func object(_ bytes: [UInt8]) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any], "\(String(decoding: bytes, as: UTF8.self))")
    }

    @Test func aVehicleCarriesWhatTheDetailsPanelShowsAndLeavesOutWhatIsUnknown() throws {
        var fleet = FleetState()
        let van = VehicleID("van-7")!
        fleet.apply(.status(VehicleStatus(vehicle: van, state: .online)), at: time)
        fleet.apply(.fix(van, seq: 1, fix(lat: 48.5, at: time)), at: time)
        fleet.apply(.fix(van, seq: 4, fix(lat: 48.6, at: later(1), track: 90)), at: later(2))  // seq 2 and 3 missing
        fleet.apply(.heading(van, seq: 5, Heading(time: later(1), trueHeading: 271.25, source: .hdt)), at: later(2))
        let snapshot = try #require(fleet[van])
        let v = try object(MapJSON.vehicle(snapshot, now: later(2)))
        #expect(v["id"] as? String == "van-7")
        #expect(v["lat"] as? Double == 48.6 && v["lon"] as? Double == -3.25)
        #expect(v["hdg"] as? Double == 271.3)  // the true heading wins over the track; 1 decimal
        #expect(v["spd"] as? Double == 12.5 && v["sats"] as? Int == 9 && v["mode"] as? Int == 3)
        #expect(v["t"] as? Int64 == later(1).millisecondsSince1970)
        #expect(v["state"] as? String == "online")
        #expect(v["seen"] as? Int64 == later(2).millisecondsSince1970)
        #expect(v["gaps"] as? Int == 2)
        #expect(v["trail"] == nil)

        // A vehicle heard only through its status: no position, no heading, no state guessed.
        var other = FleetState()
        other.apply(.status(VehicleStatus(vehicle: van, state: .offline)), at: time)
        let bare = try object(MapJSON.vehicle(try #require(other[van]), now: time))
        #expect(Set(bare.keys) == ["id", "state", "seen", "gaps"])
        #expect(bare["state"] as? String == "offline")
    }

    @Test func theTrackStandsInForAMissingHeading() throws {
        var fleet = FleetState()
        let van = VehicleID("van-7")!
        fleet.apply(.fix(van, seq: 1, fix(lat: 48.5, at: time, track: 45)), at: time)
        #expect(try object(MapJSON.vehicle(try #require(fleet[van]), now: time))["hdg"] as? Double == 45)
    }

    @Test func aSnapshotBatchCarriesTheServerClockAndEachTrailAsTriplets() throws {
        var fleet = FleetState()
        var trails = VehicleTrails(window: .seconds(60))
        for (vehicle, lat) in [("bus-1", 10.0), ("van-7", 48.5)] {
            let id = VehicleID(vehicle)!
            for second in [0, 30, 59] as [Int64] {
                let f = fix(lat: lat + Double(second) / 1000, at: later(second))
                fleet.apply(.fix(id, seq: MessageNumber(seq: UInt64(second + 1)), f), at: later(second))
                trails.record(f, of: id)
            }
        }
        let batch = try object(MapJSON.batch(fleet.vehicles, trails: trails, now: later(60)))
        #expect(batch["now"] as? Int64 == later(60).millisecondsSince1970)
        let vehicles = try #require(batch["vehicles"] as? [[String: Any]])
        #expect(vehicles.map { $0["id"] as? String } == ["bus-1", "van-7"])
        let trail = try #require(vehicles[1]["trail"] as? [Double])
        #expect(trail == [48.5, -3.25, -60, 48.53, -3.25, -30, 48.559, -3.25, -1])
        // Without trails (updates, /api/vehicles): none.
        let plain = try object(MapJSON.batch(fleet.vehicles, now: later(60)))
        #expect((plain["vehicles"] as? [[String: Any]])?.allSatisfy { $0["trail"] == nil } == true)
    }

    @Test func aTrailKeepsTheWindowAndAtMostSixtySpacedPoints() throws {
        var trails = VehicleTrails(window: .seconds(60))
        let van = VehicleID("van-7")!
        // 10 Hz for two minutes.
        for tenth in 0..<1200 as Range<Int64> {
            let at = UTCTimestamp(millisecondsSince1970: time.millisecondsSince1970 + tenth * 100)
            trails.record(fix(lat: 48, at: at), of: van)
        }
        let points = trails[van]
        #expect(points.count <= VehicleTrails.maximumPoints)
        #expect(points.count >= VehicleTrails.maximumPoints - 1)
        let newest = try #require(points.last).millisecondsSince1970
        #expect(points.allSatisfy { newest - $0.millisecondsSince1970 <= 60_000 })
        #expect(zip(points, points.dropFirst()).allSatisfy { $1.millisecondsSince1970 - $0.millisecondsSince1970 >= 1000 })
        trails.prune { $0 != van }
        #expect(trails.count == 0)
    }

    @Test func anEventIsOneDataLineWhateverTheVehicleIDHolds() throws {
        // The contract refuses such ids at the agent; the map must not trust that.
        var fleet = FleetState(topics: .default)
        fleet.apply(.status(VehicleStatus(vehicle: VehicleID("van-7")!, state: .online)), at: time)
        let frame = String(
            decoding: MapJSON.event("update", data: Array(#"{"id":"a\nb\r","x":"</script><img src=x>"}"#.utf8)), as: UTF8.self)
        #expect(frame.hasPrefix("event: update\ndata: {"))
        #expect(frame.hasSuffix("}\n\n"))

        let escaped = String(decoding: MapJSON.batch(fleet.vehicles, now: time), as: UTF8.self)
        let event = String(decoding: MapJSON.event("snapshot", data: Array(escaped.utf8)), as: UTF8.self)
        #expect(event.split(separator: "\n", omittingEmptySubsequences: false).count == 4)  // event, data, blank, end
    }

    @Test func thePageConfigurationCannotCloseItsScriptElement() throws {
        let text = MapJSON.pageConfiguration(
            tiles: "https://tiles.example/{z}/{x}/{y}.png?</script><script>alert(1)</script>", attribution: "© OpenStreetMap contributors",
            staleAfter: .seconds(30), trailWindow: .seconds(300), flushInterval: .milliseconds(250))
        #expect(!text.contains("<"))
        let configuration = try object(Array(text.utf8))
        #expect(configuration["tiles"] as? String == "https://tiles.example/{z}/{x}/{y}.png?</script><script>alert(1)</script>")
        #expect(configuration["attribution"] as? String == "© OpenStreetMap contributors")
        #expect(configuration["staleAfterMs"] as? Int == 30_000 && configuration["trailMs"] as? Int == 300_000)
        #expect(configuration["flushMs"] as? Int == 250)
        let none = try object(
            Array(
                MapJSON.pageConfiguration(
                    tiles: nil, attribution: nil, staleAfter: .seconds(5), trailWindow: .seconds(60), flushInterval: .milliseconds(100)
                ).utf8))
        #expect(none["tiles"] == nil)
    }

    @Test func theLimitParameterIsBounded() throws {
        #expect(try FleetMapServer.limit(nil) == FleetMapServer.maximumLimit)
        #expect(try FleetMapServer.limit("25") == 25)
        for bad in ["0", "-1", "100001", "abc", "", "1e3", String(repeating: "9", count: 40)] {
            #expect(throws: (any Error).self, "\(bad)") { try FleetMapServer.limit(bad) }
        }
    }

    @Test func aTrackRequestIsCheckedAndItsAnswerIsFlatAndBounded() throws {
        let request = try MapTrackRequest(vehicle: "van-1", since: "2026-11-24T08:00:00Z", until: "2026-11-24T10:00:00.500Z")
        #expect(request.vehicle.rawValue == "van-1")
        #expect(request.until.millisecondsSince1970 - request.since.millisecondsSince1970 == 7_200_500)
        let refused: [(String?, String?, String?)] = [
            (nil, "2026-11-24T08:00:00Z", "2026-11-24T10:00:00Z"), ("van/1", "2026-11-24T08:00:00Z", "2026-11-24T10:00:00Z"),
            (String(repeating: "v", count: 65), "2026-11-24T08:00:00Z", "2026-11-24T10:00:00Z"),
            ("van-1", "yesterday", "2026-11-24T10:00:00Z"), ("van-1", "2026-11-24T08:00:00Z", nil),
            ("van-1", "2026-11-24T10:00:00Z", "2026-11-24T08:00:00Z"), ("van-1", "2026-10-01T00:00:00Z", "2026-11-24T00:00:00Z"),
        ]
        for (vehicle, since, until) in refused {
            #expect(throws: MapTrackRequest.Invalid.self, "\(String(describing: vehicle)) \(String(describing: since))") {
                try MapTrackRequest(vehicle: vehicle, since: since, until: until)
            }
        }
        let t = UTCTimestamp(millisecondsSince1970: 1_795_000_000_000)
        let json = MapTrackRequest.json(
            vehicle: request.vehicle,
            points: [
                MapTrackPoint(latitude: 48.8512345678, longitude: -2.35, time: t), MapTrackPoint(latitude: 0.00001, longitude: 0, time: t),
            ])
        let object = try #require(JSONSerialization.jsonObject(with: Data(json)) as? [String: Any])
        #expect(object["vehicle"] as? String == "van-1")
        #expect(object["points"] as? [Double] == [48.851235, -2.35, 1_795_000_000_000, 0.00001, 0, 1_795_000_000_000])
        #expect(object["truncated"] as? Bool == false)
        let many = Array(repeating: MapTrackPoint(latitude: 1, longitude: 2, time: t), count: MapTrackRequest.maximumPoints + 1)
        let cut = try #require(
            JSONSerialization.jsonObject(with: Data(MapTrackRequest.json(vehicle: request.vehicle, points: many))) as? [String: Any])
        #expect((cut["points"] as? [Double])?.count == MapTrackRequest.maximumPoints * 3)
        #expect(cut["truncated"] as? Bool == true)
    }
}

/// The feed: a browser's snapshot and queue are taken together, updates are coalesced, and a
/// browser that stops reading is dropped and logged.
struct MapFeedTests {
    let time = UTCTimestamp(year: 2026, month: 1, day: 2, hour: 3, minute: 4, second: 5)!

    func fixEvent(_ vehicle: String, seq: UInt64, lat: Double) -> FleetEvent {
        .fix(
            VehicleID(vehicle)!, seq: MessageNumber(seq: seq),
            Fix(
                time: UTCTimestamp(millisecondsSince1970: time.millisecondsSince1970 + Int64(seq) * 1000),
                latitude: lat, longitude: 2, mode: .threeD))
    }

    @Test func aBrowserGetsTheFleetAtOnceThenOnlyWhatChangedCoalesced() async throws {
        let feed = MapFeed(logger: Logger(label: "test"))
        feed.apply(fixEvent("van-7", seq: 1, lat: 48.5), at: time)
        let snapshot = try #require(feed.connect(now: time))
        #expect(snapshot.fleet.vehicles.map(\.vehicle.rawValue) == ["van-7"])
        #expect(snapshot.trails[VehicleID("van-7")!].count == 1)

        for seq in 2...5 as ClosedRange<UInt64> { feed.apply(fixEvent("van-7", seq: seq, lat: 48.5 + Double(seq) / 100), at: time) }
        feed.apply(fixEvent("bus-1", seq: 1, lat: 10), at: time)
        let received = Locked<MapFeed.Batch??>(nil)
        let waiting = Task {
            received.withLock { $0 = .some(nil) }; let b = await feed.next(snapshot.id); received.withLock { $0 = b }
        }
        // A flush hands the batch to the waiting writer; flush until it has taken it (the task
        // may not be waiting yet at the first flush).
        try await waitUntil("the batch delivered") {
            feed.flush(now: time)
            return received.withLock { $0??.vehicles.isEmpty == false }
        }
        await waiting.value
        let batch = try #require(received.withLock { $0 ?? nil })
        #expect(batch.vehicles.map(\.vehicle.rawValue) == ["van-7", "bus-1"])
        #expect(batch.vehicles.first?.fix?.latitude == 48.55)  // its state at the flush
        feed.disconnect(snapshot.id)
        #expect(await feed.next(snapshot.id) == nil)
    }

    @Test func aBrowserThatStopsReadingIsDroppedAndLogged() async throws {
        let memory = InMemoryLogHandler()
        let feed = MapFeed(
            limits: BrowserQueueLimits(maximumPending: 100, maximumStalledFlushes: 2), logger: Logger(label: "test") { _ in memory })
        let snapshot = try #require(feed.connect(now: time, peer: "127.0.0.1:40000"))
        for flush in 1...3 {
            feed.apply(fixEvent("van-7", seq: UInt64(flush), lat: 48), at: time)
            feed.flush(now: time)
        }
        #expect(feed.browserCount == 0)
        let drop = try #require(memory.entries.first { $0.message.description == "Dropped a slow browser" })
        #expect(drop.level == .info)
        #expect(drop.metadata["http.peer"]?.description == "127.0.0.1:40000")
        #expect(drop.metadata["map.reason"]?.description == "stalled" && drop.metadata["map.pending"]?.description == "1")
        #expect(await feed.next(snapshot.id) == nil)
    }

    @Test func cancellingAWaitingWriterEndsItsBrowser() async throws {
        let feed = MapFeed(logger: Logger(label: "test"))
        let snapshot = try #require(feed.connect(now: time))
        let waiting = Task { await feed.next(snapshot.id) }
        waiting.cancel()
        #expect(await waiting.value == nil)
        #expect(feed.browserCount == 0)
    }

    @Test func finishingTheFeedEndsEveryBrowser() async throws {
        let feed = MapFeed(logger: Logger(label: "test"))
        let snapshot = try #require(feed.connect(now: time))
        let waiting = Task { await feed.next(snapshot.id) }
        // Whether the writer waits already or asks after the finish, its stream ends.
        feed.finish()
        #expect(await waiting.value == nil)
        #expect(feed.connect(now: time) == nil)
    }
}
