import EdgeOutbox
import EdgePublisher
import EdgeTestSupport
import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import Logging
import OutboxCore
import Testing

/// The publisher's live loop with many sends outstanding (the lossless intake of a replay,
/// where every record goes live in order).
@Suite("Pipelined publisher")
struct PipelinedPublisherTests {
    private let vehicle = VehicleID("van-7")!

    private func makePublisher(
        sender: HoldingSender, dir: TemporaryDirectory, lossless: Bool = true, window: Int,
        retryDelay: Duration = .milliseconds(1)
    ) async throws -> Publisher {
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let store = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: logger)
        var settings = Publisher.Settings.quick(vehicle: vehicle)
        settings.lossless = lossless
        settings.drainTimeout = .seconds(20)
        settings.initialRetryDelay = retryDelay
        settings.maxRetryDelay = max(retryDelay, .milliseconds(20))
        settings.sendWindow = window
        settings.drainRate = 100_000
        settings.statusInterval = .seconds(10)
        return Publisher(settings: settings, sender: sender, store: store, logger: logger)
    }

    /// The `seq` of a fix or heading payload.
    private static func seq(_ started: HoldingSender.Started) -> Int? {
        ((try? JSONSerialization.jsonObject(with: Data(started.payload))) as? [String: Any])?["seq"] as? Int
    }

    /// The first position where `started` does not carry seq 1, 2, 3… (`nil`: all in order).
    private static func firstOutOfOrder(_ started: [HoldingSender.Started]) -> Int? {
        started.indices.first { seq(started[$0]) != $0 + 1 }
    }

    @Test("never more than `window` sends outstanding, and the window is used")
    func windowRespected() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let sender = HoldingSender()
        let publisher = try await makePublisher(sender: sender, dir: dir, window: 4)
        for second in 0..<20 { publisher.publish(.fix(Fixes.fix(at: Double(second)))) }
        let running = Task { await publisher.run() }

        // 21 messages (online + 20 fixes): complete them one by one, oldest first. A full window
        // refills once half of it is acknowledged (OutboxStateTests shows the steps).
        for index in 0..<21 {
            try await withTimeout { await sender.waitUntil { $0.outstanding.contains(index) } }
            #expect(sender.snapshot.outstanding.count <= 4, "never more than the window")
            sender.complete(index)
        }
        sender.completeAll()
        publisher.finish()
        try await withTimeout { await running.value }

        let snapshot = sender.snapshot
        #expect(snapshot.mostOutstanding == 4)
        #expect(snapshot.started.filter { !$0.isStatus }.map(Self.seq) == (1...20).map { $0 })
        #expect(publisher.counters.published == 20)
    }

    @Test("hand-off order is queue order while acknowledgements arrive in any order")
    func orderUnderConcurrency() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let sender = HoldingSender()
        let publisher = try await makePublisher(sender: sender, dir: dir, window: 8)
        let running = Task { await publisher.run() }
        let total = 2_000

        // Acknowledge outstanding sends in random order while the intake keeps publishing.
        let acknowledger = Task {
            var generator = SystemRandomNumberGenerator()
            while !Task.isCancelled {
                await sender.waitUntil { !$0.outstanding.isEmpty }
                if let index = sender.snapshot.outstanding.randomElement(using: &generator) { sender.complete(index) }
            }
        }
        let intake = Task {
            for index in 0..<total {
                if index % 3 == 2 {
                    publisher.publish(.heading(Heading(time: Fixes.time(Double(index)), trueHeading: Double(index % 360), source: .hdt)))
                } else {
                    publisher.publish(.fix(Fixes.fix(at: Double(index), east: Double(index))))
                }
                if index % 50 == 0 { await Task.yield() }
            }
        }
        await intake.value
        // A hang guard, not a speed target: alone this takes under a second under
        // ThreadSanitizer, beside the other suites 25 s here (every acknowledgement is two task
        // hops on a cooperative pool they keep busy), and CI is about twice as slow.
        try await withTimeout(180) { await sender.waitUntil { $0.succeeded.count >= total + 1 } }
        acknowledger.cancel()
        sender.completeAll()
        publisher.finish()
        try await withTimeout { await running.value }

        let started = sender.snapshot.started.filter { !$0.isStatus }
        #expect(started.count == total, "no message sent twice, none lost")
        let outOfOrder = Self.firstOutOfOrder(started)
        #expect(outOfOrder == nil, "sends start in seq (= queue) order; first out of order at \(outOfOrder ?? -1)")
        #expect(sender.snapshot.mostOutstanding <= 8)
        #expect(sender.snapshot.mostOutstanding > 1, "sends overlapped")
        #expect(publisher.counters.published == UInt64(total))
        #expect(publisher.counters.dropped == 0)
    }

    @Test("retryNow ends the back-off after a failed send: the message is resent without waiting an hour")
    func retryNowEndsBackOff() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let sender = HoldingSender()
        let publisher = try await makePublisher(sender: sender, dir: dir, window: 4, retryDelay: .seconds(3600))
        publisher.publish(.fix(Fixes.fix(at: 0)))
        let running = Task { await publisher.run() }

        // Started: 0 online, 1 fix 1. The online status fails ("not connected", as at start-up).
        try await withTimeout { await sender.waitUntil { $0.started.count == 2 } }
        sender.complete(0, ok: false)
        sender.complete(1)
        try await waitUntil("the failure to be counted", timeout: .seconds(30)) { publisher.counters.sendFailures >= 1 }
        #expect(sender.snapshot.started.count == 2, "nothing resent during the back-off")
        // The link connected: only retryNow can end a one-hour back-off in time. Said on each
        // look: one said after the failure was counted but before the live loop began its
        // back-off would not end it (the back-off starts in the generation it sees).
        try await waitUntil("the failed status resent", timeout: .seconds(30), interval: .milliseconds(50)) {
            publisher.retryNow()
            return sender.snapshot.started.count >= 3
        }
        #expect(sender.snapshot.started.count == 3, "resent once")
        #expect(sender.snapshot.started[2].isStatus, "the failed online status is resent")
        sender.completeAll()
        publisher.finish()
        try await withTimeout { await running.value }
        #expect(publisher.counters.published == 1)
        #expect(publisher.counters.statusesPublished == 2, "online and offline")
    }

    @Test("the lossless intake delivers every one of 20,000 fixes live, in order, through a slow sender")
    func losslessIntake() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let total = 20_000
        let sender = HoldingSender(latency: .microseconds(20))
        let publisher = try await makePublisher(sender: sender, dir: dir, window: 4)
        let events = AsyncStream<GNSSEvent>(bufferingPolicy: .unbounded) { continuation in
            continuation.yield(.state(.streaming))
            for index in 0..<total { continuation.yield(.fix(Fixes.fix(at: Double(index) / 10, east: Double(index)))) }
            continuation.finish()
        }
        try await withTimeout(120) { try await publisher.run(events: events) }

        let fixes = sender.snapshot.started.filter { !$0.isStatus }
        #expect(fixes.count == total)
        let outOfOrder = Self.firstOutOfOrder(fixes)
        #expect(outOfOrder == nil, "every fix, in order, no gap; first out of order at \(outOfOrder ?? -1)")
        let counters = publisher.counters
        #expect(counters.dropped == 0)
        #expect(counters.published == UInt64(total))
        #expect(publisher.backlogCount == 0)
    }
}
