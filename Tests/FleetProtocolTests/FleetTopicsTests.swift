import FleetProtocol
import Testing

@Suite struct FleetTopicsTests {
    @Test func vehicleIDsAreRefusedOutsideTheAlphabet() throws {
        for good in ["a", "van-7", "BUS_12.north", String(repeating: "x", count: 64)] {
            #expect(VehicleID(good) != nil, "\(good)")
        }
        for bad in ["", "a/b", "a+b", "#", "a b", "ä", "x\u{0}", String(repeating: "x", count: 65)] {
            #expect(VehicleID(bad) == nil, "\(bad)")
        }
        let error = #expect(throws: VehicleID.ValidationError.self) { try VehicleID(validating: "bad/id") }
        #expect(error?.description.contains("bad/id") == true)
        #expect(error?.description.contains("1 to 64 characters") == true)
    }

    @Test func topicsFollowTheLayout() throws {
        let van = try #require(VehicleID("van-7"))
        let topics = try FleetTopics(prefix: "acme/fleet")
        #expect(topics.fix(van) == "acme/fleet/van-7/fix")
        #expect(topics.heading(van) == "acme/fleet/van-7/heading")
        #expect(topics.status(van) == "acme/fleet/van-7/status")
        #expect(FleetTopics.default.filters() == ["fleet/+/+"])
        #expect(FleetTopics.default.filters(vehicles: [van]) == ["fleet/van-7/+"])
    }

    @Test func parseTakesTopicsApartAndRefusesWhatDoesNotFit() throws {
        let t = FleetTopics.default
        let parsed = try #require(t.parse("fleet/van-7/heading"))
        #expect(parsed.vehicle.rawValue == "van-7")
        #expect(parsed.channel == .heading)
        for bad in [
            "fleet", "fleet/", "fleet/van-7", "fleet/van-7/fix/x", "fleet//fix", "fleetx/van/fix",
            "other/van/fix", "fleet/van-7/speed", "fleet/b@d/fix",
        ] {
            #expect(t.parse(bad) == nil, "\(bad)")
        }
    }

    @Test func badPrefixesAreRefused() {
        for bad in ["", "/fleet", "fleet/", "a//b", "fleet/+", "#", "$SYS"] {
            #expect(throws: FleetTopics.InvalidPrefix.self, "\(bad)") { try FleetTopics(prefix: bad) }
        }
    }

    @Test func statusPayload() throws {
        let van = try #require(VehicleID("van-7"))
        let will = VehicleStatus(vehicle: van, state: .offline)
        #expect(String(decoding: FleetPayload.encode(will), as: UTF8.self) == #"{"v":1,"vehicle":"van-7","state":"offline"}"#)
        let online = VehicleStatus(vehicle: van, state: .online, agentVersion: "0.1.0", source: "sim:", gnss: .noFix, droppedFixes: 3)
        #expect(
            String(decoding: FleetPayload.encode(online), as: UTF8.self)
                == #"{"v":1,"vehicle":"van-7","state":"online","agent":"0.1.0","source":"sim:","gnss":"no-fix","dropped":3}"#)
    }
}
