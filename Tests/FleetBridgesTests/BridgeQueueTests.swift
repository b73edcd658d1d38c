import FleetBridges
import FleetCore
import FleetProtocol
import GNSS
import MQTT
import Testing

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

    @Test func eventsThatDoNotCoalesceAllGoOutInOrder() async {
        let queue = BridgeQueue(limits: .init(), logger: .init(label: "test"))
        func transition(_ text: String) -> FleetBridgeOutput {
            FleetBridgeOutput(
                vehicle: VehicleID("a")!,
                message: MQTTMessage(topic: "owntracks/acme/a/event", payload: Array(text.utf8), qos: .atLeastOnce, retain: false),
                coalesces: false)
        }
        for text in ["enter Depot", "leave Depot", "enter Customer"] { queue.enqueue(transition(text), at: .zero) }
        queue.enqueue(output("a", 1), at: .zero)
        queue.enqueue(output("a", 2), at: .zero)  // replaces the pending position, not a transition
        queue.finish()
        var taken: [String] = []
        while let next = await queue.next() { taken.append(String(decoding: next.message.payload, as: UTF8.self)) }
        #expect(taken == ["enter Depot", "leave Depot", "enter Customer", "2"])
        #expect(queue.counts.coalesced == 1)
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
