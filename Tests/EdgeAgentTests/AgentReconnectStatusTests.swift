import FleetcastTestSupport
import Foundation
import Testing

/// The retained status after the faults a vehicle's link meets: the built agent on `sim:`, a
/// real mosquitto with persistence on, the link through a TCP proxy that the test kills (a cut:
/// the broker publishes the last will, `offline`), then a broker restart. After each the agent
/// reconnects by itself, and the retained status must say `online` again, since the new
/// connection, within 5 s of it: what Home Assistant and every reader of the status believe.
@Suite("Agent status after a reconnect", .serialized)
struct AgentReconnectStatusTests {
    /// The retained status of `v1` as JSON, if any.
    static func retainedStatus(_ broker: TestBroker) async throws -> [String: Any]? {
        guard let line = try await MosquittoCLI.retained(broker: broker, topic: "fleet/v1/status", timeoutSeconds: 2),
            let space = line.firstIndex(of: " ")
        else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(line[line.index(after: space)...].utf8))) as? [String: Any]
    }

    /// Connections the broker accepted from the agent (client id `v1`) so far, by its log.
    static func agentConnections(_ broker: TestBroker) -> Int {
        broker.log.split(separator: "\n").filter { $0.contains("New client connected") && $0.contains(" as v1 ") }.count
    }

    /// Waits for the agent's next connection after `connections`, then for the retained status to
    /// be `online` with a `since` not in `earlier`; returns how long that took after the
    /// connection, and the status's `since`.
    static func onlineAfterReconnect(
        _ broker: TestBroker, after connections: Int, earlier: Set<String>
    ) async throws -> (Duration, String) {
        try await waitUntil("the agent to reconnect", timeout: .seconds(30), interval: .milliseconds(20)) {
            agentConnections(broker) > connections
        }
        let reconnected = ContinuousClock.now
        var since = ""
        try await waitUntil("the retained status to be online again", timeout: .seconds(30), interval: .milliseconds(50)) {
            guard let status = try await retainedStatus(broker), status["state"] as? String == "online",
                let value = status["since"] as? String, !earlier.contains(value)
            else { return false }
            since = value
            return true
        }
        return (ContinuousClock.now - reconnected, since)
    }

    @Test("after a link cut and after a broker restart, the retained status is online, since the new connection, within 5 s")
    func onlineAfterCutAndRestart() async throws {
        let broker = try await TestBroker.start(tls: false) { port, directory in
            """
            user root
            persistence true
            persistence_location \(directory)/
            log_dest stderr
            log_type all
            listener \(port) 127.0.0.1
            allow_anonymous true

            """
        }
        defer { Task { await broker.shutdown() } }
        var proxy = try await TCPProxy(to: broker.port)
        let port = proxy.port
        let state = try makeTemporaryDirectory(prefix: "agent-reconnect")
        let agent = try TestProcess(
            builtProduct("fleetcast-agent"),
            [
                "run", "--source", "sim:?rate=10", "--vehicle", "v1", "--broker", "mqtt://127.0.0.1:\(port)",
                "--state-dir", state,
            ], directory: state, name: "agent")
        var seen: Set<String> = []
        try await waitUntil("the agent online", timeout: .seconds(20), interval: .milliseconds(50)) {
            guard let status = try await Self.retainedStatus(broker), status["state"] as? String == "online",
                let since = status["since"] as? String
            else { return false }
            seen.insert(since)
            return true
        }

        // The link is cut: the broker sees the connection drop and publishes the last will.
        var connections = Self.agentConnections(broker)
        await proxy.kill()
        try await waitUntil("the last will", timeout: .seconds(20), interval: .milliseconds(50)) {
            try await Self.retainedStatus(broker)?["state"] as? String == "offline"
        }
        proxy = try await TCPProxy(port: port, to: broker.port)
        let (afterCut, cutSince) = try await Self.onlineAfterReconnect(broker, after: connections, earlier: seen)
        seen.insert(cutSince)
        #expect(afterCut < .seconds(5), "online \(afterCut) after the reconnect that followed the cut")

        // The broker restarts (persistence on: the retained messages survive it).
        connections = Self.agentConnections(broker)
        try await broker.restart()
        let (afterRestart, _) = try await Self.onlineAfterReconnect(broker, after: connections, earlier: seen)
        #expect(afterRestart < .seconds(5), "online \(afterRestart) after the reconnect that followed the restart")

        agent.send(SIGTERM)
        #expect(await agent.waitForExit() == 0)
        #expect(try await Self.retainedStatus(broker)?["state"] as? String == "offline", "a clean stop still ends offline")
    }
}
