import FleetCore
import FleetProtocol
import GNSS
import Testing

@Suite struct FleetStateTests {
    let t0 = UTCTimestamp(year: 2026, month: 1, day: 2, hour: 3, minute: 4, second: 5)!
    let van = VehicleID("van-7")!
    let bus = VehicleID("bus-1")!

    func at(_ seconds: Int64) -> UTCTimestamp {
        UTCTimestamp(millisecondsSince1970: t0.millisecondsSince1970 + seconds * 1000)
    }

    func fix(_ lat: Double, second: Int64 = 0) -> Fix {
        Fix(time: at(second), latitude: lat, longitude: 2, speed: 10, mode: .threeD, satellitesUsed: 9)
    }

    @Test("a fix carrying its instant's heading sets the vehicle's heading; a later heading alone still wins")
    func headingFromTheFix() {
        var state = FleetState()
        var joined = fix(1, second: 1)
        joined.heading = Heading(time: at(1), trueHeading: 271.5, source: .hdt)
        state.apply(.fix(van, seq: MessageNumber(run: 5, seq: 1), joined), at: at(1))
        #expect(state[van]?.heading?.trueHeading == 271.5)
        state.apply(.heading(van, seq: MessageNumber(run: 5, seq: 2), Heading(time: at(1), trueHeading: 272, source: .hdt)), at: at(1))
        #expect(state[van]?.heading?.trueHeading == 272, "the next reading of the instant, alone")
        state.apply(.fix(van, seq: MessageNumber(run: 5, seq: 3), fix(1.1, second: 2)), at: at(2))
        #expect(state[van]?.heading?.trueHeading == 272, "a fix without one keeps the last heading")
    }

    @Test func foldsFixHeadingAndStatusPerVehicle() {
        var state = FleetState()
        state.apply(.status(VehicleStatus(vehicle: van, state: .online)), at: at(0))
        state.apply(.fix(van, seq: 1, fix(1)), at: at(1))
        state.apply(.heading(van, seq: 2, Heading(trueHeading: 90, source: .hdt)), at: at(2))
        state.apply(.fix(bus, seq: nil, fix(5)), at: at(3))
        #expect(state.count == 2)
        let v = state[van]
        #expect(v?.fix == fix(1))
        #expect(v?.heading?.trueHeading == 90)
        #expect(v?.online == true)
        #expect(v?.lastSeen == at(2))
        #expect(v?.age(now: at(12)) == .seconds(10))
        #expect(v?.isStale(now: at(12), after: .seconds(5)) == true)
        #expect(v?.isStale(now: at(5), after: .seconds(5)) == false)
        #expect(state[bus]?.online == nil)
        #expect(state.vehicles.map(\.vehicle) == [bus, van])

        state.apply(.status(VehicleStatus(vehicle: van, state: .offline)), at: at(20))
        #expect(state[van]?.online == false)
    }

    @Test func gapsComeFromSeqAndLateOrRepeatedMessagesDoNotRegress() {
        var state = FleetState()
        state.apply(.fix(van, seq: 10, fix(10)), at: at(0))
        state.apply(.heading(van, seq: 11, Heading(trueHeading: 1, source: .hdt)), at: at(0))
        state.apply(.fix(van, seq: 15, fix(15)), at: at(1))  // 12, 13, 14 missing
        state.apply(.fix(van, seq: 13, fix(13)), at: at(2))  // late: fills a hole, not shown
        state.apply(.fix(van, seq: 15, fix(15)), at: at(9))  // duplicate: not "seen" again
        let v = state[van]
        #expect(v?.gaps == 2)
        #expect(v?.sequence.duplicates == 1)
        #expect(v?.fix?.latitude == 15)
        #expect(v?.lastSeen == at(1))
        #expect(v?.messages == 5)
    }

    @Test func aNewNumberingRunIsNewerEvenIfItsNumbersStartLower() {
        var state = FleetState()
        state.apply(.fix(van, seq: MessageNumber(run: 1_000, seq: 500), fix(1, second: 1)), at: at(1))
        state.apply(.fix(van, seq: MessageNumber(run: 1_000, seq: 502), fix(2, second: 2)), at: at(2))
        #expect(state[van]?.gaps == 1)
        // The store was lost: numbering begins again in a later run.
        state.apply(.fix(van, seq: MessageNumber(run: 2_000, seq: 1), fix(3, second: 61)), at: at(61))
        #expect(state[van]?.fix?.latitude == 3, "the new run's fix is shown")
        #expect(state[van]?.run == 2_000)
        #expect(state[van]?.runsStarted == 1)
        #expect(state[van]?.gaps == 0, "gaps count in the current run")
        // A late redelivery of the earlier run is neither shown nor counted.
        state.apply(.fix(van, seq: MessageNumber(run: 1_000, seq: 503), fix(4, second: 3)), at: at(62))
        #expect(state[van]?.fix?.latitude == 3)
        #expect(state[van]?.sequence.highest == 1)
        // A redelivery of the current run is a duplicate.
        state.apply(.fix(van, seq: MessageNumber(run: 2_000, seq: 1), fix(3, second: 61)), at: at(63))
        #expect(state[van]?.sequence.duplicates == 1)
        #expect(state[van]?.lastSeen == at(61))
    }

