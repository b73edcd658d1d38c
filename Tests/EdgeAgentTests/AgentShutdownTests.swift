import FleetcastTestSupport
import Foundation
import Testing

/// SIGTERM stops the built `fleetcast-agent` within a bounded time — drain (`drainTimeout`,
/// 5 s) + `offline` status (5 s) + a margin — even when the broker has gone away, and it
/// still exits 0, says what it could not deliver and persists `seq`.
@Suite("fleetcast-agent stops on SIGTERM when the broker is gone", .serialized)
struct AgentShutdownTests {
    /// Drain and offline timeouts (5 s each) and a margin for a loaded machine.
    static let exitLimit: Duration = .seconds(20)

    /// Starts the agent on the simulator at 10 Hz, tracing (so each hand-over to libmosquitto
    /// is visible in its log), with its state in `directory`.
    static func startAgent(brokerPort: Int, directory: String) throws -> TestProcess {
        try TestProcess(builtProduct("fleetcast-agent"), [
            "run", "--source", "sim:?rate=10", "--vehicle", "v1", "--broker", "mqtt://127.0.0.1:\(brokerPort)",
            "--state-dir", "\(directory)/state", "--log-level", "trace",
        ], directory: directory, name: "agent")
    }

    /// Sends SIGTERM (with `kill(2)`, not through `TestProcess`) and waits for the exit,
    /// SIGKILLing the agent after ``exitLimit`` so a hang fails the test instead of blocking it.
    static func terminate(_ agent: TestProcess) async -> (status: Int32, elapsed: Duration) {
        let clock = ContinuousClock()
        let start = clock.now
        Foundation.kill(agent.pid, SIGTERM)
        let killer = Task { [pid = agent.pid] in
            try await Task.sleep(for: exitLimit)
            Foundation.kill(pid, SIGKILL)
        }
        let status = await agent.waitForExit()
        killer.cancel()
        return (status, clock.now - start)
    }

    /// Waits until the agent has handed one more message to libmosquitto than it had when
    /// called: after the broker went away, that message cannot be acknowledged.
    static func waitForAnotherSend(_ agent: TestProcess) async throws {
        let before = agent.standardError.components(separatedBy: "MQTT publish sent").count
        try await waitUntil("the agent to send another message", timeout: .seconds(10)) {
            agent.standardError.components(separatedBy: "MQTT publish sent").count > before
        }
    }

    /// The persisted next `seq`. The store reserves 1000 numbers ahead while running (the file
    /// says 1001 after the start); a clean close writes the exact next number.
    static func persistedNextSeq(_ directory: String) throws -> Int {
        let text = try String(contentsOfFile: "\(directory)/state/v1.seq", encoding: .utf8)
        return try #require(Int(text.trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    @Test("broker killed, then SIGTERM: exits 0 in bounded time, logs what it could not deliver, persists seq")
    func brokerKilledThenSIGTERM() async throws {
        let broker = try await TestBroker.start()
        let directory = try makeTemporaryDirectory(prefix: "agent-shutdown")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let fixes = try await MosquittoCLI.subscribe(broker: broker, filter: "fleet/v1/fix", count: 5, timeoutSeconds: 20)
        let agent = try Self.startAgent(brokerPort: broker.port, directory: directory)
        #expect(await fixes.messages().count == 5, "agent stderr: \(agent.standardError.suffix(2000))")

        // "send failed" is logged once per outage (there may have been one before the first
        // connection): wait for the next one.
        let outagesBefore = agent.standardError.components(separatedBy: "send failed, retrying").count
        await broker.kill()
        // Once the client sees the loss, the next QoS 0 heading fails (`notConnected`) and goes
        // back to the outbox; the QoS 1 fixes handed over meanwhile wait for PUBACKs that
        // cannot come — the case that used to hang forever.
        try await waitUntil("the agent to see the broker gone", timeout: .seconds(10)) {
            agent.standardError.components(separatedBy: "send failed, retrying").count > outagesBefore
        }
        let (status, elapsed) = await Self.terminate(agent)
        await broker.shutdown()

        let log = agent.standardError
        #expect(status == 0, "exit status after \(elapsed); stderr: \(log.suffix(3000))")
        #expect(elapsed < Self.exitLimit)
        #expect(log.contains("outbox not drained at shutdown") && log.contains("outbox.unsent="), "stderr: \(log.suffix(6000))")
        #expect(log.contains("offline status not sent"))
        #expect(log.contains("agent stopped"))
        let next = try Self.persistedNextSeq(directory)
        #expect(next > 5 && next < 1001, "seq file holds \(next): the exact next number, not the reservation")
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
        try await waitUntil("the agent to connect", timeout: .seconds(10)) { agent.standardError.contains("connected to MQTT broker") }
        Foundation.kill(broker.pid, SIGSTOP)  // the broker stops answering: nothing is acknowledged
        try await Self.waitForAnotherSend(agent)
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
        #expect(agent.standardError.contains("offline status not sent"))
        let next = try Self.persistedNextSeq(directory)
        #expect(next > 1 && next < 1001, "seq file holds \(next)")
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
        let next = try Self.persistedNextSeq(directory)
        #expect(next < 1001, "seq file holds \(next)")
    }
}
