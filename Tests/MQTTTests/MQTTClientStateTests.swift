@testable import MQTT
import Testing

/// The state machine alone, without libmosquitto: the races the callbacks create.
@Suite struct MQTTClientStateTests {
    func connectedState() -> MQTTClientState {
        var state = MQTTClientState(protocolVersion: .v5, sentCredentials: false)
        state.phase = .connected
        return state
    }

    @Test func ackArrivingBeforeThePublishIsRegisteredCompletesIt() async throws {
        var state = connectedState()
        // libmosquitto's thread sees the PUBACK for mid 7 before mosquitto_publish returned 7.
        let early = state.publishAcknowledged(mid: 7, reasonCode: 0)
        #expect(early.completions.isEmpty)
        #expect(state.earlyAcks[7] == [0])
        try await withCheckedThrowingContinuation { continuation in
            let actions = state.registerPublish(mid: 7, topic: "t", qos: .atLeastOnce, epochAtSend: state.epoch, continuation: continuation)
            #expect(actions.completions.count == 1)
            actions.run()
        }
        #expect(state.pendingPublishes.isEmpty && state.earlyAcks.isEmpty)
    }

    @Test func failingReasonCodeFailsThePublish() async throws {
        var state = connectedState()
        await #expect {
            try await withCheckedThrowingContinuation { continuation in
                state.registerPublish(mid: 3, topic: "denied/topic", qos: .atLeastOnce, epochAtSend: state.epoch, continuation: continuation).run()
                state.publishAcknowledged(mid: 3, reasonCode: 0x87).run()
            }
        } throws: { error in
            guard case MQTTError.publishRejected("denied/topic", 0x87, _) = error else { return false }
            return "\(error)".contains("0x87")
        }
    }

    @Test func qos0TakenBeforeALossFailsInsteadOfHanging() async throws {
        var state = connectedState()
        let epochAtSend = state.epoch
        let lost = state.connectionLost(.connectionLost(reason: "test"))
        #expect(lost.reconnect)
        #expect(state.phase == .reconnecting)
        await #expect(throws: MQTTError.self) {
            try await withCheckedThrowingContinuation { continuation in
                state.registerPublish(mid: 9, topic: "t", qos: .atMostOnce, epochAtSend: epochAtSend, continuation: continuation).run()
            }
        }
        #expect(state.pendingPublishes.isEmpty)
    }

    @Test func qos1SurvivesALossAndCompletesOnTheLaterAck() async throws {
        var state = connectedState()
        try await withCheckedThrowingContinuation { continuation in
            state.registerPublish(mid: 11, topic: "t", qos: .atLeastOnce, epochAtSend: state.epoch, continuation: continuation).run()
            let lost = state.connectionLost(.connectionLost(reason: "broker killed"))
            #expect(lost.actions.completions.isEmpty, "a QoS 1 publish is resent by libmosquitto, not failed")
            lost.actions.run()
            state.connack(reasonCode: 0).actions.run()
            state.publishAcknowledged(mid: 11, reasonCode: 0).run()
        }
        #expect(state.connectionState == .connected)
    }

    @Test func connackRefusalsMapToClearErrors() {
        #expect(MQTTError.connack(reasonCode: 0x86, version: .v5, sentCredentials: true) == .badUserNameOrPassword(reasonCode: 0x86))
        #expect(MQTTError.connack(reasonCode: 4, version: .v311, sentCredentials: true) == .badUserNameOrPassword(reasonCode: 4))
        #expect(MQTTError.connack(reasonCode: 0x87, version: .v5, sentCredentials: false) == .notAuthorized(reasonCode: 0x87))
        #expect(MQTTError.connack(reasonCode: 5, version: .v311, sentCredentials: false) == .notAuthorized(reasonCode: 5))
        #expect(MQTTError.connack(reasonCode: 0x87, version: .v5, sentCredentials: true) == .badUserNameOrPassword(reasonCode: 0x87))
        guard case .connectionRejected(0x85, let reason) = MQTTError.connack(reasonCode: 0x85, version: .v5, sentCredentials: false) else {
            Issue.record("0x85 must be a rejection")
            return
        }
        #expect(reason.lowercased().contains("client"), "libmosquitto's text for 0x85: \(reason)")
    }

    @Test func removingTheLastStreamOfAFilterUnsubscribesIt() {
        var state = MQTTClientState(protocolVersion: .v5, sentCredentials: false)
        state.phase = .connected
        let (_, first) = AsyncThrowingStream.makeStream(of: MQTTMessage.self)
        let (_, second) = AsyncThrowingStream.makeStream(of: MQTTMessage.self)
        #expect(state.addSubscription(id: 1, filters: ["a/#", "b/#"], qos: .atLeastOnce, continuation: first) == nil)
        #expect(state.addSubscription(id: 2, filters: ["a/#"], qos: .atLeastOnce, continuation: second) == nil)
        #expect(state.route(topic: "a/x").count == 2)
        #expect(state.route(topic: "b/x").count == 1)
        #expect(state.removeSubscription(id: 1).filters == ["b/#"])
        #expect(state.removeSubscription(id: 2).filters == ["a/#"])
        #expect(state.route(topic: "a/x").isEmpty)
    }

    @Test func shutdownWaitsForTheUnsubackOfEveryUnsubscribeStillOnItsWay() async {
        var state = MQTTClientState(protocolVersion: .v5, sentCredentials: false)
        state.phase = .connected
        state.loopRunning = true
        // libmosquitto's thread can deliver the UNSUBACK before the sender registers the id.
        let early = state.unsubscribeAcknowledged(mid: 7)
        #expect(early.resumeExit.isEmpty)
        _ = state.registerUnsubscribe(mid: 7, epoch: state.epoch)
        #expect(state.pendingUnsubscribes.isEmpty)
        // An UNSUBSCRIBE sent on a connection since lost is never answered: not waited for.
        let lostEpoch = state.epoch
        _ = state.connectionLost(.connectionLost(reason: "test"))
        _ = state.registerUnsubscribe(mid: 8, epoch: lostEpoch)
        #expect(state.pendingUnsubscribes.isEmpty)
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let stored = state.addUnsubackWaiter(id: 1, waiter)
            #expect(!stored, "nothing outstanding: no wait")
            waiter.resume()
        }
        // One on the current connection is waited for until its UNSUBACK.
        _ = state.registerUnsubscribe(mid: 9, epoch: state.epoch)
        #expect(state.pendingUnsubscribes == [9])
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let stored = state.addUnsubackWaiter(id: 2, waiter)
            #expect(stored)
            let other = state.unsubscribeAcknowledged(mid: 8)
            #expect(other.resumeExit.isEmpty, "another id does not end the wait")
            let actions = state.unsubscribeAcknowledged(mid: 9)
            #expect(actions.resumeExit.count == 1)
            if actions.resumeExit.isEmpty { waiter.resume() } else { actions.run() }
        }
        #expect(state.unsubackWaiters.isEmpty)
    }
}
