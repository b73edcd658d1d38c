import FleetCore
import FleetProtocol
import FleetcastTestSupport
import GNSS
import MQTTCore
import Testing

/// OwnTracks' JSON format, `_type=location`, as its booklet defines it:
/// https://owntracks.org/booklet/tech/json/ (source: github.com/owntracks/booklet, docs/tech/json.md).
/// Elements and units checked here, from that page: `tst` "UNIX epoch timestamp in seconds of the
/// location fix (integer/epoch/required)"; `lat`, `lon` "(float/degree/required)"; `acc` "Accuracy
/// of the reported location in meters (integer/meters)"; `alt` "Altitude measured above sea level
/// (integer/meters)"; `vac` "vertical accuracy of the alt element (integer/meters)"; `vel`
/// "velocity (integer/kmh)"; `cog` "Course over ground (integer/degree)"; `tid` "Tracker ID used to
/// display the initials of a user (string)", which "defaults to the last two characters of the
/// topic"; and "The acc, alt, cog, vac, vel elements are only added if they are not zero".
/// Topics: the apps publish `_type=location` to `owntracks/user/device`.
@Suite struct OwnTracksTranslatorTests {
    let van = VehicleID("van-7")!
    /// 2026-01-02T03:04:05.900Z: 1767323045.9 s since 1970.
    let time = UTCTimestamp(year: 2026, month: 1, day: 2, hour: 3, minute: 4, second: 5, millisecond: 900)!

    func fix(speed: Double? = 10, track: Double? = nil, eph: Double? = 4.6, at time: UTCTimestamp? = nil) -> Fix {
        Fix(
            time: time ?? self.time, latitude: 48.123456789, longitude: -3.25, altitudeHAE: 170.2, altitudeMSL: 121.6,
            speed: speed, track: track, mode: .threeD, satellitesUsed: 9, eph: eph, epv: 7.4)
    }

    func translator() throws -> OwnTracksTranslator { try OwnTracksTranslator(user: "acme") }

    @Test func aFixBecomesARetainedQoS1LocationWithTheBookletsElementsAndUnits() throws {
        var t = try translator()
        let messages = t.messages(for: .fix(van, seq: 4, fix(track: 271.6)))
        let message = try #require(messages.first)
        #expect(messages.count == 1)
        #expect(message.topic == "owntracks/acme/van-7")
        #expect(message.retain && message.qos == .atLeastOnce)

        let text = String(decoding: message.payload, as: UTF8.self)
        let o = try jsonObject(message)
        #expect(o["_type"] as? String == "location")
        #expect(o["tid"] as? String == "n7")
        #expect(o["tst"] as? Int == 1_767_323_045)  // seconds, rounded down: not 1767323046
        #expect(o["lat"] as? Double == 48.1234568)  // degrees, 7 decimals (about 1 cm)
        #expect(o["lon"] as? Double == -3.25)
        #expect(o["acc"] as? Int == 5)  // eph 4.6 m
        #expect(o["alt"] as? Int == 122)  // above sea level: altMSL, not altHAE
        #expect(o["vac"] as? Int == 7)  // epv 7.4 m
        #expect(o["vel"] as? Int == 36)  // 10 m/s = 36 km/h
        #expect(o["cog"] as? Int == 272)  // the fix's track
        #expect(Set(o.keys) == ["_type", "tid", "tst", "lat", "lon", "acc", "alt", "vac", "vel", "cog"])
        for key in ["tst", "acc", "alt", "vac", "vel", "cog"] {
            #expect(isIntegerToken(rawToken(key, in: text)), "\(key) is not an integer in \(text)")
        }
    }

