import FleetProtocol
import FleetWatch
import FleetcastTestSupport
import Foundation
import GNSS
import Testing

@Suite struct FleetOutputTests {
    let van = VehicleID("van-7")!
    let t0 = UTCTimestamp(year: 2026, month: 1, day: 2, hour: 3, minute: 4, second: 5)!

    func at(_ seconds: Int64) -> UTCTimestamp {
        UTCTimestamp(millisecondsSince1970: t0.millisecondsSince1970 + seconds * 1000)
    }

    func object(_ line: String) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    @Test func jsonLinesCarryKindAndVehicle() throws {
        let f = FleetEventFormatter()
        let fix = Fix(time: t0, latitude: 41.5, longitude: -93.25, speed: 2, mode: .threeD)
        let fixLine = try object(f.jsonLine(.fix(van, seq: 9, fix)))
        #expect(fixLine["kind"] as? String == "fix")
        #expect(fixLine["vehicle"] as? String == "van-7")
        #expect(fixLine["seq"] as? Int == 9)
        #expect(fixLine["lat"] as? Double == 41.5)
        let heading = try object(f.jsonLine(.heading(van, seq: nil, Heading(trueHeading: 5, source: .hdt))))
        #expect(heading["kind"] as? String == "heading" && heading["vehicle"] as? String == "van-7")
        let status = try object(f.jsonLine(.status(VehicleStatus(vehicle: van, state: .online))))
        #expect(status["kind"] as? String == "status" && status["state"] as? String == "online")
        let bad = try object(f.jsonLine(.malformed(topic: "fleet/van-7/fix", reason: "invalid JSON: \"x\"\n\u{1}")))
        #expect(bad["kind"] as? String == "malformed")
        #expect(bad["vehicle"] as? String == "van-7")
        #expect(bad["reason"] as? String == "invalid JSON: \"x\"\n\u{1}")
        let anonymous = try object(f.jsonLine(.malformed(topic: "fleet/#/x", reason: "topic")))
        #expect(anonymous["vehicle"] == nil && anonymous["topic"] as? String == "fleet/#/x")
    }

