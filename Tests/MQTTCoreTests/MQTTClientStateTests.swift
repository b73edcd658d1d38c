import MQTTCore
import Testing

/// The state machine alone, without libmosquitto and without tasks: waits, streams, observers
/// and `shutdown()` steps are plain names, and every test drives the transitions the callbacks
/// and API calls make, then checks the actions they return.
@Suite struct MQTTClientStateTests {
    typealias State = MQTTClientState<String, String, String, String>

    /// The names of the waits an `Actions` value succeeds, fails (with the error) and cancels.
    struct Outcome: Equatable {
        var succeeded: [String] = []
        var failed: [String: MQTTError] = [:]
        var cancelled: [String] = []
        var streamsEnded: [String: MQTTError?] = [:]
        var resumed: [String] = []
        var states: [MQTTConnectionState] = []

        init(_ actions: State.Actions) {
            succeeded = actions.succeed.sorted()
            for (ack, error) in actions.fail { failed[ack] = error }
            cancelled = actions.cancel.sorted()
            for (sink, error) in actions.finishStreams { streamsEnded[sink] = error }
            resumed = actions.resume.sorted()
            states = actions.notify.map(\.1)
        }

        init() {}
    }

    /// A client connected after `connect()` was answered.
    func connected(_ version: MQTTProtocolVersion = .v5) -> State {
        var state = State(protocolVersion: version, sentCredentials: false)
        let (action, _) = state.startConnect("connect", cancelled: false)
        guard case .startLoop = action else { Issue.record("a new client starts its loop"); return state }
        #expect(Outcome(state.connack(reasonCode: 0).actions).succeeded == ["connect"])
        return state
    }

    // MARK: connect

    @Test func connectTwiceIsRefusedAndACancelledConnectClosesTheClient() {
        var state = connected()
        guard case .refuse(let error) = state.startConnect("again", cancelled: false).0, error.code == .invalidConfiguration else {
            Issue.record("a second connect() is refused")
            return
        }
        var fresh = State(protocolVersion: .v5, sentCredentials: false)
        let (action, actions) = fresh.startConnect("connect", cancelled: true)
        guard case .cancelled = action else { Issue.record("a cancelled connect starts nothing"); return }
        #expect(Outcome(actions).cancelled == ["connect"])
        #expect(fresh.connectionState == .closed)
        guard case .refuse(.shutdown) = fresh.startConnect("later", cancelled: false).0 else {
            Issue.record("a client connects once")
            return
        }
    }

    @Test func aRefusedFirstConnackFailsConnectAndStopsTheLoop() {
        var state = State(protocolVersion: .v5, sentCredentials: true)
        _ = state.startConnect("connect", cancelled: false)
        let refused = Outcome(state.connack(reasonCode: 0x86).actions)
        #expect(refused.failed == ["connect": .badUserNameOrPassword(reasonCode: 0x86)])
        #expect(state.mustStop, "the loop must not reconnect after a refused first connect")
        #expect(state.connectionState == .closed)
        #expect(!state.connectionLost(.connectionLost(reason: "socket closed")).reconnect)
    }

    @Test func cancellingConnectBeforeTheConnackCancelsTheWaitOnce() {
        var state = State(protocolVersion: .v5, sentCredentials: false)
        _ = state.startConnect("connect", cancelled: false)
        #expect(Outcome(state.cancelConnect()).cancelled == ["connect"])
        #expect(state.mustStop)
        #expect(Outcome(state.cancelConnect()) == Outcome(), "a second cancellation finds nothing")
        #expect(Outcome(state.connack(reasonCode: 0).actions).succeeded.isEmpty, "a late CONNACK answers nobody")
        #expect(Outcome(state.loopEnded()).failed.isEmpty)
    }

    @Test func aRefusedReconnectIsReportedOnceAndTheLoopKeepsTrying() {
        var state = connected()
        _ = state.addObserver(1, "observer", seen: state.connectionState)
        #expect(state.connectionLost(.connectionLost(reason: "broker restarted")).reconnect)
        let (attempt, delay, waiting) = state.willReconnect { .milliseconds(100 * $0) }
        #expect(attempt == 1 && delay == .milliseconds(100))
        #expect(Outcome(waiting).states == [.reconnecting(attempt: 1, delay: .milliseconds(100))])
        let refusal = Outcome(state.connack(reasonCode: 0x87).actions)
        #expect(refusal.states.count == 1)
        let lost = state.connectionLost(.connectionLost(reason: "closed after the refusal"))
        #expect(lost.reconnect)
        #expect(Outcome(lost.actions).states.isEmpty, "the close that follows a refused CONNACK is not a second event")
        #expect(state.willReconnect { .milliseconds(100 * $0) }.attempt == 2)
        _ = state.connack(reasonCode: 0)
        #expect(state.connectionState == .connected)
        _ = state.connectionLost(.connectionLost(reason: "again"))
        #expect(state.willReconnect { .milliseconds(100 * $0) }.attempt == 1, "a success starts the backoff again")
    }

    // MARK: protocol and brokers

