import FleetCore
import Testing

/// Two consumers under one client id, as a virtual clock sees them: said once, at the broker's
/// reason code or at the third quick loss in a row, and never for ordinary reconnections.
@Suite struct SessionTakeoverTests {
    @Test func theBrokersReasonCodeIsSaidAtOnceAndOnlyOnce() {
        var takeover = SessionTakeover()
        let taken = "the broker disconnected: Session taken over (0x8E)"
        let said = [
            takeover.observe(.connected, at: 0), takeover.observe(.disconnected(reason: taken), at: 60_000),
            takeover.observe(.connected, at: 61_000), takeover.observe(.disconnected(reason: taken), at: 62_000),
        ]
        #expect(said == [false, true, false, false])
    }

    @Test func threeQuickLossesInARowSayItWithoutAReasonCode() {
        var takeover = SessionTakeover()
        var said: [Bool] = []
        for second in 0..<6 {
            _ = takeover.observe(.connected, at: Int64(second) * 1_200)
            said.append(takeover.observe(.disconnected(reason: "connection lost"), at: Int64(second) * 1_200 + 900))
        }
        #expect(said == [false, false, true, false, false, false])
    }

    @Test func ordinaryReconnectionsAreNotATakeover() {
        var takeover = SessionTakeover()
        // A broker restarted twice, an hour apart, and a network that drops a long connection.
        for (connected, lost) in [(Int64(0), Int64(3_600_000)), (3_601_000, 3_602_000), (3_700_000, 7_200_000), (7_201_000, 7_202_000)] {
            _ = takeover.observe(.connected, at: connected)
            let said = takeover.observe(.disconnected(reason: "connection lost"), at: lost)
            #expect(!said)
        }
    }
}
