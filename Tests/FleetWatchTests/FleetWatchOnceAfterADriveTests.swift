import FleetcastTestSupport
import Foundation
import GNSS
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
            // 25 s of driving: until a fix 25 s after the first has arrived.
            try await waitUntil("25 s of driving", timeout: .seconds(60), interval: .milliseconds(250)) {
                let times = Self.fixTimes(everything.messagesSoFar)
                return times.count >= 2 && times.last! - times.first! >= 25_000
            }
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
            let lastFix = Self.fixTimes(everything.messagesSoFar).last
            await everything.stop()

            // After the stop: the retained fix's age is its own time's (the default policy sends a
            // fix every few seconds, so it is seconds old, not 0).
            let last = try #require(lastFix, "a fix arrived")
            let (_, later, _) = try await run(["--broker", broker.url, "--once", "--quiet-period", "0.3"], in: state)
            let real = (UTCTimestamp.wallClockNow.millisecondsSince1970 - last) / 1000
            let stopped = try #require(Self.row("v1", in: later), "\(later)")
            let age = Int(stopped[2].dropLast()) ?? -1
            #expect(
                stopped[1] == "offline" && stopped[2].hasSuffix("s") && abs(age - Int(real)) <= 2, "the fix's age is \(real) s: \(stopped)")
        }
    }

    /// The times (ms since 1970) of the fixes among `lines` (``MosquittoCLI/hexOutput``).
    static func fixTimes(_ lines: [String]) -> [Int64] {
        lines.compactMap { MosquittoCLI.hexMessage($0) }.filter { $0.topic == "fleet/v1/fix" }.compactMap { message in
            let object = (try? JSONSerialization.jsonObject(with: Data(message.payload))) as? [String: Any]
            return (object?["time"] as? String).flatMap { UTCTimestamp(iso8601: $0)?.millisecondsSince1970 }
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
