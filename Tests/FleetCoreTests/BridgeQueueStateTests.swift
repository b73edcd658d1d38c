import FleetCore
import FleetOperations
import FleetProtocol
import GNSS
import Testing

/// ``BridgeQueueState`` driven with plain values: vehicles, slots and messages are strings,
/// waiters integers, time a `Duration`; no task, no broker.
@Suite struct BridgeQueueStateTests {
    typealias State = BridgeQueueState<String, String, String, Int>

    /// A position `seconds` after a fixed time, numbered `seq`.
    func at(_ seconds: Int64, seq: UInt64? = nil) -> FleetBridgeOutput.Position {
        .init(time: UTCTimestamp(millisecondsSince1970: 1_767_323_045_000 + seconds * 1000), seq: seq.map { MessageNumber(seq: $0) })
    }

    /// Enqueues `message` in `vehicle`'s `pos` slot at `position`, expecting it to be kept.
    func put(_ state: inout State, _ vehicle: String, _ message: String, _ position: FleetBridgeOutput.Position?, slot: String = "pos") {
        guard case .none = state.enqueue(message, vehicle: vehicle, slot: slot, position: position, at: .zero) else {
            Issue.record("\(message) not simply queued")
            return
        }
    }

    /// Everything pending, in the order the publisher would take it.
    func drain(_ state: inout State) -> [String] {
        var out: [String] = []
        while let message = state.take() { out.append(message) }
        return out
    }

    @Test func aNewerMessageReplacesAnUnpublishedOneAndTheVehiclesTakeTurns() {
        var state = State()
        // The flood: "a" sends 1,000 fixes while "b" sends one and "c" one.
        put(&state, "a", "a1", at(1, seq: 1))
        put(&state, "b", "b1", at(1, seq: 1))
        for n in 2...1000 { put(&state, "a", "a\(n)", at(Int64(n), seq: UInt64(n))) }
        put(&state, "c", "c1", at(1, seq: 1))
        #expect(state.pendingCount == 3, "one pending message per vehicle, however many came")
        #expect(state.coalescedCount == 999)
        #expect(state.pending("a") == ["a1000"])
        // Round-robin in the order the vehicles first had something pending; only the newest.
        #expect(drain(&state) == ["a1000", "b1", "c1"])

        // A vehicle with two slots (a discovery config and a position) gets one message per
        // round: the others do not wait for both.
        put(&state, "a", "a-config", nil, slot: "config")
        put(&state, "a", "a1001", at(1001, seq: 1001))
        put(&state, "b", "b2", at(2, seq: 2))
        put(&state, "c", "c2", at(2, seq: 2))
        #expect(state.take() == "a-config")
        // "a" floods on while it waits for its next turn: its pending position is replaced in
        // place of the round, behind "b" and "c".
        put(&state, "a", "a1002", at(1002, seq: 1002))
        put(&state, "b", "b3", at(3, seq: 3))
        #expect(drain(&state) == ["b3", "c2", "a1002"])
        #expect(state.pendingCount == 0 && state.take() == nil)
    }

    @Test func aReplacedMessageMovesBehindTheVehiclesOtherOne() {
        // OwnTracks: a location, then the last will (another slot: not retained), then a new
        // location. The new location goes after the last will, as it happened after it.
        var state = State()
        put(&state, "a", "loc1", at(1, seq: 1), slot: "loc retained")
        put(&state, "a", "lwt", nil, slot: "loc")
        put(&state, "a", "loc2", at(2, seq: 2), slot: "loc retained")
        #expect(drain(&state) == ["lwt", "loc2"])
    }

    @Test func aPositionOlderThanOneAlreadyTakenIsNeverPublished() {
        var state = State()
        put(&state, "a", "t5", at(5, seq: 5))
        // Older by time while t5 waits: discarded, t5 stays.
        #expect(state.enqueue("t4", vehicle: "a", slot: "pos", position: at(4, seq: 9), at: .zero).isStale)
        #expect(drain(&state) == ["t5"])
        // And after t5 was published: still discarded.
        #expect(state.enqueue("t3", vehicle: "a", slot: "pos", position: at(3, seq: 3), at: .zero).isStale)
        // Same time, lower seq: older. Same time, higher seq (a course from a later heading),
        // or no seq to compare: not older.
        #expect(state.enqueue("t5 seq 4", vehicle: "a", slot: "pos", position: at(5, seq: 4), at: .zero).isStale)
        put(&state, "a", "t5 seq 6", at(5, seq: 6))
        put(&state, "a", "t5 no seq", at(5))
        // Another slot, another vehicle: their own order.
        put(&state, "a", "other slot t1", at(1, seq: 1), slot: "other")
        put(&state, "b", "b t1", at(1, seq: 1))
        #expect(drain(&state) == ["t5 no seq", "b t1", "other slot t1"])
        #expect(state.staleCount == 3 && state.coalescedCount == 1)
    }

