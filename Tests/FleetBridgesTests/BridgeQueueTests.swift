import FleetProtocol
import GNSS
import MQTT
import Testing

@testable import FleetBridges
@testable import FleetCore

/// ``BridgeQueue``, the lock around ``BridgeQueueState``, with real tasks: the publisher waits
/// for the reader, takes the rest after the end, and a cancelled publisher is not left waiting.
@Suite struct BridgeQueueTests {
    func output(_ vehicle: String, _ seconds: Int64) -> FleetBridgeOutput {
        let time = UTCTimestamp(millisecondsSince1970: 1_767_323_045_000 + seconds * 1000)
        return FleetBridgeOutput(
            vehicle: VehicleID(vehicle)!,
            message: MQTTMessage(topic: "owntracks/acme/\(vehicle)", payload: Array("\(seconds)".utf8), qos: .atLeastOnce, retain: true),
            position: .init(time: time, seq: MessageNumber(seq: UInt64(seconds))))
    }

    @Test func thePublisherWaitsForTheReaderThenTakesTheNewestOfEachVehicleInTurn() async {
        let queue = BridgeQueue(limits: .init(), logger: .init(label: "test"))
        let publisher = Task { await queue.next() }
        // Whether the publisher is waiting yet or not, it gets the first output.
        queue.enqueue(output("a", 1), at: .zero)
        #expect(await publisher.value == output("a", 1))
        for seconds in 2...100 { queue.enqueue(output("a", Int64(seconds)), at: .zero) }
        queue.enqueue(output("b", 1), at: .zero)
        queue.enqueue(output("a", 50), at: .zero)  // older than a's 100: never published
        queue.finish()
        #expect(await queue.next() == output("a", 100))
        #expect(await queue.next() == output("b", 1))
        #expect(await queue.next() == nil)
        let counts = queue.counts
        #expect(counts.coalesced == 98 && counts.stale == 1 && counts.dropped == 0)
    }

    @Test func aCancelledPublisherStopsWaiting() async {
        let queue = BridgeQueue(limits: .init(), logger: .init(label: "test"))
        let publisher = Task { await queue.next() }
        publisher.cancel()
        #expect(await publisher.value == nil)
        // The queue goes on for the next publisher.
        queue.enqueue(output("a", 1), at: .zero)
        #expect(await queue.next() == output("a", 1))
    }
}
