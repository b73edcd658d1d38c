import FleetcastTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A TLS handshake cut short is the network's doing (a proxy, a load balancer, a captive portal
/// that takes the connection and closes it): the built agent retries it, names it once, and
/// publishes when the real broker answers on that port.
@Suite("TLS handshakes cut short")
struct AgentTLSCutTests {
    @Test("five TLS handshakes cut short in a row, then the real broker on that port: the agent is still running and a fix arrives")
    func handshakesCutShortAreRetried() async throws {
        let broker = try await TestBroker.start(.init(tls: true))
        defer { Task { await broker.shutdown() } }
        let ca = try #require(broker.certificates?.caFile)
        let work = try makeTemporaryDirectory(prefix: "agent-tls-cut")
        let port = try FreePort.next()
        // Takes every connection and closes it at once, mid-handshake; logs each one it takes.
        let cutter = try TestProcess(
            "/usr/bin/socat", ["-d", "-d", "TCP-LISTEN:\(port),bind=127.0.0.1,reuseaddr,fork", "EXEC:/bin/true"], directory: work,
            name: "cutter")
        try await waitUntil("the cutter to listen") { FreePort.isAccepting(port) }
        let agent = try TestProcess(
            builtProduct("fleetcast-agent"),
            [
                "run", "--source", "sim:?rate=10", "--vehicle", "v-tls", "--broker", "mqtts://localhost:\(port)", "--ca-file", ca,
                "--state-dir", "\(work)/state",
            ], directory: work, name: "agent", environment: agentEveryFixEnvironment)
        // Five handshakes cut (the first connection taken was the probe above), with the
        // reconnect delay growing between them, and the agent has said so.
        try await waitUntil("five handshakes cut", timeout: .seconds(60), interval: .milliseconds(100)) {
            cutter.standardError.components(separatedBy: "accepting connection from").count - 1 >= 6
                && agent.standardError.contains("MQTT broker unreachable")
        }
        #expect(agent.isRunning, "a cut handshake is retried, not fatal: \(agent.standardError)")
        cutter.send(SIGKILL, toGroup: true)
        _ = try await cutter.waitForExit(timeout: .seconds(10))
        let proxy = try await TCPProxy(port: port, to: broker.port)
        defer { Task { await proxy.kill() } }
        try await waitUntil("a fix from the agent at the broker", timeout: .seconds(60)) {
            broker.log.contains("Received PUBLISH from v-tls") && broker.log.contains("fleet/v-tls/fix")
        }
        #expect(agent.isRunning)
        let log = agent.standardError
        let warnings = log.split(separator: "\n").filter { $0.contains("MQTT broker unreachable") && !$0.contains(" debug ") }
        #expect(warnings.count == 1, "named once, not in a flood: \(warnings)")
        #expect(!log.contains("agent failed"), "\(log)")
        agent.send(SIGTERM)
        #expect(try await agent.waitForExit(timeout: .seconds(20)) == 0)
    }
}