    @Test func theWaitingPublisherGetsTheNextMessageDirectlyAndTheEndAfterTheRest() {
        var state = State()
        #expect(state.next(waiter: 7, id: 1, cancelled: false).isWait)
        guard case .resume(7, "a1") = state.enqueue("a1", vehicle: "a", slot: "pos", position: at(1), at: .zero) else {
            Issue.record("the waiting publisher is not resumed")
            return
        }
        #expect(state.pendingCount == 0)
        put(&state, "a", "a2", at(2))
        put(&state, "b", "b1", at(1))
        let finish = state.finish()
        #expect(finish.waiter == nil, "nobody waits while messages are pending")
        // What was received before the end is still published, then the end.
        #expect(state.next(waiter: 8, id: 2, cancelled: false).published == "a2")
        #expect(state.next(waiter: 8, id: 3, cancelled: false).published == "b1")
        #expect(state.next(waiter: 8, id: 4, cancelled: false).isEnd)

        var waiting = State()
        #expect(waiting.next(waiter: 9, id: 5, cancelled: false).isWait)
        #expect(waiting.finish().waiter == 9)

        var cancelled = State()
        #expect(cancelled.next(waiter: 10, id: 6, cancelled: true).isEnd, "a cancelled task is not kept waiting")
        #expect(cancelled.next(waiter: 11, id: 7, cancelled: false).isWait)
        #expect(cancelled.cancelWaiting(id: 6) == nil, "another wait's cancellation")
        #expect(cancelled.cancelWaiting(id: 7) == 11)
        put(&cancelled, "a", "a1", at(1))
    }

    @Test func newVehiclesBeyondTheLimitAreDroppedAndWarnedOncePerEpisode() {
        var state = State(limits: .init(maximumVehicles: 2, dropEpisodeQuietTime: .seconds(60)))
        #expect(state.admit("a", at: .seconds(0)).admitted && state.admit("b", at: .seconds(0)).admitted)
        let first = state.admit("c", at: .seconds(1))
        #expect(!first.admitted)
        #expect(first.warning?.vehicle == "c" && first.warning?.reason == .vehicleLimit && first.warning?.droppedTotal == 1)
        // The same episode: counted, not warned again; known vehicles go on.
        for second in 2...30 {
            let again = state.admit("v\(second)", at: .seconds(second))
            #expect(!again.admitted && again.warning == nil && again.endedEpisode == nil)
        }
        #expect(state.admit("a", at: .seconds(80)).admitted)
        // 60 s after the last drop the episode is over: its count, then a new warning.
        let ended = state.admit("a", at: .seconds(90))
        #expect(ended.admitted && ended.endedEpisode == 30)
        let second = state.admit("d", at: .seconds(91))
        #expect(second.warning?.vehicle == "d" && second.warning?.droppedTotal == 31)
        #expect(state.finish().endedEpisode == 1)
        #expect(state.vehicleCount == 2 && state.droppedCount == 31)
        // Enqueueing for an unknown vehicle admits it, within the same limit.
        var direct = State(limits: .init(maximumVehicles: 1))
        put(&direct, "a", "a1", at(1))
        guard case .dropped(let warning?) = direct.enqueue("b1", vehicle: "b", slot: "pos", position: at(1), at: .zero) else {
            Issue.record("the second vehicle is not dropped")
            return
        }
        #expect(warning.vehicle == "b")
    }

    @Test func aVehicleHoldsAtMostItsSlotLimit() {
        var state = State(limits: .init(maximumSlotsPerVehicle: 2))
        put(&state, "a", "x1", nil, slot: "x")
        put(&state, "a", "y1", nil, slot: "y")
        put(&state, "a", "x2", nil, slot: "x")  // replaces: no room needed
        guard case .dropped(let warning?) = state.enqueue("z1", vehicle: "a", slot: "z", position: nil, at: .zero) else {
            Issue.record("a third slot is not dropped")
            return
        }
        #expect(warning.reason == .slotLimit)
        #expect(drain(&state) == ["y1", "x2"])
    }

    /// Issue 44: Home Assistant's first fix of a vehicle with zones is six messages for six
    /// topics (four discovery configs, the attributes, a zone event) at once; none is dropped
    /// under the default limits, each in its own slot as ``FleetBridges``' queue gives them.
    @Test func aVehiclesWholeFirstBurstToHomeAssistantFitsTheDefaultLimits() throws {
        let zone =
            #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"name":"Depot","radius":50},"#
            + #""geometry":{"type":"Point","coordinates":[11.0,48.0]}}]}"#
        var translator = HomeAssistantTranslator(
            options: try .init(), zones: BridgeZones(zones: try ZoneSet.parse(Array(zone.utf8))))
        let van = VehicleID("van-7")!
        let fix = Fix(time: UTCTimestamp(millisecondsSince1970: 1_767_323_045_000), latitude: 48, longitude: 11, mode: .threeD)
        let outputs = translator.outputs(for: .fix(van, seq: 1, fix), at: .zero)
        #expect(outputs.count == 6)
        var state = BridgeQueueState<String, String, String, Int>()
        for (n, output) in outputs.enumerated() {
            let slot = output.coalesces ? output.message.topic : "\(output.message.topic) #\(n)"
            guard case .none = state.enqueue(output.message.topic, vehicle: "van-7", slot: slot, position: output.position, at: .zero)
            else {
                Issue.record("\(output.message.topic) not queued")
                continue
            }
        }
        #expect(drain(&state) == outputs.map(\.message.topic))
    }

    @Test func theRoundRobinQueueKeepsItsOrderAcrossCompactions() {
        var fifo = BridgeFIFO<Int>()
        var expected = 0
        for n in 0..<5000 {
            fifo.append(n)
            if n % 3 != 0 {
                #expect(fifo.popFirst() == expected)
                expected += 1
            }
        }
        while let n = fifo.popFirst() {
            #expect(n == expected)
            expected += 1
        }
        #expect(expected == 5000 && fifo.isEmpty)
    }
}

extension BridgeQueueState.EnqueueAction {
    var isStale: Bool {
        if case .stale = self { true } else { false }
    }
}

extension BridgeQueueState.NextAction {
    var isWait: Bool {
        if case .wait = self { true } else { false }
    }
    var isEnd: Bool {
        if case .end = self { true } else { false }
    }
    var published: Message? {
        if case .publish(let message) = self { message } else { nil }
    }
}
