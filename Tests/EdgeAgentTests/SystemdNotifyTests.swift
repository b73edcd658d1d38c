import EdgeAgent
import EdgeCore
import EdgeOutbox
import EdgePublisher
import EdgeTestSupport
import FleetProtocol
import FleetcastCore
import FleetcastTestSupport
import Foundation
import Logging
import OutboxCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("systemd notify and watchdog")
struct SystemdNotifyTests {
    @Test("the notifier is made only under systemd, and the watchdog only for this process")
    func environment() {
        #expect(SystemdNotifier(environment: [:]) == nil)
        #expect(SystemdNotifier(environment: ["NOTIFY_SOCKET": "relative/path"]) == nil)
        let plain = SystemdNotifier(environment: ["NOTIFY_SOCKET": "/run/systemd/notify"])
        #expect(plain?.watchdogInterval == nil)
        let ours = SystemdNotifier(environment: ["NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "\(getpid())"])
        #expect(ours?.watchdogInterval == .seconds(30))
        let other = SystemdNotifier(environment: ["NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"])
        #expect(other?.watchdogInterval == nil, "the watchdog is another process's")
    }

    @Test("datagrams reach a socket bound to a path and an abstract one", arguments: [false, true])
    func datagrams(abstract: Bool) async throws {
        let systemd = try NotifySocket(abstract: abstract)
        let notifier = try #require(SystemdNotifier(environment: ["NOTIFY_SOCKET": systemd.address]))
        #expect(notifier.notify("READY=1\nSTATUS=testing"))
        try await systemd.wait(for: "the datagram") { $0 == ["READY=1\nSTATUS=testing"] }
    }

    @Test("the agent under Type=notify: READY=1 once running, WATCHDOG=1 while alive, STOPPING=1 on SIGTERM, exit 0")
    func agentLifecycle() async throws {
        let broker = try await TestBroker.start()
        defer { Task { await broker.shutdown() } }
        let systemd = try NotifySocket(abstract: true)
        let state = try makeTemporaryDirectory(prefix: "agent-notify")
        let fixes = try await MosquittoCLI.subscribe(broker: broker, filter: "fleet/v1/fix", count: 3, timeoutSeconds: 30)
        let agent = try TestProcess(
            builtProduct("fleetcast-agent"),
            [
                "run", "--source", "sim:?rate=10", "--vehicle", "v1", "--broker", "mqtt://127.0.0.1:\(broker.port)",
                "--state-dir", state,
            ], directory: state, name: "agent",
            environment: [
                "FLEETCAST_REPORT_EVERY_FIX": "1",
                "NOTIFY_SOCKET": systemd.address, "WATCHDOG_USEC": "1000000",  // WatchdogSec=1s: a ping every 0.5 s
            ])
        try await systemd.wait(for: "READY=1") { $0.first?.hasPrefix("READY=1\n") == true }
        #expect(await fixes.messages().count == 3, "publishing")
        try await systemd.wait(for: "watchdog pings") { $0.filter { $0 == "WATCHDOG=1" }.count >= 3 }
        agent.send(SIGTERM)
        #expect(await agent.waitForExit() == 0)
        let messages = systemd.messages
        let stopping = try #require(messages.firstIndex { $0.hasPrefix("STOPPING=1") }, "STOPPING=1 sent: \(messages)")
        #expect(messages.firstIndex { $0.hasPrefix("READY=1") } == 0, "READY=1 first")
        #expect(messages[stopping...].dropFirst().allSatisfy { $0 != "WATCHDOG=1" }, "no pings after STOPPING=1")
    }
}

/// The watchdog's judgement on a pipeline that stalls for real.
@Suite("Pipeline probe")
struct PipelineProbeTests {
    /// A store whose commits never return: the publisher's sync loop hangs in one, as on a
    /// wedged SD card.
    final class HangingStorage: OutboxStorage {
        let location = "hanging"
        func commit(_ batch: OutboxCommit) async throws -> OutboxCommitResult {
            try await suspendUntilCancelled()
        }
        func backlog(after: UInt64, limit: Int, maximumBytes: Int, excluding: Set<UInt64>) async throws -> [OutboxRecord] { [] }
    }

    @Test("a publisher stuck in a commit is reported once its sync loop falls silent; a healthy one is not")
    func stuckPublisher() async throws {
        let quiet = Logger(label: "t") { _ in SwiftLogNoOpLogHandler() }
        var settings = Publisher.Settings(vehicle: VehicleID("v1")!)
        settings.syncInterval = .milliseconds(20)
        let hanging = Publisher(
            settings: settings, sender: RecordingSender(failing: true),
            store: OutboxStore(
                storage: HangingStorage(), opening: OutboxOpening(count: 0, bytes: 0, nextSeq: 1, uncleanSkipped: 0, reservedSeq: 129)),
            logger: quiet)
        let healthy = Publisher(
            settings: settings, sender: RecordingSender(),
            store: .memory(), logger: quiet)
        let runs = [Task { await hanging.run() }, Task { await healthy.run() }]
        defer { runs.forEach { $0.cancel() } }
        hanging.publish(.fix(Fixes.fix(at: 0)))  // something to commit (no broker: it stays unacknowledged)
        healthy.publish(.fix(Fixes.fix(at: 0)))
        var probe = PipelineProbe()
        var problem: String?
        try await waitUntil("the stall to be seen", timeout: .seconds(30), interval: .milliseconds(100)) {
            problem = probe.check(
                now: .now, publisherActivity: hanging.lastActivity, syncInterval: .milliseconds(20), intake: nil,
                sourceRunning: true)
            return problem != nil
        }
        #expect(problem?.contains("sync loop has not run") == true, "the stall is seen: \(problem ?? "nothing")")
        // Meanwhile the healthy one goes on answering. (Checked as "it answers", not "it was
        // never late": a loaded machine may hold any task back for seconds.)
        try await waitUntil("the healthy publisher to answer", timeout: .seconds(10)) {
            var healthyProbe = PipelineProbe()
            return healthyProbe.check(
                now: .now, publisherActivity: healthy.lastActivity, syncInterval: .milliseconds(20), intake: nil,
                sourceRunning: true) == nil
        }
    }
}

/// What a failing source puts in the log, over time.
@Suite("Source health")
struct SourceHealthTests {
    @Test("one warning when a source starts failing, again at most every 5 minutes, a notice on recovery; a flapping source does not flood")
    func rateLimited() {
        var health = SourceHealth()
        let t0 = ContinuousClock.now
        #expect(health.failed(reason: "gone", at: t0) == .failing(reason: "gone"))
        #expect(health.failed(reason: "gone", at: t0 + .seconds(2)) == nil, "not one per retry")
        #expect(
            health.failed(reason: "gone", at: t0 + .seconds(301)) == .stillFailing(reason: "gone", attempts: 3, duration: .seconds(301)))
        #expect(health.working(at: t0 + .seconds(310)) == .recovered(attempts: 3, duration: .seconds(310)))
        // Brown-outs every 30 s for the next 5 minutes: silent, then one warning and its notice.
        for k in 1...9 {
            let at = t0 + .seconds(310 + 30 * k)
            #expect(health.failed(reason: "brown-out", at: at) == nil)
            #expect(health.working(at: at + .seconds(1)) == nil)
        }
        #expect(health.failed(reason: "brown-out", at: t0 + .seconds(610)) == .failing(reason: "brown-out"))
        #expect(health.working(at: t0 + .seconds(611)) == .recovered(attempts: 1, duration: .seconds(1)))
    }
}
