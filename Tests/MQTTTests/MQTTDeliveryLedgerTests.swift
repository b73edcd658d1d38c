@testable import MQTT
import Testing

/// The bookkeeping that keeps acknowledgements from reaching the broker before the consumer
/// has handled the messages, driven without a broker or a thread.
@Suite struct MQTTDeliveryLedgerTests {
    @Test func writesWaitUntilEverythingHandedOverIsHandled() {
        var ledger = MQTTDeliveryLedger()
        #expect(ledger.isSettled, "nothing received: the loop may write")
        let tag1 = ledger.deliver(handedOver: true)
        #expect(tag1 == 1)
        let tag2 = ledger.deliver(handedOver: true)
        #expect(tag2 == 2)
        #expect(!ledger.isSettled)
        #expect(ledger.outstanding == 2)
        let r77853 = ledger.acknowledge(through: 1)
        #expect(!r77853, "still one to handle")
        #expect(!ledger.isSettled)
        let r53142 = ledger.acknowledge(through: 2)
        #expect(r53142, "now the loop may write")
        #expect(ledger.isSettled)
        let r45519 = ledger.acknowledge(through: 2)
        #expect(!r45519, "an acknowledgement again changes nothing")
    }

    @Test func aMessageNobodyTakesIsNotWaitedFor() {
        var ledger = MQTTDeliveryLedger()
        _ = ledger.deliver(handedOver: true)
        _ = ledger.deliver(handedOver: false)
        #expect(ledger.outstanding == 1)
        let r64645 = ledger.acknowledge(through: 1)
        #expect(r64645)
        #expect(ledger.isSettled)
    }

    @Test func anAcknowledgementAheadOfTheDeliveriesCoversOnlyWhatWasDelivered() {
        var ledger = MQTTDeliveryLedger()
        _ = ledger.deliver(handedOver: true)
        let r51626 = ledger.acknowledge(through: 99)
        #expect(r51626)
        _ = ledger.deliver(handedOver: true)
        #expect(!ledger.isSettled, "tag 2 came after the acknowledgement")
        #expect(ledger.handledThrough == 1)
    }
}
