import EdgeOutbox
import FleetProtocol
import FleetcastTestSupport
import Foundation
import Logging
import Testing

/// SIGTERM stops the built `fleetcast-agent` within a bounded time — drain (`drainTimeout`,
/// 5 s) + `offline` status (5 s) + a margin — even when the broker has gone away, and it
/// still exits 0, says what it could not deliver and persists `seq`; and promptly when the
/// receiver is silent (the agent is waiting for its next event, not for the broker).
@Suite("fleetcast-agent stops on SIGTERM in bounded time: broker gone, receiver silent", .serialized)
struct AgentShutdownTests {
    /// Drain and offline timeouts (5 s each) and a margin for a loaded machine.
    static let exitLimit: Duration = .seconds(20)

    /// The live simulator at 10 Hz, and a replay looping at full speed: a lossless intake,
    /// which waits for room in the outbox once the broker is gone, instead of dropping.
    static let sources = [
        "sim:?rate=10",
        "replay:" + RepositoryPath.of("Tests/NMEATests/Fixtures/gpsd/nmea-rtk.log") + "?speed=max&loop=true",
    ]

    /// Starts the agent on `source` (the simulator at 10 Hz by default), with its state in
    /// `directory`. Tracing shows each hand-over to libmosquitto in its log (too much for a
    /// replay at full speed: it logs at debug).
    static func startAgent(source: String = "sim:?rate=10", brokerPort: Int, directory: String) throws -> TestProcess {
        let level = source.hasPrefix("replay:") ? "debug" : "trace"
        return try TestProcess(
            builtProduct("fleetcast-agent"),
            [
                "run", "--source", source, "--vehicle", "v1", "--broker", "mqtt://127.0.0.1:\(brokerPort)",
                "--state-dir", "\(directory)/state", "--log-level", level,
            ], directory: directory, name: "agent", environment: agentEveryFixEnvironment)
    }

    /// Sends SIGTERM (with `kill(2)`, not through `TestProcess`) and waits for the exit,
    /// SIGKILLing the agent after ``exitLimit`` so a hang fails the test instead of blocking it.
    static func terminate(_ agent: TestProcess) async -> (status: Int32, elapsed: Duration) {
        let clock = ContinuousClock()
        let start = clock.now
        Foundation.kill(agent.pid, SIGTERM)
        let status: Int32
        do {
            status = try await agent.waitForExit(timeout: exitLimit)
        } catch is CancellationError {
            status = -1  // as the plain wait returns when cancelled
        } catch {
            Foundation.kill(agent.pid, SIGKILL)
            status = await agent.waitForExit()
        }
        return (status, clock.now - start)
    }

    /// Waits until the agent has handed one more QoS 1 fix to libmosquitto than it had when
    /// called: with the broker frozen, it waits for a PUBACK that cannot come. (A QoS 0
    /// heading would count as done once written to the socket.)
    static func waitForAnotherFixSent(_ agent: TestProcess) async throws {
        func fixesSent() -> Int {
            agent.standardError.split(separator: "\n").count { $0.contains("MQTT publish sent") && $0.contains("mqtt.topic=fleet/v1/fix") }
        }
        let before = fixesSent()
        try await waitUntil("the agent to send another fix", timeout: .seconds(10)) { fixesSent() > before }
    }

    /// Whether the log shows a connection loss after `before`, and a message that cannot be
    /// delivered: a QoS 0 heading that failed (`notConnected`; "send failed" is logged once per
    /// outage) and went back to the outbox, or a message handed to libmosquitto after the loss,
    /// waiting for a PUBACK that cannot come — the case that used to hang forever. A replay at
    /// full speed fills the outbox within milliseconds of the loss: the loss is enough.
    static func lostWithMessageUndelivered(_ log: String, before: String, replay: Bool) -> Bool {
        func count(_ text: String, _ line: String) -> Int { text.components(separatedBy: line).count - 1 }
        guard count(log, "MQTT connection lost") > count(before, "MQTT connection lost") else { return false }
        if replay { return true }
        let afterLoss = log.components(separatedBy: "MQTT connection lost").last ?? ""
        return count(log, "send failed, keeping messages in the outbox") > count(before, "send failed, keeping messages in the outbox")
            || afterLoss.contains("MQTT publish sent")
    }

