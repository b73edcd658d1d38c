import EdgeConfiguration
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

/// The rule for a live receiver's fix times (issue 18, 7): refused when implausibly far from a
/// synchronized system clock, said once per run, counted; passed when the clock is not
/// synchronized. Driven with the clock state given, no real clock.
@Suite("Fix times against the system clock")
struct FixTimeCheckTests {
    static let clock = Fixes.time(0)
    /// A GPS week rollover: 1024 weeks early.
    static let rolledOver = UTCTimestamp(millisecondsSince1970: clock.millisecondsSince1970 - 1024 * 7 * 86_400_000)
    /// Spoofed data: a day ahead.
    static let tomorrow = UTCTimestamp(millisecondsSince1970: clock.millisecondsSince1970 + 86_400_000)

    static func offset(_ milliseconds: Int64) -> UTCTimestamp {
        UTCTimestamp(millisecondsSince1970: clock.millisecondsSince1970 + milliseconds)
    }

    @Test(
        "synchronized clock: a fix a second or 15 minutes off passes; one 15 min + 1 ms, a day ahead or a week rollover behind is refused")
    func threshold() {
        var check = FixTimeCheck()
        let now = ContinuousClock.now
        #expect(FixTimeCheck.defaultMaximumOffset == .seconds(900))
        for milliseconds: Int64 in [0, 1000, -1000, 900_000, -900_000] {
            #expect(
                check.evaluate(fixTime: Self.offset(milliseconds), clock: Self.clock, clockSynchronized: true, at: now).accept,
                "\(milliseconds) ms")
        }
        for fixTime in [Self.offset(900_001), Self.offset(-900_001), Self.tomorrow, Self.rolledOver] {
            var fresh = FixTimeCheck()
            #expect(!fresh.evaluate(fixTime: fixTime, clock: Self.clock, clockSynchronized: true, at: now).accept, "\(fixTime)")
            #expect(fresh.refused == 1)
        }
        #expect(check.refused == 0)
    }

    @Test("unsynchronized clock: the receiver is the better clock, every fix passes and nothing is logged")
    func unsynchronizedPasses() {
        var check = FixTimeCheck()
        for fixTime in [Self.tomorrow, Self.rolledOver] {
            let decision = check.evaluate(fixTime: fixTime, clock: Self.clock, clockSynchronized: false, at: .now)
            #expect(decision == FixTimeCheck.Decision(accept: true, log: nil))
        }
        #expect(check.refused == 0)
    }

    @Test("a run of refused fixes is logged once at its start and once at its end; a new run within 5 minutes is only counted")
    func loggedOncePerRun() {
        var check = FixTimeCheck()
        let start = ContinuousClock.now
        let first = check.evaluate(fixTime: Self.tomorrow, clock: Self.clock, clockSynchronized: true, at: start)
        #expect(first == .init(accept: false, log: .refusing(fixTime: Self.tomorrow, clock: Self.clock, offsetMilliseconds: 86_400_000)))
        for second in 1...100 {
            let next = check.evaluate(fixTime: Self.tomorrow, clock: Self.clock, clockSynchronized: true, at: start + .seconds(second))
            #expect(next == .init(accept: false, log: nil))
        }
        let good = check.evaluate(fixTime: Self.clock, clock: Self.clock, clockSynchronized: true, at: start + .seconds(101))
        #expect(good == .init(accept: true, log: .accepting(refused: 101)))
        #expect(check.evaluate(fixTime: Self.clock, clock: Self.clock, clockSynchronized: true, at: start + .seconds(102)).log == nil)

        // Again two minutes later: counted, not logged (nor its end).
        let again = check.evaluate(fixTime: Self.rolledOver, clock: Self.clock, clockSynchronized: true, at: start + .seconds(120))
        #expect(again == .init(accept: false, log: nil))
        #expect(check.evaluate(fixTime: Self.clock, clock: Self.clock, clockSynchronized: true, at: start + .seconds(121)).log == nil)
        // Past five minutes since the last logged start: logged again.
        let later = check.evaluate(fixTime: Self.rolledOver, clock: Self.clock, clockSynchronized: true, at: start + .seconds(301))
        #expect(later.accept == false && later.log != nil)
        #expect(check.refused == 103)
        // The clock losing its synchronization ends the run: fixes pass again.
        let unsynchronized = check.evaluate(
            fixTime: Self.rolledOver, clock: Self.clock, clockSynchronized: false, at: start + .seconds(302))
        #expect(unsynchronized == .init(accept: true, log: .accepting(refused: 1)))
    }

    /// A publisher as the agent makes it for a live receiver: the check on, the wall clock at
    /// ``clock``, the clock's synchronization as `synchronized` says.
    static func makePublisher(
        sender: RecordingSender, dir: TemporaryDirectory, logger: Logger, synchronized: Locked<Bool>,
        maximumOffset: Duration? = .seconds(900)
    ) async -> Publisher {
        let vehicle = VehicleID("van-7")!
        let store = await OutboxStore.open(directory: dir.path, vehicle: vehicle, logger: logger)
        var settings = Publisher.Settings.quick(vehicle: vehicle)
        settings.sourceURI = "serial:/dev/gnss0"
        settings.maximumFixClockOffset = maximumOffset
        return Publisher(
            settings: settings, sender: sender, store: store, logger: logger, now: { Self.clock },
            clockSynchronized: { synchronized.withLock { $0 } })
    }

    static func statuses(_ sender: RecordingSender) -> [[String: Any]] { statuses(sender.sent) }

    static func statuses(_ sent: [RecordingSender.Sent]) -> [[String: Any]] {
        sent.filter { $0.topic == "fleet/van-7/status" }.compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.payload))) as? [String: Any]
        }
    }

    static func fixTimes(_ sender: RecordingSender) -> [String] { fixTimes(sender.sent) }

    static func fixTimes(_ sent: [RecordingSender.Sent]) -> [String] {
        sent.filter { $0.topic == "fleet/van-7/fix" }.compactMap {
            ((try? JSONSerialization.jsonObject(with: Data($0.payload))) as? [String: Any])?["time"] as? String
        }
    }

    @Test(
        "the publisher: with a synchronized clock a day-ahead fix is not published, one warning says so, the count is kept; unsynchronized, it is published"
    )
    func publisherRefusesFarFixes() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let capture = InMemoryLogHandler()
        let logger = Logger(label: "test") { _ in capture }
        let sender = RecordingSender()
        let synchronized = Locked(true)
        let publisher = await Self.makePublisher(sender: sender, dir: dir, logger: logger, synchronized: synchronized)
        let running = Task { await publisher.run() }
        try await withTimeout { await sender.waitForSent(1) }  // online

        publisher.publish(.fix(Fixes.fix(at: 1)))
        try await withTimeout { await sender.waitUntil { !Self.fixTimes($0.sent).isEmpty } }
        let spoofed = Fixes.fix(at: 86_400, east: 10)
        for _ in 0..<50 { publisher.publish(.fix(spoofed)) }
        publisher.publish(.fix(Fixes.fix(at: 2, east: 25)))
        try await withTimeout { await sender.waitUntil { Self.fixTimes($0.sent).count >= 2 } }
        #expect(Self.fixTimes(sender) == ["2024-05-14T08:00:01.000Z", "2024-05-14T08:00:02.000Z"])
        #expect(publisher.counters.fixesImplausible == 50)
        let warnings = capture.entries.filter { $0.level == .warning }
        #expect(warnings.count == 1, "\(warnings)")
        #expect(warnings.first?.message.description.contains("implausibly far from the synchronized system clock") == true)
        #expect(warnings.first?.metadata["gnss.fixTime"]?.description == "2024-05-15T08:00:00.000Z")
        #expect(capture.entries.contains { $0.level == .notice && $0.metadata["gnss.refusedFixes"]?.description == "50" })
        // The retained status says how many, as it says what was dropped.
        try await withTimeout { await sender.waitUntil { Self.statuses($0.sent).contains { $0["implausible"] as? Int == 50 } } }

        synchronized.withLock { $0 = false }  // the receiver is the better clock now
        publisher.publish(.fix(spoofed))
        try await withTimeout { await sender.waitUntil { Self.fixTimes($0.sent).count >= 3 } }
        #expect(Self.fixTimes(sender).last == "2024-05-15T08:00:00.000Z")
        #expect(publisher.counters.fixesImplausible == 50)
        publisher.finish()
        try await withTimeout { await running.value }
    }

    @Test("the publisher without the check (a replay, the simulator): a day-ahead fix is published against a synchronized clock")
    func publisherWithoutTheCheck() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let sender = RecordingSender()
        let publisher = await Self.makePublisher(
            sender: sender, dir: dir, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }, synchronized: Locked(true),
            maximumOffset: nil)
        let running = Task { await publisher.run() }
        try await withTimeout { await sender.waitForSent(1) }  // online
        publisher.publish(.fix(Fixes.fix(at: 86_400)))
        try await withTimeout { await sender.waitUntil { !Self.fixTimes($0.sent).isEmpty } }
        #expect(publisher.counters.fixesImplausible == 0)
        publisher.finish()
        try await withTimeout { await running.value }
        #expect(Self.statuses(sender).allSatisfy { $0["implausible"] == nil }, "not checked: not reported")
    }

    @Test("the status's implausible count is read back by the contract's decoder")
    func statusRoundTrip() throws {
        let status = VehicleStatus(vehicle: VehicleID("van-7")!, state: .online, implausibleFixes: 3)
        #expect(try FleetPayload.decodeStatus(FleetPayload.encode(status), vehicle: nil).implausibleFixes == 3)
        let older = VehicleStatus(vehicle: VehicleID("van-7")!, state: .online)
        #expect(try FleetPayload.decodeStatus(FleetPayload.encode(older), vehicle: nil).implausibleFixes == nil)
    }

    @Test("configuration: fixTime.maxOffset defaults to 15 minutes, takes durations and off; fixTime.systemClock auto or synchronized")
    func configuration() async throws {
        func load(_ flags: [String: String]) async throws -> AgentConfiguration {
            try await AgentConfiguration.load(filePath: nil, environment: [:], flags: ["vehicle": "van-7"].merging(flags) { $1 })
        }
        #expect(try await load([:]).fixTime == AgentConfiguration.FixTimeSettings())
        #expect(try await load([:]).fixTime.maxOffsetSeconds == 900)
        #expect(try await load(["fixTime.maxOffset": "2h"]).fixTime.maxOffsetSeconds == 7200)
        #expect(try await load(["fixTime.maxOffset": "off"]).fixTime.maxOffsetSeconds == nil)
        #expect(try await load(["fixTime.systemClock": "synchronized"]).fixTime.systemClock == .synchronized)
        await #expect(throws: (any Error).self) { try await load(["fixTime.maxOffset": "5s"]) }
        await #expect(throws: (any Error).self) { try await load(["fixTime.systemClock": "yes"]) }
    }
}
