import FleetProtocol
import FleetcastTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The mistakes a new user makes, as the user sees them: the built agent's own log, at the
/// level it runs with by default, and the retained status a dashboard shows.
@Suite("Problems a user can see")
struct AgentProblemsTests {
    /// Log lines of the given level (`warning`, `error`, …).
    static func lines(_ log: String, level: String) -> [Substring] {
        log.split(separator: "\n").filter { $0.contains(" \(level) fleetcast.agent:") }
    }

    static let fixture = RepositoryPath.of("Tests/NMEATests/Fixtures/gpsd/nmea-rtk.log")

    @Test(
        "a missing serial device: a start-up line, one warning naming the path and the cause (not one per retry), a notice when it is plugged in, and no connection noise"
    )
    func missingSerialDevice() async throws {
        let broker = try await TestBroker.start()
        defer { Task { await broker.shutdown() } }
        let work = try makeTemporaryDirectory(prefix: "agent-serial-missing")
        let device = "\(work)/gnss0"
        let fixes = try await MosquittoCLI.subscribe(broker: broker, filter: "fleet/v1/fix", count: 1, timeoutSeconds: 60)
        let agent = try TestProcess(
            builtProduct("fleetcast-agent"),
            [
                "run", "--source", "serial:\(device)?baud=9600", "--vehicle", "v1",
                "--broker", "mqtt://127.0.0.1:\(broker.port)", "--state-dir", "\(work)/state", "--log-level", "debug",
            ], directory: work, name: "agent", environment: agentEveryFixEnvironment)
        // The source retries with backoff (1 s, 2 s, …): wait for a few of its attempts (each
        // one said at debug).
        try await waitUntil("three attempts to open the device", timeout: .seconds(30), interval: .milliseconds(100)) {
            agent.standardError.components(separatedBy: "Cannot open serial device").count - 1 >= 3
        }
        let log = agent.standardError
        let startup = try #require(
            Self.lines(log, level: "info").first { $0.contains("fleetcast-agent starting") }, "a start-up line: \(log)")
        for part in [
            "vehicle=v1", "gnss.source=serial:\(device)", "mqtt.broker=mqtt://127.0.0.1:\(broker.port)", "mqtt.tls=off",
            "outbox.path=\(work)/state/v1.outbox",
        ] {
            #expect(startup.contains(part), "the start-up line says \(part): \(startup)")
        }
        let warnings = Self.lines(log, level: "warning")
        #expect(warnings.count == 1, "one warning, not one per retry: \(warnings)")
        #expect(warnings.first?.contains("open \(device): No such file or directory") == true)
        #expect(
            !log.split(separator: "\n").contains { $0.contains("send failed") && !$0.contains(" debug ") },
            "no 'not connected' noise at start-up (above debug)")

        // Plugged in: a pseudo-terminal appears at the path, and the receiver talks.
        let feed = "\(work)/feed"
        let socat = try TestProcess(
            "/usr/bin/socat", ["pty,raw,echo=0,link=\(device)", "pty,raw,echo=0,link=\(feed)"], directory: work, name: "socat")
        defer { socat.send(SIGTERM) }
        try await waitUntil("socat's links", timeout: .seconds(10)) { FileManager.default.fileExists(atPath: feed) }
        let nmea = try Data(contentsOf: URL(fileURLWithPath: Self.fixture))
        let writer = try #require(FileHandle(forWritingAtPath: feed))
        var offset = 0
        try await waitUntil("the source to recover", timeout: .seconds(30), interval: .milliseconds(50)) {
            if offset < nmea.count {
                writer.write(nmea.subdata(in: offset..<min(offset + 512, nmea.count)))
                offset += 512
            }
            return agent.standardError.contains("GNSS source working again")
        }
        #expect(await fixes.messages().count == 1, "fixes flow")
        let notice = try #require(Self.lines(agent.standardError, level: "notice").first { $0.contains("GNSS source working again") })
        #expect(notice.contains("gnss.source=serial:\(device)"))
        agent.send(SIGTERM)
        #expect(await agent.waitForExit() == 0)
        #expect(Self.lines(agent.standardError, level: "warning").count == 1, "still one warning")
    }

    @Test("gpsd not running: one warning naming its address")
    func gpsdNotRunning() async throws {
        let broker = try await TestBroker.start()
        defer { Task { await broker.shutdown() } }
        let work = try makeTemporaryDirectory(prefix: "agent-gpsd-missing")
        let port = try FreePort.next()
        let agent = try TestProcess(
            builtProduct("fleetcast-agent"),
            [
                "run", "--source", "gpsd://127.0.0.1:\(port)", "--vehicle", "v1",
                "--broker", "mqtt://127.0.0.1:\(broker.port)", "--state-dir", "\(work)/state", "--log-level", "debug",
            ], directory: work, name: "agent", environment: agentEveryFixEnvironment)
        func attempts() -> Int { agent.standardError.components(separatedBy: "Cannot connect to gpsd").count - 1 }
        try await waitUntil("the warning", timeout: .seconds(10)) { !Self.lines(agent.standardError, level: "warning").isEmpty }
        let atWarning = attempts()
        // More retries (each one said at debug).
        try await waitUntil("two more attempts", timeout: .seconds(30), interval: .milliseconds(100)) { attempts() >= atWarning + 2 }
        let warnings = Self.lines(agent.standardError, level: "warning")
        #expect(warnings.count == 1, "\(warnings)")
        #expect(warnings.first?.contains("127.0.0.1:\(port)") == true && warnings.first?.contains("refused") == true, "\(warnings)")
        agent.send(SIGTERM)
        #expect(await agent.waitForExit() == 0)
    }

    @Test(
        "a broker whose ACL refuses the vehicle's fixes: one error naming the topic and what to check, the refused fixes dropped and counted as rejected, the status still published"
    )
    func refusedByTheACL() async throws {
        // Anonymous clients may write van-2's status and read the fleet, nothing else.
        let broker = try await TestBroker.start(
            .init(
                acl: """
                    topic write fleet/van-2/status
                    topic read fleet/#
                    """))
        defer { Task { await broker.shutdown() } }
        let work = try makeTemporaryDirectory(prefix: "agent-acl")
        let statuses = try await MosquittoCLI.subscribe(broker: broker, filter: "fleet/van-2/status", count: 1000, timeoutSeconds: 60)
        let agent = try TestProcess(
            builtProduct("fleetcast-agent"),
            [
                "run", "--source", "sim:?rate=10", "--vehicle", "van-2",
                "--broker", "mqtt://127.0.0.1:\(broker.port)", "--state-dir", "\(work)/state",
            ], directory: work, name: "agent", environment: agentEveryFixEnvironment)
        // The status (allowed) goes on being published and counts the refusals: nothing waits
        // behind the refused fixes.
        try await waitUntil("a status counting rejected fixes", timeout: .seconds(30), interval: .milliseconds(100)) {
            statuses.messagesSoFar.contains { line in
                let payload = Array(line.dropFirst("fleet/van-2/status ".count).utf8)
                let status = try? FleetPayload.decodeStatus(payload, vehicle: VehicleID("van-2")!)
                return (status?.drops?.rejected ?? 0) >= 10
            }
        }
        // One error per refused topic (the fixes, and the older ones sent as backlog), not one
        // per message.
        let errors = Self.lines(agent.standardError, level: "error")
        let topics = errors.compactMap { $0.split(separator: " ").first { $0.hasPrefix("mqtt.topic=") } }
        #expect(Set(topics).count == topics.count, "not one error per message: \(errors)")
        let error = try #require(errors.first { $0.contains("mqtt.topic=fleet/van-2/fix ") }, "\(errors)")
        #expect(error.contains("fleet/van-2/fix") && error.contains("ACL") && error.contains("van-2"), "\(error)")
        #expect(error.contains("0x87"), "the broker's reason: \(error)")
        agent.send(SIGTERM)
        #expect(await agent.waitForExit() == 0)
    }
}
