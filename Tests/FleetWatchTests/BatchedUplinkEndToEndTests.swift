import FleetProtocol
import FleetcastTestSupport
import Foundation
import Testing

/// A vehicle on a metered link (`uplink.batch`) as the fleet sees it: the built agent batching
/// to a real mosquitto, the built fleet-watch reading the fleet, and `mosquitto_sub` (a client we
/// did not write) seeing what went over the broker.
@Suite("A batching agent, as fleet-watch shows it")
struct BatchedUplinkEndToEndTests {
    @Test(
        "an agent batching every 2 s at 10 Hz: fleet-watch --json shows every fix and heading as live ones, in order, none lost; only batches and statuses went over the broker, the batches retained"
    )
    func fleetWatchShowsEveryBatchedFix() async throws {
        let broker = try await TestBroker.start()
        defer { Task { await broker.shutdown() } }
        let work = try makeTemporaryDirectory(prefix: "batched-e2e")
        let raw = try await MosquittoCLI.subscribe(
            broker: broker, filter: "fleet/v1/+", count: 1_000_000, timeoutSeconds: 90, extra: MosquittoCLI.hexOutput)
        let watch = try TestProcess(
            builtProduct("fleet-watch"), ["--broker", "mqtt://127.0.0.1:\(broker.port)", "--json", "--log-level", "debug"],
            directory: work, name: "fleet-watch")
        defer { watch.send(SIGKILL) }
        try await waitUntil("fleet-watch to subscribe", timeout: .seconds(20)) {
            watch.standardError.contains("Subscribed to the fleet")
        }
        let agent = try TestProcess(
            builtProduct("fleetcast-agent"),
            [
                "run", "--source", "sim:?rate=10", "--vehicle", "v1", "--broker", "mqtt://127.0.0.1:\(broker.port)",
                "--state-dir", work,
            ], directory: work, name: "agent",
            environment: agentEveryFixEnvironment.merging(["FLEETCAST_UPLINK_BATCH": "2"]) { $1 })
        // 5 s at 10 Hz, one event an instant, shown by fleet-watch: two windows' batches and more.
        try await waitUntil("fleet-watch to show 50 events", timeout: .seconds(60), interval: .milliseconds(100)) {
            watch.standardOutput.split(separator: "\n").count { line in
                let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
                return ["fix", "heading"].contains(object?["kind"] as? String)
            } >= 50
        }
        agent.send(SIGTERM)
        #expect(await agent.waitForExit() == 0, "\(agent.standardError)")
        // The offline status follows the last batch, which a clean stop sends.
        try await waitUntil("fleet-watch to show the offline status", timeout: .seconds(20)) {
            watch.standardOutput.contains(#""state":"offline""#)
        }
        let lines = try watch.standardOutput.split(separator: "\n").map {
            try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], "\($0)")
        }
        let events = lines.filter { ["fix", "heading"].contains($0["kind"] as? String) }
        let seqs = events.compactMap { ($0["seq"] as? NSNumber)?.intValue }
        #expect(seqs.count >= 50, "5 s at 10 Hz and more, one event an instant: \(seqs.count) events")
        // After the first instant, which teaches the agent that the simulator pairs them, each
        // fix carries its instant's heading.
        let fixes = events.filter { $0["kind"] as? String == "fix" }
        #expect(fixes.filter { $0["heading"] != nil }.count >= fixes.count - 2, "fixes carry their heading")
        #expect(seqs == Array(1...max(1, seqs.count)), "every event, in order: \(seqs.prefix(30))…")
        #expect(events.allSatisfy { $0["backlog"] == nil && $0["vehicle"] as? String == "v1" })
        #expect(!lines.contains { $0["kind"] as? String == "malformed" })

        await raw.stop()
        let messages = raw.messagesSoFar.compactMap { MosquittoCLI.hexMessage($0) }
        #expect(Set(messages.map(\.topic)) == ["fleet/v1/batch", "fleet/v1/status"], "\(Set(messages.map(\.topic)))")
        // Compact (the default encoding); besides the start's and the stop's, each batch holds
        // 2 s of events: 20 (at least half of that on a loaded machine).
        let batches = messages.filter { $0.topic == "fleet/v1/batch" }
        #expect(batches.allSatisfy { $0.payload.first == 0xFC }, "compact batches")
        #expect((batches.count - 2) * 10 <= seqs.count, "\(seqs.count) events in \(batches.count) batches")
        let retained = try #require(
            try await MosquittoCLI.retained(broker: broker, topic: "fleet/v1/batch", extra: MosquittoCLI.hexOutput).flatMap {
                MosquittoCLI.hexMessage($0)
            })
        let newest = try FleetPayload.decodeBatch(retained.payload, vehicle: VehicleID("v1")!).events.last?.seq
        #expect(newest == UInt64(seqs.count), "the retained batch holds the newest event")
    }
}
