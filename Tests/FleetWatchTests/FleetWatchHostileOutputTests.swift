import FleetcastTestSupport
import Foundation
import Testing

/// Payloads and topics that carry terminal escape sequences (ESC, BEL, CSI): fleet-watch reports
/// every one and prints none of their control characters raw, in the table, in JSON lines and
/// in plain lines.
@Suite struct FleetWatchHostileOutputTests {
    /// Published retained: a status whose text fields hold escapes (JSON-escaped on the wire,
    /// so they decode to real control characters) and a fix whose duplicate key holds one.
    static func publishHostile(_ broker: TestBroker) async throws {
        try await MosquittoCLI.publish(
            broker: broker, topic: "fleet/van-h/status",
            message:
                #"{"v":1,"vehicle":"van-h","state":"online","agent":"1\u001b]0;pwned\u0007","source":"sim:\u009b31m","reason":"\u001b[2J"}"#,
            retain: true)
        try await MosquittoCLI.publish(
            broker: broker, topic: "fleet/van-h/fix",
            message: #"{"v":1,"time":"2026-01-01T00:00:00Z","lat":1,"lon":2,"mode":3,"\u001b]0;x\u0007":1,"\u001b]0;x\u0007":2}"#,
            retain: true)
        // (mosquitto refuses control characters in topics: a topic cannot carry one.)
    }

    static func assertClean(_ output: String, _ what: String) {
        let bytes = Array(output.utf8)
        #expect(!bytes.contains(0x1B), "\(what): a raw ESC")
        #expect(!bytes.contains(0x07), "\(what): a raw BEL")
        #expect(!zip(bytes, bytes.dropFirst()).contains { $0 == 0xC2 && (0x80...0x9F).contains($1) }, "\(what): a raw C1 control")
    }

    @Test func escapesFromTheWireAreReportedAndNeverPrintedRaw() async throws {
        try await withBroker { broker in
            try await Self.publishHostile(broker)
            let work = broker.directory
            func run(_ arguments: [String]) async throws -> (String, String) {
                let process = try TestProcess(FleetWatchCLITests.executable, arguments, directory: work, name: "fleet-watch-hostile")
                _ = try await process.waitForExit(timeout: .seconds(30))
                return (process.standardOutput, process.standardError)
            }
            let (table, tableErr) = try await run(["--broker", broker.url, "--once", "--quiet-period", "0.3"])
            Self.assertClean(table + tableErr, "the table")
            #expect(table.contains("1 malformed messages"), "the bad message counted: \(table)")
            #expect(table.contains("van-h"), "\(table)")

            let (json, jsonErr) = try await run(["--broker", broker.url, "--once", "--json", "--quiet-period", "0.3"])
            Self.assertClean(json + jsonErr, "JSON lines")
            let lines = json.split(separator: "\n")
            #expect(lines.filter { $0.contains(#""kind":"malformed""#) }.count == 1, "\(json)")
            #expect(
                lines.contains { $0.contains(#""kind":"status""#) && $0.contains(#"\u001b"#) }, "the status, its escapes escaped: \(json)")

            // Plain lines (stdout not a terminal), live: the retained messages arrive first.
            let live = try TestProcess(
                FleetWatchCLITests.executable, ["--broker", broker.url, "--log-level", "trace"], directory: work, name: "fleet-watch-plain")
            try await waitUntil("two plain lines", timeout: .seconds(20)) {
                live.standardOutput.split(separator: "\n").count >= 2
            }
            live.send(SIGTERM)
            _ = try? await live.waitForExit(timeout: .seconds(10))
            Self.assertClean(live.standardOutput + live.standardError, "plain lines and the trace log")
            #expect(live.standardOutput.split(separator: "\n").filter { $0.hasPrefix("malformed ") }.count == 1, "\(live.standardOutput)")
            #expect(live.standardOutput.contains("status van-h online"), "\(live.standardOutput)")
        }
    }
}