    @Test func backlogEntriesAreJSONLinesOfTheirKindMarkedBacklog() throws {
        let f = FleetEventFormatter()
        let fix = Fix(time: t0, latitude: 41.5, longitude: -93.25, speed: 2, mode: .threeD)
        let fixText = f.jsonLine(.backlog(.fix(DecodedFix(vehicle: van, seq: 41, fix: fix))))
        #expect(fixText.hasPrefix(#"{"kind":"fix","backlog":true,"v":1,"vehicle":"van-7","seq":41,"time":"2026-01-02T03:04:05.000Z""#))
        let line = try object(fixText)
        #expect(line["backlog"] as? Bool == true && line["lat"] as? Double == 41.5 && line["seq"] as? Int == 41)
        let heading = try object(
            f.jsonLine(.backlog(.heading(DecodedHeading(vehicle: van, seq: nil, heading: Heading(trueHeading: 5, source: .hdt))))))
        #expect(heading["kind"] as? String == "heading" && heading["vehicle"] as? String == "van-7")
        #expect(heading["backlog"] as? Bool == true && heading["seq"] == nil && heading["heading"] as? Double == 5)
        // Live lines carry no "backlog" key.
        #expect(try object(f.jsonLine(.fix(van, seq: 41, fix)))["backlog"] == nil)
        #expect(
            f.plainLine(.backlog(.fix(DecodedFix(vehicle: van, seq: 41, fix: fix))))
                == "backlog fix van-7 seq=41 2026-01-02T03:04:05.000Z lat=41.500000 lon=-93.250000 speed=7.2km/h mode=3D")
        #expect(
            f.plainLine(.backlog(.heading(DecodedHeading(vehicle: van, seq: 42, heading: Heading(trueHeading: 5, source: .hdt)))))
                == "backlog heading van-7 seq=42 heading=5.0 source=HDT")
    }

    @Test func plainLinesAreReadable() {
        let f = FleetEventFormatter()
        let fix = Fix(
            time: t0, latitude: 41.5749659, longitude: -93.7505719, speed: 10, track: 124.88,
            mode: .threeD, satellitesUsed: 10)
        #expect(
            f.plainLine(.fix(van, seq: 42, fix))
                == "fix van-7 seq=42 2026-01-02T03:04:05.000Z lat=41.574966 lon=-93.750572 speed=36.0km/h track=124.9 sats=10 mode=3D")
        #expect(f.plainLine(.status(VehicleStatus(vehicle: van, state: .offline))) == "status van-7 offline")
    }

    @Test func tableShowsEachVehicleAndMarksStaleOnes() {
        var state = FleetState()
        let bus = VehicleID("bus-1")!, tram = VehicleID("tram-2")!
        state.apply(.status(VehicleStatus(vehicle: van, state: .online)), at: at(0))
        state.apply(
            .fix(
                van, seq: 1,
                Fix(
                    time: at(100), latitude: 48.858222, longitude: 2.2945, speed: 13.9,
                    mode: .threeD, satellitesUsed: 11)), at: at(100))
        state.apply(.heading(van, seq: 2, Heading(trueHeading: 271.04, source: .hdt)), at: at(100))
        state.apply(.fix(bus, seq: 5, Fix(time: at(10), latitude: -33.8568, longitude: 151.2153, mode: .twoD)), at: at(10))
        state.apply(.status(VehicleStatus(vehicle: tram, state: .offline)), at: at(0))
        let table = FleetTable(staleAfter: .seconds(30))
        let text = table.render(state, now: at(105))
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.count == 5)
        #expect(lines[0].split(separator: " ").map(String.init) == FleetTable.columns)
        #expect(lines[1].split(separator: " ") == ["bus-1", "stale", "95s", "-33.856800", "151.215300", "-", "-", "-", "2D", "0"])
        #expect(lines[2].split(separator: " ") == ["tram-2", "offline", "105s", "-", "-", "-", "-", "-", "-", "0"])
        #expect(lines[3].split(separator: " ") == ["van-7", "online", "5s", "48.858222", "2.294500", "50.0", "271.0", "11", "3D", "0"])
        #expect(lines[4] == "3 vehicles, 0 malformed messages")
        #expect(!text.contains("\u{1B}"))

        let ansi = table.renderANSI(state, now: at(105), maxRows: 1)
        #expect(ansi.hasPrefix("\u{1B}[H"))
        #expect(ansi.contains("\u{1B}[2mbus-1"))  // stale row dimmed
        #expect(ansi.contains("… 2 more"))
        #expect(!ansi.contains("van-7"))
    }

    /// What `--once` folds in: a vehicle's retained heading (seq 1, from its first instant) and
    /// retained fix (seq 60, 20 s old), then a live fix. The numbers between the two retained
    /// ones went out before the subscription: no gap. The age is the fix's own, not its arrival's.
    @Test func retainedMessagesOpenNoGapsAndTheAgeIsTheFixes() {
        var state = FleetState()
        state.apply(.status(VehicleStatus(vehicle: van, state: .online)), at: at(100), retained: true)
        state.apply(.heading(van, seq: 1, Heading(time: at(0), trueHeading: 90, source: .hdt)), at: at(100), retained: true)
        let fix = Fix(time: at(80), latitude: 48.85, longitude: 2.29, speed: 12, mode: .threeD)
        state.apply(.fix(van, seq: 60, fix), at: at(100), retained: true)
        var lines = FleetTable().render(state, now: at(100)).split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(lines[1][0] == "van-7" && lines[1][2] == "20s" && lines[1][9] == "0", "\(lines)")
        // A live fix that skips a number: that one can be missing, and is counted.
        state.apply(.fix(van, seq: 62, Fix(time: at(101), latitude: 48.85, longitude: 2.29, mode: .threeD)), at: at(101))
        lines = FleetTable().render(state, now: at(101)).split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        #expect(lines[1][2] == "0s" && lines[1][9] == "1", "\(lines)")
        // Not retained, the same two messages would say 58 numbers are missing.
        var live = FleetState()
        live.apply(.heading(van, seq: 1, Heading(time: at(0), trueHeading: 90, source: .hdt)), at: at(100))
        live.apply(.fix(van, seq: 60, fix), at: at(100))
        #expect(live[van]?.gaps == 58)
    }

    /// The agent's default policy reports a parked vehicle once an hour: an online vehicle
    /// whose newest fix stands still is not stale after minutes of silence; a moving one is.
    /// Past its heartbeat and a quarter more (75 minutes) the parked one is stale too: its
    /// broker node may have died with its session, and with it the last will.
    @Test func aParkedOnlineVehicleIsNotStaleUntilItMissesItsHourlyHeartbeat() {
        var state = FleetState()
        let parked = VehicleID("parked-1")!, moving = VehicleID("moving-1")!
        for vehicle in [parked, moving] { state.apply(.status(VehicleStatus(vehicle: vehicle, state: .online)), at: at(0)) }
        state.apply(.fix(parked, seq: 1, Fix(time: t0, latitude: 48.85, longitude: 2.29, speed: 0.1, mode: .threeD)), at: at(0))
        state.apply(.fix(moving, seq: 1, Fix(time: t0, latitude: 48.86, longitude: 2.30, speed: 12, mode: .threeD)), at: at(0))
        let lines = FleetTable().render(state, now: at(1_800)).split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("parked-1") && $0.split(separator: " ")[1] == "online" }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("moving-1") && $0.split(separator: " ")[1] == "stale" }, "\(lines)")
        let later = FleetTable().render(state, now: at(3_600 + 900 + 1)).split(separator: "\n")
        #expect(later.contains { $0.hasPrefix("parked-1") && $0.split(separator: " ")[1] == "stale" }, "\(later)")
        let onTime = FleetTable().render(state, now: at(3_600 + 300)).split(separator: "\n")
        #expect(onTime.contains { $0.hasPrefix("parked-1") && $0.split(separator: " ")[1] == "online" }, "\(onTime)")
        state.apply(.status(VehicleStatus(vehicle: parked, state: .offline)), at: at(1_900))
        #expect(state.vehicles.first { $0.vehicle == parked }?.isParked == false, "offline: its last will came")
    }
}
