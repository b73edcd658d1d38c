import EdgeCore
import EdgeOutbox
import EdgePublisher
import EdgeTestSupport
import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import Logging
import Testing

/// Cellular batching (`uplink.batch`): the publisher sends nothing live but the status; fixes
/// and headings wait in the outbox and go out as retained `…/batch` messages.
@Suite("Batched uplink")
struct BatchedUplinkTests {
    private let vehicle = VehicleID("van-7")!

    private func makePublisher(sender: any MessageSending, dir: TemporaryDirectory, window: Duration) async -> Publisher {
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let store = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: logger)
        // The drain timeout is a bound on a hang here, not what is checked: on a machine loaded
        // by the whole suite, the finish's flush must not run out of its share of it.
        var settings = Publisher.Settings.quick(vehicle: vehicle)
        settings.policy = ReportingPolicy(stationarySpeed: 0.5)
        settings.drainTimeout = .seconds(60)
        settings.uplinkBatch = window
        return Publisher(settings: settings, sender: sender, store: store, logger: logger)
    }

    /// The `seq`s of each batch message, in the order they were sent.
    private func batches(_ sender: RecordingSender) -> [[Int]] { batches(sender.sent) }

    private func batches(_ sent: [RecordingSender.Sent]) -> [[Int]] {
        sent.filter { $0.topic == "fleet/van-7/batch" }.map { message in
            (try? FleetPayload.decodeBatch(message.payload, vehicle: vehicle))?.events.compactMap { $0.seq.map(Int.init) } ?? []
        }
    }

    private static func gnss(of message: HoldingSender.Started) -> String? {
        ((try? JSONSerialization.jsonObject(with: Data(message.payload))) as? [String: Any])?["gnss"] as? String
    }

    private func waitForBatches(_ count: Int, _ sender: RecordingSender) async throws {
        try await withTimeout { await sender.waitUntil { batches($0.sent).count >= count } }
    }

    @Test(
        "a 60 s window: the first fix goes at once, the next ones wait, the stop sends them with it at once (a start right after does not), a clean finish sends the rest; nothing goes live, every batch is retained at QoS 1"
    )
    func startsStopsAndFinishFlush() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let sender = RecordingSender()
        let publisher = await makePublisher(sender: sender, dir: dir, window: .seconds(60))
        let running = Task { await publisher.run() }
        try await withTimeout { await sender.waitForSent(1) }  // the online status
        publisher.publish(.state(.streaming))

        publisher.publish(.fix(Fixes.fix(at: 0, speed: 5)))  // seq 1: the first fix
        try await waitForBatches(1, sender)
        for second in 1...3 { publisher.publish(.fix(Fixes.fix(at: Double(second), east: Double(second) * 5, speed: 5))) }
        publisher.publish(.heading(Heading(time: Fixes.time(3), trueHeading: 91.2, source: .hdt)))  // seq 2…5
        try await Task.sleep(for: .milliseconds(300))
        #expect(batches(sender) == [[1]], "moving fixes wait for their batch")

        publisher.publish(.fix(Fixes.fix(at: 4, east: 15, speed: 0)))  // seq 6: the vehicle stops
        try await waitForBatches(2, sender)
        publisher.publish(.fix(Fixes.fix(at: 5, east: 15, speed: 0)))  // seq 7: parked, waits
        // seq 8: it starts again within 30 s of the stop: no second flush (speed noise around
        // the stationary threshold must not make every few seconds a batch).
        publisher.publish(.fix(Fixes.fix(at: 6, east: 20, speed: 5)))
        try await Task.sleep(for: .milliseconds(300))
        #expect(batches(sender) == [[1], [2, 3, 4, 5, 6]])

        publisher.finish()
        try await withTimeout { await running.value }
        #expect(batches(sender) == [[1], [2, 3, 4, 5, 6], [7, 8]], "a clean finish sends what waited")
        let sent = sender.sent
        #expect(
            sent.allSatisfy { $0.topic == "fleet/van-7/batch" || $0.topic == "fleet/van-7/status" }, "nothing live: \(sent.map(\.topic))")
        #expect(sent.filter { $0.topic.hasSuffix("/batch") }.allSatisfy { $0.retain && $0.qos == .atLeastOnce })
        #expect(publisher.backlogCount == 0)
    }

    @Test("a 60 s window at a high rate: a full compact batch (2,048 events) goes at once, not at the end of the window")
    func fullBatchGoesAtOnce() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let sender = RecordingSender()
        let publisher = await makePublisher(sender: sender, dir: dir, window: .seconds(60))
        let running = Task { await publisher.run() }
        try await withTimeout { await sender.waitForSent(1) }
        publisher.publish(.fix(Fixes.fix(at: 0, speed: 5)))
        try await waitForBatches(1, sender)
        for tenth in 1...2_100 {
            publisher.publish(.fix(Fixes.fix(at: Double(tenth) / 10, east: Double(tenth) * 0.5, speed: 5)))
        }
        try await waitForBatches(2, sender)
        #expect(batches(sender).dropFirst().first == Array(2...2_049))
        publisher.finish()
        try await withTimeout { await running.value }
        #expect(batches(sender).last == Array(2_050...2_101), "the rest at the finish")
    }

    @Test(
        "a stop while a batch waits for its acknowledgement: the batch is left to be acknowledged, not sent a second time with the rest"
    )
    func stopDoesNotResendTheBatchInFlight() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let sender = HoldingSender()  // each send waits until the test completes it
        let publisher = await makePublisher(sender: sender, dir: dir, window: .seconds(60))
        let running = Task { await publisher.run() }
        try await withTimeout { await sender.waitUntil { $0.started.count == 1 } }
        sender.complete(0)  // the online status
        publisher.publish(.state(.streaming))
        publisher.publish(.fix(Fixes.fix(at: 0, speed: 5)))  // the first fix: a batch at once
        try await withTimeout { await sender.waitUntil { $0.started.contains { $0.topic.hasSuffix("/batch") } } }
        for second in 1...3 { publisher.publish(.fix(Fixes.fix(at: Double(second), east: Double(second) * 5, speed: 5))) }
        // Statuses are acknowledged (the last one says the receiver is fixing); only the batch waits.
        try await withTimeout {
            await sender.waitUntil { $0.started.contains { $0.isStatus && Self.gnss(of: $0) == "fixing" } }
        }
        let snapshot = sender.snapshot
        for index in snapshot.outstanding where !snapshot.started[index].topic.hasSuffix("/batch") { sender.complete(index) }

        publisher.finish()
        // The broker's acknowledgement of the batch comes a moment after the stop began.
        try await Task.sleep(for: .milliseconds(200))
        let first = try #require(sender.snapshot.started.firstIndex { $0.topic.hasSuffix("/batch") })
        sender.complete(first)
        sender.completeAll()
        try await withTimeout { await running.value }

        let seqs = sender.snapshot.started.filter { $0.topic.hasSuffix("/batch") }.flatMap { message in
            (try? FleetPayload.decodeBatch(message.payload, vehicle: vehicle))?.events.compactMap { $0.seq.map(Int.init) } ?? []
        }
        #expect(seqs == [1, 2, 3, 4], "each event once, the stop's batch after the first")
        #expect(publisher.backlogCount == 0)
    }

    @Test("a 1 s window: moving fixes and headings gathered since the last batch go out together once the oldest is a second old")
    func windowSendsTheBatch() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let sender = RecordingSender()
        let publisher = await makePublisher(sender: sender, dir: dir, window: .seconds(1))
        let running = Task { await publisher.run() }
        try await withTimeout { await sender.waitForSent(1) }
        publisher.publish(.fix(Fixes.fix(at: 0, speed: 5)))
        try await waitForBatches(1, sender)
        for second in 1...4 {
            publisher.publish(.fix(Fixes.fix(at: Double(second), east: Double(second) * 5, speed: 5)))
            publisher.publish(.heading(Heading(time: Fixes.time(Double(second)), trueHeading: 90, source: .hdt)))
        }
        try await waitForBatches(2, sender)
        // The first instant's heading goes alone and teaches the joiner that this source pairs
        // them; each later instant is one event, its fix carrying the heading.
        #expect(batches(sender) == [[1], Array(2...6)])
        let joined = sender.sent.filter { $0.topic == "fleet/van-7/batch" }.flatMap { message in
            (try? FleetPayload.decodeBatch(message.payload, vehicle: vehicle))?.events ?? []
        }.filter { if case .fix(let f) = $0 { f.fix.heading != nil } else { false } }
        #expect(joined.count == 3)
        publisher.finish()
        try await withTimeout { await running.value }
    }
}
