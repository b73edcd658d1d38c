import EdgeAgent
import FleetcastTestSupport
import FleetProtocol
import Foundation
import GNSS
import InMemoryLogging
import Logging
import Testing

@Suite("Publisher")
struct PublisherTests {
    private let vehicle = VehicleID("van-7")!
    private static let startedAt = UTCTimestamp(millisecondsSince1970: 1_715_673_000_000)  // 2024-05-14T07:50:00Z

    private func makePublisher(
        sender: RecordingSender, dir: TemporaryDirectory, capacity: Int = 100, policy: ReportingPolicy = ReportingPolicy(),
        logger: Logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
    ) throws -> Publisher {
        let store = try SequenceStore(directory: dir.path, vehicle: vehicle, logger: logger)
        let settings = Publisher.Settings(
            vehicle: vehicle, sourceURI: "gpsd://localhost:2947", agentVersion: "0.1.0-test", policy: policy,
            outboxCapacity: capacity, drainTimeout: .seconds(5),
            initialRetryDelay: .milliseconds(1), maxRetryDelay: .milliseconds(20)
        )
        return Publisher(settings: settings, sender: sender, sequence: store, logger: logger, now: { Self.startedAt })
    }

    private func json(_ sent: RecordingSender.Sent) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(sent.payload))) as? [String: Any] ?? [:]
    }

    @Test("fixes, headings and status changes reach the broker with topic, QoS, retain and gap-free seq")
    func endToEnd() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let sender = RecordingSender()
        let publisher = try makePublisher(sender: sender, dir: dir)
        let running = Task { await publisher.run() }

        try await withTimeout { await sender.waitForSent(1) }
        publisher.publish(.state(.connecting))
        publisher.publish(.state(.streaming))
        for second in 0..<5 {
            publisher.publish(.fix(Fixes.fix(at: Double(second), east: Double(second) * 12.5)))
        }
        publisher.publish(.heading(Heading(time: Fixes.time(4), trueHeading: 91.2, source: .hdt)))
        try await withTimeout { await sender.waitForSent(8) }  // 2 statuses + 5 fixes + 1 heading
        publisher.publish(.fix(Fixes.fix(at: 5, mode: .noFix)))  // no position: not published
        try await withTimeout { await sender.waitForSent(9) }
        publisher.publish(.state(.reconnecting(reason: "gpsd: connection refused", delay: .seconds(1))))
        try await withTimeout { await sender.waitForSent(10) }
        publisher.finish()
        try await withTimeout { await running.value }

        let sent = sender.sent
        let statuses = sent.filter { $0.topic == "fleet/van-7/status" }
        #expect(statuses.allSatisfy { $0.qos == 1 && $0.retain })
        #expect(statuses.map { json($0)["gnss"] as? String } == ["starting", "fixing", "no-fix", "source-lost", "source-lost"])
        #expect(statuses.map { json($0)["state"] as? String } == ["online", "online", "online", "online", "offline"])
        #expect(json(statuses[0])["since"] as? String == "2024-05-14T07:50:00.000Z")
        #expect(json(statuses[0])["agent"] as? String == "0.1.0-test")
        #expect(json(statuses[0])["source"] as? String == "gpsd://localhost:2947")
        #expect(json(statuses[0])["dropped"] as? Int == 0)
        #expect(json(statuses[4])["reason"] as? String == "shutdown")
        #expect(sent.last?.topic == "fleet/van-7/status", "offline is the last message")

        let fixes = sent.filter { $0.topic == "fleet/van-7/fix" }
        #expect(fixes.count == 5)
        #expect(fixes.allSatisfy { $0.qos == 1 && $0.retain })
        let headings = sent.filter { $0.topic == "fleet/van-7/heading" }
        #expect(headings.count == 1)
        #expect(headings.allSatisfy { $0.qos == 0 && $0.retain })
        #expect(json(headings[0])["heading"] as? Double == 91.2)

        let numbered = sent.filter { $0.topic != "fleet/van-7/status" }
        #expect(numbered.map { json($0)["seq"] as? Int } == [1, 2, 3, 4, 5, 6], "seq rises by one, no gap")
        #expect(numbered.allSatisfy { json($0)["vehicle"] as? String == "van-7" && json($0)["v"] as? Int == 1 })
        #expect(json(fixes[0])["time"] as? String == "2024-05-14T08:00:00.000Z")
        #expect(json(fixes[0])["mode"] as? Int == 3)

        let counters = publisher.counters
        #expect(counters.fixesReceived == 6)
        #expect(counters.fixesWithoutPosition == 1)
        #expect(counters.published == 6)
        #expect(counters.statusesPublished == 5)
        #expect(counters.dropped == 0)
        #expect(dir.contents("van-7.seq") == "7\n", "a clean finish persists the exact next seq")
    }

    @Test("an absent broker fills the outbox: oldest fixes dropped, status says so, the rest delivered in order")
    func absentBroker() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let capture = InMemoryLogHandler()
        var captureLogger = Logger(label: "test") { _ in capture }
        captureLogger.logLevel = .trace
        let sender = RecordingSender(failing: true)
        let publisher = try makePublisher(sender: sender, dir: dir, capacity: 5, logger: captureLogger)
        let running = Task { await publisher.run() }

        publisher.publish(.state(.streaming))
        for second in 0..<20 { publisher.publish(.fix(Fixes.fix(at: Double(second)))) }
        #expect(publisher.counters.fixesReceived == 20, "the intake never waits for the broker")
        try await withTimeout { await sender.waitForAttempts(3) }
        #expect(sender.sent.isEmpty)
        publisher.publish(.fix(Fixes.fix(at: 20)))
        #expect(publisher.counters.droppedFixes == 16)
        #expect(publisher.outbox.queuedMessages.compactMap(\.seq) == [17, 18, 19, 20, 21])

        sender.setFailing(false)
        publisher.finish()
        try await withTimeout { await running.value }

        let sent = sender.sent
        let fixes = sent.filter { $0.topic.hasSuffix("/fix") }
        #expect(fixes.map { json($0)["seq"] as? Int } == [17, 18, 19, 20, 21], "the oldest were dropped; the rest keep their order")
        let statuses = sent.filter { $0.topic.hasSuffix("/status") }
        #expect(json(statuses[0])["dropped"] as? Int == 16, "the first status after the outage reports the drops")
        #expect(json(statuses[0])["state"] as? String == "online")
        #expect(statuses.last.map { json($0)["state"] as? String } == "offline")
        #expect(statuses.last.map { json($0)["dropped"] as? Int } == 16)
        #expect(publisher.counters.sendFailures >= 3)

        #expect(capture.entries.allSatisfy { $0.level <= .info }, "a library logs at info or lower")
        let infos = capture.entries.filter { $0.level == .info }.map(\.message.description)
        #expect(infos.filter { $0 == "send failed, retrying" }.count == 1, "once per outage, not per retry")
        #expect(infos.filter { $0 == "outbox full, dropping oldest fixes" }.count == 1, "once per overflow, not per drop")
        #expect(infos.contains("sending resumed"))
        #expect(capture.entries.allSatisfy { $0.metadata["vehicle"]?.description == "van-7" })
    }

    @Test("the reporting policy decides which fixes are sent; skipped ones are counted")
    func policyApplied() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let sender = RecordingSender()
        let publisher = try makePublisher(sender: sender, dir: dir, policy: ReportingPolicy(minInterval: 5))
        let events = AsyncStream<GNSSEvent> { continuation in
            continuation.yield(.state(.streaming))
            for second in 0..<12 { continuation.yield(.fix(Fixes.fix(at: Double(second), east: Double(second) * 12.5))) }
            continuation.finish()
        }
        try await withTimeout { try await publisher.run(events: events) }
        let fixes = sender.sent.filter { $0.topic.hasSuffix("/fix") }
        #expect(fixes.map { json($0)["time"] as? String } == [
            "2024-05-14T08:00:00.000Z", "2024-05-14T08:00:05.000Z", "2024-05-14T08:00:10.000Z",
        ])
        #expect(fixes.map { json($0)["seq"] as? Int } == [1, 2, 3], "skipped fixes take no seq: no false gaps")
        #expect(publisher.counters.fixesSkippedByPolicy == 9)
        #expect(sender.sent.last.map { json($0)["state"] as? String } == "offline", "the end of the events finishes cleanly")
    }

    @Test("a failing event stream is reported as source-lost, then the publisher finishes and rethrows")
    func failingEvents() async throws {
        struct ReceiverGone: Error {}
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let sender = RecordingSender()
        let publisher = try makePublisher(sender: sender, dir: dir)
        let events = AsyncThrowingStream<GNSSEvent, any Error> { continuation in
            continuation.yield(.fix(Fixes.fix(at: 0)))
            continuation.finish(throwing: ReceiverGone())
        }
        await #expect(throws: ReceiverGone.self) {
            try await withTimeout { try await publisher.run(events: events) }
        }
        let statuses = sender.sent.filter { $0.topic.hasSuffix("/status") }
        #expect(statuses.last.map { json($0)["state"] as? String } == "offline")
        #expect(statuses.last.map { json($0)["gnss"] as? String } == "source-lost")
        #expect(sender.sent.filter { $0.topic.hasSuffix("/fix") }.count == 1, "what was queued is still delivered")
    }

    @Test("a broker that never comes back bounds the shutdown by the drain timeout")
    func boundedShutdown() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let sender = RecordingSender(failing: true)
        let store = try SequenceStore(directory: dir.path, vehicle: vehicle, logger: Logger(label: "t") { _ in SwiftLogNoOpLogHandler() })
        let publisher = Publisher(
            settings: .init(vehicle: vehicle, drainTimeout: .milliseconds(200), initialRetryDelay: .milliseconds(5), maxRetryDelay: .milliseconds(20)),
            sender: sender, sequence: store, logger: Logger(label: "t") { _ in SwiftLogNoOpLogHandler() }
        )
        let running = Task { await publisher.run() }
        publisher.publish(.fix(Fixes.fix(at: 0)))
        publisher.finish()
        try await withTimeout(10) { await running.value }
        #expect(sender.sent.isEmpty)
        #expect(dir.contents("van-7.seq") == "2\n", "the exact next seq is persisted even so")
    }

    @Test("the last will is the retained offline status without a reason")
    func lastWill() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let publisher = try makePublisher(sender: RecordingSender(), dir: dir)
        let will = publisher.lastWill
        #expect(will.topic == "fleet/van-7/status")
        #expect(will.qos == 1 && will.retain)
        let object = (try? JSONSerialization.jsonObject(with: Data(will.payload))) as? [String: Any]
        #expect(object?["state"] as? String == "offline")
        #expect(object?["reason"] == nil)
    }
}
