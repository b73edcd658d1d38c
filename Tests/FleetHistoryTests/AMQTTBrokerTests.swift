import FleetcastTestSupport
import Foundation
import Testing

/// The fleet on amqtt, a broker people run that speaks MQTT 3.1.1 only and answers an MQTT 5
/// CONNECT by closing the connection, without a CONNACK, after 10 s. A real amqtt (PyPI,
/// pinned, installed by the test command), a built agent, `fleet-watch record` and PostgreSQL.
@Suite(.enabled(if: TestAMQTT.isInstalled, "amqtt is installed by the README's test command (deploy/test.sh)"))
struct AMQTTBrokerTests {
    /// With no protocol setting anywhere: the agent and the recorder take the close for what it
    /// is, say so once and connect with 3.1.1; a drive at 10 Hz is recorded whole and `gaps`
    /// proves it. Before, both retried MQTT 5 for ever ("The connection was lost").
    @Test func theAgentAndTheRecorderConnectToAMQTTAtTheDefaults() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-amqtt-defaults")
        defer { directory.remove() }
        let amqtt = try await TestAMQTT.start()
        do {
            try await withPostgres { postgres in
                let database = try await postgres.createDatabase()
                let recorder = try NATSBrokerTests.startRecorder(
                    "recorder-amqtt", brokers: [amqtt.url], postgres: postgres, database: database, directory: directory)
                // Subscribed first: before its first subscription the broker keeps nothing for it.
                try await FleetRecorderDurabilityTests.waitForLog(recorder, "Subscribed to the fleet", timeout: .seconds(60))
                let agent = try NATSBrokerTests.startAgent("van-a", brokers: [amqtt.url], directory: directory)
                try await waitUntil("the agent connected", timeout: .seconds(60)) { agent.standardError.contains("MQTT connected") }
                try await Task.sleep(for: .seconds(5))
                agent.send(SIGTERM)
                #expect(try await agent.waitForExit(timeout: .seconds(30)) == 0, "\(agent.standardError)")
                let fallback = "closed the connection before answering an MQTT 5 CONNECT and accepted MQTT 3.1.1"
                #expect(agent.standardError.components(separatedBy: fallback).count == 2, "said once: \(agent.standardError)")
                #expect(recorder.standardError.contains(fallback), "\(recorder.standardError)")
                #expect(!agent.standardError.contains("MQTT broker unreachable"), "\(agent.standardError)")

                let last = try await NATSBrokerTests.lastRetainedSeq("van-a", port: amqtt.port, directory: directory)
                #expect(last >= 40, "5 s at 10 Hz after connecting, and what waited before: \(last) messages")
                _ = try await NATSBrokerTests.expectWhole("van-a", last: last, postgres: postgres, database: database)
                let gaps = try await FleetRecorderDurabilityTests.gaps(postgres, database, directory: directory)
                #expect(gaps.status == 0, "\(gaps.output)")
                recorder.send(SIGTERM)
                #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0, "\(recorder.standardError)")
            }
        } catch {
            Issue.record("amqtt log:\n\(amqtt.log.suffix(3000))")
            await amqtt.shutdown()
            throw error
        }
        await amqtt.shutdown()
    }
}
