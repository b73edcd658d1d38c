import FleetCore
import Testing

/// The recorder's order within a batch and what it may acknowledge, with plain values.
@Suite struct FairBatchOrderTests {
    @Test func aBatchIsHandledRoundRobinByVehicleEachInItsOwnOrder() {
        let vehicles = ["hog", "hog", "hog", "van", "hog", "bus", "van"]
        let order = FairBatchOrder.roundRobin(vehicles)
        #expect(order == [0, 3, 5, 1, 6, 2, 4])
        #expect(Set(order) == Set(vehicles.indices), "every message once")
        // A thousand of one vehicle's messages and one of another's: that one comes second.
        let flood = Array(repeating: "hog", count: 1_000) + ["van"]
        #expect(FairBatchOrder.roundRobin(flood).prefix(2) == [0, 1_000])
        #expect(FairBatchOrder.roundRobin([]).isEmpty)
    }

    @Test func onlyAWrittenPrefixIsAcknowledged() {
        var prefix = WrittenPrefix(count: 6)
        #expect(prefix.markWritten([0, 3]) == 0, "message 0 written: acknowledge through it")
        #expect(prefix.markWritten([4, 5]) == nil, "1 and 2 still unwritten: nothing more")
        #expect(prefix.markWritten([2]) == nil)
        #expect(prefix.markWritten([1]) == 5, "all written: through the last")
        #expect(prefix.markWritten([]) == nil)
    }
}