    @Test func aPublisherOfRunZeroRestartingLowerIsJudgedAfreshOnItsNewSince() {
        var state = FleetState()
        state.apply(.status(VehicleStatus(vehicle: van, state: .online, since: at(0))), at: at(0))
        state.apply(.fix(van, seq: 500, fix(1, second: 1)), at: at(1))
        // An agent from before numbering runs, restarted after a run without a working store.
        state.apply(.status(VehicleStatus(vehicle: van, state: .online, since: at(60))), at: at(60))
        state.apply(.fix(van, seq: 130, fix(2, second: 61)), at: at(61))
        #expect(state[van]?.fix?.latitude == 2, "the new start's fix is shown")
        #expect(state[van]?.gaps == 0)
        state.apply(.status(VehicleStatus(vehicle: van, state: .online, since: at(60), backlog: 3)), at: at(62))
        state.apply(.fix(van, seq: 120, fix(3, second: 62)), at: at(62))
        #expect(state[van]?.fix?.latitude == 2, "same start: an older number is still not shown")
    }

    @Test func anEarlierRunWithALaterTimeIsARunBegunWhileTheClockWasWrong() {
        var state = FleetState()
        state.apply(.fix(van, seq: MessageNumber(run: 5_000, seq: 9), fix(1, second: 10)), at: at(10))
        // The vehicle's clock stood in 1970 when its new store was made: its run id is lower,
        // its fixes (GNSS time) are not.
        state.apply(.fix(van, seq: MessageNumber(run: 3, seq: 1), fix(2, second: 20)), at: at(20))
        #expect(state[van]?.fix?.latitude == 2)
        state.apply(.fix(van, seq: MessageNumber(run: 3, seq: 2), fix(3, second: 21)), at: at(21))
        #expect(state[van]?.fix?.latitude == 3, "and its run is followed from then on")
    }

    @Test func withoutSeqTheNewestFixTimeWins() {
        var state = FleetState()
        state.apply(.fix(van, seq: nil, fix(2, second: 2)), at: at(0))
        state.apply(.fix(van, seq: nil, fix(1, second: 1)), at: at(1))
        #expect(state[van]?.fix?.latitude == 2)
        #expect(state[van]?.gaps == 0)
    }

    @Test func malformedMessagesAreCountedNotStored() {
        var state = FleetState()
        state.apply(.fix(van, seq: 1, fix(1)), at: at(0))
        state.apply(.malformed(topic: "fleet/van-7/fix", reason: "invalid JSON: x"), at: at(1))
        state.apply(.malformed(topic: "fleet/ghost/fix", reason: "missing key \"lat\""), at: at(1))
        state.apply(.malformed(topic: "elsewhere", reason: "topic"), at: at(1))
        #expect(state.malformedCount == 3)
        #expect(state[van]?.malformed == 1)
        #expect(state[van]?.lastSeen == at(0))
        #expect(state.count == 1)  // a bad message never creates a vehicle
        #expect(state.lastMalformedReason == "topic")
    }