    /// Checks that `seq` was stored on the way out: a clean stop records the exact next number
    /// in the outbox store (no numbers skipped at the next start) and keeps what was not sent.
    static func expectSeqPersisted(_ directory: String, log: String) async throws {
        let store = await OutboxStore.open(
            directory: "\(directory)/state", vehicle: VehicleID("v1")!, logger: Logger(label: "t") { _ in SwiftLogNoOpLogHandler() })
        #expect(store.degradedReason == nil)
        #expect(store.uncleanSkipped == 0, "a clean stop: the next run continues without a gap")
        #expect(store.nextSeq >= 1, "the store opens cleanly after the stop")
        let line = log.split(separator: "\n").first { $0.contains("backlog kept for the next run") }
        #expect(line == nil || line?.contains("outbox.backlog=\(store.storedCount)") == true, "log line: \(line ?? "none")")
    }

    @Test(
        "broker killed, then SIGTERM: exits 0 in bounded time, logs what it could not deliver, persists seq",
        arguments: sources)
    func brokerKilledThenSIGTERM(source: String) async throws {
        let broker = try await TestBroker.start()
        let directory = try makeTemporaryDirectory(prefix: "agent-shutdown")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let fixes = try await MosquittoCLI.subscribe(broker: broker, filter: "fleet/v1/fix", count: 5, timeoutSeconds: 20)
        let agent = try Self.startAgent(source: source, brokerPort: broker.port, directory: directory)
        #expect(await fixes.messages().count == 5, "agent stderr: \(agent.standardError.suffix(2000))")

        let before = agent.standardError
        await broker.kill()
        try await waitUntil("the agent to see the broker gone with a message undelivered", timeout: .seconds(10)) {
            Self.lostWithMessageUndelivered(agent.standardError, before: before, replay: source.hasPrefix("replay:"))
        }
        let (status, elapsed) = await Self.terminate(agent)
        await broker.shutdown()

        let log = agent.standardError
        #expect(status == 0, "exit status after \(elapsed); stderr: \(log.suffix(3000))")
        #expect(elapsed < Self.exitLimit)
        #expect(log.contains("backlog kept for the next run") && log.contains("outbox.backlog="), "stderr: \(log.suffix(6000))")
        #expect(log.contains("offline status not sent"))
        #expect(log.contains("agent stopped"))
        try await Self.expectSeqPersisted(directory, log: log)
    }

    @Test("SIGTERM while the broker hangs, then the broker is killed during the drain: exits 0 in bounded time")
    func brokerKilledDuringTheDrain() async throws {
        // Our own mosquitto process, so that it can be frozen (SIGSTOP) and then killed.
        let directory = try makeTemporaryDirectory(prefix: "agent-shutdown-drain")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let port = try FreePort.next()
        try "user root\nallow_anonymous true\npersistence false\nlistener \(port) 127.0.0.1\n"
            .write(toFile: "\(directory)/mosquitto.conf", atomically: true, encoding: .utf8)
        let broker = try TestProcess("/usr/sbin/mosquitto", ["-c", "\(directory)/mosquitto.conf"], directory: directory, name: "mosquitto")
        defer { broker.send(SIGKILL) }
        try await waitUntil("mosquitto to listen on \(port)") { FreePort.isAccepting(port) }

        let agent = try Self.startAgent(brokerPort: port, directory: directory)
        try await waitUntil("the agent to connect", timeout: .seconds(10)) { agent.standardError.contains("MQTT connected") }
        Foundation.kill(broker.pid, SIGSTOP)  // the broker stops answering: nothing is acknowledged
        try await Self.waitForAnotherFixSent(agent)
        let termination = Task { await Self.terminate(agent) }
        // The drain now waits for acknowledgements that will never come: kill the broker.
        try await waitUntil("the agent to start its shutdown", timeout: .seconds(5)) {
            agent.standardError.contains("Signal caught. Shutting down the group.") || !agent.isRunning
        }
        broker.send(SIGKILL)
        _ = await broker.waitForExit()
        let (status, elapsed) = await termination.value

        #expect(status == 0, "exit status after \(elapsed); stderr: \(agent.standardError.suffix(3000))")
        #expect(elapsed < Self.exitLimit)
        #expect(agent.standardError.contains("backlog kept for the next run"))
        #expect(agent.standardError.contains("offline status not sent"))
        try await Self.expectSeqPersisted(directory, log: agent.standardError)
    }