    @Test func autoFallsBackTo311AtOnceWhenABrokerRefusesMQTT5AndKeepsIt() {
        var state = State(protocolVersion: .auto, sentCredentials: false)
        #expect(state.protocolVersion == .v5, "auto starts with MQTT 5")
        _ = state.startConnect("connect", cancelled: false)
        let refusal = state.connack(reasonCode: 0x84)
        #expect(refusal.fellBack)
        #expect(Outcome(refusal.actions) == Outcome(), "the connect wait goes on; nothing is reported")
        #expect(state.protocolVersion == .v311)
        let lost = state.connectionLost(.connectionLost(reason: "closed after the refusal"))
        #expect(lost.reconnect && !lost.isNews)
        #expect(Outcome(lost.actions).failed.isEmpty, "the first connect has not failed")
        let next = state.willReconnect { _ in .seconds(5) }
        #expect(next.delay == .zero, "3.1.1 at once, no backoff")
        #expect(Outcome(state.connack(reasonCode: 0).actions).succeeded == ["connect"])
        // Kept for the client's life: a 3.1.1 refusal later is a refusal, not another fallback.
        _ = state.connectionLost(.connectionLost(reason: "node died"))
        _ = state.willReconnect { _ in .seconds(1) }
        #expect(!state.connack(reasonCode: 1).fellBack)
        #expect(state.protocolVersion == .v311)
    }

    @Test func aBrokerAnswering311sCode1AlsoFallsBackButAFixedVersionNeverDoes() {
        var auto = State(protocolVersion: .auto, sentCredentials: false)
        _ = auto.startConnect("connect", cancelled: false)
        #expect(auto.connack(reasonCode: 1).fellBack)
        var five = State(protocolVersion: .v5, sentCredentials: false)
        _ = five.startConnect("connect", cancelled: false)
        let refused = five.connack(reasonCode: 0x84)
        #expect(!refused.fellBack)
        #expect(Outcome(refused.actions).failed["connect"]?.code == .connectionRejected)
        #expect(five.protocolVersion == .v5)
    }

    @Test func aMalformedConnackFromA311BrokerFallsBackAsA0x84Does() {
        // libmosquitto ≥ 2.0.12 reports a 3.1.1 CONNACK read as MQTT 5 as a malformed packet.
        var state = State(protocolVersion: .auto, sentCredentials: false)
        _ = state.startConnect("connect", cancelled: false)
        #expect(state.awaitsConnack)
        let fellBack = state.refusedVersion5()
        #expect(fellBack)
        #expect(state.protocolVersion == .v311)
        let lost = state.connectionLost(.connectionLost(reason: "malformed packet"))
        #expect(lost.reconnect && Outcome(lost.actions).failed.isEmpty)
        #expect(state.willReconnect { _ in .seconds(5) }.delay == .zero)
        let again = state.refusedVersion5()
        #expect(!again, "once: 3.1.1 has nothing to fall back to")
        var fixed = State(protocolVersion: .v5, sentCredentials: false)
        _ = fixed.startConnect("connect", cancelled: false)
        let fixedFellBack = fixed.refusedVersion5()
        #expect(!fixedFellBack, "a protocol set to 5 never falls back")
    }

    @Test func aCloseBeforeAnyConnackFallsBackTo311AtOnceAndA311CloseTurnsBackTo5() {
        // RabbitMQ 3.10 closes an MQTT 5 CONNECT without a CONNACK; amqtt 0.12 after 10 s.
        var state = State(protocolVersion: .auto, sentCredentials: false)
        _ = state.startConnect("connect", cancelled: false)
        let fellBack = state.closedBeforeConnack()
        #expect(fellBack)
        #expect(state.protocolVersion == .v311)
        let lost = state.connectionLost(.connectionLost(reason: "closed before CONNACK"))
        #expect(lost.reconnect && !lost.isNews, "the close is the answer, not a loss to report")
        #expect(Outcome(lost.actions).failed.isEmpty, "the first connect goes on")
        #expect(state.willReconnect { _ in .seconds(5) }.delay == .zero, "3.1.1 at once")
        // 3.1.1 closed the same way: the version was not the cause.
        let back = state.closedBeforeConnack()
        #expect(back)
        #expect(state.protocolVersion == .v5)
        // A 3.1.1 CONNACK: connected with 3.1.1.
        var settled = State(protocolVersion: .auto, sentCredentials: false)
        _ = settled.startConnect("connect", cancelled: false)
        _ = settled.closedBeforeConnack()
        _ = settled.connectionLost(.connectionLost(reason: "closed before CONNACK"))
        _ = settled.willReconnect { _ in .seconds(1) }
        #expect(Outcome(settled.connack(reasonCode: 0).actions).succeeded == ["connect"])
        _ = settled.connectionLost(.connectionLost(reason: "node restarted"))
        _ = settled.willReconnect { _ in .seconds(1) }
        // A close is a weaker sign than a refusal (a proxy before a broker that is down closes
        // so too): after a loss, MQTT 5 is tried first again, and the same close falls back.
        #expect(settled.protocolVersion == .v5, "MQTT 5 first again after the loss")
        let again = settled.closedBeforeConnack()
        #expect(again)
        #expect(settled.protocolVersion == .v311)
        _ = settled.connectionLost(.connectionLost(reason: "closed before CONNACK"))
        _ = settled.willReconnect { _ in .seconds(1) }
        _ = settled.connack(reasonCode: 0)
        #expect(settled.connectionsAfterClose == 2, "the client says only the first at notice")
        // Refused in 3.1.1 after such a close (a broker coming up behind a proxy, a bad
        // password): that says nothing of MQTT 5, and the next attempt speaks 5 again.
        var refused = State(protocolVersion: .auto, sentCredentials: true)
        _ = refused.startConnect("connect", cancelled: false)
        _ = refused.closedBeforeConnack()
        _ = refused.connectionLost(.connectionLost(reason: "closed before CONNACK"))
        _ = refused.willReconnect { _ in .seconds(1) }
        #expect(!refused.connack(reasonCode: 3).fellBack)
        #expect(refused.protocolVersion == .v5, "not kept on 3.1.1 by a refusal")
        #expect(refused.connectionsAfterClose == 0)
        // A protocol set to 5 never changes.
        var five = State(protocolVersion: .v5, sentCredentials: false)
        _ = five.startConnect("connect", cancelled: false)
        let fixed = five.closedBeforeConnack()
        #expect(!fixed)
        #expect(five.protocolVersion == .v5)
    }