    @Test func unknownAndZeroElementsAreLeftOutAsTheAppsDo() throws {
        var t = try translator()
        let standing = Fix(time: time, latitude: 1, longitude: 2, altitudeMSL: 0.3, speed: 0.1, track: 359.7, mode: .twoD)
        let o = try jsonObject(try #require(t.messages(for: .fix(van, seq: nil, standing)).first))
        // speed 0.1 m/s → 0 km/h, track 359.7° → 360 = north = 0, alt 0.3 m → 0: all zero;
        // no eph, no epv: unknown.
        #expect(Set(o.keys) == ["_type", "tid", "tst", "lat", "lon"])
        let north = try jsonObject(try #require(t.messages(for: .fix(van, seq: nil, fix(track: 359.4))).first))
        #expect(north["cog"] as? Int == 359)
    }

    @Test func trackerIDsAreTwoCharactersFromTheEndOfTheVehicleID() {
        let cases: [(String, String)] = [
            ("van-7", "n7"), ("truck-12", "12"), ("bus_1", "s1"), ("a.b", "ab"), ("AB", "AB"),
            ("x", "x"), ("7", "7"), ("-_a", "_a"), ("lorry-0042", "42"),
        ]
        for (id, tid) in cases {
            #expect(OwnTracksTranslator.trackerID(VehicleID(id)!) == tid, "\(id)")
        }
    }

    @Test func aHeadingLendsItsCourseToAFixWithoutTrackButPublishesNothingItself() throws {
        var t = try translator()
        #expect(t.messages(for: .heading(van, seq: 1, Heading(time: time, trueHeading: 45.4, source: .hdt))).isEmpty)
        let lent = try jsonObject(try #require(t.messages(for: .fix(van, seq: 2, fix())).first))
        #expect(lent["cog"] as? Int == 45)
        // The fix's own track wins over the heading.
        let own = try jsonObject(try #require(t.messages(for: .fix(van, seq: 3, fix(track: 90))).first))
        #expect(own["cog"] as? Int == 90)
        // A heading more than 10 s away from the fix is not its course; one without a time is.
        let later = UTCTimestamp(millisecondsSince1970: time.millisecondsSince1970 + 11_000)
        let stale = try jsonObject(try #require(t.messages(for: .fix(van, seq: 4, fix(at: later))).first))
        #expect(stale["cog"] == nil)
        _ = t.messages(for: .heading(van, seq: 5, Heading(trueHeading: 180, source: .hdt)))
        let untimed = try jsonObject(try #require(t.messages(for: .fix(van, seq: 6, fix(at: later))).first))
        #expect(untimed["cog"] as? Int == 180)
        // A magnetic heading alone is not a course over ground.
        var other = try translator()
        _ = other.messages(for: .heading(van, seq: 1, Heading(time: time, magneticHeading: 10, source: .hdm)))
        #expect(try jsonObject(try #require(other.messages(for: .fix(van, seq: 2, fix())).first))["cog"] == nil)
    }

    @Test func aFixCarryingItsHeadingTakesItAsCourseWhenItHasNoTrack() throws {
        var t = try translator()
        var parked = fix(speed: 0, track: nil)
        parked.heading = Heading(time: time, trueHeading: 87.6, source: .hdt)
        let o = try jsonObject(try #require(t.messages(for: .fix(van, seq: 9, parked)).first))
        #expect(o["cog"] as? Int == 88, "the heading of the fix's own instant")
        // A fix with its own track keeps it: course over ground is where it moves.
        var moving = fix(track: 10.2, at: UTCTimestamp(millisecondsSince1970: time.millisecondsSince1970 + 1000))
        moving.heading = Heading(time: moving.time, trueHeading: 87.6, source: .hdt)
        let m = try jsonObject(try #require(t.messages(for: .fix(van, seq: 10, moving)).first))
        #expect(m["cog"] as? Int == 10)
    }

    @Test func aVehicleGoingOfflineGetsTheAppsLastWillNotRetained() throws {
        var t = try translator()
        let since = UTCTimestamp(millisecondsSince1970: 1_795_000_000_999)
        // Offline replayed from the retained store at the bridge's start: no news.
        #expect(t.messages(for: .status(VehicleStatus(vehicle: van, state: .offline, since: since))).isEmpty)
        #expect(t.messages(for: .status(VehicleStatus(vehicle: van, state: .online, since: since))).isEmpty)
        let will = try #require(t.messages(for: .status(VehicleStatus(vehicle: van, state: .offline, since: since))).first)
        #expect(will.topic == "owntracks/acme/van-7")
        #expect(!will.retain, "the retained message stays the last location")
        // The booklet's lwt (https://owntracks.org/booklet/tech/json/#_typelwt): `_type` and
        // `tst`, the time the client first connected, in seconds.
        let object = try jsonObject(will)
        #expect(object["_type"] as? String == "lwt")
        #expect(object["tst"] as? Int == 1_795_000_000)
        #expect(Set(object.keys) == ["_type", "tst"])
        #expect(t.messages(for: .status(VehicleStatus(vehicle: van, state: .offline, since: since))).isEmpty, "once per going offline")
    }

    @Test func aFixOlderThanTheBridgedOneIsNotBridged() throws {
        var t = try translator()
        let later = UTCTimestamp(millisecondsSince1970: time.millisecondsSince1970 + 1000)
        let first = try #require(t.outputs(for: .fix(van, seq: 5, fix(at: later)), at: .zero).first)
        #expect(first.vehicle == van && first.position == .init(time: later, seq: 5))
        // A late message (an earlier time), a repeated older one (the same time, an earlier seq).
        #expect(t.outputs(for: .fix(van, seq: 6, fix()), at: .zero).isEmpty)
        #expect(t.outputs(for: .fix(van, seq: 4, fix(at: later)), at: .zero).isEmpty)
        #expect(t.outputs(for: .fix(van, seq: 6, fix(at: later)), at: .zero).count == 1)
        // The last will is not a position.
        _ = t.outputs(for: .status(VehicleStatus(vehicle: van, state: .online)), at: .zero)
        let will = try #require(t.outputs(for: .status(VehicleStatus(vehicle: van, state: .offline)), at: .zero).first)
        #expect(will.position == nil && !will.message.retain)
    }

    @Test func statusBacklogAndMalformedMessagesAreNotBridged() throws {
        var t = try translator()
        #expect(t.messages(for: .status(VehicleStatus(vehicle: van, state: .online))).isEmpty)
        #expect(t.messages(for: .backlog(.fix(DecodedFix(vehicle: van, seq: 1, fix: fix())))).isEmpty)
        #expect(t.messages(for: .malformed(topic: "fleet/x/fix", reason: "bad")).isEmpty)
    }

    @Test func memoryGrowsWithTheVehiclesSeenOnly() throws {
        var t = try translator()
        let ids = ["a1", "b2", "c3"].map { VehicleID($0)! }
        for round in 0..<1000 {
            for id in ids { _ = t.messages(for: .fix(id, seq: MessageNumber(seq: UInt64(round)), fix())) }
        }
        #expect(t.vehicleCount == 3)
    }

    @Test func aUserMustBeOneTopicLevel() {
        for bad in ["", "a/b", "+", "x#", "$sys", "tab\there", String(repeating: "u", count: 65)] {
            #expect(throws: OwnTracksTranslator.InvalidUser.self, "\(bad)") { try OwnTracksTranslator(user: bad) }
        }
        #expect((try? OwnTracksTranslator(user: "Jane Doe"))?.topic(van) == "owntracks/Jane Doe/van-7")
    }
}
