import MQTTCore
import Testing

/// The bookkeeping that keeps acknowledgements from reaching the broker before the consumer
/// has handled the messages, driven without a broker or a thread.
@Suite struct MQTTDeliveryLedgerTests {
    let t0 = ContinuousClock.now

    @Test func readingStopsWhileTheConsumerHoldsItsBudgetInBytes() {
        var ledger = MQTTDeliveryLedger()
        let budget = 10_000
        #expect(ledger.mayRead(at: t0, patience: .seconds(1), awaitingReply: false, budget: budget))
        var tags: [UInt64] = []
        for _ in 0..<3 { tags.append(ledger.deliver(.handedOver, bytes: 4_000, at: t0)) }
        #expect(ledger.outstandingBytes == 12_000)
        #expect(!ledger.mayRead(at: t0, patience: .seconds(1), awaitingReply: false, budget: budget), "12 kB held, 10 kB allowed")
        #expect(ledger.mayRead(at: t0, patience: .seconds(1), awaitingReply: true, budget: budget), "a SUBACK behind them is read")
        #expect(ledger.mayRead(at: t0, patience: .seconds(1), awaitingReply: false), "no budget: only the patience counts")
        _ = ledger.acknowledge(through: tags[0])
        #expect(ledger.outstandingBytes == 8_000)
        #expect(ledger.mayRead(at: t0, patience: .seconds(1), awaitingReply: false, budget: budget))
        _ = ledger.deliver(.unwanted, bytes: 50_000, at: t0)
        #expect(ledger.outstandingBytes == 8_000, "a message let go is not held")
        _ = ledger.acknowledge(through: 4)
        #expect(ledger.outstandingBytes == 0 && ledger.isSettled)
        // Many deliveries, acknowledged in steps: the count comes back to zero.
        for round in 0..<5 {
            var last: UInt64 = 0
            for _ in 0..<1_000 { last = ledger.deliver(.handedOver, bytes: 3, at: t0) }
            _ = ledger.acknowledge(through: last - 500)
            #expect(ledger.outstandingBytes == 1_500, "round \(round)")
            _ = ledger.acknowledge(through: last)
            #expect(ledger.outstandingBytes == 0, "round \(round)")
        }
    }

    @Test func writesWaitUntilEverythingHandedOverIsHandled() {
        var ledger = MQTTDeliveryLedger()
        #expect(ledger.isSettled, "nothing received: the loop may write")
        let first = ledger.deliver(.handedOver, at: t0)
        let second = ledger.deliver(.handedOver, at: t0)
        #expect([first, second] == [1, 2])
        #expect(!ledger.isSettled)
        #expect(ledger.outstanding == 2)
        let one = ledger.acknowledge(through: 1)
        #expect(!one, "still one to handle")
        #expect(!ledger.isSettled)
        let two = ledger.acknowledge(through: 2)
        #expect(two, "now the loop may write")
        #expect(ledger.isSettled)
        let again = ledger.acknowledge(through: 2)
        #expect(!again, "an acknowledgement again changes nothing")
    }

    @Test func aMessageNoStreamAskedForIsLetGoButOneNobodyCouldTakeIsNeverAcknowledged() {
        var ledger = MQTTDeliveryLedger()
        _ = ledger.deliver(.handedOver, at: t0)
        _ = ledger.deliver(.unwanted, at: t0)
        #expect(ledger.outstanding == 1)
        let orphan1 = ledger.takeOrphaned()
        #expect(!orphan1, "an unwanted message goes with the rest")
        let settled = ledger.acknowledge(through: 1)
        #expect(settled)
        _ = ledger.deliver(.orphaned, at: t0)
        let orphan2 = ledger.takeOrphaned()
        #expect(orphan2, "the loop drops the connection unwritten")
        let orphan3 = ledger.takeOrphaned()
        #expect(!orphan3, "once")
        // Tagged as handed over, then refused by its stream: never covered by a later tag.
        _ = ledger.deliver(.handedOver, at: t0)
        ledger.refused()
        let orphan4 = ledger.takeOrphaned()
        #expect(orphan4)
    }

    @Test func anAcknowledgementAheadOfTheDeliveriesCoversOnlyWhatWasDelivered() {
        var ledger = MQTTDeliveryLedger()
        _ = ledger.deliver(.handedOver, at: t0)
        let ahead = ledger.acknowledge(through: 99)
        #expect(ahead)
        _ = ledger.deliver(.handedOver, at: t0)
        #expect(!ledger.isSettled, "tag 2 came after the acknowledgement")
        #expect(ledger.handledThrough == 1)
    }

    @Test func nothingIsReadWhileASubscribeIsUnwrittenNorWhileTheConsumerIsLongBehind() {
        var ledger = MQTTDeliveryLedger()
        let patience = Duration.seconds(1)
        #expect(ledger.mayRead(at: t0, patience: patience, awaitingReply: false))
        ledger.beginSubscribe()
        #expect(!ledger.mayRead(at: t0, patience: patience, awaitingReply: false))
        ledger.queueEmptied()
        #expect(!ledger.mayRead(at: t0, patience: patience, awaitingReply: false), "still queueing its SUBSCRIBEs")
        ledger.endSubscribe()
        ledger.queueEmptied()
        #expect(ledger.mayRead(at: t0, patience: patience, awaitingReply: false), "written")
        _ = ledger.deliver(.handedOver, at: t0)
        #expect(ledger.mayRead(at: t0 + .milliseconds(900), patience: patience, awaitingReply: false))
        #expect(!ledger.mayRead(at: t0 + .seconds(2), patience: patience, awaitingReply: false), "the consumer catches up first")
        #expect(ledger.mayRead(at: t0 + .seconds(2), patience: patience, awaitingReply: true), "a SUBACK is behind what arrives")
        _ = ledger.acknowledge(through: 1)
        #expect(ledger.mayRead(at: t0 + .seconds(2), patience: patience, awaitingReply: false))
    }
}