    @Test func aRefusalDuringAReconnectSaysNothingOfTheVersion() {
        // libmosquitto calls on_connect with an MQTT 5 refusal of 0x80 or more, then returns
        // MOSQ_ERR_PROTOCOL from its loop: the loop must not read that as a 3.1.1 broker.
        var state = State(protocolVersion: .auto, sentCredentials: true)
        _ = state.startConnect("connect", cancelled: false)
        _ = state.connack(reasonCode: 0)
        _ = state.connectionLost(.connectionLost(reason: "node restarted"))
        _ = state.willReconnect { _ in .seconds(1) }
        state.connectAttemptStarts()
        #expect(state.versionUnanswered, "a reconnect awaits its CONNACK")
        #expect(!state.connack(reasonCode: 0x86).fellBack, "bad user name or password")
        #expect(!state.versionUnanswered, "answered: the protocol error that follows is not about the version")
        let closed = state.closedBeforeConnack()
        #expect(!closed)
        #expect(state.protocolVersion == .v5)
        // The next attempt is unanswered again.
        _ = state.connectionLost(.connectionLost(reason: "refused"))
        _ = state.willReconnect { _ in .seconds(1) }
        state.connectAttemptStarts()
        #expect(state.versionUnanswered)
    }

    @Test func anyRefusalMovesTheFirstConnectOnToTheNextNodeAndTheLastOneEndsIt() {
        var state = State(protocolVersion: .v5, sentCredentials: true, brokerCount: 3, firstBroker: 0)
        _ = state.startConnect("connect", cancelled: false)
        #expect(Outcome(state.connack(reasonCode: 0x89).actions).failed.isEmpty, "server busy: not the end of the connect")
        #expect(state.connectionLost(.connectionLost(reason: "closed after the refusal")).reconnect)
        _ = state.willReconnect { _ in .seconds(5) }
        #expect(state.brokerIndex == 1)
        // A node refusing the login (its authentication broken) is passed too.
        #expect(Outcome(state.connack(reasonCode: 0x87).actions).failed.isEmpty, "not authorized by one node")
        #expect(state.connectionLost(.connectionLost(reason: "closed after the refusal")).reconnect)
        #expect(state.willReconnect { _ in .seconds(5) }.delay == .zero, "the next node at once")
        #expect(state.brokerIndex == 2)
        // Every node refused: the last refusal is the connect's error.
        #expect(Outcome(state.connack(reasonCode: 0x86).actions).failed["connect"]?.code == .badUserNameOrPassword)
    }

    @Test func aFirstConnectTriesEachBrokerOnceThenFails() {
        var state = State(protocolVersion: .v5, sentCredentials: false, brokerCount: 3, firstBroker: 2)
        #expect(state.brokerIndex == 2)
        _ = state.startConnect("connect", cancelled: false)
        var tried = [state.brokerIndex]
        for _ in 0..<2 {
            let lost = state.connectionLost(.connectionRefused(host: "127.0.0.1", port: 1))
            #expect(lost.reconnect)
            #expect(Outcome(lost.actions).failed.isEmpty)
            #expect(state.willReconnect { _ in .seconds(5) }.delay == .zero, "the next broker at once")
            tried.append(state.brokerIndex)
        }
        #expect(tried == [2, 0, 1])
        let last = state.connectionLost(.connectionRefused(host: "127.0.0.1", port: 1))
        #expect(!last.reconnect)
        #expect(Outcome(last.actions).failed["connect"]?.code == .connectionRefused)
    }

