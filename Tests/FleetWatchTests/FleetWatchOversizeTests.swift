import FleetcastTestSupport
import Foundation
import Testing

/// A retained 60 MB message on a fleet topic: fleet-watch announces its maximum packet size, so
/// the broker never sends it; the good vehicle is shown and memory stays small.
@Suite struct FleetWatchOversizeTests {
    @Test func aRetained60MBMessageIsNeverReceivedAndTheGoodVehicleIsShown() async throws {
        try await withBroker { broker in
            let work = broker.directory
            try await MosquittoCLI.publish(
                broker: broker, topic: "fleet/van-ok/fix",
                message: #"{"v":1,"vehicle":"van-ok","seq":1,"time":"2026-01-02T03:04:05.000Z","lat":48.5,"lon":-3.25,"mode":3}"#,
                retain: true)
            let huge = "\(work)/huge.json"
            FileManager.default.createFile(atPath: huge, contents: Data(repeating: UInt8(ascii: "x"), count: 60 << 20))
            let publisher = try TestProcess(
                "/usr/bin/mosquitto_pub",
                ["-h", "127.0.0.1", "-p", "\(broker.port)", "-t", "fleet/van-big/fix", "-f", huge, "-r", "-q", "1"],
                directory: work, name: "huge")
            #expect(try await publisher.waitForExit(timeout: .seconds(60)) == 0, "\(publisher.standardError)")
            // GNU time prints the peak resident set (KiB) of the process it runs.
            let watch = try TestProcess(
                "/usr/bin/time",
                ["-f", "peak-rss-kib %M", FleetWatchCLITests.executable, "--broker", broker.url, "--once", "--quiet-period", "0.5"],
                directory: work, name: "fleet-watch-once")
            #expect(try await watch.waitForExit(timeout: .seconds(60)) == 0, "\(watch.standardError)")
            #expect(watch.standardOutput.contains("van-ok"), "\(watch.standardOutput)")
            #expect(!watch.standardOutput.contains("van-big"), "\(watch.standardOutput)")
            let peak = watch.standardError.split(separator: "\n").last { $0.hasPrefix("peak-rss-kib ") }
                .flatMap { Int($0.split(separator: " ")[1]) }
            let kib = try #require(peak, "\(watch.standardError)")
            #expect(kib <= 64 * 1024, "peak RSS \(kib) KiB")
        }
    }
}