    @Test func theVehicleCapEvictsTheLeastRecentlyHeardFrom() throws {
        var state = FleetState(maximumVehicles: 3)
        let ids = (0..<5).map { VehicleID("v\($0)")! }
        state.apply(.fix(ids[0], seq: 1, fix(0)), at: at(0))
        state.apply(.fix(ids[1], seq: 1, fix(1)), at: at(1))
        state.apply(.fix(ids[2], seq: 1, fix(2)), at: at(2))
        state.apply(.fix(ids[0], seq: 2, fix(0)), at: at(3))  // v0 heard again: v1 is now the oldest
        state.apply(.fix(ids[3], seq: 1, fix(3)), at: at(4))
        #expect(state.vehicles.map(\.vehicle) == [ids[0], ids[2], ids[3]])
        state.apply(.fix(ids[4], seq: 1, fix(4)), at: at(5))
        #expect(state.vehicles.map(\.vehicle) == [ids[0], ids[3], ids[4]])
        #expect(state.evictedCount == 2)

        var big = FleetState(maximumVehicles: 1000)
        for i in 0..<20_000 {
            big.apply(.fix(try #require(VehicleID("car-\(i)")), seq: 1, fix(1)), at: at(Int64(i)))
        }
        #expect(big.count == 1000)
        #expect(big.vehicles.first?.vehicle.rawValue == "car-19000")
        #expect(big.evictedCount == 19_000)
    }

    func backlogFix(_ seq: UInt64, second: Int64) -> FleetEvent {
        .backlog(.fix(DecodedFix(vehicle: van, seq: seq, fix: fix(Double(seq), second: second))))
    }

    @Test func backlogClosesGapsAndNeverMovesTheLiveRowBack() {
        var state = FleetState()
        state.apply(.fix(van, seq: 100, fix(100, second: 100)), at: at(0))
        state.apply(.heading(van, seq: 101, Heading(time: at(101), trueHeading: 90, source: .hdt)), at: at(0))
        // The connection is lost; back, the agent sends its newest fix live, then the backlog.
        state.apply(.fix(van, seq: 200, fix(200, second: 200)), at: at(300))
        #expect(state[van]?.gaps == 98)
        for seq in UInt64(102)...150 {
            state.apply(backlogFix(seq, second: Int64(seq)), at: at(301))
        }
        state.apply(
            .backlog(.heading(DecodedHeading(vehicle: van, seq: 151, heading: Heading(time: at(151), trueHeading: 10, source: .hdt)))),
            at: at(301))
        #expect(state[van]?.gaps == 48)
        for seq in UInt64(152)...199 {
            state.apply(backlogFix(seq, second: Int64(seq)), at: at(302))
        }
        state.apply(backlogFix(120, second: 120), at: at(303))  // a batch redelivered (at-least-once)
        let v = state[van]
        #expect(v?.gaps == 0)
        #expect(v?.sequence.duplicates == 1)
        #expect(v?.fix?.latitude == 200)  // the live row stays on the newest position
        #expect(v?.heading?.trueHeading == 90)
        #expect(v?.lastSeen == at(300))  // history is not a sign of life
        #expect(v?.backlog == 99)
        #expect(v?.messages == 102)
    }

    @Test func backlogFromBeforeTheFirstLiveFixIsNeverAGap() {
        var state = FleetState()
        state.apply(.fix(van, seq: 10, fix(10, second: 10)), at: at(0))
        for seq in UInt64(5)...9 { state.apply(backlogFix(seq, second: Int64(seq)), at: at(1)) }
        #expect(state[van]?.gaps == 0)
        #expect(state[van]?.fix?.latitude == 10)
        // A vehicle first heard of through its backlog has history but no live row.
        let bus = VehicleID("bus-1")!
        state.apply(.backlog(.fix(DecodedFix(vehicle: bus, seq: 3, fix: fix(3)))), at: at(2))
        #expect(state[bus]?.fix == nil)
        #expect(state[bus]?.backlog == 1)
    }

    @Test func withinARunTheNumberingDecidesNotTheClock() {
        var state = FleetState()
        state.apply(.fix(van, seq: 10, fix(10, second: 10)), at: at(0))
        state.apply(.fix(van, seq: 9, fix(9, second: 9)), at: at(1))  // lower seq
        #expect(state[van]?.fix?.latitude == 10)
        // A fix dated far ahead (a week rollover, spoofed serial data) does not freeze the
        // vehicle: the next numbers are shown although their times are earlier.
        state.apply(.fix(van, seq: 11, fix(11, second: 86_400 * 365)), at: at(2))
        #expect(state[van]?.fix?.latitude == 11)
        state.apply(.fix(van, seq: 12, fix(12, second: 12)), at: at(3))
        #expect(state[van]?.fix?.latitude == 12)
        #expect(state[van]?.gaps == 0)
        state.apply(.heading(van, seq: 13, Heading(time: at(13), trueHeading: 1, source: .hdt)), at: at(4))
        state.apply(.heading(van, seq: 14, Heading(time: at(3), trueHeading: 2, source: .hdt)), at: at(5))
        #expect(state[van]?.heading?.trueHeading == 2)
        state.apply(.heading(van, seq: 12, Heading(time: at(20), trueHeading: 3, source: .hdt)), at: at(6))
        #expect(state[van]?.heading?.trueHeading == 2, "a lower number is not shown")
    }
}