    @Test func aLostConnectionFailsOverToTheNextBrokerInTurnWithBackoff() {
        var state = State(protocolVersion: .v5, sentCredentials: false, brokerCount: 3, firstBroker: 0)
        _ = state.startConnect("connect", cancelled: false)
        _ = state.connack(reasonCode: 0)
        #expect(state.connectionLost(.connectionLost(reason: "node killed")).reconnect)
        var tried: [Int] = []
        for attempt in 1...4 {
            let next = state.willReconnect { .milliseconds(100 * $0) }
            #expect(next.attempt == attempt && next.delay == .milliseconds(100 * attempt))
            tried.append(state.brokerIndex)
            _ = state.connectionLost(.connectionRefused(host: "127.0.0.1", port: 1))
        }
        #expect(tried == [1, 2, 0, 1], "each attempt goes to the next node")
        #expect(state.connectionState != .closed)
    }

    @Test func theFirstBrokerIsSpreadOverAFleetByClientID() {
        let brokers = (1...3).map { BrokerURL(host: "node\($0)") }
        var chosen: [Int: Int] = [:]
        for vehicle in 0..<300 {
            let configuration = MQTTConfiguration(broker: brokers[0], otherBrokers: Array(brokers.dropFirst()), clientID: "van-\(vehicle)")
            chosen[configuration.firstBrokerIndex, default: 0] += 1
            let again = MQTTConfiguration(broker: brokers[0], otherBrokers: Array(brokers.dropFirst()), clientID: "van-\(vehicle)")
            #expect(again.firstBrokerIndex == configuration.firstBrokerIndex, "the same at every start")
        }
        #expect(chosen.count == 3)
        #expect(chosen.values.allSatisfy { $0 >= 70 }, "\(chosen)")
        #expect(MQTTConfiguration(broker: brokers[0], clientID: "van-1").firstBrokerIndex == 0)
    }

    // MARK: publish