    @Test("SIGTERM while still trying the first connection to an unreachable broker: exits 0 in bounded time")
    func sigtermDuringTheFirstConnection() async throws {
        let directory = try makeTemporaryDirectory(prefix: "agent-shutdown-unreachable")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let port = try FreePort.next()  // nothing listens there
        let agent = try Self.startAgent(brokerPort: port, directory: directory)
        try await waitUntil("the agent to retry the broker", timeout: .seconds(10)) {
            agent.standardError.contains("MQTT broker unreachable, retrying")
        }
        let (status, elapsed) = await Self.terminate(agent)
        #expect(status == 0, "exit status after \(elapsed); stderr: \(agent.standardError.suffix(3000))")
        #expect(elapsed < Self.exitLimit)
        #expect(agent.standardError.contains("agent stopped"))
        try await Self.expectSeqPersisted(directory, log: agent.standardError)
    }

    /// The broker link, the publisher and the watchdog are a ServiceGroup stopped in reverse
    /// order: a connection made while the publisher drains must not end the group early (the
    /// publisher cancelled mid-drain, the agent failing).
    @Test("SIGTERM while the broker is unreachable, and it comes back during the drain: offline published, exits 0")
    func brokerBackDuringTheDrain() async throws {
        let directory = try makeTemporaryDirectory(prefix: "agent-shutdown-back")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withBroker { broker in
            await broker.stop()
            let agent = try Self.startAgent(brokerPort: broker.port, directory: directory)
            try await waitUntil("the agent to retry the broker", timeout: .seconds(10)) {
                agent.standardError.contains("MQTT broker unreachable, retrying")
            }
            Foundation.kill(agent.pid, SIGTERM)
            try await broker.restart()
            let status: Int32
            do {
                status = try await agent.waitForExit(timeout: Self.exitLimit)
            } catch {
                Foundation.kill(agent.pid, SIGKILL)
                status = await agent.waitForExit()
            }
            #expect(status == 0, "stderr: \(agent.standardError.suffix(3000))")
            #expect(!agent.standardError.contains("agent failed"))
            #expect(agent.standardError.contains("MQTT broker reachable again"), "the link came back during the stop")
            let last = try await MosquittoCLI.retained(broker: broker, topic: "fleet/v1/status")
            #expect(last?.contains(#""state":"offline""#) == true, "retained status after SIGTERM: \(last ?? "none")")
        }
    }

    /// A receiver that sends nothing (plugged in, no data) leaves the agent waiting for its
    /// next event, not for the broker: SIGTERM must end that wait too.
    @Test("SIGTERM while the receiver is silent: offline published, exits 0 promptly")
    func sigtermWhileTheReceiverIsSilent() async throws {
        let directory = try makeTemporaryDirectory(prefix: "agent-shutdown-silent")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // A pseudo-terminal pair (socat) with nothing written to its far side: the serial
        // source opens `gps` and waits for bytes.
        let device = "\(directory)/gps"
        let socat = try TestProcess(
            "/usr/bin/socat",
            [
                "pty,raw,echo=0,link=\(device)", "pty,raw,echo=0,link=\(directory)/feed",
            ], directory: directory, name: "socat")
        defer { socat.send(SIGKILL, toGroup: true) }
        try await waitUntil("socat's pty links") { FileManager.default.fileExists(atPath: device) }
        try await withBroker { broker in
            let agent = try Self.startAgent(source: "serial:\(device)?baud=9600", brokerPort: broker.port, directory: directory)
            // The retained status is on the broker, not in an event this test could await: poll.
            do {
                try await waitUntil("the online status", timeout: .seconds(15), interval: .milliseconds(100)) {
                    try await MosquittoCLI.retained(broker: broker, topic: "fleet/v1/status", timeoutSeconds: 1)?
                        .contains(#""state":"online""#) == true
                }
            } catch let error as TestSupportError {
                Issue.record("no online status; stderr: \(agent.standardError.suffix(2000))")
                throw error
            }
            let (status, elapsed) = await Self.terminate(agent)
            #expect(status == 0, "exit status after \(elapsed); stderr: \(agent.standardError.suffix(3000))")
            #expect(elapsed < .seconds(5), "nothing to drain: the stop is prompt")
            let last = try await MosquittoCLI.retained(broker: broker, topic: "fleet/v1/status")
            #expect(last?.contains(#""state":"offline""#) == true, "retained status after SIGTERM: \(last ?? "none")")
            // A clean stop closes the outbox: one database file, its write-ahead log
            // checkpointed into it and removed.
            let store = "\(directory)/state/v1.outbox"
            #expect(FileManager.default.fileExists(atPath: store))
            #expect(!FileManager.default.fileExists(atPath: store + "-wal"), "the WAL is checkpointed at a clean stop")
        }
    }
}
