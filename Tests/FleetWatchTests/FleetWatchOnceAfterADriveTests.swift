import FleetcastTestSupport
import Foundation
import Testing

/// `fleet-watch --once` as a user runs it beside a real agent: the built `fleetcast-agent` on
/// `sim:` at its defaults (the default reporting policy, a fix every few seconds while moving), a
/// real mosquitto, and `mosquitto_sub` listening to everything the vehicle sends.
@Suite(.serialized) struct FleetWatchOnceAfterADriveTests {
    @Test("--once after a 25 s drive at the defaults: GAPS 0, no backlog message; after the agent stopped, the fix's real age")
    func onceAfterADrive() async throws {
        try await withBroker { broker in
            let everything = try await MosquittoCLI.subscribe(
                broker: broker, filter: "fleet/v1/#", count: 100_000, timeoutSeconds: 120, extra: MosquittoCLI.hexOutput)
            let state = try makeTemporaryDirectory(prefix: "once-drive")
            let agent = try TestProcess(
                builtProduct("fleetcast-agent"),
                ["run", "--source", "sim:", "--vehicle", "v1", "--broker", broker.url, "--state-dir", state], directory: state,
                name: "agent")
            try await Task.sleep(for: .seconds(25))
            let (status, out, err) = try await run(["--broker", broker.url, "--once", "--quiet-period", "0.3"], in: state)
            #expect(status == 0, "\(err)")
            let row = try #require(Self.row("v1", in: out), "\(out)")
            #expect(row[1] == "online" && row[9] == "0", "online, no gaps: \(row)")

            agent.send(SIGTERM)
            #expect(await agent.waitForExit() == 0)
            let messages = everything.messagesSoFar.compactMap { MosquittoCLI.hexMessage($0) }
            #expect(!messages.contains { $0.topic == "fleet/v1/backlog" }, "nothing failed to go live: \(Set(messages.map(\.topic)))")
            // The first instant is one message: seq 1 on …/fix, with its heading, not split.
            let first = try #require(messages.first { $0.topic == "fleet/v1/fix" || $0.topic == "fleet/v1/heading" })
            let object = (try? JSONSerialization.jsonObject(with: Data(first.payload))) as? [String: Any]
            #expect(
                first.topic == "fleet/v1/fix" && object?["seq"] as? Int == 1 && object?["heading"] != nil, "\(first.topic) \(object ?? [:])"
            )
            await everything.stop()

            // The retained fix, read now and 5 s later: its age is its own time's, and grows.
            try await Task.sleep(for: .seconds(5))
            let (_, later, _) = try await run(["--broker", broker.url, "--once", "--quiet-period", "0.3"], in: state)
            let stopped = try #require(Self.row("v1", in: later), "\(later)")
            let age = Int(stopped[2].dropLast()) ?? -1
            #expect(stopped[1] == "offline" && stopped[2].hasSuffix("s") && age >= 5 && age < 60, "the fix's own age: \(stopped)")
        }
    }

    static func row(_ vehicle: String, in table: String) -> [String]? {
        table.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }.first { $0.first == vehicle }
    }

    func run(_ arguments: [String], in directory: String) async throws -> (Int32, String, String) {
        let process = try TestProcess(
            FleetWatchCLITests.executable, arguments, directory: directory, name: "fleet-watch-\(UUID().uuidString)")
        let status = try await withTimeout(.seconds(30), "fleet-watch to exit") { await process.waitForExit() }
        return (status, process.standardOutput, process.standardError)
    }
}