    @Test func ackArrivingBeforeThePublishIsRegisteredCompletesIt() throws {
        var state = connected()
        let (epoch, token) = try state.beginPublish().get()
        // libmosquitto's thread sees the PUBACK for mid 7 before mosquitto_publish returned 7.
        #expect(Outcome(state.publishAcknowledged(mid: 7, reasonCode: 0)) == Outcome())
        let actions = state.publishSent(mid: 7, topic: "t", qos: .atLeastOnce, epoch: epoch, token: token, cancelled: false, ack: "p7")
        #expect(Outcome(actions).succeeded == ["p7"])
        // The early ack was consumed: the next publish given mid 7 waits for its own.
        let next = try state.beginPublish().get()
        #expect(
            Outcome(
                state.publishSent(
                    mid: 7, topic: "t", qos: .atLeastOnce, epoch: next.epoch, token: next.token, cancelled: false, ack: "again"))
                == Outcome())
    }

    @Test func failingReasonCodeFailsThePublish() throws {
        var state = connected()
        let (epoch, token) = try state.beginPublish().get()
        _ = state.publishSent(mid: 3, topic: "denied/topic", qos: .atLeastOnce, epoch: epoch, token: token, cancelled: false, ack: "p3")
        let outcome = Outcome(state.publishAcknowledged(mid: 3, reasonCode: 0x87))
        guard let error = outcome.failed["p3"], error.code == .publishRejected, error.topic == "denied/topic", error.reasonCode == 0x87
        else {
            Issue.record("0x87 fails the publish: \(outcome)")
            return
        }
        #expect("\(outcome.failed["p3"]!)".contains("0x87"))
    }

    @Test func qos0TakenBeforeALossFailsInsteadOfHanging() throws {
        var state = connected()
        let (epoch, token) = try state.beginPublish().get()
        #expect(state.connectionLost(.connectionLost(reason: "test")).reconnect)
        let outcome = Outcome(
            state.publishSent(mid: 9, topic: "t", qos: .atMostOnce, epoch: epoch, token: token, cancelled: false, ack: "p9"))
        guard outcome.failed["p9"]?.code == .connectionLost else {
            Issue.record("a QoS 0 publish from before the loss fails: \(outcome)")
            return
        }
    }

    @Test func qos1SurvivesALossAndCompletesOnTheLaterAck() throws {
        var state = connected()
        let (epoch, token) = try state.beginPublish().get()
        _ = state.publishSent(mid: 11, topic: "t", qos: .atLeastOnce, epoch: epoch, token: token, cancelled: false, ack: "p11")
        let lost = Outcome(state.connectionLost(.connectionLost(reason: "broker killed")).actions)
        #expect(lost.failed.isEmpty, "a QoS 1 publish is resent by libmosquitto, not failed")
        _ = state.connack(reasonCode: 0)
        #expect(Outcome(state.publishAcknowledged(mid: 11, reasonCode: 0)).succeeded == ["p11"])
        #expect(state.connectionState == .connected)
    }

    @Test func aCancelledPublishIgnoresItsLateAckAndNeverCompletesAnother() throws {
        var state = connected()
        let first = try state.beginPublish().get()
        _ = state.publishSent(mid: 5, topic: "t", qos: .atLeastOnce, epoch: first.epoch, token: first.token, cancelled: false, ack: "first")
        #expect(Outcome(state.cancelPublish(mid: 5, token: first.token)).cancelled == ["first"])
        #expect(Outcome(state.publishAcknowledged(mid: 5, reasonCode: 0)) == Outcome(), "the late ack is dropped")
        let second = try state.beginPublish().get()
        _ = state.publishSent(
            mid: 5, topic: "t", qos: .atLeastOnce, epoch: second.epoch, token: second.token, cancelled: false, ack: "second")
        #expect(Outcome(state.cancelPublish(mid: 5, token: first.token)) == Outcome(), "an old token cancels nothing")
        #expect(Outcome(state.publishAcknowledged(mid: 5, reasonCode: 0)).succeeded == ["second"])
        // Cancelled before its registration: the registration itself cancels.
        let third = try state.beginPublish().get()
        #expect(
            Outcome(
                state.publishSent(
                    mid: 6, topic: "t", qos: .atLeastOnce, epoch: third.epoch, token: third.token, cancelled: true, ack: "third")
            ).cancelled == ["third"])
    }

    @Test func publishingIsRefusedBeforeConnectAndAfterShutdown() {
        var state = State(protocolVersion: .v5, sentCredentials: false)
        #expect(throws: MQTTError.notConnected) { try state.beginPublish().get() }
        state = connected()
        _ = state.beginShutdown()
        #expect(throws: MQTTError.shutdown) { try state.beginPublish().get() }
    }

    // MARK: subscribe

    @Test func manySubscribesAreAwaitedTogetherAndEarlySubacksCount() throws {
        var state = connected()
        let filters = (0..<3).map { "fleet/v-\($0)/fix" }
        let (identifiers, epoch1) = try state.addSubscription(id: 1, filters: filters, qos: .atLeastOnce, sink: "s1").get()
        #expect(Set(identifiers).count == 3, "one subscription identifier per filter")
        // The SUBACK of the first SUBSCRIBE beats the registration.
        #expect(Outcome(state.subscribeAcknowledged(mid: 20, codes: [1])) == Outcome())
        let sent = Outcome(
            state.subscribeSent(id: 1, [(20, [filters[0]]), (21, [filters[1]]), (22, [filters[2]])], epoch: epoch1, ack: "sub"))
        #expect(sent.succeeded.isEmpty, "two SUBACKs are still outstanding")
        #expect(Outcome(state.subscribeAcknowledged(mid: 21, codes: [1])).succeeded.isEmpty)
        #expect(Outcome(state.subscribeAcknowledged(mid: 22, codes: [1])).succeeded == ["sub"])
        #expect(state.route(topic: "fleet/v-1/fix", identifiers: [identifiers[1]]) == ["s1"])
    }

    @Test func aShutdownHandingOverUnsubscribesEveryOpenFilterOnceAndKeepsRouting() throws {
        var state = connected()
        #expect(state.filtersToHandOver().filters.isEmpty, "not shutting down: nothing to hand over")
        let epoch1 = try state.addSubscription(id: 1, filters: ["a", "b"], qos: .atLeastOnce, sink: "s1").get().epoch
        _ = state.subscribeSent(id: 1, [(40, ["a", "b"])], epoch: epoch1, ack: "sub1")
        _ = state.subscribeAcknowledged(mid: 40, codes: [1, 1])
        let epoch2 = try state.addSubscription(id: 2, filters: ["b", "c"], qos: .atLeastOnce, sink: "s2").get().epoch
        _ = state.subscribeSent(id: 2, [(41, ["b", "c"])], epoch: epoch2, ack: "sub2")
        _ = state.subscribeAcknowledged(mid: 41, codes: [1, 1])
        _ = state.beginShutdown()
        let (filters, epoch) = state.filtersToHandOver()
        #expect(filters.sorted() == ["a", "b", "c"], "each filter once")
        #expect(epoch == epoch2)
        // Until the loop ends, what arrives still goes to the streams, and is counted.
        let before = state.messagesReceived
        #expect(state.received(topic: "a") == ["s1"])
        #expect(state.received(topic: "c") == ["s2"])
        #expect(state.messagesReceived == before &+ 2)
    }

    @Test func aRefusedFilterFailsTheCallAndEndsItsStream() throws {
        var state = connected()
        let epoch1 = try state.addSubscription(id: 1, filters: ["a", "b"], qos: .atLeastOnce, sink: "s1").get().epoch
        _ = state.subscribeSent(id: 1, [(30, ["a"]), (31, ["b"])], epoch: epoch1, ack: "sub")
        let refused = Outcome(state.subscribeAcknowledged(mid: 31, codes: [0x87]))
        guard let error = refused.failed["sub"], error.code == .subscribeRejected, error.filters == ["b"], error.reasonCode == 0x87 else {
            Issue.record("the call fails with the refusal: \(refused)")
            return
        }
        #expect(refused.streamsEnded.keys.sorted() == ["s1"])
        #expect(Outcome(state.subscribeAcknowledged(mid: 30, codes: [1])) == Outcome(), "the other SUBACK answers nobody")
        #expect(state.route(topic: "a").isEmpty, "an ended stream gets nothing")
        #expect(state.removeSubscription(id: 1).filters == ["a", "b"], "its onTermination unsubscribes every filter")
    }

    @Test func aCancelledSubscribeEndsItsWaitAndItsStream() throws {
        var state = connected()
        let epoch1 = try state.addSubscription(id: 1, filters: ["a"], qos: .atLeastOnce, sink: "s1").get().epoch
        _ = state.subscribeSent(id: 1, [(40, ["a"])], epoch: epoch1, ack: "sub")
        let cancelled = Outcome(state.cancelSubscribe(id: 1))
        #expect(cancelled.cancelled == ["sub"])
        #expect(cancelled.streamsEnded.keys.sorted() == ["s1"])
        #expect(Outcome(state.subscribeAcknowledged(mid: 40, codes: [1])) == Outcome())
        // Cancelled before the registration: the registration itself cancels.
        let epoch2 = try state.addSubscription(id: 2, filters: ["b"], qos: .atLeastOnce, sink: "s2").get().epoch
        let early = Outcome(state.subscribeSent(id: 2, [(41, ["b"])], epoch: epoch2, cancelled: true, ack: "sub2"))
        #expect(early.cancelled == ["sub2"] && early.streamsEnded.keys.sorted() == ["s2"])
    }

    /// The connection drops while `subscribe()` is still sending: its SUBSCRIBEs died with
    /// the connection, so waiting for their SUBACKs would wait forever. The wait succeeds and
    /// the next CONNACK restores the subscription.
    @Test func aSubscribeWhoseConnectionWasLostWhileSendingSucceedsAndIsRestored() throws {
        var state = connected()
        let epoch = try state.addSubscription(id: 1, filters: ["a/#", "b/#"], qos: .atLeastOnce, sink: "s").get().epoch
        _ = state.connectionLost(.connectionLost(reason: "broker restarted"))
        #expect(Outcome(state.subscribeSent(id: 1, [(5, ["a/#"]), (6, ["b/#"])], epoch: epoch, ack: "sub")).succeeded == ["sub"])
        #expect(state.connack(reasonCode: 0).restore.map(\.filter) == ["a/#", "b/#"])
    }

    /// A SUBACK whose `subscribe()` was cancelled (or whose stream had ended) is consumed, never
    /// left where the next publish given the same mid would take it as its PUBACK.
    @Test func theSubackOfACancelledSubscribeNeverCompletesAPublish() throws {
        var state = connected()
        let epoch = try state.addSubscription(id: 1, filters: ["a"], qos: .atLeastOnce, sink: "s").get().epoch
        _ = state.subscribeAcknowledged(mid: 41, codes: [1])  // before the registration
        _ = state.subscribeSent(id: 1, [(41, ["a"]), (42, ["a"])], epoch: epoch, cancelled: true, ack: "sub")
        _ = state.subscribeAcknowledged(mid: 42, codes: [1])  // after it
        for mid: Int32 in [41, 42] {
            let (publishEpoch, token) = try state.beginPublish().get()
            let actions = state.publishSent(
                mid: mid, topic: "t", qos: .atLeastOnce, epoch: publishEpoch, token: token, cancelled: false, ack: "p\(mid)")
            #expect(Outcome(actions) == Outcome(), "publish \(mid) waits for its own PUBACK")
        }
    }

    /// A refusal that ends another subscription sharing the filter also answers that
    /// subscription's own `subscribe()`, with the refusal.
    @Test func aRefusalAnswersEverySubscribeWaitingOnTheFilter() throws {
        var state = connected()
        let first = try state.addSubscription(id: 1, filters: ["a"], qos: .atLeastOnce, sink: "s1").get().epoch
        let second = try state.addSubscription(id: 2, filters: ["a", "b"], qos: .atLeastOnce, sink: "s2").get().epoch
        _ = state.subscribeSent(id: 1, [(1, ["a"])], epoch: first, ack: "one")
        _ = state.subscribeSent(id: 2, [(2, ["a"]), (3, ["b"])], epoch: second, ack: "two")
        let refused = Outcome(state.subscribeAcknowledged(mid: 1, codes: [0x87]))
        #expect(refused.failed.keys.sorted() == ["one", "two"])
        #expect(refused.failed.values.allSatisfy { $0.code == .subscribeRejected })
        #expect(refused.streamsEnded.keys.sorted() == ["s1", "s2"])
    }

    @Test func aRestoreTheBrokerRefusesEndsTheStreamsWithTheError() throws {
        var state = connected()
        let epoch1 = try state.addSubscription(id: 1, filters: ["fleet/+/fix"], qos: .atLeastOnce, sink: "fixes").get().epoch
        let epoch2 = try state.addSubscription(id: 2, filters: ["fleet/+/status"], qos: .atLeastOnce, sink: "status").get().epoch
        _ = state.subscribeSent(id: 1, [(1, ["fleet/+/fix"])], epoch: epoch1, ack: "a")
        _ = state.subscribeSent(id: 2, [(2, ["fleet/+/status"])], epoch: epoch2, ack: "b")
        _ = state.subscribeAcknowledged(mid: 1, codes: [1])
        _ = state.subscribeAcknowledged(mid: 2, codes: [1])
        _ = state.connectionLost(.connectionLost(reason: "broker restarted"))
        let restore = state.connack(reasonCode: 0).restore
        #expect(restore.map(\.filter) == ["fleet/+/fix", "fleet/+/status"])
        // The broker's ACL changed while it was down: it refuses the fix filter.
        let sent = Outcome(state.restoreSent([(7, "fleet/+/fix"), (8, "fleet/+/status")], failed: []))
        #expect(sent == Outcome())
        let refused = Outcome(state.subscribeAcknowledged(mid: 7, codes: [0x87]))
        guard let error = refused.streamsEnded["fixes"] ?? nil, error.code == .subscribeRejected, error.filters == ["fleet/+/fix"],
            error.reasonCode == 0x87
        else {
            Issue.record("the refused stream ends with the refusal: \(refused)")
            return
        }
        #expect(refused.streamsEnded["status"] == nil)
        #expect(Outcome(state.subscribeAcknowledged(mid: 8, codes: [1])) == Outcome())
        #expect(state.route(topic: "fleet/v/status") == ["status"])
    }

    @Test func aRestoreThatCannotBeSentEndsTheStreamsWithTheError() throws {
        var state = connected()
        _ = try state.addSubscription(id: 1, filters: ["x/#"], qos: .atLeastOnce, sink: "x").get()
        _ = state.connectionLost(.connectionLost(reason: "lost"))
        _ = state.connack(reasonCode: 0)
        let error = MQTTError.library(operation: "restore", code: 14, message: "out of memory")
        let outcome = Outcome(state.restoreSent([], failed: [("x/#", error)]))
        #expect(outcome.streamsEnded["x"] == .some(error))
        #expect(state.connack(reasonCode: 0).restore.isEmpty, "an ended stream is not restored again")
    }

    @Test func aSubscribeLostWithTheConnectionSucceedsAndIsRestored() throws {
        var state = connected()
        let epoch1 = try state.addSubscription(id: 1, filters: ["a/#"], qos: .exactlyOnce, sink: "s").get().epoch
        _ = state.subscribeSent(id: 1, [(3, ["a/#"])], epoch: epoch1, ack: "sub")
        #expect(Outcome(state.connectionLost(.connectionLost(reason: "lost")).actions).succeeded == ["sub"])
        let restore = state.connack(reasonCode: 0).restore
        #expect(restore.count == 1 && restore[0].filter == "a/#" && restore[0].qos == .exactlyOnce)
    }

    @Test func removingTheLastStreamOfAFilterUnsubscribesIt() throws {
        var state = connected()
        _ = try state.addSubscription(id: 1, filters: ["a/#", "b/#"], qos: .atLeastOnce, sink: "first").get()
        _ = try state.addSubscription(id: 2, filters: ["a/#"], qos: .atLeastOnce, sink: "second").get()
        #expect(state.route(topic: "a/x").sorted() == ["first", "second"])
        #expect(state.route(topic: "b/x") == ["first"])
        #expect(state.removeSubscription(id: 1).filters == ["b/#"])
        #expect(state.removeSubscription(id: 2).filters == ["a/#"])
        #expect(state.route(topic: "a/x").isEmpty)
    }

    // MARK: observers

    @Test func anObserverSeesEveryStateInOrderAndEndsWithClosed() {
        var state = State(protocolVersion: .v5, sentCredentials: false)
        let seen = state.connectionState
        _ = state.startConnect("connect", cancelled: false)
        // The state changed between the read and the registration: it is yielded too.
        // The state changed between the read and the registration: not stored; the newer
        // state comes back to be yielded first, then the observer is added with it.
        guard case .changed(.connecting) = state.addObserver(1, "o", seen: seen) else {
            Issue.record("the missed state is yielded")
            return
        }
        guard case .stored = state.addObserver(1, "o", seen: .connecting) else {
            Issue.record("stored once it has the current state")
            return
        }
        #expect(Outcome(state.connack(reasonCode: 0).actions).states == [.connected])
        let ended = state.loopEnded()
        #expect(ended.notify.map(\.1) == [.closed])
        #expect(ended.finishObservers == ["o"])
        guard case .finish(yield: nil) = state.addObserver(2, "late", seen: .closed) else {
            Issue.record("an observer of a closed client is finished")
            return
        }
    }

    // MARK: shutdown

    @Test func shutdownDrainsTheAwaitedPublishesThenStopsTheLoop() throws {
        var state = connected()
        let (epoch, token) = try state.beginPublish().get()
        _ = state.publishSent(mid: 1, topic: "t", qos: .atLeastOnce, epoch: epoch, token: token, cancelled: false, ack: "p1")
        let begun = state.beginShutdown()
        #expect(begun.mustDrain && begun.loopRunning)
        #expect(!state.mustStop, "the loop keeps running until the drain is over")
        #expect(Outcome(state.awaitDrain(id: 10, cancelled: false, "drain")) == Outcome())
        let acked = Outcome(state.publishAcknowledged(mid: 1, reasonCode: 0))
        #expect(acked.succeeded == ["p1"] && acked.resumed == ["drain"])
        let answer301 = state.stopAfterDrain()
        #expect(answer301)
        #expect(state.mustStop)
        let answer303 = state.awaitLoopEnd(id: 11, "exit")
        #expect(answer303)
        #expect(Outcome(state.loopEnded()).resumed == ["exit"])
        let answer305 = state.awaitLoopEnd(id: 12, "again")
        #expect(!answer305, "nothing to wait for once the loop has ended")
    }

    @Test func theLoopsEndFailsWhatIsLeftAndFinishesEveryStream() throws {
        var state = connected()
        _ = state.addObserver(1, "observer", seen: state.connectionState)
        let (epoch, token) = try state.beginPublish().get()
        _ = state.publishSent(mid: 1, topic: "t", qos: .atLeastOnce, epoch: epoch, token: token, cancelled: false, ack: "p1")
        let epoch2 = try state.addSubscription(id: 2, filters: ["a"], qos: .atLeastOnce, sink: "s").get().epoch
        _ = state.subscribeSent(id: 2, [(2, ["a"])], epoch: epoch2, ack: "sub")
        _ = state.beginShutdown()
        _ = state.awaitDrain(id: 3, cancelled: false, "drain")
        let ended = Outcome(state.loopEnded())
        #expect(ended.failed == ["p1": .shutdown, "sub": .shutdown])
        #expect(ended.streamsEnded.keys.sorted() == ["s"] && ended.streamsEnded["s"] == .some(nil))
        #expect(ended.resumed == ["drain"])
        #expect(ended.states == [.closed])
    }

    @Test func shutdownWaitsForTheUnsubackOfEveryUnsubscribeStillOnItsWay() throws {
        var state = connected()
        // The UNSUBACK for mid 7 beats the registration: nothing stays outstanding.
        #expect(Outcome(state.unsubscribeAcknowledged(mid: 7)) == Outcome())
        let firstEpoch = try state.beginPublish().get().epoch
        _ = state.unsubscribeSent(mid: 7, epoch: firstEpoch)
        // An UNSUBSCRIBE sent on a connection since lost is never answered: not waited for.
        let lostEpoch = firstEpoch
        _ = state.connectionLost(.connectionLost(reason: "test"))
        _ = state.connack(reasonCode: 0)
        _ = state.unsubscribeSent(mid: 8, epoch: lostEpoch)
        let currentEpoch = try state.beginPublish().get().epoch
        _ = state.beginShutdown()
        let answer334 = state.awaitUnsubacks(id: 1, "none")
        #expect(!answer334, "nothing outstanding")
        _ = state.unsubscribeSent(mid: 9, epoch: currentEpoch)
        let answer336 = state.awaitUnsubacks(id: 2, "unsubacks")
        #expect(answer336)
        #expect(Outcome(state.unsubscribeAcknowledged(mid: 8)) == Outcome(), "another mid's UNSUBACK resumes nothing")
        #expect(Outcome(state.unsubscribeAcknowledged(mid: 9)).resumed == ["unsubacks"])
        #expect(state.stopWaiting(id: 2) == nil, "already resumed")
    }

    @Test func aShutdownStepWhoseTimeIsUpIsResumedOnce() {
        var state = connected()
        _ = state.beginShutdown()
        let answer345 = state.awaitLoopEnd(id: 5, "exit")
        #expect(answer345)
        #expect(state.stopWaiting(id: 5) == "exit")
        #expect(state.stopWaiting(id: 5) == nil)
        #expect(Outcome(state.loopEnded()).resumed.isEmpty)
    }

    // MARK: errors

    @Test func connackRefusalsMapToClearErrors() {
        #expect(MQTTError.connack(reasonCode: 0x86, version: .v5, sentCredentials: true) == .badUserNameOrPassword(reasonCode: 0x86))
        #expect(MQTTError.connack(reasonCode: 4, version: .v311, sentCredentials: true) == .badUserNameOrPassword(reasonCode: 4))
        #expect(MQTTError.connack(reasonCode: 0x87, version: .v5, sentCredentials: false) == .notAuthorized(reasonCode: 0x87))
        #expect(MQTTError.connack(reasonCode: 5, version: .v311, sentCredentials: false) == .notAuthorized(reasonCode: 5))
        #expect(MQTTError.connack(reasonCode: 0x87, version: .v5, sentCredentials: true) == .badUserNameOrPassword(reasonCode: 0x87))
        let rejection = MQTTError.connack(reasonCode: 0x85, version: .v5, sentCredentials: false)
        #expect(rejection.code == .connectionRejected && rejection.reasonCode == 0x85)
        #expect(rejection.detail.lowercased().contains("client"), "libmosquitto's text for 0x85: \(rejection.detail)")
    }
}
