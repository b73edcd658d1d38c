import EdgeCore
import EdgeOutbox
import EdgePublisher
import EdgeTestSupport
import FleetProtocol
import FleetcastTestSupport
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
        sender: RecordingSender, dir: TemporaryDirectory, policy: ReportingPolicy = ReportingPolicy(),
        logger: Logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }, syncInterval: Duration = .milliseconds(50)
    ) async throws -> Publisher {
        let store = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: logger)
        var settings = Publisher.Settings.quick(vehicle: vehicle)
        settings.sourceURI = "gpsd://localhost:2947"
        settings.agentVersion = "0.1.0-test"
        settings.policy = policy
        settings.syncInterval = syncInterval
        return Publisher(settings: settings, sender: sender, store: store, logger: logger, now: { Self.startedAt })
    }

    private func json(_ sent: RecordingSender.Sent) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(sent.payload))) as? [String: Any] ?? [:]
    }

    private func isStatus(_ sent: RecordingSender.Sent, gnss: String) -> Bool {
        sent.topic.hasSuffix("/status") && json(sent)["gnss"] as? String == gnss
    }

    /// The seq of every fix and heading delivered, live or in a backlog batch, in arrival order.
    private func deliveredSeqs(_ sent: [RecordingSender.Sent]) -> [Int] {
        sent.flatMap { message -> [Int] in
            if message.topic.hasSuffix("/backlog") {
                let batch = try? FleetPayload.decodeBacklog(message.payload, vehicle: vehicle)
                return batch?.events.compactMap { $0.seq.map(Int.init) } ?? []
            }
            if message.topic.hasSuffix("/status") { return [] }
            return (json(message)["seq"] as? Int).map { [$0] } ?? []
        }
    }

    @Test("fixes, headings and status changes reach the broker, live or as backlog, with gap-free seq")
    func endToEnd() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let sender = RecordingSender()
        let publisher = try await makePublisher(sender: sender, dir: dir)
        let running = Task { await publisher.run() }

        try await withTimeout { await sender.waitForSent(1) }
        publisher.publish(.state(.connecting))
        publisher.publish(.state(.streaming))
        for second in 0..<5 {
            publisher.publish(.fix(Fixes.fix(at: Double(second), east: Double(second) * 12.5)))
        }
        publisher.publish(.heading(Heading(time: Fixes.time(4), trueHeading: 91.2, source: .hdt)))
        try await withTimeout { await sender.waitUntil { Set(deliveredSeqs($0.sent)) == Set(1...6) } }
        publisher.publish(.fix(Fixes.fix(at: 5, mode: .noFix)))  // no position: not published
        #expect(publisher.gnssState == .noFix)
        try await withTimeout { await sender.waitUntil { $0.sent.contains { isStatus($0, gnss: "no-fix") } } }
        publisher.publish(.state(.reconnecting(reason: "gpsd: connection refused", delay: .seconds(1))))
        publisher.finish()
        try await withTimeout { await running.value }

        let sent = sender.sent
        let statuses = sent.filter { $0.topic == "fleet/van-7/status" }
        #expect(statuses.allSatisfy { $0.qos == .atLeastOnce && $0.retain })
        #expect(statuses.first.map { json($0)["gnss"] as? String } == "starting")
        #expect(statuses.last.map { json($0)["gnss"] as? String } == "source-lost")
        #expect(statuses.map { json($0)["state"] as? String }.last == "offline")
        #expect(json(statuses[0])["since"] as? String == "2024-05-14T07:50:00.000Z")
        #expect(json(statuses[0])["agent"] as? String == "0.1.0-test")
        #expect(json(statuses[0])["source"] as? String == "gpsd://localhost:2947")
        #expect(json(statuses[0])["dropped"] as? Int == 0)
        #expect(json(statuses[0])["storage"] as? String == "ok")
        #expect(statuses.last.map { json($0)["reason"] as? String } == "shutdown")
        #expect(sent.last?.topic == "fleet/van-7/status", "offline is the last message")

        let delivered = deliveredSeqs(sent)
        #expect(Set(delivered) == Set(1...6), "every fix and heading, live or as backlog: \(delivered)")
        let liveFixes = sent.filter { $0.topic == "fleet/van-7/fix" }
        #expect(liveFixes.allSatisfy { $0.qos == .atLeastOnce && $0.retain })
        #expect(liveFixes.last.map { json($0)["seq"] as? Int } == 5, "the retained fix is the newest")
        let liveSeqs = liveFixes.compactMap { json($0)["seq"] as? Int }
        #expect(liveSeqs == liveSeqs.sorted(), "live fixes never go back")
        let headings = sent.filter { $0.topic == "fleet/van-7/heading" }
        // Its fix went out before it (the source had not yet shown it pairs them): alone, QoS 1.
        #expect(!headings.isEmpty && headings.allSatisfy { $0.qos == .atLeastOnce && $0.retain })
        #expect(sent.filter { $0.topic == "fleet/van-7/backlog" }.allSatisfy { $0.qos == .atLeastOnce && !$0.retain })

        let counters = publisher.counters
        #expect(counters.fixesReceived == 6)
        #expect(counters.fixesWithoutPosition == 1)
        #expect(counters.published == 6)
        #expect(counters.dropped == 0)
        let reopened = await OutboxStore.open(
            directory: dir.path, vehicle: vehicle, logger: Logger(label: "t") { _ in SwiftLogNoOpLogHandler() }
        )
        #expect(reopened.nextSeq == 7, "a clean finish stores the exact next seq")
        #expect(reopened.storedCount == 0, "nothing left undelivered")
    }

    @Test("an absent broker: nothing is dropped; when it returns the newest goes live and the rest follows oldest first")
    func absentBroker() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let capture = InMemoryLogHandler()
        var captureLogger = Logger(label: "test") { _ in capture }
        captureLogger.logLevel = .trace
        let sender = RecordingSender(failing: true)
        let publisher = try await makePublisher(sender: sender, dir: dir, logger: captureLogger)
        let running = Task { await publisher.run() }

        publisher.publish(.state(.streaming))
        for second in 0..<200 {
            publisher.publish(.fix(Fixes.fix(at: Double(second) / 10, east: Double(second))))
            if second.isMultiple(of: 4) {
                publisher.publish(.heading(Heading(time: Fixes.time(Double(second) / 10), trueHeading: 90, source: .hdt)))
            }
        }
        #expect(publisher.counters.fixesReceived == 200, "the intake never waits for the broker")
        // 249 records: the first instant's fix and heading are one (nothing was known yet, so
        // the first waited for its partner); the other 49 headings go alone (their fixes went
        // first, or waited for them in vain).
        try await withTimeout { await sender.waitForAttempts(3) }
        try await waitUntil("the backlog of 247", timeout: .seconds(30)) { publisher.backlogCount >= 247 }
        #expect(sender.sent.isEmpty)
        // The outage outlasts a status interval (100 ms), so a status counting the backlog is
        // queued, and tried, while the broker is absent (the first one went out at start, backlog 0).
        try await withTimeout {
            await sender.waitUntil { $0.attempted.contains { $0.topic.hasSuffix("/status") && (json($0)["backlog"] as? Int ?? 0) > 0 } }
        }
        #expect(sender.sent.isEmpty)

        sender.setFailing(false)
        publisher.retryNow()
        try await withTimeout { await sender.waitUntil { Set(deliveredSeqs($0.sent)) == Set(1...249) } }
        publisher.finish()
        try await withTimeout { await running.value }

        let sent = sender.sent
        let liveFix = sent.filter { $0.topic.hasSuffix("/fix") }
        #expect(liveFix.last.map { json($0)["seq"] as? Int } == 249, "the newest fix went live: the retained position is current")
        let backlogSeqs = sent.filter { $0.topic.hasSuffix("/backlog") }.flatMap {
            (try? FleetPayload.decodeBacklog($0.payload, vehicle: vehicle))?.events.compactMap(\.seq) ?? []
        }
        #expect(backlogSeqs.count >= 240)
        #expect(backlogSeqs == backlogSeqs.sorted(), "the backlog arrives oldest first")
        #expect(sent.filter { $0.topic.hasSuffix("/backlog") }.allSatisfy { $0.payload.count <= FleetPayload.maximumBacklogBytes })
        let statuses = sent.filter { $0.topic.hasSuffix("/status") }
        #expect(statuses.contains { (json($0)["backlog"] as? Int ?? 0) > 0 }, "the status reported the backlog")
        #expect(publisher.counters.dropped == 0)
        #expect(publisher.counters.sendFailures >= 3)

        let infos = capture.entries.filter { $0.level == .info }.map(\.message.description)
        #expect(infos.filter { $0 == "send failed, keeping messages in the outbox" }.count == 1, "once per outage, not per retry")
        #expect(infos.contains("sending resumed"))
        #expect(capture.entries.allSatisfy { $0.metadata["vehicle"]?.description == "van-7" })
    }

    @Test("the reporting policy decides which fixes are sent; skipped ones are counted")
    func policyApplied() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let sender = RecordingSender()
        let publisher = try await makePublisher(sender: sender, dir: dir, policy: ReportingPolicy(minInterval: 5))
        let events = AsyncStream<GNSSEvent> { continuation in
            continuation.yield(.state(.streaming))
            for second in 0..<12 { continuation.yield(.fix(Fixes.fix(at: Double(second), east: Double(second) * 12.5))) }
            continuation.finish()
        }
        try await withTimeout { try await publisher.run(events: events) }
        let kept = try await OutboxStore.open(
            directory: dir.path, vehicle: vehicle, logger: Logger(label: "t") { _ in SwiftLogNoOpLogHandler() }
        )
        .storage.backlog(after: 0, limit: 100, maximumBytes: 1 << 20, excluding: []).map { Int($0.seq) }
        #expect(
            (deliveredSeqs(sender.sent) + kept).sorted() == [1, 2, 3],
            "skipped fixes take no seq: no false gaps; what did not go live waits in the store")
        let times = sender.sent.filter { $0.topic.hasSuffix("/fix") }.compactMap { json($0)["time"] as? String }
        #expect(times.allSatisfy { ["2024-05-14T08:00:00.000Z", "2024-05-14T08:00:05.000Z", "2024-05-14T08:00:10.000Z"].contains($0) })
        #expect(publisher.counters.fixesSkippedByPolicy == 9)
        #expect(sender.sent.last.map { json($0)["state"] as? String } == "offline", "the end of the events finishes cleanly")
    }

    @Test("a failing event stream is reported as source-lost, then the publisher finishes and rethrows")
    func failingEvents() async throws {
        struct ReceiverGone: Error {}
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let sender = RecordingSender()
        let publisher = try await makePublisher(sender: sender, dir: dir)
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
        #expect(deliveredSeqs(sender.sent) == [1], "what was queued is still delivered")
    }

    @Test("a broker that never comes back bounds the shutdown; what was not delivered is kept for the next run")
    func boundedShutdown() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let quiet = Logger(label: "t") { _ in SwiftLogNoOpLogHandler() }
        let sender = RecordingSender(failing: true)
        var settings = Publisher.Settings(vehicle: vehicle)
        settings.drainTimeout = .milliseconds(200)
        settings.initialRetryDelay = .milliseconds(5)
        settings.maxRetryDelay = .milliseconds(20)
        let publisher = Publisher(
            settings: settings, sender: sender, store: await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: quiet),
            logger: quiet
        )
        let running = Task { await publisher.run() }
        publisher.publish(.fix(Fixes.fix(at: 0)))
        publisher.finish()
        try await withTimeout(10) { await running.value }
        #expect(sender.sent.isEmpty)
        let reopened = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: quiet)
        #expect(reopened.nextSeq == 2, "the exact next seq is stored even so")
        #expect(reopened.storedCount == 1, "the undelivered fix waits in the store")
    }

    @Test("finish() stops the intake at once, even while the source waits for its next event (a paced replay)")
    func finishDoesNotWaitForTheNextEvent() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let sender = RecordingSender()
        let publisher = try await makePublisher(sender: sender, dir: dir)
        let (events, continuation) = AsyncStream<GNSSEvent>.makeStream()
        defer { continuation.finish() }
        continuation.yield(.fix(Fixes.fix(at: 0)))  // and then nothing for a long while
        let running = Task { try await publisher.run(events: events) }
        try await withTimeout { await sender.waitUntil { deliveredSeqs($0.sent) == [1] } }
        publisher.finish()
        try await withTimeout { try await running.value }
        #expect(sender.sent.last.map { json($0)["state"] as? String } == "offline")
    }

    @Test("at shutdown a live fix numbered beyond the stored reservation goes out at once, not after the drain timeout")
    func shutdownCommitsTheReservationLiveNeeds() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let quiet = Logger(label: "t") { _ in SwiftLogNoOpLogHandler() }
        let sender = RecordingSender()
        var settings = Publisher.Settings(vehicle: vehicle)
        settings.drainTimeout = .seconds(60)
        settings.syncInterval = .seconds(3600)
        let publisher = Publisher(
            settings: settings, sender: sender, store: await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: quiet),
            logger: quiet)
        // 300 fixes before any commit: the first reservation (128 numbers) does not cover the newest.
        for index in 0..<300 { publisher.publish(.fix(Fixes.fix(at: Double(index)))) }
        publisher.finish()
        try await withTimeout(20) { await publisher.run() }
        #expect(deliveredSeqs(sender.sent).contains(300), "the newest fix went out live")
        let reopened = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: quiet)
        #expect(reopened.nextSeq == 301, "a clean stop: numbering continues without a gap")
        let stored = try await reopened.storage.backlog(after: 0, limit: 1000, maximumBytes: 1 << 30, excluding: [])
        #expect(
            Set(deliveredSeqs(sender.sent)).union(stored.map { Int($0.seq) }) == Set(1...300),
            "the older fixes went out as backlog or wait in the store")
    }

    /// A publisher with 300 fixes stored while the broker was absent, now back.
    private func backlogged(
        _ sender: RecordingSender, dir: TemporaryDirectory, logger: Logger
    ) async throws -> (Publisher, Task<Void, Never>) {
        let publisher = try await makePublisher(sender: sender, dir: dir, logger: logger)
        let running = Task { await publisher.run() }
        for index in 0..<300 { publisher.publish(.fix(Fixes.fix(at: Double(index) / 10, east: Double(index)))) }
        try await waitUntil("the backlog of 299", timeout: .seconds(30)) { publisher.backlogCount >= 299 }
        return (publisher, running)
    }

    @Test(
        "a broker whose packet limit is below a backlog batch (0x95) gets smaller batches: everything arrives, nothing is counted as rejected"
    )
    func backlogBatchTooLarge() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let sender = RecordingSender(failing: true)
        let (publisher, running) = try await backlogged(sender, dir: dir, logger: Logger(label: "t") { _ in SwiftLogNoOpLogHandler() })
        sender.setRefusal { topic, bytes in topic.hasSuffix("/backlog") && bytes > 3000 ? 0x95 : nil }
        sender.setFailing(false)
        publisher.retryNow()
        try await withTimeout { await sender.waitUntil { Set(deliveredSeqs($0.sent)) == Set(1...300) } }
        #expect(publisher.counters.drops.rejected == 0)
        #expect(sender.sent.filter { $0.topic.hasSuffix("/backlog") }.allSatisfy { $0.payload.count <= 3000 })
        publisher.finish()
        try await withTimeout { await running.value }
    }

    @Test(
        "a broker that refuses the backlog topic: the backlog stays in the store (nothing deleted or counted as rejected), one error, and drains on the next connection"
    )
    func backlogTopicRefused() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let capture = InMemoryLogHandler()
        let sender = RecordingSender(failing: true)
        let (publisher, running) = try await backlogged(sender, dir: dir, logger: Logger(label: "t") { _ in capture })
        sender.setRefusal { topic, _ in topic.hasSuffix("/backlog") ? 0x87 : nil }
        sender.setFailing(false)
        publisher.retryNow()
        try await waitUntil("the error", timeout: .seconds(30)) { capture.entries.contains { $0.level == .error } }
        let attempts = sender.attempts
        try await Task.sleep(for: .milliseconds(300))
        #expect(sender.attempts - attempts < 10, "the drain waits instead of hammering the broker")
        #expect(publisher.backlogCount >= 299, "kept: \(publisher.backlogCount)")
        #expect(publisher.counters.drops.rejected == 0)
        let errors = capture.entries.filter { $0.level == .error }
        #expect(
            errors.count == 1 && errors[0].metadata["mqtt.topic"]?.description.hasSuffix("/backlog") == true,
            "\(errors.map(\.message))")
        // The ACL is fixed; the next connection drains it.
        sender.setRefusal(nil)
        publisher.retryNow()
        try await withTimeout { await sender.waitUntil { Set(deliveredSeqs($0.sent)) == Set(1...300) } }
        publisher.finish()
        try await withTimeout { await running.value }
    }

    @Test("the last will is the retained offline status without a reason")
    func lastWill() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let publisher = try await makePublisher(sender: RecordingSender(), dir: dir)
        let will = publisher.lastWill
        #expect(will.topic == "fleet/van-7/status")
        #expect(will.qos == .atLeastOnce && will.retain)
        let object = (try? JSONSerialization.jsonObject(with: Data(will.payload))) as? [String: Any]
        #expect(object?["state"] as? String == "offline")
        #expect(object?["reason"] == nil)
    }
}
