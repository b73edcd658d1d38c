import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import Testing

/// A fix dated 9000 or 9999, numbered in a run of its own date, does not move a vehicle's live
/// position, on `serve` nor on `watch`: the run and the time are judged against the consumer's
/// own clock, not against the time the sender chose. Real mosquitto, the built `fleet-watch`.
@Suite(.serialized) struct ForgedDateTests {
    /// Milliseconds since 1970 of 1 January of `year`, near enough.
    static func year(_ year: Int64) -> Int64 { (year - 1970) * 31_556_952_000 }

    static func fix(_ vehicle: String, seq: UInt64, run: UInt64, time: Int64, lat: Double) -> String {
        String(
            decoding: FleetPayload.encode(
                Fix(time: UTCTimestamp(millisecondsSince1970: time), latitude: lat, longitude: 2.35, speed: 5, mode: .threeD),
                vehicle: vehicle, seq: seq, run: run), as: UTF8.self)
    }

    @Test func aFixDated9000Or9999DoesNotMoveTheLivePositionOnServeOrWatch() async throws {
        try await withBroker { broker in
            let port = try FreePort.next()
            let server = try TestProcess(
                builtProduct("fleet-watch"), ["serve", "--broker", broker.url, "--listen", "127.0.0.1:\(port)", "--tiles", "none"],
                directory: broker.directory, name: "serve-forged")
            let watch = try TestProcess(
                builtProduct("fleet-watch"), ["--broker", broker.url, "--json"], directory: broker.directory, name: "watch-forged")
            defer {
                server.send(SIGKILL)
                watch.send(SIGKILL)
            }
            try await waitUntil("serve and watch to subscribe", timeout: .seconds(20)) {
                for process in [server, watch] where !process.isRunning {
                    throw TestSupportError.processFailed(process.commandLine, status: -1, output: process.standardError)
                }
                return server.standardError.contains("Serving the live map") && watch.standardError.contains("Subscribed to the fleet")
            }
            let now = UTCTimestamp.wallClockNow.millisecondsSince1970
            let run = UInt64(now - 60_000)
            var real: Double = 48.0
            var seq: UInt64 = 1
            for forgedYear in [Int64(9000), 9999] {
                real += 0.01
                try await MosquittoCLI.publish(
                    broker: broker, topic: "fleet/van-9/fix", message: Self.fix("van-9", seq: seq, run: run, time: now, lat: real))
                let forged = Self.year(forgedYear)
                try await MosquittoCLI.publish(
                    broker: broker, topic: "fleet/van-9/fix",
                    message: Self.fix("van-9", seq: 1, run: UInt64(forged), time: forged, lat: 10))
                real += 0.01
                seq += 1
                try await MosquittoCLI.publish(
                    broker: broker, topic: "fleet/van-9/fix", message: Self.fix("van-9", seq: seq, run: run, time: now + 1_000, lat: real))
                seq += 1
                let expected = real
                try await waitUntil("serve to show the later real fix", timeout: .seconds(10), interval: .milliseconds(100)) {
                    let (status, body) = try await FleetMapServeTests.curl(
                        ["http://127.0.0.1:\(port)/api/vehicles"], directory: broker.directory)
                    guard status == 0, let vehicles = try? FleetMapServeTests.vehicles(in: body) else { return false }
                    return vehicles.contains { $0["id"] as? String == "van-9" && abs(($0["lat"] as? Double ?? 0) - expected) < 1e-6 }
                }
            }
            try await waitUntil("watch to print six events", timeout: .seconds(10)) {
                watch.standardOutput.split(separator: "\n").count >= 6
            }
            let objects = try watch.standardOutput.split(separator: "\n").map {
                try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], "\($0)")
            }
            #expect(objects.compactMap { $0["kind"] as? String } == ["fix", "malformed", "fix", "fix", "malformed", "fix"])
            #expect(objects.filter { $0["kind"] as? String == "fix" }.allSatisfy { ($0["lat"] as? Double ?? 0) > 40 })
            #expect(
                objects.filter { $0["kind"] as? String == "malformed" }.allSatisfy {
                    ($0["reason"] as? String ?? "").contains("ahead of this consumer's clock")
                }, "\(watch.standardOutput)")
        }
    }
}
